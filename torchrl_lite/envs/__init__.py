"""Environments: the ``EnvBase`` contract, library wrappers, a pure-torch pendulum."""

from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.libs.gym import GymEnv, GymWrapper
from torchrl_lite.envs.utils import check_env_specs, step_mdp

__all__ = ["EnvBase", "GymEnv", "GymWrapper", "check_env_specs", "step_mdp"]
