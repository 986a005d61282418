"""Options mean what they say: ``target=none`` trains the whole budget, the progress bar's
total is what runs, ``eval --video`` streams (memory flat in the episodes), checks its path
first and renders MuJoCo headless from the command line itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.cli import main
from torchrl_lite.recipes import get_recipe
from torchrl_lite.recipes.config import resolve_target as _resolve_target
from torchrl_lite.trainers import Trainer

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--quiet", "--logger", "none", "frames_per_batch=512", "mini_batch_size=256", "epochs=1"]


def test_target_none_trains_the_whole_budget(tmp_path):
    low, none = tmp_path / "low", tmp_path / "none"
    # a target every policy reaches: the run stops once 10 episodes are done
    assert main(["train", "ppo", "--frames", "6144", "--out", str(low), *SMALL,
                 "target=-1e9"]) == 0  # fmt: skip
    summary = json.loads((low / "summary.json").read_text())
    assert summary["solved_at_frames"] == summary["frames"] < 6144
    assert main(["train", "ppo", "--frames", "6144", "--out", str(none), *SMALL,
                 "target=none"]) == 0  # fmt: skip
    summary = json.loads((none / "summary.json").read_text())
    assert summary["frames"] == 6144 and summary["target"] is None
    assert summary["solved_at_frames"] is None
    saved = json.loads((none / "config.json").read_text())
    assert saved["target"] is None and saved["config"]["target"] is None


def test_the_target_is_resolved_once_and_kept_on_resume():
    recipe = get_recipe("ppo")
    cfg = recipe.Config()
    assert _resolve_target(recipe, cfg, {}, None) == -200.0  # the recipe's, for Pendulum
    none = cfg.__class__(target=None)
    assert _resolve_target(recipe, none, {"target": "none"}, None) is None
    assert _resolve_target(recipe, none, {}, {"target": None}) is None  # resumed: kept off
    assert _resolve_target(recipe, none, {}, {"config": {}}) == -200.0  # older run folders


def test_the_progress_bar_total_is_the_frames_that_will_run():
    batches = [TensorDict(x=torch.zeros(100), batch_size=[100]) for _ in range(4)]

    class Collector(list):
        frames_per_batch = 100

    trainer = Trainer(collector=Collector(batches), total_frames=250, optim_steps_per_batch=0,
                      loss_module=lambda td: td, progress_bar=False)  # fmt: skip
    assert trainer._planned_frames() == 300  # 250 rounded up to whole batches of 100
    trainer.train()
    assert trainer.collected_frames == 300


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("video") / "run"
    assert main(["train", "ppo", "--frames", "512", "--out", str(out), *SMALL]) == 0
    return out


def peak_rss_mib(*argv: str, cwd, env=None) -> tuple[float, subprocess.CompletedProcess]:
    """Peak resident memory of ``torchrl-lite ARGV`` run in a child process."""
    code = (
        "import resource, sys\nfrom torchrl_lite.cli import main\ncode = main(sys.argv[1:])\n"
        "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\nsys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split("peak")[-1]) / 1024, done


def test_eval_video_memory_is_flat_in_the_episodes(pendulum_run, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    one, _ = peak_rss_mib("eval", str(pendulum_run), "--episodes", "1", "--video",
                          str(tmp_path / "one.mp4"), cwd=tmp_path)  # fmt: skip
    five, done = peak_rss_mib("eval", str(pendulum_run), "--episodes", "5", "--video",
                              str(tmp_path / "five.mp4"), cwd=tmp_path)  # fmt: skip
    # 800 more 500x500 RGB frames held in memory would be 600 MiB
    assert five - one < 60, (one, five)
    assert f"wrote 1000 frames (5 episodes) to {tmp_path / 'five.mp4'}" in done.stdout
    assert (tmp_path / "five.mp4").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["five.mp4", "one.mp4"]


@pytest.mark.parametrize(
    "video, message",
    [
        ("missing/v.mp4", "the folder missing does not exist"),
        ("v.txt", "the extension '.txt' is not a video format"),
    ],
)
def test_eval_video_checks_its_path_before_the_first_episode(
    video, message, pendulum_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    played = []
    monkeypatch.setattr("torchrl_lite.recipes.common.play_deterministic", played.append)
    assert main(["eval", str(pendulum_run), "--video", video]) == 2
    assert message in capsys.readouterr().err
    assert played == [] and list(tmp_path.iterdir()) == []


def test_eval_video_renders_mujoco_headless_without_make(tmp_path):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    out = tmp_path / "run"
    base = [sys.executable, "-m", "torchrl_lite"]
    unset = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")  # a bare shell on a server
    run_env = {**{k: v for k, v in os.environ.items() if k not in unset}, "PYTHONPATH": str(ROOT)}
    trained = subprocess.run(
        [*base, "train", "ppo", "--env", "InvertedPendulum-v5", "--frames", "128", "--out",
         str(out), "--quiet", "frames_per_batch=128", "mini_batch_size=64", "epochs=1"],
        cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    done = subprocess.run(
        [*base, "eval", str(out), "--episodes", "1", "--video", str(tmp_path / "v.mp4")],
        cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert (tmp_path / "v.mp4").stat().st_size > 0 and "wrote" in done.stdout
