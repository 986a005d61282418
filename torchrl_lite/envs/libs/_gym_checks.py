"""Argument checks of ``GymEnv`` (num_envs, env id), at construction only."""

from __future__ import annotations

from torchrl_lite._utils import did_you_mean


def _check_num_envs(num_envs) -> None:
    if num_envs is None:  # like 0: one env without a batch dimension
        return
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 0:
        raise ValueError(
            f"GymEnv: num_envs must be an int >= 0 (0 or None: one env without a batch "
            f"dimension), "
            f"got {num_envs!r}."
        )


def _register_ale() -> bool:
    """Register ale-py's Atari ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4``) with gymnasium,
    which gymnasium >= 1.0 no longer does by itself; False if ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    import gymnasium as gym

    gym.register_envs(ale_py)
    return True


def _check_env_id(env_name) -> None:
    import gymnasium as gym

    if not isinstance(env_name, str):
        raise TypeError(f"GymEnv expects an env id string, got {env_name!r}")
    if env_name in gym.registry or (_register_ale() and env_name in gym.registry):
        return
    if "/" not in env_name and ":" not in env_name:
        hint = did_you_mean(env_name, list(gym.registry.keys()), n=3)
        raise ValueError(
            f"Unknown gymnasium env id {env_name!r}.{hint} Registered ids are listed by gymnasium.pprint_registry()."
        )
    try:
        gym.spec(env_name)
    except gym.error.Error as err:
        raise ValueError(f"Unknown gymnasium env id {env_name!r}: {err}") from err


def _make_checked(make, env_name: str, kwargs: dict, own_args) -> object:
    """``make()`` (gymnasium's ``make``/``make_vec``); a keyword the env does not take
    raises a ``TypeError`` naming it, the env, and the arguments GymEnv keeps for itself."""
    try:
        return make()
    except TypeError as err:
        if "unexpected keyword argument" not in str(err):
            raise
        raise TypeError(
            f"GymEnv({env_name!r}): the env does not take the keyword arguments passed on "
            f"to gymnasium.make ({sorted(kwargs)}): {err}. GymEnv's own arguments are "
            f"num_envs, vectorization_mode, {', '.join(own_args)}; check the spelling "
            "(e.g. render_mode='rgb_array')."
        ) from err
