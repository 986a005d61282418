"""The first step's output of an env's ``_step`` checked against its specs.

A user's ``_step`` that returns a reward of shape ``[T]`` where the spec says ``[1]``, a
float ``done``, or a float64 observation for a float32 spec would otherwise flow into
rollouts and buffers as data. ``EnvBase.step`` (once per rollout with the default
``spec_check="first"``) and the collectors (once) call :func:`check_step_output`, which
raises naming the entry, the value and the spec.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite._utils import missing_key_message
from torchrl_lite.data._spec_stack import StackedComposite, copies_of

__all__ = ["check_step_output", "check_rollout_args", "check_reset_input"]


def check_step_output(env, next_td: TensorDictBase) -> None:
    """Check every reward, done and observation entry of ``next_td`` against ``env``'s specs.

    Args:
        env: the env whose ``_step`` produced ``next_td``.
        next_td: what ``_step`` returned (the ``"next"`` entries).

    Raises:
        KeyError: an entry of the specs is missing.
        ValueError: an entry's shape or dtype differs from its spec.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> env = PendulumEnv(seed=0)
        >>> td = env.rand_action(env.reset())
        >>> check_step_output(env, env._step(td))  # PendulumEnv's step fits its specs
    """
    if not isinstance(next_td, TensorDictBase):
        raise TypeError(
            f"{type(env).__name__}._step must return a TensorDict, got {type(next_td).__name__}."
        )
    batch = len(env.batch_size)
    for role, specs in (
        ("reward", env.full_reward_spec),
        ("done", env.full_done_spec),
        ("observation", env.full_observation_spec),
    ):
        if isinstance(specs, StackedComposite):  # copies of different specs: each its own
            rows = copies_of(next_td, len(specs.specs))
            for i, (spec, row) in enumerate(zip(specs.specs, rows)):
                _check_entries(env, role, spec, row, batch - 1, f" (copy {i})")
        else:
            _check_entries(env, role, specs, next_td, batch, "")


def _check_entries(env, role: str, specs, next_td: TensorDictBase, batch: int, copy: str):
    for key, spec in specs.items(True, True):
        value = next_td.get(key, None)
        if value is None:
            raise KeyError(
                f"{type(env).__name__}._step returned no {role} entry {key!r}{copy} (its "
                f"spec: {spec}). " + missing_key_message(key, next_td.keys(True, True))
            )
        if not isinstance(value, torch.Tensor):
            continue  # non-tensor entries are not described by tensor specs
        expected = spec.shape if env.batch_locked else spec.shape[batch:]
        got = value.shape if env.batch_locked else value.shape[value.ndim - len(expected) :]
        if got != expected or (not env.batch_locked and value.ndim < len(expected)):
            raise ValueError(
                f"{type(env).__name__}._step returned {role} {key!r}{copy} of shape "
                f"{list(value.shape)}, but its spec has shape {list(spec.shape)} ({spec}); "
                f"return it shaped like the spec (e.g. a reward of shape [*batch, 1])."
            )
        if value.dtype != spec.dtype:
            raise ValueError(
                f"{type(env).__name__}._step returned {role} {key!r}{copy} of dtype "
                f"{value.dtype}, but its spec has dtype {spec.dtype} ({spec}); convert it "
                f"(e.g. .to({spec.dtype})) or change the spec."
            )


def check_rollout_args(max_steps, policy, callback) -> None:
    """``rollout``'s arguments, checked once per call (not per step)."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"rollout needs max_steps >= 1 (an int), got {max_steps!r}")
    for name, fn, use in (
        ("policy", policy, "TensorDict -> TensorDict, or None for random actions"),
        ("callback", callback, "called as callback(env, tensordict), or None"),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"rollout: {name} must be a callable ({use}), got {fn!r}.")


def check_reset_input(env, tensordict: TensorDictBase) -> None:
    """Raise when the tensordict given to ``reset`` of a batch-locked env is not of the
    env's batch size."""
    if tensordict.batch_size != env.batch_size:
        raise ValueError(
            f"{type(env).__name__}.reset: the tensordict has batch size "
            f"{list(tensordict.batch_size)} but the env has {list(env.batch_size)}; pass one "
            "of the env's batch size (or none)."
        )
