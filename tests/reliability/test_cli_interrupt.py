"""Ctrl-C from the command line: a real SIGINT to a training process saves a checkpoint at
the frames collected, says which, and ``--resume`` continues with no log step twice; a
second SIGINT aborts at once, keeping the last complete checkpoint."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchrl_lite import _run_folder as run_folder
from torchrl_lite.trainers.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--quiet", "num_envs=1", "mini_batch_size=64", "epochs=1", "target=none"]


def start(out: Path, *extra: str) -> subprocess.Popen:
    args = ["train", "ppo", "--env", "Pendulum-v1", "--frames", "1000000", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "torchrl_lite", *args, *SMALL, *extra],
        cwd=out.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT at its default even under a runner that ignores it (children inherit that)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def logged_steps(out: Path) -> list[int]:
    path = out / "logs" / "metrics.csv"
    if not path.is_file():
        return []
    with path.open() as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def wait_for_steps(proc, out: Path, n: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while len(logged_steps(out)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run logged too little in time"
        time.sleep(0.2)


def test_first_sigint_saves_the_frames_collected_and_resume_logs_no_step_twice(tmp_path):
    out = tmp_path / "run"
    proc = start(out, "frames_per_batch=256")
    wait_for_steps(proc, out, 3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Ctrl-C: finishing the update in flight" in stderr
    said = int(re.search(r"interrupted: the checkpoint in \S+ holds (\d+) frames", stderr)[1])
    assert f"torchrl-lite train --resume {out}" in stderr
    state, _ = load_checkpoint(out / "checkpoint")
    summary = json.loads((out / "summary.json").read_text())
    assert said == state["trainer"]["collected_frames"] == summary["frames"]
    assert said % 256 == 0 and logged_steps(out)[-1] == said  # saved where it stopped
    # a hard kill after more batches: the logs run ahead of the checkpoint
    rows = (out / "logs" / "metrics.csv").read_text()
    (out / "logs" / "metrics.csv").write_text(rows + f"{said + 256},0.0\n")
    resumed = subprocess.run(
        [sys.executable, "-m", "torchrl_lite", "train", "--resume", str(out),
         "--frames", str(said + 512), "--quiet"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    steps = logged_steps(out)
    assert len(steps) == len(set(steps)) and steps == sorted(steps)
    assert steps[-2:] == [said + 256, said + 512]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == said + 512 and len(summary["segment_seconds"]) == 2
    assert summary["seconds"] == pytest.approx(sum(summary["segment_seconds"]), abs=0.11)
    assert summary["segment_seconds"][0] > 0  # the first segment counted (not reset at resume)


def test_second_sigint_aborts_and_keeps_the_last_complete_checkpoint(tmp_path):
    out = tmp_path / "run"
    # long updates (16 epochs of a 4096-frame batch) so that both signals land in one
    proc = start(out, "frames_per_batch=4096", "epochs=16")
    wait_for_steps(proc, out, 1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "aborted (second Ctrl-C)" in stderr and "Traceback" not in stderr
    frames = run_folder.checkpoint_frames(out / "checkpoint")
    if frames is None:  # no checkpoint yet: the message says so
        assert "no checkpoint was saved" in stderr
    else:
        assert f"holds {frames} frames" in stderr
        load_checkpoint(out / "checkpoint")  # complete
    assert not list(out.glob("checkpoint.*"))  # no half-written copy left


def test_the_message_after_ctrl_c_reads_what_is_on_disk(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    assert "no checkpoint was saved" in run_folder.interrupted_message(out, aborted=False)
    (out / "checkpoint").mkdir()
    (out / "checkpoint" / "meta.json").write_text('{"collected_frames": 2048}')
    message = run_folder.interrupted_message(out, aborted=True)
    assert message.startswith("aborted (second Ctrl-C)") and "holds 2048 frames" in message


def test_sigint_on_the_scheme_path_saves_and_resumes(tmp_path):
    out = tmp_path / "run"
    proc = start(out, "frames_per_batch=256", "--col-workers", "1", "--grad-workers", "1")
    wait_for_steps(proc, out, 2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    said = int(re.search(r"interrupted: the checkpoint in \S+ holds (\d+) frames", stderr)[1])
    summary = json.loads((out / "summary.json").read_text())
    assert said == summary["frames"] == logged_steps(out)[-1]
    assert (out / "actor_critic.state_dict").is_file()
    resumed = subprocess.run(
        [sys.executable, "-m", "torchrl_lite", "train", "--resume", str(out),
         "--frames", str(said + 512), "--quiet"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    steps = logged_steps(out)
    assert len(steps) == len(set(steps)) and steps[-1] == said + 512
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["segment_seconds"]) == 2
    assert summary["seconds"] >= sum(summary["segment_seconds"]) - 0.2
