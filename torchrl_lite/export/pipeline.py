"""A trained policy as one plain module: the env's raw observation in, the env's action out.

:func:`exportable_policy` reads a recipe env's transform list and the policy, and builds an
:class:`ExportedPolicy` that does, on tensors with a leading batch dim ``B``:

1. the observation transforms, in the env's order, on a TensorDict of the raw entries
   (each transform's own ``_call``: dtype casts, key concatenation, image layout,
   grayscale, resize, normalisation by fixed statistics);
2. frame stacks (``CatFrames``) as explicit state: the previous stack comes in, the new
   one goes out, and ``is_init`` (``[B, 1]`` bool, True on an episode's first step)
   restarts it, so the module itself holds no state between calls;
3. the policy under ``ExplorationType.DETERMINISTIC`` (the mode of a tanh-Normal with its
   bounds, the argmax of a Q-network, ...);
4. the action transforms on the way back to the env (``_inv_call``: ``ActionScaling``,
   the float64 cast of dm_control actions), then one-hot to index for discrete actions.

Transforms that only read rewards or done flags (``RewardSum``, ``RewardClipping``) do not
reach the policy and are left out. Any other transform with state (``VecNorm`` while it
still updates, ``StepCounter`` read by the policy, ...) is refused with its name: its output
would depend on calls the exported file never sees.
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.data import OneHot
from torchrl_lite.envs import (
    ActionScaling,
    CatFrames,
    CatTensors,
    CenterCrop,
    DoubleToFloat,
    DTypeCastTransform,
    ExcludeTransform,
    ExplorationType,
    FlattenObservation,
    GrayScale,
    ObservationNorm,
    PermuteTransform,
    RenameTransform,
    Resize,
    SelectTransform,
    SqueezeTransform,
    ToTensorImage,
    TransformedEnv,
    UnsqueezeTransform,
    VecNorm,
    set_exploration_type,
)
from torchrl_lite.modules.distributions.continuous import TruncatedNormal, _squash_loc

__all__ = ["ExportedPolicy", "ExportError", "exportable_policy", "flat_transforms"]

STATELESS = (
    DoubleToFloat, DTypeCastTransform, CatTensors, ToTensorImage, GrayScale, Resize, CenterCrop,
    ExcludeTransform, RenameTransform, SelectTransform, ObservationNorm, FlattenObservation,
    PermuteTransform, SqueezeTransform, UnsqueezeTransform,
)  # fmt: skip
"""Observation transforms whose output depends on the current step only (exact types)."""
ACTION_TRANSFORMS = (ActionScaling, DoubleToFloat, DTypeCastTransform)
"""Transforms whose action mapping (``_inv_call``) is a fixed function."""
IS_INIT = "is_init"


class ExportError(ValueError):
    """The policy or one of its env's transforms cannot be exported (the message says which)."""


def key_name(key) -> str:
    """An input or output name for a TensorDict key (nested keys joined by ``.``)."""
    return ".".join(key) if isinstance(key, tuple) else key


def flat_transforms(env) -> tuple:
    """``(base_env, [(transform, observation keys before it, after it), ...])`` of nested
    envs, innermost first; only the transforms the env runs."""
    layers = []
    while isinstance(env, TransformedEnv):
        layers.append(env)
        env = env.base_env
    steps = []
    for layer in reversed(layers):
        for t, before, after in zip(layer._transforms, layer._chain, layer._chain[1:]):
            if t._absent is None:
                keys = [set(s.observation.keys(True, True)) for s in (before, after)]
                steps.append((t, *keys))
    return env, steps


class _TruncatedNormalMode(torch.distributions.Distribution):
    """The deterministic action of ``TruncatedNormal`` without building the distribution
    (tensordict's constructor checks its bounds on the host, which tracing cannot do)."""

    has_rsample = False
    arg_constraints: dict = {}

    def __init__(self, loc, scale, upscale=5.0, low=-1.0, high=1.0, tanh_loc=False, **_):
        loc = _squash_loc(loc, upscale, tanh_loc)
        low, high = torch.as_tensor(low, dtype=loc.dtype), torch.as_tensor(high, dtype=loc.dtype)
        self._mode = torch.maximum(torch.minimum(loc, high), low)
        super().__init__(loc.shape[:-1], loc.shape[-1:], validate_args=False)

    @property
    def mode(self) -> torch.Tensor:
        return self._mode

    mean = deterministic_sample = mode


TRACEABLE_MODES = {TruncatedNormal: _TruncatedNormalMode}
"""Distribution class -> a class computing only its deterministic action, for tracing."""


def _deterministic_copy(policy: nn.Module) -> nn.Module:
    """A copy of ``policy`` that writes only its deterministic action (no log-prob)."""
    policy = copy.deepcopy(policy)
    for module in policy.modules():
        if getattr(module, "return_log_prob", False):
            module.return_log_prob = False
        mode = TRACEABLE_MODES.get(getattr(module, "distribution_class", None))
        if mode is not None:
            module.distribution_class = mode
    return policy.eval()


class ExportedPolicy(nn.Module):
    """Raw observations (and previous frame stacks) to the env's action (and new stacks).

    Inputs, each with a leading batch dim: the raw observations ``obs_names``, then, when
    the env stacks frames, ``is_init`` ``[B, 1]`` bool and the previous stacks
    ``stack_names``. Outputs: the action (``[B, A]`` float, or ``[B]`` int64 indices for
    discrete actions), then the new stacks ``next_<stack>``. Built by
    :func:`exportable_policy`; the fields below are its plan.
    """

    def __init__(self, obs_keys, steps, policy, action_steps, one_hot: bool, action_key,
                 stack_specs=()):  # fmt: skip
        super().__init__()
        self.obs_keys = list(obs_keys)
        self.steps = nn.ModuleList(t for _, t in steps)
        self.kinds = [kind for kind, _ in steps]  # "call" or "stack" per step
        self.policy = policy
        self.action_steps = nn.ModuleList(action_steps)
        self.one_hot, self.action_key = one_hot, action_key
        self.stack_keys = [k for kind, t in steps if kind == "stack" for _, k in t._pairs]
        self.stack_specs = list(stack_specs)  # [(shape without batch, dtype)] per stack

    def initial_stacks(self, batch: int) -> list[torch.Tensor]:
        """Zero stacks for a first call (``is_init`` True replaces them)."""
        return [torch.zeros(batch, *shape, dtype=dtype) for shape, dtype in self.stack_specs]

    @property
    def input_names(self) -> list[str]:
        stacks = [IS_INIT, *map(key_name, self.stack_keys)] if self.stack_keys else []
        return [*map(key_name, self.obs_keys), *stacks]

    @property
    def output_names(self) -> list[str]:
        return [key_name(self.action_key), *(f"next_{key_name(k)}" for k in self.stack_keys)]

    def forward(self, *inputs: torch.Tensor):
        n = len(self.obs_keys)
        td = TensorDict(dict(zip(self.obs_keys, inputs[:n])), batch_size=inputs[0].shape[:1])
        if self.stack_keys:
            is_init = inputs[n].reshape(-1, 1).to(torch.bool)  # [B, 1]
            previous = dict(zip(self.stack_keys, inputs[n + 1 :]))
        stacks = []
        for kind, t in zip(self.kinds, self.steps):
            if kind == "call":
                td = t._call(td)
                continue
            for in_key, out_key in t._pairs:  # CatFrames with its stack passed in
                frame, old = td.get(in_key), previous[out_key]
                size = frame.shape[t.dim]
                rolled = torch.cat([old.narrow(t.dim, size, old.shape[t.dim] - size), frame], t.dim)
                mask = is_init.reshape(-1, *([1] * (rolled.dim() - 1)))  # [B, 1, ...]
                stack = torch.where(mask, t._first_stack(frame), rolled)
                td.set(out_key, stack)
                stacks.append(stack)
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            td = self.policy(td)
        for t in self.action_steps:
            td = t._inv_call(td)
        action = td.get(self.action_key)
        if self.one_hot:
            action = action.argmax(-1)  # [B]: the index a Discrete gymnasium space takes
        return (action, *stacks)


def _plan_observations(steps: list, policy_keys: list) -> list:
    """``[("call" | "stack", transform), ...]`` for the transforms that reach the policy."""
    plan, refused = [], {}
    for t, obs_keys, after in steps:
        reads_obs = any(k in obs_keys for k in t.in_keys)
        if isinstance(t, VecNorm) and reads_obs:
            if not t.frozen:
                raise ExportError(
                    "Cannot export: VecNorm is still updating its statistics, so the "
                    "exported normalisation would not match the next step's. Freeze it "
                    "first (vecnorm.freeze(), or replace it by vecnorm.to_observation_norm())."
                )
            plan.append(("call", copy.deepcopy(t)))
        elif type(t) in STATELESS and reads_obs:
            plan.append(("call", copy.deepcopy(t)))
        elif type(t) is CatFrames and reads_obs:
            plan.append(("stack", copy.deepcopy(t)))
        elif reads_obs:
            raise ExportError(
                f"Cannot export: the observation transform {type(t).__name__} "
                f"(in_keys={t.in_keys}) keeps state between steps or has no fixed form; "
                "exportable ones: "
                + ", ".join(c.__name__ for c in (*STATELESS, CatFrames))
                + " and a frozen VecNorm."
            )
        else:
            for key in after - obs_keys:  # the observations it adds
                refused[key] = t
    for key in policy_keys:
        if key in refused:
            raise ExportError(
                f"Cannot export: the policy reads {key_name(key)!r}, written by "
                f"{type(refused[key]).__name__}, which keeps state between steps."
            )
    return plan


def exportable_policy(env, policy: nn.Module) -> ExportedPolicy:
    """The :class:`ExportedPolicy` of ``policy`` acting in ``env`` (a recipe's eval env).

    The transforms and the policy are copied: the result shares no state with them.

    Raises:
        ExportError: a transform or the policy has no exportable form (named).

    Example:
        >>> from torchrl_lite.recipes.common import make_env
        >>> env = make_env("Pendulum-v1")
        >>> from tensordict.nn import TensorDictModule
        >>> policy = TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])
        >>> exportable_policy(env, policy)(torch.zeros(2, 3)).__len__()
        1
    """
    if hasattr(policy, "_carry"):  # RSSMPolicy: the recurrent state lives in the module
        raise ExportError(
            f"Cannot export {type(policy).__name__}: it keeps its recurrent state inside "
            "the module and samples its latent state at every step, so no deterministic "
            "stateless file reproduces it."
        )
    base, steps = flat_transforms(env)
    obs_keys = [
        k
        for k, spec in base.observation_spec.items(True, True)
        if k != K.PIXELS or k in {key for t, *_ in steps for key in t.in_keys}
    ]
    policy_keys = list(getattr(policy, "in_keys", []))
    plan = _plan_observations(steps, policy_keys)
    action_steps = []
    for t, *_ in reversed(steps):  # the env inverts the outermost first
        if not t._has_inverse():
            continue
        if type(t) not in ACTION_TRANSFORMS:
            raise ExportError(
                f"Cannot export: the action transform {type(t).__name__} has no fixed "
                f"form; exportable ones: {', '.join(c.__name__ for c in ACTION_TRANSFORMS)}."
            )
        action_steps.append(copy.deepcopy(t))
    one_hot = isinstance(base.action_spec, OneHot)
    stacks = [k for kind, t in plan if kind == "stack" for _, k in t._pairs]
    stack_specs = [
        (tuple(env.observation_spec[k].shape[len(env.batch_size) :]), env.observation_spec[k].dtype)
        for k in stacks
    ]
    policy = _deterministic_copy(policy)
    module = ExportedPolicy(obs_keys, plan, policy, action_steps, one_hot, K.ACTION, stack_specs)
    return module.eval()
