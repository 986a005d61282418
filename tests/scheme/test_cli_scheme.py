"""``torchrl-lite train ALGO --col-workers N --grad-workers M``: the recipe through Scheme +
Learner (1/1 here: no Ray), the run folder, ``eval`` and ``--resume``."""

import json

from torchrl_lite.cli import evaluate, main


def test_cli_train_with_scheme_eval_and_resume(tmp_path):
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


def test_cli_scheme_bad_worker_count(tmp_path, capsys):
    code = main(["train", "ppo", "--col-workers", "0", "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 2
    assert "--col-workers must be >= 1, got 0" in capsys.readouterr().err
