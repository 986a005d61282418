"""Twin delayed DDPG: ``TD3Loss``.

Paper: Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
Methods", https://arxiv.org/abs/1802.09477.

With ``mu`` the deterministic actor, ``mu'`` and ``Q'_i`` the target networks:

- ``loss_actor = -mean(Q_1(s, mu(s)))`` (Q parameters detached);
- ``loss_qvalue = sum_i mean(d(Q_i(s, a_data), y))`` with
  ``y = r + gamma * (1 - terminated) * min_i Q'_i(s', a')`` and the smoothed target
  action ``a' = clip(mu'(s') + clip(policy_noise * N(0, 1), -noise_clip, noise_clip),
  low, high)`` (``low``/``high`` from the action spec).

The paper's delayed policy updates (one actor step per ``d`` critic steps) belong to
the training loop: step the actor's optimizer on ``loss_actor`` every ``d`` updates.
Also returns the detached ``td_error``, ``pred_value`` and ``target_value`` means;
writes the per-sample TD error ``max_i |Q_i - y|`` into the batch at ``"td_error"``.

Shapes: a batch ``[*B]``; actions ``[*B, *action_shape]``; Q-values of the ``N``
Q-networks ``[N, *B]``; targets ``[*B, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._loss_maths import check_distance
from torchrl_lite.objectives._off_policy import OffPolicyLoss, action_bounds

__all__ = ["TD3Loss"]


@dataclass
class _TD3Keys:
    """Keys of ``TD3Loss``; change them with ``loss.set_keys(...)``.

    ``action`` is read from the batch and is the key the actor writes and the Q-network
    reads; ``reward``, ``done`` and ``terminated`` are read under ``"next"``; ``priority``
    (the per-sample TD error, for prioritized replay) is written into the batch.
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


class TD3Loss(OffPolicyLoss):
    """The TD3 loss: clipped double-Q targets with target policy smoothing.

    Its terms are written out in the module docstring.

    Args:
        actor_network: a deterministic actor writing ``"action"`` (e.g. ``Actor``).
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``; copied ``num_qvalue_nets`` times.
        action_spec: a bounded action spec (else the actor's spec, or ``bounds``).
        bounds: ``(low, high)`` of the action, instead of a spec.
        num_qvalue_nets: the number of Q-networks.
        policy_noise: standard deviation of the target policy smoothing noise.
        noise_clip: the noise is clipped to ``[-noise_clip, noise_clip]``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``, the regression distance ``d``.
        delay_actor: use a target copy of the actor.
        delay_qvalue: use target copies of the Q-networks.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import MLP, Actor, ValueOperator
        >>> actor = Actor(MLP(3, 2, depth=1), spec=Bounded(-1.0, 1.0, shape=(2,)))
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = TD3Loss(actor, qvalue, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> losses = loss_module(batch)
        >>> sorted(k for k in losses.keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_qvalue']
    """

    _AcceptedKeys = _TD3Keys

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        action_spec=None,
        bounds: tuple | None = None,
        num_qvalue_nets: int = 2,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        gamma: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        self._check_network(actor_network, "actor_network", "Actor(net, spec=env.action_spec)")
        self._check_network(
            qvalue_network,
            "qvalue_network",
            "ValueOperator(net, in_keys=['observation', 'action'])",
        )
        if int(num_qvalue_nets) < 1:
            raise ValueError(f"{name}: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        if not policy_noise >= 0 or not noise_clip >= 0:
            raise ValueError(
                f"{name}: policy_noise and noise_clip must be >= 0, got {policy_noise} and {noise_clip}."
            )
        if bounds is not None:
            low, high = (torch.as_tensor(b, dtype=torch.float32) for b in bounds)
        else:
            low, high = action_bounds(action_spec, actor_network, self.tensor_keys.action, name)
        self.register_buffer("action_low", low)
        self.register_buffer("action_high", high)
        self.loss_function = check_distance(loss_function, name)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.policy_noise, self.noise_clip = float(policy_noise), float(noise_clip)
        self.delay_actor, self.delay_qvalue = bool(delay_actor), bool(delay_qvalue)
        self.register_network("actor_network", actor_network, create_target=self.delay_actor)
        self.register_network(
            "qvalue_network",
            qvalue_network,
            create_target=self.delay_qvalue,
            num_copies=self.num_qvalue_nets,
        )
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        return self._network_in_keys(self.actor_network, self.qvalue_network)

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "loss_qvalue", "td_error", "pred_value", "target_value"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The TD3 losses on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        out: dict[str, torch.Tensor] = {}
        self._actor_terms(td, out)
        target = self._bootstrap(td, self._next_value(td))  # [*B, 1]
        pred = self._qvalues(td)  # [N, *B]
        self._td_terms(td, pred, target, out, "loss_qvalue")
        out["pred_value"] = pred.detach().mean()
        out["target_value"] = target.mean()
        return TensorDict(out, batch_size=[])

    def _actor_terms(self, td: TensorDictBase, out: dict) -> None:
        action = self._action_of(self.actor_network, td)  # [*B, *action_shape]
        q_first = self._qvalues(td, action, detach=True)[0]  # [*B]
        out["loss_actor"] = -q_first.mean()

    # -- the two terms apart (TorchRL's script delays the actor update itself) -------
    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_actor, {})``."""
        out: dict[str, torch.Tensor] = {}
        self._actor_terms(tensordict, out)
        return out.pop("loss_actor"), out

    def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_qvalue, {"td_error", "pred_value", "target_value"})`` (detached means)."""
        td = tensordict
        out: dict[str, torch.Tensor] = {}
        target = self._bootstrap(td, self._next_value(td))  # [*B, 1]
        pred = self._qvalues(td)  # [N, *B]
        self._td_terms(td, pred, target, out, "loss_qvalue")
        out["pred_value"] = pred.detach().mean()
        out["target_value"] = target.mean()
        return out.pop("loss_qvalue"), out

    def _next_value(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` ``min_i Q'_i(s', a')`` at the smoothed target action (no grad)."""
        next_td = self._next_td(td)
        with torch.no_grad():
            next_action = self._action_of(self._target("actor_network"), next_td)
            noise = torch.randn_like(next_action) * self.policy_noise
            noise = noise.clamp(-self.noise_clip, self.noise_clip)
            next_action = torch.clamp(next_action + noise, self.action_low, self.action_high)
            return self._qvalues(next_td, next_action, target=True).min(0).values
