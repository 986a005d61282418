"""Run every ``bench_*.py`` script and assemble ``benchmarks/RESULTS.md``."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent


def main(argv: list[str]) -> None:
    """Run every benchmark, then assemble; ``--assemble`` only assembles the saved results."""
    if "--assemble" not in argv:
        for script in sorted(HERE.glob("bench_*.py")):
            print(f"== {script.name}", flush=True)
            subprocess.run([sys.executable, script.name], cwd=HERE, check=True)
    header = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`benchmarks/run_all.py`). Every ratio compares torchrl_lite with",
        "the raw floor (plain gymnasium + torch loop, raw tensor gather) measured in the same run.",
        "",
        f"Machine: {platform.machine()}, {torch.get_num_threads()} torch threads, Python {platform.python_version()}, torch {torch.__version__}.",
        "",
        "",
    ]
    parts = [p.read_text() for p in sorted((HERE / "results").glob("*.md"))]
    (HERE / "RESULTS.md").write_text("\n".join(header) + "\n".join(parts))
    print((HERE / "RESULTS.md").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
