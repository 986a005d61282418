"""Leaf tensor specs: what shape, dtype, device and range a tensor (or a TensorDict) may take.

Every spec answers ``is_in(value)``, ``rand()``, ``zero()``, ``project(value)`` (bring a
value back into the spec), ``encode(value)`` (numpy or Python to a tensor of the spec) and
``assert_is_in(value)`` (raise a message naming the spec and the value). ``expand(*batch)``
prepends batch dims; ``Composite`` (``composite_spec.py``) nests specs under keys. ``is_in`` takes
values with extra dims, as rollouts make them: leading (``[20, 4, 1]`` for a spec of shape
``[4, 1]``) or after the batch dims (``[4, 20, 1]``), bounds checked per element.

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(2,))
    >>> spec.is_in(spec.rand())
    True
    >>> spec.expand(4, 2).rand().shape
    torch.Size([4, 2])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.nn.functional import one_hot as _one_hot

from torchrl_lite.data._spec_boxes import (  # noqa: F401  (DiscreteBox: re-exported)
    CategoricalBox,
    ContinuousBox,
    DiscreteBox,
)

__all__ = [
    "TensorSpec",
    "Unbounded",
    "Bounded",
    "Categorical",
    "MultiCategorical",
    "Binary",
    "UnboundedDiscreteTensorSpec",
    "HANDLED_FUNCTIONS",
    "spec_row",
    "spec_rows",
]

# torch functions that specs answer (``torch.stack`` -> ``_spec_stack.stack_specs``). The
# stacked specs subclass these, so their module registers here instead of being imported.
HANDLED_FUNCTIONS: dict = {}

ShapeLike = int | Sequence[int] | torch.Size


def _size(shape: ShapeLike | None) -> torch.Size:
    if shape is None:
        return torch.Size([])
    if isinstance(shape, int):
        return torch.Size([shape])
    return torch.Size([int(s) for s in shape])


def _expanded(name: str, old: torch.Size, args: tuple) -> torch.Size:
    """The shape asked by ``expand(*args)``; it must end with ``old`` (batch dims go first)."""
    new = _size(args[0]) if len(args) == 1 and not isinstance(args[0], int) else _size(args)
    if len(new) < len(old) or new[len(new) - len(old) :] != old:
        raise ValueError(
            f"Cannot expand {name} of shape {list(old)} to {list(new)}: the new shape must "
            "end with the old one (expand prepends batch dims)."
        )
    return new


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


def _short(v):
    if not isinstance(v, torch.Tensor):
        return v
    flat = v.flatten()
    if flat.numel() and bool((flat == flat[0]).all()):
        return flat[0].item()
    return flat.tolist() if flat.numel() <= 8 else f"tensor{list(v.shape)}"


def spec_row(spec, index: int):
    """``spec[index]``: the spec of row ``index`` of dim 0 (a leaf spec or a Composite).

    A tuple of ints indexes the leading dims one after the other (``spec[(0, 1)]`` is
    ``spec[0][1]``; ``spec[()]`` is the spec itself), as TorchRL's scripts write
    ``spec[(0,) * len(env.batch_size)]``.
    """
    if isinstance(index, tuple) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in index
    ):
        for i in index:
            spec = spec_row(spec, i)
        return spec
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"{type(spec).__name__}[...] takes an int (a row of dim 0), got {index!r}")
    if len(spec.shape) < spec._event_ndim + 1:
        raise IndexError(f"{spec} has no batch dim to index with {index}")
    if not -spec.shape[0] <= index < spec.shape[0]:
        raise IndexError(f"index {index} is out of range for dim 0 of shape {list(spec.shape)}")
    return spec._row(index)


def spec_rows(spec, dim: int = 0) -> tuple:
    """``spec.unbind(dim)``: the specs of the rows of dim 0 (only ``dim=0``)."""
    if dim != 0:
        raise ValueError(f"{type(spec).__name__}.unbind: only dim=0 is supported, got {dim}")
    return tuple(spec_row(spec, i) for i in range(spec.shape[0] if spec.shape else 0))


class TensorSpec:
    """Base class of leaf specs: ``shape``, ``dtype`` and ``device`` of one tensor.

    A subclass implements ``rand`` and, where values are restricted, ``_in_range`` and
    ``project``; ``_params()`` returns its other constructor arguments (tensors among them
    are per element, of the spec's shape, and follow ``expand``/``squeeze``).
    """

    _ragged = False  # -1 dims allowed (copies whose shapes differ, ``_spec_stack.Stacked``)
    _event_ndim = 0  # trailing dims that are one value, not rows (a one-hot vector: 1)

    def __init__(self, shape: ShapeLike, dtype: torch.dtype, device=None):
        if not isinstance(dtype, torch.dtype):
            raise TypeError(
                f"{type(self).__name__}: dtype must be a torch.dtype (e.g. torch.float32), got "
                f"{dtype!r}."
            )
        self.shape, self.dtype = _size(shape), dtype
        if any(s < 0 for s in self.shape) and not self._ragged:
            raise ValueError(
                f"{type(self).__name__}: shape dims must be >= 0, got {list(self.shape)}; "
                "spec shapes are fixed (no -1)."
            )
        self.device = torch.device("cpu" if device is None else device)

    def _in_range(self, value: torch.Tensor, split: int) -> bool:
        """True if the values of ``value`` (dtype and shape already checked) fit."""
        return True

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """A random value in the spec, with ``shape`` prepended to the spec's shape."""
        raise NotImplementedError(f"{type(self).__name__} does not define rand()")

    def project(self, value: torch.Tensor) -> torch.Tensor:
        """The nearest value inside the spec (a no-op for values already in it)."""
        return value

    def _params(self) -> dict:
        return {}

    # -- shared behaviour ---------------------------------------------------------
    def _shape_split(self, value_shape: torch.Size) -> int | None:
        """Where extra dims (e.g. time) sit in ``value_shape`` compared with ``self.shape``.

        Returns ``i`` such that ``value_shape == shape[:i] + extra + shape[i:]``, or None;
        ``i == 0`` is the common case of extra leading dims.
        """
        shape, extra = self.shape, len(value_shape) - len(self.shape)
        if extra < 0:
            return None
        if value_shape[extra:] == shape:
            return 0
        for i in range(1, len(shape) + 1):
            if value_shape[:i] == shape[:i] and value_shape[i + extra :] == shape[i:]:
                return i
        return None

    def _broadcast_param(self, param: torch.Tensor, value: torch.Tensor, split: int | None):
        """Reshape a per-element parameter (bounds) so it broadcasts against ``value``."""
        if split is None:
            raise ValueError(f"{_describe(value)} has a shape not compatible with {self}")
        if split == 0 or param.dim() == 0:
            return param
        extra = [1] * (value.dim() - len(self.shape))
        return param.reshape(*self.shape[:split], *extra, *self.shape[split:])

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
        """A numpy array, Python number or tensor as a tensor of this spec.

        Extra leading dims are kept and dims of size 1 may differ; other shapes raise.
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

    # -- rows of dim 0 and torch.stack (copies of a batched env) ------------------------
    def __getitem__(self, index: int) -> TensorSpec:
        """The spec of row ``index`` of dim 0 (e.g. one copy of a batched env)."""
        return spec_row(self, index)

    def unbind(self, dim: int = 0) -> tuple:
        """The specs of the rows of dim 0 (only ``dim=0``)."""
        return spec_rows(self, dim)

    def _row(self, index: int) -> TensorSpec:
        """Row ``index`` of dim 0, ``index`` already checked: per-element params follow."""
        params = {
            k: v[index] if isinstance(v, torch.Tensor) and v.shape == self.shape else v
            for k, v in self._params().items()
        }
        return type(self)(**params, shape=self.shape[1:], device=self.device, dtype=self.dtype)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``torch.stack(specs, 0)`` stacks specs, as in TorchRL (``HANDLED_FUNCTIONS``)."""
        if func in HANDLED_FUNCTIONS:
            return HANDLED_FUNCTIONS[func](*args, **(kwargs or {}))
        return NotImplemented

    def expand(self, *shape) -> TensorSpec:
        """The spec with leading batch dims: the new shape must end with the old one."""
        return self._new(_expanded(type(self).__name__, self.shape, shape))

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
        pairs = zip(self._params().values(), other._params().values())
        return all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in pairs)

    __hash__ = None

    def __repr__(self) -> str:
        params = "".join(f", {k}={_short(v)}" for k, v in self._params().items())
        name, shape = type(self).__name__, list(self.shape)
        return f"{name}(shape={shape}, dtype={self.dtype}{params}, device={self.device})"


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


class _Ranged(TensorSpec):
    """Values in ``[self._lo, self._hi]`` (0-dim or per-element tensors)."""

    _lo: torch.Tensor
    _hi: torch.Tensor

    def _in_range(self, value, split):
        lo = self._broadcast_param(self._lo, value, split)
        hi = self._broadcast_param(self._hi, value, split)
        return bool(((value >= lo) & (value <= hi)).all())

    def project(self, value):
        """Clamp into the range (rounding first for integer specs)."""
        split = self._shape_split(value.shape)
        lo = self._broadcast_param(self._lo, value, split)
        hi = self._broadcast_param(self._hi, value, split)
        if value.dtype.is_floating_point and not self.dtype.is_floating_point:
            value = value.round()
        work = torch.promote_types(torch.promote_types(value.dtype, self.dtype), torch.uint8)
        return torch.clamp(value.to(work), lo.to(work), hi.to(work)).to(self.dtype)

    def encode(self, value) -> torch.Tensor:
        """As :meth:`TensorSpec.encode`; values outside the range raise (as in TorchRL)."""
        tensor = super().encode(value)
        if not self._in_range(tensor, self._shape_split(tensor.shape)):
            raise ValueError(
                f"Cannot encode {_describe(tensor)}: values are outside the range of {self}."
            )
        return tensor


def _check_not_nan(low, high) -> None:
    for name, value in (("low", low), ("high", high)):
        value = torch.as_tensor(value)
        if value.is_floating_point() and bool(value.isnan().any()):
            raise ValueError(
                f"Bounded: {name} holds NaN ({value.tolist()}); give finite bounds, or "
                f"+/-inf for an unbounded side (or use Unbounded)."
            )


class Bounded(_Ranged):
    """Values between ``low`` and ``high`` (inclusive), scalar or per element.

    Example:
        >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
        >>> spec.project(torch.tensor([3.0]))
        tensor([2.])
    """

    def __init__(self, low, high, shape=None, device=None, dtype: torch.dtype = torch.float32):
        _check_not_nan(low, high)
        low, high = torch.as_tensor(low, dtype=dtype), torch.as_tensor(high, dtype=dtype)
        if shape is None:
            try:
                shape = torch.broadcast_shapes(low.shape, high.shape)
            except RuntimeError as err:
                raise ValueError(
                    f"Bounded: low of shape {list(low.shape)} and high of shape "
                    f"{list(high.shape)} do not broadcast to one shape; give bounds of the "
                    "same shape (or scalars with shape=...)."
                ) from err
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
        self._lo, self._hi = self.low, self.high
        if dtype.is_floating_point:  # rand() draws from [-max/2, max/2] where bounds are wider
            big = torch.finfo(dtype).max / 2
            self._rand_low = self.low.clamp(-big, big)
            self._span = self.high.clamp(-big, big) - self._rand_low
        else:  # the number of integers in [low, high]
            self._rand_low, self._span = self.low, self.high.double() - self.low.double() + 1

    def _params(self):
        return {"low": self.low, "high": self.high}

    @property
    def space(self) -> ContinuousBox:
        """The bounds as TorchRL's ``ContinuousBox`` (``space.low``, ``space.high``)."""
        return ContinuousBox(self.low, self.high)

    def rand(self, shape=None):
        full = _size(shape) + self.shape
        if self.dtype.is_floating_point:
            u = torch.rand(full, dtype=self.dtype, device=self.device)
            return u.mul_(self._span).add_(self._rand_low)
        u = torch.rand(full, dtype=torch.float64, device=self.device)
        return u.mul_(self._span).floor_().to(self.dtype).add_(self.low)


def _check_sizes(spec: str, name: str, values) -> None:
    """Category counts are integers >= 1 (a spec of 0 categories can hold nothing)."""
    values = torch.as_tensor(values)
    if values.is_floating_point() or values.numel() == 0 or bool((values < 1).any()):
        raise ValueError(
            f"{spec}: {name} must be integers >= 1 (the number of categories), got "
            f"{values.tolist()}."
        )


class Categorical(_Ranged):
    """Integer values in ``[0, n)``; the action of a discrete env (``shape=()`` by default).

    Example:
        >>> spec = Categorical(4)
        >>> spec.is_in(torch.tensor(3)), spec.is_in(torch.tensor(4))
        (True, False)
    """

    def __init__(self, n: int, shape=(), device=None, dtype: torch.dtype = torch.int64):
        _check_sizes("Categorical", "n", n)
        super().__init__(shape, dtype, device)
        self.n = int(n)
        self._lo = torch.tensor(0, device=self.device)
        self._hi = torch.tensor(self.n - 1, device=self.device)

    def _params(self):
        return {"n": self.n}

    @property
    def space(self) -> CategoricalBox:
        """The number of values as TorchRL's ``CategoricalBox`` (``space.n``)."""
        return CategoricalBox(self.n)

    def rand(self, shape=None):
        full = self.shape if shape is None else _size(shape) + self.shape
        if self.dtype == torch.bool:
            return torch.randint(0, self.n, full, device=self.device).to(self.dtype)
        return torch.randint(0, self.n, full, device=self.device, dtype=self.dtype)

    def to_one_hot(self, value: torch.Tensor) -> torch.Tensor:
        return _one_hot(value.long(), self.n)


class MultiCategorical(_Ranged):
    """Several categorical values, the i-th in ``[0, nvec[i])`` (the last dim of shape).

    Example:
        >>> MultiCategorical([2, 3]).rand().shape
        torch.Size([2])
    """

    def __init__(self, nvec, shape=None, device=None, dtype: torch.dtype = torch.int64):
        _check_sizes("MultiCategorical", "nvec", nvec)
        nvec = torch.as_tensor(nvec, dtype=torch.int64)
        super().__init__(nvec.shape if shape is None else shape, dtype, device)
        try:
            self.nvec = nvec.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(f"MultiCategorical: nvec {nvec} does not fit {self.shape}") from err
        self._lo, self._hi = torch.tensor(0, device=self.device), self.nvec - 1

    def _params(self):
        return {"nvec": self.nvec}

    def rand(self, shape=None):
        u = torch.rand(_size(shape) + self.shape, dtype=torch.float64, device=self.device)
        return u.mul_(self.nvec).floor_().to(self.dtype)


class Binary(_Ranged):
    """Vectors of ``n`` zeros and ones (``MultiBinary`` spaces).

    Example:
        >>> Binary(4).rand().shape
        torch.Size([4])
    """

    def __init__(self, n: int | None = None, shape=None, device=None, dtype=torch.int8):
        shape = _size((n,) if shape is None and n is not None else shape)
        n = shape[-1] if n is None and shape else n
        if not shape or shape[-1] != n:
            raise ValueError(f"Binary: needs n or a shape whose last dim is n, got {n}, {shape}")
        _check_sizes("Binary", "n", n)
        super().__init__(shape, dtype, device)
        self.n = int(n)
        self._lo, self._hi = (
            torch.tensor(0, device=self.device),
            torch.tensor(1, device=self.device),
        )

    def _params(self):
        return {"n": self.n}

    def rand(self, shape=None):
        return torch.randint(0, 2, _size(shape) + self.shape, device=self.device).to(self.dtype)


def UnboundedDiscreteTensorSpec(shape: ShapeLike = (), device=None, dtype=torch.int64):  # noqa: N802
    """Seed-era name for an integer ``Unbounded`` spec."""
    return Unbounded(shape, device=device, dtype=dtype)
