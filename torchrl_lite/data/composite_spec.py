"""``Composite``: a nested mapping of specs sharing leading batch dims.

It lives in its own file for size; import it from ``torchrl_lite.data`` or
``torchrl_lite.data.tensor_specs`` as in TorchRL.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite._utils import missing_key_message as _missing_key_message
from torchrl_lite.data._spec_base import (
    ShapeLike,
    TensorSpec,
    _describe,
    _expanded,
    _norm_dim,
    _size,
    spec_row,
    spec_rows,
)

__all__ = ["Composite"]


class Composite:
    """A nested mapping of specs with leading batch dims ``shape`` shared by all entries.

    Keys are strings or tuples of strings for nested entries; ``rand()``/``zero()`` return
    a TensorDict.

    Example:
        >>> from torchrl_lite.data import Unbounded
        >>> spec = Composite(observation=Unbounded((3,)), shape=())
        >>> spec["next", "reward"] = Unbounded((1,))
        >>> spec.keys(include_nested=True, leaves_only=True)
        ['observation', ('next', 'reward')]
        >>> spec.rand()["next", "reward"].shape
        torch.Size([1])
    """

    def __init__(self, specs: dict | None = None, shape: ShapeLike = (), device=None, **kwargs):
        self.shape = _size(shape)
        self.device = torch.device(device) if device is not None else None
        self._specs: dict[str, TensorSpec | Composite | None] = {}
        for key, spec in {**(specs or {}), **kwargs}.items():
            self[key] = spec

    # -- mapping interface ---------------------------------------------------------
    def _lookup(self, key):
        """The entry under ``key`` (a string or tuple), or ``...`` when there is none."""
        node = self
        for part in key if isinstance(key, tuple) else (key,):
            if not isinstance(node, Composite) or part not in node._specs:
                return ...
            node = node._specs[part]
        return node

    def __getitem__(self, key):
        spec = self._lookup(key)
        if spec is ...:
            if type(key) is int:  # a row of the batch dims (one copy of a batched env)
                return spec_row(self, key)
            raise KeyError(_missing_key_message(key, self.keys(True)))
        return spec

    def unbind(self, dim: int = 0) -> tuple:
        """The Composites of the rows of batch dim 0 (only ``dim=0``)."""
        return spec_rows(self, dim)

    _event_ndim = 0  # every leading dim is a batch dim (``spec_row`` checks the index)

    def _row(self, index: int) -> Composite:
        """Row ``index`` of the batch dims, ``index`` already checked: every entry's row."""
        specs = {k: None if s is None else s[index] for k, s in self._specs.items()}
        return Composite(specs, shape=self.shape[1:], device=self.device)

    __torch_function__ = classmethod(TensorSpec.__torch_function__.__func__)  # torch.stack

    def __setitem__(self, key, spec) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        if not parts or not all(isinstance(p, str) for p in parts):
            raise TypeError(f"Composite keys are strings or tuples of strings, got {key!r}")
        node = self
        for part in parts[:-1]:  # nested keys create the Composites on their path
            if node._specs.get(part) is None:
                node._specs[part] = Composite(shape=node.shape, device=node.device)
            node = node._specs[part]
            if not isinstance(node, Composite):
                raise KeyError(f"Cannot set {key!r}: {part!r} holds a leaf spec, not a Composite")
        if isinstance(spec, dict):
            spec = Composite(spec, shape=node.shape, device=node.device)
        if spec is not None and not isinstance(spec, (TensorSpec, Composite)):
            raise TypeError(f"Composite entry {key!r} must be a spec, got {type(spec).__name__}")
        if spec is not None and spec.shape[: len(node.shape)] != node.shape:
            raise ValueError(
                f"Spec for {key!r} has shape {list(spec.shape)}, which does not start with "
                f"the Composite's batch shape {list(node.shape)}: {spec}"
            )
        node._specs[parts[-1]] = spec

    def set(self, key, spec) -> Composite:
        """Set ``spec`` under ``key`` (nested Composites are created) and return self."""
        self[key] = spec
        return self

    def __delitem__(self, key) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        parent = self._lookup(parts[:-1])
        if not isinstance(parent, Composite) or parts[-1] not in parent._specs:
            raise KeyError(_missing_key_message(key, self.keys(True)))
        del parent._specs[parts[-1]]

    def pop(self, key, default=...):
        if default is not ... and key not in self:
            return default
        value = self[key]
        del self[key]
        return value

    def get(self, key, default=None):
        spec = self._lookup(key)
        return default if spec is ... else spec

    def __contains__(self, key) -> bool:
        return self._lookup(key) is not ...

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        out = []
        for key, spec in self._specs.items():
            is_leaf = not isinstance(spec, Composite)
            if is_leaf or not leaves_only:
                out.append(key)
            if include_nested and not is_leaf:
                subs = spec.keys(True, leaves_only)
                out.extend((key, *sub) if isinstance(sub, tuple) else (key, sub) for sub in subs)
        return out

    def items(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def _leaves(self, prefix: tuple = ()) -> Iterator[tuple]:
        """``(key, spec)`` for every leaf spec that is not None, nested keys as tuples."""
        for key, spec in self._specs.items():
            if isinstance(spec, Composite):
                yield from spec._leaves((*prefix, key))
            elif spec is not None:
                yield ((*prefix, key) if prefix else key), spec

    def update(self, other) -> Composite:
        for key, spec in other.items() if isinstance(other, (Composite, dict)) else other:
            self[key] = spec
        return self

    # -- spec interface ------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_empty(self) -> bool:
        return next(self._leaves(), None) is None

    def rand(self, shape: ShapeLike | None = None) -> TensorDict:
        return self._build(lambda s: s.rand(shape), _size(shape))

    def zero(self, shape: ShapeLike | None = None) -> TensorDict:
        return self._build(lambda s: s.zero(shape), _size(shape))

    def _build(self, leaf_fn, shape: torch.Size) -> TensorDict:
        data = {
            key: spec._build(leaf_fn, shape) if isinstance(spec, Composite) else leaf_fn(spec)
            for key, spec in self._specs.items()
            if spec is not None
        }
        return TensorDict(data, batch_size=shape + self.shape, device=self.device)

    def is_in(self, td: TensorDictBase) -> bool:
        """True if ``td`` has a value in every leaf spec."""
        for key, spec in self._leaves():
            value = td.get(key, None)
            if value is None or not spec.is_in(value):
                return False
        return True

    def assert_is_in(self, td: TensorDictBase) -> None:
        """Raise ``KeyError`` for a missing entry, ``ValueError`` for a value not in."""
        if not isinstance(td, TensorDictBase):
            raise TypeError(f"Composite.assert_is_in expects a TensorDict, got {_describe(td)}")
        for key, spec in self._leaves():
            value = td.get(key, None)
            if value is None:
                raise KeyError(_missing_key_message(key, td.keys(True, True)))
            spec.assert_is_in(value, key=key)

    def project(self, td: TensorDictBase) -> TensorDictBase:
        for key, spec in self._leaves():
            value = td.get(key, None)
            if value is not None and not spec.is_in(value):
                td.set(key, spec.project(value))
        return td

    def encode(self, values: dict) -> TensorDict:
        data = {key: self[key].encode(value) for key, value in values.items()}
        return TensorDict(data, batch_size=self.shape, device=self.device)

    def _map(self, fn, shape: torch.Size, device=None) -> Composite:
        specs = {k: None if s is None else fn(s) for k, s in self._specs.items()}
        return Composite(specs, shape=shape, device=self.device if device is None else device)

    def expand(self, *shape) -> Composite:
        """Prepend batch dims to the Composite and to every entry."""
        shape, n = _expanded("Composite", self.shape, shape), len(self.shape)
        return self._map(lambda s: s.expand(*shape, *s.shape[n:]), shape)

    def squeeze(self, dim: int | None = None) -> Composite:
        if dim is None:
            out = self.clone()
            for d in reversed(range(len(self.shape))):
                out = out.squeeze(d)
            return out
        dim = _norm_dim(dim, len(self.shape))
        if self.shape[dim] != 1:
            return self.clone()
        return self._map(lambda s: s.squeeze(dim), self.shape[:dim] + self.shape[dim + 1 :])

    def unsqueeze(self, dim: int) -> Composite:
        dim = _norm_dim(dim, len(self.shape) + 1)
        shape = self.shape[:dim] + torch.Size([1]) + self.shape[dim:]
        return self._map(lambda s: s.unsqueeze(dim), shape)

    def to(self, device) -> Composite:
        return self._map(lambda s: s.to(device), self.shape, torch.device(device))

    def clone(self) -> Composite:
        return self._map(lambda s: s.clone(), self.shape)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Composite)
            and self.shape == other.shape
            and self._specs.keys() == other._specs.keys()
            and all(self._specs[k] == other._specs[k] for k in self._specs)
        )

    __hash__ = None

    def __repr__(self) -> str:
        inner = "".join(
            f"\n    {k}: " + f"{v!r},".replace("\n", "\n    ") for k, v in self._specs.items()
        )
        return f"Composite({inner}\n    shape={list(self.shape)})"
