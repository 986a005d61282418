"""Tensor specs: what shape, dtype, device and range a tensor (or a TensorDict) may take.

Every spec answers the same questions: ``is_in(value)``, ``rand()``, ``zero()``,
``project(value)`` (bring a value back into the spec), ``encode(value)`` (numpy or
Python to a tensor of the spec) and ``assert_is_in(value)`` (raise a message that names
the spec and the value). ``expand(*batch)`` prepends batch dims; ``Composite`` nests
specs under string or tuple keys.

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(2,))
    >>> spec.is_in(spec.rand())
    True
    >>> spec.expand(4, 2).rand().shape
    torch.Size([4, 2])
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


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        text = f"tensor(shape={list(value.shape)}, dtype={value.dtype}"
        if value.numel() and value.numel() <= 8:
            text += f", values={value.detach().cpu().flatten().tolist()}"
        return text + ")"
    return repr(value)


class TensorSpec:
    """Base class of leaf specs: ``shape``, ``dtype`` and ``device`` of one tensor.

    Subclasses implement ``_in_range``, ``rand`` and ``project``; everything else is
    shared.
    """

    def __init__(self, shape: ShapeLike, dtype: torch.dtype, device=None):
        self.shape = _size(shape)
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    # -- the contract of a subclass -------------------------------------------------
    def _in_range(self, value: torch.Tensor, split: int) -> bool:
        """True if the values of ``value`` (shape already checked) fit the spec."""
        return True

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not define rand()")

    def project(self, value: torch.Tensor) -> torch.Tensor:
        """Return the nearest value inside the spec (a no-op for values already in it)."""
        return value

    # -- shared behaviour ---------------------------------------------------------
    def _shape_split(self, value_shape: torch.Size) -> int | None:
        """Where extra dims (e.g. time) sit in ``value_shape`` compared with ``self.shape``.

        Returns ``i`` such that ``value_shape == shape[:i] + extra + shape[i:]``, or None.
        ``i == 0`` is the common case of extra leading batch dims.
        """
        shape = self.shape
        n, m = len(shape), len(value_shape)
        if m < n:
            return None
        extra = m - n
        if value_shape[extra:] == shape:
            return 0
        for i in range(1, n + 1):
            if value_shape[:i] == shape[:i] and value_shape[i + extra :] == shape[i:]:
                return i
        return None

    def _broadcast_param(self, param: torch.Tensor, value_shape: torch.Size, split: int):
        """Reshape a per-element parameter (bounds) so it broadcasts against a value."""
        if split == 0 or param.dim() == 0:
            return param
        extra = len(value_shape) - len(self.shape)
        return param.reshape(*self.shape[:split], *([1] * extra), *self.shape[split:])

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
        """Raise ``ValueError`` naming the key, the spec and the value if ``value`` is not in."""
        problem = self._mismatch(value)
        if problem is not None:
            where = f" for key {key!r}" if key is not None else ""
            raise ValueError(f"Value{where} is not in the spec: {problem}.\n  spec:  {self}\n  value: {_describe(value)}")

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        return torch.zeros(_size(shape) + self.shape, dtype=self.dtype, device=self.device)

    def encode(self, value) -> torch.Tensor:
        """Turn a numpy array, Python number or tensor into a tensor of this spec."""
        if isinstance(value, torch.Tensor):
            tensor = value.to(device=self.device, dtype=self.dtype)
        else:
            array = np.asarray(value)
            if array.dtype == np.float64 and self.dtype == torch.float32:
                array = array.astype(np.float32)
            tensor = torch.as_tensor(array, device=self.device).to(self.dtype)
        if tensor.shape != self.shape and tensor.numel() == self.shape.numel():
            tensor = tensor.reshape(self.shape)
        return tensor

    def _new(self, shape: torch.Size, **params) -> TensorSpec:
        raise NotImplementedError(f"{type(self).__name__} does not support reshaping")

    def expand(self, *shape) -> TensorSpec:
        """Return the spec with leading batch dims: the new shape must end with the old."""
        shape = _expand_shape(shape)
        if len(shape) < len(self.shape) or shape[len(shape) - len(self.shape) :] != self.shape:
            raise ValueError(f"Cannot expand {type(self).__name__} of shape {list(self.shape)} to {list(shape)}: the new shape must end with the old one.")
        return self._new(shape)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        if dim is None:
            shape = torch.Size([s for s in self.shape if s != 1])
        else:
            dim = dim % len(self.shape) if self.shape else 0
            shape = self.shape if self.shape[dim] != 1 else self.shape[:dim] + self.shape[dim + 1 :]
        return self._new(shape)

    def unsqueeze(self, dim: int) -> TensorSpec:
        dim = dim if dim >= 0 else dim + len(self.shape) + 1
        return self._new(self.shape[:dim] + torch.Size([1]) + self.shape[dim:])

    def to(self, device) -> TensorSpec:
        out = self.clone()
        out.device = torch.device(device)
        return out

    def clone(self) -> TensorSpec:
        return self._new(self.shape)

    def _eq_params(self) -> tuple:
        return ()

    def __eq__(self, other) -> bool:
        if type(self) is not type(other):
            return False
        if (self.shape, self.dtype, self.device) != (other.shape, other.dtype, other.device):
            return False
        for a, b in zip(self._eq_params(), other._eq_params()):
            if isinstance(a, torch.Tensor):
                if not torch.equal(a.cpu(), b.cpu()):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self._repr_params().items())
        return f"{type(self).__name__}(shape={list(self.shape)}, dtype={self.dtype}{extra}, device={self.device})"

    def _repr_params(self) -> dict:
        return {}


class Unbounded(TensorSpec):
    """Any value of the given shape and dtype.

    Example:
        >>> Unbounded(shape=(3,)).rand().shape
        torch.Size([3])
    """

    def __init__(self, shape: ShapeLike = (), device=None, dtype: torch.dtype = torch.float32):
        super().__init__(shape, dtype, device)

    def _new(self, shape, **params):
        return Unbounded(shape, device=self.device, dtype=self.dtype)

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        if self.dtype.is_floating_point:
            return torch.randn(full, dtype=self.dtype, device=self.device)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, full, device=self.device).bool()
        return torch.randint(-100, 100, full, dtype=self.dtype, device=self.device)


class Bounded(TensorSpec):
    """Values between ``low`` and ``high`` (inclusive), scalar or per element.

    Example:
        >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
        >>> spec.project(torch.tensor([3.0]))
        tensor([2.])
    """

    def __init__(self, low, high, shape: ShapeLike | None = None, device=None, dtype: torch.dtype = torch.float32):
        low = torch.as_tensor(low, dtype=dtype)
        high = torch.as_tensor(high, dtype=dtype)
        if shape is None:
            shape = torch.broadcast_shapes(low.shape, high.shape)
        super().__init__(shape, dtype, device)
        try:
            self.low = low.to(self.device).expand(self.shape).clone()
            self.high = high.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(f"Bounded: low {list(low.shape)} and high {list(high.shape)} do not fit shape {list(self.shape)}") from err
        if (self.low > self.high).any():
            raise ValueError(f"Bounded: low must be <= high, got low={low.tolist()}, high={high.tolist()}")

    def _new(self, shape, low=None, high=None):
        low = self.low if low is None else low
        high = self.high if high is None else high
        if shape != self.shape and low.shape == self.shape:
            try:
                low, high = low.expand(shape), high.expand(shape)
            except RuntimeError:
                low, high = low.reshape(shape), high.reshape(shape)
        return Bounded(low, high, shape, device=self.device, dtype=self.dtype)

    def to(self, device):
        return Bounded(self.low, self.high, self.shape, device=device, dtype=self.dtype)

    def _in_range(self, value, split):
        low = self._broadcast_param(self.low, value.shape, split)
        high = self._broadcast_param(self.high, value.shape, split)
        return bool(((value >= low) & (value <= high)).all())

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        if self.dtype.is_floating_point:
            u = torch.rand(full, dtype=self.dtype, device=self.device)
            return self.low + u * (self.high - self.low)
        span = (self.high.to(torch.float64) - self.low.to(torch.float64) + 1).expand(full)
        offset = (torch.rand(full, dtype=torch.float64, device=self.device) * span).floor()
        return (self.low.to(torch.float64) + offset).to(self.dtype)

    def project(self, value):
        return torch.maximum(torch.minimum(value, self.high), self.low)

    def _eq_params(self):
        return (self.low, self.high)

    def _repr_params(self):
        return {"low": _short(self.low), "high": _short(self.high)}


def _short(t: torch.Tensor):
    flat = t.flatten()
    if flat.numel() and bool((flat == flat[0]).all()):
        return flat[0].item()
    return flat.tolist() if flat.numel() <= 8 else f"tensor{list(t.shape)}"


class Categorical(TensorSpec):
    """Integer values in ``[0, n)``; the action of a discrete env (``shape=()`` by default).

    Example:
        >>> spec = Categorical(4)
        >>> spec.is_in(torch.tensor(3)), spec.is_in(torch.tensor(4))
        (True, False)
    """

    def __init__(self, n: int, shape: ShapeLike = (), device=None, dtype: torch.dtype = torch.int64):
        super().__init__(shape, dtype, device)
        self.n = int(n)

    def _new(self, shape, **params):
        return Categorical(self.n, shape, device=self.device, dtype=self.dtype)

    def _in_range(self, value, split):
        if self.dtype == torch.bool:
            return True
        return bool(((value >= 0) & (value < self.n)).all())

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        out = torch.randint(0, self.n, full, device=self.device)
        return out.to(self.dtype)

    def project(self, value):
        if self.dtype == torch.bool:
            return value
        if value.dtype.is_floating_point:
            value = value.round()
        return value.clamp(0, self.n - 1).to(self.dtype)

    def to_one_hot(self, value: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(value.long(), self.n)

    def _eq_params(self):
        return (self.n,)

    def _repr_params(self):
        return {"n": self.n}


class OneHot(TensorSpec):
    """One-hot vectors of length ``n`` (last dim); ``encode`` accepts an integer index.

    Example:
        >>> OneHot(3).encode(1)
        tensor([0, 1, 0])
    """

    def __init__(self, n: int, shape: ShapeLike | None = None, device=None, dtype: torch.dtype = torch.int64):
        shape = _size(shape) if shape is not None else torch.Size([n])
        if not shape or shape[-1] != n:
            raise ValueError(f"OneHot: the last dim of shape {list(shape)} must be n={n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)

    def _new(self, shape, **params):
        return OneHot(self.n, shape, device=self.device, dtype=self.dtype)

    def _in_range(self, value, split):
        ok = ((value == 0) | (value == 1)).all() & (value.sum(-1) == 1).all()
        return bool(ok)

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        idx = torch.randint(0, self.n, full[:-1], device=self.device)
        return torch.nn.functional.one_hot(idx, self.n).to(self.dtype)

    def encode(self, value):
        array = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
        if array.shape[-1:] == torch.Size([self.n]) and array.dim() == len(self.shape):
            return array.to(device=self.device, dtype=self.dtype)
        return torch.nn.functional.one_hot(array.long(), self.n).to(device=self.device, dtype=self.dtype)

    def to_categorical(self, value: torch.Tensor) -> torch.Tensor:
        return value.argmax(-1)

    def project(self, value):
        return torch.nn.functional.one_hot(value.argmax(-1), self.n).to(self.dtype)

    def _eq_params(self):
        return (self.n,)

    def _repr_params(self):
        return {"n": self.n}


class MultiCategorical(TensorSpec):
    """Several categorical values, the i-th in ``[0, nvec[i])`` (the last dim of shape).

    Example:
        >>> MultiCategorical([2, 3]).rand().shape
        torch.Size([2])
    """

    def __init__(self, nvec, shape: ShapeLike | None = None, device=None, dtype: torch.dtype = torch.int64):
        nvec = torch.as_tensor(nvec, dtype=torch.int64)
        shape = _size(shape) if shape is not None else nvec.shape
        super().__init__(shape, dtype, device)
        self.nvec = nvec.expand(shape).clone() if nvec.shape != shape else nvec

    def _new(self, shape, **params):
        nvec = self.nvec.expand(shape) if shape != self.shape else self.nvec
        return MultiCategorical(nvec, shape, device=self.device, dtype=self.dtype)

    def _in_range(self, value, split):
        nvec = self._broadcast_param(self.nvec.to(value.device), value.shape, split)
        return bool(((value >= 0) & (value < nvec)).all())

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        u = torch.rand(full, device=self.device)
        return (u * self.nvec.to(self.device)).floor().to(self.dtype)

    def project(self, value):
        return torch.minimum(value.clamp_min(0), self.nvec.to(value.device) - 1).to(self.dtype)

    def _eq_params(self):
        return (self.nvec,)

    def _repr_params(self):
        return {"nvec": _short(self.nvec)}


class MultiOneHot(TensorSpec):
    """Concatenated one-hot vectors of sizes ``nvec`` (last dim ``sum(nvec)``)."""

    def __init__(self, nvec: Sequence[int], shape: ShapeLike | None = None, device=None, dtype: torch.dtype = torch.int64):
        self.nvec = [int(n) for n in nvec]
        shape = _size(shape) if shape is not None else torch.Size([sum(self.nvec)])
        if shape[-1] != sum(self.nvec):
            raise ValueError(f"MultiOneHot: last dim of {list(shape)} must be sum(nvec)={sum(self.nvec)}")
        super().__init__(shape, dtype, device)

    def _new(self, shape, **params):
        return MultiOneHot(self.nvec, shape, device=self.device, dtype=self.dtype)

    def _in_range(self, value, split):
        if not ((value == 0) | (value == 1)).all():
            return False
        return all(bool((chunk.sum(-1) == 1).all()) for chunk in value.split(self.nvec, -1))

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        chunks = [
            torch.nn.functional.one_hot(torch.randint(0, n, full[:-1], device=self.device), n)
            for n in self.nvec
        ]
        return torch.cat(chunks, -1).to(self.dtype)

    def encode(self, value):
        value = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
        if value.shape[-1:] == torch.Size([sum(self.nvec)]):
            return value.to(device=self.device, dtype=self.dtype)
        chunks = [torch.nn.functional.one_hot(value[..., i].long(), n) for i, n in enumerate(self.nvec)]
        return torch.cat(chunks, -1).to(device=self.device, dtype=self.dtype)

    def to_categorical(self, value):
        return torch.stack([c.argmax(-1) for c in value.split(self.nvec, -1)], -1)

    def project(self, value):
        return self.encode(self.to_categorical(value))

    def _eq_params(self):
        return (self.nvec,)

    def _repr_params(self):
        return {"nvec": self.nvec}


class Binary(TensorSpec):
    """Vectors of ``n`` zeros and ones (``MultiBinary`` spaces)."""

    def __init__(self, n: int | None = None, shape: ShapeLike | None = None, device=None, dtype: torch.dtype = torch.int8):
        if shape is None:
            if n is None:
                raise ValueError("Binary needs n or shape")
            shape = (n,)
        shape = _size(shape)
        n = shape[-1] if n is None else int(n)
        if shape[-1] != n:
            raise ValueError(f"Binary: last dim of {list(shape)} must be n={n}")
        super().__init__(shape, dtype, device)
        self.n = n

    def _new(self, shape, **params):
        return Binary(self.n, shape, device=self.device, dtype=self.dtype)

    def _in_range(self, value, split):
        return bool(((value == 0) | (value == 1)).all())

    def rand(self, shape=None):
        return torch.randint(0, 2, _size(shape) + self.shape, device=self.device).to(self.dtype)

    def project(self, value):
        return (value > 0.5).to(self.dtype) if value.dtype.is_floating_point else value.clamp(0, 1).to(self.dtype)

    def _eq_params(self):
        return (self.n,)


class Composite:
    """A nested mapping of specs with leading batch dims ``shape`` shared by all entries.

    Keys are strings or tuples of strings for nested entries; ``rand()``/``zero()`` return
    a TensorDict.

    Example:
        >>> spec = Composite(observation=Unbounded((3,)), shape=())
        >>> spec["next", "reward"] = Unbounded((1,))
        >>> sorted(spec.keys(include_nested=True, leaves_only=True))
        [('next', 'reward'), 'observation']
    """

    def __init__(self, specs: dict | None = None, shape: ShapeLike = (), device=None, **kwargs):
        self.shape = _size(shape)
        self.device = torch.device(device) if device is not None else None
        self._specs: dict[str, TensorSpec | Composite] = {}
        for key, spec in {**(specs or {}), **kwargs}.items():
            self[key] = spec

    # -- mapping interface ---------------------------------------------------------
    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) == 1:
                return self[key[0]]
            sub = self[key[0]]
            if not isinstance(sub, Composite):
                raise KeyError(f"{key[0]!r} is a leaf spec, cannot index {key!r} into it")
            return sub[key[1:]]
        try:
            return self._specs[key]
        except KeyError:
            raise KeyError(_missing_key_message(key, list(self.keys(True, True)))) from None

    def __setitem__(self, key, spec) -> None:
        if isinstance(key, tuple):
            if len(key) == 1:
                self[key[0]] = spec
                return
            if key[0] not in self._specs:
                self._specs[key[0]] = Composite(shape=self.shape, device=self.device)
            self._specs[key[0]][key[1:]] = spec
            return
        if not isinstance(key, str):
            raise TypeError(f"Composite keys are strings or tuples of strings, got {key!r}")
        if isinstance(spec, dict):
            spec = Composite(spec, shape=self.shape, device=self.device)
        if spec is not None and not isinstance(spec, (TensorSpec, Composite)):
            raise TypeError(f"Composite entry {key!r} must be a spec, got {type(spec).__name__}")
        if spec is not None and spec.shape[: len(self.shape)] != self.shape:
            raise ValueError(f"Spec for {key!r} has shape {list(spec.shape)}, which does not start with the Composite's batch shape {list(self.shape)}")
        self._specs[key] = spec

    def __delitem__(self, key) -> None:
        if isinstance(key, tuple) and len(key) > 1:
            del self[key[0]][key[1:]]
            return
        key = key[0] if isinstance(key, tuple) else key
        del self._specs[key]

    def pop(self, key, default=...):
        try:
            value = self[key]
        except KeyError:
            if default is ...:
                raise
            return default
        del self[key]
        return value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def keys(self, include_nested: bool = False, leaves_only: bool = False):
        out = []
        for key, spec in self._specs.items():
            is_leaf = not isinstance(spec, Composite)
            if is_leaf or not leaves_only:
                out.append(key)
            if include_nested and not is_leaf:
                out.extend((key, *_as_tuple(sub)) for sub in spec.keys(True, leaves_only))
        return out

    def items(self, include_nested: bool = False, leaves_only: bool = False):
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False):
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def update(self, other) -> Composite:
        for key, spec in (other.items() if isinstance(other, (Composite, dict)) else other):
            self[key] = spec
        return self

    # -- spec interface ------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_empty(self) -> bool:
        return not any(True for _ in self.keys(True, True))

    def rand(self, shape: ShapeLike | None = None) -> TensorDict:
        return self._build(lambda s: s.rand(shape), shape)

    def zero(self, shape: ShapeLike | None = None) -> TensorDict:
        return self._build(lambda s: s.zero(shape), shape)

    def _build(self, leaf_fn, shape) -> TensorDict:
        data = {}
        for key, spec in self._specs.items():
            if spec is None:
                continue
            data[key] = spec._build(leaf_fn, shape) if isinstance(spec, Composite) else leaf_fn(spec)
        return TensorDict(data, batch_size=_size(shape) + self.shape, device=self.device)

    def is_in(self, td: TensorDictBase) -> bool:
        for key, spec in self.items(True, True):
            if spec is None:
                continue
            value = td.get(key, None)
            if value is None or not spec.is_in(value):
                return False
        return True

    def assert_is_in(self, td: TensorDictBase) -> None:
        for key, spec in self.items(True, True):
            if spec is None:
                continue
            value = td.get(key, None)
            if value is None:
                raise KeyError(_missing_key_message(key, list(td.keys(True, True))))
            spec.assert_is_in(value, key=key)

    def project(self, td: TensorDictBase) -> TensorDictBase:
        for key, spec in self.items(True, True):
            if spec is not None and key in td.keys(True, True) and not spec.is_in(td.get(key)):
                td.set(key, spec.project(td.get(key)))
        return td

    def encode(self, values: dict) -> TensorDict:
        data = {}
        for key, value in values.items():
            spec = self[key]
            data[key] = spec.encode(value)
        return TensorDict(data, batch_size=self.shape, device=self.device)

    def expand(self, *shape) -> Composite:
        shape = _expand_shape(shape)
        if len(shape) < len(self.shape) or shape[len(shape) - len(self.shape) :] != self.shape:
            raise ValueError(f"Cannot expand Composite of batch shape {list(self.shape)} to {list(shape)}: the new shape must end with the old one.")
        specs = {}
        for key, spec in self._specs.items():
            if spec is None:
                specs[key] = None
            else:
                specs[key] = spec.expand(*shape, *spec.shape[len(self.shape) :])
        return Composite(specs, shape=shape, device=self.device)

    def squeeze(self, dim: int | None = None) -> Composite:
        if dim is None:
            out = self
            for d in reversed(range(len(self.shape))):
                if self.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        dim = dim % len(self.shape)
        if self.shape[dim] != 1:
            return self.clone()
        shape = self.shape[:dim] + self.shape[dim + 1 :]
        specs = {k: (None if s is None else s.squeeze(dim)) for k, s in self._specs.items()}
        return Composite(specs, shape=shape, device=self.device)

    def unsqueeze(self, dim: int) -> Composite:
        dim = dim if dim >= 0 else dim + len(self.shape) + 1
        shape = self.shape[:dim] + torch.Size([1]) + self.shape[dim:]
        specs = {k: (None if s is None else s.unsqueeze(dim)) for k, s in self._specs.items()}
        return Composite(specs, shape=shape, device=self.device)

    def to(self, device) -> Composite:
        specs = {k: (None if s is None else s.to(device)) for k, s in self._specs.items()}
        return Composite(specs, shape=self.shape, device=device)

    def clone(self) -> Composite:
        specs = {k: (None if s is None else s.clone()) for k, s in self._specs.items()}
        return Composite(specs, shape=self.shape, device=self.device)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Composite)
            and self.shape == other.shape
            and self._specs.keys() == other._specs.keys()
            and all(self._specs[k] == other._specs[k] for k in self._specs)
        )

    __hash__ = None

    def __repr__(self) -> str:
        inner = ",\n".join(f"    {k}: " + repr(v).replace("\n", "\n    ") for k, v in self._specs.items())
        return f"Composite(\n{inner},\n    shape={list(self.shape)})"


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
