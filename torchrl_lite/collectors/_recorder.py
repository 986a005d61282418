"""The recorder of a collector's batch: per-step references copied into buffers in chunks."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td

# Steps kept as references before being copied into the buffers. Few enough that the
# objects they hold (~10 per step) stay under the garbage collector's first threshold
# (700 allocations): with 128, collections run during the batch and cost ~7 us per step.
_CHUNK = 32


class _Recorder:
    """Copies the steps of a batch into ``[T, *batch]`` buffers reused across batches.

    Each step only keeps references (the env and policy write new tensors each step);
    every ``_CHUNK`` steps one ``torch.stack(..., out=...)`` per key copies them into the
    buffers. ``defaults`` gives a value for keys a step lacks (the policy's outputs in
    random-policy steps).
    """

    def __init__(self, steps: int, batch_dims: int):
        self.steps, self.batch_dims = steps, batch_dims
        self.signature = None

    def begin(self, td: TensorDictBase, ids: torch.Tensor, defaults: dict) -> None:
        keys = list(td.keys(True, True))
        keys += [k for k in defaults if k not in keys]
        leaves = [_get(td, k, defaults.get(k)) for k in keys]
        signature = tuple((k, v.shape, v.dtype, v.device) for k, v in zip(keys, leaves))
        if signature != self.signature:
            self.signature, self.keys = signature, keys
            self.buffers = [v.new_empty((self.steps, *v.shape)) for v in leaves]
            self.id_buffer = ids.new_empty((self.steps, *ids.shape))
        self.getters = [_getter(k, defaults.get(k)) for k in keys]
        # the common layout (plain TensorDicts, keys at the root or under "next") is read
        # straight from the dicts, several times faster than a getter per leaf
        root = _td.entries(td)
        flat = root is not None and _td.entries(root.get(K.NEXT)) is not None
        if flat and all(isinstance(k, str) or (len(k) == 2 and k[0] == K.NEXT) for k in keys):
            self.plan = [
                (k[1], True, defaults.get(k))
                if isinstance(k, tuple)
                else (k, False, defaults.get(k))
                for k in keys
            ]
        else:
            self.plan = None
        self.pending, self.pending_ids, self.written = [], [], 0

    def record(self, td: TensorDictBase, ids: torch.Tensor) -> None:
        self.pending.append(td)
        self.pending_ids.append(ids)
        if len(self.pending) == _CHUNK:
            self.flush()

    def flush(self) -> None:
        n, lo = len(self.pending), self.written
        if n == 0:
            return
        columns = self._columns()
        for key, leaves, buf in zip(self.keys, columns, self.buffers):
            try:
                torch.stack(leaves, out=buf[lo : lo + n])
            except RuntimeError as err:
                shapes = sorted({(tuple(v.shape), str(v.dtype)) for v in leaves})
                raise RuntimeError(
                    f"Collector: entry {key!r} changed shape or dtype between steps (seen: "
                    f"{shapes}); an env or policy must write the same shape at every step."
                ) from err
        torch.stack(self.pending_ids, out=self.id_buffer[lo : lo + n])
        self.pending.clear()
        self.pending_ids.clear()
        self.written += n

    def _columns(self) -> list[list[torch.Tensor]]:
        """Per key, its leaf at each pending step."""
        if self.plan is not None:
            try:
                roots = [_td.entries(td) for td in self.pending]
                nexts = [_td.entries(root[K.NEXT]) for root in roots]
                columns = []
                for name, in_next, default in self.plan:
                    dicts = nexts if in_next else roots
                    if default is None:
                        columns.append([d[name] for d in dicts])
                    else:
                        columns.append([d.get(name, default) for d in dicts])
                return columns
            except (KeyError, AttributeError, TypeError):
                pass  # a step differs from the first one: the getters say how
        return [[getter(td) for td in self.pending] for getter in self.getters]

    def result(self, batch_size, device) -> TensorDictBase:
        """A new ``[*batch, T]`` TensorDict (on ``device``) holding the batch."""
        self.flush()
        nd = self.batch_dims
        out = TensorDict(batch_size=(*batch_size, self.steps), device=device)
        for key, buf in (*zip(self.keys, self.buffers), (K.TRAJ_IDS, self.id_buffer)):
            leaf = buf.movedim(0, nd)  # [*batch, T, ...]
            if device is not None and leaf.device != device:
                leaf = leaf.to(device)
            out.set(key, leaf.contiguous() if nd else leaf.clone())
        return out


def _get(td: TensorDictBase, key, default):
    value = td.get(key, None)
    return default if value is None else value


def _getter(key, default):
    """A fast getter for one (possibly nested) key, returning ``default`` when absent."""
    path = key if isinstance(key, tuple) else (key,)

    def get(td):
        for name in path:
            td = _td.get(td, name)
            if td is None:
                if default is not None:
                    return default
                raise KeyError(
                    f"Collector: entry {key!r}, present at the first step of the batch, is "
                    "missing at a later step; an env or policy must write the same entries "
                    "at every step."
                )
        return td

    return get
