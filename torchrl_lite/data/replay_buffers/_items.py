"""Items that tensor storages hold as TensorDicts: pytrees (dicts of tensors) and
tensorclass instances, as in TorchRL.

A :class:`ReplayBuffer` over a ``TensorStorage`` turns such items into a TensorDict on the
way in (``encode``) and back into the user's type on the way out (``decode``): samples of
a buffer extended with dicts are dicts, those of one extended with a tensorclass are
instances of that class. The first write fixes the kind; a later write of another kind
raises ``TypeError`` (mixing them would hand back items of the wrong type).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDict, TensorDictBase, is_tensorclass

from torchrl_lite import _td


class ItemCodec:
    """Remembers the kind of item a buffer holds: ``None`` (tensors or TensorDicts),
    ``"dict"`` or a tensorclass type."""

    def __init__(self):
        self.kind = None
        self.seen = False

    def encode(self, data, batched: bool):
        kind = _kind(data)
        if not self.seen:
            self.kind, self.seen = kind, True
        elif kind != self.kind:
            raise TypeError(
                f"the buffer holds {_name(self.kind)} items, got {_name(kind)}; write one kind "
                "of item per buffer (or empty() it first)."
            )
        if kind == "dict":
            return _dict_to_td(data, batched)
        if kind is not None:
            return _td.tensorclass_data(data)  # a tensorclass's TensorDict (no copy)
        return data

    def decode(self, data):
        if self.kind is None or not isinstance(data, TensorDictBase):
            return data
        if self.kind == "dict":
            return data.to_dict()
        return self.kind.from_tensordict(data)

    def reset(self) -> None:
        self.kind, self.seen = None, False


def _kind(data):
    if isinstance(data, Mapping) and not isinstance(data, TensorDictBase):
        return "dict"
    if is_tensorclass(data) and not isinstance(data, type):
        return type(data)
    return None


def _name(kind) -> str:
    if kind is None:
        return "tensor or TensorDict"
    return "dict (pytree)" if kind == "dict" else f"tensorclass {kind.__name__}"


def _dict_to_td(data: Mapping, batched: bool) -> TensorDict:
    leaves = list(_leaves(data))
    if not leaves:
        raise ValueError("cannot store an empty dict: give at least one tensor.")
    for key, leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(f"dict items hold tensors; entry {key!r} is a {type(leaf).__name__}.")
    if not batched:
        return TensorDict(data, batch_size=[])
    sizes = {leaf.shape[0] if leaf.dim() else None for _, leaf in leaves}
    if len(sizes) != 1 or None in sizes:
        shapes = {key: list(leaf.shape) for key, leaf in leaves}
        raise ValueError(
            f"extend needs every tensor of the dict to have the same first dim (the items), "
            f"got shapes {shapes}."
        )
    return TensorDict(data, batch_size=[sizes.pop()])


def _leaves(data: Mapping, prefix=()):
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value
