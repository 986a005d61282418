"""Tensor storages: preallocated TensorDicts (or tensors), in memory or memory-mapped.

:class:`TensorStorage` implements the storage contract (see ``_storage_base.py``) over a
TensorDict whose first dimension indexes rows: ``set`` checks entries, shapes and dtypes
before copying (contiguous runs of positions are copied with ``copy_``), and ``get``
gathers every leaf with ``index_select`` into a TensorDict built without per-item work.
:class:`LazyTensorStorage` and :class:`LazyMemmapStorage` allocate that TensorDict from
the first write, in memory or as memory-mapped files.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import weakref
from pathlib import Path

import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase

from torchrl_lite import _td
from torchrl_lite._utils import did_you_mean, missing_key_message
from torchrl_lite.data.replay_buffers._dump_files import _check_data_files, _fsync_file
from torchrl_lite.data.replay_buffers._storage_base import (
    Storage,
    _positions,
    _read_meta,
    _write_dump,
    _write_meta,
)

__all__ = ["TensorStorage", "LazyTensorStorage", "LazyMemmapStorage"]

_TENSOR_KEY = "_data"  # the single entry used when a TensorStorage holds plain tensors
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,100}")  # keys usable as file names


class TensorStorage(Storage):
    """A storage over a TensorDict (or tensor) whose first dimension indexes rows.

    Given ``storage``, it wraps that data, full (as offline datasets do); the lazy
    subclasses allocate it from the first write instead.

    Args:
        storage: the TensorDict or tensor to wrap, or ``None`` (lazy subclasses).
        max_size: number of items; defaults to the size of ``storage``.
        device: where sampled items are returned.
        ndim: how many leading dimensions index items (2 for ``[envs, time]`` rows).
        compilable: TorchRL's flag for use under ``torch.compile``; accepted and recorded
            (also by the lazy subclasses).

    Example:
        >>> data = TensorDict(obs=torch.arange(6.0).view(3, 2), batch_size=[3])
        >>> storage = TensorStorage(data)
        >>> storage.get(torch.tensor([2, 0]))["obs"]
        tensor([[4., 5.],
                [0., 1.]])
    """

    def __init__(
        self, storage=None, max_size=None, device=None, ndim: int = 1, compilable: bool = False
    ) -> None:
        if int(ndim) < 1:
            raise ValueError(f"ndim must be at least 1, got {ndim}.")
        # TorchRL's flag for code run under torch.compile: our reads and writes are plain
        # tensor indexing either way, so it only records the request
        self.compilable = bool(compilable)
        self.ndim = int(ndim)
        self.device = torch.device(device) if device is not None else None
        self._data: TensorDictBase | None = None  # [rows_capacity, *item batch dims]
        self._is_tensor = False
        self._rows = 0  # rows written so far
        if storage is not None:
            rows = storage.shape[0]
            row_size = math.prod(storage.shape[1 : self.ndim])
            super().__init__(max_size if max_size is not None else rows * row_size)
            self._adopt(storage)
            self._rows = rows
        else:
            if max_size is None:
                raise ValueError("max_size is required when no storage is given.")
            super().__init__(max_size)

    # -- allocation ---------------------------------------------------------------------
    def _allocate(self, template: TensorDictBase, rows: int) -> TensorDictBase:
        """A TensorDict of ``rows`` rows shaped like ``template`` (one row)."""
        raise RuntimeError(f"{type(self).__name__} holds a fixed storage: it cannot grow.")

    def _adopt(self, data) -> None:
        self._is_tensor = isinstance(data, torch.Tensor)
        if self._is_tensor:
            data = TensorDict({_TENSOR_KEY: data}, batch_size=data.shape[: self.ndim])
        self._data = data
        self._rows_cap = data.shape[0]
        self._row_size = math.prod(data.shape[1 : self.ndim])
        self._item_batch = data.batch_size[self.ndim :]  # a sample is [B, *item_batch]

        def plain(tensor):  # MemoryMappedTensor -> plain tensor view: a faster gather
            return tensor.as_subclass(torch.Tensor) if type(tensor) is not torch.Tensor else tensor

        self._leaves = {key: plain(value) for key, value in data.items(True, True)}
        self._flat = {
            key: value.flatten(0, self.ndim - 1) if self.ndim > 1 else value
            for key, value in self._leaves.items()
        }
        self._tree = self._gather_tree(data, ())
        first = next(iter(self._leaves.values()), None)
        self._leaf_device = first.device if first is not None else torch.device("cpu")
        self._needs_move = self.device is not None and self.device != self._leaf_device

    @property
    def _storage(self):
        """The stored TensorDict (or tensor), under TorchRL's name (``["a"].filename``)."""
        if self._data is None:
            return None
        return self._data.get(_TENSOR_KEY) if self._is_tensor else self._data

    def _gather_tree(self, node: TensorDictBase, prefix: tuple) -> list:
        tree = []
        for key, value in node.items():
            full = (*prefix, key)
            if isinstance(value, TensorDictBase):
                tail = value.batch_size[self.ndim :]
                tree.append((key, (self._gather_tree(value, full), tail)))
            elif isinstance(value, torch.Tensor):
                tree.append((key, self._flat[full if len(full) > 1 else key]))
            else:
                raise TypeError(f"entry {full} is a {type(value).__name__}: storages hold tensors.")
        return tree

    def _init_from(self, data, batched: bool) -> None:
        if isinstance(data, torch.Tensor):
            item = data[0] if batched else data
            template = TensorDict({_TENSOR_KEY: item}, batch_size=item.shape[: self.ndim - 1])
        elif isinstance(data, TensorDictBase):
            if batched and data.batch_dims == 0:
                raise ValueError("extend needs data with a batch dimension; use add for one item.")
            template = data[0] if batched else data
            for key, value in template.items(True, True):
                if not isinstance(value, torch.Tensor):
                    raise TypeError(f"entry {key!r} is a {type(value).__name__}: store tensors.")
        else:
            raise TypeError(
                f"{type(self).__name__} stores TensorDicts or tensors, got {type(data).__name__}; "
                "use ListStorage for other objects."
            )
        rows = self._rows_for(template)
        allocated = self._allocate(template, rows)
        self._adopt(allocated if not isinstance(data, torch.Tensor) else allocated[_TENSOR_KEY])

    def _rows_for(self, template) -> int:
        if template.batch_dims < self.ndim - 1:
            raise ValueError(
                f"a storage with ndim={self.ndim} needs items with at least {self.ndim - 1} "
                f"batch dimensions beyond the first, got batch size {list(template.batch_size)}."
            )
        row_size = math.prod(template.batch_size[: self.ndim - 1])
        # a row longer than max_size still gets one row, as TorchRL allocates it
        return max(1, self.max_size // row_size)

    # -- contract -----------------------------------------------------------------------
    def __len__(self) -> int:
        return self._rows * self._row_size if self._data is not None else 0

    @property
    def initialized(self) -> bool:
        return self._data is not None

    def rows_capacity(self, data, batched: bool = True) -> int:
        if self._data is not None:
            return self._rows_cap
        if isinstance(data, torch.Tensor):
            return max(
                1,
                self.max_size // math.prod(data.shape[int(batched) : int(batched) + self.ndim - 1]),
            )
        if not isinstance(data, TensorDictBase):
            raise TypeError(
                f"{type(self).__name__} stores TensorDicts or tensors, got {type(data).__name__}; "
                "use ListStorage for other objects."
            )
        if batched and data.batch_dims == 0:
            raise ValueError("extend needs data with a batch dimension; use add for one item.")
        return self._rows_for(data[0] if batched else data)

    def flat_index(self, rows: torch.Tensor) -> torch.Tensor:
        if self.ndim == 1:
            return rows
        row_shape = self._data.shape[1 : self.ndim]
        flat = rows.unsqueeze(-1) * self._row_size + torch.arange(self._row_size)  # [n, R]
        return flat.reshape(*rows.shape, *row_shape)

    def _check(self, data, batched: bool) -> list:
        """Validate ``data`` against the stored entries; return its leaves in storage order."""
        offset = int(batched)
        if self._is_tensor:
            if not isinstance(data, torch.Tensor):
                raise TypeError(f"this storage holds tensors, got {type(data).__name__}.")
            self._check_leaf("the data", data, self._leaves[_TENSOR_KEY], offset)
            return [data]
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"this storage holds TensorDicts, got {type(data).__name__}.")
        if batched and data.batch_dims == 0:
            raise ValueError("extend needs data with a batch dimension; use add for one item.")
        expected = self._data.batch_size[1:]
        if data.batch_size[offset:] != expected:
            raise ValueError(
                f"items have batch size {list(data.batch_size[offset:])} but the storage holds "
                f"items of batch size {list(expected)}."
            )
        values = []
        for key, leaf in self._leaves.items():
            value = data.get(key, None)
            if value is None or isinstance(value, TensorDictBase):
                present = list(data.keys(True, True))
                raise KeyError(
                    f"the data lacks an entry the storage holds. {missing_key_message(key, present)}"
                )
            self._check_leaf(repr(key), value, leaf, offset)
            values.append(value)
        keys = list(data.keys(True, True))
        if len(keys) != len(self._leaves):
            extra = [k for k in keys if k not in self._leaves]
            key = extra[0]
            hint = did_you_mean(key, list(self._leaves))
            raise KeyError(
                f"entry {key!r} is not held by the storage, which holds {list(self._leaves)}.{hint} "
                "Remove it (data.exclude(...)) or start a new buffer."
            )
        return values

    @staticmethod
    def _check_leaf(name: str, value, leaf: torch.Tensor, offset: int) -> None:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"entry {name} is a {type(value).__name__}, expected a tensor.")
        if value.shape[offset:] != leaf.shape[1:]:
            raise ValueError(
                f"entry {name} has item shape {list(value.shape[offset:])} but the storage holds "
                f"item shape {list(leaf.shape[1:])}."
            )
        if value.dtype != leaf.dtype:
            raise ValueError(
                f"entry {name} has dtype {value.dtype} but the storage holds {leaf.dtype}; "
                "cast it before writing."
            )

    def set(self, index, data) -> None:
        batched = not isinstance(index, int)
        runs, positions, stop = self._plan(index, self.rows_capacity(data, batched))
        fresh = self._data is None
        if fresh:
            self._init_from(data, batched)
        try:
            values = self._check(data, batched)
            if batched and values and values[0].shape[0] != positions.numel():
                raise ValueError(
                    f"got {values[0].shape[0]} rows for {positions.numel()} positions."
                )
        except Exception:
            if fresh:
                self._data = None
            raise
        for leaf, value in zip(self._leaves.values(), values):
            if not batched:
                leaf[index].copy_(value)
            elif runs is not None:
                for start, source, length in runs:
                    leaf[start : start + length].copy_(value[source : source + length])
            else:
                leaf.index_copy_(0, positions.to(leaf.device), value.to(leaf.device))
        if positions.numel():
            self._rows = max(self._rows, stop)
            self._write_end = ((int(positions[-1]) + 1) % self._rows_cap) * self._row_size
        self._version += 1

    @staticmethod
    def _plan(index, capacity: int):
        """The positions of a write, one past the largest, and contiguous runs if few."""
        if isinstance(index, int):
            if not 0 <= index < capacity:
                raise IndexError(f"position {index} is outside [0, {capacity}).")
            return None, torch.tensor([index]), index + 1
        if isinstance(index, slice):
            start, stop = index.start or 0, index.stop
            if not 0 <= start <= stop <= capacity:
                raise IndexError(f"positions [{start}, {stop}) are outside [0, {capacity}).")
            return [(start, 0, stop - start)], torch.arange(start, stop), stop
        positions = _positions(index)
        if positions.numel() == 0:
            return [], positions, 0
        low, high = int(positions.min()), int(positions.max())
        if low < 0 or high >= capacity:
            raise IndexError(f"positions in [{low}, {high}] are outside [0, {capacity}).")
        if positions.numel() < 64:
            return None, positions, high + 1
        breaks = (positions.diff() != 1).nonzero().squeeze(1)
        if breaks.numel() > 8:
            return None, positions, high + 1
        starts = [0, *(breaks + 1).tolist()]
        ends = [*(breaks + 1).tolist(), positions.numel()]
        runs = [(int(positions[s]), s, e - s) for s, e in zip(starts, ends)]
        return runs, positions, high + 1

    def get(self, index):
        if self._data is None or self._rows == 0:
            raise RuntimeError("the storage is empty: write items before reading them.")
        if isinstance(index, int):
            n = len(self) if self.ndim == 1 else self._rows
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of range for a storage of {n} items.")
            if self.ndim > 1:  # one row of items
                return self.get(self.flat_index(torch.tensor([index % n])))[0]
            return self.get(torch.tensor([index % n]))[0]
        if isinstance(index, slice):  # storage[:n]: the items at those positions, as TorchRL
            rows = torch.arange(len(self) if self.ndim == 1 else self._rows)[index]
            return self.get(rows if self.ndim == 1 else self.flat_index(rows))
        if not isinstance(index, torch.Tensor):
            index = torch.as_tensor(index, dtype=torch.long)
        if index.ndim != 1:
            out = self.get(index.reshape(-1))
            return out.reshape(*index.shape, *out.shape[1:])
        if index.device != self._leaf_device:
            index = index.to(self._leaf_device)
        if self._is_tensor:
            out = self._flat[_TENSOR_KEY].index_select(0, index)
        else:
            batch_size = torch.Size([index.shape[0], *self._item_batch])
            out = _gather(self._tree, index, batch_size, self._data.device)
        return out.to(self.device) if self._needs_move else out

    def column(self, key) -> torch.Tensor:
        """The stored entry ``key`` for every item, flat: ``[len(self), *item shape]``."""
        if self._data is None:
            raise RuntimeError("the storage is empty.")
        if key not in self._flat:
            raise KeyError(missing_key_message(key, list(self._flat)))
        return self._flat[key][: len(self)]

    def empty(self) -> None:
        self._rows = 0
        self._write_end = 0
        self._version += 1

    # -- persistence --------------------------------------------------------------------
    def _plain_rows(self) -> TensorDictBase:
        """The written rows as a TensorDict of plain tensors (views, not copies)."""
        out = TensorDict({}, batch_size=[self._rows, *self._data.batch_size[1:]])
        for key, leaf in self._leaves.items():
            out.set(key, leaf[: self._rows])
        return out

    def state_dict(self) -> dict:
        """The stored rows (views of the live data: clone them to keep a snapshot)."""
        if self._data is None:
            return {"rows": 0, "data": None, "is_tensor": False}
        return {"rows": self._rows, "data": self._plain_rows(), "is_tensor": self._is_tensor}

    def load_state_dict(self, state_dict: dict) -> None:
        data = state_dict["data"]
        if data is None or int(state_dict["rows"]) == 0:
            self.empty()
            return
        if state_dict.get("is_tensor"):
            data = data[_TENSOR_KEY] if isinstance(data, TensorDictBase) else data
        self._load_rows(data, int(state_dict["rows"]))

    def _load_rows(self, data, rows: int) -> None:
        """Replace the contents with the first ``rows`` rows of ``data``; validate first."""
        data = data[:rows]
        capacity = self.rows_capacity(data, batched=True)
        if rows > capacity:
            raise ValueError(f"cannot load {rows} rows into a storage of {capacity} rows.")
        fresh = self._data is None
        if fresh:
            self._init_from(data, batched=True)
        try:
            values = self._check(data, batched=True)
        except Exception:
            if fresh:
                self._data = None
            raise
        for leaf, value in zip(self._leaves.values(), values):
            leaf[:rows].copy_(value)
        self._rows = rows
        self._write_end = (rows % self._rows_cap) * self._row_size
        self._version += 1

    def dumps(self, path) -> None:
        def write(folder: Path) -> None:
            leaves = []
            if self._data is not None and self._rows:
                self._plain_rows().memmap(prefix=folder / "data", existsok=True)
                for key, leaf in self._leaves.items():
                    rows = leaf[: self._rows]
                    file = Path("data", *_key_parts(key)).with_suffix(".memmap")
                    leaves.append(
                        {
                            "key": list(_key_parts(key)),
                            "file": file.as_posix(),
                            "shape": list(rows.shape),
                            "dtype": str(rows.dtype).removeprefix("torch."),
                        }
                    )
                    _fsync_file(folder / file)
            meta = {
                "class": type(self).__name__,
                "rows": self._rows if self._data is not None else 0,
                "is_tensor": self._is_tensor,
                "max_size": self.max_size,
                "ndim": self.ndim,
                "leaves": leaves,
            }
            _write_meta(folder, meta)

        _write_dump(path, write)

    def loads(self, path) -> None:
        folder, meta = _read_meta(path)
        meta_file = folder / "meta.json"
        try:
            rows, ndim, leaves = int(meta["rows"]), int(meta["ndim"]), list(meta["leaves"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"{meta_file} is corrupt or from an older version: no valid {err} entry."
            ) from err
        if ndim != self.ndim:
            raise ValueError(f"the dump has ndim={ndim}, this storage ndim={self.ndim}.")
        if not rows:
            self.empty()
            return
        _check_data_files(folder, leaves, rows)
        try:
            data = TensorDict.load_memmap(folder / "data")
        except Exception as err:
            raise ValueError(
                f"the memory-mapped data in {folder / 'data'} is corrupt "
                f"({type(err).__name__}: {err}); its meta.json files do not describe it."
            ) from err
        for leaf in leaves:
            value = data.get(tuple(leaf["key"]), None)
            expected = (list(leaf["shape"]), leaf["dtype"])
            got = None if value is None else (list(value.shape), str(value.dtype)[6:])
            if got != expected:
                raise ValueError(
                    f"{folder / leaf['file']}: {folder / 'data'}'s meta.json files describe it "
                    f"as {got} (shape, dtype), {meta_file} as {expected}: the dump is corrupt."
                )
        self._load_rows(data[_TENSOR_KEY] if meta.get("is_tensor") else data, rows)


def _key_parts(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _gather(tree: list, index: torch.Tensor, batch_size: torch.Size, device) -> TensorDict:
    """Build a TensorDict of the rows ``index`` of every leaf in ``tree``, with no checks."""
    source = {}
    for key, node in tree:
        if type(node) is tuple:
            sub_tree, tail = node
            sub_size = torch.Size([batch_size[0], *tail]) if tail else batch_size[:1]
            source[key] = _gather(sub_tree, index, sub_size, device)
        else:
            source[key] = node.index_select(0, index)
    return _td.new(source, batch_size, device)


class LazyTensorStorage(TensorStorage):
    """A storage of preallocated tensors, allocated from the first item written.

    Nested keys are kept; every later write must have the same entries, shapes and dtypes.

    Args:
        max_size: the number of items held at most.
        device: where the tensors live (and sampled items are returned).
        ndim: leading dimensions that index items: 2 stores ``[envs, time]`` batches as
            rows of ``time`` items (``max_size // time`` rows).

    Example:
        >>> storage = LazyTensorStorage(100)
        >>> data = TensorDict({"obs": torch.zeros(10, 3), ("next", "obs"): torch.ones(10, 3)}, [10])
        >>> storage.set(torch.arange(10), data)
        >>> len(storage), storage.get(torch.tensor([1, 2]))["next", "obs"].shape
        (10, torch.Size([2, 3]))
    """

    def __init__(
        self, max_size: int, device="cpu", ndim: int = 1, compilable: bool = False
    ) -> None:
        super().__init__(None, max_size=max_size, device=device, ndim=ndim, compilable=compilable)

    def _allocate(self, template: TensorDictBase, rows: int) -> TensorDictBase:
        device = self.device if self.device is not None else template.device

        def empty(node: TensorDictBase) -> TensorDict:
            source = {}
            for key, value in node.items():
                if isinstance(value, TensorDictBase):
                    source[key] = empty(value)
                else:
                    source[key] = torch.empty(
                        (rows, *value.shape), dtype=value.dtype, device=device
                    )
            return TensorDict(source, batch_size=[rows, *node.batch_size], device=device)

        return empty(template)


class LazyMemmapStorage(TensorStorage):
    """A storage of memory-mapped files, allocated from the first item written.

    The files live in a fresh folder under ``scratch_dir`` (removed when the storage is
    garbage collected); use :meth:`dumps` to keep the contents.

    Args:
        max_size: the number of items held at most.
        scratch_dir: the folder under which the memory-mapped files are created
            (default: the system temporary folder), or a ``tempfile.TemporaryDirectory``
            (its folder is used, and kept alive as long as the storage).
        device: where sampled items are returned (the files are always on the CPU).
        ndim: leading dimensions that index items (see :class:`LazyTensorStorage`).
        compilable: TorchRL's ``torch.compile`` flag (see :class:`TensorStorage`).
        shared_init: TorchRL allocates such a storage in shared memory for collector
            workers that write into it; here the files are shared by nature and the
            collectors write from this process, so the flag is only kept.

    Example:
        >>> storage = LazyMemmapStorage(1000)
        >>> storage.set(torch.arange(4), TensorDict(obs=torch.ones(4, 2), batch_size=[4]))
        >>> storage.get(torch.tensor([3]))["obs"]
        tensor([[1., 1.]])
    """

    def __init__(
        self,
        max_size: int,
        scratch_dir=None,
        device="cpu",
        ndim: int = 1,
        compilable: bool = False,
        shared_init: bool = False,
    ) -> None:
        super().__init__(None, max_size=max_size, device=device, ndim=ndim, compilable=compilable)
        self.shared_init = bool(shared_init)
        self._scratch_owner = None
        if isinstance(scratch_dir, tempfile.TemporaryDirectory):
            self._scratch_owner, scratch_dir = scratch_dir, scratch_dir.name
        if (
            scratch_dir is not None
            and Path(scratch_dir).exists()
            and not Path(scratch_dir).is_dir()
        ):
            raise ValueError(
                f"LazyMemmapStorage: scratch_dir={str(scratch_dir)!r} is a file, not a folder; "
                "pass a folder (it is created if missing) or None for the system temp folder."
            )
        self.scratch_dir = scratch_dir
        self._folder: Path | None = None

    def _allocate(self, template: TensorDictBase, rows: int) -> TensorDictBase:
        if self.scratch_dir is not None:
            Path(self.scratch_dir).mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="torchrl_lite_memmap_", dir=self.scratch_dir))
        weakref.finalize(self, shutil.rmtree, str(folder), True)
        self._folder = folder

        def empty(node: TensorDictBase, path: Path) -> TensorDict:
            source = {}
            for i, (key, value) in enumerate(node.items()):
                # "a.memmap", "b/c.memmap"; a key unfit for a file name: "_<i>" (no clash)
                name = key if _FILE_NAME.fullmatch(key) else f"_{i}"
                if isinstance(value, TensorDictBase):
                    source[key] = empty(value, path / name)
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    source[key] = MemoryMappedTensor.empty(
                        (rows, *value.shape), dtype=value.dtype, filename=path / f"{name}.memmap"
                    )
            return TensorDict(source, batch_size=[rows, *node.batch_size], device="cpu")

        return empty(template.cpu(), folder)
