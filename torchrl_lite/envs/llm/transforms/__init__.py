"""The non-LLM transforms of TorchRL's ``torchrl.envs.llm.transforms`` (see ``envs/llm``)."""

from torchrl_lite.envs.llm.transforms.policy_version import PolicyVersion

__all__ = ["PolicyVersion"]
