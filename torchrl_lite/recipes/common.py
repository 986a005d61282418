"""What the recipe files share: env checks, small builders and ``key=value`` overrides.

The env pipelines live in :mod:`torchrl_lite.envs.make`, the plain networks in
:mod:`torchrl_lite.modules.models.plain` and the episode bookkeeping in
:mod:`torchrl_lite.trainers.episodes`; their names are re-exported here for the recipe files
and user scripts that import them from this module.
"""

from __future__ import annotations

from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.data import Bounded, Categorical, MultiStep, OneHot, TensorSpec
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.make import (
    ATARI_PREFIX,
    ATARI_SIZE,
    DM_CONTROL_PREFIX,
    PIXEL_FRAMES,
    PIXEL_SIZE,
    PIXELS_STACK,
    atari_transforms,
    check_can_render,
    env_family,
    make_env,
    pixel_transforms,
)
from torchrl_lite.modules.models.plain import PixelEncoder, mlp
from torchrl_lite.recipes.config import apply_overrides
from torchrl_lite.trainers.episodes import (
    EpisodeReturns,
    PeriodicEvaluation,
    play_deterministic,
)

__all__ = [
    "ATARI_PREFIX",
    "ATARI_SIZE",
    "DM_CONTROL_PREFIX",
    "PIXEL_FRAMES",
    "PIXEL_SIZE",
    "PIXELS_STACK",
    "EpisodeReturns",
    "PeriodicEvaluation",
    "PixelEncoder",
    "action_kind",
    "env_family",
    "apply_overrides",
    "atari_transforms",
    "check_can_render",
    "make_env",
    "mlp",
    "observation_network",
    "pixel_transforms",
    "play_deterministic",
    "whole_batches",
]


def whole_batches(frames: int, frames_per_batch: int) -> int:
    """``frames`` rounded up to whole collector batches."""
    return -(-frames // frames_per_batch) * frames_per_batch


def n_step_postproc(n_step, gamma: float):
    """The collector post-processor for ``n_step``-reward targets (None for one step).

    ``MultiStep(gamma, n_step - 1, across_batches=True)``: the off-policy losses'
    one-step estimator then bootstraps with ``gamma ** k`` (see ``MultiStep``).
    """
    if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step < 1:
        raise ValueError(f"n_step must be an int >= 1, got {n_step!r}.")
    return MultiStep(gamma, n_step - 1, across_batches=True) if n_step > 1 else None


def action_kind(spec: TensorSpec) -> str:
    """``"continuous"`` (Bounded float), ``"discrete"`` (OneHot/Categorical) or ``"other"``."""
    if isinstance(spec, (OneHot, Categorical)):
        return "discrete"
    if isinstance(spec, Bounded) and spec.dtype.is_floating_point:
        return "continuous"
    return "other"


def check_action_kind(env: EnvBase, wanted: str, algo: str) -> None:
    """Raise ValueError when the algorithm cannot act in the env (e.g. DQN, continuous)."""
    kind = action_kind(env.action_spec)
    if kind != wanted:
        raise ValueError(
            f"{algo} needs a {wanted} action space, but this env's action spec is "
            f"{type(env.action_spec).__name__} ({kind}). Pick an algorithm for {kind} "
            f"actions ({'dqn' if kind == 'discrete' else 'ppo, sac, td3'})."
        )


def observation_network(
    env: EnvBase,
    out_features: int,
    hidden: int,
    depth: int,
    act=nn.Tanh,
    pixels: bool = False,
    layer_norm: bool = False,
) -> tuple[nn.Module, str]:
    """``(net, in_key)``: an :func:`mlp` reading ``"observation"`` or, with ``pixels``, a
    :class:`PixelEncoder` reading ``"pixels_stack"`` followed by that MLP (also without
    ``pixels`` when the env only observes ``"pixels_stack"``: Atari). ``layer_norm``
    normalizes the MLP's hidden layers."""
    if not pixels and K.OBSERVATION not in env.observation_spec.keys():
        pixels = PIXELS_STACK in env.observation_spec.keys()
    if not pixels:
        obs_dim = env.observation_spec[K.OBSERVATION].shape[-1]
        return mlp(obs_dim, out_features, hidden, depth, act, layer_norm), K.OBSERVATION
    shape = env.observation_spec[PIXELS_STACK].shape[-3:]  # [C, H, W]
    encoder = PixelEncoder(shape[0])
    features = encoder.out_features(shape)
    head = mlp(features, out_features, hidden, depth, act, layer_norm)
    return nn.Sequential(encoder, head), PIXELS_STACK
