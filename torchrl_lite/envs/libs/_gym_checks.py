"""Argument checks of ``GymEnv`` (num_envs, env id), at construction only."""

from __future__ import annotations

import difflib


def _check_num_envs(num_envs) -> None:
    if num_envs is None:  # like 0: one env without a batch dimension
        return
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 0:
        raise ValueError(
            f"GymEnv: num_envs must be an int >= 0 (0 or None: one env without a batch "
            f"dimension), "
            f"got {num_envs!r}."
        )


def _check_env_id(env_name) -> None:
    import gymnasium as gym

    if not isinstance(env_name, str):
        raise TypeError(f"GymEnv expects an env id string, got {env_name!r}")
    if env_name in gym.registry:
        return
    if "/" not in env_name and ":" not in env_name:
        close = difflib.get_close_matches(env_name, list(gym.registry.keys()), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown gymnasium env id {env_name!r}.{hint} Registered ids are listed by gymnasium.pprint_registry()."
        )
    try:
        gym.spec(env_name)
    except gym.error.Error as err:
        raise ValueError(f"Unknown gymnasium env id {env_name!r}: {err}") from err
