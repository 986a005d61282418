"""Modules: models (``torchrl_lite.modules.models``), distributions
(``torchrl_lite.modules.distributions``) and TensorDict modules (actors, exploration)."""

from torchrl_lite.modules.distributions import (
    Categorical,
    Delta,
    GSDEHead,
    GSDENormal,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    NormalParamExtractor,
    NormalParamsWrapper,
    NormalParamWrapper,
    OneHotCategorical,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
    biased_softplus,
)
from torchrl_lite.modules.models import (
    MLP,
    ConvNet,
    DdpgCnnActor,
    DdpgCnnQNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    DreamerActor,
    DuelingCnnDQNet,
    DuelingMlpDQNet,
    GRUModule,
    LSTMModule,
    NoisyLazyLinear,
    NoisyLinear,
    ObsDecoder,
    ObsEncoder,
    RewardHead,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
    SquashDims,
    WorldModelWrapper,
    recurrent_mode,
    reset_noise,
    set_recurrent_mode,
)

__all__ = [
    # distributions
    "Categorical",
    "Delta",
    "GSDEHead",
    "GSDENormal",
    "IndependentNormal",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "NormalParamExtractor",
    "NormalParamsWrapper",
    "NormalParamWrapper",
    "OneHotCategorical",
    "TanhDelta",
    "TanhNormal",
    "TruncatedNormal",
    "biased_softplus",
    # models
    "MLP",
    "ConvNet",
    "DdpgCnnActor",
    "DdpgCnnQNet",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "DuelingCnnDQNet",
    "DuelingMlpDQNet",
    "GRUModule",
    "LSTMModule",
    "NoisyLazyLinear",
    "NoisyLinear",
    "ObsDecoder",
    "ObsEncoder",
    "RSSMPosterior",
    "RSSMPrior",
    "RSSMRollout",
    "DreamerActor",
    "WorldModelWrapper",
    "RewardHead",
    "SquashDims",
    "recurrent_mode",
    "reset_noise",
    "set_recurrent_mode",
]

# TensorDict modules: safe wrappers, actors and critics, Q-value policies, exploration
from torchrl_lite.modules.tensordict_module import (  # noqa: E402
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    AdditiveGaussianModule,
    AdditiveGaussianWrapper,
    ClippedProbabilisticActor,
    DistributionalQValueActor,
    DistributionalQValueModule,
    EGreedyModule,
    EGreedyWrapper,
    ExplorationType,
    OrnsteinUhlenbeckProcessModule,
    OrnsteinUhlenbeckProcessWrapper,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    TanhModule,
    ValueOperator,
    exploration_type,
    set_exploration_type,
)

__all__ += [
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "AdditiveGaussianModule",
    "AdditiveGaussianWrapper",
    "DistributionalQValueActor",
    "DistributionalQValueModule",
    "EGreedyModule",
    "EGreedyWrapper",
    "ExplorationType",
    "OrnsteinUhlenbeckProcessModule",
    "OrnsteinUhlenbeckProcessWrapper",
    "ClippedProbabilisticActor",
    "ProbabilisticActor",
    "QValueActor",
    "QValueModule",
    "SafeModule",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
    "SafeSequential",
    "TanhModule",
    "ValueOperator",
    "exploration_type",
    "set_exploration_type",
]
# TorchRL's random policy (also at torchrl.envs.utils), decision-transformer actors and
# their inference wrapper
from torchrl_lite.modules.models.dt_actors import DTActor, OnlineDTActor  # noqa: E402
from torchrl_lite.modules.tensordict_module.dt_inference import (  # noqa: E402
    DecisionTransformerInferenceWrapper,
)
from torchrl_lite.modules.tensordict_module.random_policy import RandomPolicy  # noqa: E402, F401

__all__ += ["DTActor", "OnlineDTActor", "DecisionTransformerInferenceWrapper"]

# TorchRL's diffusion policy (DDPM reverse chain)
from torchrl_lite.modules.tensordict_module.diffusion import DiffusionActor  # noqa: E402

__all__ += ["DiffusionActor"]
