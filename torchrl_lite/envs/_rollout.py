"""The rollout recorder: the steps of ``EnvBase.rollout`` copied into buffers allocated once."""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl_lite import _td

# Steps kept as references before being copied into the buffers. Small enough that the
# objects they hold (~10 per step) stay under the garbage collector's first threshold
# (700 net allocations): with more, collections run during the rollout, promote those
# objects, and the full collections that follow cost ~10 us per step.
_ROLLOUT_CHUNK = 32
# Rows allocated up front; buffers double (up to max_steps) when a rollout runs longer, so
# rollout(10**6) that stops after 200 steps does not allocate a million rows of pixels.
_FIRST_ROWS = 1024


class _RolloutRecorder:
    """Copies the steps of a rollout into ``[T, *batch, ...]`` buffers.

    Each step only keeps a reference to its TensorDict (the env returns new tensors each
    step); every ``_ROLLOUT_CHUNK`` steps the leaves are copied into the buffers with one
    ``torch.stack(..., out=...)`` per key. The buffers start with ``min(max_steps, 1024)``
    rows and double when full (never past ``max_steps``). A key whose leaves carry gradients
    (a differentiable policy), from whichever step, is stacked without ``out=`` from then on
    so that the graph is kept.
    """

    def __init__(self, max_steps: int):
        self.max_steps = max_steps
        self.keys: list | None = None
        self.getters: list = []
        self.buffers: list[torch.Tensor | list[torch.Tensor]] = []
        self.pending: list[TensorDictBase] = []
        self.written = 0

    def record(self, td: TensorDictBase) -> None:
        if self.keys is None:
            if type(td) is LazyStackedTensorDict:  # copies of different specs (at step 0)
                self.__class__ = _CopiesRecorder
                return self.record(td)
            self.keys = list(td.keys(True, True))
            self.getters = [_leaf_getter(key) for key in self.keys]
            for key in self.keys:
                leaf = td.get(key)
                rows = min(self.max_steps, _FIRST_ROWS)
                self.buffers.append(
                    torch.empty((rows, *leaf.shape), dtype=leaf.dtype, device=leaf.device)
                )
        self.pending.append(td)
        if len(self.pending) == _ROLLOUT_CHUNK:
            self._flush()

    def _flush(self) -> None:
        n = len(self.pending)
        if n == 0:
            return
        stores: dict = {}  # per key prefix, the steps' dicts of leaves (plain TensorDicts)
        for i, (key, getter) in enumerate(zip(self.keys, self.getters)):
            leaves = self._gather(key, stores)
            if leaves is None:  # not plain TensorDicts, or a key is missing: the slow path
                leaves = [getter(td) for td in self.pending]
            buf = self.buffers[i]
            if not isinstance(buf, list) and self.written + n > buf.shape[0]:
                buf = self.buffers[i] = _grown(buf, self.written, self.max_steps)
            try:
                if isinstance(buf, list):
                    buf.append(torch.stack(leaves))
                else:
                    torch.stack(leaves, out=buf[self.written : self.written + n])
            except RuntimeError as err:
                # ``out=`` refuses leaves that carry gradients (a differentiable policy;
                # the first step's may not, e.g. the reset observation): from here on this
                # key keeps the graph (found on the error only: nothing added per step)
                if isinstance(buf, list) or not _carries_grad(leaves):
                    raise _shape_error(key, leaves) from err
                buf = self.buffers[i] = [buf[: self.written]]
                try:
                    buf.append(torch.stack(leaves))
                except RuntimeError as err2:
                    raise _shape_error(key, leaves) from err2
        self.pending.clear()
        self.written += n

    def _gather(self, key, stores: dict) -> list | None:
        """The pending steps' leaves at ``key``, read from the TensorDicts' dicts directly
        (a few times faster than ``get``); None where that does not apply."""
        path = key if isinstance(key, tuple) else (key,)
        try:
            return [d[path[-1]] for d in self._dicts(path[:-1], stores)]
        except (KeyError, TypeError):
            return None

    def _dicts(self, prefix: tuple, stores: dict) -> list:
        if prefix not in stores:
            if prefix:
                parents = self._dicts(prefix[:-1], stores)
                stores[prefix] = [_plain_store(d[prefix[-1]]) for d in parents]
            else:
                stores[prefix] = [_plain_store(td) for td in self.pending]
        return stores[prefix]

    def result(self, batch_size: torch.Size, device) -> TensorDictBase:
        self._flush()
        steps = self.written
        ndim = len(batch_size)
        out = TensorDict(batch_size=(*batch_size, steps), device=device)
        for key, buf in zip(self.keys, self.buffers):
            leaf = torch.cat(buf) if isinstance(buf, list) else buf[:steps]  # [T, *batch, ...]
            if ndim:
                leaf = leaf.movedim(0, ndim).contiguous()  # [*batch, T, ...]
            out.set(key, leaf)
        return out


class _CopiesRecorder(_RolloutRecorder):
    """The rollout of a batched env whose copies differ (its steps are lazy stacks along
    dim 0): one recorder per copy; the result is their lazy stack."""

    def record(self, td: TensorDictBase) -> None:
        copies = self.__dict__.get("copies")
        if copies is None:
            copies = self.copies = [_RolloutRecorder(self.max_steps) for _ in td.tensordicts]
        for recorder, row in zip(copies, td.tensordicts):
            recorder.record(row)

    def result(self, batch_size: torch.Size, device) -> TensorDictBase:
        rows = [r.result(batch_size[1:], device) for r in self.copies]
        return LazyStackedTensorDict(*rows, stack_dim=0)


def _carries_grad(leaves: list) -> bool:
    return torch.is_grad_enabled() and any(leaf.requires_grad for leaf in leaves)


def _shape_error(key, leaves: list) -> RuntimeError:
    kinds = sorted({(tuple(leaf.shape), str(leaf.dtype)) for leaf in leaves})
    return RuntimeError(
        f"rollout: entry {key!r} changed shape or dtype between steps (shape, dtype seen: "
        f"{kinds}); an env or policy must write the same shape and dtype at every step."
    )


def _grown(buf: torch.Tensor, written: int, max_steps: int) -> torch.Tensor:
    """``buf`` with twice the rows (at most ``max_steps``), its first ``written`` kept."""
    bigger = buf.new_empty((min(2 * buf.shape[0], max_steps), *buf.shape[1:]))
    bigger[:written].copy_(buf[:written])
    return bigger


def _plain_store(td) -> dict:
    """The dict of entries of a plain TensorDict; TypeError for anything else."""
    entries = _td.entries(td)
    if entries is None:
        raise TypeError(type(td).__name__)
    return entries


def _leaf_getter(key):
    """A fast getter for one (possibly nested) key; raises KeyError naming it if absent."""
    path = key if isinstance(key, tuple) else (key,)

    def get(td):
        for name in path:
            td = _td.get(td, name)
            if td is None:
                raise KeyError(
                    f"Key {key!r} present at the first rollout step is missing at a later step."
                )
        return td

    return get
