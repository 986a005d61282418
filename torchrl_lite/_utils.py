"""Small helpers shared by every subpackage: error messages and lazy imports."""

from __future__ import annotations

import difflib
import importlib


def _key_text(key) -> str:
    return ".".join(key) if isinstance(key, tuple) else str(key)


def closest_match(name, candidates) -> object | None:
    """The candidate closest to ``name`` (keys may be strings or tuples), or None."""
    by_text = {_key_text(c): c for c in candidates}
    close = difflib.get_close_matches(_key_text(name), list(by_text), n=1, cutoff=0.6)
    return by_text[close[0]] if close else None


def missing_key_message(key, available) -> str:
    """The text of a KeyError: the key, the keys present and the closest match."""
    available = list(available)
    match = closest_match(key, available)
    hint = f" Did you mean {match!r}?" if match is not None else ""
    return f"Key {key!r} not found. Available keys: {available}.{hint}"


def require(module: str, extra: str):
    """Import an optional dependency, or raise ImportError naming the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{module} is not installed; it is needed here. Install it with "
            f"`pip install 'torchrl-lite[{extra}]'`."
        ) from err


def check_device(device, owner: str):
    """``device`` as a ``torch.device`` that exists here (``None``: the CPU), or a
    ``ValueError`` naming it.

    Called at construction (never per step): a CUDA device on a machine without CUDA, or
    with fewer GPUs, raises with the fix instead of torch's assertion at first use.
    """
    import torch

    if device is None:
        return torch.device("cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{owner}: device {device!r} is not a device name (e.g. 'cpu', 'cuda', 'cuda:0')."
        ) from err
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index is not None and device.index >= count):
            raise ValueError(
                f"{owner}: device {str(device)!r} is not available here ({count} CUDA "
                "device(s)); pass device='cpu' or a CUDA index below the device count."
            )
    return device
