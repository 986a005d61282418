"""The sampler contract and the plain samplers: which stored items a replay buffer returns.

The contract (a new sampler is a small subclass of :class:`Sampler`):

- ``sample(storage, batch_size) -> (index, info)``: ``index`` is a ``LongTensor [B]`` of
  flat storage positions, ``info`` a dict of per-item extras (e.g. ``"_weight"``) that
  TensorDict buffers write into the sample.
- ``extend(index)`` / ``add(index)``: told which positions were just written.
- ``update_priority(index, priority)``: only prioritized samplers use it (a no-op
  elsewhere, so one training loop works with any sampler).
- ``has_epochs`` / ``ran_out``: samplers without replacement have epochs and set
  ``ran_out`` once one is used up; a buffer iterates until then. Iterating a buffer whose
  sampler has no epochs (:class:`RandomSampler`, :class:`PrioritizedSampler`) never ends.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from torchrl_lite.data.replay_buffers.segment_tree import PrioritySegmentTree

__all__ = [
    "Sampler",
    "RandomSampler",
    "SamplerWithoutReplacement",
    "PrioritizedSampler",
    "check_batch_size",
    "reduce_priority",
]

_REDUCTIONS = ("max", "min", "mean", "median", "sum")


def _check_not_empty(storage) -> int:
    size = len(storage)
    if size == 0:
        raise RuntimeError(
            "cannot sample from an empty replay buffer: add data with extend() or add() first."
        )
    return size


def _never_full(sampler, message: str, capacity: int, batch_size: int, fix: str) -> None:
    """Raise (``drop_last=True``: no batch would ever come) or warn once per sampler."""
    if sampler.drop_last:
        raise ValueError(
            f"{message}; with drop_last=True no batch would ever be returned. {fix}, or pass "
            "drop_last=False (shorter batches)."
        )
    if not sampler._capacity_warned:
        sampler._capacity_warned = True
        warnings.warn(
            f"{message}; every batch will be short (one epoch holds at most {capacity} "
            f"items). {fix}, or use a sampler with replacement.",
            UserWarning,
            stacklevel=4,
        )


def check_batch_size(batch_size) -> int:
    """``batch_size`` as a positive int, or a ``TypeError``/``ValueError`` naming it."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an int, got {batch_size!r}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    return int(batch_size)


class Sampler:
    """Base class of samplers: :meth:`sample` is the contract.

    Example:
        >>> from torchrl_lite.data.replay_buffers import ListStorage
        >>> storage = ListStorage(10)
        >>> storage.set(torch.arange(3), ["a", "b", "c"])
        >>> index, info = RandomSampler().sample(storage, 4)
        >>> index.shape, info
        (torch.Size([4]), {})
    """

    has_epochs = False
    ran_out = False

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def extend(self, index: torch.Tensor) -> None:
        """Told that the flat positions ``index`` were just written."""

    def add(self, index) -> None:
        """Told that one flat position (or a few) was just written."""
        self.extend(torch.as_tensor(index).reshape(-1))

    def update_priority(self, index, priority) -> None:
        """Set priorities (prioritized samplers only; a no-op here)."""

    def empty(self) -> None:
        """Forget all state about the stored items."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass


class RandomSampler(Sampler):
    """Uniform sampling with replacement.

    Example:
        >>> from torchrl_lite.data.replay_buffers import ListStorage
        >>> storage = ListStorage(10)
        >>> storage.set(torch.arange(5), list(range(5)))
        >>> index, _ = RandomSampler().sample(storage, 3)
        >>> bool((index < 5).all())
        True
    """

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        return torch.randint(_check_not_empty(storage), (batch_size,)), {}


class SamplerWithoutReplacement(Sampler):
    """Epochs over the stored items: each item once per epoch, in random order.

    After the batch that uses up the epoch ``ran_out`` is ``True`` and the next call
    starts a new epoch. If the number of stored items changes mid-epoch, a new epoch
    starts.

    Args:
        drop_last: if ``True``, the epoch ends before a last batch smaller than
            ``batch_size`` (and asking for more items than are stored is an error);
            if ``False``, the last batch of an epoch may be smaller.
        shuffle: if ``False``, items come in storage order.

    Example:
        >>> from torchrl_lite.data.replay_buffers import ListStorage
        >>> storage = ListStorage(10)
        >>> storage.set(torch.arange(5), list(range(5)))
        >>> sampler = SamplerWithoutReplacement()
        >>> first, _ = sampler.sample(storage, 3)
        >>> rest, _ = sampler.sample(storage, 3)
        >>> sorted(first.tolist() + rest.tolist()), sampler.ran_out
        ([0, 1, 2, 3, 4], True)
    """

    has_epochs = True

    def __init__(self, drop_last: bool = False, shuffle: bool = True) -> None:
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._capacity_warned = False
        self._perm: torch.Tensor | None = None
        self._pos = 0
        self.ran_out = False

    def _epoch_over(self, size: int, batch_size: int) -> bool:
        remaining = size - self._pos
        return remaining <= 0 or (self.drop_last and remaining < batch_size)

    def check_capacity(self, capacity: int, batch_size: int) -> None:
        """Raise (``drop_last=True``) or warn once when ``batch_size`` exceeds the storage
        ``capacity``: no full batch can ever be drawn without replacement."""
        if batch_size > capacity:
            _never_full(
                self,
                f"SamplerWithoutReplacement: batch_size={batch_size} is larger than the "
                f"storage capacity max_size={capacity}, so no full batch can ever be drawn "
                "without replacement",
                capacity,
                batch_size,
                f"Lower batch_size to at most {capacity} or build the storage with "
                f"max_size >= {batch_size}",
            )

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        size = _check_not_empty(storage)
        self.check_capacity(getattr(storage, "max_size", size), batch_size)
        if self.drop_last and batch_size > size:
            raise ValueError(
                f"batch_size={batch_size} is larger than the {size} stored items and "
                "drop_last=True would drop every batch: lower batch_size, add data or set "
                "drop_last=False."
            )
        perm = self._perm
        if perm is None or perm.numel() != size or self._epoch_over(size, batch_size):
            perm = self._perm = torch.randperm(size) if self.shuffle else torch.arange(size)
            self._pos = 0
            self.ran_out = False
        index = perm[self._pos : self._pos + batch_size].clone()
        self._pos += index.numel()
        if self._epoch_over(size, batch_size):
            self.ran_out = True
        return index, {}

    def empty(self) -> None:
        self._perm = None
        self._pos = 0
        self.ran_out = False

    def state_dict(self) -> dict:
        return {"perm": self._perm, "pos": self._pos, "ran_out": self.ran_out}

    def load_state_dict(self, state_dict: dict) -> None:
        self._perm = state_dict["perm"]
        self._pos = int(state_dict["pos"])
        self.ran_out = bool(state_dict["ran_out"])


def reduce_priority(priority: torch.Tensor, count: int, reduction: str) -> torch.Tensor:
    """Reduce ``priority`` to one value per item: ``[count, ...] -> [count]``.

    Args:
        priority: a tensor with ``count`` items along its leading dims (or ``count`` values).
        count: the number of items.
        reduction: ``"max"``, ``"min"``, ``"mean"``, ``"median"`` or ``"sum"``.

    Example:
        >>> reduce_priority(torch.tensor([[1.0, 3.0], [2.0, 0.0]]), 2, "max")
        tensor([3., 2.])
    """
    priority = torch.as_tensor(priority)
    if priority.numel() in (1, count):
        return priority.reshape(-1).expand(count) if priority.numel() == 1 else priority.reshape(-1)
    if priority.numel() % max(count, 1):
        raise ValueError(
            f"got {priority.numel()} priority values for {count} items: expected one per item "
            "or the same number for each item."
        )
    per_item = priority.reshape(count, -1)  # [count, values per item]
    if reduction == "max":
        return per_item.amax(1)
    if reduction == "min":
        return per_item.amin(1)
    if reduction == "mean":
        return per_item.mean(1)
    if reduction == "median":
        return per_item.median(1).values
    return per_item.sum(1)


class PrioritizedSampler(Sampler):
    """Prioritized sampling (Schaul et al., 2016, https://arxiv.org/abs/1511.05952).

    Item ``i`` with priority ``q_i`` is stored as ``p_i = (q_i + eps) ** alpha`` and drawn
    with probability ``P(i) = p_i / sum_j p_j``. New items get the largest priority seen
    so far (1 at first). Each sample comes with importance weights
    ``w_i = (N * P(i)) ** -beta / max_j w_j``, normalised by the largest weight over the
    whole buffer (the one of the smallest priority), which reduces to
    ``w_i = (p_i / min_j p_j) ** -beta``.

    Sampling and updates are vectorized over the batch on a
    :class:`~torchrl_lite.data.replay_buffers.segment_tree.PrioritySegmentTree`.

    Args:
        max_capacity: the number of storage positions (the storage's ``max_size``).
        alpha: how much priorities count (0 = uniform).
        beta: importance-sampling exponent (0 = no correction, 1 = full).
        eps: added to every priority, so that none is 0.
        dtype: dtype of the returned ``"_weight"``.
        reduction: how several priority values of one item are reduced
            (``"max"``, ``"min"``, ``"mean"``, ``"median"``, ``"sum"``).

    Example:
        >>> from torchrl_lite.data.replay_buffers import ListStorage
        >>> storage = ListStorage(4)
        >>> storage.set(torch.arange(2), ["a", "b"])
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
        >>> sampler.extend(torch.arange(2))
        >>> sampler.update_priority(torch.tensor([0, 1]), torch.tensor([1.0, 3.0]))
        >>> index, info = sampler.sample(storage, 1000)
        >>> 0.7 < (index == 1).float().mean().item() < 0.8
        True
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
    ) -> None:
        if alpha < 0 or beta < 0 or eps < 0:
            raise ValueError(
                f"alpha, beta and eps must be non-negative, got alpha={alpha}, beta={beta}, eps={eps}."
            )
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
        self.max_capacity = int(max_capacity)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._tree = PrioritySegmentTree(self.max_capacity)
        self._max_priority = 1.0

    @property
    def _sum_tree(self) -> PrioritySegmentTree:
        """The priority tree, under TorchRL's name (tutorials iterate over its leaves)."""
        return self._tree

    @property
    def default_priority(self) -> float:
        """The stored priority ``p`` given to new items: ``(max priority + eps) ** alpha``."""
        return (self._max_priority + self.eps) ** self.alpha

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        _check_not_empty(storage)
        tree = self._tree
        total = tree.total()
        if not total > 0:
            raise RuntimeError("every stored priority is 0: update priorities before sampling.")
        u = torch.rand(batch_size, dtype=torch.float64).numpy() * total  # [B]
        index = tree.find_prefixsum_idx(u)  # [B]
        weight = np.power(tree[index] / tree.min(), -self.beta)  # (p_i / p_min) ** -beta
        return torch.from_numpy(index), {"_weight": torch.from_numpy(weight).to(self.dtype)}

    def extend(self, index: torch.Tensor) -> None:
        self._tree.update(np.asarray(index, dtype=np.int64).reshape(-1), self.default_priority)

    def update_priority(self, index, priority) -> None:
        """Set the priority of the items at flat positions ``index``.

        Args:
            index: ``LongTensor [n]`` (any shape) of flat positions; with duplicates the
                last value wins.
            priority: one value per item, or several per item reduced with ``reduction``.
                Negative, NaN or infinite values raise ``ValueError``; nothing is changed.
        """
        index = torch.as_tensor(index).reshape(-1).to(device="cpu", dtype=torch.long)
        priority = torch.as_tensor(priority).detach()
        if priority.numel() != index.numel():
            priority = reduce_priority(priority, index.numel(), self.reduction)
        values = priority.reshape(-1).cpu().numpy().astype(np.float64)  # a copy: [n]
        if values.size == 0:
            return
        low, high = values.min(), values.max()
        if not (low >= 0 and high < np.inf):  # also catches NaN
            bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0)))[:5]
            raise ValueError(
                "priorities must be finite and non-negative; got "
                f"{values[bad].tolist()} at positions {index.numpy()[bad].tolist()}."
            )
        values += self.eps
        if self.alpha != 1.0:
            np.power(values, self.alpha, out=values)
        self._tree.update(index.numpy(), values)
        self._max_priority = max(self._max_priority, float(high))

    def priorities(self) -> torch.Tensor:
        """The stored priorities ``p`` (after ``eps`` and ``alpha``), ``[max_capacity]``."""
        return torch.from_numpy(self._tree.leaves.copy())

    def empty(self) -> None:
        self._tree.clear()
        self._max_priority = 1.0

    def state_dict(self) -> dict:
        return {"tree": self._tree.state_dict(), "max_priority": self._max_priority}

    def load_state_dict(self, state_dict: dict) -> None:
        self._tree.load_state_dict(state_dict["tree"])
        self._max_priority = float(state_dict["max_priority"])
