"""CrossQ (Bhatt et al. 2024, https://arxiv.org/abs/1902.05605): SAC without target networks.

The critics hold batch (re)normalization layers and are called once on the batch of
``(s, a)`` and ``(s', a')`` concatenated, so that their normalization statistics cover
both distributions; the bootstrap target then needs no target network. With
``a' ~ pi(.|s')``, ``a ~ pi(.|s)`` reparameterised and ``alpha`` detached:

- ``loss_qvalue = sum_i mean(d(Q_i(s, a_data), y))``,
  ``y = r + gamma * (1 - terminated) * (min_i Q_i(s', a') - alpha * log pi(a'|s'))``
  (``y`` without gradient, from the same joint call);
- ``loss_actor = mean(alpha * log pi(a|s) - min_i Q_i(s, a))`` with the critics in
  evaluation mode (running statistics) and their parameters detached;
- ``loss_alpha = -mean(log_alpha * (log pi(a|s) + target_entropy))``.

Shapes: a batch ``[B]``; Q-values ``[N, B]``; log-probabilities ``[B]``.
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl_lite.objectives._input_checks import check_probabilistic_actor
from torchrl_lite.objectives._loss_maths import check_distance, log_prob_of
from torchrl_lite.objectives._off_policy import OffPolicyLoss, Temperature, action_shape_of
from torchrl_lite.objectives.sac import _SACKeys

__all__ = ["CrossQLoss"]


class _QStack(nn.ModuleList):
    """``n`` independent copies of a Q-network called as one: outputs ``[n, *B]``.

    Unlike an ``Ensemble`` the copies are real sub-modules, so ``train()``/``eval()``
    reach their normalization layers and running statistics stay buffers.
    """

    def __init__(self, module: nn.Module, num_copies: int):
        copies = [module]
        for _ in range(num_copies - 1):
            fresh = copy.deepcopy(module)
            for sub in fresh.modules():
                if hasattr(sub, "reset_parameters"):
                    sub.reset_parameters()
            copies.append(fresh)
        super().__init__(copies)
        self.in_keys = list(module.in_keys)
        self.out_keys = list(getattr(module, "out_keys", []))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return torch.stack([q(tensordict.copy()) for q in self])


class CrossQLoss(Temperature, OffPolicyLoss):
    """The CrossQ loss: soft actor-critic with joint (s, s') critic calls, no target nets.

    Besides ``forward`` (all terms), the script-level pieces are public as in TorchRL:
    ``qvalue_loss(td) -> (loss, {"td_error"})``, ``actor_loss(td) -> (loss, {"log_prob"})``
    and ``alpha_loss(log_prob)``. Paper: https://arxiv.org/abs/1902.05605.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. with a ``TanhNormal``.
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``, usually with ``BatchRenorm1d``
            layers; copied ``num_qvalue_nets`` times.
        num_qvalue_nets: the number of Q-networks.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial temperature.
        min_alpha: lower bound of the temperature (None: none).
        max_alpha: upper bound of the temperature (None: none).
        fixed_alpha: keep the temperature at ``alpha_init``.
        target_entropy: the entropy target, or ``"auto"`` (``-prod(action_shape)``).
        action_spec: the action spec of one environment, or None.
        gamma: the discount (else 0.99; see ``make_value_estimator``).

    Example:
        >>> loss = CrossQLoss(actor, qvalue, num_qvalue_nets=2)  # doctest: +SKIP
        >>> q_loss, meta = loss.qvalue_loss(batch)  # doctest: +SKIP
    """

    _AcceptedKeys = _SACKeys

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        action_spec=None,
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
        if int(num_qvalue_nets) < 1:
            raise ValueError(f"{name}: num_qvalue_nets must be >= 1, got {num_qvalue_nets}.")
        self.loss_function = check_distance(loss_function, name)
        self.num_qvalue_nets = int(num_qvalue_nets)
        self.register_network("actor_network", actor_network)
        self.register_network("qvalue_network", _QStack(qvalue_network, self.num_qvalue_nets))
        shape = action_shape_of(action_spec, self.tensor_keys.action, name)
        self._init_temperature(alpha_init, min_alpha, max_alpha, fixed_alpha, target_entropy, shape)
        self._set_gamma(gamma)

    @property
    def in_keys(self) -> list:
        return self._network_in_keys(self.actor_network, self.qvalue_network)

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy", "td_error"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """All CrossQ terms on a batch ``[B]`` (see the module docstring)."""
        loss_qvalue, value_meta = self.qvalue_loss(tensordict)
        loss_actor, actor_meta = self.actor_loss(tensordict)
        loss_alpha = self.alpha_loss(actor_meta["log_prob"])
        out = {
            "loss_actor": loss_actor,
            "loss_qvalue": loss_qvalue,
            "loss_alpha": loss_alpha,
            "alpha": self._alpha(),
            "entropy": -actor_meta["log_prob"].mean(),
            "td_error": value_meta["td_error"].mean(),
        }
        return TensorDict(out, batch_size=[])

    def qvalue_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_qvalue, {"td_error": [B]})``; also writes the TD error into the batch."""
        td = tensordict
        next_td = self._next_td(td)
        alpha = self._alpha()
        with torch.no_grad():
            dist = self._policy_dist(next_td)
            next_action = dist.sample()
            next_log_prob = log_prob_of(dist, next_action, td.batch_dims)  # [B]
        current = self._q_input(td, None, None)
        following = self._q_input(next_td, next_action, None)
        joint = torch.cat([current, following.select(*current.keys(True, True))], 0)  # [2B]
        values = self._read(self.qvalue_network(joint), "state_action_value", "the Q-network")
        pred, next_q = values.split(td.batch_size[0], dim=1)  # [N, B] each
        next_value = (next_q.min(0).values - alpha * next_log_prob).detach()  # [B]
        target = self._bootstrap(td, next_value)  # [B, 1]
        out: dict = {}
        self._td_terms(td, pred, target, out, "loss_qvalue")
        return out["loss_qvalue"], {"td_error": td.get(self.tensor_keys.priority)}

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_actor, {"log_prob": [B]})``, the critics in evaluation mode."""
        td = tensordict
        dist = self._policy_dist(td)
        action = dist.rsample()
        log_prob = log_prob_of(dist, action, td.batch_dims)  # [B]
        self._target_entropy_for(action, td.batch_dims)  # resolves "auto" once
        was_training = self.qvalue_network.training
        self.qvalue_network.eval()
        try:
            q = self._qvalues(td, action, detach=True)  # [N, B]
        finally:
            self.qvalue_network.train(was_training)
        loss = (self._alpha() * log_prob - q.min(0).values).mean()
        return loss, {"log_prob": log_prob.detach()}

    def alpha_loss(self, log_prob: torch.Tensor, tensordict: TensorDictBase | None = None):
        """``-mean(log_alpha * (log_prob + target_entropy))`` (zero with ``fixed_alpha``)."""
        if self.fixed_alpha:
            return torch.zeros((), device=log_prob.device)
        if self._target_entropy_pending:
            raise RuntimeError(
                "CrossQLoss.alpha_loss: the 'auto' target entropy is not known yet; call "
                "actor_loss first (or pass action_spec= to the loss)."
            )
        return -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
