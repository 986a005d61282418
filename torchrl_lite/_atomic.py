"""Crash-safe folders: written beside their place, swapped in, recovered after a kill.

Used by checkpoints (``Trainer.save``) and replay-buffer dumps (``ReplayBuffer.dumps``,
storages' ``dumps``). A folder ``P`` is written as follows; ``<pid>`` is the writer's::

    1. write everything into P.tmp-<pid>; the completeness marker (``meta.json``) last
    2. rename P -> P.old-<pid>                  (when P exists)
    3. rename P.tmp-<pid> -> P
    4. remove P.old-<pid>                       (its marker first)

A kill at any instant leaves ``P`` complete, or (between 2 and 3) no ``P`` but a complete
``P.tmp-<pid>`` (the new copy) and ``P.old-<pid>`` (the previous one). :func:`find_complete`
returns ``P`` when it is complete, else the newest complete leftover, with a one-line
notice: loads read it in place and write nothing. The next :func:`write_folder` first
moves that copy back to ``P``, then removes the leftovers of dead processes (a live
process's ``P.tmp-<pid>`` is left alone), then writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "RecoveryWarning",
    "find_complete",
    "is_json_dump",
    "read_json",
    "write_folder",
    "write_synced",
]

_TAGS = ("tmp", "old")


class RecoveryWarning(UserWarning):
    """A load or save found no complete folder in place and used the copy left by a kill."""


def write_synced(file: Path, write: Callable) -> None:
    """Write ``file`` with ``write(f)`` on a binary handle, then flush it to disk."""
    with open(file, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def write_folder(path, write: Callable, complete: Callable[[Path], bool], what: str) -> Path:
    """Write the folder ``path`` atomically with ``write(folder)``; see the module doc.

    Args:
        path: the folder to write (replaced if it exists).
        write: ``write(folder)`` fills the empty ``folder``, its completeness marker last.
        complete: ``complete(folder)`` tells whether a folder was fully written.
        what: a short name for messages ("checkpoint", "replay buffer dump").

    Returns:
        ``path``.
    """
    path = Path(path)
    _recover(path, complete, what)
    tmp, old = _tagged(path, "tmp"), _tagged(path, "old")
    _discard(tmp)
    tmp.mkdir(parents=True)
    try:
        write(tmp)
        _fsync_dir(tmp)
        with sigint_deferred():
            if path.exists():
                _discard(old)
                os.rename(path, old)
                os.rename(tmp, path)
                _fsync_dir(path.parent)
                _discard(old)
            else:
                os.rename(tmp, path)
                _fsync_dir(path.parent)
    finally:
        _discard(tmp)
    return path


def find_complete(path, complete: Callable[[Path], bool], what: str) -> Path | None:
    """``path`` if it is complete, else the newest complete leftover of a killed write.

    Warns (:class:`RecoveryWarning`, one line) when it returns a leftover; writes nothing.
    Returns None when there is no complete copy at all.
    """
    path = Path(path)
    if complete(path):
        return path
    for candidate in _leftovers(path, complete):
        warnings.warn(
            f"{path} is missing or incomplete (a save was killed part-way); loading the "
            f"previous {what} save's complete copy {candidate}.",
            RecoveryWarning,
            stacklevel=3,
        )
        return candidate
    return None


def _recover(path: Path, complete: Callable[[Path], bool], what: str) -> None:
    """Put the last complete copy back in place, then remove dead processes' leftovers."""
    if not path.exists():
        for candidate in _leftovers(path, complete):
            os.rename(candidate, path)
            _fsync_dir(path.parent)
            warnings.warn(
                f"recovered the {what} {path} from {candidate.name}, left by a killed save.",
                RecoveryWarning,
                stacklevel=4,
            )
            break
    for sibling in _siblings(path):
        pid = _owner(sibling)
        if pid is None or pid == os.getpid() or not _alive(pid):
            _discard(sibling)


def _leftovers(path: Path, complete: Callable[[Path], bool]) -> list[Path]:
    """Complete ``P.tmp-*`` / ``P.old-*`` folders, newest marker first."""
    found = [p for p in _siblings(path) if p.is_dir() and complete(p)]
    return sorted(found, key=_written_at, reverse=True)


def _siblings(path: Path) -> list[Path]:
    if not path.parent.is_dir():
        return []
    prefixes = tuple(f"{path.name}.{tag}" for tag in _TAGS)
    return [p for p in path.parent.iterdir() if p.name.startswith(prefixes)]


def _tagged(path: Path, tag: str) -> Path:
    return path.with_name(f"{path.name}.{tag}-{os.getpid()}")


def _owner(sibling: Path) -> int | None:
    """The pid in ``P.tmp-<pid>``; None for an untagged (older format) leftover."""
    _, _, pid = sibling.name.rpartition("-")
    return int(pid) if pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _written_at(folder: Path) -> int:
    files = [p for p in folder.iterdir() if p.is_file()]
    return max((p.stat().st_mtime_ns for p in files), default=0)


def _discard(folder: Path) -> None:
    """Remove a folder, its marker first, so a half-removed folder never looks complete."""
    if not folder.exists():
        return
    if folder.is_dir():
        with contextlib.suppress(OSError):
            (folder / "meta.json").unlink()
        shutil.rmtree(folder, ignore_errors=True)
    else:
        folder.unlink()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform / filesystem allows it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def sigint_deferred():
    """Hold Ctrl-C (SIGINT) until the block ends, then raise KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *args: received.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if not received or previous is signal.SIG_IGN:
        return
    if callable(previous):
        previous(*received[0])  # the default handler raises KeyboardInterrupt
    else:
        raise KeyboardInterrupt


def read_json(file: Path) -> dict:
    """The JSON object in ``file``; FileNotFoundError or ValueError naming the file."""
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing.")
    try:
        value = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{file} is corrupt: not readable JSON ({err}).") from err
    if not isinstance(value, dict):
        raise ValueError(f"{file} is corrupt: it holds a {type(value).__name__}, not an object.")
    return value


def is_json_dump(folder: Path, required: str) -> bool:
    """Whether ``folder/meta.json`` is a JSON object holding ``required`` (the marker)."""
    try:
        return required in read_json(Path(folder) / "meta.json")
    except (OSError, ValueError):
        return False
