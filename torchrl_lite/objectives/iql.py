"""Implicit Q-learning for offline RL: ``IQLLoss``.

Paper: Kostrikov et al. 2021, "Offline Reinforcement Learning with Implicit Q-Learning",
https://arxiv.org/abs/2110.06169.

With ``Q'`` the target Q-networks and ``u = min_i Q'_i(s, a_data) - V(s)``:

- ``loss_value = mean(|expectile - 1(u < 0)| * u^2)`` (``Q'`` carries no gradient);
- ``loss_qvalue = sum_i mean(d(Q_i(s, a_data), y))`` with
  ``y = r + gamma * (1 - terminated) * V(s')`` (``V(s')`` without gradient);
- ``loss_actor = -mean(min(exp(temperature * u), 100) * log pi(a_data|s))`` (``u``
  detached): advantage-weighted regression onto the dataset's actions.

Also returns the detached ``td_error`` and ``advantage`` means; writes the per-sample
TD error into the batch at ``"td_error"``.

Shapes: a batch ``[*B]``; Q-values of the ``N`` Q-networks ``[N, *B]``; state values,
advantages and log-probabilities ``[*B]``; targets ``[*B, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._input_checks import check_probabilistic_actor
from torchrl_lite.objectives._loss_maths import check_distance, log_prob_of
from torchrl_lite.objectives._off_policy import OffPolicyLoss
from torchrl_lite.objectives.common import _LossValueError

__all__ = ["IQLLoss", "DiscreteIQLLoss"]


@dataclass
class _IQLKeys:
    """Keys of ``IQLLoss``; change them with ``loss.set_keys(...)``.

    ``action`` is read from the batch (the dataset's action) and is the key the Q-network
    reads; ``value`` is what the value network writes; ``reward``, ``done`` and
    ``terminated`` are read under ``"next"``; ``priority`` is written into the batch.
    ``priority_weight`` (the importance weights a prioritized buffer adds) weights
    the critic loss per sample when the batch has it.
    """

    action: str | tuple = K.ACTION
    value: str | tuple = K.STATE_VALUE
    state_action_value: str | tuple = "state_action_value"
    priority: str | tuple = "td_error"
    priority_weight: str | tuple = "_weight"
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED


class IQLLoss(OffPolicyLoss):
    """IQL: expectile regression of V on Q, TD learning of Q on V, advantage-weighted actor.

    Its terms are written out in the module docstring.

    Args:
        actor_network: a probabilistic actor (``get_dist``).
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``; copied ``num_qvalue_nets`` times.
        value_network: a TensorDict module writing ``"state_value"`` ``[*B, 1]``.
        num_qvalue_nets: the number of Q-networks.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``, the distance ``d`` of the
            Q-loss.
        temperature: the inverse temperature ``beta`` of the actor's advantage weights.
        expectile: ``tau`` in (0, 1) of the value loss (0.5 is a mean regression).
        delay_qvalue: use target copies of the Q-networks in the value and actor losses.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(MLP(3, 4, depth=1),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=TanhNormal)
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> value = ValueOperator(MLP(3, 1, depth=1), in_keys=["observation"])
        >>> loss_module = IQLLoss(actor, qvalue, value, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2) - 0.5,
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_qvalue', 'loss_value']
    """

    _AcceptedKeys = _IQLKeys

    def __init__(
        self,
        actor_network,
        qvalue_network,
        value_network,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "l2",
        temperature: float = 3.0,
        expectile: float = 0.7,
        delay_qvalue: bool = True,
        gamma: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_probabilistic_actor(actor_network, name)
        self._check_network(
            qvalue_network,
            "qvalue_network",
            "ValueOperator(net, in_keys=['observation', 'action'])",
        )
        self._check_network(value_network, "value_network", "ValueOperator(net)")
        if int(num_qvalue_nets) < 1:
            raise ValueError(f"{name}: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        if not 0.0 < expectile < 1.0:
            raise ValueError(f"{name}: expectile must lie in (0, 1), got {expectile}.")
        if not temperature >= 0:
            raise ValueError(f"{name}: temperature must be >= 0, got {temperature}.")
        self.loss_function = check_distance(loss_function, name)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.temperature, self.expectile = float(temperature), float(expectile)
        self.delay_qvalue = bool(delay_qvalue)
        self.register_network("actor_network", actor_network)
        self.register_network(
            "qvalue_network",
            qvalue_network,
            create_target=self.delay_qvalue,
            num_copies=self.num_qvalue_nets,
        )
        self.register_network("value_network", value_network)
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        nets = (self.actor_network, self.qvalue_network, self.value_network)
        return self._network_in_keys(*nets, next_networks=[self.value_network])

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "loss_qvalue", "loss_value", "td_error", "advantage"]

    def _state_value(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` V of the states of ``td``."""
        net = self.value_network
        return self._read(net(td.select(*net.in_keys)), "value", "the value network")

    def _data_qvalues(self, td: TensorDictBase, target: bool) -> torch.Tensor:
        """``[N, *B]`` Q-values of the batch's actions (target copies if ``target``)."""
        return self._qvalues(td, target=target)

    def _actor_log_prob(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` log-probability of the batch's actions under the actor."""
        dist = self._policy_dist(td)
        return log_prob_of(dist, self._get(td, "action"), td.batch_dims)

    def _advantage(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``u = min_i Q'_i(s, a) - V(s)`` ``[*B]`` (Q' without gradient) and ``V(s)``."""
        with torch.no_grad():
            q_target = self._data_qvalues(td, target=True).min(0).values  # [*B]
        value = self._state_value(td)  # [*B]
        return q_target - value, value

    def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``loss_value`` alone (expectile regression of V on Q') and an empty dict."""
        diff, _ = self._advantage(tensordict)
        weight = (self.expectile - (diff < 0).to(diff.dtype)).abs()
        return (weight * diff.pow(2)).mean(), {}

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``loss_actor`` alone (advantage-weighted log-likelihood) and ``{"advantage"}``."""
        with torch.no_grad():
            advantage, _ = self._advantage(tensordict)
        exp_a = torch.exp(self.temperature * advantage).clamp(max=100.0)
        loss = -(exp_a * self._actor_log_prob(tensordict)).mean()
        return loss, {"advantage": advantage.mean()}

    def qvalue_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``loss_qvalue`` alone (TD onto ``V(s')``) and ``{"td_error"}`` (its mean); the
        per-sample TD error is written into the batch at the ``priority`` key."""
        td = tensordict
        with torch.no_grad():
            next_value = self._state_value(self._next_td(td))  # [*B]
        target = self._bootstrap(td, next_value)  # [*B, 1]
        out: dict[str, torch.Tensor] = {}
        self._td_terms(td, self._data_qvalues(td, target=False), target, out, "loss_qvalue")
        return out.pop("loss_qvalue"), out

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The IQL losses on a batch ``[*B]`` (see the class docstring)."""
        out: dict[str, torch.Tensor] = {}
        out["loss_value"], _ = self.value_loss(tensordict)
        out["loss_actor"], meta = self.actor_loss(tensordict)
        out["loss_qvalue"], td_meta = self.qvalue_loss(tensordict)
        out.update(td_meta)
        out.update(meta)
        return TensorDict(out, batch_size=[])


class DiscreteIQLLoss(IQLLoss):
    """IQL for discrete actions: the Q-network scores every action at once.

    The same three losses as :class:`IQLLoss`, with ``Q_i(s, a) = Q_i(s)[a]`` picked from
    the Q-network's ``[*B, n_actions]`` output at the batch's action, and
    ``log pi(a|s)`` from a categorical actor. Paper: https://arxiv.org/abs/2110.06169.

    Args:
        actor_network: a probabilistic actor over the actions (e.g. ``Categorical`` on
            ``"logits"``).
        qvalue_network: a TensorDict module reading the observation and writing
            ``"state_action_value"`` ``[*B, n_actions]``; copied ``num_qvalue_nets`` times.
        value_network: a TensorDict module writing ``"state_value"`` ``[*B, 1]``.
        action_space: how the batch stores actions: ``"categorical"`` (an index ``[*B]``
            or ``[*B, 1]``) or ``"one_hot"`` (``[*B, n_actions]``).
        num_qvalue_nets, loss_function, temperature, expectile, delay_qvalue, gamma: as in
            :class:`IQLLoss`.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl_lite.modules import MLP, Categorical, ProbabilisticActor
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(3, 2, depth=1), ["observation"],
        ...     ["logits"]), in_keys=["logits"], distribution_class=Categorical)
        >>> qvalue = TensorDictModule(MLP(3, 2, depth=1), ["observation"], ["state_action_value"])
        >>> value = TensorDictModule(MLP(3, 1, depth=1), ["observation"], ["state_value"])
        >>> loss_module = DiscreteIQLLoss(actor, qvalue, value, action_space="categorical")
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.randint(2, (8,)),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_qvalue', 'loss_value']
    """

    def __init__(
        self,
        actor_network,
        qvalue_network,
        value_network,
        *,
        action_space: str = "categorical",
        num_qvalue_nets: int = 2,
        loss_function: str = "l2",
        temperature: float = 3.0,
        expectile: float = 0.7,
        delay_qvalue: bool = True,
        gamma: float | None = None,
    ):
        if action_space not in ("categorical", "one_hot", "one-hot"):
            raise ValueError(
                "DiscreteIQLLoss: action_space must be 'categorical' (action indices) or "
                f"'one_hot' (one-hot actions), got {action_space!r}."
            )
        super().__init__(
            actor_network,
            qvalue_network,
            value_network,
            num_qvalue_nets=num_qvalue_nets,
            loss_function=loss_function,
            temperature=temperature,
            expectile=expectile,
            delay_qvalue=delay_qvalue,
            gamma=gamma,
        )
        self.action_space = "one_hot" if action_space == "one-hot" else action_space

    def _action_index(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` the batch's action as an index."""
        action = self._get(td, "action")
        if self.action_space == "one_hot":
            return action.argmax(-1)
        if action.dim() == td.batch_dims + 1 and action.shape[-1] == 1:
            action = action.squeeze(-1)
        if action.dim() != td.batch_dims:
            raise _LossValueError(
                f"DiscreteIQLLoss: with action_space='categorical' the action must be an index "
                f"[*B] or [*B, 1]; got shape {list(action.shape)} for batch {list(td.batch_size)}"
                ". Pass action_space='one_hot' for one-hot actions."
            )
        return action.long()

    def _data_qvalues(self, td: TensorDictBase, target: bool) -> torch.Tensor:
        net = self._target(self._q_name) if target else getattr(self, self._q_name)
        out = net(td.select(*self._obs_keys(net)))
        key = self.tensor_keys.state_action_value
        values = out.get(key, None)
        if values is None:
            raise _LossValueError(
                f"DiscreteIQLLoss: the Q-network did not write {key!r} (it wrote "
                f"{list(out.keys(True, True))}); set it with loss.set_keys(state_action_value=...)."
            )
        index = self._action_index(td)  # [*B]
        index = index.expand(*values.shape[:-1]).unsqueeze(-1)  # [N, *B, 1]
        return values.gather(-1, index).squeeze(-1)  # [N, *B]

    def _actor_log_prob(self, td: TensorDictBase) -> torch.Tensor:
        dist = self._policy_dist(td)
        action = self._get(td, "action")
        if len(getattr(dist, "event_shape", ())) == 0:  # an index distribution
            action = self._action_index(td)
        return dist.log_prob(action).reshape(td.batch_size)
