"""benchmarks/keep_snapshots.py: copies of a run's weights, taken from real checkpoint
folders written by ``save_checkpoint``."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

from torchrl_lite.trainers.checkpoint import save_checkpoint

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location(
    "keep_snapshots", ROOT / "benchmarks" / "keep_snapshots.py"
)
keep_snapshots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(keep_snapshots)


def _save(run: Path, frames: int) -> None:
    weights = {"w": torch.full((2,), float(frames))}
    save_checkpoint(run / "checkpoint", weights, meta={"collected_frames": frames})


def test_one_copy_per_multiple_of_every(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert keep_snapshots.snapshot(run, 100) is None  # no checkpoint yet
    _save(run, 60)
    assert keep_snapshots.snapshot(run, 100) is None  # below the first multiple
    _save(run, 100)
    kept = keep_snapshots.snapshot(run, 100)
    assert kept == run / "snapshots" / "state-100.pt"
    assert torch.load(kept, weights_only=False)["w"].tolist() == [100.0, 100.0]
    _save(run, 150)  # still within [100, 200): the copy taken at 100 stays
    assert keep_snapshots.snapshot(run, 100) is None
    assert torch.load(kept, weights_only=False)["w"].tolist() == [100.0, 100.0]
    _save(run, 250)  # a poll missed 200: the copy is named after the multiple crossed
    assert keep_snapshots.snapshot(run, 100) == run / "snapshots" / "state-200.pt"
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == [
        "state-100.pt",
        "state-200.pt",
    ]


def test_the_command_stops_at_the_summary_and_refuses_bad_input(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _save(run, 100)
    (run / "summary.json").write_text("{}")
    script = str(ROOT / "benchmarks" / "keep_snapshots.py")
    done = subprocess.run([sys.executable, script, str(run), "--every", "100"], timeout=60)
    assert done.returncode == 0  # a finished run: nothing to wait for
    bad = subprocess.run(
        [sys.executable, script, str(run), "--every", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--every must be >= 1, got 0" in bad.stderr
    missing = subprocess.run(
        [sys.executable, script, str(tmp_path / "nowhere")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "no run folder at" in missing.stderr
