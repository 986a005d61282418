"""Replay buffers: a storage, a sampler and a writer behind one object.

``extend``/``add`` go through the writer into the storage and tell the sampler which
positions changed; ``sample`` asks the sampler for positions, reads them from the storage,
then applies ``collate_fn``, ``pin_memory`` and ``transform``. One lock serialises writes,
samples and priority updates, so a thread may extend while another samples; with
``prefetch=N`` a background thread keeps ``N`` samples ready.

Iterating a buffer (``for batch in buffer``) yields ``batch_size`` samples until the
sampler's epoch is used up: one pass for :class:`SamplerWithoutReplacement`, forever for
:class:`RandomSampler` and :class:`PrioritizedSampler` (as in TorchRL).
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import torch
from tensordict import TensorDictBase

from torchrl_lite import _td
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.replay_buffers._dumps import BufferDumps
from torchrl_lite.data.replay_buffers._items import ItemCodec
from torchrl_lite.data.replay_buffers._sampler_base import (
    PrioritizedSampler,
    RandomSampler,
    check_batch_size,
    reduce_priority,
)
from torchrl_lite.data.replay_buffers._storage_base import ListStorage, identity_collate
from torchrl_lite.data.replay_buffers.tensor_storage import TensorStorage
from torchrl_lite.data.replay_buffers.writers import (
    RoundRobinWriter,
    TensorDictRoundRobinWriter,
    _num_rows,
)

__all__ = [
    "ReplayBuffer",
    "PrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
]

_MANAGED_KEYS = ("index", "_weight")  # written into samples by the buffer, never stored


class _Chain:
    """Applies callables one after the other (what ``append_transform`` builds)."""

    def __init__(self, *transforms) -> None:
        self.transforms = list(transforms)

    def __call__(self, data):
        for transform in self.transforms:
            data = transform(data)
        return data


class ReplayBuffer(BufferDumps):
    """A replay buffer made of a storage, a sampler and a writer.

    Args:
        storage: where items live (default ``ListStorage(1000)``).
        sampler: which items ``sample`` returns (default :class:`RandomSampler`).
        writer: where new items go (default :class:`RoundRobinWriter`).
        collate_fn: turns what the storage returns into a batch (default: stack the
            items of a ``ListStorage``, identity for tensor storages).
        pin_memory: pin sampled tensors in page-locked memory; a no-op without CUDA.
        prefetch: number of samples a background thread keeps ready (``None``: none).
            Prefetched samples may predate the latest ``extend``. Samplers with epochs
            (without replacement) are always sampled on demand, so epochs stay exact.
        transform: a callable applied to every sample (e.g. a TensorDict transform).
        batch_size: the default batch size of ``sample`` and of iteration.
        compilable: TorchRL's flag for use under ``torch.compile``; accepted and recorded.
        shared: TorchRL's flag for a buffer that collector processes write into; accepted
            and recorded: collectors here extend their buffer from this process (a
            background thread for ``collector.start()``).

    Example:
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> buffer = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        >>> buffer.extend(torch.arange(10.0)).shape
        torch.Size([10])
        >>> len(buffer), buffer.sample().shape
        (10, torch.Size([4]))
    """

    def __init__(
        self,
        *,
        storage=None,
        sampler=None,
        writer=None,
        collate_fn=None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform=None,
        batch_size: int | None = None,
        compilable: bool = False,
        shared: bool = False,
    ) -> None:
        self.compilable = bool(compilable)  # TorchRL's torch.compile flag (see TensorStorage)
        self.shared = bool(shared)
        for name, part, example in (
            ("storage", storage, "LazyTensorStorage(1000)"),
            ("sampler", sampler, "RandomSampler()"),
            ("writer", writer, "RoundRobinWriter()"),
        ):
            if isinstance(part, type):
                raise TypeError(
                    f"{type(self).__name__}: {name} must be an instance, got the class "
                    f"{part.__name__}; build it, e.g. {name}={example}."
                )
        self._storage = storage if storage is not None else ListStorage(1000)
        self._sampler = sampler if sampler is not None else RandomSampler()
        self._writer = writer if writer is not None else self._default_writer()
        self._writer.register_storage(self._storage)
        default_collate = self._storage.default_collate
        self._collate_fn = collate_fn if collate_fn is not None else default_collate
        self._identity_collate = collate_fn is None and default_collate is identity_collate
        self._pin_memory = bool(pin_memory) and torch.cuda.is_available()
        if prefetch is not None and int(prefetch) < 1:
            raise ValueError(f"prefetch must be a positive integer or None, got {prefetch}.")
        self._prefetch = int(prefetch) if prefetch else 0
        self._transform = transform
        self._batch_size = check_batch_size(batch_size) if batch_size is not None else None
        if self._batch_size is not None and hasattr(self._sampler, "check_capacity"):
            self._sampler.check_capacity(self._storage.max_size, self._batch_size)
        self._lock = threading.RLock()
        self._write_count = 0  # items written since built or emptied (``write_count``)
        self._executor: ThreadPoolExecutor | None = None
        self._futures: deque = deque()
        # dicts of tensors and tensorclasses stored as TensorDicts (tensor storages only)
        self._codec = ItemCodec() if isinstance(self._storage, TensorStorage) else None

    def _default_writer(self):
        return RoundRobinWriter()

    # -- accessors -----------------------------------------------------------------------
    @property
    def storage(self):
        return self._storage

    @property
    def sampler(self):
        return self._sampler

    @property
    def writer(self):
        return self._writer

    @property
    def batch_size(self) -> int | None:
        return self._batch_size

    @property
    def write_count(self) -> int:
        """Items written by ``add``/``extend`` since the buffer was built or emptied (each
        frame of an ``ndim > 1`` row counts; overwritten items stay counted)."""
        return self._write_count

    @property
    def transform(self):
        return self._transform

    def append_transform(self, transform) -> ReplayBuffer:
        """Apply ``transform`` to samples after the current transform; returns ``self``."""
        if self._transform is None:
            self._transform = transform
        elif isinstance(self._transform, _Chain):
            self._transform.transforms.append(transform)
        else:
            self._transform = _Chain(self._transform, transform)
        return self

    def __len__(self) -> int:
        return len(self._storage)

    def __getitem__(self, index):
        """The items at storage positions ``index`` (an int, a slice such as ``rb[:]``, or
        a tensor of positions), collated and transformed as a sample is; a TensorDict for
        TensorDict storages, as in TorchRL. Sampler and writer state are not touched."""
        with self._lock:
            data = self._storage[index]
        if not isinstance(index, int) and not self._identity_collate:
            data = self._collate_fn(data)
        data = self._decode(data)
        if self._transform is not None:
            data = self._transform(data)
        return data

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(storage={type(self._storage).__name__}, "
            f"sampler={type(self._sampler).__name__}, writer={type(self._writer).__name__}, "
            f"len={len(self)}, batch_size={self._batch_size})"
        )

    # -- writing -------------------------------------------------------------------------
    def _prepare(self, data):
        return data

    def _inverse(self, data):
        """What is stored: ``transform.inv(data)``, as in TorchRL (a plain function: data)."""
        inv = getattr(self._transform, "inv", None)
        return data if inv is None else inv(data)

    def add(self, data) -> int:
        """Write one item; returns its flat storage position."""
        data = self._prepare(self._encode(self._inverse(data), batched=False))
        with self._lock:
            row = self._writer.add(data)
            index = self._storage.flat_index(torch.tensor([row]))
            self._sampler.extend(index.reshape(-1))
            self._write_count += index.numel()
        return int(index.reshape(-1)[0]) if index.numel() == 1 else index[0]

    def extend(self, data) -> torch.Tensor:
        """Write a batch of items (along the first dimension).

        The data are checked against what the storage holds (entries, shapes, dtypes)
        before anything is written: a bad batch raises and leaves the buffer unchanged.

        Returns:
            the flat storage position of every item, ``[n]`` (``[n, *row]`` for an
            ``ndim > 1`` storage); ``-1`` for items the writer did not keep. A batch of
            no items writes nothing and returns an empty index.
        """
        if _num_rows(data) == 0:  # e.g. a post-processor that held every step back
            return torch.empty(0, dtype=torch.long)
        data = self._prepare(self._encode(self._inverse(data), batched=True))
        with self._lock:
            return self._extend(data)[0]

    def _extend(self, data) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self._writer.extend(data)  # [n]
        kept = rows >= 0
        written = rows if bool(kept.all()) else rows[kept]
        flat = self._storage.flat_index(written)
        self._sampler.extend(flat.reshape(-1))
        self._write_count += flat.numel()
        if written is rows:
            return flat, kept
        index = torch.full((rows.numel(), *flat.shape[1:]), -1, dtype=torch.long)
        index[kept] = flat
        return index, kept

    # -- sampling ------------------------------------------------------------------------
    def _sample(self, batch_size: int) -> tuple[object, dict]:
        with self._lock:
            if len(self._storage) == 0:
                raise RuntimeError(
                    "cannot sample from an empty replay buffer: add data with extend() or "
                    "add() first."
                )
            index, info = self._sampler.sample(self._storage, batch_size)
            data = self._storage.get(index)
        if not self._identity_collate:
            data = self._collate_fn(data)
        data = self._postprocess(data, index, info)
        if self._pin_memory:
            data = data.pin_memory()
        data = self._decode(data)
        if self._transform is not None:
            data = self._transform(data)
        info["index"] = index
        return data, info

    def _postprocess(self, data, index: torch.Tensor, info: dict):
        return data

    def _encode(self, data, batched: bool):
        return data if self._codec is None else self._codec.encode(data, batched)

    def _decode(self, data):
        return data if self._codec is None else self._codec.decode(data)

    def sample(self, batch_size: int | None = None, return_info: bool = False):
        """Draw a batch; with ``return_info=True``, return ``(batch, info)``.

        ``info`` holds ``"index"`` (flat storage positions) and sampler extras such as
        ``"_weight"``.

        Args:
            batch_size: items to draw (default: the buffer's ``batch_size``).
            return_info: also return the info dict.
        """
        if batch_size is None or batch_size == self._batch_size:
            if self._batch_size is None:
                raise ValueError(
                    "no batch_size: pass sample(batch_size=...) or build the buffer with "
                    "batch_size=..."
                )
            batch_size = self._batch_size
            if self._prefetch and not getattr(self._sampler, "has_epochs", False):
                data, info = self._next_prefetched(batch_size)
            else:
                data, info = self._sample(batch_size)
        else:
            data, info = self._sample(check_batch_size(batch_size))
        return (data, info) if return_info else data

    def _next_prefetched(self, batch_size: int):
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="replay-buffer-prefetch")
        while len(self._futures) < self._prefetch:
            self._futures.append(self._executor.submit(self._sample, batch_size))
        future = self._futures.popleft()
        try:
            return future.result()
        except BaseException:
            self._clear_prefetch()
            raise

    def _clear_prefetch(self) -> None:
        while self._futures:
            self._futures.popleft().cancel()

    def __iter__(self):
        if self._batch_size is None:
            raise RuntimeError("cannot iterate a replay buffer built without batch_size.")
        sampler = self._sampler
        if not getattr(sampler, "has_epochs", False):  # no epochs: iterate forever
            while True:
                yield self.sample()
        sampler.ran_out = False
        while True:
            data, _ = self._sample(self._batch_size)
            yield data
            if sampler.ran_out:
                return

    def update_priority(self, index, priority) -> None:
        """Set the priority of the items at flat positions ``index`` (prioritized samplers).

        As in TorchRL, ``-1`` (an item the writer did not keep, see :meth:`extend`) is
        skipped, and a position inside the storage's capacity that holds no item yet is
        accepted with a warning and ignored (its item gets the default priority when
        written); a position beyond the capacity raises ``IndexError``.

        Args:
            index: flat positions (an int or a tensor), as returned in ``"index"`` by
                ``sample``.
            priority: one value per position (or one for all, or several per position,
                reduced by the sampler).
        """
        index = torch.as_tensor(index).reshape(-1).to(device="cpu", dtype=torch.long)
        priority = torch.as_tensor(priority)
        positions = index.numpy()
        with self._lock:
            size, capacity = len(self._storage), self._storage.max_size
            if positions.size and (positions.min() < -1 or positions.max() >= capacity):
                raise IndexError(
                    f"priority index out of range: positions must be in [0, {capacity}) (the "
                    f"storage's max_size; -1 is skipped), got [{positions.min()}, "
                    f"{positions.max()}]."
                )
            keep = (index >= 0) & (index < size)  # [n]
            if not bool(keep.all()):
                empty = index[index >= size]
                if empty.numel():
                    warnings.warn(
                        f"update_priority: positions {empty.tolist()[:5]} hold no item yet (the "
                        f"buffer holds {size}); their priorities are ignored.",
                        stacklevel=2,
                    )
                if priority.numel() > 1 and priority.numel() % index.numel() == 0:
                    priority = priority.reshape(index.numel(), -1)[keep]
                index = index[keep]
            self._sampler.update_priority(index, priority)

    def empty(self) -> None:
        """Remove every item and reset the writer and the sampler."""
        with self._lock:
            self._clear_prefetch()
            self._storage.empty()
            self._writer.empty()
            self._sampler.empty()
            self._write_count = 0
            if self._codec is not None:
                self._codec.reset()

    # -- persistence ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "storage": self._storage.state_dict(),
            "sampler": self._sampler.state_dict(),
            "writer": self._writer.state_dict(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        with self._lock:
            self._clear_prefetch()
            self._storage.load_state_dict(state_dict["storage"])
            self._sampler.load_state_dict(state_dict["sampler"])
            self._writer.load_state_dict(state_dict["writer"])


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` with a :class:`PrioritizedSampler`.

    ``sample(..., return_info=True)`` returns ``info["_weight"]`` (importance weights) and
    ``info["index"]``; feed new priorities back with :meth:`update_priority`.

    Args:
        alpha: priority exponent.
        beta: importance-sampling exponent.
        eps: added to every priority.
        dtype: dtype of the weights.
        storage: see :class:`ReplayBuffer` (its ``max_size`` sizes the priority tree).
        **kwargs: ``collate_fn``, ``pin_memory``, ``prefetch``, ``transform``,
            ``batch_size``, ``writer`` as in :class:`ReplayBuffer`.

    Example:
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> buffer = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10))
        >>> _ = buffer.extend(torch.arange(4.0))
        >>> data, info = buffer.sample(8, return_info=True)
        >>> buffer.update_priority(info["index"], torch.rand(8))
        >>> sorted(info)
        ['_weight', 'index']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        storage=None,
        **kwargs,
    ) -> None:
        storage = storage if storage is not None else ListStorage(1000)
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps, dtype)
        super().__init__(storage=storage, sampler=sampler, **kwargs)


class TensorDictReplayBuffer(ReplayBuffer):
    """A replay buffer of TensorDicts: samples carry their ``"index"`` (and sampler extras).

    The keys ``"index"`` and ``"_weight"`` are written by the buffer: they are left out
    when a TensorDict is stored, so a sample can be extended back into a buffer.

    Args:
        priority_key: the entry :meth:`update_tensordict_priority` reads.
        **kwargs: ``storage``, ``sampler``, ``writer`` (default
            :class:`TensorDictRoundRobinWriter`), ``collate_fn``, ``pin_memory``,
            ``prefetch``, ``transform``, ``batch_size`` as in :class:`ReplayBuffer`.

    Example:
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> from torchrl_lite.data.replay_buffers import SamplerWithoutReplacement
        >>> buffer = TensorDictReplayBuffer(
        ...     storage=LazyTensorStorage(1000), sampler=SamplerWithoutReplacement(), batch_size=50
        ... )
        >>> _ = buffer.extend(TensorDict(obs=torch.randn(200, 3), batch_size=[200]))
        >>> sum(batch.shape[0] for batch in buffer), sorted(buffer.sample().keys())
        (200, ['index', 'obs'])
    """

    def __init__(self, *, priority_key="td_error", **kwargs) -> None:
        self.priority_key = priority_key
        super().__init__(**kwargs)

    def _default_writer(self):
        return TensorDictRoundRobinWriter()

    def _prepare(self, data):
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{type(self).__name__} stores TensorDicts, got {type(data).__name__}.")
        keys = data.keys()
        if any(key in keys for key in _MANAGED_KEYS):
            data = data.exclude(*_MANAGED_KEYS)
        return data

    def _postprocess(self, data, index: torch.Tensor, info: dict):
        size, device = data.batch_size, data.device
        store = _td.store(data)
        for key, value in (("index", index), *info.items()):
            if device is not None and value.device != device:
                value = value.to(device, non_blocking=True)
            if value.shape[: len(size)] != size:  # per-item value: repeat over item dims
                extra = len(size) - value.dim()
                value = value.reshape(*value.shape[:1], *[1] * extra).expand(size)
            if store is not None and type(key) is str:
                store[key] = value
            else:
                data.set(key, value)
        return data

    def _reads_priorities(self, data) -> bool:
        return isinstance(self._sampler, PrioritizedSampler) and (
            data.get(self.priority_key, None) is not None
        )

    def add(self, data) -> int:
        if isinstance(data, TensorDictBase) and self._reads_priorities(data):
            return self.extend(data.unsqueeze(0)).reshape(-1)[0].item()
        return super().add(data)

    def extend(self, data) -> torch.Tensor:
        """Write a batch of TensorDicts; see :meth:`ReplayBuffer.extend`.

        With a prioritized sampler, ``data[priority_key]`` (when present) gives the new
        items' priorities; they are checked before anything is written.

        Args:
            data: a TensorDict whose first dimension indexes items.
        """
        if _num_rows(data) == 0:  # e.g. a post-processor that held every step back
            return torch.empty(0, dtype=torch.long)
        data = self._prepare(self._inverse(data))
        if not self._reads_priorities(data):
            with self._lock:
                return self._extend(data)[0]
        count = data.batch_size[: getattr(self._storage, "ndim", 1)].numel()  # items
        priority = data.get(self.priority_key).detach().cpu()
        priority = reduce_priority(priority, count, self._sampler.reduction)
        bad = ~torch.isfinite(priority) | (priority < 0)
        if bad.any():  # checked before writing, so the buffer stays unchanged
            raise ValueError(
                f"entry {self.priority_key!r} must hold finite, non-negative priorities; got "
                f"{priority[bad][:5].tolist()}."
            )
        with self._lock:
            index = self._extend(data)[0]
            flat = index.reshape(-1)  # [count], -1 where the writer dropped the item
            kept = flat >= 0
            self._sampler.update_priority(flat[kept], priority[kept])
        return index

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Update priorities from ``data[priority_key]`` at ``data["index"]`` (a sample).

        Args:
            data: a sampled TensorDict with ``"index"`` and the priority entry.
        """
        if "index" not in data.keys():
            raise KeyError(missing_key_message("index", list(data.keys(True, True))))
        if data.get(self.priority_key, None) is None:
            raise KeyError(
                f"update_tensordict_priority reads the priorities from {self.priority_key!r}: "
                "run the loss on this sample first (it writes the TD error there), or build "
                "the buffer with priority_key=<your key>. "
                + missing_key_message(self.priority_key, list(data.keys(True, True)))
            )
        count = data.batch_size[0] if data.batch_dims else 1
        index = data.get("index").reshape(count, -1)[:, 0]  # one position per item
        self.update_priority(index, data.get(self.priority_key).reshape(count, -1))


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """A prioritized replay buffer of TensorDicts: samples carry ``"index"`` and ``"_weight"``.

    When an extended TensorDict holds ``priority_key``, those values become the new items'
    priorities (checked before anything is written), as with any
    :class:`TensorDictReplayBuffer` whose sampler is prioritized.

    Args:
        alpha: priority exponent.
        beta: importance-sampling exponent.
        priority_key: the entry holding priorities (default ``"td_error"``).
        eps: added to every priority.
        reduction: how several priority values of one item are reduced.
        storage: see :class:`ReplayBuffer` (its ``max_size`` sizes the priority tree).
        **kwargs: ``collate_fn``, ``pin_memory``, ``prefetch``, ``transform``,
            ``batch_size``, ``writer`` as in :class:`ReplayBuffer`.

    Example:
        >>> from torchrl_lite.data.replay_buffers import LazyMemmapStorage
        >>> buffer = TensorDictPrioritizedReplayBuffer(
        ...     alpha=0.7, beta=0.5, collate_fn=lambda x: x, pin_memory=False, prefetch=10,
        ...     storage=LazyMemmapStorage(1000), batch_size=32,
        ... )
        >>> _ = buffer.extend(TensorDict(obs=torch.randn(100, 3), batch_size=[100]))
        >>> sample = buffer.sample()
        >>> sample["td_error"] = torch.rand(32)
        >>> buffer.update_tensordict_priority(sample)
        >>> sorted(sample.keys())
        ['_weight', 'index', 'obs', 'td_error']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key="td_error",
        eps: float = 1e-8,
        reduction: str = "max",
        storage=None,
        **kwargs,
    ) -> None:
        storage = storage if storage is not None else ListStorage(1000)
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps, reduction=reduction)
        super().__init__(priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)
