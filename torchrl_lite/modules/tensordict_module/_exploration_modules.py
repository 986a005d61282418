"""The exploration type, and the modules that perturb the policy's action.

``ExplorationType``, ``set_exploration_type`` and ``exploration_type`` *are* tensordict's
``InteractionType``, ``set_interaction_type`` and ``interaction_type``: one switch drives
both the probabilistic modules (sample vs. mode) and the exploration modules below.

Each exploration module reads ``"action"`` after the policy and is active under
``ExplorationType.RANDOM`` or when no type is set; under ``DETERMINISTIC``, ``MODE``,
``MEAN`` (or ``MEDIAN``) it leaves the TensorDict untouched. ``.step(frames)`` anneals
its scale linearly from ``*_init`` to ``*_end`` over ``annealing_num_steps`` frames:

- ``EGreedyModule``: with probability ``eps`` replace the action by a random one.
- ``AdditiveGaussianModule``: add ``sigma * N(mean, std)`` noise, projected into the spec.
- ``OrnsteinUhlenbeckProcessModule``: add ``eps * x_t`` with the temporally correlated
  ``x_{t+1} = x_t + theta (mu - x_t) dt + sigma sqrt(dt) N(0, 1)``; ``x_t`` lives in the
  TensorDict (``"_ou_prev_noise"``, ``"_ou_steps"``) and restarts where ``"is_init"``.

The ``*Wrapper`` classes (``exploration_wrappers.py``) run a policy followed by one of
these modules; ``exploration.py`` re-exports both at TorchRL's path.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType as ExplorationType
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.nn import set_interaction_type as set_exploration_type
from tensordict.nn.probabilistic import interaction_type as exploration_type
from torch.nn.functional import one_hot

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data.tensor_specs import Categorical, Composite, OneHot, TensorSpec
from torchrl_lite.modules.tensordict_module.common import missing_input_error

__all__ = [
    "ExplorationType",
    "set_exploration_type",
    "exploration_type",
    "EGreedyModule",
    "AdditiveGaussianModule",
    "OrnsteinUhlenbeckProcessModule",
]

_RANDOM = ExplorationType.RANDOM


def _exploring() -> bool:
    """True under ``ExplorationType.RANDOM`` or when no exploration type is set."""
    current = exploration_type()
    return current is None or current is _RANDOM


def _action_spec(spec, action_key, owner: str) -> TensorSpec:
    """The leaf spec of the action; ``ValueError`` if there is none."""
    if isinstance(spec, Composite):
        spec = spec.get(action_key)
    if spec is None:
        raise ValueError(
            f"{owner} needs the action spec (to draw random actions or clip noisy ones) "
            f"and got none for {action_key!r}. Pass spec=env.action_spec, or give the "
            "policy a spec (e.g. QValueActor(..., spec=env.action_spec))."
        )
    if not isinstance(spec, TensorSpec):
        raise TypeError(
            f"{owner}: spec must be a TensorSpec or a Composite, got {type(spec).__name__}."
        )
    return spec


def _check_scales(owner: str, positive=(), **values) -> None:
    """Noise scales are finite and >= 0 (those named in ``positive``: > 0)."""
    for name, value in values.items():
        if value is None:
            continue
        low_ok = value > 0 if name in positive else value >= 0
        if not (math.isfinite(value) and low_ok):
            need = "> 0" if name in positive else ">= 0"
            raise ValueError(f"{owner}: {name} must be a finite number {need}, got {value}.")


class _Annealed(TensorDictModuleBase):
    """A scale (buffer ``self.<name>``) annealed linearly by ``step(frames)``."""

    _scale_name = "eps"
    _checks_own_inputs = True  # raises its own missing-key errors

    def _init_annealing(self, init: float, end: float, num_steps: int) -> None:
        if num_steps <= 0:
            raise ValueError(
                f"{type(self).__name__}: annealing_num_steps must be > 0, got {num_steps}."
            )
        name = self._scale_name
        self.register_buffer(f"{name}_init", torch.tensor(float(init)))
        self.register_buffer(f"{name}_end", torch.tensor(float(end)))
        self.register_buffer(name, torch.tensor(float(init)))
        self._init, self._end, self.annealing_num_steps = float(init), float(end), int(num_steps)
        self._frames = 0

    def step(self, frames: int = 1) -> None:
        """Advance the schedule by ``frames``: ``init + (end - init) * min(t / T, 1)``."""
        self._frames += int(frames)
        frac = min(self._frames / self.annealing_num_steps, 1.0)
        getattr(self, self._scale_name).fill_(self._init + (self._end - self._init) * frac)

    def _spec_on(self, device: torch.device) -> TensorSpec:
        """The spec on ``device`` (moved once, the first time the action lives there)."""
        if self.spec.device != device:
            self.spec = self.spec.to(device)
        return self.spec

    def get_extra_state(self) -> dict:
        return {"frames": self._frames}

    def set_extra_state(self, state: dict) -> None:
        self._frames = int(state["frames"])


class EGreedyModule(_Annealed):
    """Epsilon-greedy: with probability ``eps`` replace the action by a random one.

    ``eps`` goes linearly from ``eps_init`` to ``eps_end`` over ``annealing_num_steps``
    calls-worth of ``step(frames)``. One draw per batch element; the random action comes
    from ``spec.rand`` (uniform among allowed actions when ``action_mask_key`` is set).

    Args:
        spec: the action spec (a ``TensorSpec``, or a ``Composite`` holding
            ``action_key``). Required.
        eps_init: initial probability of a random action.
        eps_end: final probability.
        annealing_num_steps: frames over which eps is annealed.
        action_key: the action entry.
        action_mask_key: optional bool entry ``[*B, n]`` of allowed actions
            (``OneHot`` / ``Categorical`` specs).
        device: move the spec and ``eps`` there (else they follow the actions' device at
            the first call).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import OneHot
        >>> explore = EGreedyModule(OneHot(4), eps_init=1.0, eps_end=0.1, annealing_num_steps=10)
        >>> td = TensorDict(action=torch.tensor([[1, 0, 0, 0]]), batch_size=[1])
        >>> with set_exploration_type(ExplorationType.DETERMINISTIC):
        ...     explore(td)["action"]
        tensor([[1, 0, 0, 0]])
        >>> explore.step(5); round(float(explore.eps), 3)
        0.55
    """

    def __init__(
        self,
        spec,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        *,
        action_key=K.ACTION,
        action_mask_key=None,
        device=None,
    ):
        super().__init__()
        for name, value in (("eps_init", eps_init), ("eps_end", eps_end)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"EGreedyModule: {name} must be in [0, 1], got {value}.")
        self.spec = _action_spec(spec, action_key, "EGreedyModule")
        if action_mask_key is not None and not isinstance(self.spec, (OneHot, Categorical)):
            raise ValueError(
                f"EGreedyModule: action_mask_key needs a OneHot or Categorical spec, got {self.spec}."
            )
        self._init_annealing(eps_init, eps_end, annealing_num_steps)
        self.action_key, self.action_mask_key = action_key, action_mask_key
        self.in_keys = [action_key] + ([action_mask_key] if action_mask_key is not None else [])
        self.out_keys = [action_key]
        if device is not None:
            self.to(device)
            self._spec_on(torch.device(device))

    def _random_action(self, lead: torch.Size, tensordict: TensorDictBase) -> torch.Tensor:
        if self.action_mask_key is None:
            return self.spec.rand(lead)  # the spec is on the action's device
        mask = tensordict.get(self.action_mask_key, None)  # [*lead, n]
        if mask is None:
            raise missing_input_error(self, tensordict)
        flat = mask.reshape(-1, mask.shape[-1]).float()
        index = torch.multinomial(flat, 1).reshape(mask.shape[:-1])
        if isinstance(self.spec, OneHot):
            return one_hot(index, mask.shape[-1]).to(self.spec.dtype)
        return index.to(self.spec.dtype)

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise missing_input_error(self, tensordict)
        self._spec_on(action.device)
        lead = action.ndim - len(self.spec.shape)  # dims before the spec's own
        if lead < 0:
            raise ValueError(
                f"EGreedyModule: action of shape {list(action.shape)} has fewer dims than "
                f"the spec {self.spec}."
            )
        n_draw = max(lead, tensordict.batch_dims)  # one draw per env / batch element
        draw = torch.rand(action.shape[:n_draw], device=action.device) < self.eps
        draw = draw.reshape(draw.shape + (1,) * (action.ndim - n_draw))  # [*lead, 1...]
        random = self._random_action(action.shape[:lead], tensordict).to(action.device)
        tensordict.set(self.action_key, torch.where(draw, random, action))
        return tensordict


class AdditiveGaussianModule(_Annealed):
    """Add Gaussian noise ``sigma * N(mean, std)`` to the action, then clip it into the spec.

    ``sigma`` goes linearly from ``sigma_init`` to ``sigma_end`` over
    ``annealing_num_steps`` frames of ``step(frames)``.

    Args:
        spec: the action spec (``Bounded`` for clipping; a ``Composite`` holding
            ``action_key`` is accepted). Required.
        sigma_init: initial noise scale.
        sigma_end: final noise scale.
        annealing_num_steps: frames over which sigma is annealed.
        mean: mean of the unscaled noise.
        std: standard deviation of the unscaled noise.
        action_key: the action entry.
        safe: project the noisy action into the spec (clip); otherwise write it as is.
        device: where the annealed scale lives (as the actor's parameters).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, shape=(1,)), sigma_init=10.0)
        >>> td = noise(TensorDict(action=torch.zeros(100, 1), batch_size=[100]))
        >>> bool(td["action"].abs().max() <= 1.0)
        True
    """

    _scale_name = "sigma"

    def __init__(
        self,
        spec,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        action_key=K.ACTION,
        safe: bool = True,
        device=None,
    ):
        super().__init__()
        _check_scales("AdditiveGaussianModule", sigma_init=sigma_init, sigma_end=sigma_end, std=std)
        self.spec = _action_spec(spec, action_key, "AdditiveGaussianModule")
        self._init_annealing(sigma_init, sigma_end, annealing_num_steps)
        self.mean, self.std, self.safe = float(mean), float(std), safe
        self.action_key = action_key
        self.in_keys = [action_key]
        self.out_keys = [action_key]
        if device is not None:
            self.to(device)

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise missing_input_error(self, tensordict)
        noise = torch.randn_like(action).mul_(self.std).add_(self.mean)
        action = action + noise * self.sigma
        if self.safe:
            action = self._spec_on(action.device).project(action)
        tensordict.set(self.action_key, action)
        return tensordict


class OrnsteinUhlenbeckProcessModule(_Annealed):
    """Add temporally correlated Ornstein-Uhlenbeck noise ``eps * x_t`` to the action.

    ``x_{t+1} = x_t + theta * (mu - x_t) * dt + sigma_t * sqrt(dt) * N(0, 1)`` from ``x0``.
    ``x_t`` and the per-env step count live in the TensorDict (``"_ou_prev_noise"``,
    ``"_ou_steps"``, so they travel with ``step_mdp``) and restart where ``is_init_key``
    is True or absent. ``sigma_t`` anneals per trajectory when ``sigma_min`` is set;
    ``step(frames)`` anneals ``eps``.

    Args:
        spec: the action spec (a ``Composite`` holding ``action_key`` is accepted).
        eps_init: initial scale of the noise added.
        eps_end: final scale.
        annealing_num_steps: frames over which eps is annealed.
        theta: mean-reversion rate.
        mu: long-run mean of the process.
        sigma: diffusion scale.
        dt: time step.
        x0: initial noise (a number or tensor broadcastable to the action).
        sigma_min: if set, sigma is annealed down to it per trajectory.
        n_steps_annealing: trajectory steps over which sigma reaches ``sigma_min``.
        action_key: the action entry.
        is_init_key: bool entry ``[*B, 1]``, True on the first step after a reset.
        safe: project the noisy action into the spec.
        device: where the module's buffers go.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, shape=(2,)))
        >>> td = ou(TensorDict(action=torch.zeros(4, 2), batch_size=[4]))
        >>> td["_ou_prev_noise"].shape, td["_ou_steps"].shape
        (torch.Size([4, 2]), torch.Size([4, 1]))
    """

    noise_key = "_ou_prev_noise"
    steps_key = "_ou_steps"

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        spec,
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
        *,
        action_key=K.ACTION,
        is_init_key=K.IS_INIT,
        safe: bool = True,
        device=None,
    ):
        super().__init__()
        _check_scales(
            "OrnsteinUhlenbeckProcessModule",
            positive=("dt",),
            eps_init=eps_init,
            eps_end=eps_end,
            theta=theta,
            sigma=sigma,
            dt=dt,
            sigma_min=sigma_min,
        )
        self.spec = _action_spec(spec, action_key, "OrnsteinUhlenbeckProcessModule")
        self._init_annealing(eps_init, eps_end, annealing_num_steps)
        if n_steps_annealing <= 0:
            raise ValueError(
                f"OrnsteinUhlenbeckProcessModule: n_steps_annealing must be > 0, got {n_steps_annealing}."
            )
        self.theta, self.mu, self.sigma, self.dt = float(theta), float(mu), float(sigma), float(dt)
        self.sigma_min, self.n_steps_annealing = sigma_min, int(n_steps_annealing)
        self.register_buffer("x0", torch.as_tensor(0.0 if x0 is None else x0, dtype=torch.float32))
        self.action_key, self.is_init_key, self.safe = action_key, is_init_key, safe
        self.in_keys = [action_key, is_init_key]
        self.out_keys = [action_key, self.noise_key, self.steps_key]
        if device is not None:
            self.to(device)

    def _sigma(self, steps: torch.Tensor) -> torch.Tensor | float:
        """The diffusion scale after ``steps`` trajectory steps."""
        if self.sigma_min is None:
            return self.sigma
        slope = (self.sigma - self.sigma_min) / self.n_steps_annealing
        return (self.sigma - slope * steps).clamp_min(self.sigma_min)

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise missing_input_error(self, tensordict, [self.action_key])
        lead = action.shape[: action.ndim - len(self.spec.shape)]  # batch dims
        to_action = (*lead, *[1] * len(self.spec.shape))  # broadcast [*B] over the action
        noise = tensordict.get(self.noise_key, None)
        steps = tensordict.get(self.steps_key, None)  # [*B, 1]
        if noise is None or steps is None:
            noise = self.x0.to(action).expand_as(action)
            steps = torch.zeros(*lead, 1, dtype=torch.long, device=action.device)
        else:
            is_init = tensordict.get(self.is_init_key, None)
            if is_init is not None:
                if is_init.numel() != lead.numel():
                    raise ValueError(
                        f"OrnsteinUhlenbeckProcessModule: {self.is_init_key!r} has shape "
                        f"{list(is_init.shape)}, expected one flag per env {list(lead)} + [1]."
                    )
                noise = torch.where(is_init.reshape(to_action), self.x0.to(action), noise)
                steps = torch.where(is_init.reshape(*lead, 1), 0, steps)
        sigma = self._sigma(steps)
        if isinstance(sigma, torch.Tensor):
            sigma = sigma.reshape(to_action)
        drift = self.theta * (self.mu - noise) * self.dt
        noise = noise + drift + sigma * math.sqrt(self.dt) * torch.randn_like(action)
        action = action + self.eps * noise
        if self.safe:
            action = self._spec_on(action.device).project(action)
        tensordict.set(self.action_key, action)
        tensordict.set(self.noise_key, noise)
        tensordict.set(self.steps_key, steps + 1)
        return tensordict
