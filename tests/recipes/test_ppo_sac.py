"""Short learning runs of the PPO and SAC recipes: returns must move the right way."""

import dataclasses

import pytest
import torch

from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import EpisodeReturns, make_env


def _train(algo: str, **changes) -> list[float]:
    recipe = get_recipe(algo)
    cfg = config_for(recipe, "Pendulum-v1", **changes)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    episodes = EpisodeReturns()
    episodes.register(trainer)
    trainer.train()
    return [r for _, r in episodes.history]


def test_ppo_recipe_learns_pendulum_short():
    returns = _train("ppo", frames=20_480)
    first, last = sum(returns[:8]) / 8, sum(returns[-8:]) / 8
    assert last > first + 250, (first, last)


def test_sac_recipe_learns_pendulum_short():
    returns = _train("sac", frames=3_000, init_random_frames=400)
    first, last = sum(returns[:2]) / 2, sum(returns[-3:]) / 3
    assert last > first + 200, (first, last)


def test_recipe_configs_are_frozen_and_documented():
    for algo in ("ppo", "sac"):
        cfg = get_recipe(algo).Config()
        assert dataclasses.is_dataclass(cfg)
        try:
            cfg.lr = 1.0
        except dataclasses.FrozenInstanceError:
            pass
        else:
            raise AssertionError("Config must be frozen")


@pytest.mark.dm_control
def test_dm_control_recipe_env_concatenates_observations_and_trains():
    import numpy as np
    from dm_control import suite

    env = make_env("dm_control/cartpole-swingup", num_envs=2, seed=3)
    assert env.observation_spec["observation"].shape == (2, 5)
    assert env.observation_spec["observation"].dtype == torch.float32
    first = env.reset()["observation"][0]
    raw = suite.load("cartpole", "swingup", task_kwargs={"random": 3}).reset().observation
    expected = np.concatenate([raw["position"], raw["velocity"]]).astype(np.float32)
    torch.testing.assert_close(first, torch.from_numpy(expected))

    recipe = get_recipe("ppo")
    cfg = config_for(recipe, "dm_control/cartpole-swingup", frames=2_000, num_envs=2,
                     frames_per_batch=1_000, epochs=1, mini_batch_size=250)  # fmt: skip
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()
    assert trainer.collected_frames == 2_000


@pytest.mark.parametrize(("env_id", "once"), [("Pendulum-v1", False), ("ALE/Pong-v5", True)])
def test_ppo_advantages_once_per_batch_on_atari_as_in_the_paper(env_id, once, monkeypatch):
    """Atari: GAE once per collected batch (the PPO paper, SB3); elsewhere every epoch."""
    recipe = get_recipe("ppo")
    small = dict(frames=64, num_envs=2, frames_per_batch=32, mini_batch_size=16, epochs=3)
    cfg = config_for(recipe, env_id, hidden=16, **small)
    assert cfg.recompute_advantage is not once
    calls = []
    original = recipe.GAE.forward
    monkeypatch.setattr(
        recipe.GAE, "forward", lambda self, td: calls.append(1) or original(self, td)
    )
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()
    assert len(calls) == 2 * (1 if once else cfg.epochs)  # two batches
