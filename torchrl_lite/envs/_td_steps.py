"""What ``EnvBase.step`` and ``EnvBase.reset`` do with the TensorDicts they are given:
``"next"`` set on the step's input, a reset's output written into the caller's
TensorDict, and a partial reset (``"_reset"`` mask) merged with the entries of the
sub-envs that were not reset. On plain TensorDicts these run on their dicts (see
``torchrl_lite._td``): they run at every step and every auto-reset.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data._spec_stack import copies_of

__all__ = ["merge_partial", "set_next", "update_in_place"]


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
