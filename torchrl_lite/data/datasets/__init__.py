"""Offline datasets read from local files, sampled like replay buffers.

Example:
    >>> from torchrl_lite.data.datasets import D4RLExperienceReplay, MinariExperienceReplay
    >>> D4RLExperienceReplay.default_root().name, MinariExperienceReplay.default_root().name
    ('d4rl', 'datasets')
"""

from torchrl_lite.data.datasets.common import BaseDatasetExperienceReplay
from torchrl_lite.data.datasets.d4rl import D4RLExperienceReplay
from torchrl_lite.data.datasets.minari import MinariExperienceReplay
from torchrl_lite.data.datasets.trajectories import TrajectoryWindows, returns_to_go

__all__ = [
    "BaseDatasetExperienceReplay",
    "D4RLExperienceReplay",
    "MinariExperienceReplay",
    "TrajectoryWindows",
    "returns_to_go",
]
