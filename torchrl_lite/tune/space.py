"""Search spaces of ``torchrl-lite tune``: per recipe, or read from a JSON file.

A space maps a recipe's config key to one of (the same in a ``--space FILE``)::

    {"float": [low, high], "log": true}   a real number (log-uniform with "log")
    {"int": [low, high]}                   an integer, both ends included
    {"choices": [a, b, ...]}               one of the listed values

The built-in spaces, for the online recipes (each within the range the recipe accepts):

* ``ppo``: ``lr`` 1e-4..3e-3 (log), ``mini_batch_size`` 32/64/128/256 (divides the 2048
  ``frames_per_batch``), ``epochs`` 3..10, ``hidden`` 32/64/128, ``gamma``
  0.9/0.95/0.98/0.99, ``lmbda`` 0.8..1.0, ``clip_epsilon`` 0.1..0.3, ``entropy_coef``
  0/1e-4/1e-3/1e-2.
* ``a2c``: ``lr`` 1e-4..3e-3 (log), ``gamma``, ``lmbda``, ``entropy_coef`` as PPO's,
  ``hidden`` 32/64/128, ``frames_per_batch`` 16/32/64.
* ``dqn``: ``lr`` 1e-4..3e-3 (log), ``batch_size`` 64/128/256, ``hidden`` 64/128/256,
  ``gamma`` 0.95/0.98/0.99, ``target_update_interval`` 16/64/256, ``eps_frames``
  4000..32000, ``optim_steps_per_batch`` 16/32/64/128.
* ``sac``, ``ddpg``, ``td3``, ``redq``: ``lr`` 3e-4..3e-3 (log), ``batch_size``
  64/128/256, ``hidden`` 64/128/256, ``gamma`` 0.95/0.98/0.99, ``tau`` 0.005..0.05 (log);
  ``ddpg``/``td3`` add ``exploration_noise`` 0.05..0.3, ``sac`` adds ``alpha_init``
  0.1..1 (log), ``redq`` adds ``utd_ratio`` 1/2/5.

Nothing here imports torch or optuna: spaces are checked before either loads.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SEARCH_SPACES", "check_space", "read_space", "space_for"]

_GAMMA = {"choices": [0.9, 0.95, 0.98, 0.99]}
_OFF_POLICY = {
    "lr": {"float": [3e-4, 3e-3], "log": True},
    "batch_size": {"choices": [64, 128, 256]},
    "hidden": {"choices": [64, 128, 256]},
    "gamma": {"choices": [0.95, 0.98, 0.99]},
    "tau": {"float": [0.005, 0.05], "log": True},
}
SEARCH_SPACES: dict[str, dict] = {
    "ppo": {
        "lr": {"float": [1e-4, 3e-3], "log": True},
        "mini_batch_size": {"choices": [32, 64, 128, 256]},
        "epochs": {"int": [3, 10]},
        "hidden": {"choices": [32, 64, 128]},
        "gamma": _GAMMA,
        "lmbda": {"float": [0.8, 1.0]},
        "clip_epsilon": {"float": [0.1, 0.3]},
        "entropy_coef": {"choices": [0.0, 1e-4, 1e-3, 1e-2]},
    },
    "a2c": {
        "lr": {"float": [1e-4, 3e-3], "log": True},
        "gamma": _GAMMA,
        "lmbda": {"float": [0.8, 1.0]},
        "entropy_coef": {"choices": [0.0, 1e-4, 1e-3, 1e-2]},
        "hidden": {"choices": [32, 64, 128]},
        "frames_per_batch": {"choices": [16, 32, 64]},
    },
    "dqn": {
        "lr": {"float": [1e-4, 3e-3], "log": True},
        "batch_size": {"choices": [64, 128, 256]},
        "hidden": {"choices": [64, 128, 256]},
        "gamma": {"choices": [0.95, 0.98, 0.99]},
        "target_update_interval": {"choices": [16, 64, 256]},
        "eps_frames": {"int": [4000, 32000]},
        "optim_steps_per_batch": {"choices": [16, 32, 64, 128]},
    },
    "sac": {**_OFF_POLICY, "alpha_init": {"float": [0.1, 1.0], "log": True}},
    "ddpg": {**_OFF_POLICY, "exploration_noise": {"float": [0.05, 0.3]}},
    "td3": {**_OFF_POLICY, "exploration_noise": {"float": [0.05, 0.3]}},
    "redq": {**_OFF_POLICY, "utd_ratio": {"choices": [1.0, 2.0, 5.0]}},
}


def _entry_error(key: str, entry, why: str) -> ValueError:
    return ValueError(
        f"Search space entry {key}={json.dumps(entry)}: {why}. Write "
        '{"float": [low, high]} (add "log": true for a log scale), {"int": [low, high]} '
        'or {"choices": [a, b, ...]}.'
    )


def check_space(algo: str, space: dict, where: str) -> dict:
    """``space`` after checking each key against the recipe's config and each entry's form.

    Raises ValueError naming an unknown key (with the closest field) or a malformed entry.
    """
    from torchrl_lite.recipes.fields import config_fields, unknown_option

    fields = config_fields(algo)
    if not isinstance(space, dict) or not space:
        raise ValueError(f"{where}: a search space is a non-empty JSON object of key: entry.")
    for key, entry in space.items():
        if key not in fields:
            raise unknown_option(key, fields, f"the {algo} recipe (in {where})")
        if key in ("env", "frames", "seed"):
            raise ValueError(f"{where}: {key!r} is set by tune itself (--env, --frames, --seed).")
        if not isinstance(entry, dict):
            raise _entry_error(key, entry, "not an object")
        kinds = [k for k in ("float", "int", "choices") if k in entry]
        extra = set(entry) - {"float", "int", "choices", "log"}
        if len(kinds) != 1 or extra:
            raise _entry_error(key, entry, "needs exactly one of float, int, choices")
        values = entry[kinds[0]]
        if kinds[0] == "choices":
            if not isinstance(values, list) or not values:
                raise _entry_error(key, entry, "choices must be a non-empty list")
            continue
        numbers = isinstance(values, list) and len(values) == 2
        numbers = numbers and all(isinstance(v, (int, float)) for v in values)
        if not numbers or not values[0] < values[1]:
            raise _entry_error(key, entry, "the range must be [low, high] with low < high")
        if entry.get("log") and values[0] <= 0:
            raise _entry_error(key, entry, "a log scale needs low > 0")
    return space


def read_space(algo: str, path) -> dict:
    """The search space in the JSON file ``path``, checked (see :func:`check_space`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--space {path}: no such file.")
    try:
        space = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"--space {path} is not valid JSON: {err}") from None
    return check_space(algo, space, f"--space {path}")


def space_for(algo: str, path=None, fixed: dict | None = None) -> dict:
    """The space to search: the file's, else the recipe's own, less the ``fixed`` keys."""
    if path is not None:
        space = read_space(algo, path)
    elif algo in SEARCH_SPACES:
        space = dict(SEARCH_SPACES[algo])
    else:
        raise ValueError(
            f"tune has no built-in search space for {algo!r} (built in: "
            f"{', '.join(SEARCH_SPACES)}); give one with --space FILE."
        )
    return {k: v for k, v in space.items() if k not in (fixed or {})}
