"""Samplers: which stored items a replay buffer returns.

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
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
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


def _check_slice_setting(**given) -> None:
    for name, value in given.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"SliceSampler: {name} must be an int >= 1, got {value!r}.")


class SliceSampler(Sampler):
    """Samples contiguous slices of trajectories: ``num_slices`` slices of ``slice_len`` steps.

    Give exactly one of ``num_slices`` and ``slice_len``; the other is
    ``batch_size // given``. Trajectories are told apart by ``traj_key`` (a trajectory id
    per step) or ``end_key`` (a flag on each trajectory's last step, default
    ``("next", "done")``); a slice never crosses a trajectory boundary, the write cursor
    of a full circular buffer, or a row of an ``ndim=2`` storage. Trajectories are drawn
    uniformly, then a start uniformly inside each one. The returned flat index holds the
    slices one after the other (``[num_slices * slice_len]``); ``info`` marks the last step
    of each slice in ``truncated_key`` (and ORs it into ``("next", "done")`` when stored),
    so value estimators stop at slice ends. Trajectory boundaries are computed once per
    storage change and cached.

    Args:
        num_slices: slices per batch.
        slice_len: steps per slice.
        end_key: the key of the end-of-trajectory flag.
        traj_key: the key of the trajectory id (instead of ``end_key``).
        strict_length: if ``True``, only trajectories of at least ``slice_len`` steps are
            used; if ``False``, shorter ones give shorter slices (the batch is smaller).
        truncated_key: where the slice ends are marked.
        cache_values: keep the trajectory boundaries between samples (default; they are
            recomputed whenever the storage changes, so this is safe with ``extend``);
            ``False`` recomputes them at every sample. TorchRL defaults to ``False`` and
            caches only when asked (for static datasets): the samples are the same.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(20)
        >>> episode = torch.tensor([0] * 6 + [1] * 4)
        >>> storage.set(torch.arange(10), TensorDict(episode=episode, batch_size=[10]))
        >>> index, info = SliceSampler(slice_len=3, traj_key="episode").sample(storage, 6)
        >>> episode[index].view(2, 3).unique(dim=1).shape[1]  # each slice inside one episode
        1
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key=None,
        traj_key=None,
        strict_length: bool = True,
        truncated_key=("next", "truncated"),
        cache_values: bool = True,
    ) -> None:
        if (num_slices is None) == (slice_len is None):
            raise ValueError("give exactly one of num_slices and slice_len.")
        _check_slice_setting(num_slices=num_slices, slice_len=slice_len)
        if end_key is not None and traj_key is not None:
            raise ValueError("give end_key or traj_key, not both.")
        self.num_slices = num_slices
        self.slice_len = slice_len
        self.traj_key = traj_key
        self.end_key = ("next", "done") if end_key is None and traj_key is None else end_key
        self.strict_length = strict_length
        self.truncated_key = truncated_key
        self.cache_values = bool(cache_values)
        self._cache_key = None
        self._cache = None

    def _shape(self, batch_size: int) -> tuple[int, int]:
        given = self.num_slices if self.num_slices is not None else self.slice_len
        if batch_size % given:
            raise ValueError(
                f"batch_size={batch_size} is not a multiple of "
                f"{'num_slices' if self.num_slices is not None else 'slice_len'}={given}."
            )
        other = batch_size // given
        return (given, other) if self.num_slices is not None else (other, given)

    def _trajectories(self, storage) -> tuple[torch.Tensor, torch.Tensor]:
        """``starts [K]`` and ``lengths [K]`` of the stored trajectories (cached)."""
        size = _check_not_empty(storage)
        key = (id(storage), storage._version, size)
        if self._cache_key == key and self.cache_values:
            return self._cache
        if not hasattr(storage, "column"):
            raise TypeError(
                f"{type(self).__name__} needs a tensor storage, got {type(storage).__name__}."
            )
        if storage._item_batch:
            raise ValueError(
                f"{type(self).__name__} slices single steps; the storage holds items of batch "
                f"size {list(storage._item_batch)}."
            )
        if self.traj_key is not None:
            ids = storage.column(self.traj_key).reshape(size, -1)[:, 0]
            boundary = ids[1:] != ids[:-1]  # [size - 1]: step i ends a trajectory
        else:
            boundary = storage.column(self.end_key).reshape(size, -1).any(1)[:-1].clone()
        row_size = storage._row_size
        if row_size > 1:
            boundary[row_size - 1 :: row_size] = True
        cursor = storage._write_end
        if 0 < cursor < size:
            boundary[cursor - 1] = True
        ends = torch.cat([boundary.nonzero().squeeze(1), torch.tensor([size - 1])])
        starts = torch.cat([torch.zeros(1, dtype=torch.long), ends[:-1] + 1])
        self._cache_key, self._cache = key, (starts, ends - starts + 1)
        return self._cache

    def _usable(self, lengths: torch.Tensor, slice_len: int) -> torch.Tensor:
        if not self.strict_length:
            return torch.arange(lengths.numel())
        usable = (lengths >= slice_len).nonzero().squeeze(1)
        if usable.numel() == 0:
            raise ValueError(
                f"no stored trajectory has {slice_len} steps (the longest has "
                f"{int(lengths.max())}): lower slice_len or pass strict_length=False."
            )
        return usable

    def _pick(self, usable: torch.Tensor, num_slices: int) -> torch.Tensor:
        return usable[torch.randint(usable.numel(), (num_slices,))]

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        num_slices, slice_len = self._shape(batch_size)
        starts, lengths = self._trajectories(storage)
        traj = self._pick(self._usable(lengths, slice_len), num_slices)  # [num_slices]
        length = lengths[traj].clamp(max=slice_len)  # [num_slices]
        offset = (torch.rand(traj.numel()) * (lengths[traj] - length + 1)).long()
        first = starts[traj] + offset  # [num_slices]
        if bool((length == slice_len).all()):
            index = (first.unsqueeze(1) + torch.arange(slice_len)).reshape(-1)  # [num_slices * L]
        else:
            total = int(length.sum())
            slice_start = torch.cumsum(length, 0) - length
            step = torch.arange(total) - slice_start.repeat_interleave(length, output_size=total)
            index = first.repeat_interleave(length, output_size=total) + step
        last = torch.zeros(index.numel(), dtype=torch.bool)
        last[torch.cumsum(length, 0) - 1] = True
        return index, self._slice_info(storage, index, last)

    def _slice_info(self, storage, index: torch.Tensor, last: torch.Tensor) -> dict:
        info = {}
        keys = storage._flat
        shape = keys[self.truncated_key].shape[1:] if self.truncated_key in keys else (1,)
        info[self.truncated_key] = last.view(-1, *[1] * len(shape)).expand(-1, *shape).clone()
        done_key = ("next", "done")
        if done_key in keys and done_key != self.truncated_key:
            done = keys[done_key].index_select(0, index)
            info[done_key] = done | last.view(-1, *[1] * (done.dim() - 1))
        return info

    def empty(self) -> None:
        self._cache_key = self._cache = None


class SliceSamplerWithoutReplacement(SliceSampler):
    """A :class:`SliceSampler` that uses each trajectory at most once per epoch.

    ``ran_out`` is set after the batch that uses the epoch's last trajectories; the epoch
    restarts when the stored data change.

    Args:
        num_slices: slices per batch.
        slice_len: steps per slice.
        drop_last: if ``True``, an epoch ends before a batch with fewer slices.
        shuffle: if ``False``, trajectories come in storage order.
        **kwargs: the other arguments of :class:`SliceSampler`.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(20)
        >>> episode = torch.arange(4).repeat_interleave(3)
        >>> storage.set(torch.arange(12), TensorDict(episode=episode, batch_size=[12]))
        >>> sampler = SliceSamplerWithoutReplacement(slice_len=3, traj_key="episode")
        >>> a, _ = sampler.sample(storage, 6)
        >>> b, _ = sampler.sample(storage, 6)
        >>> sorted(episode[torch.cat([a, b])].unique().tolist()), sampler.ran_out
        ([0, 1, 2, 3], True)
    """

    has_epochs = True

    def __init__(self, *, drop_last: bool = False, shuffle: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._capacity_warned = False
        self._perm = None
        self._pos = 0
        self._epoch_key = None
        self.ran_out = False

    def check_capacity(self, capacity: int, batch_size: int) -> None:
        """Raise (``drop_last=True``) or warn once when a storage of ``capacity`` items can
        never hold ``num_slices`` trajectories for one full batch of ``batch_size``."""
        given = self.num_slices if self.num_slices is not None else self.slice_len
        if batch_size % given:
            return  # sample raises naming the mismatch
        num_slices, slice_len = self._shape(batch_size)
        most = capacity // slice_len if self.strict_length else capacity
        if num_slices > most:
            _never_full(
                self,
                f"SliceSamplerWithoutReplacement: batch_size={batch_size} needs {num_slices} "
                f"trajectories of slice_len={slice_len} steps, but the storage capacity "
                f"max_size={capacity} holds at most {most} of them, so no full batch can ever "
                "be drawn without replacement",
                capacity,
                batch_size,
                f"Lower batch_size (or num_slices) to at most {most * slice_len} or build the "
                f"storage with max_size >= {num_slices * slice_len}",
            )

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        self.check_capacity(getattr(storage, "max_size", len(storage)), batch_size)
        return super().sample(storage, batch_size)

    def _pick(self, usable: torch.Tensor, num_slices: int) -> torch.Tensor:
        count = usable.numel()
        if self.drop_last and num_slices > count:
            raise ValueError(
                f"{num_slices} slices per batch but only {count} usable trajectories, and "
                "drop_last=True would drop every batch."
            )
        remaining = count - self._pos
        over = remaining <= 0 or (self.drop_last and remaining < num_slices)
        if self._perm is None or self._epoch_key != self._cache_key or over:
            self._perm = torch.randperm(count) if self.shuffle else torch.arange(count)
            self._pos, self._epoch_key, self.ran_out = 0, self._cache_key, False
        chosen = self._perm[self._pos : self._pos + num_slices]
        self._pos += chosen.numel()
        remaining = count - self._pos
        if remaining <= 0 or (self.drop_last and remaining < num_slices):
            self.ran_out = True
        return usable[chosen]

    def empty(self) -> None:
        super().empty()
        self._perm, self._pos, self._epoch_key, self.ran_out = None, 0, None, False

    def state_dict(self) -> dict:
        return {"perm": self._perm, "pos": self._pos, "ran_out": self.ran_out}

    def load_state_dict(self, state_dict: dict) -> None:
        self._perm = state_dict["perm"]
        self._pos = int(state_dict["pos"])
        self.ran_out = bool(state_dict["ran_out"])
        self._epoch_key = None  # the cache is rebuilt: the epoch restarts
