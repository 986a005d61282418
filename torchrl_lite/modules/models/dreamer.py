"""Dreamer's world model: observation encoder/decoder, RSSM prior/posterior, reward head.

Paper: Hafner et al. 2020, "Dream to Control: Learning Behaviors by Latent Imagination",
https://arxiv.org/abs/1912.01603 (the RSSM is PlaNet's, https://arxiv.org/abs/1811.04551).

Shapes (``*B`` any batch): images ``[*B, C, 64, 64]`` (uint8 in ``[0, 255]`` or float in
``[-0.5, 0.5]``); embeddings ``[*B, 32 * depth]``; stochastic states ``[*B, S]``; beliefs
(the GRU's deterministic state) ``[*B, D]``; model features ``[*B, S + D]``.

One RSSM step, for an action ``a_t`` taken in the model state ``(s_t, h_t)``:

- prior: ``h_{t+1} = GRU(ELU(W [s_t, a_t]), h_t)``, ``p(s_{t+1} | h_{t+1}) = N(mu, sigma)``;
- posterior (with the next image's embedding ``e_{t+1}``): ``q(s_{t+1} | h_{t+1}, e_{t+1})``.

``sigma = softplus(x) + min_std`` keeps the distributions from collapsing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import nn

__all__ = [
    "ObsEncoder",
    "ObsDecoder",
    "RSSMPrior",
    "RSSMPosterior",
    "RSSMPolicy",
    "RewardHead",
    "scale_image",
]


def scale_image(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 ``[0, 255]`` images to float ``[-0.5, 0.5]`` (Dreamer's scale); floats pass."""
    if pixels.dtype.is_floating_point:
        return pixels
    return pixels.float() / 255 - 0.5


def _pick_form(cls, base: type, torchrl_form: bool):
    """``base``'s TorchRL call form builds its subclass ``TorchRL<base>`` (defined in
    ``dreamer_compat.py``, which the package imports)."""
    if cls is base and torchrl_form:
        name = f"TorchRL{base.__name__}"
        cls = next(c for c in base.__subclasses__() if c.__name__ == name)
    return nn.Module.__new__(cls)


def _flat(x: torch.Tensor, dims: int):
    """``[*B, *F]`` (``F`` with ``dims`` dims) -> ``([N, *F], B)``."""
    batch = x.shape[: x.dim() - dims]
    return x.reshape(-1, *x.shape[x.dim() - dims :]), batch


class ObsEncoder(nn.Module):
    """64x64 images ``[*B, C, 64, 64]`` -> embeddings ``[*B, 32 * depth]``.

    Four 4x4 convolutions of stride 2 with ``depth``, ``2 depth``, ``4 depth``, ``8 depth``
    channels and ReLUs (Dreamer: ``depth=32``, a 1024-dim embedding).

    Args:
        channels: image channels (3 for RGB).
        depth: channels of the first convolution.

    Example:
        >>> ObsEncoder(channels=3, depth=4)(torch.zeros(2, 5, 3, 64, 64, dtype=torch.uint8)).shape
        torch.Size([2, 5, 128])
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: ObsEncoder(channels=32, in_channels=3)
        return _pick_form(
            cls, ObsEncoder, bool({"in_channels", "num_layers", "device"} & kwargs.keys())
        )

    def __init__(self, channels: int = 3, depth: int = 32):
        super().__init__()
        layers, width = [], channels
        for i in range(4):
            layers += [nn.Conv2d(width, depth * 2**i, 4, stride=2), nn.ReLU()]
            width = depth * 2**i
        self.net = nn.Sequential(*layers)
        self.out_features = 32 * depth

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        flat, batch = _flat(scale_image(pixels), 3)  # [N, C, 64, 64]
        if flat.shape[-2:] != (64, 64):
            raise ValueError(
                f"ObsEncoder expects 64x64 images, got {list(flat.shape[-2:])}; resize them "
                "to 64x64 (Resize(64, 64))."
            )
        return self.net(flat).reshape(*batch, self.out_features)  # [*B, 32 depth]


class ObsDecoder(nn.Module):
    """Model features ``[*B, F]`` -> the mean image ``[*B, C, 64, 64]`` (scale ``[-0.5, 0.5]``).

    A linear layer to ``32 * depth`` units, then transposed convolutions (kernels 5-5-6-6,
    stride 2; ``4 depth``, ``2 depth``, ``depth``, ``C`` channels) with ReLUs between.

    Args:
        in_features: ``S + D``.
        channels: image channels.
        depth: as in :class:`ObsEncoder`.

    Example:
        >>> ObsDecoder(in_features=10, channels=3, depth=4)(torch.zeros(2, 10)).shape
        torch.Size([2, 3, 64, 64])
    """

    def __new__(cls, *args, **kwargs):  # no in_features: TorchRL's lazy form
        torchrl = not args and "in_features" not in kwargs
        return _pick_form(cls, ObsDecoder, torchrl or "num_layers" in kwargs)

    def __init__(self, in_features: int, channels: int = 3, depth: int = 32):
        super().__init__()
        self.linear = nn.Linear(in_features, 32 * depth)
        widths = [32 * depth, 4 * depth, 2 * depth, depth]
        layers: list[nn.Module] = []
        for i, k in enumerate((5, 5, 6, 6)):
            out = channels if i == 3 else widths[i + 1]
            layers.append(nn.ConvTranspose2d(widths[i], out, k, stride=2))
            if i < 3:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        flat, batch = _flat(features, 1)  # [N, F]
        # the first transposed convolution sees a 1x1 input: it is a matrix product, which
        # runs ~8x faster than PyTorch's CPU transposed convolution (same weights, same output)
        first = self.net[0]
        x = self.linear(flat) @ first.weight.flatten(1)  # [N, 4 depth * 5 * 5]
        x = x.view(-1, first.out_channels, *first.kernel_size) + first.bias[:, None, None]
        image = self.net[1:](x)  # [N, C, 64, 64]
        return image.reshape(*batch, *image.shape[1:])


def _norm(width: int, layer_norm: bool) -> nn.Module:
    """A ``LayerNorm`` over ``width`` units, or nothing (no parameters) without ``layer_norm``."""
    return nn.LayerNorm(width) if layer_norm else nn.Identity()


def _dense(in_features: int, out_features: int, layer_norm: bool) -> list[nn.Module]:
    """A hidden layer: Linear, a LayerNorm with ``layer_norm``, ELU."""
    norm = [nn.LayerNorm(out_features)] if layer_norm else []
    return [nn.Linear(in_features, out_features), *norm, nn.ELU()]


def _normal_params(x: torch.Tensor, min_std: float):
    mean, std = x.chunk(2, -1)
    return mean, F.softplus(std) + min_std


class RSSMPrior(nn.Module):
    """The RSSM's transition: ``(s_t, h_t, a_t)`` -> ``(mu, sigma, s_{t+1}, h_{t+1})``.

    ``s_{t+1}`` is a reparameterised sample of the prior ``N(mu, sigma)``: ``mu + sigma *
    noise``, with ``noise`` drawn from ``N(0, 1)`` unless given (same shape as ``mu``).

    Args:
        action_dim: ``A``.
        state_dim: ``S``.
        belief_dim: ``D`` (GRU units).
        hidden: units of the layers around the GRU.
        min_std: the smallest standard deviation.
        layer_norm: normalize both hidden layers by a ``LayerNorm`` before the ELU
            (DreamerV3 normalizes every layer).

    Example:
        >>> prior = RSSMPrior(action_dim=1, state_dim=4, belief_dim=8, hidden=8)
        >>> mean, std, state, belief = prior(torch.zeros(2, 4), torch.zeros(2, 8), torch.zeros(2, 1))
        >>> state.shape, belief.shape
        (torch.Size([2, 4]), torch.Size([2, 8]))
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: RSSMPrior(action_spec, hidden_dim=...)
        torchrl = {"action_spec", "hidden_dim", "rnn_hidden_dim", "scale_lb"} & kwargs.keys()
        return _pick_form(
            cls, RSSMPrior, bool(torchrl) or (bool(args) and hasattr(args[0], "shape"))
        )

    def __init__(
        self, action_dim: int, state_dim: int = 30, belief_dim: int = 200, hidden: int = 200,
        min_std: float = 0.1, layer_norm: bool = False,
    ):  # fmt: skip
        super().__init__()
        self.state_dim, self.belief_dim, self.min_std = state_dim, belief_dim, min_std
        self.action_state = nn.Linear(state_dim + action_dim, hidden)
        self.rnn = nn.GRUCell(hidden, belief_dim)
        self.head = nn.Sequential(
            *_dense(belief_dim, hidden, layer_norm), nn.Linear(hidden, 2 * state_dim)
        )
        self.action_state_norm = _norm(hidden, layer_norm)

    def forward(self, state: torch.Tensor, belief: torch.Tensor, action: torch.Tensor, noise=None):
        x = self.action_state(torch.cat([state, action], -1))
        x = F.elu(self.action_state_norm(x))  # [*B, hidden]
        flat_x, batch = _flat(x, 1)
        belief = self.rnn(flat_x, belief.reshape(-1, self.belief_dim)).reshape(*batch, -1)
        mean, std = _normal_params(self.head(belief), self.min_std)  # [*B, S] each
        noise = torch.randn_like(std) if noise is None else noise
        return mean, std, mean + std * noise, belief


class RSSMPosterior(nn.Module):
    """The RSSM's filter: ``(h_{t+1}, e_{t+1})`` -> ``(mu, sigma, s_{t+1})`` of the posterior.

    ``s_{t+1} = mu + sigma * noise`` (``noise ~ N(0, 1)`` unless given).

    Args:
        belief_dim: ``D``.
        embed_dim: the encoder's embedding size.
        state_dim: ``S``.
        hidden: units of the hidden layer.
        min_std: the smallest standard deviation.
        layer_norm: normalize the hidden layer by a ``LayerNorm`` before the ELU.

    Example:
        >>> post = RSSMPosterior(belief_dim=8, embed_dim=6, state_dim=4, hidden=8)
        >>> post(torch.zeros(2, 8), torch.zeros(2, 6))[2].shape
        torch.Size([2, 4])
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: RSSMPosterior(hidden_dim=, state_dim=)
        return _pick_form(cls, RSSMPosterior, bool({"hidden_dim", "scale_lb"} & kwargs.keys()))

    def __init__(
        self, belief_dim: int = 200, embed_dim: int = 1024, state_dim: int = 30,
        hidden: int = 200, min_std: float = 0.1, layer_norm: bool = False,
    ):  # fmt: skip
        super().__init__()
        self.min_std = min_std
        self.net = nn.Sequential(
            *_dense(belief_dim + embed_dim, hidden, layer_norm), nn.Linear(hidden, 2 * state_dim)
        )

    def forward(self, belief: torch.Tensor, embed: torch.Tensor, noise=None):
        mean, std = _normal_params(self.net(torch.cat([belief, embed], -1)), self.min_std)
        noise = torch.randn_like(std) if noise is None else noise
        return mean, std, mean + std * noise


class RewardHead(nn.Module):
    """Model features ``[*B, S + D]`` -> predicted reward ``[*B, 1]`` (an ELU MLP).

    Also Dreamer's value model (same shape, another instance).

    Args:
        in_features: ``S + D``.
        hidden: units per hidden layer.
        depth: hidden layers (Dreamer: 2 for the reward, 3 for the value).
        layer_norm: normalize each hidden layer by a ``LayerNorm`` before the ELU.

    Example:
        >>> RewardHead(10, hidden=8)(torch.zeros(3, 10)).shape
        torch.Size([3, 1])
    """

    def __init__(self, in_features: int, hidden: int = 400, depth: int = 2, layer_norm=False):
        super().__init__()
        layers, width = [], in_features
        for _ in range(depth):
            layers += _dense(width, hidden, layer_norm)
            width = hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)


class RSSMPolicy(TensorDictModuleBase):
    """Acting in the real env: filter the RSSM state online, then ask the actor.

    Keeps ``(s_t, h_t, a_{t-1})`` per env between calls and restarts them where
    ``"is_init"`` is set (an ``InitTracker`` transform writes it): there ``h = 0`` and
    ``s ~ q(. | 0, e(o))``, as the world-model loss starts its slices; elsewhere
    ``h = prior(s_{t-1}, h_{t-1}, a_{t-1})`` and ``s ~ q(. | h, e(o))``. Under
    ``ExplorationType.RANDOM`` (collectors) the actor samples and Gaussian noise of scale
    ``exploration_noise`` is added (Dreamer: 0.3); otherwise it acts with its mode.

    Args:
        encoder, prior, posterior: the world model's parts.
        actor: a probabilistic actor reading ``"state"`` and ``"belief"``.
        low, high: the action bounds (the noisy action is clipped to them).
        pixels_key: the image entry.
        exploration_noise: the noise scale while exploring.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import ProbabilisticActor, TanhNormal
        >>> enc, prior = ObsEncoder(3, depth=2), RSSMPrior(1, 4, 8, 8)
        >>> post = RSSMPosterior(8, enc.out_features, 4, 8)
        >>> net = nn.Sequential(nn.Linear(8, 2), NormalParamExtractor())
        >>> actor = ProbabilisticActor(TensorDictModule(net, ["belief"], ["loc", "scale"]),
        ...     ["loc", "scale"], distribution_class=TanhNormal)
        >>> policy = RSSMPolicy(enc, prior, post, actor, -1.0, 1.0)
        >>> td = TensorDict(pixels=torch.zeros(2, 3, 64, 64, dtype=torch.uint8),
        ...     is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2])
        >>> policy(td)["action"].shape
        torch.Size([2, 1])
    """

    def __init__(
        self, encoder, prior, posterior, actor, low, high, pixels_key: str = "pixels",
        exploration_noise: float = 0.3,
    ):  # fmt: skip
        super().__init__()
        self.encoder, self.prior, self.posterior, self.actor = encoder, prior, posterior, actor
        self.register_buffer("low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(high, dtype=torch.float32))
        self.pixels_key, self.exploration_noise = pixels_key, exploration_noise
        self.in_keys, self.out_keys = [pixels_key, "is_init"], ["action"]
        self._carry: tuple | None = None

    @torch.no_grad()
    def forward(self, tensordict):
        from torchrl_lite.modules.tensordict_module.exploration import (
            ExplorationType,
            exploration_type,
        )

        embed = self.encoder(tensordict.get(self.pixels_key))  # [*B, E]
        batch = embed.shape[:-1]
        init = tensordict.get("is_init", None)
        init = torch.ones(*batch, 1, dtype=torch.bool) if init is None else init.reshape(*batch, 1)
        zeros = torch.zeros(*batch, self.prior.belief_dim, device=embed.device)
        if self._carry is None or self._carry[1].shape != zeros.shape:
            belief = zeros
        else:
            state, belief, action = self._carry
            belief = torch.where(init, zeros, self.prior(state, belief, action)[3])
        state = self.posterior(belief, embed)[2]  # [*B, S]
        td = self.actor(TensorDict(state=state, belief=belief, batch_size=batch))
        action = td.get("action")
        if exploration_type() == ExplorationType.RANDOM and self.exploration_noise > 0:
            noisy = action + self.exploration_noise * torch.randn_like(action)
            action = torch.maximum(torch.minimum(noisy, self.high), self.low)
        self._carry = (state, belief, action)
        tensordict.set("action", action)
        return tensordict
