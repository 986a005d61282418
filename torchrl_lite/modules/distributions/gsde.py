"""Generalized state-dependent exploration (gSDE, Raffin et al. 2022, "Smooth Exploration
for Robotic Reinforcement Learning", https://arxiv.org/abs/2005.05719).

A Gaussian policy ``a = mu(s) + eps(s)`` whose noise is a linear function of the policy's
latent features ``phi(s)``: ``eps(s) = phi(s) @ W`` with ``W ~ N(0, sigma^2)`` (one
``[latent_dim, action_dim]`` matrix per env), held fixed for ``sample_freq`` steps. For a
fixed state the action is therefore Normal with variance ``(phi(s)^2) @ sigma^2`` per
action dimension, which is the distribution the log-probability is taken under; the
features are detached for the variance and the noise (only ``log_sigma`` learns the
exploration scale), as in the paper's default.

``GSDEHead`` computes ``(loc, scale, noise)`` from the features; ``GSDENormal`` is the
distribution built from them (a sample is ``loc + noise``; log-probability, entropy and mode
are those of ``Normal(loc, scale)``). ``noise`` is only drawn while exploring
(``ExplorationType.RANDOM``, the collectors' default); elsewhere (losses, deterministic
evaluation) it is zero and costs nothing.
"""

from __future__ import annotations

import torch
from tensordict.nn import InteractionType
from tensordict.nn.probabilistic import interaction_type
from torch import nn

from torchrl_lite.modules.distributions.continuous import IndependentNormal

__all__ = ["GSDEHead", "GSDENormal"]


class GSDENormal(IndependentNormal):
    """``Normal(loc, scale)`` over the last dim whose sample is ``loc + noise`` (gSDE).

    ``log_prob``, ``entropy``, ``mode`` and ``deterministic_sample`` are those of the
    independent Normal; ``sample()`` / ``rsample()`` (no sample shape) return
    ``loc + noise`` when ``noise`` is given (the exploration noise ``GSDEHead`` held for
    this step), and an ordinary Normal draw otherwise or for a non-empty sample shape.

    Args:
        loc: mean, ``[*B, A]``.
        scale: standard deviation ``sqrt(phi^2 @ sigma^2 + eps)``, ``[*B, A]``.
        noise: the state-dependent noise ``phi @ W``, ``[*B, A]``, or None.

    Example:
        >>> loc, scale = torch.zeros(2, 3), torch.ones(2, 3)
        >>> dist = GSDENormal(loc, scale, noise=torch.full((2, 3), 0.5))
        >>> dist.sample()
        tensor([[0.5000, 0.5000, 0.5000],
                [0.5000, 0.5000, 0.5000]])
        >>> dist.log_prob(dist.sample()).shape, dist.mode.abs().sum().item()
        (torch.Size([2]), 0.0)
    """

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor, noise: torch.Tensor | None = None):
        super().__init__(loc, scale)
        if noise is not None and noise.shape != self.base_dist.loc.shape:
            raise ValueError(
                f"GSDENormal: noise has shape {list(noise.shape)}, expected the shape of loc "
                f"{list(self.base_dist.loc.shape)}; it is GSDEHead's third output for the "
                f"same batch."
            )
        self.noise = noise

    def rsample(self, sample_shape=()) -> torch.Tensor:
        if self.noise is not None and not torch.Size(sample_shape):
            return self.base_dist.loc + self.noise
        return super().rsample(sample_shape)

    def sample(self, sample_shape=()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    @property
    def mode(self) -> torch.Tensor:
        return self.base_dist.loc


class GSDEHead(nn.Module):
    """gSDE action head: latent features ``phi`` -> ``(loc, scale, noise)``.

    ``loc = Linear(phi)``; ``scale = sqrt((phi^2) @ exp(log_sigma)^2 + epsilon)`` with a
    learnable ``log_sigma`` of shape ``[latent_dim, action_dim]`` and ``phi`` detached;
    ``noise = phi @ (Z * exp(log_sigma))`` with ``Z ~ N(0, 1)`` one
    ``[latent_dim, action_dim]`` matrix per batch row (env), held between calls.

    ``Z`` is drawn anew (all rows) on the first exploring call, when the batch size
    changes, every ``sample_freq`` exploring calls (``sample_freq <= 0``: only then and on
    ``reset_noise()``), and for the rows whose ``is_init`` is True (an episode start)
    when ``forward`` is given ``is_init``. ``Z`` is scaled by the current ``sigma`` at each
    call, so new weights take effect at once; it is not part of the ``state_dict``.
    Outside ``ExplorationType.RANDOM`` the noise is zeros and ``Z`` is left alone.

    Args:
        latent_dim: size of the features (the policy network's last hidden layer).
        action_dim: number of action dimensions.
        log_sigma_init: initial value of every ``log_sigma`` entry (rl-zoo's: -2).
        sample_freq: exploring calls (env steps) between two draws of ``Z`` (rl-zoo's
            PPO on the Bullet envs: 4); ``<= 0``: only at the first call / reset.
        epsilon: added to the variance (keeps ``scale > 0`` for all-zero features).

    Example:
        >>> from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
        >>> head = GSDEHead(latent_dim=8, action_dim=2, sample_freq=4)
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     loc, scale, noise = head(torch.rand(5, 8))
        >>> loc.shape, scale.shape, noise.shape, tuple(head.log_sigma.shape)
        (torch.Size([5, 2]), torch.Size([5, 2]), torch.Size([5, 2]), (8, 2))
    """

    def __init__(
        self,
        latent_dim: int,
        action_dim: int,
        log_sigma_init: float = -2.0,
        sample_freq: int = -1,
        epsilon: float = 1e-6,
    ):
        super().__init__()
        for name, value in (("latent_dim", latent_dim), ("action_dim", action_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GSDEHead: {name} must be a positive int, got {value!r}.")
        if isinstance(sample_freq, bool) or not isinstance(sample_freq, int):
            raise TypeError(
                f"GSDEHead: sample_freq must be an int (steps between noise draws; <= 0 for "
                f"only at reset), got {sample_freq!r}."
            )
        self.latent_dim, self.action_dim = latent_dim, action_dim
        self.sample_freq = sample_freq
        self.epsilon = float(epsilon)
        self.mean = nn.Linear(latent_dim, action_dim)
        self.log_sigma = nn.Parameter(torch.full((latent_dim, action_dim), float(log_sigma_init)))
        self._z: torch.Tensor | None = None  # [n, latent, action], not a buffer
        self._calls = 0

    def reset_noise(self) -> None:
        """Draw a new noise matrix for every row at the next exploring call."""
        self._z = None

    @property
    def noise_matrices(self) -> torch.Tensor | None:
        """The current ``W = Z * sigma``, ``[n, latent_dim, action_dim]`` (None before the
        first exploring call or after ``reset_noise()``)."""
        return None if self._z is None else self._z * self.log_sigma.exp()

    def forward(self, latent: torch.Tensor, is_init: torch.Tensor | None = None):
        if latent.shape[-1] != self.latent_dim:
            raise ValueError(
                f"GSDEHead: latent features have size {latent.shape[-1]} in their last dim, "
                f"expected latent_dim={self.latent_dim} (the size of the network's last "
                f"hidden layer)."
            )
        loc = self.mean(latent)
        phi = latent.detach()
        sigma = self.log_sigma.exp()
        scale = (phi.pow(2) @ sigma.pow(2) + self.epsilon).sqrt()
        if interaction_type() is not InteractionType.RANDOM:
            return loc, scale, torch.zeros_like(loc)
        return loc, scale, self._noise(phi, sigma, is_init)

    def _noise(self, phi: torch.Tensor, sigma: torch.Tensor, is_init) -> torch.Tensor:
        batch = phi.shape[:-1]
        flat = phi.reshape(-1, self.latent_dim)
        n = flat.shape[0]
        shape = (n, self.latent_dim, self.action_dim)
        if self._z is None or self._z.shape[0] != n or self._z.device != phi.device:
            self._z, self._calls = torch.randn(shape, device=phi.device, dtype=phi.dtype), 0
        elif self.sample_freq > 0 and self._calls % self.sample_freq == 0:
            self._z = torch.randn(shape, device=phi.device, dtype=phi.dtype)
        elif is_init is not None:
            starts = is_init.reshape(-1).to(torch.bool)
            if starts.numel() == n and bool(starts.any()):
                fresh = torch.randn(shape, device=phi.device, dtype=phi.dtype)
                self._z = torch.where(starts.view(n, 1, 1), fresh, self._z)
        self._calls += 1
        noise = torch.einsum("nl,nla->na", flat, self._z * sigma)
        return noise.reshape(*batch, self.action_dim)
