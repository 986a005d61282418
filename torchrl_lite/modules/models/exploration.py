"""Generalized state-dependent exploration as a layer (Raffin et al. 2021,
https://arxiv.org/abs/2005.05719), under TorchRL's ``modules.models.exploration`` path.

With the mean action ``mu [*B, A]``, the features ``s [*B, S]`` and a noise matrix
``eps [*B, A, S]`` drawn at the start of each episode (``"_eps_gSDE"``, kept by the env's
``gSDENoise`` transform), the action is ``mu + (sigma * eps) @ s`` while exploring and
``mu`` otherwise; its std is ``sqrt(sum_j (sigma_ij s_j)^2)``. ``sigma [A, S]`` is learned
(``softplus`` of a parameter, at least ``scale_min``).
"""

from __future__ import annotations

import math

import torch
from torch import distributions as d
from torch import nn
from torch.nn import functional as F

from torchrl_lite.modules.tensordict_module.exploration import ExplorationType, exploration_type

__all__ = ["gSDEModule", "LazygSDEModule"]


def _inv_softplus(x: float) -> float:
    return math.log(math.expm1(x))


class gSDEModule(nn.Module):  # noqa: N801  (TorchRL's name)
    """``(mu, state, eps) -> (mu, sigma, action, eps)``: gSDE's noisy action and its std.

    Args:
        action_dim: ``A``.
        state_dim: ``S``, the size of the features the noise multiplies.
        sigma_init: initial ``sigma`` (default ``sqrt((1 - scale_min) / S)``).
        scale_min: lower bound of ``sigma``.
        scale_max: upper bound of ``sigma``.
        learn_sigma: learn ``sigma`` (else a fixed buffer).
        transform: a ``torch.distributions`` transform applied to the action (e.g. tanh).
        device: where to create the parameters.

    Example:
        >>> m = gSDEModule(2, 3)
        >>> [t.shape for t in m(torch.zeros(4, 2), torch.ones(4, 3), None)]
        [torch.Size([4, 2]), torch.Size([4, 2]), torch.Size([4, 2]), torch.Size([4, 2, 3])]
    """

    def __init__(
        self,
        action_dim: int,
        state_dim: int,
        sigma_init: float | None = None,
        scale_min: float = 0.01,
        scale_max: float = 10.0,
        learn_sigma: bool = True,
        transform: d.Transform | None = None,
        device=None,
    ):
        super().__init__()
        self.action_dim, self.state_dim = action_dim, state_dim
        self.scale_min, self.scale_max = scale_min, scale_max
        self.learn_sigma, self.transform = learn_sigma, transform
        if sigma_init is None:
            sigma_init = math.sqrt((1.0 - scale_min) / state_dim)
        if learn_sigma:
            start = torch.full((action_dim, state_dim), _inv_softplus(sigma_init), device=device)
            self.log_sigma = nn.Parameter(start)
        else:
            self.register_buffer(
                "_sigma", torch.full((action_dim, state_dim), sigma_init, device=device)
            )

    @property
    def sigma(self) -> torch.Tensor:
        raw = F.softplus(self.log_sigma) if self.learn_sigma else self._sigma
        return raw.clamp(self.scale_min, self.scale_max)

    def forward(self, mu: torch.Tensor, state: torch.Tensor, _eps_gSDE: torch.Tensor | None):  # noqa: N803
        sigma = self.sigma  # [A, S]
        if state.shape[:-1] != mu.shape[:-1]:
            raise ValueError(
                f"gSDEModule: mu {list(mu.shape)} and state {list(state.shape)} must share "
                "their batch dims."
            )
        batch = state.shape[:-1]
        exploring = exploration_type() == ExplorationType.RANDOM
        fresh = _eps_gSDE is None or (
            _eps_gSDE.numel() == math.prod(batch) and bool((_eps_gSDE == 0).all())
        )  # no noise yet (or the primer's zeros, or the one-value placeholder): draw it
        if fresh:
            draw = torch.randn if exploring else torch.zeros
            _eps_gSDE = draw(*batch, *sigma.shape, device=sigma.device, dtype=sigma.dtype)
        noise = ((sigma * _eps_gSDE) @ state.unsqueeze(-1)).squeeze(-1)  # [*B, A]
        action = mu + noise if exploring else mu
        std = (sigma * state.unsqueeze(-2)).pow(2).sum(-1).clamp_min(1e-5).sqrt()  # [*B, A]
        if self.transform is not None:
            action = self.transform(action)
        return mu, std, action, _eps_gSDE


class LazygSDEModule(gSDEModule):  # noqa: N801  (TorchRL's name)
    """A ``gSDEModule`` whose ``action_dim`` and ``state_dim`` come from the first call.

    Example:
        >>> m = LazygSDEModule()
        >>> m(torch.zeros(4, 2), torch.ones(4, 3), None)[1].shape
        torch.Size([4, 2])
    """

    def __init__(self, sigma_init=None, scale_min=0.01, scale_max=10.0, learn_sigma=True,
                 transform=None, device=None):  # fmt: skip
        nn.Module.__init__(self)
        self.scale_min, self.scale_max = scale_min, scale_max
        self.learn_sigma, self.transform = learn_sigma, transform
        self._sigma_init, self._device = sigma_init, device
        self.action_dim = self.state_dim = None

    def forward(self, mu, state, _eps_gSDE):  # noqa: N803
        if self.action_dim is None:
            built = gSDEModule(
                mu.shape[-1], state.shape[-1], self._sigma_init, self.scale_min,
                self.scale_max, self.learn_sigma, None, self._device or mu.device,
            )  # fmt: skip
            self.action_dim, self.state_dim = built.action_dim, built.state_dim
            if self.learn_sigma:
                self.log_sigma = built.log_sigma
            else:
                self.register_buffer("_sigma", built._sigma)
        return super().forward(mu, state, _eps_gSDE)
