"""DreamerV3's loss maths as pure functions: categorical KL terms and lambda-returns
with learned continuation probabilities (used by :mod:`torchrl_lite.objectives.dreamer_v3`).

Paper: Hafner et al. 2023, "Mastering Diverse Domains through World Models",
https://arxiv.org/abs/2301.04104.
"""

from __future__ import annotations

import torch

from torchrl_lite.modules.models.two_hot import unimix_probs

__all__ = [
    "categorical_kl",
    "categorical_kl_balanced",
    "categorical_kl_terms",
    "continuation_lambda_returns",
]


def categorical_kl(q_logits, p_logits, unimix: float = 0.0) -> torch.Tensor:
    """``KL(q || p)`` per categorical ``[*B, C]`` from logits ``[*B, C, K]``.

    With ``unimix`` both sides mix that share of a uniform into their softmax; without,
    log-probabilities come from ``log_softmax`` (finite for any logits).

    Example:
        >>> q, p = torch.tensor([[0.0, 10.0]]), torch.zeros(1, 2)
        >>> categorical_kl(q, p).round(decimals=4)  # ~ log 2
        tensor([0.6926])
    """
    if unimix:
        q_probs, p_probs = unimix_probs(q_logits, unimix), unimix_probs(p_logits, unimix)
        q_log, p_log = q_probs.log(), p_probs.log()
    else:
        q_log, p_log = torch.log_softmax(q_logits, -1), torch.log_softmax(p_logits, -1)
        q_probs = q_log.exp()
    return (q_probs * (q_log - p_log)).sum(-1)


def categorical_kl_terms(posterior_logits, prior_logits, free_nats: float = 1.0,
                         unimix: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """DreamerV3's ``(dynamics, representation)`` KL losses (scalars).

    Each sums the KL over the ``C`` categoricals, clamps it below at ``free_nats`` per step
    and averages: the dynamics term stops the posterior's gradient (it trains the prior),
    the representation term the prior's.

    Example:
        >>> q, p = torch.zeros(4, 2, 3), torch.zeros(4, 2, 3)
        >>> categorical_kl_terms(q, p, free_nats=1.0)
        (tensor(1.), tensor(1.))
    """
    dynamic = categorical_kl(posterior_logits.detach(), prior_logits, unimix).sum(-1)
    representation = categorical_kl(posterior_logits, prior_logits.detach(), unimix).sum(-1)
    return dynamic.clamp_min(free_nats).mean(), representation.clamp_min(free_nats).mean()


def categorical_kl_balanced(posterior_logits, prior_logits, alpha: float = 0.8,
                            free_bits: float = 1.0) -> torch.Tensor:  # fmt: skip
    """``alpha`` times the dynamics KL plus ``1 - alpha`` times the representation KL, each
    clamped at ``free_bits`` per categorical and averaged (DreamerV2-style balancing).

    Example:
        >>> categorical_kl_balanced(torch.zeros(3, 2, 4), torch.zeros(3, 2, 4), free_bits=0.5)
        tensor(0.5000)
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(
            f"categorical_kl_balanced: alpha must lie in [0, 1] (paper: 0.8), got {alpha}."
        )
    dynamic = categorical_kl(posterior_logits.detach(), prior_logits).clamp_min(free_bits).mean()
    representation = categorical_kl(posterior_logits, prior_logits.detach())
    return alpha * dynamic + (1 - alpha) * representation.clamp_min(free_bits).mean()


def continuation_lambda_returns(reward, next_value, continuation, gamma: float,
                                lmbda: float) -> torch.Tensor:  # fmt: skip
    """``R_t = r_t + gamma c_t ((1 - lambda) v_t + lambda R_{t+1})``, ``R_H = v_{H-1}``.

    All inputs ``[*B, H, 1]``: ``reward[t]`` and ``next_value[t]``, ``continuation[t]``
    belong to the state reached by step ``t``. Output ``[*B, H, 1]``.

    Example:
        >>> ones = torch.ones(1, 2, 1)
        >>> continuation_lambda_returns(ones, 10 * ones, ones, 0.5, 0.5)[0, :, 0]
        tensor([5., 6.])
    """
    next_return, returns = next_value[..., -1, :], []
    for t in reversed(range(reward.shape[-2])):
        mixed = (1 - lmbda) * next_value[..., t, :] + lmbda * next_return
        next_return = reward[..., t, :] + gamma * continuation[..., t, :] * mixed
        returns.append(next_return)
    return torch.stack(returns[::-1], -2)
