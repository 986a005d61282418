"""V-trace (IMPALA, https://arxiv.org/abs/1802.01561): off-policy corrected value targets.

With importance ratios ``rho_t = pi(a_t|s_t) / mu(a_t|s_t)`` of the learner's policy ``pi``
over the behaviour policy ``mu`` that acted, ``rho_bar_t = min(rho_bar, rho_t)`` and
``c_t = min(c_bar, rho_t)``::

    delta_t   = rho_bar_t * (r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t))
    v_t - V(s_t) = delta_t + gamma * (1 - done_t) * c_t * (v_{t+1} - V(s_{t+1}))
    advantage_t  = rho_bar_t * (r_t + gamma * (1 - terminated_t) * v_{t+1} - V(s_t))

where ``v_{t+1}`` is ``V(s_{t+1})`` at an episode end or the batch's last step. Tensors
are ``[*batch, T, 1]`` (see :mod:`~torchrl_lite.objectives.value.functional`).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._returns import _backward_scan, _check_factor, _check_shapes
from torchrl_lite.objectives._input_checks import check_probabilistic_actor
from torchrl_lite.objectives._loss_maths import log_prob_of
from torchrl_lite.objectives.value.advantages import ValueEstimatorBase, _standardise
from torchrl_lite.objectives.value.functional import _flags

__all__ = ["VTrace", "vtrace_advantage_estimate"]


def vtrace_advantage_estimate(
    gamma,
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rho_thresh: float | torch.Tensor = 1.0,
    c_thresh: float | torch.Tensor = 1.0,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace ``(advantage, value_target)``, both ``[*batch, T, 1]``.

    Args:
        gamma: discount in (0, 1].
        log_pi: ``[*batch, T, 1]`` log-probability of the actions under the learner's policy.
        log_mu: ``[*batch, T, 1]`` the same under the behaviour policy that acted.
        state_value: ``[*batch, T, 1]`` V(s_t).
        next_state_value: ``[*batch, T, 1]`` V(s_{t+1}).
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends.
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).
        rho_thresh: ``rho_bar``, the clip of the ratios in the TD errors.
        c_thresh: ``c_bar``, the clip of the ratios in the trace.
        time_dim: must be -2 (time before the trailing feature dim).

    Example:
        >>> z, r = torch.zeros(2, 1), torch.ones(2, 1)
        >>> adv, vs = vtrace_advantage_estimate(0.5, z, z, z, z, r, z.bool())
        >>> vs
        tensor([[1.5000],
                [1.0000]])
    """
    fn = "vtrace_advantage_estimate"
    if time_dim not in (-2, reward.ndim - 2):
        raise ValueError(
            f"{fn}: time must be dim -2 of [*batch, T, 1] tensors, got time_dim={time_dim}."
        )
    _check_shapes(
        fn,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
        log_pi=log_pi,
        log_mu=log_mu,
    )
    gamma = _check_factor(fn, "gamma", gamma, reward, low_open=True)
    not_done, not_terminated = _flags(done, terminated, reward, force_last=False)
    rho = torch.exp(log_pi - log_mu)  # [*B, T, 1]
    rho_bar = rho.clamp_max(rho_thresh)
    c = rho.clamp_max(c_thresh)
    delta = rho_bar * (reward + gamma * not_terminated * next_state_value - state_value)
    vs = _backward_scan(delta, gamma * not_done * c) + state_value  # [*B, T, 1]
    # v_{t+1}: the next step's target inside an episode, V(s_{t+1}) at its end
    following = torch.cat((vs[..., 1:, :], next_state_value[..., -1:, :]), dim=-2)
    vs_next = torch.where(not_done.bool(), following, next_state_value)
    advantage = rho_bar * (reward + gamma * not_terminated * vs_next - state_value)
    return advantage, vs


class VTrace(ValueEstimatorBase):
    """Write V-trace's ``"advantage"`` and ``"value_target"`` (:func:`vtrace_advantage_estimate`).

    The behaviour log-probability is read from ``"sample_log_prob"`` (written by the
    collecting policy); the learner's is recomputed with ``actor_network``.

    Args:
        gamma: discount in (0, 1].
        actor_network: the learner's probabilistic actor (``get_dist``).
        value_network: the critic writing ``"state_value"``, or None to read values.
        rho_thresh: ``rho_bar``; default 1.
        c_thresh: ``c_bar``; default 1.
        average_adv: standardise the advantage.
        differentiable: let gradients flow into the value network.
        skip_existing: reuse values already in the batch.
        shifted: one value-network call over the shifted sequence.

    Example:
        >>> est = VTrace(gamma=0.99, actor_network=actor, value_network=critic)  # doctest: +SKIP
        >>> est(rollout)["advantage"].shape  # doctest: +SKIP
        torch.Size([1, 10, 1])
    """

    def __init__(
        self,
        *,
        gamma,
        actor_network,
        value_network,
        rho_thresh: float = 1.0,
        c_thresh: float = 1.0,
        average_adv: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        shifted: bool = False,
        device=None,
        time_dim: int | None = None,
    ):
        super().__init__(
            value_network=value_network,
            shifted=shifted,
            differentiable=differentiable,
            skip_existing=bool(skip_existing),
            device=device,
        )
        check_probabilistic_actor(actor_network, "VTrace")
        if isinstance(gamma, torch.Tensor) and gamma.numel() != 1:
            raise ValueError(f"VTrace: gamma must be a scalar, got shape {list(gamma.shape)}.")
        for name, value in (("rho_thresh", rho_thresh), ("c_thresh", c_thresh)):
            if float(value) <= 0:
                raise ValueError(f"VTrace: {name} must be > 0, got {value}.")
        self.gamma = float(gamma)
        self.rho_thresh, self.c_thresh = float(rho_thresh), float(c_thresh)
        self.average_adv = average_adv
        self.actor_network = actor_network
        self._log_rho_inputs = None

    @property
    def in_keys(self) -> list:
        return [*super().in_keys, K.SAMPLE_LOG_PROB]

    def _log_probs(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_pi, log_mu)``, both ``[*batch, T, 1]``."""
        shape = (*td.batch_size, 1)
        log_mu = self._get(
            td,
            K.SAMPLE_LOG_PROB,
            "sample_log_prob",
            "VTrace reads the behaviour policy's log-probability there: collect with a "
            "ProbabilisticActor built with return_log_prob=True.",
        )
        log_mu = log_mu.reshape(*td.batch_size, -1).sum(-1, keepdim=True)  # per-dim: summed
        with torch.no_grad():
            dist = self.actor_network.get_dist(td.select(*self.actor_network.in_keys, strict=False))
            log_pi = log_prob_of(dist, td.get(K.ACTION), td.batch_dims)
        return log_pi.reshape(shape), log_mu.detach()

    def _estimate(self, td: TensorDictBase, need_value: bool, next_value=None):
        self._log_rho_inputs = self._log_probs(td)
        try:
            return super()._estimate(td, True, next_value)
        finally:
            self._log_rho_inputs = None

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        log_pi, log_mu = self._log_rho_inputs
        advantage, target = vtrace_advantage_estimate(
            gamma,
            log_pi,
            log_mu,
            value,
            next_value,
            reward,
            done,
            terminated,
            rho_thresh=self.rho_thresh,
            c_thresh=self.c_thresh,
        )
        if self.average_adv:
            advantage = _standardise(advantage, 1e-5)
        return advantage, target
