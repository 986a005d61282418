"""TQC (Kuznetsov et al. 2020, https://arxiv.org/abs/2005.04269): truncated quantile critics.

Each of the ``N`` critics predicts ``M`` quantiles ``theta_{n,m}(s, a)`` of the return at
levels ``tau_m = (2m + 1) / (2M)``. With ``a' ~ pi(.|s')`` and ``alpha`` detached, the
target pools the ``N * M`` target-critic quantiles at ``(s', a')``, sorts them and drops the
``N * k`` largest (``k = top_quantiles_to_drop_per_net``) to curb overestimation::

    y_j = r + gamma * (1 - terminated) * (z_(j)(s', a') - alpha * log pi(a'|s'))

- ``loss_qvalue = mean over b, n, m, j of |tau_m - 1{u < 0}| * huber(u)``,
  ``u = y_j - theta_{n,m}(s, a_data)`` (the quantile Huber loss, ``kappa = 1``);
- ``loss_actor = mean(alpha * log pi(a|s) - mean_{n,m} theta_{n,m}(s, a))``, ``a`` reparameterised;
- ``loss_alpha`` as in SAC.

Shapes: a batch ``[B]``; quantiles ``[N, B, M]``; pooled targets ``[B, N * M - N * k]``.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from torchrl_lite.objectives._loss_maths import log_prob_of
from torchrl_lite.objectives.sac import SACLoss

__all__ = ["TQCLoss"]


def quantile_huber_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean quantile Huber loss of ``pred`` ``[N, B, M]`` against ``target`` ``[B, J]``.

    Example:
        >>> quantile_huber_loss(torch.zeros(1, 1, 2), torch.zeros(1, 3))
        tensor(0.)
    """
    M = pred.shape[-1]
    tau = (torch.arange(M, device=pred.device, dtype=pred.dtype) + 0.5) / M  # [M]
    u = target[None, :, None, :] - pred[..., None]  # [N, B, M, J]
    huber = F.huber_loss(
        pred[..., None].expand_as(u), target[None, :, None, :].expand_as(u), reduction="none"
    )
    weight = (tau[:, None] - (u < 0).to(pred.dtype)).abs()  # [N, B, M, J]
    return (weight * huber).mean()


class TQCLoss(SACLoss):
    """The TQC loss: SAC with distributional critics whose top target quantiles are dropped.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. with a ``TanhNormal``.
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, M]`` (``M`` quantiles).
        num_qvalue_nets: ``N``, the number of critics.
        top_quantiles_to_drop_per_net: ``k``; ``N * k`` of the ``N * M`` pooled target
            quantiles are dropped.
        alpha_init: initial temperature.
        **kwargs: the other :class:`SACLoss` options (``min_alpha``, ``fixed_alpha``,
            ``target_entropy``, ``action_spec``, ``gamma``, ``delay_actor``, ...).

    Example:
        >>> loss = TQCLoss(actor, critic, num_qvalue_nets=5, top_quantiles_to_drop_per_net=2)  # doctest: +SKIP
    """

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        num_qvalue_nets: int = 5,
        top_quantiles_to_drop_per_net: int = 2,
        alpha_init: float = 1.0,
        **kwargs,
    ):
        kwargs.pop("loss_function", None)  # the quantile Huber loss is part of the method
        super().__init__(
            actor_network,
            qvalue_network,
            num_qvalue_nets=num_qvalue_nets,
            alpha_init=alpha_init,
            **kwargs,
        )
        if (
            isinstance(top_quantiles_to_drop_per_net, bool)
            or int(top_quantiles_to_drop_per_net) < 0
        ):
            raise ValueError(
                f"TQCLoss: top_quantiles_to_drop_per_net must be an int >= 0, got "
                f"{top_quantiles_to_drop_per_net!r}."
            )
        self.top_quantiles_to_drop_per_net = int(top_quantiles_to_drop_per_net)

    def _quantiles(self, td, action=None, *, target=False, detach=False) -> torch.Tensor:
        """``[N, B, M]`` quantiles of the critics (online, target or detached)."""
        inp = self._q_input(td, action, None)
        if detach:
            out = self._call_detached(self._q_name, inp)
        else:
            out = (self._target(self._q_name) if target else self.qvalue_network)(inp)
        key = self.tensor_keys.state_action_value
        value = out.get(key, None)
        if value is None:
            raise KeyError(
                f"TQCLoss: the critic did not write {key!r} (it wrote "
                f"{list(out.keys(True, True))}); set it with loss.set_keys(state_action_value=...)."
            )
        return value

    def _actor_terms(self, td, alpha, out):
        dist = self._policy_dist(td)
        action = dist.rsample()
        log_prob = log_prob_of(dist, action, td.batch_dims)  # [B]
        q = self._quantiles(td, action, detach=True).mean((0, -1))  # [B]
        out["loss_actor"] = (alpha * log_prob - q).mean()
        out["entropy"] = -log_prob.detach().mean()
        return dist, action, log_prob, q

    def _qvalue_terms(self, td, alpha, out):
        next_td = self._next_td(td)
        with torch.no_grad():
            actor = self._target("actor_network")
            dist = actor.get_dist(next_td.select(*actor.in_keys))
            next_action = dist.sample()
            next_log_prob = log_prob_of(dist, next_action, td.batch_dims)  # [B]
            z = self._quantiles(next_td, next_action, target=True)  # [N, B, M]
            N, _, M = z.shape
            pooled = z.permute(1, 0, 2).reshape(z.shape[1], N * M).sort(-1).values  # [B, N*M]
            kept = N * M - N * self.top_quantiles_to_drop_per_net
            if kept < 1:
                raise ValueError(
                    f"TQCLoss: dropping {self.top_quantiles_to_drop_per_net} of {M} quantiles per "
                    f"critic leaves none; lower top_quantiles_to_drop_per_net."
                )
            next_value = pooled[:, :kept] - alpha * next_log_prob[:, None]  # [B, J]
            # the value estimator's TD(0) target is affine in the next value: y = a + c * v,
            # so two calls give a and c for every kept quantile at once
            a = self._bootstrap(td, torch.zeros_like(next_log_prob))  # [B, 1]
            c = self._bootstrap(td, torch.ones_like(next_log_prob)) - a  # [B, 1]
            target = a + c * next_value  # [B, J]
        pred = self._quantiles(td)  # [N, B, M]
        out["loss_qvalue"] = quantile_huber_loss(pred, target)
        td_error = (pred.detach().mean(-1) - target.mean(-1)).abs().max(0).values  # [B]
        out["td_error"] = self._write_priority(td, td_error)
        return pred
