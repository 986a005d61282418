"""Action distributions: squashed and independent Normals, deltas, (masked) categoricals.

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

__all__ = [
    "Categorical",
    "Delta",
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
