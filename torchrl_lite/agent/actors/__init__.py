"""Seed 000's actors: ``OnPolicyActor``, ``OffPolicyActor`` and their feature extractors."""

from torchrl_lite.agent.actors.feature_extractors import CNN, MLP, DictNet, get_feature_extractor
from torchrl_lite.agent.actors.off_policy import OffPolicyActor
from torchrl_lite.agent.actors.on_policy import OnPolicyActor

__all__ = ["CNN", "MLP", "DictNet", "OffPolicyActor", "OnPolicyActor", "get_feature_extractor"]
