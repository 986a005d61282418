"""Stacked specs: the specs of copies that differ, as ``torch.stack(specs, 0)`` gives them.

A batched env over copies whose specs differ (multi-task: other observation shapes, a key
only some copies have) describes its data with these, as TorchRL does:

* ``stack_specs(specs)`` (also ``torch.stack(specs, 0)``): equal specs give the usual
  spec expanded to ``[n, ...]``; leaf specs of one class, dtype and shape whose
  per-element parameters differ (e.g. bounds) give that class with stacked parameters;
  anything else gives a :class:`Stacked` (leaves, possibly of different classes: its
  shape has ``-1`` where the copies' shapes differ) or a :class:`StackedComposite`.
* ``spec[i]`` is copy ``i``'s own spec; the entries of a ``StackedComposite`` are the
  keys *every* copy has (stacked in turn), as for a ``LazyStackedTensorDict``;
  ``rand()``/``zero()`` give a ``LazyStackedTensorDict``; ``is_in`` and ``assert_is_in``
  check copy ``i``'s data (row ``i`` along dim 0) against copy ``i``'s spec.

Only dim 0 is supported (the copies' dim of a batched env). Leaf specs of different
dtypes or devices cannot be stacked (``TypeError`` naming them: e.g. a discrete action
and a continuous one), nor specs of different ndims or batch shapes (``ValueError``).
"""

from __future__ import annotations

import warnings

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl_lite.data._spec_base import HANDLED_FUNCTIONS, TensorSpec, _describe, _size
from torchrl_lite.data.composite_spec import Composite

__all__ = ["stack_specs", "Stacked", "StackedComposite", "copies_of"]


def stack_specs(specs, dim: int = 0, *, _where: str = "") -> TensorSpec | Composite:
    """Stack the specs of ``n`` copies along a new dim 0 (see the module docstring).

    Example:
        >>> from torchrl_lite.data import Bounded, Composite, Unbounded
        >>> a = Composite(obs=Unbounded((3,)))
        >>> b = Composite(obs=Unbounded((4,)), extra=Unbounded((1,)))
        >>> spec = stack_specs([a, b])
        >>> spec["obs"].shape, spec.keys(), spec[1].keys()
        (torch.Size([2, -1]), ['obs'], ['obs', 'extra'])
        >>> stack_specs([Bounded(-1.0, 1.0, (1,)), Bounded(-2.0, 2.0, (1,))]).high.flatten()
        tensor([1., 2.])
    """
    specs = list(specs)
    if not specs:
        raise ValueError("stack_specs: got no spec to stack; pass a list of >= 1 specs.")
    first = specs[0]
    if dim not in (0, -len(first.shape) - 1):
        raise ValueError(
            f"stack_specs: only dim=0 (the copies' dim) is supported, got dim={dim}; stack "
            "along dim 0 and permute the data instead."
        )
    where = f" at key {_where!r}" if _where else ""
    composite = [isinstance(s, Composite) for s in specs]
    if any(composite) and not all(composite):
        kinds = [type(s).__name__ for s in specs]
        raise TypeError(
            f"stack_specs: cannot stack a Composite with a leaf spec{where} (copies: {kinds}); "
            "give every copy the same nesting."
        )
    shapes = [s.shape for s in specs]
    if any(len(s) != len(first.shape) for s in shapes):
        raise ValueError(
            f"stack_specs: specs of different ndims cannot be stacked{where} (shapes "
            f"{[list(s) for s in shapes]}); give every copy the same number of dims."
        )
    if all(s == first for s in specs[1:]):
        return first.expand(len(specs), *first.shape)
    if all(composite):
        if any(s != first.shape for s in shapes):
            raise ValueError(
                f"stack_specs: Composites of different batch shapes cannot be stacked{where} "
                f"({[list(s) for s in shapes]})."
            )
        return StackedComposite(specs, _where=_where)
    if len({(s.dtype, s.device) for s in specs}) > 1:
        listed = [f"{type(s).__name__}({s.dtype}, {s.device})" for s in specs]
        raise TypeError(
            f"stack_specs: leaf specs of different dtypes or devices cannot be "
            f"stacked{where}: copies have {listed}. Give every copy the same kind of spec "
            "there (e.g. the same action space type), or run them separately."
        )
    merged = _with_stacked_params(specs)
    return merged if merged is not None else Stacked(specs)


def _with_stacked_params(specs: list) -> TensorSpec | None:
    """One spec of the copies' class whose per-element parameters (bounds, nvec) are
    stacked, when their shapes and other parameters are equal; else None."""
    first = specs[0]
    if any(s.shape != first.shape or type(s) is not type(first) for s in specs):
        return None
    params = {}
    for name, value in first._params().items():
        values = [s._params()[name] for s in specs]
        if isinstance(value, torch.Tensor) and value.shape == first.shape:
            params[name] = torch.stack(values)
        elif all(_same(v, value) for v in values):
            params[name] = value
        else:
            return None
    shape = (len(specs), *first.shape)
    return type(first)(**params, shape=shape, device=first.device, dtype=first.dtype)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def copies_of(data, n: int) -> list:
    """The ``n`` rows of ``data`` along dim 0: a ``LazyStackedTensorDict``'s own
    TensorDicts (not copies: writing into them writes into ``data``), else ``unbind(0)``."""
    if isinstance(data, LazyStackedTensorDict) and data.stack_dim == 0:
        if len(data.tensordicts) == n:
            return data.tensordicts
    if isinstance(data, (list, tuple)):
        rows = list(data)
    else:
        rows = list(data.unbind(0)) if data.ndim else []
    if len(rows) != n:
        raise ValueError(
            f"expected data with {n} rows along dim 0 (one per copy), got "
            f"{_describe(data) if isinstance(data, torch.Tensor) else type(data).__name__} "
            f"with {len(rows)}."
        )
    return rows


class Stacked(TensorSpec):
    """Leaf specs of ``n`` copies of one dtype whose shapes or classes differ.

    ``shape`` is ``[n, *dims]`` with ``-1`` where the copies differ; ``spec[i]`` is copy
    ``i``'s spec. ``rand``/``zero`` stack the copies' draws when their shapes agree, else
    give a nested tensor (as TorchRL; setting it into a ``LazyStackedTensorDict`` gives
    each copy its row). ``is_in`` takes a tensor ``[n, ...]``, a nested tensor or a list
    of ``n`` per-copy values.

    Example:
        >>> from torchrl_lite.data import Unbounded
        >>> spec = Stacked([Unbounded((3,)), Unbounded((4,))])
        >>> spec.shape, spec[1].shape
        (torch.Size([2, -1]), torch.Size([4]))
        >>> spec.is_in([torch.zeros(3), torch.zeros(4)])
        True
    """

    _ragged = True  # -1 where the copies differ

    def __init__(self, specs: list):
        self.specs = list(specs)
        first = self.specs[0]
        dims = [
            d if all(s.shape[j] == d for s in self.specs) else -1 for j, d in enumerate(first.shape)
        ]
        super().__init__((len(self.specs), *dims), first.dtype, first.device)

    def __getitem__(self, index: int) -> TensorSpec:
        return self.specs[index]

    def unbind(self, dim: int = 0) -> tuple:
        _check_dim0(self, dim)
        return tuple(self.specs)

    def _draw(self, what: str, shape) -> torch.Tensor:
        values = [getattr(s, what)(shape) for s in self.specs]
        if all(v.shape == values[0].shape for v in values):
            return torch.stack(values, len(_size(shape)))
        if shape is not None and len(_size(shape)):
            raise ValueError(
                f"{self}: the copies' shapes differ, so {what}(shape) cannot give one tensor; "
                f"use {what}() of the Composite (a LazyStackedTensorDict) or spec[i].{what}()."
            )
        # as TorchRL: a nested tensor, whose rows a LazyStackedTensorDict takes per copy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype"
            return torch.nested.nested_tensor(values)

    def rand(self, shape=None) -> torch.Tensor:
        return self._draw("rand", shape)

    def zero(self, shape=None) -> torch.Tensor:
        return self._draw("zero", shape)

    def _mismatch(self, value) -> str | None:
        try:
            rows = copies_of(value, len(self.specs))
        except (ValueError, TypeError, AttributeError, RuntimeError) as err:
            return str(err)
        for i, (spec, row) in enumerate(zip(self.specs, rows)):
            problem = spec._mismatch(row)
            if problem is not None:
                return f"copy {i}: {problem} (its spec: {spec})"
        return None

    def project(self, value):
        rows = [s.project(r) for s, r in zip(self.specs, copies_of(value, len(self.specs)))]
        return torch.stack(rows) if isinstance(value, torch.Tensor) else rows

    def encode(self, value):
        raise TypeError(
            f"{self}: encode each copy's value with spec[i].encode(value) (the copies' "
            "shapes differ)."
        )

    def expand(self, *shape) -> Stacked:
        if _size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape) != (
            self.shape
        ):
            raise ValueError(f"{self}: a stacked spec cannot take more leading dims.")
        return self.clone()

    def squeeze(self, dim: int | None = None) -> Stacked:
        if dim is None or dim % (len(self.shape)) == 0:
            raise ValueError(f"{self}: squeeze a dim after the copies' dim 0 (got {dim}).")
        return Stacked([s.squeeze(dim % len(self.shape) - 1) for s in self.specs])

    def unsqueeze(self, dim: int) -> Stacked:
        dim = dim % (len(self.shape) + 1)
        if dim == 0:
            raise ValueError(f"{self}: unsqueeze a dim after the copies' dim 0 (got {dim}).")
        return Stacked([s.unsqueeze(dim - 1) for s in self.specs])

    def to(self, device) -> Stacked:
        return Stacked([s.to(device) for s in self.specs])

    def clone(self) -> Stacked:
        return Stacked([s.clone() for s in self.specs])

    def __eq__(self, other) -> bool:
        return isinstance(other, Stacked) and self.specs == other.specs

    __hash__ = None

    def __repr__(self) -> str:
        inner = "".join(f"\n    {i}: {s!r}," for i, s in enumerate(self.specs))
        return f"Stacked(shape={list(self.shape)}, dtype={self.dtype},{inner}\n)"


class StackedComposite(Composite):
    """Composites of ``n`` copies that differ: TorchRL's stacked Composite.

    Its entries (``keys()``, ``spec[key]``) are the keys every copy has, stacked
    (``stack_specs``); ``spec[i]`` is copy ``i``'s Composite, with its own keys.
    ``rand()``/``zero()`` return a ``LazyStackedTensorDict`` (one TensorDict per copy);
    ``is_in``/``assert_is_in`` check copy ``i``'s TensorDict (row ``i`` of dim 0) against
    copy ``i``'s Composite. Setting ``spec[key] = s`` sets ``s[i]`` in copy ``i``.

    Example:
        >>> from torchrl_lite.data import Unbounded
        >>> a = Composite(obs=Unbounded((3,)))
        >>> b = Composite(obs=Unbounded((4,)), extra=Unbounded((1,)))
        >>> spec = StackedComposite([a, b])
        >>> td = spec.rand()
        >>> type(td).__name__, td[1]["extra"].shape, spec.is_in(td)
        ('LazyStackedTensorDict', torch.Size([1]), True)
    """

    def __init__(self, specs: list, *, _where: str = ""):
        self.specs = list(specs)
        self.shape = torch.Size([len(self.specs), *self.specs[0].shape])
        self.device = self.specs[0].device
        self._stack_entries(_where)  # raises here for entries that cannot be stacked

    # -- entries: the keys every copy has, stacked -------------------------------------
    def _stack_entries(self, where: str = "") -> dict:
        first, others = self.specs[0], self.specs[1:]
        out = {}
        for key, spec in first._specs.items():
            entries = [spec] + [s._specs.get(key, ...) for s in others]
            if any(e is ... for e in entries):
                continue  # a key some copies lack: reachable through spec[i]
            if any(e is None for e in entries):
                out[key] = None
                continue
            path = f"{where}.{key}" if where else key
            out[key] = stack_specs(entries, _where=path)
        return out

    @property
    def _specs(self) -> dict:
        return self._stack_entries()

    def __getitem__(self, key):
        if type(key) is int:
            return self.specs[key]
        return super().__getitem__(key)

    def __setitem__(self, key, spec) -> None:
        rows = [None] * len(self.specs) if spec is None else _spec_rows(spec, len(self.specs))
        for copy, row in zip(self.specs, rows):
            copy[key] = row

    def __delitem__(self, key) -> None:
        for copy in self.specs:
            if key in copy:
                del copy[key]

    def unbind(self, dim: int = 0) -> tuple:
        _check_dim0(self, dim)
        return tuple(self.specs)

    def update(self, other) -> StackedComposite:
        if isinstance(other, (Composite, Stacked)) and not isinstance(other, dict):
            for copy, row in zip(self.specs, _spec_rows(other, len(self.specs))):
                copy.update(row)
            return self
        return super().update(other)

    # -- data ------------------------------------------------------------------------
    def rand(self, shape=None) -> LazyStackedTensorDict:
        tds = [s.rand(shape) for s in self.specs]
        return LazyStackedTensorDict(*tds, stack_dim=len(_size(shape)))

    def zero(self, shape=None) -> LazyStackedTensorDict:
        tds = [s.zero(shape) for s in self.specs]
        return LazyStackedTensorDict(*tds, stack_dim=len(_size(shape)))

    def is_in(self, td) -> bool:
        rows = copies_of(td, len(self.specs))
        return all(s.is_in(row) for s, row in zip(self.specs, rows))

    def assert_is_in(self, td) -> None:
        if not isinstance(td, TensorDictBase):
            raise TypeError(
                f"StackedComposite.assert_is_in expects a TensorDict, got {_describe(td)}"
            )
        for i, (spec, row) in enumerate(zip(self.specs, copies_of(td, len(self.specs)))):
            try:
                spec.assert_is_in(row)
            except (KeyError, ValueError) as err:
                message = err.args[0] if err.args else str(err)
                raise type(err)(f"copy {i}: {message}") from None

    def project(self, td):
        for spec, row in zip(self.specs, copies_of(td, len(self.specs))):
            spec.project(row)
        return td

    def encode(self, values):
        raise TypeError("StackedComposite: encode each copy's values with spec[i].encode(...).")

    # -- shape and device --------------------------------------------------------------
    def expand(self, *shape) -> StackedComposite:
        new = _size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if new != self.shape:
            raise ValueError(f"StackedComposite {list(self.shape)}: cannot take more leading dims.")
        return self.clone()

    def squeeze(self, dim: int | None = None) -> StackedComposite:
        if dim is None or dim % len(self.shape) == 0:
            raise ValueError(
                f"StackedComposite: squeeze a dim after the copies' dim 0 (got {dim})."
            )
        return StackedComposite([s.squeeze(dim % len(self.shape) - 1) for s in self.specs])

    def unsqueeze(self, dim: int) -> StackedComposite:
        dim = dim % (len(self.shape) + 1)
        if dim == 0:
            raise ValueError("StackedComposite: unsqueeze a dim after the copies' dim 0.")
        return StackedComposite([s.unsqueeze(dim - 1) for s in self.specs])

    def to(self, device) -> StackedComposite:
        return StackedComposite([s.to(device) for s in self.specs])

    def clone(self) -> StackedComposite:
        return StackedComposite([s.clone() for s in self.specs])

    def __eq__(self, other) -> bool:
        return isinstance(other, StackedComposite) and self.specs == other.specs

    __hash__ = None

    def __repr__(self) -> str:
        inner = "".join(
            f"\n    {i}: " + f"{s!r},".replace("\n", "\n    ") for i, s in enumerate(self.specs)
        )
        return f"StackedComposite({inner}\n    shape={list(self.shape)})"


def _check_dim0(spec, dim: int) -> None:
    if dim % len(spec.shape) != 0:
        raise ValueError(f"{type(spec).__name__}: only unbind(0) (the copies' dim), got {dim}.")


def _spec_rows(spec, n: int) -> list:
    """Copy ``i``'s part of ``spec`` (of shape ``[n, ...]``), for every copy."""
    if isinstance(spec, (Stacked, StackedComposite)):
        if len(spec.specs) != n:
            raise ValueError(f"a stacked spec of {len(spec.specs)} copies set into one of {n}.")
        return list(spec.specs)
    if not spec.shape or spec.shape[0] != n:
        raise ValueError(
            f"a spec set into a StackedComposite of {n} copies must have shape [{n}, ...] "
            f"(one row per copy), got {spec}; set copy i's spec with spec[i][key] = ..."
        )
    return list(spec.unbind(0))


HANDLED_FUNCTIONS[torch.stack] = stack_specs  # torch.stack(specs, 0), as in TorchRL
