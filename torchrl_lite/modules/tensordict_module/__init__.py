"""TensorDict modules: safe wrappers, actors and critics, Q-value policies, exploration."""

from torchrl_lite.modules.tensordict_module.actors import (
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    DistributionalQValueActor,
    DistributionalQValueModule,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    ValueOperator,
)
from torchrl_lite.modules.tensordict_module.clipped import ClippedProbabilisticActor
from torchrl_lite.modules.tensordict_module.common import SafeModule, SafeSequential
from torchrl_lite.modules.tensordict_module.dt_inference import DecisionTransformerInferenceWrapper
from torchrl_lite.modules.tensordict_module.exploration import (
    AdditiveGaussianModule,
    AdditiveGaussianWrapper,
    EGreedyModule,
    EGreedyWrapper,
    ExplorationType,
    OrnsteinUhlenbeckProcessModule,
    OrnsteinUhlenbeckProcessWrapper,
    exploration_type,
    set_exploration_type,
)
from torchrl_lite.modules.tensordict_module.probabilistic import (
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
)
from torchrl_lite.modules.tensordict_module.tanh import TanhModule

__all__ = [
    "DecisionTransformerInferenceWrapper",
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "AdditiveGaussianModule",
    "AdditiveGaussianWrapper",
    "ClippedProbabilisticActor",
    "TanhModule",
    "DistributionalQValueActor",
    "DistributionalQValueModule",
    "EGreedyModule",
    "EGreedyWrapper",
    "ExplorationType",
    "OrnsteinUhlenbeckProcessModule",
    "OrnsteinUhlenbeckProcessWrapper",
    "ProbabilisticActor",
    "QValueActor",
    "QValueModule",
    "SafeModule",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
    "SafeSequential",
    "ValueOperator",
    "exploration_type",
    "set_exploration_type",
]
