"""Deep Q-learning losses: ``DQNLoss`` (with double DQN) and ``DistributionalDQNLoss`` (C51).

Papers: Mnih et al. 2015, "Human-level control through deep reinforcement learning",
https://www.nature.com/articles/nature14236; van Hasselt et al. 2016, "Deep Reinforcement
Learning with Double Q-learning", https://arxiv.org/abs/1509.06461; Bellemare et al. 2017,
"A Distributional Perspective on Reinforcement Learning", https://arxiv.org/abs/1707.06887.

Shapes: a batch ``[*B]``; action values ``[*B, n_actions]``; distributional action values
are log-probabilities ``[*B, n_atoms, n_actions]`` over a ``support`` ``[n_atoms]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from torchrl_lite import _keys as K
from torchrl_lite.modules.tensordict_module.qvalue import (
    DistributionalQValueModule,
    QValueModule,
    resolve_action_space,
)
from torchrl_lite.objectives._input_checks import check_discrete_actions, first_call
from torchrl_lite.objectives._loss_maths import action_index, check_distance, distance_loss
from torchrl_lite.objectives.common import LossModule, _LossValueError
from torchrl_lite.objectives.value import ValueEstimators

__all__ = ["DQNLoss", "DistributionalDQNLoss", "c51_projection"]


@dataclass
class _DQNKeys:
    """Keys of the DQN losses; change them with ``loss.set_keys(...)``.

    ``reward``, ``done`` and ``terminated`` are read under ``"next"``; ``priority`` is
    written into the input batch (per-sample TD error, for prioritized replay);
    ``priority_weight`` is the optional importance weight a prioritized buffer adds.
    """

    action_value: str | tuple = "action_value"
    action: str | tuple = K.ACTION
    value: str | tuple = "chosen_action_value"
    priority: str | tuple = "td_error"
    priority_weight: str | tuple = "_weight"
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED
    steps_to_next_obs: str | tuple = "steps_to_next_obs"


def _values_net(network: TensorDictModuleBase, head_type: type):
    """The part of ``network`` that writes the action values (drops a greedy head)."""
    inner = getattr(network, "module", None)
    if isinstance(inner, torch.nn.ModuleList) and isinstance(inner[-1], head_type):
        if len(inner) == 2:
            return inner[0]
        from tensordict.nn import TensorDictSequential

        return TensorDictSequential(*inner[:-1])
    return network


class _QLossBase(LossModule):
    """What both DQN losses share: the Q-network, its target, action indices."""

    _AcceptedKeys = _DQNKeys
    default_value_estimator = ValueEstimators.TD0
    _head_type: type = QValueModule

    def __init__(self, value_network, delay_value: bool, action_space, gamma):
        super().__init__()
        name = type(self).__name__
        if not isinstance(value_network, TensorDictModuleBase):
            raise TypeError(
                f"{name}: value_network must be a TensorDict module writing 'action_value' "
                f"(e.g. QValueActor(net, action_space='one_hot')), got "
                f"{type(value_network).__name__}."
            )
        if action_space is None:
            action_space = getattr(value_network, "action_space", None)
        if action_space is not None:  # a name ("one-hot" too) or a OneHot/Categorical spec
            action_space = resolve_action_space(action_space, None, name)
        self.action_space = action_space
        self.delay_value = bool(delay_value)
        self.register_network("value_network", value_network, create_target=self.delay_value)
        # the networks writing the action values, without the greedy head (not submodules)
        self.__dict__["_q"] = _values_net(value_network, self._head_type)
        if self.delay_value:
            self.__dict__["_q_target"] = _values_net(self.target_value_network, self._head_type)
        else:
            self.__dict__["_q_target"] = self._q
        self._in = list(value_network.in_keys)
        self._set_value_kwargs(gamma=gamma)

    @property
    def in_keys(self) -> list:
        keys = self.tensor_keys
        nxt = [(K.NEXT, k) if isinstance(k, str) else (K.NEXT, *k) for k in self._in]
        return [*self._in, keys.action, *nxt, (K.NEXT, keys.reward), (K.NEXT, keys.done)]

    def _action_values(self, net, td: TensorDictBase) -> torch.Tensor:
        out = net(td.select(*self._in, strict=False))
        values = out.get(self.tensor_keys.action_value, None)
        if values is None:
            raise _LossValueError(
                f"{type(self).__name__}: the value network did not write "
                f"{self.tensor_keys.action_value!r} (it wrote {list(out.keys(True, True))}); "
                f"set the key it writes with loss.set_keys(action_value=<its out key>)."
            )
        return values

    def _action_index(self, td: TensorDictBase, n_actions: int) -> torch.Tensor:
        """``[*B]`` int64 index of the batch's actions."""
        action = self._get(td, "action")
        try:
            index = action_index(action, n_actions, self.action_space)
        except ValueError as err:
            raise _LossValueError(f"{type(self).__name__}: {err}") from err
        if first_call(self, "discrete_actions"):  # once: a host sync
            one_hot = action.dim() > 0 and action.shape[-1] == n_actions and n_actions > 1
            one_hot = self.action_space == "one_hot" or (self.action_space is None and one_hot)
            try:
                check_discrete_actions(
                    type(self).__name__, self.tensor_keys.action, action, n_actions, one_hot
                )
            except ValueError as err:
                self._checked_inputs.discard("discrete_actions")  # check the next batch too
                raise _LossValueError(str(err)) from err
        if index.shape != td.batch_size:
            if index.shape[:-1] == td.batch_size and index.shape[-1] == 1:
                return index.squeeze(-1)
            raise _LossValueError(
                f"{type(self).__name__}: action {self.tensor_keys.action!r} has shape "
                f"{list(action.shape)}, neither one-hot [*B, {n_actions}] nor an index "
                f"[*B] / [*B, 1] for the batch {list(td.batch_size)}; pass "
                f"action_space='one_hot' or 'categorical'."
            )
        return index

    def _weighted_mean(self, loss: torch.Tensor, td: TensorDictBase) -> torch.Tensor:
        """Mean of the per-sample ``loss`` ``[*B]``, importance-weighted when the batch has
        the prioritized buffer's weights."""
        weight = td.get(self.tensor_keys.priority_weight, None)
        if weight is not None:
            loss = loss * weight.reshape(loss.shape)
        return loss.mean()


class DQNLoss(_QLossBase):
    """The DQN loss ``mean(d(Q(s, a), r + gamma * (1 - terminated) * max_a' Q'(s', a')))``.

    ``Q'`` is the target network (``delay_value=True``) or the online one under
    ``no_grad``; with ``double_dqn`` the next action is the online arg-max and its value
    is read from the target network. The target is computed by the value estimator
    (TD(0) by default; ``make_value_estimator`` changes it). Writes the per-sample
    ``"td_error"`` ``|Q - target|`` (detached) into the input batch for prioritized replay,
    and weights the loss by ``"_weight"`` when present. Returns ``loss`` and the detached
    ``td_error`` mean.

    Args:
        value_network: a TensorDict module writing ``"action_value"`` ``[*B, n]``, e.g. a
            ``QValueActor``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: use a target copy of the network (``SoftUpdate`` / ``HardUpdate``).
        double_dqn: pick the next action with the online network (needs ``delay_value``).
        action_space: ``"one_hot"``, ``"categorical"`` or a OneHot / Categorical spec; read
            from ``value_network`` when it has one, else inferred from the action's shape.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from torchrl_lite.modules import QValueActor
        >>> value_network = QValueActor(nn.Linear(4, 2), action_space="one_hot")
        >>> loss_module = DQNLoss(value_network=value_network, gamma=0.99)
        >>> obs = torch.randn(8, 4)
        >>> batch = TensorDict(observation=obs, action=torch.eye(2)[torch.randint(2, (8,))],
        ...     next=TensorDict(observation=torch.randn(8, 4), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool),
        ...         terminated=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]),
        ...     batch_size=[8])
        >>> loss = loss_module(batch)
        >>> loss["loss"].shape, batch["td_error"].shape
        (torch.Size([]), torch.Size([8]))
    """

    def __init__(
        self,
        value_network,
        *,
        loss_function: str = "l2",
        delay_value: bool = True,
        double_dqn: bool = False,
        action_space: str | None = None,
        gamma: float | None = None,
    ):
        if double_dqn and not delay_value:
            raise ValueError("DQNLoss: double_dqn=True needs delay_value=True (a target network).")
        super().__init__(value_network, delay_value, action_space, gamma)
        self.loss_function = check_distance(loss_function, "DQNLoss")
        self.double_dqn = bool(double_dqn)

    @property
    def out_keys(self) -> list:
        return ["loss", "td_error"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The DQN loss on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        values = self._action_values(self._q, td)  # [*B, n]
        index = self._action_index(td, values.shape[-1])  # [*B]
        pred = values.gather(-1, index.unsqueeze(-1))  # [*B, 1]
        next_td = self._get_next(td)
        with torch.no_grad():
            next_values = self._action_values(self._q_target, next_td)  # [*B, n]
            if self.double_dqn:
                best = self._action_values(self._q, next_td).argmax(-1, keepdim=True)
                next_value = next_values.gather(-1, best)  # [*B, 1]
            else:
                next_value = next_values.max(-1, keepdim=True).values  # [*B, 1]
            target = self.value_estimator.value_estimate(td, next_value=next_value)  # [*B, 1]
        td_error = (pred.detach() - target).abs().squeeze(-1)  # [*B]
        td.set(self.tensor_keys.priority, td_error)
        loss = distance_loss(pred, target, self.loss_function).squeeze(-1)  # [*B]
        return TensorDict(
            {"loss": self._weighted_mean(loss, td), "td_error": td_error.mean()},
            batch_size=[],
        )

    def _get_next(self, td: TensorDictBase) -> TensorDictBase:
        next_td = td.get(K.NEXT, None)
        if next_td is None:
            raise self._missing(td, K.NEXT, None)
        return next_td


def c51_projection(
    next_probs: torch.Tensor, support: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``r + discount * Z`` onto ``support`` (C51, Algorithm 1).

    Args:
        next_probs: probabilities of the next state's (chosen action's) atoms, ``[N, n_atoms]``.
        support: the atoms, evenly spaced, ``[n_atoms]``.
        reward: ``[N, 1]``.
        discount: ``gamma * (1 - terminated)``, ``[N, 1]``.

    Returns:
        the projected probabilities ``[N, n_atoms]`` (each row sums to 1).

    Example:
        >>> support = torch.tensor([0.0, 1.0, 2.0])
        >>> c51_projection(torch.tensor([[1.0, 0.0, 0.0]]), support, torch.tensor([[0.5]]),
        ...     torch.tensor([[0.9]]))
        tensor([[0.5000, 0.5000, 0.0000]])
    """
    n_atoms = support.numel()
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (n_atoms - 1)
    tz = (reward + discount * support).clamp(v_min, v_max)  # [N, n_atoms]
    b = (tz - v_min) / delta  # [N, n_atoms], in [0, n_atoms - 1]
    low, up = b.floor().long(), b.ceil().long()
    # when b lands on an atom (low == up), all the mass goes to it
    w_low = next_probs * (up.to(b.dtype) - b + (low == up).to(b.dtype))
    w_up = next_probs * (b - low.to(b.dtype))
    offset = torch.arange(next_probs.shape[0], device=b.device).unsqueeze(-1) * n_atoms
    out = torch.zeros_like(next_probs).reshape(-1)
    out.index_add_(0, (low + offset).reshape(-1), w_low.reshape(-1))
    out.index_add_(0, (up + offset).reshape(-1), w_up.reshape(-1))
    return out.reshape(next_probs.shape)


class DistributionalDQNLoss(_QLossBase):
    """The C51 loss: cross-entropy between the projected target and the predicted atoms.

    The target distribution is that of ``r + gamma * (1 - terminated) * Z'(s', a*)`` with
    ``a*`` maximising the expected value under the target network, projected onto the
    support (:func:`c51_projection`); in n-step batches (``"steps_to_next_obs"`` = ``k``,
    from :class:`~torchrl_lite.data.MultiStep`) the discount is ``gamma ** k``. Writes the
    per-sample cross-entropy as
    ``"td_error"`` into the input batch and weights by ``"_weight"`` when present.
    Returns ``loss``. Paper: https://arxiv.org/abs/1707.06887.

    Args:
        value_network: a TensorDict module writing atom log-probabilities
            ``[*B, n_atoms, n_actions]`` at ``"action_value"``, e.g. a
            ``DistributionalQValueActor`` (its ``support`` is used).
        gamma: the discount.
        delay_value: use a target copy of the network.
        support: the atoms ``[n_atoms]`` when ``value_network`` does not hold them.
        action_space: ``"one_hot"`` (``"one-hot"``), ``"categorical"`` or a OneHot /
            Categorical spec; read from ``value_network`` when
            it has one, else inferred from the action's shape.

    Example:
        >>> from torchrl_lite.modules import DistributionalQValueActor
        >>> net = nn.Sequential(nn.Linear(4, 5 * 2), nn.Unflatten(-1, (5, 2)))
        >>> actor = DistributionalQValueActor(net, support=torch.linspace(-1, 1, 5),
        ...     action_space="categorical")
        >>> loss_module = DistributionalDQNLoss(actor, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 4), action=torch.randint(2, (8,)),
        ...     next=TensorDict(observation=torch.randn(8, 4), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> loss_module(batch)["loss"].shape
        torch.Size([])
    """

    _head_type = DistributionalQValueModule

    def __init__(
        self,
        value_network,
        gamma: float,
        *,
        delay_value: bool = True,
        support: torch.Tensor | None = None,
        action_space: str | None = None,
    ):
        super().__init__(value_network, delay_value, action_space, gamma)
        self.gamma = self._value_kwargs["gamma"]  # checked in (0, 1] by the base class
        if support is None:
            inner = getattr(value_network, "module", None)
            head = inner[-1] if isinstance(inner, torch.nn.ModuleList) else None
            support = getattr(head, "support", None)
        if support is None:
            raise ValueError(
                "DistributionalDQNLoss: pass support=... (the atoms) or a "
                "DistributionalQValueActor that holds them."
            )
        self.register_buffer("support", torch.as_tensor(support, dtype=torch.float32).clone())

    @property
    def out_keys(self) -> list:
        return ["loss"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The C51 loss on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        keys = self.tensor_keys
        log_p = self._action_values(self._q, td)  # [*B, atoms, n]
        n_atoms, n_actions = log_p.shape[-2:]
        if n_atoms != self.support.numel():
            raise _LossValueError(
                f"DistributionalDQNLoss: {keys.action_value!r} has {n_atoms} atoms (dim -2 "
                f"of {list(log_p.shape)}) but the support has {self.support.numel()}."
            )
        index = self._action_index(td, n_actions)  # [*B]
        log_p = log_p.reshape(-1, n_atoms, n_actions)  # [N, atoms, n]
        gather = index.reshape(-1, 1, 1).expand(-1, n_atoms, 1)
        log_p_a = log_p.gather(-1, gather).squeeze(-1)  # [N, atoms]
        reward = self._get(td, "reward", nested_next=True)
        terminated = td.get((K.NEXT, keys.terminated), None)
        if terminated is None:
            terminated = self._get(td, "done", nested_next=True)
        if reward.shape != (*td.batch_size, 1) or terminated.shape != reward.shape:
            raise _LossValueError(
                f"DistributionalDQNLoss: reward {list(reward.shape)} and terminated "
                f"{list(terminated.shape)} must both be {[*td.batch_size, 1]}."
            )
        with torch.no_grad():
            next_p = self._action_values(self._q_target, td.get(K.NEXT)).exp()
            next_p = next_p.reshape(-1, n_atoms, n_actions)  # [N, atoms, n]
            best = (next_p * self.support.unsqueeze(-1)).sum(-2).argmax(-1)  # [N]
            next_p_a = next_p.gather(-1, best.reshape(-1, 1, 1).expand(-1, n_atoms, 1))
            gamma = self.gamma
            steps = td.get(keys.steps_to_next_obs, None)  # n-step windows (MultiStep)
            if steps is not None:
                if steps.shape != reward.shape:
                    raise _LossValueError(
                        f"DistributionalDQNLoss: {keys.steps_to_next_obs!r} has shape "
                        f"{list(steps.shape)}; expected {list(reward.shape)}."
                    )
                gamma = self.gamma ** steps.reshape(-1, 1).to(next_p.dtype)
            discount = gamma * (~terminated.bool()).reshape(-1, 1).to(next_p.dtype)
            target = c51_projection(
                next_p_a.squeeze(-1), self.support, reward.reshape(-1, 1), discount
            )
        cross_entropy = -(target * log_p_a).sum(-1).reshape(td.batch_size)  # [*B]
        td.set(keys.priority, cross_entropy.detach())
        return TensorDict({"loss": self._weighted_mean(cross_entropy, td)}, batch_size=[])
