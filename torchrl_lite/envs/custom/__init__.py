"""Environments written in pure torch."""

from torchrl_lite.envs.custom.pendulum import PendulumEnv
from torchrl_lite.envs.custom.text import TextGenerationEnv

__all__ = ["PendulumEnv", "TextGenerationEnv"]
