"""Seed 000's storages: on-policy rollouts with advantages, replay buffers."""

from torchrl_lite.agent.storages.on_policy import (
    GAEBuffer,
    OnPolicyGAEBuffer,
    VanillaOnPolicyBuffer,
)

__all__ = ["GAEBuffer", "OnPolicyGAEBuffer", "VanillaOnPolicyBuffer"]
