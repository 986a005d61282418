"""Value-bounding transforms: ClipTransform (clamp to ``[low, high]``) and SignTransform."""

from __future__ import annotations

import torch

from torchrl_lite.data.tensor_specs import Bounded
from torchrl_lite.envs.transforms.transforms import Transform

__all__ = ["ClipTransform", "SignTransform"]


def _scalar_bound(name: str, value) -> torch.Tensor | None:
    if value is None:
        return None
    bound = torch.as_tensor(value)
    if bound.numel() != 1:
        raise TypeError(
            f"ClipTransform: {name} must be a scalar or None, got a value of shape "
            f"{tuple(bound.shape)}; append one ClipTransform per bound."
        )
    return bound.to(torch.get_default_dtype()).reshape(())


class ClipTransform(Transform):
    """Clamp entries to ``[low, high]``: observations or rewards, and actions on their way in.

    Args:
        in_keys: entries clamped after ``reset``/``step`` (default: none).
        out_keys: where to write them (default: in place).
        in_keys_inv: action or state entries clamped before the env's step.
        out_keys_inv: the policy's names for them (default: ``in_keys_inv``).
        low: lower bound (a scalar) or None for none.
        high: upper bound (a scalar) or None for none; at least one bound is needed.

    The spec of a clamped output becomes ``Bounded`` (an open side uses the dtype's
    largest value). The action spec the policy sees is the env's own.

    Example:
        >>> t = ClipTransform(in_keys=["observation"], low=-1.0, high=1.0)
        >>> t(TensorDict({"observation": torch.tensor([-3.0, 0.5, 2.0])}, []))["observation"]
        tensor([-1.0000,  0.5000,  1.0000])
    """

    def __init__(
        self,
        in_keys=None,
        out_keys=None,
        in_keys_inv=None,
        out_keys_inv=None,
        *,
        low=None,
        high=None,
    ):
        super().__init__(
            in_keys=in_keys or [],
            out_keys=out_keys,
            in_keys_inv=in_keys_inv or [],
            out_keys_inv=out_keys_inv,
        )
        if low is None and high is None:
            raise TypeError("ClipTransform needs low, high or both (got neither).")
        low, high = _scalar_bound("low", low), _scalar_bound("high", high)
        if low is not None and high is not None and not bool(low < high):
            raise ValueError(
                f"ClipTransform: low ({float(low)}) must be strictly lower than high ({float(high)})."
            )
        self.register_buffer("low", low)
        self.register_buffer("high", high)

    def _clamp(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(self.low, self.high)

    def _apply_transform(self, x):
        return self._clamp(x)

    def _inv_apply_transform(self, x):
        return self._clamp(x)

    def _transform_leaf_spec(self, spec):
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        extreme = torch.finfo(dtype).max
        low = self.low.to(dtype) if self.low is not None else torch.tensor(-extreme, dtype=dtype)
        high = self.high.to(dtype) if self.high is not None else torch.tensor(extreme, dtype=dtype)
        if isinstance(spec, Bounded):  # keep the tighter of the two bounds
            low = torch.maximum(spec.low.to(dtype), low)
            high = torch.minimum(spec.high.to(dtype), high)
        return Bounded(low, high, spec.shape, device=spec.device, dtype=spec.dtype)

    def _inv_transform_leaf_spec(self, spec):
        return spec.clone()  # the policy may write any value: it is clamped on the way in

    def extra_repr(self):
        low = None if self.low is None else float(self.low)
        high = None if self.high is None else float(self.high)
        return f"low={low}, high={high}, " + super().extra_repr()


class SignTransform(Transform):
    """Replace entries by their sign (-1, 0 or 1), e.g. Atari's reward clipping.

    Args:
        in_keys: entries to map (e.g. ``["reward"]``).
        out_keys: where to write them (default: in place).
        in_keys_inv: action or state entries mapped before the env's step.
        out_keys_inv: the policy's names for them.

    Example:
        >>> t = SignTransform(in_keys=["reward"])
        >>> t(TensorDict({"reward": torch.tensor([-2.5, 0.0, 7.0])}, [3]))["reward"]
        tensor([-1.,  0.,  1.])
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(
            in_keys=in_keys or [],
            out_keys=out_keys,
            in_keys_inv=in_keys_inv or [],
            out_keys_inv=out_keys_inv,
        )

    def _apply_transform(self, x):
        return torch.sign(x)

    def _inv_apply_transform(self, x):
        return torch.sign(x)

    def _transform_leaf_spec(self, spec):
        if spec.dtype.is_floating_point or spec.dtype in (
            torch.int8,
            torch.int16,
            torch.int32,
            torch.int64,
        ):
            return Bounded(-1, 1, spec.shape, device=spec.device, dtype=spec.dtype)
        return spec.clone()

    def _inv_transform_leaf_spec(self, spec):
        return spec.clone()
