"""TorchRL's ``torchrl.envs.batched_envs`` path: ``SerialEnv`` and ``ParallelEnv``, which
live in :mod:`torchrl_lite.envs.batched`."""

from torchrl_lite.envs.batched.parallel import ParallelEnv
from torchrl_lite.envs.batched.serial import SerialEnv

__all__ = ["ParallelEnv", "SerialEnv"]
