"""Env families: MuJoCo and dm_control ids get the recipes' physics-task defaults."""

import pytest
import torch

from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import env_family, make_env

# MuJoCo writes MUJOCO_LOG.TXT into the working folder: a temporary one here
pytestmark = pytest.mark.usefixtures("mujoco_log_in_tmp")

CONTINUOUS = ("ppo", "a2c", "sac", "td3", "ddpg", "redq")


def test_env_family_of_gymnasium_and_dm_control_ids():
    assert env_family("Pendulum-v1") == "classic"
    assert env_family("CartPole-v1") == "classic"
    assert env_family("HalfCheetah-v5") == "mujoco"
    assert env_family("InvertedPendulum-v5") == "mujoco"
    assert env_family("dm_control/cheetah-run") == "dm_control"
    assert env_family("NoSuchEnv-v0") == "classic"  # unknown ids fail later, in make_env


@pytest.mark.parametrize("algo", CONTINUOUS)
def test_physics_ids_get_the_family_defaults_and_overrides_still_win(algo):
    recipe = get_recipe(algo)
    classic = config_for(recipe, "Pendulum-v1")
    for env_id, family in (("HalfCheetah-v5", "mujoco"), ("dm_control/cheetah-run", "dm_control")):
        cfg = config_for(recipe, env_id)
        expected = recipe.ENV_DEFAULTS[family]
        assert cfg.env == env_id
        assert {k: getattr(cfg, k) for k in expected} == expected
        assert cfg.frames >= 300_000 and cfg.frames >= classic.frames
        assert cfg.gamma == 0.99
    assert config_for(recipe, "HalfCheetah-v5", frames=123).frames == 123


def test_make_env_casts_mujoco_float64_observations():
    env = make_env("InvertedPendulum-v5", seed=0)
    assert env.observation_spec["observation"].dtype == torch.float32
    rollout = env.rollout(5)
    assert rollout["observation"].dtype == torch.float32
    assert rollout["next", "reward"].dtype == torch.float32


@pytest.mark.parametrize("algo", CONTINUOUS)
def test_recipes_train_a_few_frames_on_a_mujoco_env(algo):
    recipe = get_recipe(algo)
    small = {"frames": 64, "hidden": 16}
    if algo == "ppo":
        small.update(frames_per_batch=32, mini_batch_size=16, epochs=1)
    elif algo == "a2c":
        small.update(frames_per_batch=32, obs_norm_steps=8)
    else:
        small.update(init_random_frames=32, batch_size=16, utd_ratio=1.0)
    cfg = config_for(recipe, "InvertedPendulum-v5", **small)
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()
    assert trainer.collected_frames >= 64
    assert all(p.isfinite().all() for p in trainer.loss_module.parameters())
