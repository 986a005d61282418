"""Seed 000's ``OnPolicyActor``: a policy and a value network (PPO, A2C), with the seed's
``get_action`` on plain tensors and ``create_factory`` for the Scheme's workers."""

from __future__ import annotations

import gymnasium
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.agent.actors._common import (
    ActorFactory,
    check_recurrent,
    policy_action,
)
from torchrl_lite.agent.actors.feature_extractors import MLP
from torchrl_lite.agent.normalization import RunningNorm
from torchrl_lite.modules import (
    ClippedProbabilisticActor,
    GSDEHead,
    GSDENormal,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)
from torchrl_lite.recipes.ppo import StateIndependentScale

__all__ = ["OnPolicyActor"]


def _network(extractor: nn.Module, out_features: int, *tail: nn.Module) -> nn.Module:
    return nn.Sequential(extractor, nn.Linear(extractor.num_outputs, out_features), *tail)


class _Features(nn.Module):
    """Calls an extractor on its entries (``forward(*tensors)``) and keeps its attributes;
    with ``norm`` (a ``RunningNorm``), the one observation is normalised first."""

    def __init__(self, extractor: nn.Module, norm: nn.Module | None = None):
        super().__init__()
        self.extractor = extractor
        self.num_outputs = extractor.num_outputs
        if norm is not None:
            self.norm = norm

    def forward(self, *entries):
        if hasattr(self, "norm"):
            entries = (self.norm(entries[0]),)
        return self.extractor(*entries)


class _GSDENet(nn.Module):
    """Features -> ``GSDEHead`` -> ``(loc, scale, noise)`` (``is_init`` passed on if read)."""

    def __init__(self, features: nn.Module, head: GSDEHead):
        super().__init__()
        self.features, self.head = features, head

    def forward(self, *entries):
        if len(entries) > len(self.features.extractor.in_keys):  # the last one: is_init
            *entries, is_init = entries
            return self.head(self.features(*entries), is_init)
        return self.head(self.features(*entries))


def _check_box_options(action_space, use_sde, squash_output) -> bool:
    """The ``squash_output`` in effect (True: TanhNormal; False: Normal + clip)."""
    if squash_output is None:
        squash_output = not use_sde
    if use_sde and squash_output:
        raise ValueError(
            "OnPolicyActor: use_sde=True takes an unsquashed Gaussian whose samples are "
            "clipped to the action bounds (rl-zoo's setting); got squash_output=True. Use "
            "squash_output=False (or leave it unset)."
        )
    if (use_sde or not squash_output) and not isinstance(action_space, gymnasium.spaces.Box):
        raise ValueError(
            f"OnPolicyActor: use_sde / squash_output=False need a Box action space, got "
            f"{action_space!r}."
        )
    return bool(squash_output)


def _box_policy(features: _Features, in_keys, action_space, log_std_init, squash, sde):
    """The Box-action policy (see ``OnPolicyActor``): gSDE's clipped Gaussian (``sde`` is
    ``(sample_freq, reset_on_episode_start)``), a clipped Normal (``squash=False``) or a
    TanhNormal, the last two with a state-independent log-std."""
    act_dim = int(action_space.shape[-1])
    low = torch.tensor(action_space.low, dtype=torch.float32)
    high = torch.tensor(action_space.high, dtype=torch.float32)
    if sde is not None:
        freq, at_start = sde
        head = GSDEHead(features.num_outputs, act_dim, log_std_init, freq)
        sde_in = [*in_keys, K.IS_INIT] if at_start else in_keys
        return ClippedProbabilisticActor(
            TensorDictModule(_GSDENet(features, head), in_keys=sde_in,
                             out_keys=["loc", "scale", "sde_noise"]),
            in_keys={"loc": "loc", "scale": "scale", "noise": "sde_noise"},
            low=low, high=high, distribution_class=GSDENormal, return_log_prob=True,
        )  # fmt: skip
    net = _network(features, act_dim, StateIndependentScale(act_dim, log_std_init))
    module = TensorDictModule(net, in_keys=in_keys, out_keys=["loc", "scale"])
    if not squash:
        return ClippedProbabilisticActor(
            module, in_keys=["loc", "scale"], low=low, high=high,
            distribution_class=IndependentNormal, return_log_prob=True,
        )  # fmt: skip
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": low, "high": high},
        return_log_prob=True,
    )


class OnPolicyActor(nn.Module):
    """A policy (``actor.policy``) and a critic (``actor.value``, writing ``"state_value"``),
    each with its own feature extractor.

    Box actions: a tanh-squashed Normal with a state-independent log-std (with the default
    ``MLP`` extractor, the PPO recipe's networks); with ``squash_output=False`` or
    ``use_sde`` (gSDE's ``GSDEHead`` / ``GSDENormal``), a Normal clipped to the bounds for
    the env by a ``ClippedProbabilisticActor``, which also writes the raw sample, the one
    ``PPO`` scores, at ``"raw_action"``. Discrete actions: a one-hot categorical. The
    policy writes ``"action"`` and ``"sample_log_prob"``.

    Args:
        obs_space, action_space: gymnasium spaces of one env.
        feature_extractor_network: an extractor class (``get_feature_extractor(name)``).
        feature_extractor_kwargs: its keyword arguments (e.g. ``hidden_sizes``).
        recurrent_nets: must be False (see ``check_recurrent``).
        policy, value: ready-made networks instead (used by ``factories_from_recipe``).
        normalize_obs: standardise Box observations with a ``RunningNorm`` in each network
            (updated once per round; saved with the weights, so evaluation uses them).
        log_std_init: the Box policy's initial log-std (0), or each gSDE ``log_sigma`` entry.
        use_sde: generalized state-dependent exploration (Box actions; ``GSDEHead``).
        sde_sample_freq: steps between draws of gSDE's noise (``<= 0``: once per collection).
        sde_reset_on_episode_start: also draw new noise where an episode starts (reads
            ``"is_init"``; turns off the collector's numpy fast path).
        squash_output: TanhNormal (True, the default without gSDE) or a clipped Normal.

    Example:
        >>> obs_space = gymnasium.spaces.Box(-1, 1, (3,))
        >>> action_space = gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OnPolicyActor.create_factory(obs_space, action_space)("cpu")
        >>> obs, rhs, done = torch.zeros(4, 3), torch.zeros(4, 1), torch.zeros(4, 1)
        >>> action, clipped, logp, rhs, entropy = actor.get_action(obs, rhs, done)
        >>> action.shape, logp.shape, actor.recurrent_hidden_state_size
        (torch.Size([4, 1]), torch.Size([4, 1]), 1)
    """

    def __init__(  # noqa: PLR0913 (seed 000's signature)
        self,
        obs_space,
        action_space,
        feature_extractor_network=MLP,
        feature_extractor_kwargs: dict | None = None,
        recurrent_nets: bool = False,
        policy: nn.Module | None = None,
        value: nn.Module | None = None,
        normalize_obs: bool = False,
        log_std_init: float = 0.0,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        sde_reset_on_episode_start: bool = False,
        squash_output: bool | None = None,
    ):
        super().__init__()
        check_recurrent(recurrent_nets)
        squash = _check_box_options(action_space, use_sde, squash_output)
        self.use_sde = bool(use_sde)
        self.obs_space, self.action_space = obs_space, action_space
        self.normalize_obs = bool(normalize_obs)
        if self.normalize_obs and (
            policy is not None or not isinstance(obs_space, gymnasium.spaces.Box)
        ):
            raise ValueError(
                f"normalize_obs=True needs a Box observation space and the actor's own "
                f"networks (policy=None), got {obs_space!r}"
                f"{' and ready-made networks' if policy is not None else ''}."
            )
        if policy is None:
            policy, value = self._build(obs_space, action_space, feature_extractor_network,
                                        feature_extractor_kwargs or {}, self.normalize_obs,
                                        float(log_std_init), squash,
                                        (int(sde_sample_freq), bool(sde_reset_on_episode_start))
                                        if use_sde else None)  # fmt: skip
        self.policy = policy
        self.value = value
        self.in_keys = list(policy.in_keys)

    @staticmethod
    def _build(obs_space, action_space, extractor_cls, kwargs, normalize_obs, log_std_init,
               squash=True, sde=None):  # fmt: skip
        def norm():
            return RunningNorm(obs_space.shape) if normalize_obs else None

        policy_features = _Features(extractor_cls(obs_space, **kwargs), norm())
        in_keys = list(policy_features.extractor.in_keys)
        if isinstance(action_space, gymnasium.spaces.Box):
            policy = _box_policy(policy_features, in_keys, action_space, log_std_init, squash, sde)
        elif isinstance(action_space, gymnasium.spaces.Discrete):
            net = _network(policy_features, int(action_space.n))
            policy = ProbabilisticActor(
                TensorDictModule(net, in_keys=in_keys, out_keys=["logits"]),
                in_keys=["logits"],
                distribution_class=OneHotCategorical,
                return_log_prob=True,
            )
        else:
            raise TypeError(
                f"OnPolicyActor supports Box and Discrete action spaces, got {action_space!r}."
            )
        value_features = _Features(extractor_cls(obs_space, **kwargs), norm())
        value = ValueOperator(_network(value_features, 1), in_keys=in_keys)
        return policy, value

    @classmethod
    def create_factory(
        cls,
        obs_space,
        action_space,
        feature_extractor_network=MLP,
        feature_extractor_kwargs: dict | None = None,
        restart_model=None,
        recurrent_nets: bool = False,
        normalize_obs: bool = False,
        log_std_init: float = 0.0,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        sde_reset_on_episode_start: bool = False,
        squash_output: bool | None = None,
    ):
        """``actor_factory(device) -> OnPolicyActor``; with ``restart_model``, the weights
        saved there (by ``Learner.save_model()``) are loaded (with ``normalize_obs``, the
        observation statistics too). ``use_sde=True, sde_sample_freq=4`` with
        ``log_std_init=-2`` is rl-zoo's gSDE policy (see the class docstring)."""
        check_recurrent(recurrent_nets)
        _check_box_options(action_space, use_sde, squash_output)
        extra = {}  # only when set: factories pickled by older runs keep their kwargs
        if normalize_obs:
            extra["normalize_obs"] = True
        if log_std_init:
            extra["log_std_init"] = float(log_std_init)
        if use_sde:
            extra.update(use_sde=True, sde_sample_freq=int(sde_sample_freq))
            if sde_reset_on_episode_start:
                extra["sde_reset_on_episode_start"] = True
        if squash_output is not None:
            extra["squash_output"] = bool(squash_output)
        return ActorFactory(
            cls, restart_model, obs_space=obs_space, action_space=action_space,
            feature_extractor_network=feature_extractor_network,
            feature_extractor_kwargs=feature_extractor_kwargs, **extra,
        )  # fmt: skip

    def normalizers(self) -> list:
        """The actor's ``RunningNorm`` modules (empty without ``normalize_obs``)."""
        return [m for m in self.modules() if isinstance(m, RunningNorm)]

    def update_normalizers(self, obs: torch.Tensor) -> None:
        """Merge observations ``[*B, *obs_shape]`` into every ``RunningNorm``."""
        for norm in self.normalizers():
            norm.update(obs)

    @property
    def recurrent_hidden_state_size(self) -> int:
        """1: the policies are not recurrent (the seed's ``rhs`` is a placeholder)."""
        return 1

    @property
    def is_recurrent(self) -> bool:
        return False

    def get_action(self, obs, rhs, done, deterministic: bool = False):
        """``(action, clipped_action, logp_action, rhs, entropy)`` for observations ``[B, ...]``
        (a dict of them for Dict spaces); ``clipped_action`` is what the gymnasium env takes."""
        action, clipped, logp, entropy = policy_action(
            self.policy, self.in_keys, obs, self.action_space, deterministic
        )
        return action, clipped, logp, rhs, entropy

    def get_value(self, obs, rhs=None, done=None) -> torch.Tensor:
        """``V(s)``, ``[B, 1]``."""
        entries = obs if isinstance(obs, dict) else {self.in_keys[0]: obs}
        batch = next(iter(entries.values())).shape[:1]
        return self.value(TensorDict(dict(entries), batch_size=batch)).get(K.STATE_VALUE)
