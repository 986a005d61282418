"""Checkpoints: atomic save and load of a checkpoint folder, and the global RNG states.

A checkpoint is a folder (``Trainer.save(path)`` / ``Trainer.load(path)``)::

    path/
      state.pt     torch.save of the trainer's state (networks, optimizer, counters, hook
                   states, RNG states, the collector's state with its env's)
      <name>/      what a hook with ``dumps(folder)`` wrote (e.g. the replay buffer)
      meta.json    format, version, frames: written last, it marks the folder complete

:func:`save_checkpoint` writes everything into ``path.tmp-<pid>``, flushes it to disk, then
swaps it into place (``path -> path.old-<pid>``, ``path.tmp-<pid> -> path``, remove the old
one) with Ctrl-C deferred during the swap (``torchrl_lite/_atomic.py``): at every instant a
complete checkpoint is on disk. If a kill hit between the two renames,
:func:`load_checkpoint` reads the newest complete copy beside ``path`` with a one-line
:class:`~torchrl_lite._atomic.RecoveryWarning` (loading never writes); the next save puts
that copy back in place and removes what dead processes left.

Env states make a resumed run continue exactly: each env's ``state_dict()`` holds its
torch generators (``PendulumEnv.rng``), its gymnasium env (pickled whole when it allows it,
which classic-control and MuJoCo envs without an open renderer do: physics, time limit,
``np_random``; else only their ``np_random`` state), its transforms' ``state_dict`` (e.g.
``VecNorm``), a ``SerialEnv``'s copies one by one; the collector's ``state_dict()`` adds it
to the running episode it carries into the next batch. ``ParallelEnv`` workers and
gymnasium's async vector envs keep theirs in other processes: they are not saved (a
warning says so) and such a run resumes, but not bit-exact.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Callable
from pathlib import Path

import torch

from torchrl_lite._atomic import find_complete, write_folder, write_synced
from torchrl_lite._atomic import sigint_deferred as _sigint_deferred  # noqa: F401
from torchrl_lite.workers.rng import rng_state, set_rng_state  # noqa: F401 (their old home)

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "checkpoint_exists",
    "rng_state",
    "set_rng_state",
]

FORMAT = "torchrl_lite.trainer"
VERSION = 1
_STATE_FILE = "state.pt"
_META_FILE = "meta.json"


# -- atomic folders -------------------------------------------------------------------
def save_checkpoint(
    path, state: dict, dumpers: dict[str, Callable] | None = None, meta: dict | None = None
) -> Path:
    """Write a checkpoint folder atomically: the old one stays complete until the swap.

    Args:
        path: the checkpoint folder (created, or replaced if it holds a checkpoint).
        state: what ``torch.save`` writes to ``state.pt``.
        dumpers: ``{name: fn}``; ``fn(folder)`` writes ``path/<name>`` (e.g.
            ``replay_buffer.dumps``).
        meta: extra JSON-serialisable entries for ``meta.json``.

    Returns:
        the checkpoint folder.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "ckpt"
        >>> _ = save_checkpoint(folder, {"step": torch.tensor(3)})
        >>> load_checkpoint(folder)[0]["step"]
        tensor(3)
    """
    path = Path(path)
    if path.exists() and not _is_checkpoint(path):
        raise ValueError(
            f"refusing to replace {path}: it exists and is not a checkpoint folder written "
            f"by Trainer.save (no {_META_FILE} of format {FORMAT!r}). Choose another path."
        )
    info = {"format": FORMAT, "version": VERSION, **(meta or {})}

    def write(folder: Path) -> None:
        write_synced(folder / _STATE_FILE, lambda f: torch.save(state, f))
        for name, dump in (dumpers or {}).items():
            dump(folder / name)
        write_synced(folder / _META_FILE, lambda f: f.write(json.dumps(info, indent=1).encode()))

    return write_folder(path, write, _is_checkpoint, "checkpoint")


def load_checkpoint(path) -> tuple[dict, Path]:
    """Read a checkpoint folder written by :func:`save_checkpoint`; writes nothing.

    Args:
        path: the checkpoint folder.

    Returns:
        ``(state, folder)``: the ``state.pt`` contents and the folder actually read
        (``path``, or the complete copy a save killed part-way left beside it, with a
        :class:`~torchrl_lite._atomic.RecoveryWarning`).

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: ``path`` is not a complete, readable checkpoint of this format.
    """
    path = Path(path)
    folder = find_complete(path, _is_checkpoint, "checkpoint") or path
    if not folder.exists():
        raise FileNotFoundError(
            f"no checkpoint at {path}: the path does not exist. Pass the folder that "
            f"Trainer.save (or save_trainer_file) wrote."
        )
    if not folder.is_dir():
        raise ValueError(
            f"{folder} is a file, not a checkpoint folder written by Trainer.save "
            f"(a folder holding {_META_FILE} and {_STATE_FILE})."
        )
    meta = _read_meta(folder)
    if meta is None:
        raise ValueError(
            f"corrupt or incomplete checkpoint at {folder}: {folder / _META_FILE} is missing "
            f"or is not valid JSON of format {FORMAT!r}, and no older complete copy lies "
            f"beside it (a save killed part-way leaves one as {folder.name}.old-PID)."
        )
    if meta.get("version") != VERSION:
        raise ValueError(
            f"checkpoint at {folder} has format version {meta.get('version')!r}; this "
            f"torchrl_lite reads version {VERSION}."
        )
    try:
        # our own file: it holds TensorDicts and numpy RNG states, so not weights_only
        state = torch.load(folder / _STATE_FILE, map_location="cpu", weights_only=False)
    except Exception as err:  # any unpickling failure means the file is damaged
        raise ValueError(
            f"corrupt checkpoint at {folder}: cannot read {folder / _STATE_FILE} "
            f"({type(err).__name__}: {err})."
        ) from err
    if not isinstance(state, dict):
        raise ValueError(f"corrupt checkpoint at {folder}: {_STATE_FILE} does not hold a dict.")
    return state, folder


def checkpoint_exists(path) -> bool:
    """Whether :func:`load_checkpoint` finds a complete checkpoint at ``path`` (or beside it)."""
    path = Path(path)
    return _is_checkpoint(path) or any(
        _is_checkpoint(p) for p in path.parent.glob(f"{glob.escape(path.name)}.*")
    )


def _read_meta(folder: Path) -> dict | None:
    try:
        meta = json.loads((folder / _META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def _is_checkpoint(path: Path) -> bool:
    return path.is_dir() and _read_meta(path) is not None
