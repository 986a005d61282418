"""Small data helpers under TorchRL's ``torchrl.data.utils`` path.

``DEVICE_TYPING`` is the type of a device argument (a ``torch.device``, its name, or a
CUDA index), which TorchRL's example scripts use in annotations.
"""

from __future__ import annotations

import torch

__all__ = ["DEVICE_TYPING"]

DEVICE_TYPING = torch.device | str | int
