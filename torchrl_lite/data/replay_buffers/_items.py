"""Items that tensor storages hold as TensorDicts: pytrees (nested dicts, lists and tuples
of tensors) and tensorclass instances, as in TorchRL.

A :class:`ReplayBuffer` over a ``TensorStorage`` turns such items into a TensorDict on the
way in (``encode``) and back into the user's type on the way out (``decode``): samples of
a buffer extended with dicts are dicts of the same structure, those of one extended with a
tensorclass are instances of that class. A pytree leaf is stored under its path (``{"b":
{"c": (x, [y])}}`` holds ``("b", "c", "0")`` and ``("b", "c", "1", "0")``; a non-string
key such as ``30`` becomes ``"30"``). The first write fixes the kind and the pytree
structure; a later write of another raises ``TypeError`` (mixing them would hand back
items of the wrong type).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDict, TensorDictBase, is_tensorclass
from torch.utils import _pytree

from torchrl_lite import _td

_PYTREE = "pytree"


class ItemCodec:
    """Remembers the kind of item a buffer holds: ``None`` (tensors or TensorDicts),
    ``"pytree"`` (with its structure and leaf keys) or a tensorclass type."""

    def __init__(self):
        self.kind = None
        self.seen = False
        self.spec, self.keys = None, None  # a pytree's structure and its leaves' keys

    def encode(self, data, batched: bool):
        kind = _kind(data)
        if not self.seen:
            self.kind, self.seen = kind, True
        elif kind != self.kind:
            raise TypeError(
                f"the buffer holds {_name(self.kind)} items, got {_name(kind)}; write one kind "
                "of item per buffer (or empty() it first)."
            )
        if kind == _PYTREE:
            return self._pytree_to_td(data, batched)
        if kind is not None:
            return _td.tensorclass_data(data)  # a tensorclass's TensorDict (no copy)
        return data

    def decode(self, data):
        if self.kind is None or not isinstance(data, TensorDictBase):
            return data
        if self.kind == _PYTREE:
            return _pytree.tree_unflatten([data.get(key) for key in self.keys], self.spec)
        return self.kind.from_tensordict(data)

    def reset(self) -> None:
        self.kind, self.seen = None, False
        self.spec, self.keys = None, None

    def _pytree_to_td(self, data, batched: bool) -> TensorDict:
        paths, spec = _pytree.tree_flatten_with_path(data)
        if not paths:
            raise ValueError(f"cannot store a pytree without tensors: {data!r}.")
        if self.spec is None:
            keys = [_leaf_key(path) for path, _ in paths]
            if len(set(keys)) != len(keys):
                clash = next(k for k in keys if keys.count(k) > 1)
                raise ValueError(
                    f"two pytree leaves are both stored under {clash!r} (keys are stored as "
                    "strings: 30 and '30' clash); rename one of them."
                )
            self.spec, self.keys = spec, keys
        elif spec != self.spec:
            raise TypeError(
                f"the buffer holds pytree items of structure {self.spec}, got one of structure "
                f"{spec}; write items of one structure per buffer (or empty() it first)."
            )
        return _leaves_to_td(list(zip(self.keys, (leaf for _, leaf in paths))), batched)


def _kind(data):
    if isinstance(data, TensorDictBase):
        return None
    if isinstance(data, (Mapping, list, tuple)):
        return _PYTREE
    if is_tensorclass(data) and not isinstance(data, type):
        return type(data)
    return None


def _name(kind) -> str:
    if kind is None:
        return "tensor or TensorDict"
    return "dict (pytree)" if kind == _PYTREE else f"tensorclass {kind.__name__}"


def _leaf_key(path: tuple) -> str | tuple:
    """The TensorDict key of a pytree leaf: its path, each step as a string."""
    parts = []
    for entry in path:
        for attr in ("key", "idx", "name"):  # MappingKey, SequenceKey, GetAttrKey
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return parts[0] if len(parts) == 1 else tuple(parts)


def _leaves_to_td(leaves: list, batched: bool) -> TensorDict:
    for key, leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(f"dict items hold tensors; entry {key!r} is a {type(leaf).__name__}.")
    if not batched:
        return TensorDict(dict(leaves), batch_size=[])
    sizes = {leaf.shape[0] if leaf.dim() else None for _, leaf in leaves}
    if len(sizes) != 1 or None in sizes:
        shapes = {key: list(leaf.shape) for key, leaf in leaves}
        raise ValueError(
            f"extend needs every tensor of the dict to have the same first dim (the items), "
            f"got shapes {shapes}."
        )
    return TensorDict(dict(leaves), batch_size=[sizes.pop()])
