"""TorchRL's Dreamer building blocks, in TorchRL's call forms.

TorchRL composes its Dreamer from TensorDict modules: a world model
``WorldModelWrapper(transition_model, reward_model)`` whose transition model encodes the
next observations, runs ``RSSMRollout`` over the time dim and decodes; the actor is a
``DreamerActor`` reading ``(state, belief)``. The networks are ours
(:mod:`torchrl_lite.modules.models.dreamer`); TorchRL's constructors, which infer input
sizes at the first call, reach them here:

* ``RSSMPrior(action_spec, hidden_dim=, rnn_hidden_dim=, state_dim=, scale_lb=,
  action_dim=, device=)``, called as ``prior(state, belief, action, noise=None)``,
* ``RSSMPosterior(hidden_dim=, state_dim=, scale_lb=, rnn_hidden_dim=, obs_embed_dim=,
  device=)`` (input size inferred unless both sizes are given), called as
  ``posterior(belief, obs_embedding, noise=None)``,
* ``ObsDecoder(channels=32, num_layers=4, latent_dim=, out_channels=3, device=)``
  (``channels``: its width; called as ``decoder(state, belief)``),
* ``ObsEncoder(channels=32, in_channels=3, device=)`` (``channels``: its width);
  ``ObsEncoder()`` is ours unchanged.

``noise`` (current TorchRL): a given standard-normal draw for the sampled state, so that
a rollout can be replayed exactly; ``None`` draws it.

``RSSMPrior(...)`` etc. with those arguments build the classes below (see ``__new__`` in
the networks' module), so one name serves both call forms.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict
from tensordict.nn import (
    NormalParamExtractor,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
)
from torch import nn

from torchrl_lite.modules.models._feedforward import MLP
from torchrl_lite.modules.models.dreamer import ObsDecoder, ObsEncoder, RSSMPosterior, RSSMPrior

__all__ = [
    "DreamerActor",
    "RSSMRollout",
    "TorchRLObsDecoder",
    "TorchRLObsEncoder",
    "TorchRLRSSMPosterior",
    "TorchRLRSSMPrior",
    "WorldModelWrapper",
]


class TorchRLRSSMPrior(RSSMPrior):
    """:class:`RSSMPrior` built from TorchRL's arguments (same network).

    Args:
        action_spec: the action spec (its last dim is ``A``).
        hidden_dim: units around the GRU. rnn_hidden_dim: the belief size ``D``.
        state_dim: ``S``. scale_lb: the smallest standard deviation.
        action_dim: ``A`` (default: read from ``action_spec``). device: of the parameters.

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> prior = RSSMPrior(action_spec=Bounded(-1.0, 1.0, (2,)), hidden_dim=8, rnn_hidden_dim=8, state_dim=4)
        >>> type(prior).__name__, prior.belief_dim
        ('TorchRLRSSMPrior', 8)
    """

    def __init__(self, action_spec=None, hidden_dim=200, rnn_hidden_dim=200, state_dim=30,
                 scale_lb=0.1, action_dim=None, device=None):  # fmt: skip
        if action_dim is None:
            if action_spec is None:
                raise ValueError("RSSMPrior: pass action_spec or action_dim (the action size).")
            action_dim = int(action_spec.shape[-1])
        super().__init__(
            action_dim=action_dim, state_dim=state_dim,
            belief_dim=rnn_hidden_dim, hidden=hidden_dim, min_std=scale_lb,
        )  # fmt: skip
        self.rnn_hidden_dim = rnn_hidden_dim
        self.action_shape = torch.Size([action_dim]) if action_spec is None else action_spec.shape
        if device is not None:
            self.to(device)


class TorchRLRSSMPosterior(RSSMPosterior):
    """:class:`RSSMPosterior` whose input size (belief + embedding) is read at the first call,
    or set by ``rnn_hidden_dim`` and ``obs_embed_dim`` together.

    Example:
        >>> post = RSSMPosterior(hidden_dim=8, state_dim=4)
        >>> post(torch.zeros(2, 8), torch.zeros(2, 6))[2].shape
        torch.Size([2, 4])
    """

    def __init__(self, hidden_dim=200, state_dim=30, scale_lb=0.1, rnn_hidden_dim=None,
                 obs_embed_dim=None, device=None):  # fmt: skip
        known = rnn_hidden_dim is not None and obs_embed_dim is not None
        super().__init__(
            belief_dim=rnn_hidden_dim if known else 1, embed_dim=obs_embed_dim if known else 1,
            state_dim=state_dim, hidden=hidden_dim, min_std=scale_lb,
        )  # fmt: skip
        if not known:
            self.net[0] = nn.LazyLinear(hidden_dim)
        self.hidden_dim = hidden_dim
        if device is not None:
            self.to(device)

    def forward(self, belief: torch.Tensor, obs_embedding: torch.Tensor, noise=None):
        return super().forward(belief, obs_embedding, noise)


class TorchRLObsDecoder(ObsDecoder):
    """:class:`ObsDecoder` (RGB output) with its input size read at the first call, called
    as ``decoder(state, belief)``.

    Args:
        channels: the width (``depth`` of ours). num_layers: only 4 (Dreamer's decoder).
        kernel_sizes: only ``[5, 5, 6, 6]`` (the default).
        latent_dim: the input size ``S + D`` (default: read at the first call).
        out_channels: image channels. depth: the same as ``channels``. device: of the
            parameters.

    Example:
        >>> ObsDecoder(channels=4)(torch.zeros(2, 3), torch.zeros(2, 5)).shape
        torch.Size([2, 3, 64, 64])
    """

    def __init__(self, channels=32, num_layers=4, kernel_sizes=None, latent_dim=None,
                 out_channels=3, depth=None, device=None):  # fmt: skip
        if depth is not None:
            channels = depth
        if num_layers != 4 or kernel_sizes not in (None, [5, 5, 6, 6], (5, 5, 6, 6)):
            raise ValueError(
                f"ObsDecoder(num_layers={num_layers}, kernel_sizes={kernel_sizes}): only "
                "Dreamer's 64x64 decoder (num_layers=4, kernel_sizes [5, 5, 6, 6]) is built; "
                "pass those (the defaults)."
            )
        super().__init__(in_features=latent_dim or 1, channels=out_channels, depth=channels)
        if latent_dim is None:
            self.linear = nn.LazyLinear(32 * channels)
        if device is not None:
            self.to(device)

    def forward(self, state: torch.Tensor, belief: torch.Tensor | None = None) -> torch.Tensor:
        features = state if belief is None else torch.cat([state, belief], -1)
        return super().forward(features)


class TorchRLObsEncoder(ObsEncoder):
    """:class:`ObsEncoder` from TorchRL's arguments: ``channels`` is the width.

    Args:
        channels: channels of the first convolution (``depth`` of ours).
        num_layers: only 4 (Dreamer's encoder, 64x64 images).
        in_channels: image channels (default: read at the first call).
        depth: the same as ``channels``. device: of the parameters.

    Example:
        >>> ObsEncoder(channels=4, in_channels=1)(torch.zeros(2, 1, 64, 64)).shape
        torch.Size([2, 128])
    """

    def __init__(self, channels=32, num_layers=4, in_channels=None, depth=None, device=None):
        if depth is not None:
            channels = depth
        if num_layers != 4:
            raise ValueError(
                f"ObsEncoder(num_layers={num_layers}): only Dreamer's 4-layer encoder of 64x64 "
                "images is built; pass num_layers=4 (the default)."
            )
        super().__init__(channels=3 if in_channels is None else in_channels, depth=channels)
        if in_channels is None:
            self.net[0] = nn.LazyConv2d(channels, 4, stride=2)
        if device is not None:
            self.to(device)


class DreamerActor(nn.Module):
    """Dreamer's actor network: ``(state, belief)`` -> ``(loc, scale)`` of the action.

    An ELU MLP to ``2 A`` outputs, split into the location and a scale
    ``softplus(x + softplus^-1(std_bias - std_min_val)) + std_min_val`` (``std_bias`` at
    ``x = 0``, never below ``std_min_val``).

    Args:
        out_features: ``A``. depth, num_cells, activation_class: the MLP's.
        std_bias: the scale at a zero output. std_min_val: the smallest scale.
        device: of the parameters.

    Example:
        >>> loc, scale = DreamerActor(2, depth=1, num_cells=8)(torch.zeros(3, 4), torch.zeros(3, 5))
        >>> loc.shape, scale.shape
        (torch.Size([3, 2]), torch.Size([3, 2]))
    """

    def __init__(self, out_features, depth=4, num_cells=200, activation_class=nn.ELU,
                 std_bias=5.0, std_min_val=1e-4, device=None):  # fmt: skip
        super().__init__()
        self.backbone = MLP(
            out_features=2 * out_features, depth=depth, num_cells=num_cells,
            activation_class=activation_class, device=device,
        )  # fmt: skip
        self.params = NormalParamExtractor(
            scale_mapping=f"biased_softplus_{std_bias}_{std_min_val}"
        )

    def forward(self, state: torch.Tensor, belief: torch.Tensor):
        return self.params(self.backbone(state, belief))


class RSSMRollout(TensorDictModuleBase):
    """Run the RSSM prior then posterior over the last (time) dim of a ``[*B, T]`` batch.

    Step ``t`` reads ``"state"`` and ``"belief"`` (the first step: the batch's own, e.g.
    primed zeros; then the ``("next", "state")`` and ``("next", "belief")`` the step
    before wrote) and its own action and next embedding; the steps are stacked along ``T``.

    Args:
        rssm_prior: a TensorDict module of the prior (e.g. writing ``("next", "belief")``).
        rssm_posterior: a TensorDict module of the posterior (writing ``("next", "state")``).
        use_scan: TorchRL's switch to ``torch``'s scan operator; the steps here run in this
            loop either way, with the same result.
        compile_step: run each step (prior then posterior) through ``torch.compile`` with
            ``compile_backend`` and ``compile_mode`` (compiled at the first call).

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> from torchrl_lite.data import Bounded
        >>> prior = Mod(RSSMPrior(action_spec=Bounded(-1.0, 1.0, (1,)), hidden_dim=8, rnn_hidden_dim=8, state_dim=4),
        ...     ["state", "belief", "action"], [("next", "pm"), ("next", "ps"), "_", ("next", "belief")])
        >>> post = Mod(RSSMPosterior(hidden_dim=8, state_dim=4), [("next", "belief"), ("next", "e")],
        ...     [("next", "qm"), ("next", "qs"), ("next", "state")])
        >>> td = TensorDict(state=torch.zeros(2, 3, 4), belief=torch.zeros(2, 3, 8),
        ...     action=torch.zeros(2, 3, 1), next=TensorDict(e=torch.zeros(2, 3, 5), batch_size=[2, 3]),
        ...     batch_size=[2, 3])
        >>> RSSMRollout(prior, post)(td)["next", "state"].shape
        torch.Size([2, 3, 4])
    """

    def __init__(self, rssm_prior: TensorDictModule, rssm_posterior: TensorDictModule,
                 use_scan: bool = False, compile_step: bool = False,
                 compile_backend: str = "inductor", compile_mode: str | None = "reduce-overhead"):  # fmt: skip
        super().__init__()
        chain = TensorDictSequential(rssm_prior, rssm_posterior)
        self.in_keys, self.out_keys = chain.in_keys, chain.out_keys
        self.rssm_prior, self.rssm_posterior = rssm_prior, rssm_posterior
        self.use_scan, self.compile_step = bool(use_scan), bool(compile_step)
        self._compile_with = {"backend": compile_backend, "mode": compile_mode}
        self._compiled = None

    def _step(self, tensordict):
        self.rssm_prior(tensordict)
        self.rssm_posterior(tensordict)
        return tensordict

    def _step_fn(self):
        if not self.compile_step:
            return self._step
        if self._compiled is None:
            self._compiled = torch.compile(self._step, **self._compile_with)
        return self._compiled

    def forward(self, tensordict):
        steps = tensordict.exclude(*self.out_keys).unbind(-1)  # T TensorDicts [*B]
        current, outputs, step = steps[0], [], self._step_fn()
        for t in range(len(steps)):
            current = step(current)
            outputs.append(current)
            if t + 1 < len(steps):  # the next state and belief start step t + 1
                nxt = current.get("next")
                current = steps[t + 1]
                current.set("state", nxt.get("state"))
                current.set("belief", nxt.get("belief"))
        out = torch.stack(outputs, tensordict.ndim - 1)
        if isinstance(out, LazyStackedTensorDict):
            out = out.contiguous()
        return out


class WorldModelWrapper(TensorDictSequential):
    """A world model: the transition model, then the reward model, run in sequence.

    Example:
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> wm = WorldModelWrapper(Mod(nn.Linear(2, 2), ["x"], ["y"]), Mod(nn.Linear(2, 1), ["y"], ["reward"]))
        >>> wm.get_reward_operator().out_keys
        ['reward']
    """

    def __init__(self, transition_model: TensorDictModule, reward_model: TensorDictModule):
        super().__init__(transition_model, reward_model)

    def get_transition_model_operator(self) -> TensorDictModule:
        return self.module[0]

    def get_reward_operator(self) -> TensorDictModule:
        return self.module[1]
