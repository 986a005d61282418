"""Models: plain ``nn.Module`` networks (MLP, ConvNet, dueling Q-nets, noisy layers) and
recurrent TensorDict modules (``LSTMModule``, ``GRUModule``)."""

from torchrl_lite.modules.models._feedforward import (
    MLP,
    ConvNet,
    DuelingCnnDQNet,
    DuelingMlpDQNet,
    SquashDims,
)
from torchrl_lite.modules.models.batchrenorm import BatchRenorm1d
from torchrl_lite.modules.models.ddpg import DdpgMlpActor, DdpgMlpQNet
from torchrl_lite.modules.models.ddpg_cnn import DdpgCnnActor, DdpgCnnQNet
from torchrl_lite.modules.models.dreamer import (
    ObsDecoder,
    ObsEncoder,
    RewardHead,
    RSSMPosterior,
    RSSMPrior,
)
from torchrl_lite.modules.models.dreamer_compat import DreamerActor, RSSMRollout, WorldModelWrapper
from torchrl_lite.modules.models.dreamer_v3 import (
    DreamerV3MLP,
    RSSMPosteriorV3,
    RSSMPriorV3,
    RSSMRolloutV3,
)
from torchrl_lite.modules.models.noisy import NoisyLazyLinear, NoisyLinear, reset_noise
from torchrl_lite.modules.models.recurrent import (
    GRUModule,
    LSTMModule,
    recurrent_mode,
    set_recurrent_mode,
)
from torchrl_lite.modules.models.two_hot import SymExpTwoHot

__all__ = [
    "BatchRenorm1d",
    "DdpgCnnActor",
    "DdpgCnnQNet",
    "MLP",
    "ConvNet",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "DuelingCnnDQNet",
    "DuelingMlpDQNet",
    "GRUModule",
    "LSTMModule",
    "NoisyLazyLinear",
    "ObsDecoder",
    "ObsEncoder",
    "RSSMPosterior",
    "RSSMPrior",
    "RSSMRollout",
    "DreamerActor",
    "DreamerV3MLP",
    "RSSMPosteriorV3",
    "RSSMPriorV3",
    "RSSMRolloutV3",
    "SymExpTwoHot",
    "WorldModelWrapper",
    "RewardHead",
    "NoisyLinear",
    "SquashDims",
    "recurrent_mode",
    "reset_noise",
    "set_recurrent_mode",
]
