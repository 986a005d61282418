"""The allowed range of every recipe config field, checked before a run builds anything.

:func:`check_ranges` raises ValueError naming the option as the user wrote it (``--frames
-5``, ``lr=-1``), the range and the value. :data:`STRUCTURAL` lists the fields that change
the networks or the env: a resumed run cannot change them.

Example:
    >>> from torchrl_lite.recipes import get_recipe
    >>> cfg = get_recipe("ppo").Config(lr=-1.0)
    >>> check_ranges(cfg, {"lr": "lr=-1"})
    Traceback (most recent call last):
    ...
    ValueError: lr=-1: the learning rate must be > 0 (and finite), got -1.0.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["check_ranges", "STRUCTURAL"]

# field -> (low, low_inclusive, high, high_inclusive, what)
_INT_AT_LEAST_1 = (1, True, math.inf, False)
_RULES = {
    "frames": (*_INT_AT_LEAST_1, "the frame budget"),
    "frames_per_batch": (*_INT_AT_LEAST_1, "frames per batch"),
    "num_envs": (*_INT_AT_LEAST_1, "the number of envs"),
    "epochs": (*_INT_AT_LEAST_1, "epochs per batch"),
    "mini_batch_size": (*_INT_AT_LEAST_1, "the minibatch size"),
    "batch_size": (*_INT_AT_LEAST_1, "the batch size"),
    "buffer_size": (*_INT_AT_LEAST_1, "the replay buffer size"),
    "hidden": (*_INT_AT_LEAST_1, "the hidden layer width"),
    "eval_episodes": (*_INT_AT_LEAST_1, "evaluation episodes"),
    "eval_interval": (*_INT_AT_LEAST_1, "the evaluation interval"),
    "eval_steps": (*_INT_AT_LEAST_1, "evaluation steps"),
    "num_qvalue_nets": (*_INT_AT_LEAST_1, "the number of Q networks"),
    "num_random": (*_INT_AT_LEAST_1, "the number of random actions"),
    "optim_steps_per_batch": (*_INT_AT_LEAST_1, "optimiser steps per batch"),
    "target_update_interval": (*_INT_AT_LEAST_1, "the target update interval"),
    "policy_delay": (*_INT_AT_LEAST_1, "the policy delay"),
    "sub_sample_len": (*_INT_AT_LEAST_1, "the Q sub-sample length"),
    "target_augs": (*_INT_AT_LEAST_1, "the augmented copies per target"),
    "q_augs": (*_INT_AT_LEAST_1, "the augmented copies per critic loss"),
    "seed": (0, True, math.inf, False, "the seed"),
    "init_random_frames": (0, True, math.inf, False, "random frames before learning"),
    "eps_frames": (0, True, math.inf, False, "the epsilon annealing frames"),
    "obs_norm_steps": (0, True, math.inf, False, "observation-statistics steps"),
    "lr": (0, False, math.inf, False, "the learning rate"),
    "lr_end": (0, False, math.inf, False, "the final learning rate"),
    "lr_drop_to": (0, False, math.inf, False, "the learning rate after the drop"),
    "max_grad_norm": (0, False, math.inf, False, "the gradient clipping norm"),
    "utd_ratio": (0, False, math.inf, False, "the update-to-data ratio"),
    "temperature": (0, False, math.inf, False, "the temperature"),
    "reward_scale": (0, False, math.inf, False, "the reward scale"),
    "clip_epsilon": (0, False, math.inf, False, "the clipping epsilon"),
    "alpha": (0, False, math.inf, False, "alpha"),
    "gamma": (0, True, 1, True, "the discount gamma"),
    "lmbda": (0, True, 1, True, "lambda"),
    "tau": (0, False, 1, True, "the target update rate tau"),
    "eps_init": (0, True, 1, True, "the initial epsilon"),
    "eps_end": (0, True, 1, True, "the final epsilon"),
    "expectile": (0, False, 1, False, "the expectile"),
    "entropy_coef": (0, True, math.inf, False, "the entropy coefficient"),
    "critic_coef": (0, True, math.inf, False, "the critic coefficient"),
    "min_q_weight": (0, True, math.inf, False, "the CQL weight"),
    "exploration_noise": (0, True, math.inf, False, "the exploration noise"),
    "policy_noise": (0, True, math.inf, False, "the target policy noise"),
    "noise_clip": (0, True, math.inf, False, "the noise clip"),
    "noise": (0, True, math.inf, False, "the action noise"),
    "init_log_std": (-math.inf, False, math.inf, False, "the initial log-std"),
    "target": (-math.inf, False, math.inf, False, "the target return"),
}

STRUCTURAL = (
    "env", "pixels", "hidden", "num_envs", "num_qvalue_nets", "transforms", "buffer_size",
    "use_sde", "normalize_obs", "squash",
)  # fmt: skip
"""Config fields that shape the networks, the env or the buffer a checkpoint holds."""


def check_ranges(config, typed: dict[str, str]) -> None:
    """Check the fields named in ``typed`` (field -> how the user wrote it) against their range.

    Args:
        config: a recipe's frozen config dataclass.
        typed: the fields the user set, each with its text as typed (for the message).
    """
    for field in dataclasses.fields(config):
        if field.name not in typed or field.name not in _RULES:
            continue
        value = getattr(config, field.name)
        if value is None:
            continue
        message = range_error(field.name, value)
        if message:
            raise ValueError(f"{typed[field.name]}: {message}")


def range_error(name: str, value) -> str | None:
    """Why ``value`` is out of ``name``'s range, or None when it is fine (or has no range)."""
    if name not in _RULES:
        return None
    low, low_in, high, high_in, what = _RULES[name]
    if not math.isfinite(float(value)):
        return f"{what} must be finite, got {value!r}."
    if (value < low if low_in else value <= low) or (value > high if high_in else value >= high):
        left, right = "[" if low_in else "(", "]" if high_in else ")"
        if high == math.inf:
            bound = f">= {low}" if low_in else f"> {low} (and finite)"
            return f"{what} must be {bound}, got {value!r}."
        return f"{what} must be in {left}{low}, {high}{right}, got {value!r}."
    return None
