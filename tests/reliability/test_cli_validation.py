"""The CLI range-checks every option before anything runs, guards --resume, reports crashes."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from torchrl_lite import cli
from torchrl_lite.cli import main
from torchrl_lite.recipes import get_recipe
from torchrl_lite.trainers import save_checkpoint


def error_line(capsys, argv, code=2) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchrl-lite: error: ") and "\n" not in err, err
    return err


@pytest.mark.parametrize(
    "argv, named",
    [
        (["train", "ppo", "--frames", "-5"], "--frames -5"),
        (["train", "ppo", "--frames", "0"], "--frames 0"),
        (["train", "ppo", "--seed", "-1"], "--seed -1"),
        (["train", "ppo", "lr=-1"], "lr=-1"),
        (["train", "ppo", "lr=nan"], "lr=nan"),
        (["train", "ppo", "gamma=1.5"], "gamma=1.5"),
        (["train", "ppo", "num_envs=0"], "num_envs=0"),
        (["train", "ppo", "hidden=0"], "hidden=0"),
        (["train", "ppo", "frames_per_batch=-64"], "frames_per_batch=-64"),
        (["train", "ppo", "mini_batch_size=0"], "mini_batch_size=0"),
        (["train", "ppo", "clip_epsilon=0"], "clip_epsilon=0"),
        (["train", "dqn", "--env", "CartPole-v1", "batch_size=-3"], "batch_size=-3"),
        (["train", "dqn", "--env", "CartPole-v1", "eps_end=2"], "eps_end=2"),
        (["train", "dqn", "--env", "CartPole-v1", "lr_end=0"], "lr_end=0"),
        (["train", "sac", "tau=0"], "tau=0"),
        (["train", "sac", "buffer_size=0"], "buffer_size=0"),
        (["train", "sac", "utd_ratio=-1"], "utd_ratio=-1"),
        (["eval", "somewhere", "--episodes", "0"], "--episodes 0"),
        (["dataset", "run", "out.hdf5", "--frames", "0"], "--frames 0"),
        (["dataset", "run", "out.hdf5", "--noise", "-0.5"], "--noise -0.5"),
        (["demo", "--num-envs", "-2"], "--num-envs -2"),
        (["demo", "--steps", "0"], "--steps 0"),
    ],
)
def test_cli_out_of_range_option_names_it_before_anything_runs(argv, named, capsys, tmp_path):
    out = tmp_path / "run"
    if argv[0] == "train":
        argv = [*argv, "--out", str(out), "--quiet"]
    err = error_line(capsys, argv)
    assert named in err and "must be" in err, err
    assert not out.exists()  # refused before the run folder was touched


def fake_run(tmp_path, algo="ppo", **changes):
    """A run folder with a config and a (tiny) complete checkpoint: enough to reach the checks."""
    run = tmp_path / "run"
    run.mkdir()
    cfg = dataclasses.replace(get_recipe(algo).Config(), **changes)
    config = {"algo": algo, "config": dataclasses.asdict(cfg)}
    (run / "config.json").write_text(json.dumps(config))
    save_checkpoint(run / "checkpoint", {"trainer": {}})
    return run


@pytest.mark.parametrize(
    "extra, named, saved",
    [
        (["hidden=128"], "hidden=128", "hidden=64"),
        (["env=CartPole-v1"], "env=CartPole-v1", "env='Pendulum-v1'"),
        (["--env", "MountainCarContinuous-v0"], "--env MountainCarContinuous-v0", "env="),
        (["num_envs=8", "hidden=32"], "hidden=32, num_envs=8", "hidden=64, num_envs=4"),
        (["pixels=true"], "pixels=true", "pixels=False"),
    ],
)
def test_cli_resume_refuses_overrides_that_change_network_or_env(
    extra, named, saved, capsys, tmp_path
):
    run = fake_run(tmp_path)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    err = error_line(capsys, ["train", "--resume", str(run), *extra, "--quiet"])
    assert "--resume" in err and named in err and saved in err, err
    assert before == {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


def test_cli_resume_range_checks_overrides_too(capsys, tmp_path):
    run = fake_run(tmp_path)
    err = error_line(capsys, ["train", "--resume", str(run), "frames=-1"])
    assert "frames=-1" in err and "must be >= 1" in err


def test_cli_unexpected_exception_is_one_line_with_a_saved_traceback(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHRL_LITE_TRACEBACK_DIR", str(tmp_path / "tb"))

    def broken(*args):
        raise RuntimeError("the env crashed\nwith a second line")

    monkeypatch.setattr(cli, "demo", broken)
    err = error_line(capsys, ["demo"], code=1)
    assert "RuntimeError: the env crashed with a second line" in err
    path = re.search(r"traceback saved to (\S+)\)$", err).group(1)
    text = open(path).read()
    assert text.startswith("Traceback") and "in broken" in text and "the env crashed" in text


def test_cli_resume_recovers_a_checkpoint_left_by_a_killed_save(capsys, tmp_path):
    out = tmp_path / "run"
    small = ["frames_per_batch=128", "num_envs=1", "mini_batch_size=64", "epochs=1"]
    base = ["train", "ppo", "--env", "Pendulum-v1", "--frames", "256", "--out", str(out)]
    assert main([*base, *small, "--quiet", "--logger", "none"]) == 0
    os.rename(out / "checkpoint", out / "checkpoint.old-999999")  # killed between renames
    capsys.readouterr()
    with pytest.warns(UserWarning, match="checkpoint.old-999999"):
        assert main(["train", "--resume", str(out), "frames=384", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 384  # continued from 256, not from scratch
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint")) == [
        "checkpoint"
    ]
