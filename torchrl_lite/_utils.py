"""Small helpers shared by every subpackage: error messages, lazy imports, optimizer state."""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import sys

from torchrl_lite._timing import compile_with_warmup, timeit  # noqa: F401  (TorchRL's names)

# TorchRL's scripts log through ``torchrl._utils.logger``: INFO lines on stdout by default,
# the level set by TORCHRL_LITE_LOGGING_LEVEL.
logger = logging.getLogger("torchrl_lite")
if not logger.handlers:
    _handler = logging.StreamHandler(sys.stdout)
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(os.environ.get("TORCHRL_LITE_LOGGING_LEVEL", "INFO").upper())
    logger.propagate = False
VERBOSE = os.environ.get("VERBOSE", "0").lower() in ("1", "true")


def _key_text(key) -> str:
    return ".".join(key) if isinstance(key, tuple) else str(key)


def closest_matches(name, candidates, n: int = 1) -> list:
    """Up to ``n`` candidates close to ``name``, closest first (keys may be tuples)."""
    by_text = {_key_text(c): c for c in candidates}
    close = difflib.get_close_matches(_key_text(name), list(by_text), n=n, cutoff=0.6)
    return [by_text[text] for text in close]


def closest_match(name, candidates) -> object | None:
    """The candidate closest to ``name`` (keys may be strings or tuples), or None."""
    close = closest_matches(name, candidates)
    return close[0] if close else None


def did_you_mean(name, candidates, n: int = 1) -> str:
    """``" Did you mean 'x'?"`` (up to ``n`` names) for the candidates closest to ``name``,
    or ``""``: the one wording of every did-you-mean in the package."""
    close = closest_matches(name, candidates, n)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def missing_key_message(key, available) -> str:
    """The text of a KeyError: the key, the keys present and the closest match."""
    available = list(available)
    return f"Key {key!r} not found. Available keys: {available}.{did_you_mean(key, available)}"


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


def optimizer_settings(optimizer) -> list[dict]:
    """Each parameter group's plain settings (lr, betas, eps, ...), without its params."""
    plain = (bool, int, float, str, tuple, type(None))
    return [
        {k: v for k, v in group.items() if k != "params" and isinstance(v, plain)}
        for group in optimizer.param_groups
    ]


def load_optimizer_state(optimizer, state: dict, built=None, saved=None) -> None:
    """``optimizer.load_state_dict(state)``, keeping the settings it was built with where
    they differ from the saved run's.

    torch restores the saved learning rate and other settings, so a resumed run would
    silently keep them (``--resume RUN lr=1e-5`` would change nothing). Each setting (per
    parameter group) in ``built`` (default: ``optimizer``'s now) that differs from
    ``saved`` (the saved run's as built; default: the restored values) is applied
    instead: the learning rate is scaled by ``new / old`` base rate (a schedule's
    ``initial_lr`` when there is one), so a schedule's progress is kept, and without one
    it is the new value; the others are replaced. The moments and step counts are the
    saved ones.

    Example:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.ones(1))
        >>> state = torch.optim.Adam([w], lr=0.1).state_dict()
        >>> resumed = torch.optim.Adam([w], lr=0.01)
        >>> load_optimizer_state(resumed, state)
        >>> resumed.param_groups[0]["lr"]
        0.01
    """
    built = optimizer_settings(optimizer) if built is None else built
    optimizer.load_state_dict(state)
    saved = optimizer_settings(optimizer) if saved is None else saved
    for group, new, old in zip(optimizer.param_groups, built, saved):
        for key, value in new.items():
            if key not in old or old[key] == value or key == "initial_lr":
                continue
            if key == "lr":
                was, now = old.get("initial_lr", old[key]), new.get("initial_lr", value)
                group["lr"] = group["lr"] * now / was if was else now
                if "initial_lr" in group:
                    group["initial_lr"] = now
            else:
                group[key] = value


def get_available_device(return_str: bool = False):
    """The first accelerator found (CUDA, then MPS), else the CPU; a string if asked."""
    import torch

    if torch.cuda.is_available():
        name = "cuda:0"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        name = "mps:0"
    else:
        name = "cpu"
    return name if return_str else torch.device(name)


# Profiling scopes (TorchRL's ``set_profiling_enabled``): armed at import by
# TORCHRL_LITE_PROFILING=1 (or TorchRL's TORCHRL_PROFILING=1), switched at run time.
_PROFILING_ALLOWED = "1" in (
    os.environ.get("TORCHRL_LITE_PROFILING", "0"),
    os.environ.get("TORCHRL_PROFILING", "0"),
)
_PROFILING_ENABLED = _PROFILING_ALLOWED


def set_profiling_enabled(enabled: bool) -> None:
    """Switch the :func:`profiling_scope` labels on or off at run time.

    Turning them on needs ``TORCHRL_LITE_PROFILING=1`` (or ``TORCHRL_PROFILING=1``) in the
    environment at import; without it this warns and changes nothing, so unprofiled runs
    never pay for the labels.
    """
    global _PROFILING_ENABLED
    if enabled and not _PROFILING_ALLOWED:
        import warnings

        warnings.warn(
            "set_profiling_enabled(True) has no effect: set TORCHRL_LITE_PROFILING=1 (or "
            "TORCHRL_PROFILING=1) before importing torchrl_lite to arm the profiling scopes.",
            stacklevel=2,
        )
        return
    _PROFILING_ENABLED = bool(enabled)


def profiling_scope(name: str):
    """``torch.profiler.record_function(name)`` while profiling is on, else a no-op context."""
    if not _PROFILING_ENABLED:
        import contextlib

        return contextlib.nullcontext()
    import torch

    return torch.profiler.record_function(name)
