"""DreamerV3's networks: RMS-normalised MLPs and an RSSM with discrete latents.

Paper: Hafner et al. 2023, "Mastering Diverse Domains through World Models",
https://arxiv.org/abs/2301.04104 (the scalar maths are in :mod:`.two_hot`).

The stochastic state is ``C`` categoricals of ``K`` classes each, stored flat as one-hot
samples ``[*B, C * K]``; the belief (the recurrent state) is ``[*B, D]``. One step for an
action ``a_t`` taken in ``(z_t, h_t)``:

- prior (``RSSMPriorV3``): ``h_{t+1} = f(h_t, z_t, a_t)``, logits of ``p(z_{t+1} | h_{t+1})``;
- posterior (``RSSMPosteriorV3``): logits of ``q(z_{t+1} | h_{t+1}, e_{t+1})`` from the
  next observation's embedding ``e_{t+1}``;
- samples are one-hot with straight-through gradients, from probabilities with 1% of a
  uniform mixed in (``unimix``).

``f`` is either a GRU cell (``recurrent_model="gru"``) or DreamerV3's block GRU
(``"block_gru"``): the belief is cut into ``num_blocks`` groups, each updated by its own
weights from its group and the shared projections of ``(h, z, a)``. Every hidden layer is
``Linear -> RMSNorm -> SiLU``, with truncated-normal weights of std ``1.1368 / sqrt(fan_in)``.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from tensordict.utils import unravel_key
from torch import nn

from torchrl_lite.modules.models.two_hot import (
    check_unimix,
    straight_through_sample,
    symexp,
    symlog,
)

__all__ = [
    "DreamerV3MLP",
    "RSSMPosteriorV3",
    "RSSMPriorV3",
    "RSSMRolloutV3",
    "symexp",
    "symlog",
]


def _init_linear(module: nn.Module) -> None:
    """DreamerV3's initialisation: truncated normal (at 2 std), std ``1.1368 / sqrt(fan_in)``
    (the factor undoes the truncation's shrinkage of the variance), zero bias."""
    if isinstance(module, nn.Linear):
        std = 1.1368 / module.in_features**0.5
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _hidden(in_features: int, out_features: int, eps: float, device=None) -> list[nn.Module]:
    return [
        nn.Linear(in_features, out_features, device=device),
        nn.RMSNorm(out_features, eps=eps, device=device),
        nn.SiLU(),
    ]


def _stack(in_features, out_features, depth, width, eps, device=None) -> nn.Sequential:
    """``depth`` hidden layers of ``width`` then a linear output, DreamerV3-initialised."""
    layers, size = [], in_features
    for _ in range(depth):
        layers += _hidden(size, width, eps, device)
        size = width
    net = nn.Sequential(*layers, nn.Linear(size, out_features, device=device))
    net.apply(_init_linear)
    return net


class DreamerV3MLP(nn.Module):
    """An MLP of ``Linear -> RMSNorm -> SiLU`` layers; its inputs are concatenated.

    Args:
        in_features: the size of the concatenated inputs.
        out_features: the output size.
        depth: hidden layers. num_cells: their width.
        outscale: factor on the output layer's initial weights (0 for the reward and
            value heads, so they start out predicting zero).
        norm_eps: the RMS norms' epsilon.
        device: where the parameters are created.

    Example:
        >>> mlp = DreamerV3MLP(5, 3, depth=2, num_cells=8)
        >>> mlp(torch.zeros(4, 2), torch.zeros(4, 3)).shape
        torch.Size([4, 3])
    """

    def __init__(self, in_features: int, out_features: int, depth: int = 3,
                 num_cells: int = 1024, outscale: float = 1.0, norm_eps: float = 1e-4,
                 device=None):  # fmt: skip
        super().__init__()
        if int(depth) < 0:
            raise ValueError(f"DreamerV3MLP: depth must be >= 0 hidden layers, got {depth}.")
        self.model = _stack(in_features, out_features, int(depth), num_cells, norm_eps, device)
        with torch.no_grad():
            self.model[-1].weight.mul_(outscale)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        return self.model(x)


class _BlockLinear(nn.Module):
    """``G`` independent linear maps, one per equal slice of the features (block-diagonal).

    ``[*B, G * i] -> [*B, G * o]``; the initial std uses the whole input size as fan-in.
    """

    def __init__(self, in_features: int, out_features: int, blocks: int, device=None):
        super().__init__()
        if in_features % blocks or out_features % blocks:
            raise ValueError(
                f"block GRU: {in_features} inputs and {out_features} outputs must both be "
                f"divisible by num_blocks={blocks}; pick sizes that are multiples of it."
            )
        self.blocks = blocks
        self.weight = nn.Parameter(
            torch.empty(blocks, in_features // blocks, out_features // blocks, device=device)
        )
        self.bias = nn.Parameter(torch.zeros(out_features, device=device))
        std = 1.1368 / in_features**0.5
        nn.init.trunc_normal_(self.weight, std=std, a=-2 * std, b=2 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grouped = x.unflatten(-1, (self.blocks, -1))  # [*B, G, i]
        out = torch.einsum("...gi,gio->...go", grouped, self.weight)  # [*B, G, o]
        return out.flatten(-2) + self.bias


class _BlockGRU(nn.Module):
    """DreamerV3's recurrent core: ``h' = u * tanh(r * c) + (1 - u) * h`` per block.

    ``h``, ``z`` and ``a`` (scaled into ``[-1, 1]`` if larger) are each projected to
    ``hidden`` units; every block of ``h`` sees its own slice and all three projections.
    The update gate is biased towards keeping ``h`` (``u = sigmoid(x - 1)``).
    """

    def __init__(self, state_dim, action_dim, hidden, belief_dim, blocks, layers, eps,
                 device=None):  # fmt: skip
        super().__init__()
        if belief_dim % blocks:
            raise ValueError(
                f"RSSMPriorV3: rnn_hidden_dim={belief_dim} must be divisible by "
                f"num_blocks={blocks}; change one of them."
            )
        self.blocks = blocks
        self.inputs = nn.ModuleList(
            nn.Sequential(*_hidden(size, hidden, eps, device))
            for size in (belief_dim, state_dim, action_dim)
        )
        size, body = belief_dim + blocks * 3 * hidden, []
        for _ in range(layers):
            body += [_BlockLinear(size, belief_dim, blocks, device),
                     nn.RMSNorm(belief_dim, eps=eps, device=device), nn.SiLU()]  # fmt: skip
            size = belief_dim
        self.body = nn.Sequential(*body)
        self.gates = _BlockLinear(size, 3 * belief_dim, blocks, device)
        self.apply(_init_linear)

    def forward(self, state, belief, action) -> torch.Tensor:
        action = action / action.detach().abs().clamp_min(1.0)
        shared = torch.cat([net(x) for net, x in zip(self.inputs, (belief, state, action))], -1)
        per_block = shared.unsqueeze(-2).expand(*shared.shape[:-1], self.blocks, -1)
        x = torch.cat([belief.unflatten(-1, (self.blocks, -1)), per_block], -1)  # [*B, G, .]
        gates = self.gates(self.body(x.flatten(-2))).unflatten(-1, (self.blocks, 3, -1))
        reset, cand, update = (g.flatten(-2) for g in gates.unbind(-2))  # each [*B, D]
        cand = torch.tanh(torch.sigmoid(reset) * cand)
        update = torch.sigmoid(update - 1.0)
        return update * cand + (1 - update) * belief


class RSSMPriorV3(nn.Module):
    """The dynamics: ``(z_t, h_t, a_t)`` -> ``(prior logits [*B, C, K], z_{t+1}, h_{t+1})``.

    Args:
        action_spec: an action spec (only its shape is read); or give ``action_shape``.
        hidden_dim: width of the hidden layers. rnn_hidden_dim: the belief size ``D``.
        num_categoricals, num_classes: ``C`` and ``K`` (the state has ``C * K`` entries).
        action_dim: ``A`` (needed by ``"block_gru"``; otherwise inferred at the first call).
        device: where the parameters are created.
        recurrent_model: ``"gru"`` (a GRU cell) or ``"block_gru"`` (DreamerV3's core).
        num_blocks, num_layers: the block GRU's groups and hidden layers.
        prior_num_layers: hidden layers of the block GRU's prior head.
        norm_eps: the RMS norms' epsilon. unimix: the uniform share of the samples.

    Example:
        >>> prior = RSSMPriorV3(action_shape=(2,), hidden_dim=8, rnn_hidden_dim=8,
        ...     num_categoricals=3, num_classes=4, action_dim=2, recurrent_model="block_gru",
        ...     num_blocks=2, unimix=0.01)
        >>> logits, state, belief = prior(torch.zeros(5, 12), torch.zeros(5, 8), torch.ones(5, 2))
        >>> logits.shape, state.shape, belief.shape
        (torch.Size([5, 3, 4]), torch.Size([5, 12]), torch.Size([5, 8]))
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        action_spec=None,
        hidden_dim: int = 512,
        rnn_hidden_dim: int = 512,
        num_categoricals: int = 32,
        num_classes: int = 32,
        action_dim: int | None = None,
        device=None,
        *,
        action_shape=None,
        recurrent_model: str = "gru",
        num_blocks: int = 8,
        num_layers: int = 1,
        prior_num_layers: int = 2,
        norm_eps: float = 1e-4,
        unimix: float = 0.0,
    ):
        super().__init__()
        if action_spec is not None and action_shape is not None:
            raise ValueError("RSSMPriorV3: give action_spec or action_shape, not both.")
        shape = action_spec.shape if action_spec is not None else action_shape
        self.action_shape = None if shape is None else torch.Size(shape)
        if recurrent_model not in ("gru", "block_gru"):
            raise ValueError(
                f"RSSMPriorV3: recurrent_model must be 'gru' or 'block_gru', got {recurrent_model!r}."
            )
        if recurrent_model == "block_gru" and action_dim is None:
            raise ValueError("RSSMPriorV3(recurrent_model='block_gru') needs action_dim=<A>.")
        self.unimix = check_unimix(unimix, "RSSMPriorV3")
        self.num_categoricals, self.num_classes = num_categoricals, num_classes
        self.rnn_hidden_dim, self.recurrent_model = rnn_hidden_dim, recurrent_model
        state_dim = num_categoricals * num_classes
        if recurrent_model == "block_gru":
            self.rnn = _BlockGRU(state_dim, action_dim, hidden_dim, rnn_hidden_dim, num_blocks,
                                 num_layers, norm_eps, device)  # fmt: skip
            self.action_state_projector = None
            self.rnn_to_prior_projector = _stack(
                rnn_hidden_dim, state_dim, prior_num_layers, hidden_dim, norm_eps, device
            )
        else:
            first = (
                nn.LazyLinear(hidden_dim, device=device) if action_dim is None
                else nn.Linear(state_dim + action_dim, hidden_dim, device=device)
            )  # fmt: skip
            self.action_state_projector = nn.Sequential(first, nn.SiLU())
            self.rnn = nn.GRUCell(hidden_dim, rnn_hidden_dim, device=device)
            self.rnn_to_prior_projector = nn.Sequential(
                nn.Linear(rnn_hidden_dim, hidden_dim, device=device), nn.SiLU(),
                nn.Linear(hidden_dim, state_dim, device=device),
            )  # fmt: skip

    def forward(self, state: torch.Tensor, belief: torch.Tensor, action: torch.Tensor):
        if self.recurrent_model == "block_gru":
            belief = self.rnn(state, belief, action)
        else:  # GRUCell takes [N, F]: flatten any leading dims
            x = self.action_state_projector(torch.cat([state, action], -1))
            batch = x.shape[:-1]
            belief = self.rnn(x.reshape(-1, x.shape[-1]), belief.reshape(-1, belief.shape[-1]))
            belief = belief.reshape(*batch, -1)
        logits = self.rnn_to_prior_projector(belief).unflatten(
            -1, (self.num_categoricals, self.num_classes)
        )  # [*B, C, K]
        state = straight_through_sample(logits, self.unimix).flatten(-2)  # [*B, C * K]
        return logits, state, belief


class RSSMPosteriorV3(nn.Module):
    """The representation: ``(h_{t+1}, e_{t+1})`` -> ``(posterior logits [*B, C, K], z_{t+1})``.

    Args:
        hidden_dim: width of the hidden layers.
        num_categoricals, num_classes: ``C`` and ``K``.
        rnn_hidden_dim, obs_embed_dim: the belief and embedding sizes (both or neither;
            neither: the input size is inferred at the first call).
        device: where the parameters are created.
        use_rms_norm: ``num_layers`` DreamerV3 hidden layers (needs both sizes); otherwise
            one ``Linear -> SiLU`` layer.
        num_layers: hidden layers with ``use_rms_norm``.
        norm_eps: the RMS norms' epsilon. unimix: the uniform share of the samples.

    Example:
        >>> post = RSSMPosteriorV3(hidden_dim=8, num_categoricals=3, num_classes=4,
        ...     rnn_hidden_dim=8, obs_embed_dim=6, use_rms_norm=True)
        >>> logits, state = post(torch.zeros(5, 8), torch.zeros(5, 6))
        >>> logits.shape, state.shape
        (torch.Size([5, 3, 4]), torch.Size([5, 12]))
    """

    def __init__(self, hidden_dim: int = 512, num_categoricals: int = 32, num_classes: int = 32,
                 rnn_hidden_dim: int | None = None, obs_embed_dim: int | None = None,
                 device=None, *, use_rms_norm: bool = False, num_layers: int = 1,
                 norm_eps: float = 1e-4, unimix: float = 0.0):  # fmt: skip
        super().__init__()
        self.unimix = check_unimix(unimix, "RSSMPosteriorV3")
        self.num_categoricals, self.num_classes = num_categoricals, num_classes
        known = rnn_hidden_dim is not None and obs_embed_dim is not None
        state_dim = num_categoricals * num_classes
        if use_rms_norm:
            if not known:
                raise ValueError(
                    "RSSMPosteriorV3(use_rms_norm=True) needs rnn_hidden_dim= and obs_embed_dim=."
                )
            self.obs_rnn_to_post_projector = _stack(
                rnn_hidden_dim + obs_embed_dim, state_dim, num_layers, hidden_dim, norm_eps, device
            )
        else:
            first = (
                nn.Linear(rnn_hidden_dim + obs_embed_dim, hidden_dim, device=device) if known
                else nn.LazyLinear(hidden_dim, device=device)
            )  # fmt: skip
            self.obs_rnn_to_post_projector = nn.Sequential(
                first, nn.SiLU(), nn.Linear(hidden_dim, state_dim, device=device)
            )

    def forward(self, belief: torch.Tensor, obs_embedding: torch.Tensor):
        logits = self.obs_rnn_to_post_projector(torch.cat([belief, obs_embedding], -1))
        logits = logits.unflatten(-1, (self.num_categoricals, self.num_classes))  # [*B, C, K]
        return logits, straight_through_sample(logits, self.unimix).flatten(-2)


class RSSMRolloutV3(TensorDictModuleBase):
    """Run the prior then the posterior over the time dim of a ``[*B, T]`` batch.

    Step ``t`` reads ``"state"``/``"belief"`` (the batch's own at ``t = 0``, then the
    ``("next", ...)`` ones step ``t - 1`` wrote) and its action; at an episode's first
    step (``reset_key`` True) the state, belief and action are zeroed, so a slice that
    starts a new episode midway does not carry the old episode's memory across.

    Args:
        rssm_prior: TensorDict module of an :class:`RSSMPriorV3`.
        rssm_posterior: TensorDict module of an :class:`RSSMPosteriorV3`.
        reset_key: the episode-start flag (None: never reset).
        action_key: the action entry (None: the prior's in-key that is not
            ``"state"``/``"belief"``).

    Example:
        >>> from tensordict import TensorDict
        >>> prior = TensorDictModule(RSSMPriorV3(action_shape=(1,), hidden_dim=8, rnn_hidden_dim=8,
        ...     num_categoricals=2, num_classes=2, action_dim=1), ["state", "belief", "action"],
        ...     [("next", "prior_logits"), ("next", "state"), ("next", "belief")])
        >>> post = TensorDictModule(RSSMPosteriorV3(hidden_dim=8, num_categoricals=2, num_classes=2,
        ...     rnn_hidden_dim=8, obs_embed_dim=3), [("next", "belief"), ("next", "embed")],
        ...     [("next", "posterior_logits"), ("next", "state")])
        >>> td = TensorDict(state=torch.zeros(2, 5, 4), belief=torch.zeros(2, 5, 8),
        ...     action=torch.zeros(2, 5, 1), next={"embed": torch.zeros(2, 5, 3)}, batch_size=[2, 5])
        >>> RSSMRolloutV3(prior, post)(td)["next", "posterior_logits"].shape
        torch.Size([2, 5, 2, 2])
    """

    def __init__(self, rssm_prior: TensorDictModule, rssm_posterior: TensorDictModule,
                 reset_key="is_init", action_key=None):  # fmt: skip
        super().__init__()
        chain = TensorDictSequential(rssm_prior, rssm_posterior)
        self.in_keys, self.out_keys = chain.in_keys, chain.out_keys
        self.rssm_prior, self.rssm_posterior = rssm_prior, rssm_posterior
        self.reset_key = None if reset_key is None else unravel_key(reset_key)
        if action_key is None:
            others = [
                k for k in map(unravel_key, rssm_prior.in_keys) if k not in ("state", "belief")
            ]
            if len(others) > 1:
                raise ValueError(
                    f"RSSMRolloutV3: cannot tell the action among the prior's in_keys {others}; "
                    "pass action_key=<key>."
                )
            action_key = others[0] if others else None
        self.action_key = None if action_key is None else unravel_key(action_key)

    def _zero_at_reset(self, step) -> None:
        """Zero the state, belief and action of the entries that start an episode."""
        reset = step.get(self.reset_key, None) if self.reset_key is not None else None
        if reset is None:
            return
        reset = reset.reshape(*step.batch_size, 1).bool()  # [*B, 1]
        keys = ["state", "belief"] + ([self.action_key] if self.action_key else [])
        for key in keys:
            value = step.get(key, None)
            if value is not None:
                flag = reset.reshape(*reset.shape, *[1] * (value.ndim - reset.ndim))
                step.set(key, torch.where(flag, torch.zeros_like(value), value))

    def forward(self, tensordict):
        steps = tensordict.exclude(*self.out_keys).unbind(-1)  # T TensorDicts [*B]
        keep = list(steps[0].keys(True, True)) + list(self.out_keys)
        current, outputs = steps[0], []
        for t in range(len(steps)):
            self._zero_at_reset(current)
            self.rssm_prior(current)
            self.rssm_posterior(current)
            outputs.append(current.select(*keep, strict=False))
            if t + 1 < len(steps):  # the step's posterior state and belief start t + 1
                state, belief = current.get(("next", "state")), current.get(("next", "belief"))
                current = steps[t + 1]
                current.set("state", state)
                current.set("belief", belief)
        return torch.stack(outputs, tensordict.ndim - 1)
