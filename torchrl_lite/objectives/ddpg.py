"""Deep deterministic policy gradient: ``DDPGLoss``.

Paper: Lillicrap et al. 2015, "Continuous control with deep reinforcement learning",
https://arxiv.org/abs/1509.02971.

With ``mu`` the actor, ``Q`` the value network and ``mu'``/``Q'`` their target copies:

- ``loss_actor = -mean(Q(s, mu(s)))`` (Q parameters detached);
- ``loss_value = mean(d(Q(s, a_data), y))`` with
  ``y = r + gamma * (1 - terminated) * Q'(s', mu'(s'))`` (from the value estimator,
  TD(0) by default), each term weighted by the batch's importance weights
  ``"_weight"`` when a prioritized buffer added them.

Also returns the detached ``td_error``, ``pred_value`` and ``target_value`` means;
writes the per-sample TD error ``|Q - y|`` into the batch at ``"td_error"``.

Shapes: a batch ``[*B]``; actions ``[*B, *action_shape]``; Q-values ``[*B]`` (the network
writes ``[*B, 1]``); targets ``[*B, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._loss_maths import check_distance
from torchrl_lite.objectives._off_policy import OffPolicyLoss

__all__ = ["DDPGLoss"]


@dataclass
class _DDPGKeys:
    """Keys of ``DDPGLoss``; change them with ``loss.set_keys(...)``.

    ``action`` is read from the batch and is the key the actor writes and the value
    network reads; ``state_action_value`` is what the value network writes; ``reward``,
    ``done`` and ``terminated`` are read under ``"next"``; ``priority`` (the per-sample TD
    error, for prioritized replay) is written into the batch.
    ``priority_weight`` (the importance weights a prioritized buffer adds) weights
    the critic loss per sample when the batch has it.
    """

    action: str | tuple = K.ACTION
    state_action_value: str | tuple = "state_action_value"
    priority: str | tuple = "td_error"
    priority_weight: str | tuple = "_weight"
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED


class DDPGLoss(OffPolicyLoss):
    """The DDPG loss: a deterministic policy gradient through a learned Q-function.

    Its terms are written out in the module docstring.

    Args:
        actor_network: a deterministic actor writing ``"action"`` (e.g. ``Actor``).
        value_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``, the regression distance ``d``.
        delay_actor: use a target copy of the actor.
        delay_value: use a target copy of the value network.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from torchrl_lite.modules import MLP, Actor, ValueOperator
        >>> actor = Actor(MLP(3, 2, depth=1))
        >>> value = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = DDPGLoss(actor, value, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> losses = loss_module(batch)
        >>> sorted(k for k in losses.keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_value']
    """

    _AcceptedKeys = _DDPGKeys
    _q_name = "value_network"

    def __init__(
        self,
        actor_network,
        value_network,
        *,
        loss_function: str = "l2",
        delay_actor: bool = False,
        delay_value: bool = True,
        gamma: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        self._check_network(actor_network, "actor_network", "Actor(net)")
        self._check_network(
            value_network, "value_network", "ValueOperator(net, in_keys=['observation', 'action'])"
        )
        self.loss_function = check_distance(loss_function, name)
        self.delay_actor, self.delay_value = bool(delay_actor), bool(delay_value)
        self.register_network("actor_network", actor_network, create_target=self.delay_actor)
        self.register_network("value_network", value_network, create_target=self.delay_value)
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        return self._network_in_keys(self.actor_network, self.value_network)

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "loss_value", "td_error", "pred_value", "target_value"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The DDPG losses on a batch ``[*B]`` (see the class docstring)."""
        loss_actor, _ = self.loss_actor(tensordict)
        loss_value, out = self.loss_value(tensordict)
        return TensorDict(
            {"loss_actor": loss_actor, "loss_value": loss_value, **out}, batch_size=[]
        )

    def loss_actor(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_actor, {})``: ``-mean Q(s, mu(s))`` (Q's parameters detached)."""
        action = self._action_of(self.actor_network, tensordict)  # [*B, *action_shape]
        return -self._qvalues(tensordict, action, detach=True).mean(), {}

    def loss_value(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_value, {"td_error", "pred_value", "target_value"})`` (detached means)."""
        td = tensordict
        next_td = self._next_td(td)
        with torch.no_grad():
            next_action = self._action_of(self._target("actor_network"), next_td)
            next_value = self._qvalues(next_td, next_action, target=True)  # [*B]
        target = self._bootstrap(td, next_value)  # [*B, 1]
        pred = self._qvalues(td)  # [*B]
        out: dict[str, torch.Tensor] = {}
        self._td_terms(td, pred, target, out, "loss_value")
        out["pred_value"] = pred.detach().mean()
        out["target_value"] = target.mean()
        return out.pop("loss_value"), out
