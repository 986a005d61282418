"""The files of a run folder that the command line writes: ``config.json``, the CSV
tables (``episodes.csv``, ``evaluations.csv``) and ``learning_curve.png``."""

from __future__ import annotations

import csv
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
