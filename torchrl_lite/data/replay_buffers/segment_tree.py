"""A vectorized sum/min tree over priorities, for prioritized replay.

:class:`PrioritySegmentTree` keeps one non-negative value per storage position and answers,
for a whole batch at once, the three questions prioritized sampling asks: the total, the
minimum positive value, and "which position holds the ``u``-th unit of mass" (prefix-sum
search). It is a two-level segment tree with a wide fanout: positions are grouped in blocks
of ``fanout`` leaves; each block keeps its within-block prefix sums and its minimum, and a
root array keeps the prefix sums of the block totals.

- ``find_prefixsum_idx(u)``: binary search in the root array picks the block, then one
  batched ``torch.searchsorted`` over the gathered block rows picks the leaf.
- ``update(index, value)``: writes the leaves (duplicate indices: the last write wins),
  recomputes the prefix sums and minimum of the touched blocks (one batched ``cumsum``
  and ``amin``), then the root prefix sums.

Both are O(batch * fanout + capacity / fanout) numpy/torch work with no Python loop per
item; the default fanout (about sqrt(capacity / 16), a power of two) keeps both terms small.

Example:
    >>> import numpy as np
    >>> tree = PrioritySegmentTree(10)
    >>> tree.update(np.array([1, 3, 3]), np.array([1.0, 5.0, 3.0]))  # last write wins
    >>> tree.total(), tree.min()
    (4.0, 1.0)
    >>> tree.find_prefixsum_idx(np.array([0.5, 1.5, 3.9])).tolist()
    [1, 3, 3]
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["PrioritySegmentTree"]


def _default_fanout(capacity: int) -> int:
    return int(min(1024, max(16, 2 ** round(math.log2(max(math.sqrt(capacity / 16), 1))))))


class PrioritySegmentTree:
    """Sum and min over ``capacity`` non-negative leaves, with batched prefix-sum search.

    A leaf of value 0 is empty: it is never returned by :meth:`find_prefixsum_idx` and is
    left out of :meth:`min`.

    Args:
        capacity: number of leaves (storage positions).
        fanout: leaves per block; ``None`` picks about ``sqrt(capacity / 16)``.

    Example:
        >>> import numpy as np
        >>> tree = PrioritySegmentTree(4)
        >>> tree.update(np.arange(4), np.array([0.0, 2.0, 0.0, 6.0]))
        >>> tree[np.array([1, 3])].tolist(), tree.min()
        ([2.0, 6.0], 2.0)
    """

    def __init__(self, capacity: int, fanout: int | None = None) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity}.")
        fanout = _default_fanout(int(capacity)) if fanout is None else int(fanout)
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout}.")
        self.capacity = int(capacity)
        self.fanout = fanout
        self._num_blocks = -(-self.capacity // fanout)
        self._values = np.zeros(self._num_blocks * fanout)  # leaves; 0 = empty
        self._min_values = np.full(self._num_blocks * fanout, np.inf)  # leaves; inf = empty
        self._stamp = np.full(self._num_blocks * fanout, -1, dtype=np.int64)  # for dedupe
        self._block_cumsum = np.zeros((self._num_blocks, fanout))  # within-block prefix sums
        self._block_min = np.full(self._num_blocks, np.inf)  # smallest positive leaf per block
        self._prefix = np.zeros(self._num_blocks + 1)  # prefix[b] = sum of the blocks < b
        self._min = math.inf
        # torch views of the same memory, for the batched ops torch does faster than numpy
        self._block_cumsum_t = torch.from_numpy(self._block_cumsum)
        self._block_total_t = self._block_cumsum_t[:, -1]  # [num_blocks]
        self._prefix_tail_t = torch.from_numpy(self._prefix)[1:]
        self._zero = torch.zeros((), dtype=torch.float64)

    @property
    def leaves(self) -> np.ndarray:
        """The leaf values, ``[capacity]`` (a read-only view)."""
        view = self._values[: self.capacity].view()
        view.flags.writeable = False
        return view

    def __getitem__(self, index) -> np.ndarray:
        return self._values[: self.capacity][index]

    def __len__(self) -> int:
        return self.capacity

    def __iter__(self):
        """The leaf values in position order (floats), as TorchRL's sum tree iterates."""
        return iter(self._values[: self.capacity].tolist())

    def __setitem__(self, index, value) -> None:
        self.update(index, value)

    def total(self) -> float:
        """The sum of all leaves."""
        return float(self._prefix[-1])

    def min(self) -> float:
        """The smallest positive leaf, or ``inf`` when every leaf is 0."""
        return float(self._min)

    def update(self, index, value) -> None:
        """Set ``leaves[index] = value``; with duplicate indices the last write wins.

        Args:
            index: integer array ``[n]`` of positions in ``[0, capacity)``.
            value: float array ``[n]`` (or one float), non-negative.
        """
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        if index.size == 0:
            return
        value = np.asarray(value, dtype=np.float64).reshape(-1)
        if value.size != index.size:
            if value.size != 1:
                raise ValueError(f"got {value.size} values for {index.size} positions.")
            value = np.full(index.size, value[0])
        low, high = index.min(), index.max()
        if low < 0 or high >= self.capacity:
            raise IndexError(
                f"priority index out of range [0, {self.capacity}): got values in [{low}, {high}]."
            )
        if index.size > 1:
            index, value = self._last_write_wins(index, value)
        self._values[index] = value
        self._min_values[index] = np.where(value > 0, value, np.inf)
        self._refresh_blocks(index // self.fanout)

    def _last_write_wins(self, index: np.ndarray, value: np.ndarray):
        """Deduplicate ``index``, keeping for each position the value that comes last."""
        order = np.arange(index.size)
        np.maximum.at(self._stamp, index, order)  # the last occurrence of each position
        last = self._stamp[index] == order
        self._stamp[index] = -1
        if last.all():
            return index, value
        return index[last], value[last]

    def _refresh_blocks(self, blocks: np.ndarray) -> None:
        # a block listed twice is recomputed twice, to the same values: harmless
        shape = (self._num_blocks, self.fanout)
        rows = torch.from_numpy(self._values.reshape(shape)[blocks])  # [n, fanout]
        self._block_cumsum[blocks] = torch.cumsum(rows, 1).numpy()
        min_rows = torch.from_numpy(self._min_values.reshape(shape)[blocks])  # [n, fanout]
        self._block_min[blocks] = min_rows.amin(1).numpy()
        torch.cumsum(self._block_total_t, 0, out=self._prefix_tail_t)
        self._min = self._block_min.min()

    def find_prefixsum_idx(self, prefix) -> np.ndarray:
        """For each ``u``, the leaf ``i`` with ``cumsum[i - 1] <= u < cumsum[i]``.

        Values at or past the total land on the last leaf with positive value, so an
        empty leaf is never returned while the total is positive.

        Args:
            prefix: float array ``[B]`` of values in ``[0, total)``.

        Returns:
            int64 array ``[B]`` of leaf indices.
        """
        if not self._prefix[-1] > 0:
            raise RuntimeError("every leaf is 0: there is no mass to search.")
        u = np.minimum(np.asarray(prefix, dtype=np.float64), np.nextafter(self._prefix[-1], -1))
        order = np.argsort(u)  # searching in increasing order is kinder to the caches
        u = u[order]
        block = np.searchsorted(self._prefix, u, side="right") - 1  # [B]
        u = torch.from_numpy(u - self._prefix[block])  # offset inside the block
        rows = self._block_cumsum_t.index_select(0, torch.from_numpy(block))  # [B, fanout]
        u = torch.minimum(u, torch.nextafter(rows[:, -1], self._zero))
        leaf = torch.searchsorted(rows, u.unsqueeze(1), right=True).squeeze(1)  # [B]
        out = np.empty_like(block)
        out[order] = block * self.fanout + leaf.numpy()
        return out

    def clear(self) -> None:
        """Empty every leaf."""
        self._values.fill(0.0)
        self._min_values.fill(np.inf)
        self._block_cumsum.fill(0.0)
        self._block_min.fill(np.inf)
        self._prefix.fill(0.0)
        self._min = math.inf

    def set_leaves(self, values) -> None:
        """Replace all ``capacity`` leaves at once and rebuild the tree."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(
                f"expected {self.capacity} leaf values, got an array of shape {values.shape}."
            )
        self.clear()
        self._values[: self.capacity] = values
        self._min_values[: self.capacity] = np.where(values > 0, values, np.inf)
        self._refresh_blocks(np.arange(self._num_blocks))

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "leaves": torch.from_numpy(self.leaves.copy())}

    def load_state_dict(self, state_dict: dict) -> None:
        if int(state_dict["capacity"]) != self.capacity:
            raise ValueError(
                f"cannot load priorities for {state_dict['capacity']} positions into a tree of "
                f"capacity {self.capacity}."
            )
        leaves = state_dict["leaves"]
        self.set_leaves(leaves.numpy() if isinstance(leaves, torch.Tensor) else leaves)
