"""Conservative Q-learning: ``CQLLoss`` (continuous actions, CQL(H) on SAC) and
``DiscreteCQLLoss`` (on DQN).

Paper: Kumar et al. 2020, "Conservative Q-Learning for Offline Reinforcement Learning",
https://arxiv.org/abs/2006.04779.

``CQLLoss``: for each Q-network ``i`` the penalty is ``min_q_weight * (mean(T *
logsumexp_j((Q_i(s, a_j) - log q(a_j)) / T)) - mean(Q_i(s, a_data)))``, the log-sum-exp
over ``3 * num_random`` sampled actions ``a_j`` with their importance weights ``log q``:
uniform actions in the action bounds (``log q = -sum log(high - low)``) and actions of the
current policy at ``s`` and at ``s'`` (``log q = log pi(a_j|.)``), all evaluated at ``s``;
the samples carry no gradient. ``loss_cql`` sums the penalties over the Q-networks. With
``with_lagrange`` the penalty becomes ``alpha' * (penalty - lagrange_thresh)`` (``alpha' =
exp(log_alpha_prime)`` detached) and ``loss_alpha_prime = -mean_i(alpha' * (penalty_i -
lagrange_thresh))`` (penalty detached) tunes ``alpha'``. With ``deterministic_backup`` the
target has no entropy term; with ``max_q_backup`` it is ``max_j min_i Q'_i(s', a'_j)`` over
``num_random`` policy actions at ``s'``. ``loss_actor_bc = mean(alpha * log pi(a|s) - log
pi(a_data|s))`` is the behaviour-cloning actor loss TorchRL's CQL scripts optimise instead
of ``loss_actor`` for the first updates: name the terms you sum.

Shapes: a batch ``[*B]``; Q-values of the ``N`` Q-networks ``[N, *B]``; of the ``S``
sampled actions per state ``[N, S, *B]``; discrete action values ``[*B, n_actions]``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives._off_policy import action_bounds
from torchrl_lite.objectives.dqn import _QLossBase
from torchrl_lite.objectives.sac import SACLoss
from torchrl_lite.objectives.utils import check_distance, distance_loss, log_prob_of

__all__ = ["CQLLoss", "DiscreteCQLLoss"]


class CQLLoss(SACLoss):
    """CQL(H): SAC's losses plus a penalty on the soft maximum of Q over actions.

    The penalty and ``loss_actor_bc``: see the module docstring; the rest is SAC's.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. with a ``TanhNormal``.
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``; copied ``num_qvalue_nets`` times.
        action_spec: a bounded action spec (else the actor's) for the uniform actions.
        num_random: the number of sampled actions of each kind per state.
        temperature: ``T`` of the log-sum-exp.
        min_q_weight: the weight of the penalty.
        with_lagrange: tune the penalty's weight ``alpha'`` toward ``lagrange_thresh``.
        lagrange_thresh: the target of the penalty with ``with_lagrange``.
        max_q_backup: use the max over sampled next actions in the target.
        deterministic_backup: drop the entropy term from the target.
        **kwargs: the other arguments of :class:`SACLoss` (``num_qvalue_nets``, ...).

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(MLP(3, 4, depth=1),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=TanhNormal,
        ...     spec=Bounded(-1.0, 1.0, shape=(2,)))
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = CQLLoss(actor, qvalue, with_lagrange=True)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_actor_bc', 'loss_alpha', 'loss_alpha_prime', 'loss_cql', 'loss_qvalue']
    """

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        action_spec=None,
        num_random: int = 10,
        temperature: float = 1.0,
        min_q_weight: float = 1.0,
        with_lagrange: bool = False,
        lagrange_thresh: float = 0.0,
        max_q_backup: bool = False,
        deterministic_backup: bool = True,
        **kwargs,
    ):
        if "value_network" in kwargs:
            raise TypeError("CQLLoss: there is no value network in CQL (SAC v2 only).")
        if int(num_random) < 1:
            raise ValueError(f"CQLLoss: num_random must be >= 1, got {num_random}.")
        if not temperature > 0:
            raise ValueError(f"CQLLoss: temperature must be positive, got {temperature}.")
        super().__init__(actor_network, qvalue_network, action_spec=action_spec, **kwargs)
        low, high = action_bounds(action_spec, actor_network, self.tensor_keys.action, "CQLLoss")
        self.register_buffer("action_low", low)
        self.register_buffer("action_high", high)
        self.num_random = int(num_random)
        self.temperature = float(temperature)
        self.min_q_weight = float(min_q_weight)
        self.with_lagrange = bool(with_lagrange)
        self.lagrange_thresh = float(lagrange_thresh)
        self.max_q_backup = bool(max_q_backup)
        self.deterministic_backup = bool(deterministic_backup)
        if self.with_lagrange:
            self.log_alpha_prime = torch.nn.Parameter(torch.zeros(()))

    @property
    def out_keys(self) -> list:
        keys = [*super().out_keys, "loss_cql"]
        keys += ["loss_alpha_prime", "alpha_prime"] if self.with_lagrange else []
        return keys + ["loss_actor_bc"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The CQL losses on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        alpha = self._alpha()
        out: dict[str, torch.Tensor] = {}
        dist, action, log_prob, _ = self._actor_terms(td, alpha, out)
        pred = self._qvalue_terms(td, alpha, out)  # [N, *B]
        self._alpha_terms(td, action, log_prob, out)
        self._cql_terms(td, dist, pred, out)
        data_log_prob = log_prob_of(dist, td.get(self.tensor_keys.action), td.batch_dims)
        out["loss_actor_bc"] = (alpha * log_prob - data_log_prob).mean()
        return TensorDict(out, batch_size=[])

    def _next_value(self, td: TensorDictBase, alpha) -> torch.Tensor:
        """``[*B]`` value of the next state in the target (no grad)."""
        next_td = self._next_td(td)
        with torch.no_grad():
            actor = self._target("actor_network")
            dist = actor.get_dist(next_td.select(*actor.in_keys))
            if self.max_q_backup:
                actions = dist.sample((self.num_random,))  # [S, *B, *action_shape]
                qvalues = self._qvalues(next_td, actions, samples=self.num_random, target=True)
                return qvalues.max(1).values.min(0).values  # [N, S, *B] -> [*B]
            next_action = dist.sample()
            next_value = self._next_q(next_td, next_action)
            if not self.deterministic_backup:
                next_value = next_value - alpha * log_prob_of(dist, next_action, td.batch_dims)
            return next_value

    def _unbatched_bounds(self, action_dims: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The action bounds ``[*action_shape]``: a batched env's spec (e.g. ``[1, A]`` for
        one sub-env) gives its first sub-env's bounds."""
        low, high = self.action_low, self.action_high
        extra = low.dim() - action_dims
        if extra > 0:
            low, high = low[(0,) * extra], high[(0,) * extra]
        return low, high

    def _cql_terms(self, td: TensorDictBase, dist, pred: torch.Tensor, out: dict) -> None:
        """``loss_cql`` (and the Lagrange terms) from the predictions ``[N, *B]``."""
        n, batch_dims = self.num_random, td.batch_dims
        next_td = self._next_td(td)
        with torch.no_grad():
            current = dist.sample((n,))  # [S, *B, *action_shape]
            log_current = log_prob_of(dist, current, batch_dims + 1)  # [S, *B]
            low, high = self._unbatched_bounds(current.dim() - batch_dims - 1)
            shape = (n, *td.batch_size, *low.shape)
            uniform = low + (high - low) * torch.rand(shape, device=low.device, dtype=low.dtype)
            log_uniform = -(high - low).log().sum().expand(n, *td.batch_size)  # [S, *B]
            next_dist = self._policy_dist(next_td)
            following = next_dist.sample((n,))
            log_following = log_prob_of(next_dist, following, batch_dims + 1)
            actions = torch.cat([uniform, current, following], 0)  # [3S, *B, *action_shape]
            log_q = torch.cat([log_uniform, log_current, log_following], 0)  # [3S, *B]
        qvalues = self._qvalues(td, actions, samples=3 * n)  # [N, 3S, *B]
        soft_max = self.temperature * torch.logsumexp((qvalues - log_q) / self.temperature, 1)
        batch = tuple(range(1, pred.dim()))
        penalty = self.min_q_weight * (soft_max.mean(batch) - pred.mean(batch))  # [N]
        if not self.with_lagrange:
            out["loss_cql"] = penalty.sum()
            return
        alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6)
        gap = penalty - self.lagrange_thresh
        out["loss_cql"] = (alpha_prime.detach() * gap).sum()
        out["loss_alpha_prime"] = -(alpha_prime * gap.detach()).mean()
        out["alpha_prime"] = alpha_prime.detach()


class DiscreteCQLLoss(_QLossBase):
    """The DQN loss plus CQL's penalty on the log-sum-exp of the action values.

    ``loss_qvalue = mean(d(Q(s, a_data), y))`` with ``y = r + gamma * (1 - terminated) *
    max_a Q'(s', a)`` (``Q'`` the target network; TD(0) by default), importance-weighted
    by ``"_weight"`` when the batch has it; ``loss_cql = min_q_weight * mean(logsumexp_a
    Q(s, a) - Q(s, a_data))``. Also returns the detached ``td_error`` and ``pred_value``
    means and writes the per-sample ``|Q - y|`` into the batch at ``"td_error"``. Paper:
    https://arxiv.org/abs/2006.04779.

    Args:
        value_network: a TensorDict module writing ``"action_value"`` ``[*B, n]``, e.g. a
            ``QValueActor``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: use a target copy of the network.
        min_q_weight: the weight of the penalty.
        action_space: ``"one_hot"`` (``"one-hot"``), ``"categorical"`` or a OneHot /
            Categorical spec; read from ``value_network`` when
            it has one, else inferred from the action's shape.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from torchrl_lite.modules import QValueActor
        >>> loss_module = DiscreteCQLLoss(QValueActor(nn.Linear(4, 2), action_space="categorical"))
        >>> batch = TensorDict(observation=torch.randn(8, 4), action=torch.randint(2, (8,)),
        ...     next=TensorDict(observation=torch.randn(8, 4), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_cql', 'loss_qvalue']
    """

    def __init__(
        self,
        value_network,
        *,
        loss_function: str = "l2",
        delay_value: bool = True,
        min_q_weight: float = 1.0,
        action_space: str | None = None,
        gamma: float | None = None,
    ):
        super().__init__(value_network, delay_value, action_space, gamma)
        self.loss_function = check_distance(loss_function, "DiscreteCQLLoss")
        self.min_q_weight = float(min_q_weight)

    @property
    def out_keys(self) -> list:
        return ["loss_qvalue", "loss_cql", "td_error", "pred_value"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The discrete CQL losses on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        values = self._action_values(self._q, td)  # [*B, n]
        index = self._action_index(td, values.shape[-1])  # [*B]
        pred = values.gather(-1, index.unsqueeze(-1))  # [*B, 1]
        next_td = td.get(K.NEXT, None)
        if next_td is None:
            raise self._missing(td, K.NEXT, None)
        with torch.no_grad():
            next_values = self._action_values(self._q_target, next_td)  # [*B, n]
            next_value = next_values.max(-1, keepdim=True).values  # [*B, 1]
            target = self.value_estimator.value_estimate(td, next_value=next_value)  # [*B, 1]
        td_error = (pred.detach() - target).abs().squeeze(-1)  # [*B]
        td.set(self.tensor_keys.priority, td_error)
        loss = distance_loss(pred, target, self.loss_function).squeeze(-1)  # [*B]
        penalty = torch.logsumexp(values, -1) - pred.squeeze(-1)  # [*B]
        return TensorDict(
            {
                "loss_qvalue": self._weighted_mean(loss, td),
                "loss_cql": self.min_q_weight * penalty.mean(),
                "td_error": td_error.mean(),
                "pred_value": pred.detach().mean(),
            },
            batch_size=[],
        )
