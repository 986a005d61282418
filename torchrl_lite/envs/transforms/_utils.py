"""Helpers shared by the transforms: key handling, fast entry access, spec maps, EnvSpecs."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Bounded, TensorSpec, Unbounded

__all__ = ["AbsentKeyError", "EnvSpecs", "map_leaf_spec", "require_keys", "td_get", "td_set"]


def td_get(td: TensorDictBase, key):
    """``td.get(key, None)`` for a string or tuple key, faster (the per-step path)."""
    return _td.get_path(td, key)


def td_set(td: TensorDictBase, key, value) -> None:
    """``td.set(key, value)``, checked (a transform's output may have any shape)."""
    _td.set_checked(td, key, value)


def _norm_key(key):
    """A key as TensorDict stores it: a string, or a tuple of strings for nested keys."""
    if isinstance(key, str):
        return key
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key[0] if len(key) == 1 else key
    raise TypeError(f"Keys are strings or tuples of strings, got {key!r}")


def _norm_keys(keys) -> list:
    """A list of keys from None, one key (a string or a tuple) or a list of keys."""
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    return [_norm_key(k) for k in keys]


def _as_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _reset_mask(tensordict: TensorDictBase | None, batch_size) -> torch.Tensor | None:
    """The ``"_reset"`` mask of a partial reset reshaped to ``[*batch]``, or None."""
    if tensordict is None:
        return None
    mask = tensordict.get(K.RESET, None)
    if mask is None:
        return None
    return mask.reshape(batch_size)


def map_leaf_spec(spec: TensorSpec, fn) -> TensorSpec:
    """The spec of ``fn(x)`` for ``x`` in ``spec``: bounds go through ``fn`` too.

    ``fn`` must be batch-agnostic and elementwise monotonic for a ``Bounded`` spec (an
    affine map, a cast, a reshape, a resize); other specs keep their type when shape and
    dtype are unchanged and become ``Unbounded`` otherwise.
    """
    if isinstance(spec, Bounded):
        lo, hi = fn(spec.low), fn(spec.high)
        low, high = torch.minimum(lo, hi), torch.maximum(lo, hi)
        return Bounded(low, high, low.shape, device=spec.device, dtype=low.dtype)
    out = fn(spec.zero())
    if out.shape == spec.shape and out.dtype == spec.dtype:
        return spec.clone()
    return Unbounded(out.shape, device=spec.device, dtype=out.dtype)


class EnvSpecs:
    """The five spec Composites of an env at one point of a transform list."""

    __slots__ = ("observation", "reward", "done", "action", "state", "batch_size", "device")

    def __init__(self, observation, reward, done, action, state, batch_size, device):
        self.observation, self.reward, self.done = observation, reward, done
        self.action, self.state = action, state
        self.batch_size, self.device = batch_size, device

    @classmethod
    def from_env(cls, env) -> EnvSpecs:
        return cls(
            env.full_observation_spec.clone(),
            env.full_reward_spec.clone(),
            env.full_done_spec.clone(),
            env.full_action_spec.clone(),
            env.full_state_spec.clone(),
            env.batch_size,
            env.device,
        )

    def clone(self) -> EnvSpecs:
        return EnvSpecs(
            self.observation.clone(),
            self.reward.clone(),
            self.done.clone(),
            self.action.clone(),
            self.state.clone(),
            self.batch_size,
            self.device,
        )

    def output_keys(self) -> list:
        """Leaf keys an env writes (reset output and ``"next"``) plus its state keys."""
        out = []
        for spec in (self.observation, self.reward, self.done, self.state):
            out.extend(spec.keys(True, True))
        return out

    def input_keys(self) -> list:
        """Leaf keys ``step`` reads: the action and state entries."""
        return list(self.action.keys(True, True)) + list(self.state.keys(True, True))

    def find(self, key) -> tuple[str, TensorSpec] | None:
        """``(name of the Composite, leaf spec)`` holding ``key``, or None."""
        for name in ("observation", "reward", "done", "state", "action"):
            composite = getattr(self, name)
            if key in composite:
                return name, composite[key]
        return None


class AbsentKeyError(KeyError):
    """A transform's key is not in the specs of the env it transforms (``require_keys``);
    ``what`` says which of its key lists (``"in_keys"``, ``"in_keys_inv"``, ...)."""

    def __init__(self, what: str, message: str):
        super().__init__(message)
        self.what = what


def require_keys(transform, keys, available, what: str = "in_keys") -> None:
    """Raise ``AbsentKeyError`` (a KeyError) naming the first of ``keys`` missing from
    ``available``."""
    available = list(available)
    present = {_as_tuple(k) for k in available}
    for key in keys:
        if _as_tuple(key) not in present:
            raise AbsentKeyError(
                what,
                f"{type(transform).__name__}: {what} entry {key!r} is not in the specs of the "
                f"env it transforms. " + missing_key_message(key, available),
            )


def check_affine(owner: str, loc: torch.Tensor, scale: torch.Tensor, standard_normal: bool):
    """Given ``loc``/``scale`` must be finite and ``scale`` non-zero (positive when dividing):
    a zero scale would silently turn every value into ``loc`` (or into ``loc / eps``)."""
    for name, value in (("loc", loc), ("scale", scale)):
        if value.is_floating_point() and not bool(value.isfinite().all()):
            raise ValueError(f"{owner}: {name} must be finite, got {value.tolist()}.")
    bad = scale <= 0 if standard_normal else scale == 0
    if bool(bad.any()):
        need = "> 0 (it divides)" if standard_normal else "non-zero"
        raise ValueError(
            f"{owner}: scale must be {need}, got {scale.tolist()}"
            f"{' with standard_normal=True' if standard_normal else ''}; with standard_normal="
            f"{standard_normal} the transform computes "
            f"{'(x - loc) / scale' if standard_normal else 'x * scale + loc'}."
        )
