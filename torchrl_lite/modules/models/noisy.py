"""Noisy linear layers for exploration by parameter noise (Fortunato et al., 2018).

Paper: "Noisy Networks for Exploration", https://arxiv.org/abs/1706.10295. The weights are
``mu + sigma * epsilon`` with factorised Gaussian noise
``epsilon_ij = f(e_out_i) f(e_in_j)``, ``f(x) = sign(x) sqrt(|x|)``. The noise is drawn
again only by ``reset_noise()`` (call it after each optimiser step, or
``model.apply(reset_noise)``); in eval mode the layer uses ``mu`` only.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

__all__ = ["NoisyLinear", "NoisyLazyLinear", "reset_noise"]


def _scaled_noise(size: int, device, dtype) -> torch.Tensor:
    """``f(x) = sign(x) * sqrt(|x|)`` of standard normal noise, shape ``[size]``."""
    x = torch.randn(size, device=device, dtype=dtype)
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """A linear layer with learned factorised Gaussian noise on its weights and bias.

    Args:
        in_features: input size.
        out_features: output size.
        bias: learn a (noisy) bias.
        device: where to create the parameters.
        dtype: dtype of the parameters.
        std_init: initial noise scale ``sigma_0``; sigmas start at ``sigma_0 / sqrt(in_features)``.

    Example:
        >>> layer = NoisyLinear(4, 2)
        >>> x = torch.randn(3, 4)
        >>> torch.equal(layer(x), layer(x))  # the noise only changes on reset_noise()
        True
        >>> layer.reset_noise()
        >>> _ = layer.eval()
        >>> torch.allclose(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
        True
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
        std_init: float = 0.1,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.std_init = std_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features, **kw))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features, **kw))
        self.register_buffer("weight_epsilon", torch.empty(out_features, in_features, **kw))
        if bias:
            self.bias_mu = nn.Parameter(torch.empty(out_features, **kw))
            self.bias_sigma = nn.Parameter(torch.empty(out_features, **kw))
            self.register_buffer("bias_epsilon", torch.empty(out_features, **kw))
        else:
            self.register_parameter("bias_mu", None)
            self.register_parameter("bias_sigma", None)
            self.register_buffer("bias_epsilon", None)
        if in_features > 0:
            self.reset_parameters()
            self.reset_noise()

    def reset_parameters(self) -> None:
        """Draw ``mu`` uniformly in ``±1/sqrt(in_features)`` and set ``sigma`` to its start value."""
        bound = 1.0 / math.sqrt(self.in_features)
        sigma = self.std_init / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight_mu.uniform_(-bound, bound)
            self.weight_sigma.fill_(sigma)
            if self.bias_mu is not None:
                self.bias_mu.uniform_(-bound, bound)
                self.bias_sigma.fill_(sigma)

    @torch.no_grad()
    def reset_noise(self) -> None:
        """Draw new factorised noise ``epsilon = f(e_out) f(e_in)^T``."""
        device, dtype = self.weight_mu.device, self.weight_mu.dtype
        eps_in = _scaled_noise(self.in_features, device, dtype)
        eps_out = _scaled_noise(self.out_features, device, dtype)
        self.weight_epsilon.copy_(torch.outer(eps_out, eps_in))
        if self.bias_epsilon is not None:
            self.bias_epsilon.copy_(eps_out)

    @property
    def weight(self) -> torch.Tensor:
        """The weight in use: ``mu + sigma * epsilon`` in training mode, ``mu`` in eval mode."""
        if self.training:
            return self.weight_mu + self.weight_sigma * self.weight_epsilon
        return self.weight_mu

    @property
    def bias(self) -> torch.Tensor | None:
        if self.bias_mu is None:
            return None
        if self.training:
            return self.bias_mu + self.bias_sigma * self.bias_epsilon
        return self.bias_mu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mu is not None}, std_init={self.std_init}"
        )


class NoisyLazyLinear(LazyModuleMixin, NoisyLinear):
    """A ``NoisyLinear`` whose input size is inferred from the first call.

    Args:
        out_features: output size.
        bias: learn a (noisy) bias.
        device: where to create the parameters.
        dtype: dtype of the parameters.
        std_init: initial noise scale ``sigma_0``.

    Example:
        >>> layer = NoisyLazyLinear(2)
        >>> layer(torch.randn(3, 5)).shape
        torch.Size([3, 2])
        >>> type(layer).__name__, layer.in_features
        ('NoisyLinear', 5)
    """

    cls_to_become = NoisyLinear

    def __init__(
        self, out_features: int, bias: bool = True, device=None, dtype=None, std_init: float = 0.1
    ):
        super().__init__(0, 0, bias=bias, device=device, dtype=dtype, std_init=std_init)
        kw = {"device": device, "dtype": dtype}
        self.out_features = out_features
        self.weight_mu = UninitializedParameter(**kw)
        self.weight_sigma = UninitializedParameter(**kw)
        self.weight_epsilon = UninitializedBuffer(**kw)
        if bias:
            self.bias_mu = UninitializedParameter(**kw)
            self.bias_sigma = UninitializedParameter(**kw)
            self.bias_epsilon = UninitializedBuffer(**kw)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, x: torch.Tensor) -> None:
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.in_features = x.shape[-1]
                shape = (self.out_features, self.in_features)
                self.weight_mu.materialize(shape)
                self.weight_sigma.materialize(shape)
                self.weight_epsilon.materialize(shape)
                if self.bias_mu is not None:
                    self.bias_mu.materialize((self.out_features,))
                    self.bias_sigma.materialize((self.out_features,))
                    self.bias_epsilon.materialize((self.out_features,))
                self.reset_parameters()
                self.reset_noise()


def reset_noise(module: nn.Module) -> None:
    """Call ``module.reset_noise()`` if it has one; use as ``model.apply(reset_noise)``.

    Args:
        module: any module.

    Example:
        >>> net = nn.Sequential(NoisyLinear(3, 4), nn.ReLU(), NoisyLinear(4, 1))
        >>> _ = net.apply(reset_noise)
    """
    fn = getattr(module, "reset_noise", None)
    if callable(fn):
        fn()
