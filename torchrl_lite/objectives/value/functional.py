"""Returns and advantages as pure functions of tensors shaped ``[*batch, T, 1]``.

Conventions shared by every function (time is dim ``-2``):

* ``reward[..., t, :]`` is the reward of step ``t``; ``next_state_value[..., t, :]`` is the
  value of the observation that step ``t`` led to (``("next", "state_value")``), which at an
  episode end is the true final observation, not the reset one.
* ``done = terminated | truncated``. A *terminated* step does not bootstrap (the next state
  is worth zero); a *truncated* step bootstraps from ``next_state_value``. Either one ends
  the episode, so no return or advantage flows across a ``done`` step. The last step of the
  batch is treated as an episode end that bootstraps (unless it is terminated).
  ``terminated`` defaults to ``done`` (every end a termination); ``done`` is taken as
  ``done | terminated``.
* ``gamma`` and ``lmbda`` are Python numbers or tensors broadcastable to ``[*batch, T, 1]``;
  ``gamma[..., t, :]`` discounts what comes after step ``t``.

The ``vec_`` functions have no Python loop over time: each estimator is a backward linear
recursion ``x[t] = a[t] + c[t] * x[t + 1]``, solved by a parallel (Hillis-Steele) scan in
``ceil(log2(T))`` tensor operations on the affine maps ``(a, c)``. The scan, the input
checks and ``reward2go`` live in ``torchrl_lite/_returns.py`` (``data/`` and ``envs/`` use
them too) and are re-exported here. The loop versions
(``td1_return_estimate``, ``td_lambda_return_estimate``, ``generalized_advantage_estimate``)
spell the recursion out step by step and serve as readable references.
"""

from __future__ import annotations

import torch

from torchrl_lite._returns import _backward_scan, _check_factor, _check_shapes, reward2go

__all__ = [
    "td0_return_estimate",
    "td0_advantage_estimate",
    "td1_return_estimate",
    "vec_td1_return_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "reward2go",
]


# -- episode-end flags ------------------------------------------------------------------
def _flags(done, terminated, like: torch.Tensor, force_last: bool):
    """``(not_done, not_terminated)`` as float tensors like ``like``; ``done |= terminated``.

    With ``force_last`` the last step counts as done (the batch ends there, so the return
    bootstraps from ``next_state_value``).
    """
    done = done.bool()
    terminated = done if terminated is None else terminated.bool()
    done = done | terminated
    if force_last:
        done = done.clone()
        done[..., -1, :] = True
    return (~done).to(like.dtype), (~terminated).to(like.dtype)


# -- one-step ---------------------------------------------------------------------------
def td0_return_estimate(
    gamma,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-step TD target ``r + gamma * (1 - terminated) * V(s')``.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        terminated: ``[*batch, T, 1]`` bool; steps that do not bootstrap.
        done: used in place of ``terminated`` when that is None (a plain "done" flag).

    Returns:
        ``[*batch, T, 1]`` the target.

    Example:
        >>> r = torch.ones(2, 1)
        >>> td0_return_estimate(0.5, torch.full((2, 1), 4.0), r, torch.tensor([[False], [True]]))
        tensor([[3.],
                [1.]])
    """
    fn = "td0_return_estimate"
    if terminated is None:
        terminated = done
    if terminated is None:
        raise ValueError(f"{fn}: pass terminated (or done when there is no terminated flag).")
    like = _check_shapes(
        fn, next_state_value=next_state_value, reward=reward, terminated=terminated
    )
    gamma = _check_factor(fn, "gamma", gamma, like, low_open=True)
    not_terminated = (~terminated.bool()).to(reward.dtype)
    return reward + gamma * not_terminated * next_state_value


def td0_advantage_estimate(
    gamma,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-step TD error ``r + gamma * (1 - terminated) * V(s') - V(s)``.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        state_value: ``[*batch, T, 1]`` value of the observation.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        terminated: ``[*batch, T, 1]`` bool; steps that do not bootstrap.
        done: used in place of ``terminated`` when that is None.

    Example:
        >>> v, nv = torch.ones(2, 1), torch.full((2, 1), 4.0)
        >>> td0_advantage_estimate(0.5, v, nv, torch.ones(2, 1), torch.tensor([[False], [True]]))
        tensor([[2.],
                [0.]])
    """
    _check_shapes("td0_advantage_estimate", state_value=state_value, reward=reward)
    target = td0_return_estimate(gamma, next_state_value, reward, terminated, done=done)
    return target - state_value


# -- TD(1) ------------------------------------------------------------------------------
def td1_return_estimate(
    gamma,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """Discounted return to the episode end, bootstrapped there unless terminated (loop).

    ``G[t] = r[t] + gamma * (1 - terminated[t]) * (V(s'[t]) if done[t] else G[t + 1])``:
    TD(lambda) with ``lmbda = 1``.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Example:
        >>> r, nv = torch.ones(3, 1), torch.full((3, 1), 10.0)
        >>> td1_return_estimate(0.5, nv, r, torch.zeros(3, 1, dtype=torch.bool))
        tensor([[3.],
                [4.],
                [6.]])
    """
    return _td_lambda_loop(
        "td1_return_estimate", gamma, 1.0, next_state_value, reward, done, terminated
    )


def vec_td1_return_estimate(
    gamma,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`td1_return_estimate` without a Python loop over time.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Example:
        >>> r, nv = torch.ones(3, 1), torch.full((3, 1), 10.0)
        >>> done = torch.tensor([[False], [True], [False]])  # step 1 is truncated
        >>> vec_td1_return_estimate(0.5, nv, r, done, torch.zeros_like(done))
        tensor([[4.],
                [6.],
                [6.]])
    """
    return _td_lambda_vec(
        "vec_td1_return_estimate", gamma, 1.0, next_state_value, reward, done, terminated
    )


# -- TD(lambda) -------------------------------------------------------------------------
def _td_lambda_check(fn, gamma, lmbda, next_state_value, reward, done, terminated):
    like = _check_shapes(
        fn, next_state_value=next_state_value, reward=reward, done=done, terminated=terminated
    )
    gamma = _check_factor(fn, "gamma", gamma, like, low_open=True)
    lmbda = _check_factor(fn, "lmbda", lmbda, like, low_open=False)
    return gamma, lmbda


def td_lambda_return_estimate(
    gamma,
    lmbda,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(lambda) return, computed with a plain loop over time (the reference).

    ``G[t] = r[t] + gamma * (1 - terminated[t]) * ((1 - lmbda) * V(s'[t]) + lmbda * G[t + 1])``
    inside an episode; at an episode end (and at the last step) ``G[t + 1]`` is replaced by
    ``V(s'[t])``.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        lmbda: lambda in [0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Example:
        >>> r, nv = torch.ones(2, 1), torch.full((2, 1), 10.0)
        >>> td_lambda_return_estimate(0.5, 0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool))
        tensor([[5.],
                [6.]])
    """
    return _td_lambda_loop(
        "td_lambda_return_estimate", gamma, lmbda, next_state_value, reward, done, terminated
    )


def _td_lambda_loop(fn, gamma, lmbda, next_state_value, reward, done, terminated):
    gamma, lmbda = _td_lambda_check(fn, gamma, lmbda, next_state_value, reward, done, terminated)
    not_done, not_terminated = _flags(done, terminated, reward, force_last=True)
    shape = reward.shape
    gamma = torch.as_tensor(gamma, dtype=reward.dtype, device=reward.device).expand(shape)
    lmbda = torch.as_tensor(lmbda, dtype=reward.dtype, device=reward.device).expand(shape)
    returns = torch.empty_like(reward)
    g_next = torch.zeros_like(reward[..., 0, :])  # [*B, 1], G[t + 1]
    for t in reversed(range(shape[-2])):
        v_next = next_state_value[..., t, :]
        # inside an episode mix V(s') and G[t + 1]; at an episode end use V(s') alone
        lam = lmbda[..., t, :] * not_done[..., t, :]
        bootstrap = (1 - lam) * v_next + lam * g_next
        g_next = reward[..., t, :] + gamma[..., t, :] * not_terminated[..., t, :] * bootstrap
        returns[..., t, :] = g_next
    return returns


def vec_td_lambda_return_estimate(
    gamma,
    lmbda,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`td_lambda_return_estimate` without a Python loop over time.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        lmbda: lambda in [0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Example:
        >>> r, nv = torch.ones(2, 1), torch.full((2, 1), 10.0)
        >>> vec_td_lambda_return_estimate(0.5, 0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool))
        tensor([[5.],
                [6.]])
    """
    return _td_lambda_vec(
        "vec_td_lambda_return_estimate", gamma, lmbda, next_state_value, reward, done, terminated
    )


def _td_lambda_vec(fn, gamma, lmbda, next_state_value, reward, done, terminated):
    gamma, lmbda = _td_lambda_check(fn, gamma, lmbda, next_state_value, reward, done, terminated)
    not_done, not_terminated = _flags(done, terminated, reward, force_last=True)
    # terminated implies done, so (1 - term) * lam * (1 - done) == lam * (1 - done)
    lam = lmbda * not_done  # [*B, T, 1]
    a = reward + gamma * not_terminated * (1 - lam) * next_state_value  # [*B, T, 1]
    return _backward_scan(a, gamma * lam)


# -- GAE --------------------------------------------------------------------------------
def _gae_check(fn, gamma, lmbda, state_value, next_state_value, reward, done, terminated):
    like = _check_shapes(
        fn,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    gamma = _check_factor(fn, "gamma", gamma, like, low_open=True)
    lmbda = _check_factor(fn, "lmbda", lmbda, like, low_open=False)
    return gamma, lmbda


def generalized_advantage_estimate(
    gamma,
    lmbda,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate (https://arxiv.org/abs/1506.02438), a loop over time.

    ``delta[t] = r[t] + gamma * (1 - terminated[t]) * V(s'[t]) - V(s[t])`` and
    ``A[t] = delta[t] + gamma * lmbda * (1 - done[t]) * A[t + 1]``; the value target is
    ``A + V(s)``.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        lmbda: lambda in [0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        state_value: ``[*batch, T, 1]`` value of the observation.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Returns:
        ``(advantage, value_target)``, both ``[*batch, T, 1]``.

    Example:
        >>> v, r = torch.zeros(2, 1), torch.ones(2, 1)
        >>> adv, target = generalized_advantage_estimate(
        ...     0.5, 1.0, v, v, r, torch.zeros(2, 1, dtype=torch.bool))
        >>> adv
        tensor([[1.5000],
                [1.0000]])
    """
    fn = "generalized_advantage_estimate"
    gamma, lmbda = _gae_check(
        fn, gamma, lmbda, state_value, next_state_value, reward, done, terminated
    )
    not_done, not_terminated = _flags(done, terminated, reward, force_last=False)
    shape = reward.shape
    gamma = torch.as_tensor(gamma, dtype=reward.dtype, device=reward.device).expand(shape)
    lmbda = torch.as_tensor(lmbda, dtype=reward.dtype, device=reward.device).expand(shape)
    advantage = torch.empty_like(reward)
    adv_next = torch.zeros_like(reward[..., 0, :])  # [*B, 1], A[t + 1]
    for t in reversed(range(shape[-2])):
        g = gamma[..., t, :]
        delta = reward[..., t, :] + g * not_terminated[..., t, :] * next_state_value[..., t, :]
        delta = delta - state_value[..., t, :]
        adv_next = delta + g * lmbda[..., t, :] * not_done[..., t, :] * adv_next
        advantage[..., t, :] = adv_next
    return advantage, advantage + state_value


def vec_generalized_advantage_estimate(
    gamma,
    lmbda,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`generalized_advantage_estimate` without a Python loop over time.

    Args:
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        lmbda: lambda in [0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.
        state_value: ``[*batch, T, 1]`` value of the observation.
        next_state_value: ``[*batch, T, 1]`` value of the next observation.
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends (terminated or truncated).
        terminated: ``[*batch, T, 1]`` bool; ends that do not bootstrap (default: ``done``).

    Returns:
        ``(advantage, value_target)``, both ``[*batch, T, 1]``.

    Example:
        >>> v, r = torch.zeros(2, 1), torch.ones(2, 1)
        >>> adv, target = vec_generalized_advantage_estimate(
        ...     0.5, 1.0, v, v, r, torch.zeros(2, 1, dtype=torch.bool))
        >>> adv
        tensor([[1.5000],
                [1.0000]])
    """
    fn = "vec_generalized_advantage_estimate"
    gamma, lmbda = _gae_check(
        fn, gamma, lmbda, state_value, next_state_value, reward, done, terminated
    )
    not_done, not_terminated = _flags(done, terminated, reward, force_last=False)
    delta = reward + gamma * not_terminated * next_state_value - state_value  # [*B, T, 1]
    advantage = _backward_scan(delta, gamma * lmbda * not_done)
    return advantage, advantage + state_value
