"""Decision-transformer losses: ``DTLoss`` (offline, deterministic actions) and
``OnlineDTLoss`` (stochastic policy with entropy regularisation).

Papers: Chen et al. 2021, "Decision Transformer: Reinforcement Learning via Sequence
Modeling", https://arxiv.org/abs/2106.01345; Zheng et al. 2022, "Online Decision
Transformer", https://arxiv.org/abs/2202.05607.

``OnlineDTLoss``, with ``pi`` the actor's distribution over the sequence's actions, ``a``
the dataset's actions, ``H = mean(entropy(pi))`` (Monte Carlo when there is no closed
form) and ``alpha = exp(log_alpha)``:

- ``loss_log_likelihood = -mean(log pi(a))`` (means over the steps, or over those with
  ``"mask"`` True when the batch has one);
- ``loss_entropy = -alpha * H`` (``alpha`` detached);
- ``loss_alpha = alpha * (H - target_entropy)`` (``H`` detached; zero with
  ``fixed_alpha``), which raises ``alpha`` while ``H`` is below its target.

Also returns the detached ``log_likelihood``, ``entropy`` and ``alpha``.

Shapes: a batch of sequences ``[*B, T]`` (any batch dims); actions ``[*B, T,
*action_shape]``; log-probabilities and entropies ``[*B, T]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._input_checks import check_probabilistic_actor
from torchrl_lite.objectives._loss_maths import (
    check_distance,
    distance_loss,
    entropy_of,
    log_prob_of,
)
from torchrl_lite.objectives._off_policy import Temperature, action_bounds, action_shape_of
from torchrl_lite.objectives.common import LossModule, _LossValueError

__all__ = ["DTLoss", "OnlineDTLoss"]


@dataclass
class _DTKeys:
    """Keys of the decision-transformer losses; change them with ``loss.set_keys(...)``.

    ``action_target`` is the dataset's action read from the batch; ``action_pred`` is the
    entry the actor writes (``DTLoss``); ``mask`` ``[*B, T]`` (bool), when the batch has
    it, marks the real steps of left-padded windows: the means run over those only.
    """

    action_target: str | tuple = K.ACTION
    action_pred: str | tuple = K.ACTION
    mask: str | tuple = "mask"


def _masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``x [*B, T]`` over the steps where ``mask [*B, T]`` is True (all if None)."""
    if mask is None:
        return x.mean()
    weight = mask.reshape(x.shape).to(x.dtype)
    return (x * weight).sum() / weight.sum().clamp_min(1.0)


def _check_actor(actor, owner: str, needs_dist: bool) -> None:
    if needs_dist:
        check_probabilistic_actor(actor, owner, "ProbabilisticActor with a TanhNormal")
    if not hasattr(actor, "in_keys"):
        raise TypeError(
            f"{owner}: actor_network must be a TensorDict module, got {type(actor).__name__}."
        )


class OnlineDTLoss(Temperature, LossModule):
    """The online decision transformer loss: log-likelihood plus an entropy bonus.

    Its terms are written out in the module docstring.

    Args:
        actor_network: a probabilistic actor (``get_dist``) reading the sequence (e.g.
            observations, actions, returns-to-go) and giving one distribution per step.
        alpha_init: initial temperature.
        min_alpha: lower bound of the temperature (None: none).
        max_alpha: upper bound of the temperature (None: none).
        fixed_alpha: keep the temperature at ``alpha_init``.
        target_entropy: the entropy target, or ``"auto"`` for ``-prod(action_shape)``.
        action_spec: one env's action spec (no batch dims), else the first batch's actions.
        samples_mc_entropy: samples of the Monte-Carlo entropy estimate.
        action_margin: ``m``: clamp the target actions into ``[low + m * h, high - m * h]``
            (``h`` half of ``action_spec``'s range), since a TanhNormal's ``atanh`` is
            infinite at the bounds where datasets clip actions. 0: no clamp.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import ProbabilisticActor, TanhNormal
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(nn.Linear(3, 4),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=TanhNormal)
        >>> loss_module = OnlineDTLoss(actor, alpha_init=0.1)
        >>> batch = TensorDict(observation=torch.randn(4, 10, 3),
        ...     action=torch.rand(4, 10, 2) * 2 - 1, batch_size=[4, 10])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_alpha', 'loss_entropy', 'loss_log_likelihood']
    """

    _AcceptedKeys = _DTKeys

    def __init__(
        self,
        actor_network,
        *,
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        action_spec=None,
        samples_mc_entropy: int = 1,
        action_margin: float = 0.0,
    ):
        super().__init__()
        _check_actor(actor_network, "OnlineDTLoss", needs_dist=True)
        if not 0.0 <= action_margin < 1.0:
            raise ValueError(
                f"OnlineDTLoss: action_margin must be in [0, 1) (a fraction of the half-range), "
                f"got {action_margin!r}."
            )
        self.action_margin = float(action_margin)
        if self.action_margin > 0:
            low, high = action_bounds(
                action_spec, None, self.tensor_keys.action_target, "OnlineDTLoss(action_margin>0)"
            )
            inset = self.action_margin * (high - low) / 2
            self.register_buffer("_clamp_low", (low + inset).float())
            self.register_buffer("_clamp_high", (high - inset).float())
        if int(samples_mc_entropy) < 1:
            raise ValueError(
                f"OnlineDTLoss: samples_mc_entropy must be >= 1, got {samples_mc_entropy}."
            )
        self.register_network("actor_network", actor_network)
        self.samples_mc_entropy = int(samples_mc_entropy)
        shape = action_shape_of(action_spec, self.tensor_keys.action_target, "OnlineDTLoss")
        self._init_temperature(alpha_init, min_alpha, max_alpha, fixed_alpha, target_entropy, shape)

    @property
    def in_keys(self) -> list:
        keys = list(self.actor_network.in_keys)
        return keys + [k for k in [self.tensor_keys.action_target] if k not in keys]

    @property
    def out_keys(self) -> list:
        return [
            "loss_log_likelihood",
            "loss_entropy",
            "loss_alpha",
            "log_likelihood",
            "entropy",
            "alpha",
        ]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The online DT losses on a batch of sequences (see the class docstring)."""
        td = tensordict
        target = self._get(td, "action_target")  # [*B, T, *action_shape]
        if self.action_margin > 0:
            target = torch.clamp(
                target, self._clamp_low.to(target.dtype), self._clamp_high.to(target.dtype)
            )
        dist = self.actor_network.get_dist(td.select(*self.actor_network.in_keys))
        mask = td.get(self.tensor_keys.mask, None)  # [*B, T] or None
        log_likelihood = _masked_mean(log_prob_of(dist, target, td.batch_dims), mask)
        entropy = _masked_mean(entropy_of(dist, td.batch_dims, self.samples_mc_entropy), mask)
        alpha = self._alpha()
        target_entropy = self._target_entropy_for(target, td.batch_dims)
        if self.fixed_alpha:
            loss_alpha = torch.zeros((), device=entropy.device)
        else:
            loss_alpha = self.log_alpha.exp() * (entropy.detach() - target_entropy)
        out = {
            "loss_log_likelihood": -log_likelihood,
            "loss_entropy": -alpha * entropy,
            "loss_alpha": loss_alpha,
            "log_likelihood": log_likelihood.detach(),
            "entropy": entropy.detach(),
            "alpha": alpha,
        }
        return TensorDict(out, batch_size=[])


class DTLoss(LossModule):
    """The decision transformer loss: regression of the predicted actions on the dataset's.

    ``loss = mean(d(a_pred, a))`` over the steps (those with ``mask`` True, when the
    batch has a ``"mask"``) and action dims, ``a_pred`` the action
    the actor writes (at ``"action"``, on a copy of the batch) and ``a`` the batch's
    action. The entry is named ``"loss"`` as in TorchRL (it starts with ``"loss"``).
    Paper: https://arxiv.org/abs/2106.01345.

    Args:
        actor_network: a deterministic TensorDict module reading the sequence and writing
            the predicted actions.
        loss_function: ``"l2"`` (the paper's mean squared error), ``"l1"`` or
            ``"smooth_l1"``.
        device: accepted as TorchRL's scripts pass it; the loss uses the actor's own
            parameters where they are (TorchRL ignores it too).

    Example:
        >>> from torchrl_lite.modules import Actor
        >>> loss_module = DTLoss(Actor(nn.Linear(3, 2)))
        >>> batch = TensorDict(observation=torch.randn(4, 10, 3), action=torch.randn(4, 10, 2),
        ...     batch_size=[4, 10])
        >>> loss_module(batch)["loss"].shape
        torch.Size([])
    """

    _AcceptedKeys = _DTKeys

    def __init__(self, actor_network, *, loss_function: str = "l2", device=None):
        super().__init__()
        _check_actor(actor_network, "DTLoss", needs_dist=False)
        self.register_network("actor_network", actor_network)
        self.loss_function = check_distance(loss_function, "DTLoss")

    @property
    def in_keys(self) -> list:
        keys = list(self.actor_network.in_keys)
        return keys + [k for k in [self.tensor_keys.action_target] if k not in keys]

    @property
    def out_keys(self) -> list:
        return ["loss"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The DT loss on a batch of sequences (see the class docstring)."""
        td = tensordict
        target = self._get(td, "action_target")  # [*B, T, *action_shape]
        out = self.actor_network(td.select(*self.actor_network.in_keys))
        pred = out.get(self.tensor_keys.action_pred, None)
        if pred is None or self.tensor_keys.action_pred not in self.actor_network.out_keys:
            raise _LossValueError(
                f"DTLoss: the actor did not write {self.tensor_keys.action_pred!r} (it wrote "
                f"{list(out.keys(True, True))}); set the key it writes with "
                f"loss.set_keys(action_pred=<its out key>)."
            )
        if pred.shape != target.shape:
            raise _LossValueError(
                f"DTLoss: the predicted actions {self.tensor_keys.action_pred!r} have shape "
                f"{list(pred.shape)} but the target {self.tensor_keys.action_target!r} has "
                f"shape {list(target.shape)}."
            )
        distance = distance_loss(pred, target.to(pred.dtype), self.loss_function)
        per_step = distance.reshape(*td.batch_size, -1).mean(-1)  # [*B, T]
        loss = _masked_mean(per_step, td.get(self.tensor_keys.mask, None))
        return TensorDict({"loss": loss}, batch_size=[])
