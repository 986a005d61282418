"""A replay buffer's dump to disk and load back (``dumps``/``loads``): crash-safe writes
(``torchrl_lite/_atomic.py``) and loads that check every file before changing anything."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

from torchrl_lite._atomic import find_complete, is_json_dump, read_json, write_folder, write_synced

__all__ = ["BufferDumps"]


class BufferDumps:
    """``ReplayBuffer``'s persistence (its ``_storage``, ``_sampler``, ``_writer``, ``_lock``
    and ``_clear_prefetch``)."""

    def _meta(self) -> dict:
        return {
            "buffer": type(self).__name__,
            "storage": type(self._storage).__name__,
            "sampler": type(self._sampler).__name__,
            "writer": type(self._writer).__name__,
            "max_size": self._storage.max_size,
            "len": len(self._storage),
        }

    def dumps(self, path) -> None:
        """Save contents, write cursor and sampler state (e.g. priorities) under ``path``.

        The dump is written to a sibling folder, then renamed into place, so ``path``
        holds either the previous dump or the complete new one, even if the process dies
        (``torchrl_lite/_atomic.py``); :meth:`loads` finds the complete copy after a kill.

        Args:
            path: the folder to write (created; an older dump there is replaced).
        """

        def write(folder: Path) -> None:
            self._storage.dumps(folder / "storage")
            write_synced(folder / "sampler.pt", lambda f: torch.save(self._sampler.state_dict(), f))
            write_synced(folder / "writer.pt", lambda f: torch.save(self._writer.state_dict(), f))
            meta = json.dumps(self._meta()).encode()
            write_synced(folder / "meta.json", lambda f: f.write(meta))

        with self._lock:
            write_folder(path, write, _is_buffer_dump, "replay buffer dump")

    def loads(self, path) -> None:
        """Restore a buffer written by :meth:`dumps`; raises without changes on failure.

        Every file is checked (a missing, truncated or corrupt one raises naming it), and
        nothing in the dump is written.

        Args:
            path: the folder :meth:`dumps` wrote.
        """
        path = Path(path)
        folder = find_complete(path, _is_buffer_dump, "replay buffer dump")
        if folder is None:
            if (path / "meta.json").is_file():
                read_json(path / "meta.json")  # raises naming the corrupt file
            raise FileNotFoundError(
                f"{path} holds no complete replay buffer dump (missing {path / 'meta.json'})."
            )
        meta = read_json(folder / "meta.json")
        mine = self._meta()
        for part in ("storage", "sampler", "writer", "max_size"):
            if meta.get(part) != mine[part]:
                raise ValueError(
                    f"the dump at {folder} has {part}={meta.get(part)!r} but this buffer has "
                    f"{mine[part]!r}; build the buffer as it was built when dumped."
                )
        sampler_state = _read_state(folder / "sampler.pt")
        writer_state = _read_state(folder / "writer.pt")
        with self._lock:
            self._clear_prefetch()
            backup = copy.deepcopy((self._sampler.state_dict(), self._writer.state_dict()))
            try:
                for part, state, file in (
                    (self._sampler, sampler_state, "sampler.pt"),
                    (self._writer, writer_state, "writer.pt"),
                ):
                    try:
                        part.load_state_dict(state)
                    except Exception as err:
                        raise ValueError(
                            f"{folder / file} does not fit this {type(part).__name__} "
                            f"({type(err).__name__}: {err}); the dump is corrupt."
                        ) from err
                self._storage.loads(folder / "storage")  # checks everything before writing
            except BaseException:
                self._sampler.load_state_dict(backup[0])
                self._writer.load_state_dict(backup[1])
                raise


def _is_buffer_dump(folder: Path) -> bool:
    return is_json_dump(folder, "buffer")


def _read_state(file: Path) -> dict:
    """A sampler or writer ``state_dict`` saved in ``file``; raises naming the file."""
    if not file.is_file():
        raise FileNotFoundError(f"the replay buffer dump is missing {file}.")
    try:
        state = torch.load(file, weights_only=True)
    except Exception as err:
        raise ValueError(f"{file} is corrupt: {type(err).__name__}: {err}") from err
    if not isinstance(state, dict):
        raise ValueError(f"{file} is corrupt: it holds a {type(state).__name__}, not a dict.")
    return state
