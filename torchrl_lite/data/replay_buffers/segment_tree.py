"""Vectorized k-ary segment trees (sum and min) for prioritized replay.

A tree holds one value per storage position (a leaf) and keeps every internal node equal
to the sum (or min) of its ``fanout`` children, so the total and the minimum are read in
O(1) and a prefix-sum search descends ``log_fanout(capacity)`` levels. Every operation
works on a whole batch of positions at once with numpy: there is no Python loop per item,
only one per level (3 levels for 100k leaves with the default fanout of 64).

Levels are stored leaves first: ``levels[0]`` holds the leaves (padded to a multiple of
``fanout`` with the neutral element), entry ``e`` of ``levels[l]`` reduces entries
``e * fanout ... e * fanout + fanout - 1`` of ``levels[l - 1]``, and the last level has a
single block of ``fanout`` entries whose reduction is the root.

Example:
    >>> import numpy as np
    >>> tree = SumSegmentTree(10)
    >>> tree[np.array([1, 3])] = np.array([1.0, 3.0])
    >>> tree.reduce()
    4.0
    >>> tree.find_prefixsum_idx(np.array([0.5, 1.5, 3.9])).tolist()
    [1, 3, 3]
"""

from __future__ import annotations

import numpy as np

__all__ = ["SegmentTree", "SumSegmentTree", "MinSegmentTree"]


def _last_write_wins(index: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate ``index`` keeping, for each position, the value written last."""
    if index.size < 2:
        return index, value
    reversed_index = index[::-1]
    unique, first_in_reversed = np.unique(reversed_index, return_index=True)
    if unique.size == index.size:
        return index, value
    return unique, value[::-1][first_in_reversed]


class SegmentTree:
    """A k-ary segment tree over ``capacity`` leaves, reduced with ``"sum"`` or ``"min"``.

    Args:
        capacity: number of leaves (storage positions).
        reduction: ``"sum"`` (neutral 0) or ``"min"`` (neutral +inf).
        fanout: children per node; larger means fewer levels but wider blocks.

    Example:
        >>> import numpy as np
        >>> tree = SegmentTree(5, "min")
        >>> tree[np.arange(3)] = np.array([3.0, 1.0, 2.0])
        >>> tree.reduce()
        1.0
    """

    def __init__(self, capacity: int, reduction: str = "sum", fanout: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity}.")
        if reduction not in ("sum", "min"):
            raise ValueError(f"reduction must be 'sum' or 'min', got {reduction!r}.")
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout}.")
        self.capacity = int(capacity)
        self.reduction = reduction
        self.fanout = int(fanout)
        self.neutral = 0.0 if reduction == "sum" else np.inf
        self._reduce_block = np.add.reduce if reduction == "sum" else np.minimum.reduce
        self.levels: list[np.ndarray] = []
        n = self.capacity
        while True:
            blocks = -(-n // self.fanout)
            self.levels.append(np.full(blocks * self.fanout, self.neutral, dtype=np.float64))
            if blocks == 1:
                break
            n = blocks

    @property
    def leaves(self) -> np.ndarray:
        """The leaf values, shape ``[capacity]`` (a view: do not write to it directly)."""
        return self.levels[0][: self.capacity]

    def __getitem__(self, index) -> np.ndarray:
        return self.levels[0][index]

    def __setitem__(self, index, value) -> None:
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        value = np.broadcast_to(np.asarray(value, dtype=np.float64), index.shape)
        if index.size == 0:
            return
        if index.min() < 0 or index.max() >= self.capacity:
            raise IndexError(
                f"segment tree index out of range [0, {self.capacity}): "
                f"got values in [{index.min()}, {index.max()}]."
            )
        index, value = _last_write_wins(index, value)
        self.levels[0][index] = value
        fanout = self.fanout
        for level in range(1, len(self.levels)):
            index = index // fanout
            children = self.levels[level - 1].reshape(-1, fanout)[index]  # [n, fanout]
            self.levels[level][index] = self._reduce_block(children, axis=1)

    def reduce(self) -> float:
        """The sum (or min) of all leaves."""
        return float(self._reduce_block(self.levels[-1]))

    def clear(self) -> None:
        """Reset every leaf to the neutral element."""
        for level in self.levels:
            level.fill(self.neutral)

    def set_leaves(self, values: np.ndarray) -> None:
        """Replace all ``capacity`` leaves at once and rebuild the tree."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(
                f"expected {self.capacity} leaf values, got an array of shape {values.shape}."
            )
        self.levels[0][: self.capacity] = values
        for level in range(1, len(self.levels)):
            blocks = self.levels[level - 1].reshape(-1, self.fanout)
            self.levels[level][: blocks.shape[0]] = self._reduce_block(blocks, axis=1)

    def find_prefixsum_idx(self, prefix: np.ndarray) -> np.ndarray:
        """For each value ``u`` in ``prefix``, the leaf ``i`` with ``cumsum[i-1] <= u < cumsum[i]``.

        Only meaningful for a sum tree. Values at or beyond the total land on the last
        leaf with a positive value, so a leaf of value 0 is never returned while the total
        is positive.

        Args:
            prefix: float array ``[B]`` of values in ``[0, total)``.

        Returns:
            int64 array ``[B]`` of leaf indices.
        """
        if self.reduction != "sum":
            raise RuntimeError("find_prefixsum_idx needs a sum tree.")
        prefix = np.array(prefix, dtype=np.float64, copy=True).reshape(-1)
        rows = np.arange(prefix.size)
        node = np.zeros(prefix.size, dtype=np.int64)  # block index in the current level
        fanout = self.fanout
        for level in reversed(self.levels):
            block = level.reshape(-1, fanout)[node]  # [B, fanout]
            cumsum = np.cumsum(block, axis=1)  # [B, fanout]
            # keep u strictly below the block total so that the chosen child has mass > 0
            np.minimum(prefix, np.nextafter(cumsum[:, -1], -np.inf), out=prefix)
            child = (cumsum <= prefix[:, None]).sum(axis=1)  # [B], in [0, fanout)
            prefix -= cumsum[rows, child] - block[rows, child]
            node = node * fanout + child
        return node

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "leaves": self.leaves.copy()}

    def load_state_dict(self, state_dict: dict) -> None:
        if int(state_dict["capacity"]) != self.capacity:
            raise ValueError(
                f"cannot load a segment tree of capacity {state_dict['capacity']} into one of "
                f"capacity {self.capacity}."
            )
        self.set_leaves(np.asarray(state_dict["leaves"]))


class SumSegmentTree(SegmentTree):
    """A :class:`SegmentTree` that sums; supports :meth:`find_prefixsum_idx`.

    Args:
        capacity: number of leaves.
        fanout: children per node.

    Example:
        >>> import numpy as np
        >>> tree = SumSegmentTree(4)
        >>> tree[np.array([0, 0, 2])] = np.array([5.0, 1.0, 2.0])  # last write wins
        >>> tree.reduce()
        3.0
    """

    def __init__(self, capacity: int, fanout: int = 64) -> None:
        super().__init__(capacity, "sum", fanout)


class MinSegmentTree(SegmentTree):
    """A :class:`SegmentTree` that keeps the minimum; empty leaves hold +inf.

    Args:
        capacity: number of leaves.
        fanout: children per node.

    Example:
        >>> import numpy as np
        >>> tree = MinSegmentTree(4)
        >>> tree[np.array([1, 2])] = np.array([0.5, 2.0])
        >>> tree.reduce()
        0.5
    """

    def __init__(self, capacity: int, fanout: int = 64) -> None:
        super().__init__(capacity, "min", fanout)
