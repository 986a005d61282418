"""DiffusionActor: a policy that denoises an action with a DDPM reverse chain.

Paper: Ho et al. 2020, "Denoising Diffusion Probabilistic Models",
https://arxiv.org/abs/2006.11239; as a policy: Chi et al. 2023, "Diffusion Policy",
https://arxiv.org/abs/2303.04137.

Linear schedule ``beta_1 .. beta_N`` (``N = num_steps``), ``alpha_t = 1 - beta_t``,
``abar_t = prod_{s <= t} alpha_s``. A score network ``eps(x, s, t)`` reads
``cat(noisy_action [*B, A], observation [*B, S], t [*B, 1])`` (``t`` the raw step index
as a float) and predicts the noise. Forward noising (training, see
:class:`~torchrl_lite.objectives.DiffusionBCLoss`):
``x_t = sqrt(abar_t) a + sqrt(1 - abar_t) eps``. Reverse chain (acting), from
``x_N ~ N(0, I)``: ``x_{t-1} = (x_t - beta_t / sqrt(1 - abar_t) * eps(x_t, s, t)) /
sqrt(alpha_t) + sqrt(beta_t) z`` (no noise at the last step). Under
``ExplorationType.DETERMINISTIC`` the chain starts from zeros and adds no noise.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModuleBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.modules.tensordict_module.exploration import ExplorationType, exploration_type

__all__ = ["DDPMSchedule", "DiffusionActor"]


class DDPMSchedule(nn.Module):
    """The denoiser and its fixed linear schedule: forward noising and the reverse chain.

    Args:
        score_network: ``cat(x, observation, t) -> noise`` (sizes ``A + S + 1 -> A``).
        action_dim: ``A``.
        num_steps: ``N`` denoising steps.
        beta_start, beta_end: the linear schedule's ends.
    """

    def __init__(self, score_network: nn.Module, action_dim: int, num_steps: int = 100,
                 beta_start: float = 1e-4, beta_end: float = 0.02):  # fmt: skip
        super().__init__()
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(
                f"DiffusionActor: num_steps must be a positive int, got {num_steps!r}."
            )
        if not 0.0 < beta_start <= beta_end < 1.0:
            raise ValueError(
                "DiffusionActor: need 0 < beta_start <= beta_end < 1, got "
                f"beta_start={beta_start}, beta_end={beta_end}."
            )
        self.score_network, self.action_dim, self.num_steps = score_network, action_dim, num_steps
        betas = torch.linspace(beta_start, beta_end, num_steps)
        self.register_buffer("betas", betas)
        self.register_buffer("alphas", 1.0 - betas)
        self.register_buffer("alphas_cumprod", torch.cumprod(1.0 - betas, 0))

    def predict_noise(self, x: torch.Tensor, observation: torch.Tensor, t: torch.Tensor):
        """``eps(x_t, s, t)`` ``[*B, A]`` for step indices ``t`` ``[*B]``."""
        t = t.to(x.dtype).unsqueeze(-1)  # [*B, 1]
        return self.score_network(torch.cat([x, observation.to(x.dtype), t], -1))

    def add_noise(self, clean_action: torch.Tensor, t: torch.Tensor):
        """``(x_t, eps)``: ``clean_action [*B, A]`` noised to steps ``t [*B]``."""
        abar = self.alphas_cumprod[t].unsqueeze(-1).to(clean_action.dtype)  # [*B, 1]
        noise = torch.randn_like(clean_action)
        return abar.sqrt() * clean_action + (1.0 - abar).sqrt() * noise, noise

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """The reverse chain: an action ``[*B, A]`` for ``observation [*B, S]``."""
        shape = (*observation.shape[:-1], self.action_dim)
        deterministic = exploration_type() in (ExplorationType.DETERMINISTIC, ExplorationType.MODE)
        dtype = observation.dtype if observation.is_floating_point() else torch.float32
        x = torch.zeros(shape, dtype=dtype, device=observation.device)
        if not deterministic:
            x = torch.randn_like(x)
        for t in reversed(range(self.num_steps)):
            steps = torch.full(shape[:-1], t, device=x.device)
            eps = self.predict_noise(x, observation, steps)
            beta, alpha, abar = self.betas[t], self.alphas[t], self.alphas_cumprod[t]
            x = (x - beta / (1.0 - abar).sqrt() * eps) / alpha.sqrt()
            if t > 0 and not deterministic:
                x = x + beta.sqrt() * torch.randn_like(x)
        return x


class DiffusionActor(TensorDictModuleBase):
    """Act by denoising: ``observation -> action`` through a DDPM reverse chain.

    Args:
        action_dim: the action size ``A``.
        obs_dim: the observation size ``S``, for the default score network (an MLP
            ``A + S + 1 -> 256 -> 256 -> A`` with SiLU); ignored with ``score_network``.
        score_network: ``cat(noisy_action, observation, t) -> noise``.
        num_steps, beta_start, beta_end: the schedule (see :class:`DDPMSchedule`).
        in_keys, out_keys: default ``["observation"]`` and ``["action"]``.
        spec: the action spec; a bounded one clips the final action into its bounds.

    Example:
        >>> from tensordict import TensorDict
        >>> actor = DiffusionActor(action_dim=2, obs_dim=3, num_steps=5)
        >>> actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 2])
    """

    def __init__(self, action_dim: int, obs_dim: int | None = None, score_network=None,
                 num_steps: int = 100, beta_start: float = 1e-4, beta_end: float = 0.02,
                 in_keys=None, out_keys=None, *, spec=None):  # fmt: skip
        super().__init__()
        if score_network is None:
            first = (
                nn.LazyLinear(256) if obs_dim is None else nn.Linear(action_dim + obs_dim + 1, 256)
            )
            score_network = nn.Sequential(
                first, nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, action_dim)
            )
        self.module = DDPMSchedule(score_network, action_dim, num_steps, beta_start, beta_end)
        self.in_keys = [K.OBSERVATION] if in_keys is None else list(in_keys)
        self.out_keys = [K.ACTION] if out_keys is None else list(out_keys)
        self.spec = spec

    def forward(self, tensordict):
        action = self.module(tensordict.get(self.in_keys[0]))
        low, high = getattr(self.spec, "low", None), getattr(self.spec, "high", None)
        if low is not None and high is not None:
            action = torch.maximum(torch.minimum(action, high.to(action)), low.to(action))
        tensordict.set(self.out_keys[0], action)
        return tensordict
