"""The torchrl-lite command: train/eval/resume on a real short run, and every bad input."""

import json

import pytest

from torchrl_lite.cli import main


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "ppo"
    code = main(
        ["train", "ppo", "--env", "Pendulum-v1", "--frames", "4096", "--out", str(out), "--quiet"]
    )
    assert code == 0
    return out


def test_cli_train_writes_the_run_folder(ppo_run):
    for name in ("config.json", "episodes.csv", "learning_curve.png", "summary.json"):
        assert (ppo_run / name).is_file(), name
    assert (ppo_run / "checkpoint" / "state.pt").is_file()
    metrics = (ppo_run / "logs" / "metrics.csv").read_text().splitlines()
    assert metrics[0].startswith("step,") and "loss_objective" in metrics[0] and len(metrics) > 1
    saved = json.loads((ppo_run / "config.json").read_text())
    assert saved["algo"] == "ppo" and saved["config"]["frames"] == 4096
    summary = json.loads((ppo_run / "summary.json").read_text())
    assert summary["frames"] == 4096 and summary["episodes"] == 4 * (4096 // 4 // 200)


def test_cli_eval_prints_mean_return(ppo_run, capsys):
    assert main(["eval", str(ppo_run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "mean return:" in out and "over 2 episodes" in out


def test_cli_resume_continues_the_run(ppo_run, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(ppo_run, run)
    assert main(["train", "--resume", str(run), "frames=6144", "--quiet"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frames"] == 6144
    assert len((run / "episodes.csv").read_text().splitlines()) - 1 == 4 * (6144 // 4 // 200)


def test_cli_resume_applies_a_changed_learning_rate(ppo_run, tmp_path):
    import shutil

    import torch

    run = tmp_path / "copy"
    shutil.copytree(ppo_run, run)
    saved = json.loads((run / "config.json").read_text())["config"]["lr"]
    assert main(["train", "--resume", str(run), "frames=5120", "lr=1e-5", "--quiet"]) == 0
    assert json.loads((run / "config.json").read_text())["config"]["lr"] == 1e-5
    state = torch.load(run / "checkpoint" / "state.pt", weights_only=False)
    groups = state["hooks"]["optimizer"]["optimizer"]["param_groups"]
    assert groups and saved != 1e-5
    assert all(group["lr"] == pytest.approx(1e-5) for group in groups)


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_cli_unknown_algorithm(capsys, tmp_path):
    err = _error(capsys, ["train", "ppoo", "--out", str(tmp_path / "x")])
    assert "Unknown algorithm 'ppoo'" in err and "Did you mean 'ppo'" in err
    assert not (tmp_path / "x").exists()


def test_cli_unknown_env(capsys, tmp_path):
    err = _error(capsys, ["train", "ppo", "--env", "Pendulum-v9", "--out", str(tmp_path / "x")])
    assert "Unknown gymnasium env id 'Pendulum-v9'" in err
    assert not (tmp_path / "x").exists()


def test_cli_unknown_override_suggests(capsys, tmp_path):
    err = _error(capsys, ["train", "ppo", "--out", str(tmp_path / "x"), "lerning_rate=1", "lr=2"])
    assert "Unknown option 'lerning_rate'" in err
    err = _error(capsys, ["train", "ppo", "--out", str(tmp_path / "x"), "gama=0.5"])
    assert "Did you mean 'gamma'" in err
    err = _error(capsys, ["train", "ppo", "--out", str(tmp_path / "x"), "epochs=ten"])
    assert "epochs='ten' is not a valid int" in err
    assert not (tmp_path / "x").exists()


def test_cli_algorithm_env_mismatch(capsys, tmp_path):
    err = _error(capsys, ["train", "sac", "--env", "CartPole-v1", "--out", str(tmp_path / "x")])
    assert "SAC needs a continuous action space" in err
    assert not (tmp_path / "x").exists()


def test_cli_resume_missing_or_corrupt(capsys, ppo_run, tmp_path):
    err = _error(capsys, ["train", "--resume", str(tmp_path / "nothing")])
    assert "No run in" in err
    import shutil

    run = tmp_path / "corrupt"
    shutil.copytree(ppo_run, run)
    (run / "checkpoint" / "state.pt").write_bytes(b"not a checkpoint")
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    err = _error(capsys, ["train", "--resume", str(run), "--quiet"])
    assert "checkpoint" in err and str(run) in err
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before  # nothing overwritten
    assert (run / "checkpoint" / "state.pt").read_bytes() == b"not a checkpoint"


def test_cli_demo(capsys):
    assert main(["demo", "--env", "CartPole-v1", "--num-envs", "2", "--steps", "100"]) == 0
    assert "random policy on CartPole-v1" in capsys.readouterr().out


def test_cli_output_into_a_closed_pipe_stops_quietly():
    """`torchrl-lite config ppo | head -1`: the reader left before the output was written;
    the command stops with no error line and no traceback."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    done = subprocess.run(
        [sys.executable, "-m", "torchrl_lite", "config", "ppo"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    assert done.stderr == ""
    assert done.returncode == 0
