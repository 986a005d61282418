"""Timing helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"


def timeit(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved(fns: dict, repeats: int = 7, warmup: int = 1) -> dict:
    """Median wall time of each ``fn()`` in seconds, the functions run in turn each round
    (a noisy machine slows every case of a round alike, not one case's whole series)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def load_average() -> float:
    """The 1-minute load average (how quiet the machine was)."""
    return os.getloadavg()[0]


def smoke() -> bool:
    """True when budgets should shrink (``TORCHRL_LITE_SMOKE=1``)."""
    return os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"


def write_table(name: str, title: str, header: list[str], rows: list[list], notes: str = "") -> str:
    """Print a markdown table and save it as ``benchmarks/results/<name>.md``."""
    lines = [f"## {title}", ""]
    if notes:
        lines += [notes, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in rows:
        lines.append("| " + " | ".join(_fmt(c) for c in row) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{name}.md").write_text(text)
    return text


def _fmt(cell) -> str:
    if isinstance(cell, float):
        return f"{cell:.3g}" if abs(cell) < 1000 else f"{cell:,.0f}"
    return str(cell)
