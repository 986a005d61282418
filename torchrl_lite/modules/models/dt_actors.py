"""TorchRL's decision-transformer actor networks: ``DTActor`` and ``OnlineDTActor``.

Plain ``nn.Module``s mapping windows ``observation [*B, T, S]``, ``action [*B, T, A]``,
``return_to_go [*B, T, 1]`` to per-step action predictions ``[*B, T, A]`` (DT) or a
Gaussian's ``(loc, scale)`` (online DT), built on
:class:`~torchrl_lite.modules.models.decision_transformer.DecisionTransformer` with the
position in the window as its timestep and every step attended (TorchRL's windows carry
no episode timestep or padding mask). Wrap them in a ``TensorDictModule`` and a
``ProbabilisticActor`` as TorchRL's DT scripts do.

Paper: Chen et al. 2021, https://arxiv.org/abs/2106.01345; online: Zheng et al. 2022,
https://arxiv.org/abs/2202.05607.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from torchrl_lite.modules.models.decision_transformer import DecisionTransformer

__all__ = ["DTActor", "OnlineDTActor", "DTConfig"]


@dataclasses.dataclass
class DTConfig:
    """The transformer settings TorchRL's DT scripts pass (GPT-2's names).

    ``n_positions`` counts tokens: a window holds at most ``n_positions // 3`` steps.
    ``attn_pdrop`` is accepted; one dropout rate (``resid_pdrop``) serves the whole model.
    """

    n_embd: int = 512
    n_layer: int = 4
    n_head: int = 4
    n_inner: int = 2048
    activation: str = "relu"
    n_positions: int = 1024
    resid_pdrop: float = 0.1
    attn_pdrop: float = 0.1


def _config(transformer_config) -> DTConfig:
    if transformer_config is None:
        return DTConfig()
    if isinstance(transformer_config, DTConfig):
        return transformer_config
    known = {f.name for f in dataclasses.fields(DTConfig)}
    items = dict(transformer_config.items())
    unknown = sorted(set(items) - known)
    if unknown:
        raise ValueError(f"transformer_config: unknown entries {unknown}; known: {sorted(known)}.")
    return DTConfig(**items)


class _WindowTransformer(nn.Module):
    """The decision transformer over whole windows (timestep = position, nothing masked),
    with GPT-2's dropout sites (embeddings, attention weights, each residual branch)."""

    def __init__(self, state_dim: int, action_dim: int, config: DTConfig, device=None):
        super().__init__()
        steps = max(1, config.n_positions // 3)
        self.net = DecisionTransformer(
            state_dim,
            action_dim,
            context_length=steps,
            hidden=config.n_embd,
            n_layer=config.n_layer,
            n_head=config.n_head,
            max_timestep=steps,
            dropout=config.resid_pdrop,
            n_inner=config.n_inner,
            activation=config.activation,
        ).to(device)
        for layer in self.net.blocks.layers:  # as GPT-2: the MLP drops its output, not
            layer.dropout = nn.Identity()  # its hidden units (also ~15% of a train step)

    def forward(self, observation, action, return_to_go) -> torch.Tensor:
        steps = observation.shape[-2]
        timestep = torch.arange(steps, device=observation.device).expand(observation.shape[:-1])
        mask = torch.ones(observation.shape[:-1], dtype=torch.bool, device=observation.device)
        return self.net(observation, action, return_to_go, timestep, mask)  # [*B, T, H]


def _orthogonal(layer: nn.Linear) -> nn.Linear:
    nn.init.orthogonal_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class DTActor(nn.Module):
    """Deterministic decision-transformer actor: ``(obs, action, rtg) -> action [*B, T, A]``.

    The output is unbounded: bound it with a ``TanhDelta`` distribution (TorchRL's script)
    or a tanh.

    Args:
        state_dim: observation size ``S``.
        action_dim: action size ``A``.
        transformer_config: a dict or :class:`DTConfig` (``n_embd``, ``n_layer``,
            ``n_head``, ``n_inner``, ``activation``, ``n_positions``, ``resid_pdrop``,
            ``attn_pdrop``); default :meth:`default_config`.
        device: where the parameters live.

    Example:
        >>> actor = DTActor(4, 2, dict(n_embd=16, n_layer=1, n_head=1, n_inner=32,
        ...     activation="relu", n_positions=60, resid_pdrop=0.0, attn_pdrop=0.0))
        >>> actor(torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1)).shape
        torch.Size([3, 10, 2])
    """

    def __init__(self, state_dim: int, action_dim: int, transformer_config=None, device=None):
        super().__init__()
        config = _config(transformer_config)
        self.transformer = _WindowTransformer(state_dim, action_dim, config, device)
        self.action_layer = _orthogonal(nn.Linear(config.n_embd, action_dim, device=device))

    def forward(self, observation, action, return_to_go) -> torch.Tensor:
        return self.action_layer(self.transformer(observation, action, return_to_go))

    @classmethod
    def default_config(cls) -> DTConfig:
        return DTConfig()


class OnlineDTActor(nn.Module):
    """Stochastic online-DT actor: ``(obs, action, rtg) -> (loc, scale)``, each ``[*B, T, A]``.

    ``scale = exp(log_std)`` with ``log_std`` squashed into ``[-5, 2]`` by a tanh, as in the
    online decision transformer.

    Args:
        state_dim, action_dim, transformer_config, device: as in :class:`DTActor`.

    Example:
        >>> actor = OnlineDTActor(4, 2, dict(n_embd=16, n_layer=1, n_head=1, n_inner=32,
        ...     activation="relu", n_positions=60, resid_pdrop=0.0, attn_pdrop=0.0))
        >>> loc, scale = actor(torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1))
        >>> loc.shape, bool((scale >= torch.exp(torch.tensor(-5.0))).all())
        (torch.Size([3, 10, 2]), True)
    """

    log_std_min, log_std_max = -5.0, 2.0

    def __init__(self, state_dim: int, action_dim: int, transformer_config=None, device=None):
        super().__init__()
        config = _config(transformer_config)
        self.transformer = _WindowTransformer(state_dim, action_dim, config, device)
        self.action_layer_mean = _orthogonal(nn.Linear(config.n_embd, action_dim, device=device))
        self.action_layer_logstd = _orthogonal(nn.Linear(config.n_embd, action_dim, device=device))

    def forward(self, observation, action, return_to_go) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.transformer(observation, action, return_to_go)  # [*B, T, H]
        loc = self.action_layer_mean(hidden)
        squashed = torch.tanh(self.action_layer_logstd(hidden))  # [-1, 1]
        low, high = self.log_std_min, self.log_std_max
        log_std = low + 0.5 * (high - low) * (squashed + 1.0)
        return loc, log_std.exp()

    @classmethod
    def default_config(cls) -> DTConfig:
        return DTConfig()
