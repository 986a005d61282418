"""The exploration wrappers: a policy followed by an exploration module (``EGreedyWrapper``,
``AdditiveGaussianWrapper``, ``OrnsteinUhlenbeckProcessWrapper``), the seed-era spelling of
``TensorDictSequential(policy, module)``; the spec is taken from the policy when it has one.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModuleBase

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import TensorSpec
from torchrl_lite.modules.tensordict_module._exploration_modules import (
    AdditiveGaussianModule,
    EGreedyModule,
    OrnsteinUhlenbeckProcessModule,
    _action_spec,
)
from torchrl_lite.modules.tensordict_module.common import SafeSequential

__all__ = ["EGreedyWrapper", "AdditiveGaussianWrapper", "OrnsteinUhlenbeckProcessWrapper"]


class _ExplorationWrapper(SafeSequential):
    """A policy followed by an exploration module; ``step`` anneals the module."""

    def __init__(self, policy, explorer):
        if not isinstance(policy, TensorDictModuleBase):
            raise TypeError(
                f"{type(self).__name__}: policy must be a TensorDict module writing the "
                f"action, got {type(policy).__name__}."
            )
        super().__init__(policy, explorer)

    @property
    def td_module(self):
        """The wrapped policy."""
        return self.module[0]

    @property
    def explorer(self):
        """The exploration module."""
        return self.module[1]

    def step(self, frames: int = 1) -> None:
        """Anneal the exploration scale by ``frames`` frames."""
        self.module[1].step(frames)


def _spec_of(policy, spec, action_key, owner: str) -> TensorSpec:
    if spec is None:
        spec = getattr(policy, "spec", None)
    return _action_spec(spec, action_key, owner)


class EGreedyWrapper(_ExplorationWrapper):
    """A policy followed by an ``EGreedyModule`` (see there for the behaviour).

    Args:
        policy: a TensorDict module writing ``action_key``.
        eps_init: initial probability of a random action.
        eps_end: final probability.
        annealing_num_steps: frames over which eps is annealed.
        action_key: the action entry.
        spec: the action spec; defaults to ``policy.spec`` (``ValueError`` if neither).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import OneHot
        >>> from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
        >>> from torchrl_lite.modules import QValueActor
        >>> policy = EGreedyWrapper(QValueActor(torch.nn.Linear(4, 2), spec=OneHot(2)))
        >>> td = TensorDict(observation=torch.zeros(3, 4), batch_size=[3])
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     td = policy(td)  # epsilon-greedy
        >>> policy.step(100)
    """

    def __init__(
        self,
        policy,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        action_key=K.ACTION,
        spec=None,
    ):
        spec = _spec_of(policy, spec, action_key, "EGreedyWrapper")
        explorer = EGreedyModule(
            spec, eps_init, eps_end, annealing_num_steps, action_key=action_key
        )
        super().__init__(policy, explorer)

    @property
    def eps(self) -> torch.Tensor:
        return self.module[1].eps


class AdditiveGaussianWrapper(_ExplorationWrapper):
    """A policy followed by an ``AdditiveGaussianModule`` (see there for the behaviour).

    Args:
        policy: a TensorDict module writing ``action_key``.
        sigma_init: initial noise scale.
        sigma_end: final noise scale.
        annealing_num_steps: frames over which sigma is annealed.
        mean: mean of the unscaled noise.
        std: standard deviation of the unscaled noise.
        action_key: the action entry.
        spec: the action spec; defaults to ``policy.spec``.
        safe: clip the noisy action into the spec.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import Actor
        >>> actor = Actor(torch.nn.Linear(3, 1), spec=Bounded(-1.0, 1.0, shape=(1,)))
        >>> policy = AdditiveGaussianWrapper(actor, sigma_init=0.5)
        >>> policy(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        policy,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        action_key=K.ACTION,
        spec=None,
        safe: bool = True,
    ):
        spec = _spec_of(policy, spec, action_key, "AdditiveGaussianWrapper")
        explorer = AdditiveGaussianModule(
            spec,
            sigma_init,
            sigma_end,
            annealing_num_steps,
            mean,
            std,
            action_key=action_key,
            safe=safe,
        )
        super().__init__(policy, explorer)

    @property
    def sigma(self) -> torch.Tensor:
        return self.module[1].sigma


class OrnsteinUhlenbeckProcessWrapper(_ExplorationWrapper):
    """A policy followed by an ``OrnsteinUhlenbeckProcessModule`` (see there).

    Args:
        policy: a TensorDict module writing ``action_key``.
        eps_init: initial scale of the noise added.
        eps_end: final scale.
        annealing_num_steps: frames over which eps is annealed.
        theta: mean-reversion rate.
        mu: long-run mean.
        sigma: diffusion scale.
        dt: time step.
        x0: initial noise.
        sigma_min: if set, sigma is annealed down to it per trajectory.
        n_steps_annealing: trajectory steps over which sigma reaches ``sigma_min``.
        action_key: the action entry.
        is_init_key: bool entry, True on the first step after a reset.
        spec: the action spec; defaults to ``policy.spec``.
        safe: clip the noisy action into the spec.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import Actor
        >>> actor = Actor(torch.nn.Linear(3, 1), spec=Bounded(-1.0, 1.0, shape=(1,)))
        >>> policy = OrnsteinUhlenbeckProcessWrapper(actor)
        >>> "_ou_prev_noise" in policy(TensorDict(observation=torch.zeros(3)))
        True
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        policy,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0=None,
        sigma_min: float | None = None,
        n_steps_annealing: int = 1000,
        action_key=K.ACTION,
        is_init_key=K.IS_INIT,
        spec=None,
        safe: bool = True,
    ):
        spec = _spec_of(policy, spec, action_key, "OrnsteinUhlenbeckProcessWrapper")
        explorer = OrnsteinUhlenbeckProcessModule(
            spec,
            eps_init,
            eps_end,
            annealing_num_steps,
            theta,
            mu,
            sigma,
            dt,
            x0,
            sigma_min,
            n_steps_annealing,
            action_key=action_key,
            is_init_key=is_init_key,
            safe=safe,
        )
        super().__init__(policy, explorer)

    @property
    def eps(self) -> torch.Tensor:
        return self.module[1].eps
