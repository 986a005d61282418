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
