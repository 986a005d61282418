"""The TensorDicts of stepping: what ``step``/``reset`` do with the ones they are given,
and the step recorder that copies a rollout's steps into buffers.

``EnvBase.step`` sets ``"next"`` on the step's input (``set_next``); a reset's output is
written into the caller's TensorDict (``update_in_place``), and a partial reset
(``"_reset"`` mask) is merged with the entries of the sub-envs that were not reset
(``merge_partial``). On plain TensorDicts these run on their dicts (see
``torchrl_lite._td``): they run at every step and every auto-reset.

One recorder (``StepRecorder``) serves ``EnvBase.rollout`` (general loop) and
``SyncDataCollector``: each step only keeps a reference to its TensorDict (envs and
policies write new tensors each step); every ``_CHUNK`` steps one
``torch.stack(..., out=...)`` per key copies the leaves into ``[T, *batch, ...]``
buffers, read from the TensorDicts' dicts where they are plain.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data._spec_stack import copies_of

# Steps kept as references before being copied into the buffers. Small enough that the
# objects they hold (~10 per step) stay under the garbage collector's first threshold
# (700 net allocations): with more, collections run during the rollout, promote those
# objects, and the full collections that follow cost ~10 us per step.
_CHUNK = 32
# Rows allocated up front; buffers double (up to max_steps) when a rollout runs longer, so
# rollout(10**6) that stops after 200 steps does not allocate a million rows of pixels.
_FIRST_ROWS = 1024

# the messages of each user of the recorder (tests check them)
_MESSAGES = {
    "rollout": (
        "rollout: entry {key!r} changed shape or dtype between steps (shape, dtype seen: "
        "{seen}); an env or policy must write the same shape and dtype at every step.",
        "Key {key!r} present at the first rollout step is missing at a later step.",
    ),
    "collector": (
        "Collector: entry {key!r} changed shape or dtype between steps (seen: {seen}); an "
        "env or policy must write the same shape at every step.",
        "Collector: entry {key!r}, present at the first step of the batch, is missing at a "
        "later step; an env or policy must write the same entries at every step.",
    ),
}


class StepRecorder:
    """Copies the steps of a rollout or a collector batch into ``[T, *batch, ...]`` buffers.

    ``begin(td)`` fixes the keys (those of the first step, plus ``defaults``: values for
    keys a step may lack, e.g. a policy's outputs in random-action steps); ``record(td)``
    keeps each step; ``result()`` returns the ``[*batch, T]`` TensorDict. Buffers start
    with ``min(max_steps, 1024)`` rows and double when full (never past ``max_steps``);
    a recorder that begins again with the same keys, shapes and dtypes reuses them. With
    ``ids`` (collectors), the trajectory ids of each step are recorded too. A key whose
    leaves carry gradients (a differentiable policy), from whichever step, is stacked
    without ``out=`` from then on so that the graph is kept.

    Args:
        max_steps: the most steps one rollout or batch records.
        owner: ``"rollout"`` or ``"collector"`` (whose words the errors use).

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> from torchrl_lite.envs.utils import step_mdp
        >>> env, rec = PendulumEnv(), StepRecorder(3)
        >>> td = env.reset()
        >>> for _ in range(3):
        ...     td = env.rand_step(td)
        ...     rec.record(td)
        ...     td = step_mdp(td)
        >>> rec.result(env.batch_size, env.device)["next", "reward"].shape
        torch.Size([3, 1])
    """

    def __init__(self, max_steps: int, owner: str = "rollout"):
        self.max_steps, self.owner = max_steps, owner
        self.shape_message, self.missing_message = _MESSAGES[owner]
        self.signature = None
        self.keys: list | None = None
        self.with_ids = False
        self.pending: list = []
        self.pending_ids: list = []
        self.written = 0

    def begin(self, td: TensorDictBase, ids: torch.Tensor | None = None, defaults=None) -> None:
        """Start a rollout or batch whose first step is ``td``."""
        if type(td) is LazyStackedTensorDict:  # copies of different specs: one recorder each
            self.__class__ = CopiesRecorder
            return self.begin(td, ids, defaults)
        defaults = defaults or {}
        keys = list(td.keys(True, True))
        keys += [k for k in defaults if k not in keys]
        leaves = [_value(td, k, defaults.get(k)) for k in keys]
        signature = tuple((k, v.shape, v.dtype, v.device) for k, v in zip(keys, leaves))
        if ids is not None:
            signature += ((K.TRAJ_IDS, ids.shape, ids.dtype, ids.device),)
        if signature != self.signature:  # else the buffers of the last batch are reused
            rows = min(self.max_steps, _FIRST_ROWS)
            self.signature, self.keys = signature, keys
            self.buffers = [v.new_empty((rows, *v.shape)) for v in leaves]
            self.id_buffer = None if ids is None else ids.new_empty((rows, *ids.shape))
        self.with_ids = ids is not None
        self.defaults = [defaults.get(k) for k in keys]
        self.getters = [_getter(k, d, self.missing_message) for k, d in zip(keys, self.defaults)]
        self.pending, self.pending_ids, self.written = [], [], 0

    def record(self, td: TensorDictBase, ids: torch.Tensor | None = None) -> None:
        """Keep the step ``td`` (its trajectory ids ``ids`` for a collector)."""
        if self.keys is None:
            self.begin(td, ids)
            if type(self) is not StepRecorder:
                return self.record(td, ids)
        self.pending.append(td)
        if ids is not None:
            self.pending_ids.append(ids)
        if len(self.pending) == _CHUNK:
            self._flush()

    def _flush(self) -> None:
        n, lo = len(self.pending), self.written
        if n == 0:
            return
        stores: dict = {}  # per key prefix, the steps' dicts of leaves (plain TensorDicts)
        for i, key in enumerate(self.keys):
            leaves = self._gather(key, self.defaults[i], stores)
            if leaves is None:  # not plain TensorDicts, or a key is missing: the getters
                leaves = [self.getters[i](td) for td in self.pending]
            self.buffers[i] = self._write(key, self.buffers[i], leaves, lo)
        if self.pending_ids:
            self.id_buffer = self._write(K.TRAJ_IDS, self.id_buffer, self.pending_ids, lo)
        self.pending.clear()
        self.pending_ids.clear()
        self.written += n

    def _write(self, key, buf, leaves: list, lo: int):
        """Copy ``leaves`` into rows ``lo:`` of ``buf`` (grown if needed); returns ``buf``."""
        n = len(leaves)
        if not isinstance(buf, list) and lo + n > buf.shape[0]:
            buf = _grown(buf, lo, self.max_steps)
        try:
            if isinstance(buf, list):
                buf.append(torch.stack(leaves))
            else:
                torch.stack(leaves, out=buf[lo : lo + n])
            return buf
        except RuntimeError as err:
            # ``out=`` refuses leaves that carry gradients (a differentiable policy; the
            # first step's may not, e.g. the reset observation): from here on this key
            # keeps the graph (found on the error only: nothing added per step)
            if isinstance(buf, list) or not _carries_grad(leaves):
                raise self._shape_error(key, leaves) from err
            buf = [buf[:lo]]
            try:
                buf.append(torch.stack(leaves))
            except RuntimeError as err2:
                raise self._shape_error(key, leaves) from err2
            return buf

    def _gather(self, key, default, stores: dict) -> list | None:
        """The pending steps' leaves at ``key``, read from the TensorDicts' dicts directly
        (a few times faster than ``get``); None where that does not apply."""
        path = key if isinstance(key, tuple) else (key,)
        try:
            dicts = self._dicts(path[:-1], stores)
            if default is None:
                return [d[path[-1]] for d in dicts]
            return [d.get(path[-1], default) for d in dicts]
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

    def result(self, batch_size: torch.Size, device=None) -> TensorDictBase:
        """A new ``[*batch, T]`` TensorDict (on ``device``) of the steps recorded."""
        self._flush()
        steps, nd = self.written, len(batch_size)
        out = TensorDict(batch_size=(*batch_size, steps), device=device)
        columns = list(zip(self.keys, self.buffers))
        if self.with_ids:
            columns.append((K.TRAJ_IDS, self.id_buffer))
        for key, buf in columns:
            leaf = torch.cat(buf) if isinstance(buf, list) else buf[:steps]  # [T, *batch, ...]
            leaf = leaf.movedim(0, nd)  # [*batch, T, ...]
            if device is not None and leaf.device != device:
                leaf = leaf.to(device)
            # a new tensor: the buffers are reused by the next batch
            out.set(key, leaf.contiguous() if nd else leaf.clone())
        return out

    def _shape_error(self, key, leaves: list) -> RuntimeError:
        seen = sorted({(tuple(leaf.shape), str(leaf.dtype)) for leaf in leaves})
        return RuntimeError(self.shape_message.format(key=key, seen=seen))


class CopiesRecorder(StepRecorder):
    """The recorder of a batched env whose copies' specs differ: its steps are lazy stacks
    along dim 0 (``envs/_batched_lazy.py``); each copy's rows go to a ``StepRecorder`` of
    their own and the result is their lazy stack, ``[n, *env_batch, T]``. A
    ``StepRecorder`` becomes one when its first step is such a lazy stack."""

    def begin(self, td: TensorDictBase, ids: torch.Tensor | None = None, defaults=None) -> None:
        rows = td.tensordicts
        copies = self.__dict__.get("copies")
        if copies is None or len(copies) != len(rows):
            copies = self.copies = [StepRecorder(self.max_steps, self.owner) for _ in rows]
        defaults = defaults or {}
        for i, (recorder, row) in enumerate(zip(copies, rows)):
            row_ids = None if ids is None else ids[i]
            recorder.begin(row, row_ids, {k: v[i] for k, v in defaults.items()})
        self.keys = []  # begun

    def record(self, td: TensorDictBase, ids: torch.Tensor | None = None) -> None:
        if self.keys is None:
            self.begin(td, ids)
        for i, (recorder, row) in enumerate(zip(self.copies, td.tensordicts)):
            recorder.record(row, None if ids is None else ids[i])

    def result(self, batch_size: torch.Size, device=None) -> TensorDictBase:
        rows = [recorder.result(batch_size[1:], device) for recorder in self.copies]
        return LazyStackedTensorDict(*rows, stack_dim=0)


def _value(td: TensorDictBase, key, default):
    value = td.get(key, None)
    return default if value is None else value


def _carries_grad(leaves: list) -> bool:
    return torch.is_grad_enabled() and any(leaf.requires_grad for leaf in leaves)


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


def _getter(key, default, missing_message: str):
    """A getter for one (possibly nested) key: ``default`` when absent, or a KeyError."""
    path = key if isinstance(key, tuple) else (key,)

    def get(td):
        for name in path:
            td = _td.get(td, name)
            if td is None:
                if default is not None:
                    return default
                raise KeyError(missing_message.format(key=key))
        return td

    return get


# -- step and reset outputs into the caller's TensorDict -----------------------------------
def set_next(tensordict: TensorDictBase, next_td: TensorDictBase) -> None:
    """``tensordict.set("next", next_td)``, without the checks when they cannot fail."""
    store = _td.store(tensordict)  # None for a locked or non-plain TensorDict
    if store is not None and _td.same_layout(tensordict, next_td):
        store[K.NEXT] = next_td
    else:
        tensordict.set(K.NEXT, next_td)


def update_in_place(previous: TensorDictBase, reset_out: TensorDictBase) -> TensorDictBase:
    """``previous`` without ``"_reset"``, updated in place with ``reset_out``; returned."""
    store = _td.store(previous)  # None for a locked or non-plain TensorDict
    if store is None or not _td.same_layout(previous, reset_out):
        previous.pop(K.RESET, None)
        return previous.update(reset_out)
    # the same as pop + update, on the dicts: this runs at every auto-reset
    store.pop(K.RESET, None)
    for key, value in _td.entries(reset_out).items():
        old = store.get(key)
        if isinstance(old, TensorDictBase) and isinstance(value, TensorDictBase):
            old.update(value)
        else:
            store[key] = value
    return previous


_NOT_CARRIED = frozenset({K.RESET, K.NEXT})


def merge_partial(
    previous: TensorDictBase, reset_out: TensorDictBase, mask: torch.Tensor
) -> TensorDictBase:
    """Entries of ``reset_out`` where ``mask`` is set, of ``previous`` elsewhere."""
    mask = mask.reshape(*reset_out.batch_size)
    masks = {mask.dim(): mask}  # the mask shaped to broadcast against leaves of each ndim

    def merge(new, old):
        if old is None or old.shape != new.shape:
            return new
        m = masks.get(new.dim())
        if m is None:
            m = masks[new.dim()] = mask.reshape(*mask.shape, *([1] * (new.dim() - mask.dim())))
        return torch.where(m, new, old)

    if _td.same_layout(previous, reset_out):  # merge the dicts, build one TensorDict
        entries = {k: v for k, v in _td.entries(previous).items() if k not in _NOT_CARRIED}
        for key, new in _td.entries(reset_out).items():
            old = entries.get(key)
            if type(new) is torch.Tensor:
                entries[key] = merge(new, old if type(old) is torch.Tensor else None)
            else:  # a nested TensorDict (or another tensor type): the general path
                return _merge_partial_nested(previous, reset_out, merge, mask)
        return _td.new(entries, previous.batch_size, previous.device)
    return _merge_partial_nested(previous, reset_out, merge, mask)


def _merge_partial_nested(previous, reset_out, merge, mask) -> TensorDictBase:
    if isinstance(reset_out, LazyStackedTensorDict):  # copies of different specs: one by one
        n = len(reset_out.tensordicts)
        rows = []
        for old, new, m in zip(copies_of(previous, n), reset_out.tensordicts, mask.unbind(0)):
            if bool(m.any()) and not bool(m.all()):  # some of a batched copy's envs
                rows.append(merge_partial(old, new, m))
            else:  # the whole copy, or none of it
                rows.append(old.exclude(K.RESET, K.NEXT).update(new if bool(m.any()) else {}))
        return LazyStackedTensorDict(*rows, stack_dim=reset_out.stack_dim)
    out = previous.exclude(K.RESET, K.NEXT)
    for key in reset_out.keys(True, True):
        out.set(key, merge(reset_out.get(key), previous.get(key, None)))
    return out
