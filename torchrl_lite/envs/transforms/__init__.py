"""Env transforms: a flat, editable list of data transforms applied by ``TransformedEnv``."""

from torchrl_lite.envs.transforms import transforms as _transforms_module
from torchrl_lite.envs.transforms.action import ActionScaling
from torchrl_lite.envs.transforms.atari import EndOfLifeTransform
from torchrl_lite.envs.transforms.augment import RandomCrop, RandomShift
from torchrl_lite.envs.transforms.batch import BatchSizeTransform, RandomCropTensorDict
from torchrl_lite.envs.transforms.clip import ClipTransform, SignTransform
from torchrl_lite.envs.transforms.device_cast import DeviceCastTransform
from torchrl_lite.envs.transforms.episode import (
    FrameSkipTransform,
    InitTracker,
    NoopResetEnv,
    StepCounter,
)
from torchrl_lite.envs.transforms.frames import CatFrames, TimeMaxPool
from torchrl_lite.envs.transforms.gsde import gSDENoise
from torchrl_lite.envs.transforms.image import CenterCrop, GrayScale, Resize, ToTensorImage
from torchrl_lite.envs.transforms.keys import ExcludeTransform, RenameTransform, SelectTransform
from torchrl_lite.envs.transforms.next_obs import NextObservationDelta, NextStateReconstructor
from torchrl_lite.envs.transforms.observation import (
    DoubleToFloat,
    DTypeCastTransform,
    ObservationNorm,
)
from torchrl_lite.envs.transforms.primer import TensorDictPrimer
from torchrl_lite.envs.transforms.return_to_go import DTContext, TargetReturn
from torchrl_lite.envs.transforms.reward import RewardClipping, RewardScaling, RewardSum
from torchrl_lite.envs.transforms.reward2go import Reward2GoTransform
from torchrl_lite.envs.transforms.rnd import RNDTransform
from torchrl_lite.envs.transforms.shape import (
    CatTensors,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    UnsqueezeTransform,
)
from torchrl_lite.envs.transforms.transformed_env import TransformedEnv
from torchrl_lite.envs.transforms.transforms import Compose, Transform
from torchrl_lite.envs.transforms.vecnorm import VecNorm

__all__ = [
    "ActionScaling",
    "BatchSizeTransform",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "Compose",
    "DTypeCastTransform",
    "DoubleToFloat",
    "ExcludeTransform",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "InitTracker",
    "NoopResetEnv",
    "ObservationNorm",
    "PermuteTransform",
    "RandomCropTensorDict",
    "RandomCrop",
    "RandomShift",
    "RenameTransform",
    "Resize",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SqueezeTransform",
    "StepCounter",
    "TensorDictPrimer",
    "TargetReturn",
    "Reward2GoTransform",
    "DTContext",
    "TimeMaxPool",
    "ToTensorImage",
    "Transform",
    "TransformedEnv",
    "UnsqueezeTransform",
    "VecNorm",
    "ClipTransform",
    "DeviceCastTransform",
    "EndOfLifeTransform",
    "RNDTransform",
    "gSDENoise",
    "SignTransform",
    "NextObservationDelta",
    "NextStateReconstructor",
]

# TorchRL's scripts import every transform from ``envs.transforms.transforms``, which holds
# the base classes and imports none of the transforms (no import cycle): their names are
# added to it here, once every transform is imported
for _name in __all__:
    setattr(_transforms_module, _name, globals()[_name])
del _name
