"""Shape transforms: Unsqueeze, Squeeze, FlattenObservation, PermuteTransform, CatTensors.

Dims are negative (counted from the last dim), so the same transform works whatever the
batch dims of the TensorDict (one env, a batch of envs, a stored ``[B, T]`` batch).
"""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Bounded, Unbounded
from torchrl_lite.envs.transforms.transforms import (
    Transform,
    _norm_key,
    _norm_keys,
    map_leaf_spec,
    require_keys,
)

__all__ = [
    "UnsqueezeTransform",
    "SqueezeTransform",
    "FlattenObservation",
    "PermuteTransform",
    "CatTensors",
]


def _negative_dim(transform_name: str, name: str, dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim >= 0:
        raise ValueError(
            f"{transform_name}: {name} must be a negative int (counted from the last dim, so that batch dims do not matter), got {dim!r}"
        )
    return dim


def _dim_or_alias(transform_name: str, dim, alias, alias_name: str):
    """``dim``, or its seed-era keyword ``alias``: exactly one of them."""
    if dim is not None and alias is not None:
        raise TypeError(f"{transform_name}: pass dim or {alias_name} (the same thing), not both")
    if dim is None and alias is None:
        raise TypeError(f"{transform_name}: missing the dim argument (e.g. dim=-1)")
    return dim if dim is not None else alias


def _feature_shape(specs, key) -> torch.Size:
    return specs.find(key)[1].shape[len(specs.batch_size) :]


def _require_keys_given(name: str, in_keys, in_keys_inv) -> None:
    if not in_keys and not in_keys_inv:
        raise ValueError(f"{name} needs in_keys (or in_keys_inv): the entries to reshape.")


class UnsqueezeTransform(Transform):
    """Insert a dim of size 1 at ``dim`` (negative, counted on the output).

    Args:
        dim: where the new dim goes (``-1``: last). ``unsqueeze_dim=`` is the seed-era
            TorchRL name of the same argument.
        in_keys: entries to reshape.
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries squeezed back before the step (env names).
        out_keys_inv: the policy's names for them.

    Example:
        >>> UnsqueezeTransform(-1, in_keys=["observation"])(TensorDict({"observation": torch.zeros(3)}, []))["observation"].shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        dim: int | None = None,
        in_keys=None,
        out_keys=None,
        in_keys_inv=None,
        out_keys_inv=None,
        *,
        unsqueeze_dim: int | None = None,
    ):
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        _require_keys_given(type(self).__name__, self.in_keys, self.in_keys_inv)
        dim = _dim_or_alias(type(self).__name__, dim, unsqueeze_dim, "unsqueeze_dim")
        self.dim = _negative_dim(type(self).__name__, "dim", dim)

    def _apply_transform(self, x):
        return x.unsqueeze(self.dim)

    def _inv_apply_transform(self, x):
        return x.squeeze(self.dim)

    def _inv_transform_leaf_spec(self, spec):
        return map_leaf_spec(spec, self._apply_transform)

    def _attach(self, specs):
        super()._attach(specs)
        for key in self.in_keys + self.in_keys_inv:
            shape = _feature_shape(specs, key)
            if -self.dim > len(shape) + 1:
                raise ValueError(
                    f"{type(self).__name__}: dim {self.dim} is out of range for {key!r} of shape {list(shape)}"
                )

    def extra_repr(self):
        return f"dim={self.dim}, " + super().extra_repr()


class SqueezeTransform(Transform):
    """Remove the dim ``dim`` (negative), which must have size 1.

    Args:
        dim: the dim to remove (``-1``: last). ``squeeze_dim=`` is the seed-era TorchRL
            name of the same argument.
        in_keys: entries to reshape.
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries unsqueezed back before the step (env names).
        out_keys_inv: the policy's names for them.

    Example:
        >>> SqueezeTransform(-1, in_keys=["observation"])(TensorDict({"observation": torch.zeros(3, 1)}, []))["observation"].shape
        torch.Size([3])
    """

    def __init__(
        self,
        dim: int | None = None,
        in_keys=None,
        out_keys=None,
        in_keys_inv=None,
        out_keys_inv=None,
        *,
        squeeze_dim: int | None = None,
    ):
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        _require_keys_given(type(self).__name__, self.in_keys, self.in_keys_inv)
        dim = _dim_or_alias(type(self).__name__, dim, squeeze_dim, "squeeze_dim")
        self.dim = _negative_dim(type(self).__name__, "dim", dim)

    def _apply_transform(self, x):
        if x.shape[self.dim] != 1:
            raise ValueError(
                f"SqueezeTransform: dim {self.dim} of shape {list(x.shape)} has size {x.shape[self.dim]}, not 1"
            )
        return x.squeeze(self.dim)

    def _inv_apply_transform(self, x):
        return x.unsqueeze(self.dim)

    def _inv_transform_leaf_spec(self, spec):
        return map_leaf_spec(spec, self._apply_transform)

    def _attach(self, specs):
        super()._attach(specs)
        for key in self.in_keys + self.in_keys_inv:
            shape = _feature_shape(specs, key)
            if -self.dim > len(shape) or shape[self.dim] != 1:
                raise ValueError(
                    f"SqueezeTransform: {key!r} has shape {list(shape)}; dim {self.dim} must exist and have size 1"
                )

    def extra_repr(self):
        return f"dim={self.dim}, " + super().extra_repr()


class FlattenObservation(Transform):
    """Flatten dims ``first_dim`` to ``last_dim`` (both negative) into one.

    Args:
        first_dim: the first dim to flatten.
        last_dim: the last dim to flatten.
        in_keys: entries to reshape (default ``["pixels"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> FlattenObservation(-3, -1)(TensorDict({"pixels": torch.zeros(3, 4, 5)}, []))["pixels"].shape
        torch.Size([60])
    """

    def __init__(self, first_dim: int, last_dim: int, in_keys=None, out_keys=None):
        super().__init__(in_keys=[K.PIXELS] if in_keys is None else in_keys, out_keys=out_keys)
        self.first_dim = _negative_dim("FlattenObservation", "first_dim", first_dim)
        self.last_dim = _negative_dim("FlattenObservation", "last_dim", last_dim)
        if first_dim > last_dim:
            raise ValueError(
                f"FlattenObservation: first_dim {first_dim} must be <= last_dim {last_dim}"
            )

    def _apply_transform(self, x):
        return x.flatten(self.first_dim, self.last_dim)

    def _attach(self, specs):
        super()._attach(specs)
        for key in self.in_keys:
            shape = _feature_shape(specs, key)
            if -self.first_dim > len(shape):
                raise ValueError(
                    f"FlattenObservation: first_dim {self.first_dim} is out of range for {key!r} of shape {list(shape)}"
                )

    def extra_repr(self):
        return f"first_dim={self.first_dim}, last_dim={self.last_dim}, " + super().extra_repr()


class PermuteTransform(Transform):
    """Permute the last ``len(dims)`` dims: output dim ``i`` is input dim ``dims[i]``.

    Args:
        dims: a reordering of ``[-len(dims), ..., -1]``.
        in_keys: entries to permute.
        out_keys: where to write them (default: in place).
        in_keys_inv: action entries permuted back before the step (env names).
        out_keys_inv: the policy's names for them.

    Example:
        >>> t = PermuteTransform([-1, -3, -2], in_keys=["pixels"])
        >>> t(TensorDict({"pixels": torch.zeros(4, 5, 3)}, []))["pixels"].shape
        torch.Size([3, 4, 5])
    """

    def __init__(self, dims, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        _require_keys_given("PermuteTransform", self.in_keys, self.in_keys_inv)
        dims = [int(d) for d in dims]
        k = len(dims)
        if sorted(dims) != list(range(-k, 0)):
            raise ValueError(
                f"PermuteTransform: dims must be a reordering of {list(range(-k, 0))}, got {dims}"
            )
        self.dims = dims
        inverse = [0] * k
        for i, d in enumerate(dims):
            inverse[d + k] = i - k
        self.inv_dims = inverse
        self._cache: dict = {}

    def _perm(self, ndim: int, inverse: bool) -> list:
        perm = self._cache.get((ndim, inverse))
        if perm is None:
            dims = self.inv_dims if inverse else self.dims
            perm = self._cache[(ndim, inverse)] = list(range(ndim - len(dims))) + [
                ndim + d for d in dims
            ]
        return perm

    def _apply_transform(self, x):
        return x.permute(self._perm(x.dim(), False))

    def _inv_apply_transform(self, x):
        return x.permute(self._perm(x.dim(), True))

    def _inv_transform_leaf_spec(self, spec):
        return map_leaf_spec(spec, self._apply_transform)

    def _attach(self, specs):
        super()._attach(specs)
        for key in self.in_keys + self.in_keys_inv:
            shape = _feature_shape(specs, key)
            if len(self.dims) > len(shape):
                raise ValueError(
                    f"PermuteTransform: dims {self.dims} need {len(self.dims)} dims, {key!r} has shape {list(shape)}"
                )

    def extra_repr(self):
        return f"dims={self.dims}, " + super().extra_repr()


class CatTensors(Transform):
    """Concatenate several entries along ``dim`` into ``out_key`` (in the given order).

    Args:
        in_keys: entries to concatenate (observation entries inside an env).
        out_key: the entry to write (default ``"observation_vector"``).
        dim: the dim to concatenate along (negative).
        del_keys: delete the in_keys afterwards.
        unsqueeze_if_oor: give entries without feature dims (shape ``[*batch]``) one.

    Example:
        >>> td = TensorDict({"a": torch.zeros(2), "b": torch.ones(1)}, [])
        >>> CatTensors(["a", "b"], "ab")(td)["ab"]
        tensor([0., 0., 1.])
    """

    def __init__(
        self,
        in_keys=None,
        out_key="observation_vector",
        dim: int = -1,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
    ):
        in_keys = _norm_keys(in_keys)
        if not in_keys:
            raise ValueError("CatTensors needs in_keys: the entries to concatenate.")
        self.out_key = _norm_key(out_key)
        super().__init__(in_keys=in_keys)
        out_key = self.out_key
        self.dim = _negative_dim("CatTensors", "dim", dim)
        self.del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor
        self._drop = tuple(k for k in in_keys if k != out_key) if del_keys else ()

    @property
    def out_keys(self) -> list:
        return [self.out_key]

    @out_keys.setter
    def out_keys(self, keys) -> None:
        raise AttributeError("CatTensors writes one entry: set out_key instead.")

    def _update_pairs(self) -> None:
        self._pairs, self._inv_pairs = (), ()

    def _call(self, next_tensordict):
        values = [next_tensordict.get(k, None) for k in self.in_keys]
        if values[0] is None and all(v is None for v in values):
            return next_tensordict
        if any(v is None for v in values):
            missing = [k for k, v in zip(self.in_keys, values) if v is None]
            raise KeyError(
                f"CatTensors: entries {missing} are missing; present: {list(next_tensordict.keys(True, True))}"
            )
        if self.unsqueeze_if_oor:
            need = next_tensordict.batch_dims - self.dim
            values = [v.unsqueeze(-1) if v.dim() < need else v for v in values]
        next_tensordict.set(self.out_key, torch.cat(values, self.dim))
        for key in self._drop:
            next_tensordict.del_(key)
        return next_tensordict

    def _attach(self, specs):
        require_keys(self, self.in_keys, specs.observation.keys(True, True))

    def transform_observation_spec(self, observation_spec):
        specs = [observation_spec[k] for k in self.in_keys]
        if self.unsqueeze_if_oor:
            n = len(observation_spec.shape)
            specs = [s.unsqueeze(-1) if len(s.shape) == n else s for s in specs]
        zeros = torch.cat([s.zero() for s in specs], self.dim)
        if all(isinstance(s, Bounded) for s in specs):
            low = torch.cat([s.low for s in specs], self.dim).to(zeros.dtype)
            high = torch.cat([s.high for s in specs], self.dim).to(zeros.dtype)
            out = Bounded(low, high, zeros.shape, device=specs[0].device, dtype=zeros.dtype)
        else:
            out = Unbounded(zeros.shape, device=specs[0].device, dtype=zeros.dtype)
        for key in self._drop:
            del observation_spec[key]
        observation_spec[self.out_key] = out
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def transform_done_spec(self, done_spec):
        return done_spec

    def extra_repr(self):
        return f"in_keys={self.in_keys}, out_key={self.out_key!r}, dim={self.dim}, del_keys={self.del_keys}"
