"""Objectives: value estimators and loss modules.

``from torchrl_lite.objectives.value import GAE`` and the functional estimators in
``torchrl_lite.objectives.value.functional`` follow TorchRL's import paths.
"""

from torchrl_lite.objectives.a2c import A2CLoss
from torchrl_lite.objectives.common import (
    HardUpdate,
    LossModule,
    SoftUpdate,
    TargetNetUpdater,
    default_value_kwargs,
)
from torchrl_lite.objectives.dqn import DistributionalDQNLoss, DQNLoss
from torchrl_lite.objectives.ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss
from torchrl_lite.objectives.reinforce import ReinforceLoss
from torchrl_lite.objectives.value import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
    ValueEstimators,
)

__all__ = [
    "HardUpdate",
    "LossModule",
    "SoftUpdate",
    "TargetNetUpdater",
    "default_value_kwargs",
    "A2CLoss",
    "ClipPPOLoss",
    "DQNLoss",
    "DistributionalDQNLoss",
    "KLPENPPOLoss",
    "PPOLoss",
    "ReinforceLoss",
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "ValueEstimators",
]

# off-policy actor-critic, offline and decision-transformer losses
from torchrl_lite.modules.models.two_hot import (  # noqa: E402 (TorchRL exports them here)
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from torchrl_lite.objectives.cql import CQLLoss, DiscreteCQLLoss  # noqa: E402
from torchrl_lite.objectives.ddpg import DDPGLoss  # noqa: E402
from torchrl_lite.objectives.decision_transformer import DTLoss, OnlineDTLoss  # noqa: E402
from torchrl_lite.objectives.dreamer import (  # noqa: E402
    DreamerActorLoss,
    DreamerLoss,
    DreamerModelLoss,
    DreamerValueLoss,
)
from torchrl_lite.objectives.dreamer_compat import (  # noqa: E402, F401 (TorchRL's call forms)
    TorchRLDreamerActorLoss,
)
from torchrl_lite.objectives.dreamer_v3 import (  # noqa: E402
    DreamerV3ActorLoss,
    DreamerV3ModelLoss,
    DreamerV3ValueLoss,
    categorical_kl_balanced,
    categorical_kl_terms,
)
from torchrl_lite.objectives.drq import DrQLoss  # noqa: E402
from torchrl_lite.objectives.iql import DiscreteIQLLoss, IQLLoss  # noqa: E402
from torchrl_lite.objectives.redq import REDQLoss  # noqa: E402
from torchrl_lite.objectives.sac import DiscreteSACLoss, SACLoss  # noqa: E402
from torchrl_lite.objectives.td3 import TD3Loss  # noqa: E402
from torchrl_lite.objectives.td3_bc import TD3BCLoss  # noqa: E402

__all__ += [
    "CQLLoss",
    "DDPGLoss",
    "DTLoss",
    "DiscreteCQLLoss",
    "DiscreteSACLoss",
    "DrQLoss",
    "DreamerActorLoss",
    "DreamerLoss",
    "DreamerModelLoss",
    "DreamerValueLoss",
    "DreamerV3ActorLoss",
    "DreamerV3ModelLoss",
    "DreamerV3ValueLoss",
    "categorical_kl_balanced",
    "categorical_kl_terms",
    "symexp",
    "symlog",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
    "DiscreteIQLLoss",
    "IQLLoss",
    "OnlineDTLoss",
    "REDQLoss",
    "SACLoss",
    "TD3BCLoss",
    "TD3Loss",
]

# RLHF: reward-model loss, KL to the reference (in the reward or as a loss term)
from torchrl_lite.objectives.rlhf import (  # noqa: E402
    BradleyTerryLoss,
    KLPenalizedPPOLoss,
    KLRewardPenalty,
)

__all__ += ["BradleyTerryLoss", "KLPenalizedPPOLoss", "KLRewardPenalty"]

# TorchRL's helper: one optimizer over the groups of several; CrossQ
from torchrl_lite.objectives._loss_maths import group_optimizers  # noqa: E402
from torchrl_lite.objectives.crossq import CrossQLoss  # noqa: E402
from torchrl_lite.objectives.gail import GAILLoss  # noqa: E402
from torchrl_lite.objectives.tqc import TQCLoss  # noqa: E402

__all__ += ["CrossQLoss", "GAILLoss", "TQCLoss", "group_optimizers"]

# behaviour cloning of a diffusion policy
from torchrl_lite.objectives.diffusion_bc import DiffusionBCLoss  # noqa: E402

__all__ += ["DiffusionBCLoss"]
