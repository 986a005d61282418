"""Seed 000's storages: on-policy rollouts with advantages, replay buffers."""

from torchrl_lite.agent.storages.on_policy import (
    GAEBuffer,
    OnPolicyGAEBuffer,
    VanillaOnPolicyBuffer,
)
from torchrl_lite.agent.storages.replay import NStepReplayBuffer, PERBuffer, ReplayBuffer

__all__ = [
    "GAEBuffer",
    "NStepReplayBuffer",
    "OnPolicyGAEBuffer",
    "PERBuffer",
    "ReplayBuffer",
    "VanillaOnPolicyBuffer",
]
