"""Seed 000's algorithms (PyTorchRL's names and hyperparameters) over the library's losses."""

from torchrl_lite.agent.algos.base import Algorithm
from torchrl_lite.agent.algos.off_policy import DDPG, DDQN, DQN, SAC, TD3
from torchrl_lite.agent.algos.on_policy import A2C, PPO

__all__ = ["A2C", "DDPG", "DDQN", "DQN", "PPO", "SAC", "TD3", "Algorithm"]
