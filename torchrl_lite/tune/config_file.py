"""The config files ``tune`` writes and ``train ALGO config=FILE`` reads (no torch needed).

A config file is a JSON object of recipe options, e.g. ``{"lr": 0.0012, "gamma": 0.95}``
(``tune`` leaves the env out: give it with ``--env``); given to ``train`` as ``config=FILE`` its entries act as
``key=value`` options, and options typed on the command line win over them.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["read_config_file", "write_config_file"]


def _as_option(value) -> str:
    """A JSON value as it would be typed after ``key=``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def read_config_file(path) -> dict[str, str]:
    """The options of the config file ``path`` as ``key=value`` texts."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config={path}: no such file (a JSON object of options).")
    try:
        options = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"config={path} is not valid JSON: {err}") from None
    if not isinstance(options, dict) or "config" in options:
        raise ValueError(
            f"config={path} must hold one JSON object of options, e.g. "
            '{"lr": 0.001, "gamma": 0.95} (and no nested config key).'
        )
    return {str(k): _as_option(v) for k, v in options.items()}


def write_config_file(path, options: dict) -> Path:
    """Write ``options`` as a config file (a JSON object) and return its path."""
    path = Path(path)
    path.write_text(json.dumps(options, indent=2) + "\n")
    return path
