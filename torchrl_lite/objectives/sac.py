"""Soft actor-critic: ``SACLoss`` (continuous actions) and ``DiscreteSACLoss``.

Papers: Haarnoja et al. 2018, https://arxiv.org/abs/1801.01290 (v1, with a state-value
network) and https://arxiv.org/abs/1812.05905 (v2: no value network, learned temperature);
Christodoulou 2019, https://arxiv.org/abs/1910.07207 (discrete actions).

``SACLoss``, with ``a ~ pi(.|s)`` reparameterised, ``a' ~ pi(.|s')`` and ``alpha`` detached:

- ``loss_actor = mean(alpha * log pi(a|s) - min_i Q_i(s, a))`` (Q parameters detached);
- ``loss_qvalue = sum_i mean(d(Q_i(s, a_data), y))`` with ``y = r + gamma * (1 -
  terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))`` (``Q'`` the target
  Q-networks; ``y`` from the value estimator, TD(0) by default);
- ``loss_alpha = -mean(log_alpha * (log pi(a|s) + target_entropy))`` (log-probabilities
  detached; zero with ``fixed_alpha``);
- with a ``value_network`` (SAC v1) ``y = r + gamma * (1 - terminated) * V'(s')`` and
  ``loss_value = mean(d(V(s), min_i Q_i(s, a) - alpha * log pi(a|s)))`` (target detached);
- ``entropy = -mean log pi(a|s)``; the TD error ``max_i |Q_i - y|`` is written into the
  batch per sample (``"td_error"``) and returned, with the detached ``alpha``.

``DiscreteSACLoss`` takes expectations over the ``n`` actions, with ``pi = pi(.|s)``,
``pi' = pi(.|s')`` and ``H(pi)`` detached: ``loss_actor = mean(sum_a pi(a) * (alpha *
log pi(a) - min_i Q_i(s, a)))`` (Q detached), ``y = r + gamma * (1 - terminated) * sum_a
pi'(a) * (min_i Q'_i(s', a) - alpha * log pi'(a))`` and ``loss_alpha = -mean(log_alpha *
(-H(pi) + target_entropy))``; ``entropy = mean H(pi)``.

Shapes: a batch ``[*B]``; Q-values of the ``N`` Q-networks ``[N, *B]`` (``[N, *B, n]`` for
discrete actions); log-probabilities ``[*B]``; targets ``[*B, 1]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._input_checks import check_probabilistic_actor
from torchrl_lite.objectives._loss_maths import (
    action_index,
    check_distance,
    distance_loss,
    log_prob_of,
)
from torchrl_lite.objectives._off_policy import (
    OffPolicyLoss,
    Temperature,
    action_shape_of,
)
from torchrl_lite.objectives.common import _LossValueError

__all__ = ["SACLoss", "DiscreteSACLoss"]


@dataclass
class _SACKeys:
    """Keys of ``SACLoss``; change them with ``loss.set_keys(...)``.

    ``action`` is read from the batch and is the key the actor and Q-network use for it;
    ``reward``, ``done`` and ``terminated`` are read under ``"next"``; ``priority`` (the
    per-sample TD error, for prioritized replay) is written into the batch.
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


class SACLoss(Temperature, OffPolicyLoss):
    """The soft actor-critic loss, SAC v2 by default (its terms: the module docstring).

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. with a ``TanhNormal``.
        qvalue_network: a TensorDict module writing ``"state_action_value"`` ``[*B, 1]``.
        value_network: a state-value network (SAC v1), or None (SAC v2).
        num_qvalue_nets: the number of Q-networks.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``, the regression distance ``d``.
        alpha_init: initial temperature.
        min_alpha: lower bound of the temperature (None: none).
        max_alpha: upper bound of the temperature (None: none).
        fixed_alpha: keep the temperature at ``alpha_init``.
        target_entropy: the entropy target, or ``"auto"`` for ``-prod(action_shape)``.
        action_spec: one env's action spec (no batch dims), else the first batch's actions.
        delay_actor: sample ``a'`` from a target copy of the actor.
        delay_qvalue: use target copies of the Q-networks (SAC v2).
        delay_value: use a target copy of the value network (SAC v1).
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(MLP(3, 4, depth=1),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=TanhNormal)
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = SACLoss(actor, qvalue, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    _AcceptedKeys = _SACKeys

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        actor_network,
        qvalue_network,
        value_network=None,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        action_spec=None,
        delay_actor: bool = False,
        delay_qvalue: bool = True,
        delay_value: bool = True,
        gamma: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_probabilistic_actor(actor_network, name, "ProbabilisticActor with a TanhNormal")
        self._check_network(
            qvalue_network,
            "qvalue_network",
            "ValueOperator(net, in_keys=['observation', 'action'])",
        )
        if value_network is not None:
            self._check_network(value_network, "value_network", "ValueOperator(net)")
        if int(num_qvalue_nets) < 1:
            raise ValueError(f"{name}: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        self.loss_function = check_distance(loss_function, name)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.delay_actor, self.delay_qvalue = bool(delay_actor), bool(delay_qvalue)
        self.register_network("actor_network", actor_network, create_target=self.delay_actor)
        self.register_network(
            "qvalue_network",
            qvalue_network,
            create_target=self.delay_qvalue and value_network is None,
            num_copies=self.num_qvalue_nets,
        )
        if value_network is not None:
            self.delay_value = bool(delay_value)
            self.register_network("value_network", value_network, create_target=self.delay_value)
        else:
            self.value_network = None
        shape = action_shape_of(action_spec, self.tensor_keys.action, name)
        self._init_temperature(alpha_init, min_alpha, max_alpha, fixed_alpha, target_entropy, shape)
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        nets = [self.actor_network, self.qvalue_network]
        if self.value_network is None:
            return self._network_in_keys(*nets)
        return self._network_in_keys(*nets, self.value_network, next_networks=[self.value_network])

    @property
    def out_keys(self) -> list:
        keys = ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy", "td_error"]
        return keys + (["loss_value"] if self.value_network is not None else [])

    # -- reductions over the Q ensemble (REDQ changes them) ----------------------------
    def _actor_q(self, qvalues: torch.Tensor) -> torch.Tensor:
        """``[N, *B]`` Q-values of the policy's actions -> ``[*B]`` (the minimum)."""
        return qvalues.min(0).values

    def _next_q(self, next_td: TensorDictBase, next_action: torch.Tensor) -> torch.Tensor:
        """``[*B]`` value of ``(s', a')`` under the target Q-networks (the minimum)."""
        return self._qvalues(next_td, next_action, target=True).min(0).values

    # -- the loss ----------------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The SAC losses on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        alpha = self._alpha()
        out: dict[str, torch.Tensor] = {}
        _, action, log_prob, q_actor = self._actor_terms(td, alpha, out)
        self._qvalue_terms(td, alpha, out)
        self._alpha_terms(td, action, log_prob, out)
        if self.value_network is not None:
            self._value_terms(td, alpha, log_prob, q_actor, out)
        return TensorDict(out, batch_size=[])

    def _actor_terms(self, td, alpha, out):
        """``loss_actor`` and ``entropy``; returns ``(dist, a, log pi(a|s), Q(s, a))``."""
        dist = self._policy_dist(td)
        action = dist.rsample()  # [*B, *action_shape]
        log_prob = log_prob_of(dist, action, td.batch_dims)  # [*B]
        qvalues = self._qvalues(td, action, detach=True)  # [N, *B]
        q_actor = self._actor_q(qvalues)  # [*B]
        out["loss_actor"] = (alpha * log_prob - q_actor).mean()
        out["entropy"] = -log_prob.detach().mean()
        return dist, action, log_prob, q_actor

    def _next_value(self, td: TensorDictBase, alpha) -> torch.Tensor:
        """``[*B]`` soft value of the next state (no grad)."""
        next_td = self._next_td(td)
        with torch.no_grad():
            if self.value_network is not None:
                net = self._target("value_network")
                return self._read(net(next_td.select(*net.in_keys)), "value", "the value network")
            actor = self._target("actor_network")
            dist = actor.get_dist(next_td.select(*actor.in_keys))
            next_action = dist.sample()
            next_log_prob = log_prob_of(dist, next_action, td.batch_dims)  # [*B]
            return self._next_q(next_td, next_action) - alpha * next_log_prob

    def _qvalue_terms(self, td, alpha, out) -> torch.Tensor:
        """``loss_qvalue`` and ``td_error``; returns the predictions ``[N, *B]``."""
        target = self._bootstrap(td, self._next_value(td, alpha))  # [*B, 1]
        pred = self._qvalues(td)  # [N, *B]
        self._td_terms(td, pred, target, out, "loss_qvalue")
        return pred

    def _alpha_terms(self, td, action, log_prob, out) -> None:
        target_entropy = self._target_entropy_for(action, td.batch_dims)
        if self.fixed_alpha:
            out["loss_alpha"] = torch.zeros((), device=log_prob.device)
        else:
            out["loss_alpha"] = -(self.log_alpha * (log_prob.detach() + target_entropy)).mean()
        out["alpha"] = self.log_alpha.detach().exp()

    def _value_terms(self, td, alpha, log_prob, q_actor, out) -> None:
        net = self.value_network
        value = self._read(net(td.select(*net.in_keys)), "value", "the value network")  # [*B]
        target = (q_actor - alpha * log_prob).detach()  # [*B]
        out["loss_value"] = distance_loss(value, target, self.loss_function).mean()


@dataclass
class _DiscreteSACKeys:
    """Keys of ``DiscreteSACLoss``; change them with ``loss.set_keys(...)``.

    ``action_value`` is what the Q-network writes (``[*B, n_actions]``); ``reward``,
    ``done`` and ``terminated`` are read under ``"next"``; ``priority`` is written into
    the batch.
    ``priority_weight`` (the importance weights a prioritized buffer adds) weights
    the critic loss per sample when the batch has it.
    """

    action: str | tuple = K.ACTION
    action_value: str | tuple = "action_value"
    priority: str | tuple = "td_error"
    priority_weight: str | tuple = "_weight"
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED


class DiscreteSACLoss(Temperature, OffPolicyLoss):
    """Soft actor-critic for discrete actions: expectations over actions replace samples.

    Its terms are in the module docstring; the outputs are ``SACLoss``'s.

    Args:
        actor_network: a probabilistic actor over the actions (its distribution has
            ``logits``, e.g. ``OneHotCategorical`` or ``Categorical``).
        qvalue_network: a TensorDict module writing ``"action_value"`` ``[*B, n]``.
        num_actions: ``n``, the number of actions.
        num_qvalue_nets: the number of Q-networks.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial temperature.
        min_alpha: lower bound of the temperature (None: none).
        max_alpha: upper bound of the temperature (None: none).
        fixed_alpha: keep the temperature at ``alpha_init``.
        target_entropy_weight: ``"auto"`` target entropy is this fraction of ``log(n)``.
        target_entropy: the entropy target, or ``"auto"``.
        delay_qvalue: use target copies of the Q-networks.
        action_space: ``"one_hot"`` or ``"categorical"`` (None: from the action's shape).
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl_lite.modules import OneHotCategorical, ProbabilisticActor
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Linear(3, 4), ["observation"],
        ...     ["logits"]), in_keys=["logits"], distribution_class=OneHotCategorical)
        >>> qvalue = TensorDictModule(nn.Linear(3, 4), ["observation"], ["action_value"])
        >>> loss_module = DiscreteSACLoss(actor, qvalue, num_actions=4)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.randint(4, (8,)),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> loss_module(batch)["loss_qvalue"].shape
        torch.Size([])
    """

    _AcceptedKeys = _DiscreteSACKeys

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        actor_network,
        qvalue_network,
        num_actions: int,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy_weight: float = 0.98,
        target_entropy: str | float = "auto",
        delay_qvalue: bool = True,
        action_space: str | None = None,
        gamma: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_probabilistic_actor(
            actor_network, name, "ProbabilisticActor with a OneHotCategorical"
        )
        self._check_network(
            qvalue_network,
            "qvalue_network",
            "TensorDictModule(net, ['observation'], ['action_value'])",
        )
        if int(num_actions) < 2:
            raise ValueError(f"{name}: num_actions must be >= 2, got {num_actions}.")
        if action_space not in (None, "one_hot", "categorical"):
            raise ValueError(
                f"{name}: action_space must be 'one_hot', 'categorical' or None, got {action_space!r}."
            )
        self.num_actions = int(num_actions)
        self.action_space = action_space
        self.loss_function = check_distance(loss_function, name)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.delay_qvalue = bool(delay_qvalue)
        self.register_network("actor_network", actor_network)
        self.register_network(
            "qvalue_network",
            qvalue_network,
            create_target=self.delay_qvalue,
            num_copies=self.num_qvalue_nets,
        )
        if target_entropy == "auto":
            target_entropy = float(target_entropy_weight) * math.log(self.num_actions)
        self._init_temperature(alpha_init, min_alpha, max_alpha, fixed_alpha, target_entropy, None)
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        return self._network_in_keys(self.actor_network, self.qvalue_network)

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy", "td_error"]

    def _action_values(self, net, td: TensorDictBase) -> torch.Tensor:
        """``[N, *B, n]`` action values of the ensemble ``net`` on ``td``."""
        out = net(td.select(*self.qvalue_network.in_keys))
        values = out.get(self.tensor_keys.action_value, None)
        if values is None:
            raise _LossValueError(
                f"{type(self).__name__}: the Q-network did not write "
                f"{self.tensor_keys.action_value!r} (it wrote {list(out.keys(True, True))}); "
                f"set the key it writes with loss.set_keys(action_value=<its out key>)."
            )
        if values.shape[-1] != self.num_actions:
            raise _LossValueError(
                f"{type(self).__name__}: the Q-network wrote action values of shape "
                f"{list(values.shape)}; expected a last dim of num_actions={self.num_actions}."
            )
        return values

    def _log_policy(self, td: TensorDictBase, actor) -> torch.Tensor:
        """``[*B, n]`` log-probabilities of every action (finite where a prob is 0)."""
        dist = actor.get_dist(td.select(*actor.in_keys))
        log_pi = torch.log_softmax(dist.logits, -1)
        return log_pi.clamp_min(torch.finfo(log_pi.dtype).min)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The discrete SAC losses on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        alpha = self._alpha()
        # critic: Q_i(s, a_data) against the soft value of s'
        qvalues = self._action_values(self.qvalue_network, td)  # [N, *B, n]
        index = self._action_index(td)  # [*B]
        pred = qvalues.gather(-1, index.expand(qvalues.shape[:-1]).unsqueeze(-1)).squeeze(-1)
        next_td = self._next_td(td)
        with torch.no_grad():
            next_q = self._action_values(self._target("qvalue_network"), next_td)  # [N, *B, n]
            next_q = next_q.min(0).values  # [*B, n]
            next_log_pi = self._log_policy(next_td, self.actor_network)  # [*B, n]
            next_value = (next_log_pi.exp() * (next_q - alpha * next_log_pi)).sum(-1)  # [*B]
        out: dict[str, torch.Tensor] = {}
        self._td_terms(td, pred, self._bootstrap(td, next_value), out, "loss_qvalue")
        # actor: expectation over actions, Q-values detached
        log_pi = self._log_policy(td, self.actor_network)  # [*B, n]
        pi = log_pi.exp()
        q_min = qvalues.detach().min(0).values  # [*B, n]
        out["loss_actor"] = (pi * (alpha * log_pi - q_min)).sum(-1).mean()
        entropy = -(pi * log_pi).sum(-1).detach()  # [*B]
        if self.fixed_alpha:
            out["loss_alpha"] = torch.zeros((), device=pred.device)
        else:
            out["loss_alpha"] = -(self.log_alpha * (self.target_entropy - entropy)).mean()
        out["alpha"] = self.log_alpha.detach().exp()
        out["entropy"] = entropy.mean()
        return TensorDict(out, batch_size=[])

    def _action_index(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` int64 index of the batch's actions."""
        action = self._get(td, "action")
        try:
            index = action_index(action, self.num_actions, self.action_space)
        except ValueError as err:
            raise _LossValueError(f"{type(self).__name__}: {err}") from err
        if index.shape[:-1] == td.batch_size and index.shape[-1:] == (1,):
            index = index.squeeze(-1)
        if index.shape != td.batch_size:
            raise _LossValueError(
                f"{type(self).__name__}: action {self.tensor_keys.action!r} has shape "
                f"{list(action.shape)}, neither one-hot [*B, {self.num_actions}] nor an index "
                f"[*B] / [*B, 1] for the batch {list(td.batch_size)}."
            )
        return index
