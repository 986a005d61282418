"""``torchrl-lite train ALGO --col-workers N --grad-workers M``: the recipe through Scheme +
Learner (1/1 here: no Ray), the run folder, ``eval`` and ``--resume``."""

import json

import pytest

from torchrl_lite.cli import evaluate, main


def test_cli_train_with_scheme_eval_and_resume(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "ppo", "--env", "Pendulum-v1", "--frames", "2048", "--col-workers", "1",
            "--grad-workers", "1", "--out", str(out), "--quiet", "epochs=1"]  # fmt: skip
    assert main(args) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["scheme"]["col_remote_workers"] == 1 and saved["config"]["epochs"] == 1
    for name in ("checkpoint", "actor_critic.state_dict", "episodes.csv", "learning_curve.png",
                 "summary.json", "logs/metrics.csv"):  # fmt: skip
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 2048
    mean, std = evaluate(str(out), episodes=1, max_steps=50)
    assert mean < 0 and std == 0
    assert main(["train", "--resume", str(out), "--quiet", "frames=4096"]) == 0
    assert json.loads((out / "summary.json").read_text())["frames"] == 4096
    # the workers' optimizers are restored as saved: a new rate is refused, not ignored
    assert main(["train", "--resume", str(out), "--quiet", "frames=6144", "lr=1e-5"]) == 2
    err = capsys.readouterr().err
    assert "lr=1e-5 cannot change a distributed (Scheme) run's learning rate" in err
    assert json.loads((out / "summary.json").read_text())["frames"] == 4096  # untouched


def test_cli_scheme_bad_worker_count(tmp_path, capsys):
    code = main(["train", "ppo", "--col-workers", "0", "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 2
    assert "--col-workers must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.ray
def test_cli_train_two_ray_col_workers_eval_and_resume(ray_session, tmp_path):
    """``--col-workers 2`` in the suite's Ray session (the CLI reuses an initialised Ray):
    2 workers x 2 envs x 128 steps = 512 frames a round; then ``eval`` and ``--resume``."""
    out = tmp_path / "run"
    args = ["train", "ppo", "--env", "Pendulum-v1", "--frames", "1024", "--col-workers", "2",
            "--out", str(out), "--quiet", "num_envs=2", "frames_per_batch=256", "epochs=1",
            "mini_batch_size=128"]  # fmt: skip
    assert main(args) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["scheme"]["col_remote_workers"] == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 1024 and summary["updates"] == 5  # 4 per round, 1 after 2nd
    assert ray_session.is_initialized()  # the suite's session is still the one in use
    mean, std = evaluate(str(out), episodes=1, max_steps=50)
    assert mean < 0 and std == 0
    assert main(["train", "--resume", str(out), "--quiet", "frames=2048"]) == 0
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["frames"] == 2048 and resumed["scheme"]["col_remote_workers"] == 2
