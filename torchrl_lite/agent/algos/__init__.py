"""Seed 000's algorithms (PyTorchRL's names and hyperparameters) over the library's losses."""

from torchrl_lite.agent.algos.base import AlgoFactory, Algorithm
from torchrl_lite.agent.algos.on_policy import A2C, PPO

__all__ = ["A2C", "PPO", "AlgoFactory", "Algorithm"]
