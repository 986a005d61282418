"""Slice samplers: contiguous pieces of stored trajectories (``SliceSampler``), with or
without replacement. The :class:`~torchrl_lite.data.replay_buffers.samplers.Sampler`
contract applies (``_sampler_base.py``); both are importable from ``samplers`` too.
"""

from __future__ import annotations

import torch

from torchrl_lite.data.replay_buffers._sampler_base import Sampler, _check_not_empty, _never_full

__all__ = ["SliceSampler", "SliceSamplerWithoutReplacement"]


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
        strict_length: use only trajectories of ``>= slice_len`` steps (else: shorter slices).
        truncated_key: where the slice ends are marked.
        cache_values: keep the trajectory boundaries between samples (default: they are
            recomputed when the storage changes); ``False`` (TorchRL's default) recomputes
            them at every sample, with the same samples.
        use_gpu: TorchRL computes the boundaries on a GPU with ``True`` (or a device);
            here they are computed on the CPU, which gives the same samples, and the flag
            is only kept.
        compile: TorchRL compiles its index computation with ``torch.compile`` when
            True (or a dict of ``torch.compile`` keyword arguments); the computation
            here is already vectorised, so the samples are the same and the value is
            only kept.

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
        use_gpu=False,
        compile: bool | dict = False,
    ) -> None:
        if not isinstance(compile, (bool, dict)):
            raise TypeError(
                f"SliceSampler: compile must be a bool or a dict of torch.compile keyword "
                f"arguments, got {type(compile).__name__}: {compile!r}"
            )
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
        self.use_gpu = use_gpu
        self.compile = bool(compile)
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
        key, kind = (
            (self.traj_key, "traj_key")
            if self.traj_key is not None
            else (
                self.end_key,
                "end_key",
            )
        )
        try:
            column = storage.column(key).reshape(size, -1)
        except KeyError as err:
            raise KeyError(
                f"{type(self).__name__} tells trajectories apart by {kind}={key!r}, which the "
                f"stored data lack ({err.args[0]}); pass end_key=<the end-of-trajectory flag> "
                "or traj_key=<a trajectory id per step> naming an entry of the data."
            ) from err
        if self.traj_key is not None:
            ids = column[:, 0]
            boundary = ids[1:] != ids[:-1]  # [size - 1]: step i ends a trajectory
        else:
            boundary = column.any(1)[:-1].clone()
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
