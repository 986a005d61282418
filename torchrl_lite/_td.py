"""The fast path to TensorDict: the only module that uses tensordict's private API.

The per-step code (envs, transforms, collectors, replay buffers) builds and reads small
TensorDicts several times per step, where the public API's argument parsing and checks
cost more than the env itself. This module offers the few operations that code needs:

* ``entries(td)``: the dict of entries of a plain ``TensorDict``, to read; ``store(td)``
  the same dict of an unlocked one, to write tensors of the right batch shape and device
  into. Both give ``None`` for anything else: then use the public API.
* ``get(td, key)`` / ``set(td, key, value)``: a string key, without the checks.
* ``new(entries, batch_size, device)``: a ``TensorDict`` of checked entries, unchecked.
* ``same_layout(a, b)``: two plain TensorDicts of one batch size and device.

At import it checks that the internals it relies on exist and behave (``FAST``). When
they do not (another tensordict release), or when ``TORCHRL_LITE_TD_FAST=0`` is set,
every function falls back to the public API: slower, with the same results. The test
suite runs the core tests through both paths.
"""

from __future__ import annotations

import os

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = [
    "FAST",
    "entries",
    "get",
    "get_path",
    "default_sampling",
    "is_plain",
    "module_caller",
    "module_iter",
    "new",
    "same_layout",
    "set",
    "set_checked",
    "skip_existing_none",
    "store",
    "tensorclass_data",
]

_EMPTY = torch.Size([])


def _internals_work() -> bool:
    """True if the private names used below exist and do what this module expects."""
    try:
        leaf = torch.zeros(2, 1)
        td = TensorDict._new_unsafe({"a": leaf}, batch_size=torch.Size([2]), device=None)
        td._set_str("b", leaf, validated=True, inplace=False)
        return (
            td._tensordict.get("a") is leaf
            and td._get_str("b", None) is leaf
            and td._get_str("c", None) is None
            and td._batch_size == torch.Size([2])
            and td._device is None
            and td._is_locked is False
            and td.get("b") is leaf
        )
    except Exception:  # any change in the internals: the public API is used instead
        return False


FAST: bool = os.environ.get("TORCHRL_LITE_TD_FAST", "1") != "0" and _internals_work()

if FAST:

    def store(td) -> dict | None:
        """The live dict of entries of an unlocked plain TensorDict (None for any other
        object: a locked one goes through ``set``, which raises)."""
        if type(td) is TensorDict and not td._is_locked:
            return td._tensordict
        return None

    def entries(td) -> dict | None:
        """The dict of entries of a plain TensorDict, to read only (None for any other
        object)."""
        return td._tensordict if type(td) is TensorDict else None

    def get(td: TensorDictBase, key: str, default=None):
        """``td.get(key, default)`` for a string key."""
        if type(td) is TensorDict:
            value = td._tensordict.get(key)
            return default if value is None else value
        return td._get_str(key, default)

    def get_path(td: TensorDictBase, key, default=None):
        """``td.get(key, default)`` for a string or tuple key."""
        if type(key) is str:
            return td._get_str(key, default)
        return td._get_tuple(key, default)

    def set(td: TensorDictBase, key: str, value) -> None:  # noqa: A001 (the module's verb)
        """``td.set(key, value)`` for a string key and a value of the right batch shape and
        device (a tensor or TensorDict), without the checks."""
        if type(td) is TensorDict:
            td._set_str(key, value, validated=True, inplace=False)
        else:
            td.set(key, value)

    def set_checked(td: TensorDictBase, key, value) -> None:
        """``td.set(key, value)`` with its checks, faster for a string key."""
        if type(key) is str:
            td._set_str(key, value, validated=False, inplace=False)
        else:
            td.set(key, value)

    def new(entries: dict, batch_size=_EMPTY, device=None) -> TensorDict:
        """A TensorDict holding ``entries`` (string keys; tensors and TensorDicts of the
        right batch shape and device), built without checks or copies."""
        return TensorDict._new_unsafe(entries, batch_size=batch_size, device=device, nested=False)

    def same_layout(a, b) -> bool:
        """True if both are plain TensorDicts of the same batch size and device."""
        return (
            type(a) is TensorDict
            and type(b) is TensorDict
            and a._batch_size == b._batch_size
            and a._device == b._device
        )

else:

    def store(td) -> dict | None:
        return None

    def entries(td) -> dict | None:
        return None

    def get(td: TensorDictBase, key: str, default=None):
        return td.get(key, default)

    def get_path(td: TensorDictBase, key, default=None):
        return td.get(key, default)

    def set(td: TensorDictBase, key: str, value) -> None:  # noqa: A001
        td.set(key, value)

    def set_checked(td: TensorDictBase, key, value) -> None:
        td.set(key, value)

    def new(entries: dict, batch_size=_EMPTY, device=None) -> TensorDict:
        return TensorDict(entries, batch_size=batch_size, device=device)

    def same_layout(a, b) -> bool:
        return False


def is_plain(td) -> bool:
    """True for a ``TensorDict`` itself (not a subclass, lazy stack or tensorclass)."""
    return type(td) is TensorDict


def tensorclass_data(obj) -> TensorDictBase:
    """The TensorDict inside a tensorclass instance, shared (not copied)."""
    data = getattr(obj, "_tensordict", None)
    if isinstance(data, TensorDictBase):
        return data
    return obj.to_tensordict()


def module_iter(sequence):
    """The modules of a ``TensorDictSequential``, in order."""
    iterate = getattr(sequence, "_module_iter", None)
    return iterate() if iterate is not None else iter(sequence.module)


def module_caller(module):
    """A function equal to ``module(td)`` for a plain ``TensorDictModule`` (string keys, a
    wrapped ``nn.Module`` called with positional inputs, written in place), faster: it
    reads the inputs from the dict of a plain TensorDict and calls the wrapped module
    directly, skipping the dispatch and key parsing of ``TensorDictModule.forward``
    (about half of a small MLP policy's cost per step). None for any other module; an
    input that is not a plain TensorDict, or that lacks a key, goes through ``module``.
    """
    from tensordict.nn import TensorDictModule, TensorDictModuleBase

    if not FAST or type(module) is not TensorDictModule:
        return None
    inner, in_keys, out_keys = module.module, list(module.in_keys), list(module.out_keys)
    plain = (
        getattr(module, "_kwargs", 0) is None
        and getattr(module, "method", 0) is None
        and not getattr(module, "method_kwargs", 1)
        and getattr(module, "inplace", None) is True
        and list(getattr(module, "out_keys_source", ())) == out_keys
        and not getattr(module, "strict", True)
        and isinstance(inner, torch.nn.Module)
        and not isinstance(inner, TensorDictModuleBase)
        and not module._forward_hooks
        and not module._forward_pre_hooks
        and all(type(k) is str for k in in_keys + out_keys)
        and "_" not in out_keys
    )
    if not plain:
        return None
    n_out = len(out_keys)

    def outputs(out) -> tuple:
        """What the wrapped module returned, as one value per out_key."""
        if type(out) is not tuple:
            if type(out) is not torch.Tensor and isinstance(out, (dict, TensorDictBase)):
                out = tuple(out.get(k) for k in out_keys)
            else:
                out = (out,)
        if len(out) != n_out:
            raise RuntimeError(
                f"{type(inner).__name__} returned {len(out)} tensors; the TensorDictModule "
                f"wrapping it has {n_out} out_keys {out_keys}."
            )
        return tuple(v if type(v) is torch.Tensor else TensorDict.from_any(v) for v in out)

    def call(td):
        entries = td._tensordict if type(td) is TensorDict else None
        if entries is None:
            return module(td)
        args = [entries.get(k) for k in in_keys]
        for arg in args:  # not ``None in args``: that compares tensors with None
            if arg is None:
                return module(td)
        out = inner(*args)
        if type(out) is not torch.Tensor or n_out != 1:
            out = outputs(out)
        else:
            out = (out,)
        for key, value in zip(out_keys, out):
            td._set_str(key, value, validated=False, inplace=False)
        return td

    # for a caller that holds the inputs as tensors (the collector's numpy-level batch):
    # ``outputs(inner(*inputs))`` are the values ``call`` writes, in out_keys order
    call.direct = (inner, in_keys, out_keys, outputs)
    return call


def default_sampling(module) -> bool:
    """True if a ``ProbabilisticTensorDictModule`` samples from torch's default RNG (no
    generator of its own; tensordict releases before 0.11 have none)."""
    return (
        getattr(module, "_generator", None) is None
        and getattr(module, "_generator_key", None) is None
    )


def skip_existing_none():
    """The decorator tensordict modules put on ``forward``: it turns ``skip_existing``
    off for the call (a module always writes its outputs). A no-op where tensordict
    does not have it."""
    try:
        from tensordict.nn.utils import _set_skip_existing_None
    except ImportError:
        return lambda fn: fn
    return _set_skip_existing_None()
