"""Seed 000's feature extractors: observation -> feature vector, ``get_feature_extractor``.

Each extractor is an ``nn.Module`` built from a gymnasium observation space, with
``in_keys`` (the TensorDict entries it reads, in ``forward``'s argument order) and
``num_outputs`` (its feature size). The actors put their heads (action distribution,
value) on top.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite._utils import closest_match
from torchrl_lite.recipes.common import PixelEncoder

__all__ = ["CNN", "MLP", "DictNet", "get_feature_extractor"]


def _box_size(space, name: str) -> int:
    if not isinstance(space, gymnasium.spaces.Box):
        raise TypeError(f"{name} needs a gymnasium Box observation space, got {space!r}.")
    return int(np.prod(space.shape))


def _hidden_layers(in_features: int, hidden_sizes, activation) -> tuple[list, int]:
    layers, width = [], in_features
    for size in hidden_sizes:
        layers += [nn.Linear(width, int(size)), activation()]
        width = int(size)
    return layers, width


class MLP(nn.Module):
    """Flattened Box observations through ``Linear + activation`` layers.

    Seed 000's feature extractor, under its seed name inside ``agent/`` only; the
    library's own ``MLP`` is :class:`torchrl_lite.modules.MLP`. The layers are spelled out
    (not built on that one) so that saved actors keep their parameter names.

    The defaults (two tanh layers of 64) with a linear head give the PPO recipe's network.

    Example:
        >>> space = gymnasium.spaces.Box(-1, 1, (3,))
        >>> MLP(space)(torch.zeros(5, 3)).shape
        torch.Size([5, 64])
    """

    def __init__(self, input_space, hidden_sizes=(64, 64), activation=nn.Tanh):
        super().__init__()
        layers, self.num_outputs = _hidden_layers(
            _box_size(input_space, "MLP"), hidden_sizes, activation
        )
        self.net = nn.Sequential(nn.Flatten(-len(input_space.shape)), *layers)
        self.in_keys = [K.OBSERVATION]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


class CNN(nn.Module):
    """Image observations ``[*B, C, H, W]`` (uint8 0-255 or float) through the Nature-DQN
    convolutions (the recipes' ``PixelEncoder``) and one ``Linear + ReLU`` layer.

    Example:
        >>> space = gymnasium.spaces.Box(0, 255, (4, 64, 64), np.uint8)
        >>> CNN(space)(torch.zeros(2, 4, 64, 64, dtype=torch.uint8)).shape
        torch.Size([2, 512])
    """

    def __init__(self, input_space, hidden_size: int = 512):
        super().__init__()
        shape = getattr(input_space, "shape", None)
        if not isinstance(input_space, gymnasium.spaces.Box) or len(shape) != 3:
            raise TypeError(
                f"CNN needs a Box observation space of images [C, H, W], got {input_space!r}."
            )
        self.encoder = PixelEncoder(shape[0])
        with torch.no_grad():
            features = self.encoder(torch.zeros(1, *shape, dtype=torch.uint8)).shape[-1]
        self.head = nn.Sequential(nn.Linear(features, hidden_size), nn.ReLU())
        self.num_outputs = hidden_size
        self.in_keys = [K.OBSERVATION]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.dtype.is_floating_point:  # float images in [0, 1]: back to PixelEncoder's scale
            obs = obs * 255
        return self.head(self.encoder(obs))


class DictNet(MLP):
    """Dict observations: each Box entry flattened, concatenated (keys in sorted order)
    and passed through an :class:`MLP`.

    Example:
        >>> space = gymnasium.spaces.Dict({"a": gymnasium.spaces.Box(-1, 1, (2,)),
        ...     "b": gymnasium.spaces.Box(-1, 1, (3,))})
        >>> DictNet(space)(torch.zeros(4, 2), torch.zeros(4, 3)).shape
        torch.Size([4, 64])
    """

    def __init__(self, input_space, hidden_sizes=(64, 64), activation=nn.Tanh):
        if not isinstance(input_space, gymnasium.spaces.Dict):
            raise TypeError(
                f"DictNet needs a gymnasium Dict observation space, got {input_space!r}."
            )
        keys = sorted(input_space.spaces)
        size = sum(_box_size(input_space[k], f"DictNet entry {k!r}") for k in keys)
        super().__init__(gymnasium.spaces.Box(-np.inf, np.inf, (size,)), hidden_sizes, activation)
        self.in_keys = keys

    def forward(self, *entries: torch.Tensor) -> torch.Tensor:
        batch = entries[0].shape[: entries[0].dim() - 1] if entries[0].dim() > 1 else ()
        flat = [e.float().reshape(*batch, -1) for e in entries]
        return self.net(torch.cat(flat, dim=-1))


_EXTRACTORS = {"MLP": MLP, "CNN": CNN, "DictNet": DictNet}


def get_feature_extractor(name: str):
    """The feature-extractor class called ``name``: ``"MLP"``, ``"CNN"`` or ``"DictNet"``.

    Example:
        >>> get_feature_extractor("MLP").__name__
        'MLP'
    """
    if name not in _EXTRACTORS:
        lower = {k.lower(): k for k in _EXTRACTORS}
        close = closest_match(str(name).lower(), list(lower))
        hint = f" Did you mean {lower[close]!r}?" if close is not None else ""
        raise ValueError(
            f"Unknown feature extractor {name!r}.{hint} Known: {', '.join(_EXTRACTORS)}."
        )
    return _EXTRACTORS[name]
