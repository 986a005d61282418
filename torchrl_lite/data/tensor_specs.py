"""Tensor specs, at TorchRL's import path ``torchrl.data.tensor_specs``.

The specs live in ``_spec_base.py`` (leaf specs), ``_onehot_specs.py``,
``composite_spec.py`` and ``_spec_stack.py`` (specs of copies that differ); this module
only re-exports them, with the seed era's names (TorchRL < 0.6) so older scripts run.
"""

from torchrl_lite.data._onehot_specs import MultiOneHot, OneHot
from torchrl_lite.data._spec_base import (  # noqa: F401  (_size: used by envs/)
    Binary,
    Bounded,
    Categorical,
    MultiCategorical,
    ShapeLike,
    TensorSpec,
    Unbounded,
    UnboundedDiscreteTensorSpec,
    _size,
)
from torchrl_lite.data._spec_boxes import (  # noqa: F401  (``spec.space`` types)
    CategoricalBox,
    ContinuousBox,
    DiscreteBox,
)
from torchrl_lite.data.composite_spec import Composite

__all__ = [
    "TensorSpec",
    "Unbounded",
    "Bounded",
    "Categorical",
    "OneHot",
    "MultiCategorical",
    "MultiOneHot",
    "Binary",
    "Composite",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "BoundedTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "CompositeSpec",
]

# Names of the seed era (TorchRL < 0.6), kept as aliases so older scripts run.
UnboundedContinuousTensorSpec = Unbounded
BoundedTensorSpec = Bounded
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
BinaryDiscreteTensorSpec = Binary
CompositeSpec = Composite
