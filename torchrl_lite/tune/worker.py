"""One ``tune --jobs J`` worker process: ``python -m torchrl_lite.tune.worker DIR N S I``
runs trials of the study in ``DIR`` until it holds ``N`` finished ones (``S`` seconds at
most, 0: no limit); ``I`` is the worker's index (its sampler seed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from torchrl_lite.tune.study import META, TuneSetup, optimize


def main(argv: list[str]) -> int:
    folder, trials, timeout, worker = Path(argv[0]), int(argv[1]), float(argv[2]), int(argv[3])
    setup = TuneSetup(**json.loads((folder / META).read_text()))
    try:
        optimize(folder, setup, trials, timeout or None, worker=worker)
    except KeyboardInterrupt:  # the parent reports; the finished trials are in the study
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
