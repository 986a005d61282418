"""Model-based envs: learned world models stepped like envs (TorchRL's
``torchrl.envs.model_based`` package; the Dreamer env lives in ``.dreamer``).

Example:
    >>> from torchrl_lite.envs.model_based import DreamerEnv
    >>> from torchrl_lite.envs.model_based.dreamer import DreamerEnv as Same
    >>> DreamerEnv is Same
    True
"""

from torchrl_lite.envs.model_based.dreamer import BELIEF, STATE, DreamerEnv
from torchrl_lite.envs.model_based.world_model import (
    DreamerDecoder,
    ModelBasedEnvBase,
    WorldModelDreamerEnv,
)

__all__ = [
    "DreamerEnv",
    "DreamerDecoder",
    "ModelBasedEnvBase",
    "WorldModelDreamerEnv",
    "STATE",
    "BELIEF",
]
