"""Exploration, at TorchRL's import path: the exploration type, the modules that perturb
the policy's action (``_exploration_modules.py``) and the policy + module wrappers
(``exploration_wrappers.py``); this module only re-exports them."""

from torchrl_lite.modules.tensordict_module._exploration_modules import (
    AdditiveGaussianModule,
    EGreedyModule,
    ExplorationType,
    OrnsteinUhlenbeckProcessModule,
    exploration_type,
    set_exploration_type,
)
from torchrl_lite.modules.tensordict_module.exploration_wrappers import (
    AdditiveGaussianWrapper,
    EGreedyWrapper,
    OrnsteinUhlenbeckProcessWrapper,
)

__all__ = [
    "ExplorationType",
    "set_exploration_type",
    "exploration_type",
    "EGreedyModule",
    "EGreedyWrapper",
    "AdditiveGaussianModule",
    "AdditiveGaussianWrapper",
    "OrnsteinUhlenbeckProcessModule",
    "OrnsteinUhlenbeckProcessWrapper",
]
