"""TorchRL's module path for the Minari dataset (``torchrl.data.datasets.minari_data``).

Example:
    >>> from torchrl_lite.data.datasets.minari_data import MinariExperienceReplay
    >>> MinariExperienceReplay.dataset_name
    'minari'
"""

from torchrl_lite.data.datasets.minari import MinariExperienceReplay

__all__ = ["MinariExperienceReplay"]
