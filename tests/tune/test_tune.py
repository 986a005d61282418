"""Tuning studies: resumable SQLite study, pruning, best config accepted by train."""

import json
import subprocess
import sys

import pytest

from torchrl_lite.cli import main
from torchrl_lite.tune import SEARCH_SPACES, TuneSetup, check_space, run_study
from torchrl_lite.tune.space import space_for

optuna = pytest.importorskip("optuna")

TINY = {  # PPO on Pendulum in 128-frame batches, one epoch: a second or two per trial
    "frames_per_batch": "128", "mini_batch_size": "64", "epochs": "1", "num_envs": "1",
}  # fmt: skip
SPACE = {"lr": {"float": [1e-4, 3e-3], "log": True}, "gamma": {"choices": [0.9, 0.95]}}


def _setup(**changes):
    base = dict(algo="ppo", env="Pendulum-v1", frames=256, eval_episodes=1, fixed=TINY,
                space=SPACE)  # fmt: skip
    return TuneSetup(**{**base, **changes})


def _states(folder):
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{folder}/study.db")
    return [t.state.name for t in study.trials], study


def test_study_is_stored_and_continues_to_more_trials(tmp_path):
    folder = tmp_path / "study"
    summary = run_study(folder, _setup(), trials=3)
    states, _ = _states(folder)
    assert (folder / "study.db").is_file() and len(states) == 3
    assert sum(summary["trials"].values()) == 3
    run_study(folder, _setup(), trials=5)  # the same command with a larger N continues it
    states, study = _states(folder)
    assert len(states) == 5 and all(s in ("COMPLETE", "PRUNED") for s in states)
    for trial in study.trials:  # fed by the periodic evaluations: one report per evaluation
        evaluations = trial.user_attrs["evaluations"]
        assert [v for _, v in sorted(trial.intermediate_values.items())] == [
            e[1] for e in evaluations
        ]
    best = json.loads((folder / "best_config.json").read_text())
    assert set(best) == {*TINY, *SPACE} and best["frames_per_batch"] == 128
    assert best["lr"] == study.best_trial.params["lr"]
    assert (folder / "summary.png").read_bytes()[:4] == b"\x89PNG"


def test_pruner_stops_a_trial_fed_by_its_evaluations(tmp_path):
    """Crafted: Pendulum's returns are below 0, so a threshold of 0 prunes at the first report."""
    folder = tmp_path / "study"
    summary = run_study(folder, _setup(), trials=2, pruner=optuna.pruners.ThresholdPruner(lower=0))
    states, study = _states(folder)
    assert states == ["PRUNED", "PRUNED"] and summary["trials"] == {"pruned": 2}
    assert all(list(t.intermediate_values) == [1] for t in study.trials)
    assert not (folder / "best_config.json").exists()


def test_median_pruner_is_the_default(tmp_path):
    from torchrl_lite.tune.study import open_study

    (tmp_path / "s").mkdir()
    study = open_study(tmp_path / "s", _setup())
    assert isinstance(study.pruner, optuna.pruners.MedianPruner)
    assert isinstance(study.sampler, optuna.samplers.TPESampler)


def test_best_config_file_trains(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "best.json").write_text(json.dumps({"lr": 0.002, "gamma": 0.95, **TINY}))
    argv = ["train", "ppo", "--frames", "128", "--quiet", "--logger", "none"]
    assert main([*argv, "--out", "a", "config=best.json"]) == 0
    saved = json.loads((tmp_path / "a" / "config.json").read_text())["config"]
    assert (saved["lr"], saved["gamma"], saved["frames_per_batch"]) == (0.002, 0.95, 128)
    assert main([*argv, "--out", "b", "config=best.json", "lr=0.0005"]) == 0  # typed wins
    assert json.loads((tmp_path / "b" / "config.json").read_text())["config"]["lr"] == 0.0005


@pytest.mark.parametrize(
    "content, message",
    [(None, "config=best.json: no such file"), ("[1, 2]", "must hold one JSON object")],
)
def test_config_file_bad_input(tmp_path, monkeypatch, capsys, content, message):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "best.json").write_text(content)
    assert main(["train", "ppo", "--frames", "128", "config=best.json"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("algo", sorted(SEARCH_SPACES))
def test_builtin_spaces_name_real_options_in_range(algo):
    from torchrl_lite.tune.study import trial_config

    space = check_space(algo, SEARCH_SPACES[algo], "built-in")
    for pick in (0, -1):  # the lowest and the highest of every entry
        params = {
            k: (e["choices"] if "choices" in e else e.get("float", e.get("int")))[pick]
            for k, e in space.items()
        }
        _, cfg = trial_config(TuneSetup(algo, "Pendulum-v1" if algo != "dqn" else
                                        "CartPole-v1", 1000), params)  # fmt: skip
        assert all(getattr(cfg, k) == v for k, v in params.items())


def _tune(tmp_path, *args):
    return main(["tune", "ppo", "--trials", "3", "--study", str(tmp_path / "s"), *args])


@pytest.mark.parametrize(
    "space, message",
    [
        ({"lrr": {"float": [1e-4, 1e-3]}}, "Unknown option 'lrr' for the ppo recipe"),
        ({"lr": {"float": [1e-3, 1e-4]}}, "the range must be [low, high] with low < high"),
        ({"lr": {"uniform": [0, 1]}}, "needs exactly one of float, int, choices"),
        ({"lr": {"float": [0, 1], "log": True}}, "a log scale needs low > 0"),
        ({"frames": {"int": [1, 2]}}, "'frames' is set by tune itself"),
    ],
)
def test_tune_space_file_bad_input(tmp_path, capsys, space, message):
    (tmp_path / "space.json").write_text(json.dumps(space))
    assert _tune(tmp_path, "--space", str(tmp_path / "space.json")) == 2
    assert message in capsys.readouterr().err


def test_tune_refuses_a_study_folder_of_another_algorithm_or_env(tmp_path, capsys):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "study.json").write_text(json.dumps({**_setup().__dict__, "algo": "sac"}))
    assert _tune(tmp_path, "--env", "Pendulum-v1") == 2
    assert "--study" in (err := capsys.readouterr().err) and "was created for sac" in err
    (folder / "study.json").write_text(
        json.dumps(TuneSetup("ppo", "CartPole-v1", 200_000, space=space_for("ppo")).__dict__)
    )
    assert _tune(tmp_path) == 2
    assert "was created for ppo on CartPole-v1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--jobs", "4096"], "--jobs 4096 is above the"),
        (["--jobs", "0"], "--jobs 0: must be >= 1"),
        (["--timeout", "0"], "--timeout 0.0: must be > 0 seconds"),
        (["frames=10"], "give frames as --frames"),
        (["lr=abc"], "Option lr='abc' is not a valid float"),
    ],
)
def test_tune_option_errors(tmp_path, capsys, args, message):
    assert _tune(tmp_path, *args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_tune_argument_errors_come_before_torch_is_imported(tmp_path):
    code = (
        "import sys; from torchrl_lite.cli import main; "
        f"rc = main(['tune', 'ppo', '--trials', '2', '--jobs', '4096', '--study', r'{tmp_path}']); "
        "print(rc, 'torch' in sys.modules, 'optuna' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["2", "False", "False"]


@pytest.mark.slow
def test_tune_jobs_run_trials_in_worker_processes(tmp_path, capsys):
    space = tmp_path / "space.json"
    space.write_text(json.dumps(SPACE))
    fixed = [f"{k}={v}" for k, v in TINY.items()]
    argv = ["--jobs", "2", "--frames", "128", "--eval-episodes", "1", "--space", str(space)]
    assert _tune(tmp_path, *argv, *fixed) == 0
    states, _ = _states(tmp_path / "s")
    assert len(states) >= 3
    assert sorted(p.name for p in (tmp_path / "s").glob("worker-*.log")) == [
        "worker-0.log", "worker-1.log",
    ]  # fmt: skip
    assert "train it with `torchrl-lite train ppo --env Pendulum-v1 config=" in (
        capsys.readouterr().out
    )
