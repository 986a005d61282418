"""Environments: the ``EnvBase`` contract, library wrappers, batched envs, transforms."""

from torchrl_lite.envs.batched import ParallelEnv, SerialEnv
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.custom.pendulum import PendulumEnv
from torchrl_lite.envs.env_creator import EnvCreator, env_creator
from torchrl_lite.envs.factories import (
    dmc_test_env_factory,
    dmc_train_env_factory,
    env_seed,
    gym_test_env_factory,
    gym_train_env_factory,
    pybullet_test_env_factory,
    pybullet_train_env_factory,
)
from torchrl_lite.envs.libs.gym import GymEnv, GymWrapper, gym_backend, set_gym_backend
from torchrl_lite.envs.model_based import DreamerDecoder, DreamerEnv, ModelBasedEnvBase
from torchrl_lite.envs.transforms import *  # noqa: F403
from torchrl_lite.envs.transforms import __all__ as _transforms_all
from torchrl_lite.envs.utils import (
    ExplorationType,
    RandomPolicy,
    check_env_specs,
    exploration_type,
    set_exploration_type,
    step_mdp,
)

__all__ = [
    "DreamerEnv",
    "DreamerDecoder",
    "ModelBasedEnvBase",
    "EnvBase",
    "EnvCreator",
    "env_creator",
    "ExplorationType",
    "GymEnv",
    "GymWrapper",
    "ParallelEnv",
    "PendulumEnv",
    "RandomPolicy",
    "SerialEnv",
    "check_env_specs",
    "dmc_test_env_factory",
    "dmc_train_env_factory",
    "env_seed",
    "gym_backend",
    "gym_test_env_factory",
    "gym_train_env_factory",
    "set_gym_backend",
    "pybullet_test_env_factory",
    "pybullet_train_env_factory",
    "exploration_type",
    "set_exploration_type",
    "step_mdp",
    *_transforms_all,
]

# Optional-dependency envs, imported on first access so that `import torchrl_lite.envs`
# does not import dm_control/MuJoCo (left out of __all__: `import *` must not import them).
_LAZY = {
    "DMControlEnv": "torchrl_lite.envs.libs.dm_control",
    "DMControlWrapper": "torchrl_lite.envs.libs.dm_control",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
