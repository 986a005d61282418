"""Action distributions: squashed and independent Normals, gSDE, deltas, (masked) categoricals.

tensordict's ``Delta``, ``OneHotCategorical``, ``NormalParamExtractor`` and
``biased_softplus`` are re-exported so that TorchRL's import paths work unchanged.
"""

from tensordict.nn import biased_softplus
from tensordict.nn.distributions import Delta, NormalParamExtractor

from torchrl_lite.modules.distributions.continuous import (
    IndependentNormal,
    NormalParamsWrapper,
    NormalParamWrapper,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
)
from torchrl_lite.modules.distributions.discrete import (
    Categorical,
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
)
from torchrl_lite.modules.distributions.gsde import GSDEHead, GSDENormal

__all__ = [
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
]
