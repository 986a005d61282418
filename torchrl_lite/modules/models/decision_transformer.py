"""The decision transformer: a causal transformer over (return-to-go, state, action) tokens.

Paper: Chen et al. 2021, "Decision Transformer: Reinforcement Learning via Sequence
Modeling", https://arxiv.org/abs/2106.01345 (online variant: Zheng et al. 2022,
https://arxiv.org/abs/2202.05607).

A window of ``T <= context_length`` steps becomes ``3T`` tokens ``R_1, s_1, a_1, ..., R_T,
s_T, a_T`` (each a linear embedding plus a learned embedding of the episode timestep). A
causal mask lets token ``i`` attend to tokens ``<= i``, so the state token of step ``t``
sees the returns-to-go and states up to ``t`` and the actions before ``t``: its output
predicts ``a_t``. Left-padded windows (episode starts) carry ``mask`` False on padding,
which no real token attends to.

Shapes: ``observation [*B, T, S]``, ``action [*B, T, A]``, ``return_to_go [*B, T, 1]``,
``timestep [*B, T]`` (long), ``mask [*B, T]`` (bool); output ``[*B, T, hidden]``.

- :class:`DecisionTransformer`: the network (``nn.Module``).
- :class:`BoundedDTActor`: deterministic actor (DT): tanh head into the action bounds.
- :func:`online_dt_actor`: stochastic actor (ODT): ``ProbabilisticActor`` with a TanhNormal.
- :class:`DTInferenceWrapper`: acts in an env from the window a
  :class:`~torchrl_lite.envs.transforms.DTContext` transform keeps.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictModuleBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.modules.models.dt_shared_prefix import (
    blocks_with_shared_prefix,
    shared_prefix_length,
)

__all__ = [
    "DecisionTransformer",
    "BoundedDTActor",
    "DTInferenceWrapper",
    "online_dt_actor",
    "DT_KEYS",
]

RETURN_TO_GO = "return_to_go"
TIMESTEP = "timestep"
MASK = "mask"
DT_KEYS = (K.OBSERVATION, K.ACTION, RETURN_TO_GO, TIMESTEP, MASK)
"""The entries a DT actor reads, in :meth:`DecisionTransformer.forward`'s order."""


class DecisionTransformer(nn.Module):
    """A GPT-style causal transformer over interleaved (return-to-go, state, action) tokens.

    Args:
        state_dim: size of an observation ``S``.
        action_dim: size of an action ``A``.
        context_length: the longest window ``K`` (steps, i.e. ``3K`` tokens).
        hidden: embedding width.
        n_layer: transformer blocks (pre-norm, GELU MLP of width ``4 * hidden``).
        n_head: attention heads (must divide ``hidden``).
        max_timestep: timesteps embedded (later ones share the last embedding).
        dropout: dropout of the embeddings, attention and MLPs.
        state_mean: ``[S]`` subtracted from each observation before its embedding (None:
            zero), e.g. the dataset's mean (:meth:`TrajectoryWindows.state_stats`).
        state_std: ``[S]`` the centred observation is divided by (None: one). Both are
            buffers of the model, so training, acting and checkpoints use the same
            normalization.
        n_inner: width of each block's MLP (default ``4 * hidden``).
        activation: the MLP's activation, ``"gelu"`` or ``"relu"``.

    Example:
        >>> net = DecisionTransformer(3, 1, context_length=4, hidden=16, n_layer=1)
        >>> x = net(torch.randn(2, 4, 3), torch.randn(2, 4, 1), torch.randn(2, 4, 1),
        ...         torch.arange(4).expand(2, 4), torch.ones(2, 4, dtype=torch.bool))
        >>> x.shape
        torch.Size([2, 4, 16])
    """

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        context_length: int,
        *,
        hidden: int = 128,
        n_layer: int = 3,
        n_head: int = 1,
        max_timestep: int = 1000,
        dropout: float = 0.1,
        state_mean=None,
        state_std=None,
        n_inner: int | None = None,
        activation: str = "gelu",
    ):
        super().__init__()
        for name, value in (("context_length", context_length), ("max_timestep", max_timestep)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"DecisionTransformer: {name} must be a positive int, got {value!r}."
                )
        if hidden % n_head:
            raise ValueError(f"DecisionTransformer: n_head {n_head} must divide hidden {hidden}.")
        self.state_dim, self.action_dim = int(state_dim), int(action_dim)
        self.context_length, self.hidden, self.n_head = context_length, hidden, n_head
        self.max_timestep = max_timestep
        self.embed_timestep = nn.Embedding(max_timestep, hidden)
        self.embed_return = nn.Linear(1, hidden)
        self.embed_state = nn.Linear(self.state_dim, hidden)
        self.embed_action = nn.Linear(self.action_dim, hidden)
        self.embed_norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)
        if activation not in ("gelu", "relu"):
            raise ValueError(
                f"DecisionTransformer: activation must be 'gelu' or 'relu', got {activation!r}."
            )
        layer = nn.TransformerEncoderLayer(
            hidden, n_head, n_inner or 4 * hidden, dropout, activation=activation,
            batch_first=True, norm_first=True,
        )  # fmt: skip
        self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.final_norm = nn.LayerNorm(hidden)
        self.register_buffer("state_mean", self._stat(state_mean, 0.0, "state_mean"))
        self.register_buffer("state_std", self._stat(state_std, 1.0, "state_std"))

    def _stat(self, value, default: float, name: str) -> torch.Tensor:
        if value is None:
            return torch.full((self.state_dim,), default)
        value = torch.as_tensor(value, dtype=torch.float32).reshape(-1)
        if value.numel() != self.state_dim:
            raise ValueError(
                f"DecisionTransformer: {name} has {value.numel()} entries but state_dim is "
                f"{self.state_dim}; pass one value per observation entry."
            )
        if name == "state_std" and not bool((value > 0).all()):
            raise ValueError(
                f"DecisionTransformer: state_std must be > 0 everywhere, got {value.tolist()}; "
                "floor it (e.g. std.clamp_min(1e-6))."
            )
        return value.clone()

    def forward(self, observation, action, return_to_go, timestep, mask) -> torch.Tensor:
        """Hidden states ``[*B, T, hidden]`` of the state tokens (see the module docstring)."""
        batch, steps = observation.shape[:-2], observation.shape[-2]
        if steps > self.context_length:
            raise ValueError(
                f"DecisionTransformer: a window of {steps} steps is longer than "
                f"context_length={self.context_length}; pass at most that many steps."
            )
        n = batch.numel()
        obs = observation.reshape(n, steps, self.state_dim)
        obs = (obs - self.state_mean.to(obs.dtype)) / self.state_std.to(obs.dtype)
        act = action.reshape(n, steps, self.action_dim).to(obs.dtype)
        rtg = return_to_go.reshape(n, steps, 1).to(obs.dtype)
        time = self.embed_timestep(
            timestep.reshape(n, steps).long().clamp(0, self.max_timestep - 1)
        )
        valid = mask.reshape(n, steps).bool()  # [N, T]
        tokens = torch.stack(
            [
                self.embed_return(rtg) + time,
                self.embed_state(obs) + time,
                self.embed_action(act) + time,
            ],
            dim=2,
        ).reshape(n, 3 * steps, self.hidden)  # [N, 3T, H]: R_1, s_1, a_1, R_2, ...
        tokens = self.drop(self.embed_norm(tokens))
        out = self._run_blocks(tokens, valid)  # [N, 3T, H]
        out = self.final_norm(out).reshape(n, steps, 3, self.hidden)[:, :, 1]  # state tokens
        return out.reshape(*batch, steps, self.hidden)

    def _run_blocks(self, tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The blocks over ``tokens [N, 3T, H]``; when acting (eval mode, nothing padded), a
        leading run of tokens equal in every row (e.g. zeroed old context) runs once."""
        if not self.training and tokens.shape[0] > 1 and bool(valid.all()):
            shared = shared_prefix_length(tokens)
            if 0 < shared < tokens.shape[1]:
                return blocks_with_shared_prefix(self.blocks, tokens, shared)
        return self.blocks(tokens, mask=self._attention_mask(valid))

    def _attention_mask(self, valid: torch.Tensor) -> torch.Tensor:
        """Additive mask ``[N * heads, 3T, 3T]``: causal, padding hidden, self always seen."""
        n, steps = valid.shape
        size = 3 * steps
        causal = torch.ones(size, size, dtype=torch.bool, device=valid.device).tril()
        keys = valid.repeat_interleave(3, dim=1)  # [N, 3T]
        allowed = causal & keys[:, None, :]  # [N, 3T, 3T]
        allowed = allowed | torch.eye(size, dtype=torch.bool, device=valid.device)
        blocked = torch.zeros(allowed.shape, dtype=torch.get_default_dtype(), device=valid.device)
        blocked = blocked.masked_fill(~allowed, float("-inf"))
        return blocked.repeat_interleave(self.n_head, dim=0)


def _bounds(action_spec, action_dim: int):
    """``(centre, half_range)`` tensors ``[A]`` of a bounded action spec."""
    low = torch.as_tensor(action_spec.low, dtype=torch.float32).reshape(-1)[-action_dim:]
    high = torch.as_tensor(action_spec.high, dtype=torch.float32).reshape(-1)[-action_dim:]
    return (high + low) / 2, (high - low) / 2


class _DeterministicHead(nn.Module):
    def __init__(self, model: DecisionTransformer, centre, half_range):
        super().__init__()
        self.model = model
        self.head = nn.Linear(model.hidden, model.action_dim)
        self.register_buffer("centre", centre)
        self.register_buffer("half_range", half_range)

    def forward(self, *inputs):
        return self.centre + self.half_range * torch.tanh(self.head(self.model(*inputs)))


class BoundedDTActor(TensorDictModule):
    """The DT's deterministic actor: predicted actions ``[*B, T, A]`` in the spec's bounds.

    Reads ``observation``, ``action`` (the window's actions: the model only sees those
    before each step), ``return_to_go``, ``timestep`` and ``mask`` (see :data:`DT_KEYS`)
    and writes ``action`` (``c + h * tanh(W x)`` from each state token). Train it with
    :class:`~torchrl_lite.objectives.DTLoss`; act with :class:`DTInferenceWrapper`.
    (TorchRL's ``DTActor``, a plain network over its own windows, is
    :class:`torchrl_lite.modules.DTActor`.)

    Args:
        model: a :class:`DecisionTransformer`.
        action_spec: a bounded action spec (its ``low`` and ``high``).
        in_keys: the five entries read, in :data:`DT_KEYS`'s order.
        out_keys: where the predicted actions go (default ``["action"]``).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> actor = BoundedDTActor(DecisionTransformer(3, 1, 4, hidden=16, n_layer=1),
        ...                 Bounded(-2.0, 2.0, (1,)))
        >>> td = TensorDict(observation=torch.randn(5, 4, 3), action=torch.zeros(5, 4, 1),
        ...     return_to_go=torch.zeros(5, 4, 1), timestep=torch.zeros(5, 4, dtype=torch.long),
        ...     mask=torch.ones(5, 4, dtype=torch.bool), batch_size=[5, 4])
        >>> actor(td)["action"].abs().max() <= 2.0
        tensor(True)
    """

    def __init__(self, model: DecisionTransformer, action_spec, in_keys=None, out_keys=None):
        centre, half_range = _bounds(action_spec, model.action_dim)
        super().__init__(
            _DeterministicHead(model, centre, half_range),
            in_keys=list(DT_KEYS) if in_keys is None else in_keys,
            out_keys=[K.ACTION] if out_keys is None else out_keys,
        )


class _StochasticHead(nn.Module):
    def __init__(self, model: DecisionTransformer):
        super().__init__()
        self.model = model
        self.head = nn.Linear(model.hidden, 2 * model.action_dim)
        self.params = NormalParamExtractor()

    def forward(self, *inputs):
        return self.params(self.head(self.model(*inputs)))


def online_dt_actor(model: DecisionTransformer, action_spec, in_keys=None):
    """The ODT's stochastic actor: a ``ProbabilisticActor`` with a TanhNormal per step.

    The head writes ``loc`` and ``scale`` ``[*B, T, A]`` from each state token; the
    distribution is squashed into the spec's bounds. Train it with
    :class:`~torchrl_lite.objectives.OnlineDTLoss`.

    Args:
        model: a :class:`DecisionTransformer`.
        action_spec: a bounded action spec.
        in_keys: the five entries read, in :data:`DT_KEYS`'s order.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> actor = online_dt_actor(DecisionTransformer(3, 1, 4, hidden=16, n_layer=1),
        ...                         Bounded(-2.0, 2.0, (1,)))
        >>> td = TensorDict(observation=torch.randn(5, 4, 3), action=torch.zeros(5, 4, 1),
        ...     return_to_go=torch.zeros(5, 4, 1), timestep=torch.zeros(5, 4, dtype=torch.long),
        ...     mask=torch.ones(5, 4, dtype=torch.bool), batch_size=[5, 4])
        >>> actor.get_dist(td).sample().shape
        torch.Size([5, 4, 1])
    """
    from torchrl_lite.modules.distributions import TanhNormal
    from torchrl_lite.modules.tensordict_module import ProbabilisticActor

    centre, half_range = _bounds(action_spec, model.action_dim)
    params = TensorDictModule(
        _StochasticHead(model),
        in_keys=list(DT_KEYS) if in_keys is None else in_keys,
        out_keys=["loc", "scale"],
    )
    return ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": centre - half_range, "high": centre + half_range},
    )


class DTInferenceWrapper(TensorDictModuleBase):
    """Acts with a DT actor in an env: runs it on the window and writes its last action.

    The env keeps the window with a :class:`~torchrl_lite.envs.transforms.DTContext`
    transform (the entries of :data:`DT_KEYS` under ``context_key``, ``[*B, K, ...]``);
    this module runs ``actor`` on that window (deterministic or sampled, as the actor
    does under the current exploration type; dropout off) and writes ``action [*B, A]``,
    the prediction at the window's last step.

    Args:
        actor: a :class:`BoundedDTActor` or :func:`online_dt_actor`.
        context_key: the entry holding the window (default ``"context"``).
        action_key: where the action goes (default ``"action"``).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> actor = BoundedDTActor(DecisionTransformer(3, 1, 4, hidden=16, n_layer=1),
        ...                 Bounded(-2.0, 2.0, (1,)))
        >>> window = TensorDict(observation=torch.randn(2, 4, 3), action=torch.zeros(2, 4, 1),
        ...     return_to_go=torch.zeros(2, 4, 1), timestep=torch.zeros(2, 4, dtype=torch.long),
        ...     mask=torch.ones(2, 4, dtype=torch.bool), batch_size=[2, 4])
        >>> policy = DTInferenceWrapper(actor)
        >>> policy(TensorDict(context=window, batch_size=[2]))["action"].shape
        torch.Size([2, 1])
    """

    def __init__(self, actor, context_key="context", action_key=K.ACTION):
        super().__init__()
        self.actor = actor
        self.context_key, self.action_key = context_key, action_key
        self.in_keys = [
            (context_key, k) if isinstance(k, str) else (context_key, *k) for k in DT_KEYS
        ]
        self.out_keys = [action_key]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        window = tensordict.get(self.context_key, None)
        if window is None:
            raise KeyError(
                f"DTInferenceWrapper: no {self.context_key!r} entry (has "
                f"{list(tensordict.keys())}); add a DTContext transform to the env."
            )
        training = self.actor.training
        self.actor.train(False)  # acting: no dropout
        try:
            out = self.actor(window.select(*DT_KEYS).clone(False))
        finally:
            self.actor.train(training)
        tensordict.set(self.action_key, out.get(K.ACTION)[..., -1, :])
        return tensordict
