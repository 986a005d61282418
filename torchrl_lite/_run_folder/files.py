"""The run folder the command line writes, for the Trainer and the Scheme paths alike.

A run folder is never overwritten or mixed: a new run goes to a folder that holds nothing
(the default name gets the next free ``-2``, ``-3`` suffix; an explicit ``--out`` that
holds a run is refused unless ``--overwrite`` moves it aside); it appears at once, with
its ``config.json``, once every input was checked (:func:`start_run`). A resumed run first
drops the log rows past its checkpoint (:func:`truncate_logs`). The first Ctrl-C ends the
run with a checkpoint, a second one aborts (:func:`first_sigint_stops`).

Files: ``config.json``, ``checkpoint/``, ``logs/``, ``episodes.csv``, ``evaluations.csv``,
``learning_curve.png`` and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def config_path(folder: Path) -> Path:
    return folder / "config.json"


def write_rows(path: Path, header, rows) -> None:
    """A CSV file: ``header``, then one line per row."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def plot_curve(path: Path, history, title: str, target, unit: str = "frames") -> None:
    from matplotlib.figure import Figure  # not pyplot: the caller's backend stays as it is

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    if history:
        frames, returns = zip(*history)
        window = [
            sum(returns[max(0, i - 9) : i + 1]) / len(returns[max(0, i - 9) : i + 1])
            for i in range(len(returns))
        ]
        ax.plot(frames, returns, ".", alpha=0.3, label="episode return")
        ax.plot(frames, window, "-", label="mean of last 10")
    if target is not None:
        ax.axhline(target, color="gray", linestyle="--", label=f"target {target}")
    ax.set_xlabel(unit)
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# -- where a run goes -----------------------------------------------------------------
def holds_files(folder: Path) -> bool:
    """Whether ``folder`` exists and is not an empty folder."""
    return folder.exists() and (not folder.is_dir() or any(folder.iterdir()))


def describe(folder: Path) -> str:
    """``"a ppo run on Pendulum-v1 (30720 frames)"``, or what else the folder holds."""
    try:
        saved = json.loads(config_path(folder).read_text())
        what = f"a {saved['algo']} run on {saved['config']['env']}"
    except (OSError, ValueError, KeyError, TypeError):
        names = sorted(p.name for p in folder.iterdir())[:4] if folder.is_dir() else []
        return f"files ({', '.join(names)}{', ...' if len(names) == 4 else ''})"
    try:
        frames = json.loads((folder / "checkpoint" / "meta.json").read_text())
        return f"{what} ({frames.get('collected_frames', frames.get('frames'))} frames)"
    except (OSError, ValueError, AttributeError):
        return what


def next_free(base: Path) -> Path:
    """``base`` if it holds nothing, else the first of ``base-2``, ``base-3``, ... that
    holds nothing (rl-zoo numbers its runs the same way)."""
    candidate, n = base, 2
    while holds_files(candidate) or _starting(candidate):
        candidate, n = base.with_name(f"{base.name}-{n}"), n + 1
    return candidate


def check_new_run(out: Path, overwrite: bool) -> None:
    """Refuse an explicit ``--out`` that holds something (unless ``overwrite``), or one
    that cannot be created; writes nothing."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: this is a file, not a folder; pass a folder for the run.")
    if holds_files(out) and not overwrite:
        raise ValueError(
            f"--out {out} already holds {describe(out)}. Continue it with "
            f"`torchrl-lite train --resume {out}`, pass --overwrite to move it aside (to "
            f"{out.name}.replaced-DATE, nothing is deleted) and start anew, or choose "
            f"another --out."
        )
    check_writable(out)


def check_writable(folder: Path) -> None:
    """PermissionError unless ``folder`` (or the nearest folder above it that exists)
    lets this process create files."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"cannot create {folder}: {existing} is a file, not a folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(
            f"cannot write the run folder {folder}: {existing} is not writable by this "
            f"user; choose another --out."
        )


def _starting(folder: Path) -> bool:
    return any(folder.parent.glob(f".{glob.escape(folder.name)}.starting-*"))


def start_run(out: Path, files: dict[str, str], overwrite: bool) -> Path | None:
    """Make the run folder ``out`` appear with ``files`` in it, at once.

    The folder is written beside (``.NAME.starting-PID``) and renamed into place, so a
    failure leaves no folder and never touches an existing one. With ``overwrite``, a
    folder already at ``out`` is first moved aside to ``NAME.replaced-DATE`` (returned).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.starting-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    moved = None
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        if holds_files(out):
            if not overwrite:
                raise ValueError(f"{out} was written by another process meanwhile; not touched.")
            moved = next_free(
                out.with_name(f"{out.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
            )
            os.rename(out, moved)
        elif out.is_dir():
            out.rmdir()  # an empty folder: take its place
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return moved


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (written beside, renamed over)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


# -- a resumed run: its logs back to the checkpoint -----------------------------------
def truncate_logs(logs: Path, step: int) -> int:
    """Drop the CSV log rows past ``step`` (a run resumed from the checkpoint at ``step``
    logs them again); returns how many rows were dropped.

    ``logs/metrics.csv`` (one row per step) and ``logs/scalars/*.csv`` (``step,value``
    lines); TensorBoard's events are hidden by the logger's ``purge_step`` instead.
    """
    dropped = 0
    files = [logs / "metrics.csv", *sorted((logs / "scalars").glob("**/*.csv"))]
    for path in files:
        if not path.is_file():
            continue
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        header = rows[:1] if rows and rows[0] and rows[0][0] == "step" else []
        kept = header + [r for r in rows[len(header) :] if not r or _step(r[0]) <= step]
        if len(kept) < len(rows):
            dropped += len(rows) - len(kept)
            with path.open("w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(kept)
    return dropped


def _step(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.inf  # not a step: a damaged line, dropped with the rest


# -- Ctrl-C ---------------------------------------------------------------------------
@contextlib.contextmanager
def first_sigint_stops(stop: Callable[[], None], announce: str):
    """Within the block, the first Ctrl-C (SIGINT) prints ``announce`` and calls ``stop()``
    (the run finishes the update in flight, saves and ends); a second one raises
    KeyboardInterrupt at once. Yields a list that holds True once Ctrl-C was pressed."""
    pressed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def handler(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(True)
        print(f"\n{announce}", file=sys.stderr, flush=True)
        stop()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def checkpoint_frames(checkpoint: Path) -> int | None:
    """The frame count of the complete checkpoint at ``checkpoint`` (None: there is none)."""
    try:
        meta = json.loads((checkpoint / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    frames = meta.get("collected_frames", meta.get("frames")) if isinstance(meta, dict) else None
    return frames if isinstance(frames, int) else None


def interrupted_message(out: Path, aborted: bool) -> str:
    """What a Ctrl-C left, read back from disk: the checkpoint's frames and how to resume."""
    frames = checkpoint_frames(out / "checkpoint")
    how = "aborted (second Ctrl-C)" if aborted else "interrupted"
    if frames is None:
        return f"{how}: no checkpoint was saved in {out / 'checkpoint'}; nothing to resume."
    return (
        f"{how}: the checkpoint in {out / 'checkpoint'} holds {frames} frames; continue with "
        f"`torchrl-lite train --resume {out}`"
    )
