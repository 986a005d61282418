"""Tensor specs: what shape, dtype, device and range a tensor (or a TensorDict) may take.

Every spec answers the same questions: ``is_in(value)``, ``rand()``, ``zero()``,
``project(value)`` (bring a value back into the spec), ``encode(value)`` (numpy or
Python to a tensor of the spec) and ``assert_is_in(value)`` (raise a message that names
the spec and the value). ``expand(*batch)`` prepends batch dims; ``Composite`` nests
specs under string or tuple keys.

``is_in`` accepts values with extra dims, as rollouts produce them: a spec of shape
``[4, 1]`` accepts ``[20, 4, 1]`` (leading dims) and ``[4, 20, 1]`` (a time dim after
the batch dims), with per-element bounds checked against the matching element.

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(2,))
    >>> spec.is_in(spec.rand())
    True
    >>> spec.expand(4, 2).rand().shape
    torch.Size([4, 2])
    >>> spec.expand(4, 2).is_in(torch.zeros(4, 20, 2))
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite._utils import missing_key_message as _missing_key_message

__all__ = [
    "TensorSpec",
    "Unbounded",
    "Bounded",
    "Categorical",
    "OneHot",
    "MultiCategorical",
    "MultiOneHot",
    "Binary",
    "Composite",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "BoundedTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "CompositeSpec",
]

ShapeLike = int | Sequence[int] | torch.Size


def _size(shape: ShapeLike | None) -> torch.Size:
    if shape is None:
        return torch.Size([])
    if isinstance(shape, int):
        return torch.Size([shape])
    return torch.Size([int(s) for s in shape])


def _expand_shape(args: tuple) -> torch.Size:
    if len(args) == 1 and not isinstance(args[0], int):
        return _size(args[0])
    return _size(args)


def _check_expand(name: str, old: torch.Size, new: torch.Size) -> None:
    if len(new) < len(old) or new[len(new) - len(old) :] != old:
        raise ValueError(
            f"Cannot expand {name} of shape {list(old)} to {list(new)}: the new shape must "
            "end with the old one (expand only prepends batch dims)."
        )


def _norm_dim(dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} is out of range for a spec with {ndim} dims")
    return dim % ndim


def _reshape_param(param: torch.Tensor, old: torch.Size, new: torch.Size) -> torch.Tensor:
    """Follow a per-element parameter (bounds, nvec) through expand/squeeze/unsqueeze."""
    if new == old:
        return param
    if new[len(new) - len(old) :] == old:
        return param.expand(new)  # batch dims prepended
    return param.reshape(new)  # a dim of size 1 inserted or removed


def _describe(value) -> str:
    if not isinstance(value, torch.Tensor):
        return f"{type(value).__name__} {value!r}"[:300]
    text = f"tensor(shape={list(value.shape)}, dtype={value.dtype}, device={value.device}"
    if 0 < value.numel() <= 8:
        text += f", values={value.detach().cpu().flatten().tolist()}"
    elif value.numel() and value.dtype != torch.bool and not value.is_complex():
        text += f", min={value.min().item()}, max={value.max().item()}"
    return text + ")"


def _short(t: torch.Tensor):
    flat = t.flatten()
    if flat.numel() and bool((flat == flat[0]).all()):
        return flat[0].item()
    return flat.tolist() if flat.numel() <= 8 else f"tensor{list(t.shape)}"


def _clamp(value: torch.Tensor, low, high, dtype: torch.dtype) -> torch.Tensor:
    """Round (for integer specs) and clamp ``value`` into ``[low, high]``, as ``dtype``."""
    if value.dtype.is_floating_point and not dtype.is_floating_point:
        value = value.round()
    work = torch.promote_types(value.dtype, dtype)
    low, high = torch.as_tensor(low).to(work), torch.as_tensor(high).to(work)
    return torch.clamp(value.to(work), low, high).to(dtype)


class TensorSpec:
    """Base class of leaf specs: ``shape``, ``dtype`` and ``device`` of one tensor.

    A subclass implements ``rand`` and, where values are restricted, ``_in_range`` and
    ``project``; ``_params`` lists its constructor arguments besides shape, device and
    dtype (tensors among them are per element, of the spec's shape).
    """

    def __init__(self, shape: ShapeLike, dtype: torch.dtype, device=None):
        self.shape = _size(shape)
        self.dtype = dtype
        self.device = torch.device("cpu" if device is None else device)

    # -- the contract of a subclass -------------------------------------------------
    def _in_range(self, value: torch.Tensor, split: int) -> bool:
        """True if the values of ``value`` (dtype and shape already checked) fit."""
        return True

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """A random value, with ``shape`` prepended to the spec's shape."""
        raise NotImplementedError(f"{type(self).__name__} does not define rand()")

    def project(self, value: torch.Tensor) -> torch.Tensor:
        """Return the nearest value inside the spec (a no-op for values already in it)."""
        return value

    def _params(self) -> dict:
        return {}

    # -- shared behaviour ---------------------------------------------------------
    def _shape_split(self, value_shape: torch.Size) -> int | None:
        """Where extra dims (e.g. time) sit in ``value_shape`` compared with ``self.shape``.

        Returns ``i`` such that ``value_shape == shape[:i] + extra + shape[i:]``, or None.
        ``i == 0`` is the common case of extra leading batch dims.
        """
        shape = self.shape
        extra = len(value_shape) - len(shape)
        if extra < 0:
            return None
        if value_shape[extra:] == shape:
            return 0
        for i in range(1, len(shape) + 1):
            if value_shape[:i] == shape[:i] and value_shape[i + extra :] == shape[i:]:
                return i
        return None

    def _broadcast_param(self, param: torch.Tensor, value_shape: torch.Size, split: int):
        """Reshape a per-element parameter (bounds) so it broadcasts against a value."""
        if split == 0 or param.dim() == 0:
            return param
        extra = len(value_shape) - len(self.shape)
        return param.reshape(*self.shape[:split], *([1] * extra), *self.shape[split:])

    def _split_or_raise(self, value: torch.Tensor) -> int:
        split = self._shape_split(value.shape)
        if split is None:
            raise ValueError(f"{_describe(value)} has a shape not compatible with {self}")
        return split

    def is_in(self, value) -> bool:
        """True if ``value`` has this spec's dtype, a compatible shape and valid values."""
        return self._mismatch(value) is None

    def _mismatch(self, value) -> str | None:
        if not isinstance(value, torch.Tensor):
            return f"expected a torch.Tensor, got {type(value).__name__}"
        if value.dtype != self.dtype:
            return f"dtype {value.dtype} does not match {self.dtype}"
        split = self._shape_split(value.shape)
        if split is None:
            return f"shape {list(value.shape)} is not compatible with {list(self.shape)}"
        if not self._in_range(value, split):
            return "values are outside the spec's range"
        return None

    def assert_is_in(self, value, key=None) -> None:
        """Raise ``ValueError`` naming the key, the spec and the value if it is not in."""
        problem = self._mismatch(value)
        if problem is not None:
            where = f" for key {key!r}" if key is not None else ""
            raise ValueError(
                f"Value{where} is not in the spec: {problem}.\n"
                f"  spec:  {self}\n  value: {_describe(value)}"
            )

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        return torch.zeros(_size(shape) + self.shape, dtype=self.dtype, device=self.device)

    def encode(self, value) -> torch.Tensor:
        """Turn a numpy array, Python number or tensor into a tensor of this spec.

        Extra leading dims are kept; dims of size 1 may differ; any other shape raises.
        """
        if isinstance(value, torch.Tensor):
            tensor = value.to(device=self.device, dtype=self.dtype)
        else:
            tensor = torch.as_tensor(np.asarray(value), device=self.device).to(self.dtype)
        if tensor.shape != self.shape and self._shape_split(tensor.shape) != 0:
            if [s for s in tensor.shape if s != 1] != [s for s in self.shape if s != 1]:
                raise ValueError(f"Cannot encode a value of shape {list(tensor.shape)} as {self}")
            tensor = tensor.reshape(self.shape)
        return tensor

    def _new(self, shape: torch.Size, device=None) -> TensorSpec:
        """The same spec with another shape (per-element params follow) or device."""
        params = {
            k: _reshape_param(v, self.shape, shape) if isinstance(v, torch.Tensor) else v
            for k, v in self._params().items()
        }
        device = self.device if device is None else device
        return type(self)(**params, shape=shape, device=device, dtype=self.dtype)

    def expand(self, *shape) -> TensorSpec:
        """Return the spec with leading batch dims: the new shape must end with the old."""
        shape = _expand_shape(shape)
        _check_expand(type(self).__name__, self.shape, shape)
        return self._new(shape)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        if dim is None:
            return self._new(torch.Size([s for s in self.shape if s != 1]))
        dim = _norm_dim(dim, len(self.shape))
        if self.shape[dim] != 1:
            return self.clone()
        return self._new(self.shape[:dim] + self.shape[dim + 1 :])

    def unsqueeze(self, dim: int) -> TensorSpec:
        dim = _norm_dim(dim, len(self.shape) + 1)
        return self._new(self.shape[:dim] + torch.Size([1]) + self.shape[dim:])

    def to(self, device) -> TensorSpec:
        return self._new(self.shape, device=torch.device(device))

    def clone(self) -> TensorSpec:
        return self._new(self.shape)

    def __eq__(self, other) -> bool:
        if type(self) is not type(other):
            return False
        if (self.shape, self.dtype, self.device) != (other.shape, other.dtype, other.device):
            return False
        theirs = other._params()
        for k, v in self._params().items():
            if isinstance(v, torch.Tensor):
                if not torch.equal(v, theirs[k].to(v.device)):
                    return False
            elif v != theirs[k]:
                return False
        return True

    __hash__ = None

    def __repr__(self) -> str:
        params = self._params().items()
        extra = "".join(
            f", {k}={_short(v) if isinstance(v, torch.Tensor) else v}" for k, v in params
        )
        return (
            f"{type(self).__name__}(shape={list(self.shape)}, dtype={self.dtype}{extra}, "
            f"device={self.device})"
        )


class Unbounded(TensorSpec):
    """Any value of the given shape and dtype.

    Example:
        >>> Unbounded(shape=(3,)).rand().shape
        torch.Size([3])
    """

    def __init__(self, shape: ShapeLike = (), device=None, dtype: torch.dtype = torch.float32):
        super().__init__(shape, dtype, device)

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        if self.dtype.is_floating_point:
            return torch.randn(full, dtype=self.dtype, device=self.device)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, full, device=self.device).bool()
        low = -100 if torch.iinfo(self.dtype).min < 0 else 0
        return torch.randint(low, 100, full, dtype=self.dtype, device=self.device)


class Bounded(TensorSpec):
    """Values between ``low`` and ``high`` (inclusive), scalar or per element.

    Example:
        >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
        >>> spec.project(torch.tensor([3.0]))
        tensor([2.])
    """

    def __init__(self, low, high, shape=None, device=None, dtype: torch.dtype = torch.float32):
        low = torch.as_tensor(low, dtype=dtype)
        high = torch.as_tensor(high, dtype=dtype)
        if shape is None:
            shape = torch.broadcast_shapes(low.shape, high.shape)
        super().__init__(shape, dtype, device)
        try:
            self.low = low.to(self.device).expand(self.shape).clone()
            self.high = high.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
                f"Bounded: low {list(low.shape)} and high {list(high.shape)} do not fit "
                f"shape {list(self.shape)}"
            ) from err
        if (self.low > self.high).any():
            raise ValueError(f"Bounded: low must be <= high, got low={low}, high={high}")
        if dtype.is_floating_point:
            self._span = self.high - self.low
        else:  # number of integers in [low, high]
            self._span = self.high.double() - self.low.double() + 1

    def _params(self):
        return {"low": self.low, "high": self.high}

    def _in_range(self, value, split):
        low = self._broadcast_param(self.low, value.shape, split)
        high = self._broadcast_param(self.high, value.shape, split)
        return bool(((value >= low) & (value <= high)).all())

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        if self.dtype.is_floating_point:
            u = torch.rand(full, dtype=self.dtype, device=self.device)
            return u.mul_(self._span).add_(self.low)
        u = torch.rand(full, dtype=torch.float64, device=self.device)
        return u.mul_(self._span).floor_().to(self.dtype).add_(self.low)

    def project(self, value):
        split = self._split_or_raise(value)
        low = self._broadcast_param(self.low, value.shape, split)
        high = self._broadcast_param(self.high, value.shape, split)
        return _clamp(value, low, high, self.dtype)


class Categorical(TensorSpec):
    """Integer values in ``[0, n)``; the action of a discrete env (``shape=()`` by default).

    Example:
        >>> spec = Categorical(4)
        >>> spec.is_in(torch.tensor(3)), spec.is_in(torch.tensor(4))
        (True, False)
    """

    def __init__(self, n: int, shape=(), device=None, dtype: torch.dtype = torch.int64):
        super().__init__(shape, dtype, device)
        self.n = int(n)

    def _params(self):
        return {"n": self.n}

    def _in_range(self, value, split):
        if self.dtype == torch.bool:
            return True
        return bool(((value >= 0) & (value < self.n)).all())

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        return torch.randint(0, self.n, full, device=self.device).to(self.dtype)

    def project(self, value):
        return _clamp(value, 0, self.n - 1, self.dtype)

    def to_one_hot(self, value: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(value.long(), self.n)


def _one_hot(index, n: int, dtype, device) -> torch.Tensor:
    index = torch.as_tensor(index).long()
    if index.numel() and (index.min() < 0 or index.max() >= n):
        raise ValueError(f"One-hot index out of range [0, {n}): {_describe(index)}")
    return torch.nn.functional.one_hot(index, n).to(device=device, dtype=dtype)


class OneHot(TensorSpec):
    """One-hot vectors of length ``n`` (last dim); ``encode`` accepts an integer index.

    Example:
        >>> OneHot(3).encode(1)
        tensor([0, 1, 0])
    """

    def __init__(self, n: int, shape=None, device=None, dtype: torch.dtype = torch.int64):
        shape = _size(shape) if shape is not None else torch.Size([n])
        if not shape or shape[-1] != n:
            raise ValueError(f"OneHot: the last dim of shape {list(shape)} must be n={n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)

    def _params(self):
        return {"n": self.n}

    def _in_range(self, value, split):
        return bool(((value == 0) | (value == 1)).all() & (value.sum(-1) == 1).all())

    def rand(self, shape=None):
        idx = torch.randint(0, self.n, (_size(shape) + self.shape)[:-1], device=self.device)
        return torch.nn.functional.one_hot(idx, self.n).to(self.dtype)

    def encode(self, value):
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value))
        if value.shape[-1:] == torch.Size([self.n]) and value.dim() == len(self.shape):
            return value.to(device=self.device, dtype=self.dtype)
        return _one_hot(value, self.n, self.dtype, self.device)

    def to_categorical(self, value: torch.Tensor) -> torch.Tensor:
        return value.to(torch.float32).argmax(-1)

    def project(self, value):
        return torch.nn.functional.one_hot(self.to_categorical(value), self.n).to(self.dtype)


class MultiCategorical(TensorSpec):
    """Several categorical values, the i-th in ``[0, nvec[i])`` (the last dim of shape).

    Example:
        >>> MultiCategorical([2, 3]).rand().shape
        torch.Size([2])
    """

    def __init__(self, nvec, shape=None, device=None, dtype: torch.dtype = torch.int64):
        nvec = torch.as_tensor(nvec, dtype=torch.int64)
        shape = _size(shape) if shape is not None else nvec.shape
        super().__init__(shape, dtype, device)
        try:
            self.nvec = nvec.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
                f"MultiCategorical: nvec {list(nvec.shape)} does not fit {list(shape)}"
            ) from err

    def _params(self):
        return {"nvec": self.nvec}

    def _in_range(self, value, split):
        nvec = self._broadcast_param(self.nvec, value.shape, split)
        return bool(((value >= 0) & (value < nvec)).all())

    def rand(self, shape=None):
        u = torch.rand(_size(shape) + self.shape, dtype=torch.float64, device=self.device)
        return u.mul_(self.nvec).floor_().to(self.dtype)

    def project(self, value):
        nvec = self._broadcast_param(self.nvec, value.shape, self._split_or_raise(value))
        return _clamp(value, 0, nvec - 1, self.dtype)


class MultiOneHot(TensorSpec):
    """Concatenated one-hot vectors of sizes ``nvec`` (last dim ``sum(nvec)``).

    Example:
        >>> MultiOneHot([2, 3]).encode([1, 0])
        tensor([0, 1, 1, 0, 0])
    """

    def __init__(self, nvec: Sequence[int], shape=None, device=None, dtype=torch.int64):
        self.nvec = [int(n) for n in nvec]
        shape = _size(shape) if shape is not None else torch.Size([sum(self.nvec)])
        if not shape or shape[-1] != sum(self.nvec):
            raise ValueError(
                f"MultiOneHot: last dim of {list(shape)} must be sum(nvec)={sum(self.nvec)}"
            )
        super().__init__(shape, dtype, device)

    def _params(self):
        return {"nvec": self.nvec}

    def _in_range(self, value, split):
        if not ((value == 0) | (value == 1)).all():
            return False
        return all(bool((chunk.sum(-1) == 1).all()) for chunk in value.split(self.nvec, -1))

    def rand(self, shape=None):
        batch = (_size(shape) + self.shape)[:-1]
        chunks = [
            torch.nn.functional.one_hot(torch.randint(0, n, batch, device=self.device), n)
            for n in self.nvec
        ]
        return torch.cat(chunks, -1).to(self.dtype)

    def encode(self, value):
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value))
        if value.shape[-1:] == torch.Size([sum(self.nvec)]):
            return value.to(device=self.device, dtype=self.dtype)
        if value.shape[-1:] != torch.Size([len(self.nvec)]):
            raise ValueError(f"Cannot encode {_describe(value)} as {self}")
        chunks = [
            _one_hot(value[..., i], n, self.dtype, self.device) for i, n in enumerate(self.nvec)
        ]
        return torch.cat(chunks, -1)

    def to_categorical(self, value):
        chunks = value.to(torch.float32).split(self.nvec, -1)
        return torch.stack([c.argmax(-1) for c in chunks], -1)

    def project(self, value):
        return self.encode(self.to_categorical(value))


class Binary(TensorSpec):
    """Vectors of ``n`` zeros and ones (``MultiBinary`` spaces).

    Example:
        >>> Binary(4).rand().shape
        torch.Size([4])
    """

    def __init__(self, n: int | None = None, shape=None, device=None, dtype=torch.int8):
        if shape is None:
            if n is None:
                raise ValueError("Binary needs n or shape")
            shape = (n,)
        shape = _size(shape)
        n = shape[-1] if (n is None and shape) else n
        if not shape or shape[-1] != n:
            raise ValueError(f"Binary: last dim of {list(shape)} must be n={n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)

    def _params(self):
        return {"n": self.n}

    def _in_range(self, value, split):
        return bool(((value == 0) | (value == 1)).all())

    def rand(self, shape=None):
        return torch.randint(0, 2, _size(shape) + self.shape, device=self.device).to(self.dtype)

    def project(self, value):
        if value.dtype.is_floating_point:
            return (value > 0.5).to(self.dtype)
        return value.clamp(0, 1).to(self.dtype)


class Composite:
    """A nested mapping of specs with leading batch dims ``shape`` shared by all entries.

    Keys are strings or tuples of strings for nested entries; ``rand()``/``zero()`` return
    a TensorDict.

    Example:
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
            raise KeyError(_missing_key_message(key, self.keys(True)))
        return spec

    def __setitem__(self, key, spec) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        if not parts or not all(isinstance(p, str) for p in parts):
            raise TypeError(f"Composite keys are strings or tuples of strings, got {key!r}")
        node = self
        for part in parts[:-1]:
            child = node._specs.get(part)
            if child is None:
                child = node._specs[part] = Composite(shape=node.shape, device=node.device)
            elif not isinstance(child, Composite):
                raise KeyError(f"Cannot set {key!r}: {part!r} holds a leaf spec, not a Composite")
            node = child
        node._set_entry(parts[-1], spec)

    def _set_entry(self, key: str, spec) -> None:
        if isinstance(spec, dict):
            spec = Composite(spec, shape=self.shape, device=self.device)
        if spec is not None and not isinstance(spec, (TensorSpec, Composite)):
            raise TypeError(f"Composite entry {key!r} must be a spec, got {type(spec).__name__}")
        if spec is not None and spec.shape[: len(self.shape)] != self.shape:
            raise ValueError(
                f"Spec for {key!r} has shape {list(spec.shape)}, which does not start with "
                f"the Composite's batch shape {list(self.shape)}: {spec}"
            )
        self._specs[key] = spec

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
        if self._lookup(key) is ... and default is not ...:
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
                out.extend((key, *_as_tuple(sub)) for sub in spec.keys(True, leaves_only))
        return out

    def items(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def _leaves(self, prefix: tuple = ()) -> Iterator[tuple]:
        """``(key, spec)`` for every leaf spec (not None), nested keys as tuples."""
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
        """True if every leaf spec has its value in ``td`` and the value is in it."""
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
        shape = _expand_shape(shape)
        _check_expand("Composite", self.shape, shape)
        n = len(self.shape)
        return self._map(lambda s: s.expand(*shape, *s.shape[n:]), shape)

    def squeeze(self, dim: int | None = None) -> Composite:
        if dim is None:
            out = self.clone()
            for d in reversed(range(len(self.shape))):
                if self.shape[d] == 1:
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
            f"    {k}: " + repr(v).replace("\n", "\n    ") + ",\n" for k, v in self._specs.items()
        )
        return f"Composite(\n{inner}    shape={list(self.shape)})"


def _as_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


# Names of the seed era (TorchRL < 0.6), kept as aliases so older scripts run.
UnboundedContinuousTensorSpec = Unbounded
BoundedTensorSpec = Bounded
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
BinaryDiscreteTensorSpec = Binary
CompositeSpec = Composite


def UnboundedDiscreteTensorSpec(shape: ShapeLike = (), device=None, dtype=torch.int64):  # noqa: N802
    """Seed-era name for an integer ``Unbounded`` spec."""
    return Unbounded(shape, device=device, dtype=dtype)
