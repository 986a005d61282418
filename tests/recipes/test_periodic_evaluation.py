"""PeriodicEvaluation and `train --eval-every`: deterministic episodes against a raw
gymnasium loop, the schedule, the run folder and resume, and the refused combinations."""

import csv
import json
from types import SimpleNamespace

import gymnasium
import pytest
import torch
import torch.nn.functional as F

from torchrl_lite.cli import main
from torchrl_lite.envs import ExplorationType, exploration_type
from torchrl_lite.recipes.common import PeriodicEvaluation, make_env, play_deterministic


def _lean(td):  # push the cart towards where the pole falls
    obs = td["observation"]
    return td.set("action", F.one_hot((obs[..., 2] > 0).long(), 2))


def _raw_returns(seed: int, episodes: int, max_steps: int) -> list[float]:
    env = gymnasium.make("CartPole-v1")
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed) if i == 0 else env.reset()
        total = 0.0
        for _ in range(max_steps):
            obs, reward, terminated, truncated, _ = env.step(int(obs[2] > 0))
            total += reward
            if terminated or truncated:
                break
        returns.append(total)
    env.close()
    return returns


@pytest.mark.parametrize("max_steps", [500, 40])
def test_evaluation_episodes_match_a_raw_gymnasium_loop(max_steps):
    evaluation = PeriodicEvaluation(make_env("CartPole-v1", seed=3), _lean, interval=100,
                                    episodes=3, max_steps=max_steps)  # fmt: skip
    first, second = evaluation.evaluate(), evaluation.evaluate()
    reference = _raw_returns(3, 6, max_steps)
    assert first + second == reference
    assert len(set(reference)) > 1  # different episodes, not one repeated
    if max_steps == 40:
        assert max(reference) == 40  # the cap ends an episode


def test_play_deterministic_plays_whole_episodes_greedily_without_gradients():
    seen = []

    def policy(td):
        seen.append((exploration_type(), torch.is_grad_enabled()))
        return _lean(td)

    rollouts = play_deterministic(make_env("CartPole-v1", seed=5), policy, 3, 60)
    returns = [float(r.get(("next", "reward")).sum()) for r in rollouts]
    assert returns == _raw_returns(5, 3, 60)  # each to its end or the cap, one after another
    assert [r.shape[-1] for r in rollouts] == [int(x) for x in returns]
    assert set(seen) == {(ExplorationType.DETERMINISTIC, False)}
    assert torch.is_grad_enabled() and exploration_type() != ExplorationType.DETERMINISTIC


def test_evaluations_run_past_each_interval_and_after_the_last_batch():
    trainer = SimpleNamespace(collected_frames=0, total_frames=2_560)
    evaluation = PeriodicEvaluation(make_env("CartPole-v1", seed=0), _lean, interval=1_000,
                                    episodes=1)  # fmt: skip
    evaluation._trainer = trainer
    for frames in range(256, 2_561, 256):
        trainer.collected_frames = frames
        evaluation()
    assert [h[0] for h in evaluation.history] == [1_024, 2_048, 2_560]
    evaluation()  # the same frame count again (a target stop): no second evaluation
    assert len(evaluation.history) == 3


def _rows(path):
    with open(path) as f:
        return [(int(r["frames"]), float(r["mean_return"])) for r in csv.DictReader(f)]


def test_cli_eval_every_writes_evaluations_and_resume_keeps_them(tmp_path):
    out = tmp_path / "dqn"
    args = ["train", "dqn", "--env", "CartPole-v1", "--quiet", "--logger", "none",
            "init_random_frames=256", "optim_steps_per_batch=4"]  # fmt: skip
    assert main([*args, "--frames", "1024", "--out", str(out), "--eval-every", "512",
                 "--eval-episodes", "2"]) == 0  # fmt: skip
    assert [f for f, _ in _rows(out / "evaluations.csv")] == [512, 1024]
    saved = json.loads((out / "config.json").read_text())
    assert saved["evaluation"] == {"every": 512, "episodes": 2}
    assert main(["train", "--resume", str(out), "--frames", "1536", "--quiet",
                 "--logger", "none"]) == 0  # fmt: skip
    rows = _rows(out / "evaluations.csv")
    assert [f for f, _ in rows] == [512, 1024, 1536]  # the saved options and history
    summary = json.loads((out / "summary.json").read_text())["evaluation"]
    assert summary["frames"] == 1536 and summary["mean_return"] == rows[-1][1]
    assert summary["best_mean_return"] == max(r for _, r in rows)


def test_cli_eval_every_can_start_on_resume(tmp_path):
    out = tmp_path / "dqn"
    args = ["--quiet", "--logger", "none"]
    assert main(["train", "dqn", "--frames", "512", "--out", str(out), *args]) == 0
    assert main(["train", "--resume", str(out), "--frames", "1024", "--eval-every", "256",
                 "--eval-episodes", "1", *args]) == 0  # fmt: skip
    assert [f for f, _ in _rows(out / "evaluations.csv")] == [768, 1024]
    assert main(["train", "--resume", str(out), "--frames", "1280", *args]) == 0  # kept on
    assert [f for f, _ in _rows(out / "evaluations.csv")] == [768, 1024, 1280]


@pytest.mark.parametrize("argv, message", [
    (["train", "dqn", "--eval-every", "0"], "--eval-every 0: must be >= 1"),
    (["train", "dqn", "--eval-episodes", "3"], "--eval-episodes needs --eval-every FRAMES"),
    (["train", "iql", "--env", "Pendulum-v1", "dataset=missing.hdf5", "--eval-every", "100"],
     "offline recipes already evaluate the policy every eval_interval"),
    (["train", "ppo", "--col-workers", "2", "--eval-every", "100"],
     "--eval-every is not available with --col-workers/--grad-workers"),
])  # fmt: skip
def test_cli_eval_every_bad_inputs_are_clear_errors(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_policy_mode_is_restored_after_an_evaluation():
    net = torch.nn.Linear(4, 2)
    net.train()

    def policy(td):
        return td.set("action", F.one_hot(net(td["observation"]).argmax(-1), 2))

    policy_module = torch.nn.Module()
    policy_module.net = net
    policy_module.forward = policy
    evaluation = PeriodicEvaluation(make_env("CartPole-v1", seed=0), policy_module, interval=1,
                                    episodes=1)  # fmt: skip
    seen = []
    policy_module.forward = lambda td: (seen.append(net.training), policy(td))[1]
    evaluation.evaluate()
    assert seen and not any(seen) and net.training  # eval mode inside, train mode after
