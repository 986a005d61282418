"""Writers: where in the storage new data goes.

The contract (a new writer is a small subclass of :class:`Writer`):

- ``add(data) -> int``: write one item (one row), return its first-dimension position.
- ``extend(data) -> LongTensor [n]``: write ``n`` rows, return the position of each row
  (``-1`` for a row the writer chose not to keep).

A writer calls ``storage.set`` (which validates the data and raises before writing
anything) and only then moves its own state, so a failed write changes nothing.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.replay_buffers._sampler_base import reduce_priority

__all__ = ["Writer", "RoundRobinWriter", "TensorDictRoundRobinWriter", "TensorDictMaxValueWriter"]


def _num_rows(data) -> int:
    if isinstance(data, TensorDictBase):
        if data.batch_dims == 0:
            raise ValueError("extend needs data with a batch dimension; use add for one item.")
        return data.batch_size[0]
    if isinstance(data, torch.Tensor):
        if data.dim() == 0:
            raise ValueError("extend needs data with a batch dimension; use add for one item.")
        return data.shape[0]
    return len(data)


class Writer:
    """Base class of writers: :meth:`add` and :meth:`extend` are the contract.

    Example:
        >>> from torchrl_lite.data.replay_buffers import ListStorage
        >>> writer = RoundRobinWriter()
        >>> writer.register_storage(ListStorage(3))
        >>> writer.extend(["a", "b"]).tolist(), writer.add("c"), writer.add("d")
        ([0, 1], 2, 0)
    """

    def __init__(self) -> None:
        self._storage = None

    def register_storage(self, storage) -> None:
        self._storage = storage

    def add(self, data) -> int:
        raise NotImplementedError

    def extend(self, data) -> torch.Tensor:
        raise NotImplementedError

    def empty(self) -> None:
        """Forget the write position (the storage is emptied separately)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass


class RoundRobinWriter(Writer):
    """Writes at a cursor that wraps around: once full, the oldest items are overwritten.

    Extending by more rows than the storage holds keeps the last ones (the first would be
    overwritten within the same call); their positions are still returned, in order.

    Example:
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> writer = RoundRobinWriter()
        >>> writer.register_storage(LazyTensorStorage(4))
        >>> writer.extend(torch.arange(3.0)).tolist(), writer.extend(torch.arange(3.0)).tolist()
        ([0, 1, 2], [3, 0, 1])
    """

    def __init__(self) -> None:
        super().__init__()
        self._cursor = 0

    @property
    def cursor(self) -> int:
        """The first-dimension position the next row goes to."""
        return self._cursor

    def add(self, data) -> int:
        capacity = self._storage.rows_capacity(data, batched=False)
        index = self._cursor % capacity
        self._storage.set(index, data)
        self._cursor = (index + 1) % capacity
        return index

    def extend(self, data) -> torch.Tensor:
        count = _num_rows(data)
        capacity = self._storage.rows_capacity(data, batched=True)
        start = self._cursor % capacity
        index = (torch.arange(start, start + count)) % capacity  # [count]
        if count > capacity:  # the first rows would be overwritten in this very call
            self._storage.set(index[count - capacity :], data[count - capacity :])
        elif start + count <= capacity:
            self._storage.set(slice(start, start + count), data)
        else:
            self._storage.set(index, data)
        self._cursor = (start + count) % capacity
        return index

    def empty(self) -> None:
        self._cursor = 0

    def state_dict(self) -> dict:
        return {"cursor": self._cursor}

    def load_state_dict(self, state_dict: dict) -> None:
        self._cursor = int(state_dict["cursor"])


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A :class:`RoundRobinWriter` for TensorDict data (the default of TensorDict buffers).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> writer = TensorDictRoundRobinWriter()
        >>> writer.register_storage(LazyTensorStorage(10))
        >>> writer.extend(TensorDict(obs=torch.zeros(4, 2), batch_size=[4])).tolist()
        [0, 1, 2, 3]
    """

    def add(self, data) -> int:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{type(self).__name__} writes TensorDicts, got {type(data).__name__}.")
        return super().add(data)

    def extend(self, data) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{type(self).__name__} writes TensorDicts, got {type(data).__name__}.")
        return super().extend(data)


class TensorDictMaxValueWriter(Writer):
    """Keeps the ``max_size`` items of highest rank: a new item replaces the lowest one.

    The rank of an item is ``data[rank_key]`` reduced over its non-batch dims. While the
    storage has room every item is kept; once full, the items kept are the best among the
    stored and the new ones (ties keep the stored item). Works on ``ndim=1`` storages.

    Args:
        rank_key: the entry ranking items (default ``("next", "reward")``).
        reduction: how several values of one item are reduced (``"sum"``, ``"max"``,
            ``"min"``, ``"mean"``, ``"median"``).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> writer = TensorDictMaxValueWriter(rank_key="score")
        >>> writer.register_storage(LazyTensorStorage(2))
        >>> writer.extend(TensorDict(score=torch.tensor([1.0, 5.0, 3.0]), batch_size=[3])).tolist()
        [-1, 0, 1]
        >>> writer.extend(TensorDict(score=torch.tensor([4.0]), batch_size=[1])).tolist()  # evicts 3
        [1]
    """

    def __init__(self, rank_key=None, reduction: str = "sum") -> None:
        super().__init__()
        self.rank_key = rank_key if rank_key is not None else (_keys.NEXT, _keys.REWARD)
        self.reduction = reduction
        self._ranks: torch.Tensor | None = None  # [capacity], -inf where empty
        self._filled = 0

    def _ranks_of(self, data: TensorDictBase) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{type(self).__name__} writes TensorDicts, got {type(data).__name__}.")
        value = data.get(self.rank_key, None)
        if value is None:
            raise KeyError(
                f"{type(self).__name__} ranks items by rank_key={self.rank_key!r}, which the "
                "data lack: write that entry, or pass rank_key=<an entry of the data>. "
                + missing_key_message(self.rank_key, list(data.keys(True, True)))
            )
        count = data.batch_size[0]
        ranks = reduce_priority(value.detach(), count, self.reduction).to("cpu", torch.float64)
        if torch.isnan(ranks).any():
            raise ValueError(f"the rank entry {self.rank_key!r} holds NaN values.")
        return ranks

    def add(self, data) -> int:
        return int(self.extend(data.unsqueeze(0))[0])

    def extend(self, data) -> torch.Tensor:
        if getattr(self._storage, "ndim", 1) != 1:
            raise ValueError(f"{type(self).__name__} needs a storage with ndim=1.")
        _num_rows(data)
        ranks = self._ranks_of(data)  # [n]
        count = ranks.numel()
        capacity = self._storage.rows_capacity(data, batched=True)
        stored = self._ranks[: self._filled] if self._ranks is not None else ranks[:0]
        if self._filled + count <= capacity:
            kept_new = torch.arange(count)
            slots = torch.arange(self._filled, self._filled + count)
        else:
            everything = torch.cat([stored, ranks])
            order = torch.sort(everything, descending=True, stable=True).indices[:capacity]
            kept = torch.zeros(everything.numel(), dtype=torch.bool)
            kept[order] = True
            kept_new = kept[self._filled :].nonzero().squeeze(1)
            evicted = (~kept[: self._filled]).nonzero().squeeze(1)
            free = torch.cat([evicted, torch.arange(self._filled, capacity)])
            slots = free[: kept_new.numel()]
        if kept_new.numel():
            self._storage.set(slots, data[kept_new])
        elif getattr(self._storage, "initialized", False):
            self._storage._check(data, batched=True)  # reject bad data even when none is kept
        if self._ranks is None:
            self._ranks = torch.full((capacity,), -torch.inf, dtype=torch.float64)
        self._ranks[slots] = ranks[kept_new]
        self._filled = min(capacity, self._filled + kept_new.numel())
        index = torch.full((count,), -1, dtype=torch.long)
        index[kept_new] = slots
        return index

    def empty(self) -> None:
        self._ranks = None
        self._filled = 0

    def state_dict(self) -> dict:
        return {"ranks": self._ranks, "filled": self._filled}

    def load_state_dict(self, state_dict: dict) -> None:
        self._ranks = state_dict["ranks"]
        self._filled = int(state_dict["filled"])
