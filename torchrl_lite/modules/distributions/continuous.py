"""Continuous action distributions: ``TanhNormal``, ``IndependentNormal``, ``TanhDelta``,
``TruncatedNormal`` and ``NormalParamsWrapper``.

Every distribution treats the last dim of its parameters as the event (one action), so
``log_prob`` returns one value per action: ``[*B]`` for parameters ``[*B, A]``.
"""

from __future__ import annotations

import math
import warnings
from numbers import Number

import torch
from tensordict.nn.distributions import Delta, NormalParamExtractor
from tensordict.nn.distributions import TruncatedNormal as _TDTruncatedNormal
from torch import distributions as D
from torch import nn
from torch.distributions import constraints
from torch.nn import functional as F

from torchrl_lite.modules.distributions._safe_tanh import SafeTanhTransform  # noqa: F401

_EMPTY = torch.Size()

__all__ = [
    "TanhNormal",
    "IndependentNormal",
    "TanhDelta",
    "TruncatedNormal",
    "NormalParamsWrapper",
    "NormalParamWrapper",
]

_LOG_2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _squash_loc(loc: torch.Tensor, upscale, tanh_loc: bool) -> torch.Tensor:
    """``upscale * tanh(loc / upscale)`` when ``tanh_loc``: keeps the location in ``±upscale``."""
    return upscale * torch.tanh(loc / upscale) if tanh_loc else loc


def _low_high(owner: str, low, high, aliases: dict) -> tuple:
    """``(low, high)`` from TorchRL's keywords: ``low``/``high`` or the seed-era ``min``/``max``.

    ``aliases`` holds the ``min``/``max`` values given (None when absent); a bound given
    under both names raises ``TypeError``; the defaults are -1 and 1.
    """
    out = []
    for name, value, alias, default in (
        ("low", low, "min", -1.0),
        ("high", high, "max", 1.0),
    ):
        other = aliases.get(alias)
        if other is not None:
            if value is not None:
                raise TypeError(
                    f"{owner}: got both {name}={value!r} and {alias}={other!r}; {alias} is "
                    f"TorchRL's older name of {name}, give one."
                )
            value = other
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            # TorchRL's v0.4 scripts slice a batched spec's bound to shape [0, A]; TorchRL
            # reads a bound with no entries as no bound, so the default applies (said aloud)
            warnings.warn(
                f"{owner}: {name} has no entries (shape {list(value.shape)}); using the "
                f"default {name}={default}. Pass the unbatched spec's bound to bound the "
                "actions (e.g. env.action_spec_unbatched.space.low).",
                stacklevel=3,
            )
            value = None
        out.append(default if value is None else value)
    return tuple(out)


def _check_scale(owner: str, scale) -> None:
    """ValueError for a zero, negative or NaN ``scale`` (a std must be > 0). Checked where it
    costs no device sync (CPU tensors, not while torch.compile/export traces); on an
    accelerator ``validate_args=True`` checks it."""
    if not isinstance(scale, torch.Tensor):
        scale = torch.as_tensor(scale)
    if scale.device.type != "cpu" or torch.compiler.is_compiling() or not scale.numel():
        return
    if not scale.min().item() > 0:  # the cheapest form; a NaN minimum fails too
        bad = ~(scale > 0)
        raise ValueError(
            f"{owner}: scale must be > 0 everywhere, got {scale[bad].flatten()[:4].tolist()} "
            f"at {int(bad.sum())} of {scale.numel()} entries. Map the network's output through "
            "a positive function first (e.g. NormalParamExtractor's biased softplus)."
        )


def _event_dims(loc: torch.Tensor, event_dims: int | None) -> int:
    return min(1, loc.dim()) if event_dims is None else event_dims


class _Bounds:
    """``low``/``high`` as centre and half-range, floats kept as floats (no tensor ops)."""

    def __init__(self, low, high, like: torch.Tensor):
        if isinstance(low, Number) and isinstance(high, Number):
            if not low < high:
                raise ValueError(f"Expected low < high, got low={low}, high={high}.")
            self.low, self.high = float(low), float(high)
            self.center = (self.high + self.low) / 2
            self.half = (self.high - self.low) / 2
            self.log_half = math.log(self.half)
            self.is_float, self.unit = True, (self.center, self.half) == (0.0, 1.0)
            return
        kw = {"device": like.device, "dtype": like.dtype}
        low, high = torch.as_tensor(low, **kw), torch.as_tensor(high, **kw)
        # the check needs the values on the host: skipped for accelerator tensors (no sync)
        # and while torch.export traces (the bounds are symbolic there)
        checkable = low.device.type == "cpu" and not torch.compiler.is_compiling()
        if checkable and bool((low >= high).any()):
            raise ValueError(f"Expected low < high everywhere, got low={low}, high={high}.")
        self.low, self.high = low, high
        self.center = (high + low) / 2
        self.half = (high - low) / 2
        self.log_half = self.half.log()
        self.is_float = self.unit = False

    def shape(self) -> torch.Size:
        if self.is_float:
            return _EMPTY
        return self.center.shape


_BOUNDS_CACHE: list = [None]  # ((low, high, versions, dtype, device), _Bounds) of the last call


def _bounds(low, high, like: torch.Tensor) -> _Bounds:
    """``_Bounds(low, high)``, reused while the same bound tensors come back unchanged.

    An actor passes its spec's ``low``/``high`` tensors at every call: computing their
    centre and half-range once saves a few tensor ops per step.
    """
    if not (isinstance(low, torch.Tensor) and isinstance(high, torch.Tensor)):
        return _Bounds(low, high, like)
    if low.requires_grad or high.requires_grad:
        return _Bounds(low, high, like)
    key = (low._version, high._version, like.dtype, like.device)
    hit = _BOUNDS_CACHE[0]
    if hit is not None and hit[0][0] is low and hit[0][1] is high and hit[0][2] == key:
        return hit[1]
    out = _Bounds(low, high, like)
    _BOUNDS_CACHE[0] = ((low, high, key), out)
    return out


def _sum_event(x: torch.Tensor, event_dims: int) -> torch.Tensor:
    return x.sum(tuple(range(-event_dims, 0))) if event_dims else x


class TanhNormal(D.Distribution):
    """A Normal distribution squashed by tanh into ``[low, high]``: ``a = c + h * tanh(x)``.

    With ``x ~ Normal(loc, scale)``, ``c = (high + low) / 2`` and ``h = (high - low) / 2``,
    ``log p(a) = log N(x; loc, scale) - log h - log(1 - tanh(x)^2)``, the last term as
    ``2 (log 2 - x - softplus(-2x))`` (no cancellation). Values at the bounds are moved in
    by one float epsilon before ``atanh``, so ``log_prob`` stays finite there; the latest
    differentiable ``rsample`` is scored from its pre-tanh value (exact at the bounds), a
    sample drawn without gradients from its value, as a loss scores it (PPO's ratio: 1). ``mode`` is ``c + h * tanh(loc)``; ``entropy()`` is a
    differentiable Monte-Carlo estimate; ``mean`` has no closed form.

    Args:
        loc: location of the Normal before squashing, ``[*B, A]``.
        scale: standard deviation of the Normal (positive), broadcastable to ``loc``.
        low: lower bound, a number or a tensor broadcastable to ``loc``; default -1.
        high: upper bound, likewise; default 1.
        upscale: with ``tanh_loc``, the location becomes ``upscale * tanh(loc / upscale)``.
        tanh_loc: squash the location into ``±upscale`` first.
        event_dims: trailing dims that form one event (default 1: ``log_prob`` is ``[*B]``).
        min: the seed-era name of ``low`` (TorchRL <= 0.4); give one of them.
        max: the seed-era name of ``high``.
        safe_tanh: TorchRL's switch to keep samples off the bounds (always on here).
        validate_args: check ``scale > 0`` and a real ``loc`` (off by default: a host sync).

    Example:
        >>> dist = TanhNormal(torch.zeros(3, 2), torch.ones(3, 2), low=-2.0, high=2.0)
        >>> dist.rsample().shape, dist.log_prob(dist.rsample()).shape
        (torch.Size([3, 2]), torch.Size([3]))
        >>> bool(dist.log_prob(torch.full((3, 2), 2.0)).isfinite().all())
        True
        >>> dist.mode
        tensor([[0., 0.],
                [0., 0.],
                [0., 0.]])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    has_rsample = True
    num_params = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        upscale: float | torch.Tensor = 5.0,
        tanh_loc: bool = False,
        event_dims: int | None = None,
        validate_args: bool = False,
        *,
        min: float | torch.Tensor | None = None,  # TorchRL <= 0.4 keyword
        max: float | torch.Tensor | None = None,
        safe_tanh: bool = True,
    ):
        # TorchRL's safe_tanh keeps samples off the bounds; here log_prob is always computed
        # safely (see above), so both values give the same distribution
        self.safe_tanh = bool(safe_tanh)
        low, high = _low_high("TanhNormal", low, high, {"min": min, "max": max})
        loc = _squash_loc(loc, upscale, tanh_loc)
        if not isinstance(scale, torch.Tensor):
            scale = torch.as_tensor(scale, device=loc.device, dtype=loc.dtype)
        _check_scale("TanhNormal", scale)
        self._bounds = _bounds(low, high, loc)
        shape, bounds_shape = loc.shape, self._bounds.shape()
        # bounds [A] under a loc [*B, A] (the usual case) broadcast to loc's shape as is
        bounds_fit = not bounds_shape or shape[len(shape) - len(bounds_shape) :] == bounds_shape
        if scale.shape != shape or not bounds_fit:
            shape = torch.broadcast_shapes(shape, scale.shape, bounds_shape)  # slow: ~20 us
        if loc.shape != shape:
            loc = loc.expand(shape)
        if scale.shape != shape:
            scale = scale.expand(shape)
        self.loc, self.scale = loc, scale
        self.upscale, self.tanh_loc = upscale, tanh_loc
        self._last_sample = None
        self.event_dims = _event_dims(loc, event_dims)
        split = loc.dim() - self.event_dims
        self._event_numel = math.prod(shape[split:])
        # validate_args=True: torch checks scale > 0 and a real loc (a host sync, so off by
        # default: pass it through ProbabilisticActor's distribution_kwargs while debugging)
        super().__init__(shape[:split], shape[split:], validate_args=validate_args)

    @property
    def low(self):
        return self._bounds.low

    @property
    def high(self):
        return self._bounds.high

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self._bounds.low, self._bounds.high)

    @property
    def base_dist(self) -> D.Normal:
        """The Normal distribution before squashing (elementwise, no event dims)."""
        return D.Normal(self.loc, self.scale, validate_args=False)

    def _squash(self, x: torch.Tensor) -> torch.Tensor:
        b, y = self._bounds, torch.tanh(x)
        if b.unit:  # the common [-1, 1]: skip the affine map (fewer ops at batch 1)
            return y
        if b.is_float:
            return y * b.half + b.center
        return torch.addcmul(b.center, y, b.half)

    def rsample(self, sample_shape=_EMPTY) -> torch.Tensor:
        """Reparameterised sample ``[*sample_shape, *B, A]`` (gradients reach loc and scale)."""
        if sample_shape:
            shape = self._extended_shape(sample_shape)
            eps = torch.randn(shape, device=self.loc.device, dtype=self.loc.dtype)
        else:
            eps = torch.randn_like(self.loc)
        x = torch.addcmul(self.loc, self.scale, eps)
        a = self._squash(x)
        if x.requires_grad:  # a training sample: log_prob(a) uses x (see the class docstring)
            self._last_sample = (a, x)
        return a

    def sample(self, sample_shape=_EMPTY) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """Log-density of ``value`` (``[*S, *B, A]``), summed over the event: ``[*S, *B]``."""
        last = self._last_sample
        if last is not None and value is last[0]:
            return self._log_prob_pre_tanh(last[1])
        b = self._bounds
        u = value if b.unit else (value - b.center) / b.half  # in [-1, 1]
        eps = torch.finfo(u.dtype).eps
        x = torch.atanh(u.clamp(-1.0 + eps, 1.0 - eps))  # the pre-tanh value
        return self._log_prob_pre_tanh(x)

    def _log_prob_pre_tanh(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(a)`` for ``a = squash(x)``, from the pre-tanh ``x`` (no ``atanh``)."""
        b = self._bounds
        z = (x - self.loc) / self.scale
        # log N(x) - log|da/dx| = -z^2/2 - log s - log(2 pi)/2 - 2 (log 2 - x - softplus(-2x)) - log h
        # computed as 2 * (x + softplus(-2x) - log(s)/2 - z^2/4) - constants: fewer ops
        half_lp = torch.sub(x + F.softplus(-2.0 * x), self.scale.log(), alpha=0.5)
        if not b.is_float:
            half_lp = torch.sub(half_lp, b.log_half, alpha=0.5)
        half_lp = torch.addcmul(half_lp, z, z, value=-0.25)
        const = _HALF_LOG_2PI + 2.0 * _LOG_2 + (b.log_half if b.is_float else 0.0)
        return _sum_event(half_lp, self.event_dims).mul(2.0).sub_(const * self._event_numel)

    @property
    def mode(self) -> torch.Tensor:
        """``c + h * tanh(loc)``: the squashed location, always inside ``[low, high]``."""
        return self._squash(self.loc)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def entropy(self, num_samples: int = 1) -> torch.Tensor:
        """Monte-Carlo entropy estimate ``-mean log p(a)`` over ``num_samples`` rsamples, ``[*B]``.

        The density is evaluated at the pre-tanh sample itself, not at ``atanh`` of the
        squashed one: samples that round to a bound would be clamped there, which cuts
        their gradient and makes the estimate grow with ``scale`` without limit.
        """
        shape = self._extended_shape((num_samples,))
        eps = torch.randn(shape, device=self.loc.device, dtype=self.loc.dtype)
        x = torch.addcmul(self.loc, self.scale, eps)
        return -self._log_prob_pre_tanh(x).mean(0)

    def __repr__(self) -> str:
        return (
            f"TanhNormal(loc: {list(self.loc.shape)}, scale: {list(self.scale.shape)}, "
            f"low={self.low}, high={self.high}, event_dims={self.event_dims})"
        )


class IndependentNormal(D.Independent):
    """A Normal over the last dim (``Independent(Normal(loc, scale), 1)``): ``log_prob`` sums it.

    Args:
        loc: mean, ``[*B, A]``.
        scale: standard deviation, broadcastable to ``loc``.
        upscale: with ``tanh_loc``, the mean becomes ``upscale * tanh(loc / upscale)``.
        tanh_loc: squash the mean into ``±upscale`` first.
        event_dim: trailing dims that form one event (default 1).
        validate_args: check ``scale > 0`` (ValueError naming it; a host sync, off by default).

    Example:
        >>> dist = IndependentNormal(torch.zeros(4, 2), torch.ones(4, 2))
        >>> dist.log_prob(torch.zeros(4, 2)).shape, dist.deterministic_sample.shape
        (torch.Size([4]), torch.Size([4, 2]))
    """

    num_params = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        upscale: float = 5.0,
        tanh_loc: bool = False,
        event_dim: int = 1,
        validate_args: bool = False,
    ):
        loc = _squash_loc(loc, upscale, tanh_loc)
        _check_scale("IndependentNormal", scale)
        base = D.Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, min(event_dim, base.loc.dim()), validate_args=False)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.base_dist.loc


class TanhDelta(Delta):
    """A deterministic action ``c + h * tanh(param)`` in ``[low, high]`` (e.g. DDPG/TD3 actors).

    Args:
        param: the pre-tanh action, ``[*B, A]``.
        low: lower bound, a number or a tensor broadcastable to ``param``; default -1.
        high: upper bound, likewise; default 1.
        event_dims: trailing dims that form one event (default 1).
        atol: absolute tolerance of ``log_prob``'s equality test.
        rtol: relative tolerance of ``log_prob``'s equality test.
        min: the seed-era name of ``low`` (TorchRL <= 0.4); give one of them.
        max: the seed-era name of ``high``.
        safe: keep a saturated tanh one float resolution inside ``(-1, 1)`` (TorchRL's
            safe tanh, its default), so the action stays strictly inside the bounds.
            Default False here: the plain tanh, which reaches the bounds (as before).

    Example:
        >>> dist = TanhDelta(torch.tensor([[0.0, 100.0]]), low=-2.0, high=2.0)
        >>> dist.mode
        tensor([[0., 2.]])
        >>> dist.log_prob(dist.sample())
        tensor([inf])
    """

    def __init__(
        self,
        param: torch.Tensor,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        event_dims: int = 1,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        *,
        min: float | torch.Tensor | None = None,  # TorchRL <= 0.4 keyword
        max: float | torch.Tensor | None = None,
        safe: bool = False,
    ):
        low, high = _low_high("TanhDelta", low, high, {"min": min, "max": max})
        self._bounds = _bounds(low, high, param)
        squashed = SafeTanhTransform()(param) if safe else torch.tanh(param)
        value = squashed * self._bounds.half + self._bounds.center
        split = value.dim() - (event_dims if event_dims < value.dim() else value.dim())
        super().__init__(
            value,
            atol=atol,
            rtol=rtol,
            batch_shape=value.shape[:split],
            event_shape=value.shape[split:],
        )

    @property
    def low(self):
        return self._bounds.low

    @property
    def high(self):
        return self._bounds.high

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self._bounds.low, self._bounds.high)


class TruncatedNormal(D.Independent):
    """A Normal restricted to ``[low, high]`` over the last dim (tensordict's maths, TorchRL's signature).

    Wraps ``tensordict.nn.distributions.TruncatedNormal(loc, scale, a, b)`` in an
    ``Independent`` so that ``log_prob`` sums over the action dim.

    Args:
        loc: mean of the Normal before truncation, ``[*B, A]``.
        scale: standard deviation before truncation.
        upscale: with ``tanh_loc``, the mean becomes ``upscale * tanh(loc / upscale)``.
        low: lower bound (number or tensor).
        high: upper bound (number or tensor).
        tanh_loc: squash the mean into ``±upscale`` first.
        event_dims: trailing dims that form one event (default 1).

    Example:
        >>> dist = TruncatedNormal(torch.zeros(2, 3), torch.ones(2, 3), low=-1.0, high=1.0)
        >>> bool(((dist.sample() >= -1) & (dist.sample() <= 1)).all()), dist.log_prob(dist.mode).shape
        (True, torch.Size([2]))
    """

    num_params = 2
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        upscale: float = 5.0,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        tanh_loc: bool = False,
        event_dims: int = 1,
    ):
        bounds = _bounds(low, high, loc)
        loc = _squash_loc(loc, upscale, tanh_loc)
        _check_scale("TruncatedNormal", scale)
        base = _TDTruncatedNormal(loc, scale, bounds.low, bounds.high, validate_args=False)
        self.low, self.high = bounds.low, bounds.high
        super().__init__(base, min(event_dims, base.loc.dim()), validate_args=False)

    @property
    def mode(self) -> torch.Tensor:
        """The location clamped into the bounds: the most likely value."""
        base = self.base_dist
        return torch.maximum(torch.minimum(base.loc, base._non_std_b), base._non_std_a)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class NormalParamsWrapper(nn.Module):
    """Wraps a module so that its output's last dim is split into a Normal's ``loc`` and ``scale``.

    ``wrapper(*inputs)`` returns ``(loc, scale, *other_outputs)``; the scale goes through
    ``scale_mapping`` and is at least ``scale_lb`` (see ``NormalParamExtractor``).

    Args:
        operator: the module whose output (last dim of even size ``2 * A``) is split.
        scale_mapping: positive mapping of the scale half (``"biased_softplus_1.0"``,
            ``"exp"``, ``"softplus"``, ...).
        scale_lb: smallest scale.

    Example:
        >>> net = NormalParamsWrapper(nn.Linear(3, 4))
        >>> loc, scale = net(torch.randn(5, 3))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([5, 2]), True)
    """

    def __init__(
        self,
        operator: nn.Module,
        scale_mapping: str = "biased_softplus_1.0",
        scale_lb: float = 1e-4,
    ):
        super().__init__()
        self.operator = operator
        self.scale_mapping = scale_mapping
        self.scale_lb = scale_lb
        self.extractor = NormalParamExtractor(scale_mapping=scale_mapping, scale_lb=scale_lb)

    def forward(self, *inputs, **kwargs) -> tuple[torch.Tensor, ...]:
        out = self.operator(*inputs, **kwargs)
        if not isinstance(out, tuple):
            out = (out,)
        return self.extractor(*out)


NormalParamWrapper = NormalParamsWrapper  # TorchRL's seed-era spelling (v0.4-v0.6)
