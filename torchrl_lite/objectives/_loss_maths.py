"""Maths helpers shared by the losses: regression distances, log-probabilities, entropies
and discrete-action indices. Pure functions of tensors (and distributions), so the value
estimators and every loss can use them without importing the loss base class.
"""

from __future__ import annotations

import torch
from torch import distributions as D
from torch.nn import functional as F

__all__ = [
    "check_distance",
    "distance_loss",
    "reduce_to_batch",
    "log_prob_of",
    "entropy_of",
    "action_index",
    "group_optimizers",
]

_DISTANCES = ("l1", "l2", "smooth_l1")


def check_distance(name: str, owner: str) -> str:
    """``name`` if it is a known distance, else ``ValueError`` (call at construction)."""
    if name not in _DISTANCES:
        raise ValueError(f"{owner}: loss function must be one of {_DISTANCES}, got {name!r}.")
    return name


def distance_loss(v1: torch.Tensor, v2: torch.Tensor, loss_function: str) -> torch.Tensor:
    """Elementwise distance between ``v1`` and ``v2`` (same shape), no reduction.

    Args:
        v1: a tensor.
        v2: a tensor of the same shape.
        loss_function: ``"l2"`` (squared error), ``"l1"`` (absolute error) or
            ``"smooth_l1"`` (Huber loss with delta 1).

    Example:
        >>> distance_loss(torch.tensor([0.0, 3.0]), torch.zeros(2), "smooth_l1")
        tensor([0.0000, 2.5000])
    """
    if loss_function == "l2":
        return F.mse_loss(v1, v2, reduction="none")
    if loss_function == "l1":
        return F.l1_loss(v1, v2, reduction="none")
    if loss_function == "smooth_l1":
        return F.smooth_l1_loss(v1, v2, reduction="none")
    raise ValueError(f"loss_function must be one of {_DISTANCES}, got {loss_function!r}.")


def reduce_to_batch(x: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Sum the dims of ``x`` past the first ``batch_dims`` (one value per sample)."""
    if x.dim() > batch_dims:
        return x.sum(tuple(range(batch_dims, x.dim())))
    return x


def log_prob_of(dist: D.Distribution, action: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Log-probability of ``action`` under ``dist``, one value per sample: ``[*B]``.

    Distributions without event dims (e.g. ``torch.distributions.Normal``) give one value
    per action dimension; those are summed (independent dims).

    Args:
        dist: the policy's distribution.
        action: the action, ``[*B, *action_shape]``.
        batch_dims: ``len(B)``, the number of batch dims of the sample.
    """
    return reduce_to_batch(dist.log_prob(action), batch_dims)


def entropy_of(dist: D.Distribution, batch_dims: int, samples_mc: int = 1) -> torch.Tensor:
    """Entropy of ``dist`` per sample ``[*B]``: analytic when available, else Monte Carlo.

    The Monte-Carlo estimate ``-mean log p(a)`` over ``samples_mc`` reparameterised samples
    (plain samples if the distribution has no ``rsample``) is used when ``entropy()`` is
    not implemented (e.g. for a ``TransformedDistribution``).

    Args:
        dist: the distribution.
        batch_dims: the number of batch dims of the sample.
        samples_mc: number of samples of the Monte-Carlo estimate.
    """
    try:
        if samples_mc > 1 and hasattr(dist, "_bounds"):  # MC-only entropy with a sample count
            entropy = dist.entropy(samples_mc)
        else:
            entropy = dist.entropy()
    except NotImplementedError:
        sample = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
        entropy = -reduce_to_batch(dist.log_prob(sample), batch_dims + 1).mean(0)
    return reduce_to_batch(entropy, batch_dims)


def action_index(action: torch.Tensor, n_actions: int, action_space: str | None) -> torch.Tensor:
    """The index ``[*B]`` (int64) of a discrete action given one-hot or as an index.

    Args:
        action: one-hot ``[*B, n_actions]``, or an index ``[*B]`` or ``[*B, 1]`` (returned
            as it is: reshape it to ``[*B]``).
        n_actions: the number of actions (the size of the action-value dim).
        action_space: ``"one_hot"``, ``"categorical"``, or None to infer from the shape
            (a last dim of ``n_actions`` > 1 means one-hot).

    Example:
        >>> action_index(torch.tensor([[0, 1, 0]]), 3, None)
        tensor([1])
        >>> action_index(torch.tensor([2]), 3, "categorical")
        tensor([2])
    """
    if action_space is None:
        one_hot = n_actions > 1 and action.dim() > 0 and action.shape[-1] == n_actions
    else:
        one_hot = action_space == "one_hot"
    if one_hot:
        if action.shape[-1] != n_actions:
            raise ValueError(
                f"one-hot action has last dim {action.shape[-1]} but there are {n_actions} "
                f"action values; shape {list(action.shape)}."
            )
        return action.argmax(-1)
    return action.long()


def group_optimizers(*optimizers: torch.optim.Optimizer | None) -> torch.optim.Optimizer:
    """One optimizer stepping the parameter groups of several (``None`` entries skipped).

    Each group keeps its own settings (learning rate, betas, ...); one ``step()`` and
    one ``zero_grad()`` then serve an actor, a critic and a temperature at once. All
    optimizers must be of the same class.

    Example:
        >>> a = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> b = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
        >>> [g["lr"] for g in group_optimizers(a, b).param_groups]
        [0.1, 0.01]
    """
    present = [opt for opt in optimizers if opt is not None]
    if not present:
        raise ValueError("group_optimizers needs at least one optimizer (all were None).")
    cls = type(present[0])
    kinds = sorted({type(opt).__name__ for opt in present})
    if len(kinds) > 1:
        raise ValueError(
            f"group_optimizers: optimizers of different classes cannot be grouped ({kinds}); "
            "build them with the same class, or step them one by one."
        )
    groups = [group for opt in present for group in opt.param_groups]
    return cls(groups)
