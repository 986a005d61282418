"""The discounted backward scan and reward-to-go, shared by the value functions
(``objectives/value/functional.py``), the ``Reward2GoTransform`` and the offline datasets'
returns-to-go; it sits on the lowest floor so that ``data/`` and ``envs/`` need not import
``objectives/``.

Tensors are shaped ``[*batch, T, 1]`` (time at dim -2), as in ``functional.py``.
"""

from __future__ import annotations

import numbers

import torch

__all__ = ["reward2go"]


# -- input checks (run once per call, at the boundary) ----------------------------------
def _check_shapes(fn: str, **tensors: torch.Tensor | None) -> torch.Tensor:
    """All given tensors are ``[*batch, T, 1]`` with one shape; returns the first one."""
    ref_name, ref_shape, ref = None, None, None
    for name, value in tensors.items():
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(value).__name__}")
        shape = value.shape
        if value.ndim < 2 or shape[-1] != 1:
            raise ValueError(
                f"{fn}: {name} must be shaped [*batch, T, 1] (time at dim -2, a trailing "
                f"singleton dim), got shape {list(shape)}; add the trailing dim with "
                f"{name}.unsqueeze(-1)."
            )
        if ref_shape is None:
            ref_name, ref_shape, ref = name, shape, value
        elif shape[-2] != ref_shape[-2]:
            raise ValueError(
                f"{fn}: time dims disagree: {ref_name} has T={ref_shape[-2]} (shape "
                f"{list(ref_shape)}) but {name} has T={shape[-2]} (shape {list(shape)})."
            )
        elif shape != ref_shape:
            raise ValueError(
                f"{fn}: {ref_name} has shape {list(ref_shape)} but {name} has shape "
                f"{list(shape)}; every input must have the same [*batch, T, 1] shape."
            )
    return ref


def _check_factor(fn: str, name: str, value, like: torch.Tensor, low_open: bool):
    """``gamma`` in (0, 1] (``low_open``) or ``lmbda`` in [0, 1]; a number or a tensor.

    A tensor is checked once (one host sync per call) and cast to ``like``'s dtype/device.
    """
    shape = like.shape
    interval = "(0, 1]" if low_open else "[0, 1]"
    if isinstance(value, torch.Tensor):
        try:
            fits = torch.broadcast_shapes(value.shape, shape) == shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"{fn}: {name} of shape {list(value.shape)} does not broadcast to the "
                f"inputs' shape {list(shape)}."
            )
        lo, hi = torch.aminmax(value.detach())
        lo, hi = float(lo), float(hi)
        if (lo <= 0 if low_open else lo < 0) or hi > 1:
            raise ValueError(
                f"{fn}: {name} must lie in {interval}, got a tensor with values in [{lo}, {hi}]."
            )
        return value.to(dtype=like.dtype, device=like.device)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a number or a tensor, got {value!r}")
    if (value <= 0 if low_open else value < 0) or value > 1:
        raise ValueError(f"{fn}: {name} must lie in {interval}, got {value}.")
    return float(value)


# -- the scan ---------------------------------------------------------------------------
def _backward_scan(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Solve ``x[t] = a[t] + c[t] * x[t + 1]`` with ``x[T] = 0`` along dim -2, no time loop.

    After the level with offset ``s``, ``a[t]`` holds the sum over ``[t, t + 2s)`` and
    ``c[t]`` the product of the factors over the same window, so ``ceil(log2(T))`` levels
    give the answer. Products are taken directly (no logs), so zeros (episode ends) and
    small factors are exact; the sums are pairwise, so the error stays ~1e-7 relative.

    Args:
        a: ``[*batch, T, 1]`` the terms of the recursion.
        c: ``[*batch, T, 1]`` the factors (zero where the recursion stops).
    """
    T = a.shape[-2]
    shift = 1
    while shift < T:  # log2(T) levels, not T steps
        a = torch.cat(
            (
                torch.addcmul(a[..., :-shift, :], c[..., :-shift, :], a[..., shift:, :]),
                a[..., -shift:, :],
            ),
            dim=-2,
        )
        if 2 * shift < T:
            c = torch.cat((c[..., :-shift, :] * c[..., shift:, :], c[..., -shift:, :]), dim=-2)
        shift *= 2
    return a


# -- reward-to-go -----------------------------------------------------------------------
def reward2go(reward: torch.Tensor, done: torch.Tensor, gamma) -> torch.Tensor:
    """Discounted sum of the rewards to the episode end, without bootstrapping.

    ``G[t] = r[t] + gamma * (1 - done[t]) * G[t + 1]``, with ``G[T] = 0``.

    Args:
        reward: ``[*batch, T, 1]``.
        done: ``[*batch, T, 1]`` bool; episode ends.
        gamma: discount in (0, 1], a number or a tensor broadcastable to ``[*batch, T, 1]``.

    Example:
        >>> reward2go(torch.ones(3, 1), torch.tensor([[False], [True], [False]]), 0.5)
        tensor([[1.5000],
                [1.0000],
                [1.0000]])
    """
    fn = "reward2go"
    like = _check_shapes(fn, reward=reward, done=done)
    gamma = _check_factor(fn, "gamma", gamma, like, low_open=True)
    not_done = (~done.bool()).to(reward.dtype)
    return _backward_scan(reward, gamma * not_done)
