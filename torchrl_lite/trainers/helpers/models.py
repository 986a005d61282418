"""``ACTIVATIONS``: the activation classes TorchRL's example scripts pick by config name."""

from torch import nn

__all__ = ["ACTIVATIONS"]

# cfg.network.activation -> class, as the IQL / CQL / REDQ scripts look them up
ACTIVATIONS = {"elu": nn.ELU, "tanh": nn.Tanh, "relu": nn.ReLU}
