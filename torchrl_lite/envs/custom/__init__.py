"""Environments written in pure torch."""

from torchrl_lite.envs.custom.pendulum import PendulumEnv

__all__ = ["PendulumEnv"]
