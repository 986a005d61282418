"""``LIBS``: the env classes TorchRL's example scripts pick by library name."""

from torchrl_lite.envs.libs.gym import GymEnv

__all__ = ["LIBS"]


def _dm_control_env(*args, **kwargs):
    """``DMControlEnv(*args, **kwargs)``, importing dm_control only when asked for."""
    from torchrl_lite.envs.libs.dm_control import DMControlEnv

    return DMControlEnv(*args, **kwargs)


# cfg.env.library -> env class ("gym" is served by gymnasium, see set_gym_backend)
LIBS = {"gym": GymEnv, "gymnasium": GymEnv, "dm_control": _dm_control_env}
