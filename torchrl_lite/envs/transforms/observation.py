"""Value transforms of observations: ObservationNorm, DTypeCastTransform, DoubleToFloat."""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.stepper.forms import Elementwise
from torchrl_lite.envs.transforms._utils import check_affine
from torchrl_lite.envs.transforms.transforms import Transform, map_leaf_spec, require_keys

__all__ = ["ObservationNorm", "DTypeCastTransform", "DoubleToFloat"]

_OBS_NORM_DEFAULT_KEYS = [K.OBSERVATION, K.PIXELS]


class ObservationNorm(Transform):
    """Affine normalisation: ``x * scale + loc``, or ``(x - loc) / scale`` if ``standard_normal``.

    With ``in_keys=None`` it normalises whichever of ``"observation"`` and ``"pixels"`` the
    env has (in a pixels-only env, the images). ``loc`` and ``scale`` may be left out and
    computed from a random rollout of the parent env with ``init_stats``; using the
    transform before that raises a RuntimeError.

    Args:
        loc: location (a number or a tensor broadcastable to the entries).
        scale: scale (same).
        in_keys: entries to normalise (default: ``"observation"`` and/or ``"pixels"``).
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries to un-normalise before the step (env names).
        out_keys_inv: the policy's names for them.
        standard_normal: ``(x - loc) / scale`` instead of ``x * scale + loc``.
        eps: lower bound of ``scale`` when dividing.

    Example:
        >>> t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True)
        >>> t(TensorDict({"observation": torch.tensor([3.0, 5.0])}, []))["observation"]
        tensor([1., 2.])
    """

    def __init__(
        self,
        loc=None,
        scale=None,
        in_keys=None,
        out_keys=None,
        in_keys_inv=None,
        out_keys_inv=None,
        standard_normal: bool = False,
        eps: float = 1e-6,
    ):
        self._default_keys = in_keys is None
        super().__init__(
            in_keys=list(_OBS_NORM_DEFAULT_KEYS) if in_keys is None else in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )
        if (loc is None) != (scale is None):
            raise ValueError(
                "ObservationNorm needs both loc and scale, or neither (then call init_stats)."
            )
        self.standard_normal = standard_normal
        self.eps = eps
        for name in ("loc", "scale"):
            self.register_buffer(name, None)
        self._a = self._b = self._ia = self._ib = (
            None  # plain attributes: no buffer lookup per step
        )
        if loc is not None:
            self.loc = torch.as_tensor(loc, dtype=torch.get_default_dtype())
            self.scale = torch.as_tensor(scale, dtype=torch.get_default_dtype())
            check_affine("ObservationNorm", self.loc, self.scale, standard_normal)
            self._update_affine()

    @property
    def initialized(self) -> bool:
        return self.loc is not None

    def _update_affine(self) -> None:
        """``y = x * _a + _b`` and ``x = y * _ia + _ib``, computed once."""
        loc, scale = self._buffers["loc"], self._buffers["scale"]
        if loc is None:
            return
        if self.standard_normal:
            a = 1.0 / scale.clamp_min(self.eps)
            b = -loc * a
        else:
            a, b = scale.clone(), loc.clone()
        self._a, self._b = a, b
        self._ia = 1.0 / a.clamp_min(self.eps) if self.standard_normal else 1.0 / a
        self._ib = -b * self._ia

    def _on_apply(self, fn):
        self._update_affine()

    def _apply_transform(self, x):
        if self._a is None:
            raise RuntimeError(self._uninitialized_message())
        return torch.addcmul(self._b, x, self._a)

    def _inv_apply_transform(self, x):
        if self._a is None:
            raise RuntimeError(self._uninitialized_message())
        return torch.addcmul(self._ib, x, self._ia)

    def _numpy_form(self):
        # without loc/scale yet, the general loop raises its error
        return None if self._a is None else Elementwise(self)

    def _uninitialized_message(self) -> str:
        return "ObservationNorm has no loc/scale yet: pass loc and scale, or call init_stats(num_iter) once it is in a TransformedEnv."

    def _transform_leaf_spec(self, spec):
        if self._a is None:
            dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
            return Unbounded(spec.shape, device=spec.device, dtype=dtype)
        return map_leaf_spec(spec, self._apply_transform)

    _inv_transform_leaf_spec = _transform_leaf_spec

    def _attach(self, specs):
        if self._default_keys:
            present = [k for k in _OBS_NORM_DEFAULT_KEYS if k in specs.observation]
            if not present:
                require_keys(self, _OBS_NORM_DEFAULT_KEYS[:1], specs.observation.keys(True, True))
            self.in_keys = present
        super()._attach(specs)
        self._check_affine_shapes(specs.observation)

    def _check_affine_shapes(self, observation_spec) -> None:
        """loc and scale must broadcast to each normalised entry's shape (checked at attach)."""
        if self.loc is None:
            return
        for key in self.in_keys:
            spec = observation_spec.get(key, None) if key in observation_spec else None
            if spec is None:
                continue
            for name in ("loc", "scale"):
                shape = self._buffers[name].shape
                try:
                    fits = torch.broadcast_shapes(shape, spec.shape) == spec.shape
                except RuntimeError:
                    fits = False
                if not fits:
                    raise ValueError(
                        f"ObservationNorm: {name} of shape {list(shape)} cannot apply to {key!r} "
                        f"of shape {list(spec.shape)} ({spec}); give a {name} broadcastable to "
                        f"{list(spec.shape)} (e.g. shape {list(spec.shape[-1:])}), or call "
                        f"init_stats instead."
                    )

    def _check_present(self, tensordict, pairs):
        if self._default_keys and self.container is None:
            keys = tensordict.keys(True, True)
            if not any(k in keys for k in _OBS_NORM_DEFAULT_KEYS):
                raise KeyError("ObservationNorm: " + missing_key_message(K.OBSERVATION, keys))
            return
        super()._check_present(tensordict, pairs)

    def init_stats(
        self, num_iter: int, reduce_dim=0, cat_dim: int | None = None, key=None, keep_dims=None
    ) -> None:
        """Set loc and scale from ``num_iter`` frames of random rollouts of the parent env.

        Args:
            num_iter: number of frames to collect (rollouts of up to ``num_iter`` steps).
            reduce_dim: dim(s) of the collected data to average over (time is dim 0 of a
                single env's rollout; use ``(0, 1)`` for a batched env).
            cat_dim: dim along which rollouts are concatenated (default: ``reduce_dim``,
                or its first entry).
            key: the entry to measure (default: the only in_key).
            keep_dims: reduced dims to keep as size 1 (e.g. ``(-1, -2)`` for ``[C, 1, 1]``).
        """
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "init_stats needs the transform to be in a TransformedEnv (it rolls out the env)."
            )
        if isinstance(num_iter, bool) or not isinstance(num_iter, int) or num_iter < 1:
            raise ValueError(f"init_stats: num_iter must be an int >= 1, got {num_iter!r}")
        if key is None:
            if len(self.in_keys) != 1:
                raise ValueError(
                    f"init_stats: this ObservationNorm has several in_keys {self.in_keys}; pass key=."
                )
            key = self.in_keys[0]
        reduce = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        if cat_dim is None:
            cat_dim = reduce[0]
        frames, chunks = 0, []
        while frames < num_iter:
            rollout = parent.rollout(max_steps=num_iter)
            frames += rollout.numel()
            chunks.append(rollout.get(key))
        data = torch.cat(chunks, cat_dim)
        if not data.dtype.is_floating_point:
            data = data.to(torch.get_default_dtype())
        loc = data.mean(reduce, keepdim=True)
        scale = data.std(reduce, keepdim=True)
        keep = {d % data.dim() for d in (keep_dims or ())}
        for d in sorted({d % data.dim() for d in reduce}, reverse=True):
            if d not in keep:
                loc, scale = loc.squeeze(d), scale.squeeze(d)
        if not self.standard_normal:
            scale = 1.0 / scale.clamp_min(self.eps)
            loc = -loc * scale
        self.loc, self.scale = loc, scale
        self._update_affine()
        self._specs_changed()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("loc", "scale"):
            if getattr(self, name) is None and prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._update_affine()

    def extra_repr(self):
        if self.loc is None:
            stats = "loc=None, scale=None"
        else:
            stats = (
                f"loc={self.loc.flatten()[:4].tolist()}, scale={self.scale.flatten()[:4].tolist()}"
            )
        return f"{stats}, standard_normal={self.standard_normal}, " + super().extra_repr()


class DTypeCastTransform(Transform):
    """Cast entries from ``dtype_in`` to ``dtype_out`` (and actions back before the step).

    With neither ``in_keys`` nor ``in_keys_inv`` given, every observation and reward entry
    of ``dtype_in`` is cast, and every action entry of ``dtype_in`` is exposed to the
    policy as ``dtype_out`` (outside an env: every entry of ``dtype_in``).

    Args:
        dtype_in: the env's dtype.
        dtype_out: the dtype seen outside.
        in_keys: entries to cast (env side).
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries cast back to ``dtype_in`` before the step (env names).
        out_keys_inv: the policy's names for them.

    Example:
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["observation"])
        >>> t(TensorDict({"observation": torch.zeros(2, dtype=torch.float64)}, []))["observation"].dtype
        torch.float32
    """

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys=None,
        out_keys=None,
        in_keys_inv=None,
        out_keys_inv=None,
    ):
        for name, dtype in (("dtype_in", dtype_in), ("dtype_out", dtype_out)):
            if not isinstance(dtype, torch.dtype):
                raise TypeError(
                    f"{type(self).__name__}: {name} must be a torch.dtype, got {dtype!r}"
                )
        self._auto = in_keys is None and in_keys_inv is None
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.dtype_in, self.dtype_out = dtype_in, dtype_out

    def _apply_transform(self, x):
        return x.to(self.dtype_out)

    def _inv_apply_transform(self, x):
        return x.to(self.dtype_in)

    def _inv_transform_leaf_spec(self, spec):
        return map_leaf_spec(spec, self._apply_transform)

    def _attach(self, specs):
        if self._auto:
            self.in_keys = [
                k
                for c in (specs.observation, specs.reward)
                for k, s in c.items(True, True)
                if s.dtype == self.dtype_in
            ]
            self.in_keys_inv = [
                k for k, s in specs.action.items(True, True) if s.dtype == self.dtype_in
            ]
        super()._attach(specs)

    def forward(self, tensordict):
        if self._auto and self.container is None:
            for key, value in list(tensordict.items(True, True)):
                if value.dtype == self.dtype_in:
                    tensordict.set(key, value.to(self.dtype_out))
            return tensordict
        return super().forward(tensordict)

    def _numpy_form(self):
        """A cast of observation entries in place (no action entries, no renaming); None
        otherwise (the general loop)."""
        if self.in_keys_inv or list(self.out_keys) != list(self.in_keys):
            return None
        if not all(isinstance(k, str) for k in self.in_keys):
            return None
        from torchrl_lite.envs.stepper.forms import Cast

        dtype = torch.empty(0, dtype=self.dtype_out).numpy().dtype
        return Cast({key: dtype for key in self.in_keys})

    def extra_repr(self):
        return f"dtype_in={self.dtype_in}, dtype_out={self.dtype_out}, " + super().extra_repr()


class DoubleToFloat(DTypeCastTransform):
    """Cast float64 entries to float32 (and float32 actions back to float64).

    Args:
        in_keys: entries to cast (default: every float64 observation and reward entry;
            then float64 actions are exposed as float32 too).
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries cast back to float64 before the step.
        out_keys_inv: the policy's names for them.

    Example:
        >>> DoubleToFloat()(TensorDict({"observation": torch.zeros(2, dtype=torch.float64)}, []))["observation"].dtype
        torch.float32
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(torch.float64, torch.float32, in_keys, out_keys, in_keys_inv, out_keys_inv)

    _numpy_form = DTypeCastTransform._numpy_form
