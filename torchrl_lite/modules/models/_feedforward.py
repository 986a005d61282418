"""Feed-forward models: ``MLP``, ``ConvNet`` and the dueling Q-networks built on them.

Every model is a plain ``nn.Module`` taking and returning tensors; wrap it in a
``TensorDictModule`` (or ``SafeModule``) to give it keys. Input sizes may be left out
(``None``): the first layer is then lazy and infers its size from the first call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from torchrl_lite.modules.models.noisy import NoisyLazyLinear, NoisyLinear
from torchrl_lite.modules.models.utils import SquashDims

__all__ = ["MLP", "ConvNet", "SquashDims", "DuelingCnnDQNet", "DuelingMlpDQNet"]

_DEFAULT_DEPTH = 3
_DEFAULT_NUM_CELLS = 32


def _per_layer(value, n: int, name: str) -> list:
    """``value`` repeated ``n`` times, or the list itself when it already has ``n`` items."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = list(value)
        if len(value) != n:
            raise ValueError(f"{name} has {len(value)} entries, expected one per layer ({n}).")
        return value
    return [value] * n


def _num_cells_and_depth(num_cells, depth, default_cells: int) -> list[int]:
    """The width of each hidden layer from ``num_cells`` (int or list) and ``depth``."""
    if isinstance(num_cells, Sequence):
        num_cells = [int(c) for c in num_cells]
        if depth is not None and depth != len(num_cells):
            raise ValueError(
                f"depth={depth} does not match num_cells={num_cells} ({len(num_cells)} layers); "
                "pass one of them, or a depth equal to len(num_cells)."
            )
        return num_cells
    if depth is None:
        depth = _DEFAULT_DEPTH
    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be an int >= 0, got {depth!r}")
    return [default_cells if num_cells is None else int(num_cells)] * depth


def _make(cls, kwargs: dict | None, *args):
    return cls(*args, **(kwargs or {}))


def _check_classes(owner: str, **classes) -> None:
    """Layer arguments are classes (built once per layer), not module instances."""
    for name, cls in classes.items():
        if isinstance(cls, nn.Module):
            raise TypeError(
                f"{owner}: {name} must be a class, got the module instance {cls!r}; pass "
                f"{name}={type(cls).__name__} (and its arguments in the matching *_kwargs)."
            )


def _check_widths(in_features, cells: list[int], out_features) -> None:
    """Every layer size is >= 1: a zero-width layer would build and silently output nothing."""
    outs = list(out_features) if isinstance(out_features, Sequence) else [out_features]
    named = [("in_features", in_features), ("num_cells", cells), ("out_features", outs)]
    for name, values in named:
        values = values if isinstance(values, list) else [values]
        if any(v is not None and int(v) < 1 for v in values):
            shown = values if len(values) > 1 or name == "num_cells" else values[0]
            raise ValueError(f"MLP: {name} must be >= 1, got {shown}.")


class _SingleBias(nn.Module):
    """Adds one learned scalar to every output (``MLP(single_bias_last_layer=True)``)."""

    def __init__(self, device=None):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class _Reshape(nn.Module):
    """Reshapes the last dim into ``shape`` (``MLP`` with a tuple ``out_features``)."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(*x.shape[:-1], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class MLP(nn.Sequential):
    """A multi-layer perceptron: ``depth`` hidden layers of ``num_cells`` units, then an output layer.

    Several inputs are concatenated along the last dim (``mlp(obs, action)``), so the same
    class serves as a state-action value network.

    Args:
        in_features: input size; ``None`` makes the first layer lazy (inferred at first call).
        out_features: output size, an int or a shape (the output is reshaped to
            ``[*B, *out_features]``); ``None`` ends the network with the last hidden layer.
        num_cells: width of the hidden layers, an int (with ``depth``) or one int per layer.
            Default 32.
        depth: number of hidden layers when ``num_cells`` is an int (default 3).
        activation_class: activation after each hidden layer (default ``nn.Tanh``);
            ``activation`` is accepted as an alias.
        activation_kwargs: keyword arguments of the activation (a dict, or one per layer).
        norm_class: normalisation after each hidden linear layer, built as
            ``norm_class(num_cells)`` or ``norm_class(**norm_kwargs)``.
        norm_kwargs: keyword arguments of the normalisation (a dict, or one per layer).
        dropout: dropout probability after each hidden activation (None: no dropout).
        bias_last_layer: give the output layer a bias.
        single_bias_last_layer: one scalar bias shared by every output instead.
        layer_class: the linear layer class (``nn.Linear``, ``NoisyLinear``, ...), called as
            ``layer_class(in, out, bias=..., **layer_kwargs)``.
        layer_kwargs: keyword arguments of the linear layers.
        activate_last_layer: apply the activation after the output layer too.
        device: where to create the parameters.

    Example:
        >>> mlp = MLP(num_cells=[64, 64], out_features=32, activation=nn.ELU)
        >>> mlp(torch.randn(10, 7)).shape
        torch.Size([10, 32])
        >>> MLP(in_features=3, out_features=(2, 4), num_cells=16, depth=2)(torch.randn(5, 3)).shape
        torch.Size([5, 2, 4])
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        in_features: int | None = None,
        out_features: int | Sequence[int] | None = None,
        num_cells: int | Sequence[int] | None = None,
        depth: int | None = None,
        activation_class: type[nn.Module] = nn.Tanh,
        activation_kwargs: dict | Sequence[dict] | None = None,
        norm_class: type[nn.Module] | None = None,
        norm_kwargs: dict | Sequence[dict] | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        single_bias_last_layer: bool = False,
        layer_class: type[nn.Module] = nn.Linear,
        layer_kwargs: dict | None = None,
        activate_last_layer: bool = False,
        device=None,
        *,
        activation: type[nn.Module] | None = None,
    ):
        if activation is not None:
            activation_class = activation
        _check_classes(
            "MLP", activation_class=activation_class, norm_class=norm_class, layer_class=layer_class
        )
        if out_features is None and num_cells is None and depth is None:
            raise ValueError("MLP needs out_features, num_cells or depth.")
        cells = _num_cells_and_depth(num_cells, depth, _DEFAULT_NUM_CELLS)
        if isinstance(out_features, Sequence):
            out_shape = tuple(int(d) for d in out_features)
            out_size = math.prod(out_shape)
        else:
            out_shape = None
            out_size = out_features
        widths = cells + ([out_size] if out_size is not None else [])
        if not widths:
            raise ValueError("MLP with depth=0 needs out_features.")
        _check_widths(in_features, cells, out_features)
        n_act = len(cells) + (1 if activate_last_layer and out_size is not None else 0)
        act_kwargs = _per_layer(activation_kwargs, max(n_act, 1), "activation_kwargs")
        n_norm = len(cells) + (1 if activate_last_layer and out_size is not None else 0)
        nrm_kwargs = _per_layer(norm_kwargs, max(n_norm, 1), "norm_kwargs")
        layers: list[nn.Module] = []
        prev = in_features
        for i, width in enumerate(widths):
            is_out = out_size is not None and i == len(widths) - 1
            bias = (bias_last_layer and not single_bias_last_layer) if is_out else True
            layers.append(self._linear(layer_class, layer_kwargs, prev, width, bias, device))
            if is_out and single_bias_last_layer:
                layers.append(_SingleBias(device))
            if not is_out or activate_last_layer:
                if norm_class is not None:
                    kw = nrm_kwargs[i]
                    norm = norm_class(**kw) if kw else norm_class(width)
                    layers.append(norm.to(device) if device is not None else norm)
                layers.append(_make(activation_class, act_kwargs[i]))
                if dropout:
                    layers.append(nn.Dropout(dropout))
            prev = width
        if out_shape is not None:
            layers.append(_Reshape(out_shape))
        super().__init__(*layers)
        self.in_features = in_features
        self.out_features = out_features
        self.num_cells = cells

    @staticmethod
    def _linear(layer_class, layer_kwargs, n_in, n_out, bias, device) -> nn.Module:
        kwargs = dict(layer_kwargs or {})
        if device is not None:
            kwargs.setdefault("device", device)
        if n_in is None:
            if layer_class is nn.Linear:
                return nn.LazyLinear(n_out, bias=bias, **kwargs)
            if layer_class is NoisyLinear:
                return NoisyLazyLinear(n_out, bias=bias, **kwargs)
            raise ValueError(
                f"MLP(in_features=None) makes the first layer lazy, which works with nn.Linear "
                f"and NoisyLinear; pass in_features to use {layer_class.__name__}."
            )
        return layer_class(n_in, n_out, bias=bias, **kwargs)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        return super().forward(x)


class ConvNet(nn.Module):
    """A stack of 2-d convolutions (each followed by an activation), then an aggregator.

    Inputs are ``[*B, C, H, W]`` with any number of batch dims (flattened internally);
    the output is ``[*B, F]`` with the default ``SquashDims`` aggregator.

    Args:
        in_features: input channels; ``None`` makes the first convolution lazy.
        depth: number of convolutions when ``num_cells`` is an int (default 3).
        num_cells: output channels, an int (with ``depth``) or one per layer (default 32).
        kernel_sizes: kernel size, an int or one per layer.
        strides: stride, an int or one per layer.
        paddings: padding, an int or one per layer.
        activation_class: activation after each convolution (default ``nn.ELU``).
        activation_kwargs: keyword arguments of the activation.
        norm_class: normalisation after each convolution (before the activation), built as
            ``norm_class(channels)`` or ``norm_class(**norm_kwargs)``.
        norm_kwargs: keyword arguments of the normalisation.
        bias_last_layer: give the last convolution a bias.
        aggregator_class: module applied to the ``[N, C, H, W]`` features (default
            ``SquashDims``); ``None`` keeps the feature maps.
        aggregator_kwargs: keyword arguments of the aggregator.
        squeeze_output: remove trailing singleton dims of the per-sample output.
        device: where to create the parameters.

    Example:
        >>> net = ConvNet(bias_last_layer=True, depth=None, num_cells=[32, 64, 64],
        ...               kernel_sizes=[8, 4, 3], strides=[4, 2, 1])
        >>> net(torch.zeros(2, 5, 3, 84, 84)).shape
        torch.Size([2, 5, 3136])
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        in_features: int | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        paddings: int | Sequence[int] = 0,
        activation_class: type[nn.Module] = nn.ELU,
        activation_kwargs: dict | None = None,
        norm_class: type[nn.Module] | None = None,
        norm_kwargs: dict | None = None,
        bias_last_layer: bool = True,
        aggregator_class: type[nn.Module] | None = SquashDims,
        aggregator_kwargs: dict | None = None,
        squeeze_output: bool = False,
        device=None,
        *,
        activation: type[nn.Module] | None = None,
    ):
        super().__init__()
        if activation is not None:
            activation_class = activation
        _check_classes("ConvNet", activation_class=activation_class, norm_class=norm_class)
        cells = _num_cells_and_depth(num_cells, depth, _DEFAULT_NUM_CELLS)
        if not cells:
            raise ValueError("ConvNet needs at least one layer (depth >= 1).")
        n = len(cells)
        kernels = _per_layer(kernel_sizes, n, "kernel_sizes")
        strides_ = _per_layer(strides, n, "strides")
        pads = _per_layer(paddings, n, "paddings")
        layers: list[nn.Module] = []
        prev = in_features
        for i, (width, k, s, p) in enumerate(zip(cells, kernels, strides_, pads)):
            bias = bias_last_layer if i == n - 1 else True
            if prev is None:
                conv = nn.LazyConv2d(width, k, stride=s, padding=p, bias=bias, device=device)
            else:
                conv = nn.Conv2d(prev, width, k, stride=s, padding=p, bias=bias, device=device)
            layers.append(conv)
            if norm_class is not None:
                norm = norm_class(**norm_kwargs) if norm_kwargs else norm_class(width)
                layers.append(norm.to(device) if device is not None else norm)
            layers.append(_make(activation_class, activation_kwargs))
            prev = width
        self.layers = nn.Sequential(*layers)
        self.aggregator = (
            _make(aggregator_class, aggregator_kwargs) if aggregator_class is not None else None
        )
        self.squeeze_output = squeeze_output
        self.in_features = in_features
        self.num_cells = cells

    @staticmethod
    def default_atari_dqn(num_actions: int) -> nn.Sequential:
        """The Nature-DQN network (Mnih et al. 2015): 3 ReLU convolutions, then a 512-unit MLP.

        Convolutions of 32, 64 and 64 channels, kernels 8, 4, 3 and strides 4, 2, 1 (lazy
        input channels), then ``MLP`` with one hidden layer of 512 ReLU units and
        ``num_actions`` outputs: ``[*B, C, 84, 84] -> [*B, num_actions]``.

        Example:
            >>> net = ConvNet.default_atari_dqn(6)
            >>> net(torch.zeros(2, 4, 84, 84)).shape
            torch.Size([2, 6])
        """
        return nn.Sequential(
            ConvNet(
                activation_class=nn.ReLU,
                num_cells=[32, 64, 64],
                kernel_sizes=[8, 4, 3],
                strides=[4, 2, 1],
            ),
            MLP(activation_class=nn.ReLU, out_features=num_actions, num_cells=[512]),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 3:
            raise ValueError(
                f"ConvNet expects inputs shaped [*B, C, H, W] (or [C, H, W]), got {list(x.shape)}."
            )
        batch = x.shape[:-3]
        out = self.layers(x.reshape(-1, *x.shape[-3:]))  # [N, C', H', W']
        if self.aggregator is not None:
            out = self.aggregator(out)  # [N, F] with SquashDims
        out = out.reshape(*batch, *out.shape[1:])
        if self.squeeze_output:
            while out.dim() > len(batch) and out.shape[-1] == 1:
                out = out.squeeze(-1)
        return out


def _dueling(value: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """Q = V + A - mean(A): the dueling aggregation of Wang et al. (2016)."""
    return value + advantage - advantage.mean(-1, keepdim=True)


class DuelingCnnDQNet(nn.Module):
    """A dueling Q-network on images: a ``ConvNet`` trunk, then value and advantage ``MLP`` heads.

    ``Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)`` (Wang et al., 2016,
    https://arxiv.org/abs/1511.06581).

    Args:
        out_features: number of actions (size of the advantage head).
        out_features_value: size of the value head (default 1).
        cnn_kwargs: ``ConvNet`` arguments (default: the Atari DQN trunk,
            ``num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1]``).
        mlp_kwargs: ``MLP`` arguments of both heads (default: one hidden layer of 512, ELU).
        device: where to create the parameters.

    Example:
        >>> net = DuelingCnnDQNet(out_features=6)
        >>> net(torch.zeros(2, 4, 84, 84)).shape
        torch.Size([2, 6])
    """

    def __init__(
        self,
        out_features: int,
        out_features_value: int = 1,
        cnn_kwargs: dict | None = None,
        mlp_kwargs: dict | None = None,
        device=None,
    ):
        super().__init__()
        cnn = {"num_cells": [32, 64, 64], "kernel_sizes": [8, 4, 3], "strides": [4, 2, 1]}
        cnn.update(cnn_kwargs or {})
        mlp = {"depth": 1, "num_cells": 512, "activation_class": nn.ELU}
        mlp.update(mlp_kwargs or {})
        self.features = ConvNet(device=device, **cnn)
        self.advantage = MLP(out_features=out_features, device=device, **mlp)
        self.value = MLP(out_features=out_features_value, device=device, **mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)
        return _dueling(self.value(h), self.advantage(h))


class DuelingMlpDQNet(nn.Module):
    """A dueling Q-network on vectors: an ``MLP`` trunk, then value and advantage heads.

    Args:
        out_features: number of actions (size of the advantage head).
        out_features_value: size of the value head (default 1).
        mlp_kwargs_feature: ``MLP`` arguments of the trunk (default: two layers of 64,
            ELU, the last one activated).
        mlp_kwargs_output: ``MLP`` arguments of both heads (default: one hidden layer of 512).
        device: where to create the parameters.

    Example:
        >>> net = DuelingMlpDQNet(out_features=3)
        >>> net(torch.zeros(5, 8)).shape
        torch.Size([5, 3])
    """

    def __init__(
        self,
        out_features: int,
        out_features_value: int = 1,
        mlp_kwargs_feature: dict | None = None,
        mlp_kwargs_output: dict | None = None,
        device=None,
    ):
        super().__init__()
        feature = {
            "num_cells": [64, 64],
            "activation_class": nn.ELU,
            "out_features": None,
        }
        feature.update(mlp_kwargs_feature or {})
        head = {"depth": 1, "num_cells": 512, "activation_class": nn.ELU}
        head.update(mlp_kwargs_output or {})
        self.features = MLP(device=device, **feature)
        self.advantage = MLP(out_features=out_features, device=device, **head)
        self.value = MLP(out_features=out_features_value, device=device, **head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)
        return _dueling(self.value(h), self.advantage(h))
