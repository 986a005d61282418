"""TorchRL's ``torchrl.envs.llm`` path, for the transforms kept there that are not about LLMs.

torchrl_lite ships no language-model envs, tokenizers or tool transforms. TorchRL keeps a
few general transforms under this path (``PolicyVersion``, used by its Dreamer example to
tag collected frames with the policy's version); this package holds only those, so that
``from torchrl_lite.envs.llm.transforms import PolicyVersion`` works as TorchRL's import.
"""

from torchrl_lite.envs.llm.transforms import PolicyVersion

__all__ = ["PolicyVersion"]
