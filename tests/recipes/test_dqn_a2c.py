"""Short learning runs of the DQN and A2C recipes, and their action-space checks."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl_lite.cli import main
from torchrl_lite.envs import ExplorationType, set_exploration_type
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import EpisodeReturns


def _build(algo: str, env: str, **changes):
    recipe = get_recipe(algo)
    trainer, policy = recipe.make_trainer(config_for(recipe, env, **changes), progress_bar=False)
    episodes = EpisodeReturns()
    episodes.register(trainer)
    return trainer, policy, episodes


def _mean(values) -> float:
    return sum(values) / len(values)


def test_dqn_recipe_learns_cartpole_short():
    trainer, policy, episodes = _build(
        "dqn", "CartPole-v1", frames=8_192, eps_frames=4_096, optim_steps_per_batch=64
    )
    states = TensorDict(observation=torch.randn(256, 4) * 0.05, batch_size=[256])  # near upright

    def mean_q() -> float:
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return policy(states.clone())["chosen_action_value"].mean().item()

    q_before = mean_q()
    trainer.train()
    q_after = mean_q()
    returns = [r for _, r in episodes.history]
    first, last = _mean(returns[:20]), _mean(returns[-10:])
    assert last > first + 40, (first, last)
    assert q_after > q_before + 5, (q_before, q_after)  # values grow towards sum of rewards


def test_dqn_lr_end_decays_the_learning_rate_linearly_over_the_budget():
    import pytest

    trainer, _, _ = _build("dqn", "CartPole-v1", frames=1_024, frames_per_batch=256, lr=1e-3,
                           lr_end=2e-4, init_random_frames=256, optim_steps_per_batch=2,
                           batch_size=16)  # fmt: skip
    seen = []  # the rate after each batch: the decay op runs before this one
    trainer.register_op("post_steps", lambda: seen.append(trainer.optimizer.param_groups[0]["lr"]))
    trainer.train()
    expected = [1e-3 + (2e-4 - 1e-3) * f / 1_024 for f in (256, 512, 768, 1_024)]
    assert seen == pytest.approx(expected, rel=1e-9)
    constant, _, _ = _build("dqn", "CartPole-v1", frames=512, lr=1e-3, init_random_frames=256)
    constant.train()
    assert constant.optimizer.param_groups[0]["lr"] == 1e-3  # lr_end=None


def test_dqn_lr_drop_at_lowers_the_rate_once_the_training_mean_reaches_it():
    import pytest

    trainer, _, episodes = _build("dqn", "CartPole-v1", frames=4_096, frames_per_batch=256,
                                  lr=1e-3, lr_drop_at=30.0, lr_drop_to=1e-4,
                                  init_random_frames=256, eps_frames=2_048,
                                  optim_steps_per_batch=16)  # fmt: skip
    seen, expected, reached = [], [], False

    def record():  # after each batch: the rate, and the rate the independent tracker implies
        nonlocal reached
        reached |= len(episodes.history) >= 10 and episodes.running_mean() >= 30.0
        seen.append(trainer.optimizer.param_groups[0]["lr"])
        expected.append(1e-4 if reached else 1e-3)

    trainer.register_op("post_steps", record)
    trainer.train()
    assert seen == expected
    assert 1e-3 in seen and 1e-4 in seen, seen  # both phases happened in this run
    drop = trainer._modules["lr_drop"]
    assert drop.dropped_at == 256 * (seen.index(1e-4) + 1)
    again, _, _ = _build("dqn", "CartPole-v1", lr_drop_at=30.0)
    again._modules["lr_drop"].load_state_dict(drop.state_dict())  # what a resume restores
    assert again._modules["lr_drop"].dropped_at == drop.dropped_at
    with pytest.raises(ValueError, match="lr_end .* and lr_drop_at .* both set the learning"):
        _build("dqn", "CartPole-v1", lr_end=1e-5, lr_drop_at=100.0)


def test_a2c_recipe_learns_pendulum_short():
    # a constant lr: decaying it to zero over so few frames would stall learning; gains of
    # the last 16 episodes over the first 16: about 700, 670, 320 for seeds 0, 1, 2
    trainer, _, episodes = _build("a2c", "Pendulum-v1", frames=81_920, seed=0, lr_decay=False)
    trainer.train()
    returns = [r for _, r in episodes.history]
    first, last = _mean(returns[:16]), _mean(returns[-16:])
    assert last > first + 200, (first, last)


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_cli_dqn_rejects_continuous_actions(capsys, tmp_path):
    out = tmp_path / "run"
    err = _error(capsys, ["train", "dqn", "--env", "Pendulum-v1", "--out", str(out), "--quiet"])
    assert "DQN needs a discrete action space" in err and "Bounded" in err, err
    assert not out.exists()  # rejected before the run folder is touched


def test_cli_a2c_rejects_discrete_actions(capsys, tmp_path):
    out = tmp_path / "run"
    err = _error(capsys, ["train", "a2c", "--env", "CartPole-v1", "--out", str(out), "--quiet"])
    assert "A2C needs a continuous action space" in err and "OneHot" in err, err
    assert not out.exists()
