"""The storage contract and the list storages: where a replay buffer keeps its items.

The contract a storage implements (a new storage is a small subclass of :class:`Storage`):

- ``set(index, data)``: write ``data`` at positions ``index`` of the first dimension
  (an ``int`` for one item, a ``slice`` or a ``LongTensor [n]`` of distinct positions for
  ``n`` rows). It validates ``data`` first and raises before writing anything.
- ``get(index)``: read the items at *flat* positions ``index`` (``LongTensor [B]``).
- ``__len__``: the number of items stored.

The tensor storages (:class:`TensorStorage`, :class:`LazyTensorStorage`,
:class:`LazyMemmapStorage`) live in ``tensor_storage.py``; ``storages.py`` re-exports all.
A storage with ``ndim=2`` holds ``[envs, time]``-shaped rows: ``set`` writes whole rows
along the first dimension, while ``len`` and ``get`` count and address single items
(flat position ``row * row_size + column``), so samplers never care about ``ndim``.

``state_dict``/``load_state_dict`` and ``dumps(path)``/``loads(path)`` save and restore the
contents; a failed load leaves the storage as it was. ``dumps`` is atomic and ``loads``
checks every file it reads (``torchrl_lite/_atomic.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl_lite._atomic import find_complete, is_json_dump, read_json, write_folder, write_synced

__all__ = ["Storage", "ListStorage", "LazyStackStorage", "identity_collate"]


def identity_collate(items):
    """The default collate of tensor storages: ``get`` already returns a batch."""
    return items


class Storage:
    """Base class of storages: ``set``, ``get`` and ``__len__`` are the contract.

    Args:
        max_size: the number of items the storage holds at most.

    Example:
        >>> storage = ListStorage(max_size=3)
        >>> storage.set(torch.arange(2), ["a", "b"])
        >>> len(storage), storage.get(torch.tensor([1, 0]))
        (2, ['b', 'a'])
    """

    ndim = 1

    def __init__(self, max_size: int) -> None:
        if int(max_size) < 1:
            raise ValueError(f"max_size must be a positive integer, got {max_size}.")
        self.max_size = int(max_size)
        self._version = 0  # bumped on every change, so samplers can cache derived data
        self._write_end = 0  # flat position right after the last written item

    # -- the contract -------------------------------------------------------------------
    def set(self, index, data) -> None:
        raise NotImplementedError

    def get(self, index):
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    # -- shared helpers -----------------------------------------------------------------
    def __getitem__(self, index):
        return self.get(index)

    def rows_capacity(self, data, batched: bool = True) -> int:
        """How many first-dimension rows fit, for rows shaped like ``data``."""
        return self.max_size

    def flat_index(self, rows: torch.Tensor) -> torch.Tensor:
        """Flat item positions of first-dimension ``rows`` (identity when ``ndim == 1``)."""
        return rows

    def empty(self) -> None:
        """Forget every item (the memory is kept for reuse)."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state_dict: dict) -> None:
        raise NotImplementedError

    def dumps(self, path) -> None:
        """Write the contents under the directory ``path``."""
        raise NotImplementedError

    def loads(self, path) -> None:
        """Restore the contents written by :meth:`dumps`."""
        raise NotImplementedError

    default_collate = staticmethod(identity_collate)


def _is_dump(folder: Path) -> bool:
    return is_json_dump(folder, "class")


def _write_dump(path, write) -> None:
    """Write a storage dump folder atomically; ``write(folder)`` writes the data files."""
    write_folder(path, write, _is_dump, "storage dump")


def _read_meta(path) -> tuple[Path, dict]:
    """``(folder, meta)`` of the dump at ``path`` (or the copy a killed save left)."""
    path = Path(path)
    folder = find_complete(path, _is_dump, "storage dump")
    if folder is None:
        meta_file = path / "meta.json"
        if meta_file.is_file():
            read_json(meta_file)  # raises naming the corrupt file
        raise FileNotFoundError(
            f"{path} holds no dumped storage (missing {meta_file}); write one with dumps()."
        )
    return folder, read_json(folder / "meta.json")


def _write_meta(folder: Path, meta: dict) -> None:
    write_synced(folder / "meta.json", lambda f: f.write(json.dumps(meta).encode()))


def _positions(index) -> torch.Tensor:
    if isinstance(index, slice):
        return torch.arange(index.start or 0, index.stop)
    return torch.as_tensor(index, dtype=torch.long).reshape(-1)


def _stack_items(items):
    stackable = items and (
        all(isinstance(item, TensorDictBase) for item in items)
        or all(isinstance(item, torch.Tensor) for item in items)
    )
    if not stackable:
        return items
    try:
        return torch.stack(items, 0)
    except RuntimeError as err:  # items of mixed shapes: name them instead of torch's words
        raise ValueError(_mixed_shapes_message(items, err)) from None


def _mixed_shapes_message(items, err: Exception) -> str:
    """Which entry has which shape in which of ``items`` (positions in the sample)."""
    entries = {None: [item for item in items]} if isinstance(items[0], torch.Tensor) else {}
    if not entries:
        keys = dict.fromkeys(k for item in items for k in item.keys(True, True))
        entries = {k: [item.get(k, None) for item in items] for k in keys}
    for key, values in entries.items():
        shapes: dict[str, list[int]] = {}
        for i, value in enumerate(values):
            text = "absent" if value is None else str(list(value.shape))
            shapes.setdefault(text, []).append(i)
        if len(shapes) > 1:
            what = "the items have" if key is None else f"entry {key!r} has"
            found = "; ".join(f"{shape} in items {pos[:6]}" for shape, pos in shapes.items())
            return (
                f"ListStorage: the sampled items do not stack: {what} shapes {found}. "
                "Store items of one shape, or sample them as a list (collate_fn=lambda x: x)."
            )
    return f"ListStorage: the sampled items do not stack ({err})."


class ListStorage(Storage):
    """A storage over a Python list: holds any objects, with no shape checks.

    ``get`` returns a list; buffers stack TensorDicts or tensors into one batch by default.

    Args:
        max_size: the number of items held at most.

    Example:
        >>> storage = ListStorage(max_size=10)
        >>> storage.set(0, {"obs": 1})
        >>> storage.get(torch.tensor([0, 0]))
        [{'obs': 1}, {'obs': 1}]
    """

    def __init__(self, max_size: int = 1000) -> None:
        super().__init__(max_size)
        self._items: list = []

    def __len__(self) -> int:
        return len(self._items)

    def set(self, index, data) -> None:
        if isinstance(index, int):
            positions, items = [index], [data]
        else:
            positions = _positions(index).tolist()
            if isinstance(data, TensorDictBase | torch.Tensor):
                items = list(data.unbind(0))
            else:
                items = list(data)
            if len(items) != len(positions):
                raise ValueError(f"got {len(items)} items for {len(positions)} positions.")
        size = len(self._items)
        for position in positions:
            if not 0 <= position < self.max_size:
                raise IndexError(f"position {position} is outside [0, {self.max_size}).")
        # the positions past the end must fill it without a gap, in any order (a wrapped
        # write of a full ring such as [1, 2, 0] on an empty list is fine)
        new_size = max([size, *(p + 1 for p in positions)])
        missing = sorted(set(range(size, new_size)) - set(positions))
        if missing:
            raise IndexError(
                f"position {new_size - 1} would leave a gap at {missing[:5]}: the list holds "
                f"{size} items; write positions {size}, {size + 1}, ... in turn."
            )
        self._items.extend([None] * (new_size - size))
        for position, item in zip(positions, items):
            self._items[position] = item
        self._write_end = (positions[-1] + 1) % self.max_size if positions else self._write_end
        self._version += 1

    def get(self, index):
        if isinstance(index, (int, slice)):
            return self._items[index]
        items = self._items
        return [items[i] for i in _positions(index).tolist()]

    def empty(self) -> None:
        self._items = []
        self._version += 1

    def state_dict(self) -> dict:
        return {"items": list(self._items)}

    def load_state_dict(self, state_dict: dict) -> None:
        items = list(state_dict["items"])
        if len(items) > self.max_size:
            raise ValueError(f"cannot load {len(items)} items into max_size={self.max_size}.")
        self._items = items
        self._version += 1

    def dumps(self, path) -> None:
        items = list(self._items)

        def write(folder: Path) -> None:
            write_synced(folder / "items.pt", lambda f: torch.save(items, f))
            _write_meta(
                folder, {"class": type(self).__name__, "len": len(items), "max_size": self.max_size}
            )

        _write_dump(path, write)

    def loads(self, path) -> None:
        folder, _ = _read_meta(path)
        file = folder / "items.pt"
        try:
            # the items are arbitrary Python objects: only load dumps you trust
            items = torch.load(file, weights_only=False)
        except FileNotFoundError as err:
            raise FileNotFoundError(f"the storage dump at {folder} is missing {file}.") from err
        except Exception as err:
            raise ValueError(f"{file} is corrupt: {type(err).__name__}: {err}") from err
        if not isinstance(items, list):
            raise ValueError(f"{file} is corrupt: it holds a {type(items).__name__}, not a list.")
        self.load_state_dict({"items": items})

    default_collate = staticmethod(_stack_items)


def _lazy_stack(items):
    if items and all(isinstance(item, TensorDictBase) for item in items):
        return LazyStackedTensorDict(*items, stack_dim=0)
    return _stack_items(items)


class LazyStackStorage(ListStorage):
    """A ``ListStorage`` whose samples are ``LazyStackedTensorDict`` (as in TorchRL).

    Its items may differ in entries and shapes: steps of a batched env whose copies'
    specs differ (multi-task), or of different envs. ``sample()`` and ``rb[:]`` give a
    lazy stack of the items; ``td[i]`` is item ``i`` with its own entries.

    Args:
        max_size: the number of items held at most.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyStackStorage(10))
        >>> _ = rb.add(TensorDict(obs=torch.zeros(3)))
        >>> _ = rb.add(TensorDict(obs=torch.zeros(4), extra=torch.ones(1)))
        >>> data = rb[:]
        >>> type(data).__name__, data[1]["obs"].shape
        ('LazyStackedTensorDict', torch.Size([4]))
    """

    default_collate = staticmethod(_lazy_stack)
