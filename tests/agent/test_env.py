"""Seed-000 env factories and VecEnv against raw gymnasium with the same seeds."""

import csv
import pickle

import gymnasium
import numpy as np
import pytest
import torch

from torchrl_lite.agent.env import VecEnv
from torchrl_lite.envs import (
    env_seed,
    gym_test_env_factory,
    gym_train_env_factory,
    pybullet_train_env_factory,
)
from torchrl_lite.envs.factories import TEST_SEED_OFFSET

# MuJoCo writes MUJOCO_LOG.TXT into the working folder: a temporary one here
pytestmark = pytest.mark.usefixtures("mujoco_log_in_tmp")


def test_env_seed_differs_per_index_and_is_reproducible():
    seeds = {env_seed(3, g, c, k) for g in range(3) for c in range(3) for k in range(12)}
    assert len(seeds) == 3 * 3 * 12
    assert env_seed(3, 1, 2, 3) == env_seed(3, 1, 2, 3)
    assert env_seed(3, 0, 0, 0) != env_seed(4, 0, 0, 0)


def test_env_seed_bad_index():
    with pytest.raises(ValueError, match="index_env must be an int >= 0, got -1"):
        env_seed(0, 0, 0, -1)


def test_gym_factory_equals_raw_gymnasium_with_the_same_seed():
    env = gym_train_env_factory(
        "Pendulum-v1", index_col_worker=1, index_grad_worker=2, index_env=3, seed=5
    )
    raw = gymnasium.make("Pendulum-v1")
    seed = env_seed(5, 2, 1, 3)
    obs, _ = env.reset()
    raw_obs, _ = raw.reset(seed=seed)
    np.testing.assert_array_equal(obs, raw_obs)
    raw.action_space.seed(seed)
    for _ in range(5):  # the action space is seeded alike
        a, b = env.action_space.sample(), raw.action_space.sample()
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(env.step(a)[0], raw.step(b)[0])
    # a later reset without a seed continues the seeded generator, as gymnasium does
    np.testing.assert_array_equal(env.reset()[0], raw.reset()[0])


def test_gym_test_factory_uses_other_seeds():
    test = gym_test_env_factory("Pendulum-v1", seed=0)
    raw = gymnasium.make("Pendulum-v1")
    np.testing.assert_array_equal(test.reset()[0], raw.reset(seed=env_seed(TEST_SEED_OFFSET))[0])


def test_gym_factory_unknown_id():
    with pytest.raises(ValueError, match="Unknown gymnasium env id 'Pendulum-v9'"):
        gym_train_env_factory("Pendulum-v9")


def test_pybullet_factory_is_the_seed_task():
    pytest.importorskip("pybullet_envs_gymnasium", reason="needs the pybullet extra")
    env = pybullet_train_env_factory("HalfCheetahBulletEnv-v0", index_env=1, seed=2)
    assert env.observation_space.shape == (26,) and env.action_space.shape == (6,)
    raw = gymnasium.make("HalfCheetahBulletEnv-v0")
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs, raw.reset(seed=env_seed(2, 0, 0, 1))[0])
    action = np.full(6, 0.3, dtype=np.float32)
    np.testing.assert_array_equal(env.step(action)[0], raw.step(action)[0])
    env.close()
    raw.close()


def test_vec_env_copies_equal_raw_gymnasium_envs(tmp_path):
    make, action_space, obs_space = VecEnv.create_factory(
        env_fn=gym_train_env_factory, env_kwargs={"env_id": "Pendulum-v1"}, vec_env_size=3
    )
    assert obs_space.shape == (3,) and action_space.shape == (1,)
    envs = make("cpu", 7, index_col_worker=1, index_grad_worker=0)
    assert envs.batch_size == torch.Size([3])
    raws = [gymnasium.make("Pendulum-v1") for _ in range(3)]
    raw_obs = [r.reset(seed=env_seed(7, 0, 1, k))[0] for k, r in enumerate(raws)]
    td = envs.reset()
    np.testing.assert_allclose(td["observation"].numpy(), np.stack(raw_obs), rtol=0, atol=0)
    for step in range(4):
        action = torch.full((3, 1), 0.5 * step - 1.0)
        td["action"] = action
        td = envs.step(td)
        for k, raw in enumerate(raws):
            obs, reward, *_ = raw.step(action[k].numpy())
            np.testing.assert_array_equal(td["next", "observation"][k].numpy(), obs)
            assert td["next", "reward"][k].item() == pytest.approx(reward, rel=1e-6)
        td = td["next"].clone()
    envs.close()


def test_vec_env_factory_is_picklable_and_seeds_a_plain_env_fn():
    calls = []

    def make_cartpole(env_id, seed=0):  # the seed's simplified factory: no index arguments
        calls.append(seed)
        return gymnasium.make(env_id)

    make, _, _ = VecEnv.create_factory(make_cartpole, {"env_id": "CartPole-v1"}, vec_env_size=2)
    envs = make("cpu", 4)
    assert calls[1:] == [env_seed(4, 0, 0, 0), env_seed(4, 0, 0, 1)]  # [0] is the probe
    pickle.loads(
        pickle.dumps(VecEnv.create_factory(gym_train_env_factory, {"env_id": "CartPole-v1"})[0])
    )
    envs.close()


def test_vec_env_writes_episode_logs(tmp_path):
    make, _, _ = VecEnv.create_factory(
        gym_train_env_factory, {"env_id": "CartPole-v1"}, vec_env_size=2, log_dir=str(tmp_path)
    )
    envs = make("cpu", 0, index_col_worker=1)
    rollout = envs.rollout(60, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)  # [2, 60]
    returns = rollout["next", "episode_reward"].squeeze(-1)
    for k in range(2):
        path = tmp_path / f"train_g0_c1_e{k}.monitor.csv"
        lines = path.read_text().splitlines()
        assert lines[0].startswith("#") and lines[1] == "r,l,t"
        rows = list(csv.DictReader(lines[1:]))
        expected = returns[k][done[k]].tolist()
        assert [float(r["r"]) for r in rows] == expected  # CartPole: return == length
        assert [int(r["l"]) for r in rows] == [int(x) for x in expected]
        assert all(float(r["t"]) >= 0 for r in rows)
    envs.close()


def test_vec_env_reports_episode_reward():
    make, _, _ = VecEnv.create_factory(gym_train_env_factory, {"env_id": "CartPole-v1"})
    envs = make()
    rollout = envs.rollout(30, break_when_any_done=False)
    assert ("next", "episode_reward") in rollout.keys(True)
    assert rollout.batch_size == torch.Size([1, 30])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(vec_env_size=0), ValueError, "vec_env_size must be an int >= 1, got 0"),
        (dict(vectorization_mode="fast"), ValueError, "unknown vectorization_mode 'fast'"),
        (dict(env_kwargs=["CartPole-v1"]), TypeError, "env_kwargs must be a dict"),
    ],
)
def test_vec_env_bad_arguments(kwargs, error, match):
    kwargs = {"env_kwargs": {"env_id": "CartPole-v1"}, **kwargs}
    with pytest.raises(error, match=match):
        VecEnv.create_factory(gym_train_env_factory, **kwargs)


@pytest.mark.dm_control
def test_vec_env_over_dm_control_factories():
    pytest.importorskip("dm_control", reason="needs dm_control")
    from torchrl_lite.envs import dmc_train_env_factory
    from torchrl_lite.envs.libs.dm_control import DMControlEnv

    make, action_space, obs_space = VecEnv.create_factory(
        dmc_train_env_factory, {"domain_name": "cartpole", "task_name": "swingup"}, vec_env_size=2
    )
    assert obs_space.shape == (5,) and action_space.shape == (1,)
    first = make("cpu", 3).reset()["observation"]
    again = make("cpu", 3).reset()["observation"]
    torch.testing.assert_close(first, again)  # reproducible from the seed
    assert not torch.equal(first[0], first[1])  # the copies differ
    raw = DMControlEnv("cartpole", "swingup")
    raw.set_seed(env_seed(3, 0, 0, 1))
    position = raw.reset()["position"].float()
    torch.testing.assert_close(first[1, :3], position)  # CatTensors: position first


def test_pybullet_env_survives_a_checkpoint():
    pytest.importorskip("pybullet_envs_gymnasium", reason="needs the pybullet extra")
    make, _, _ = VecEnv.create_factory(
        pybullet_train_env_factory, {"env_id": "HalfCheetahBulletEnv-v0"}, vec_env_size=1
    )
    envs = make("cpu", 0)
    td = envs.reset()
    for _ in range(3):
        td["action"] = torch.zeros(1, 6)
        td = envs.step(td)["next"].clone()
    state = envs.state_dict()  # a plain pickle of a PyBullet env would lose its physics server
    envs.load_state_dict(state)
    td["action"] = torch.zeros(1, 6)
    cut = envs.step(td)["next"]
    assert cut["truncated"].all() and cut["reward"].item() == 0.0  # the interrupted episode ends
    td = envs.reset()
    td["action"] = torch.zeros(1, 6)
    assert torch.isfinite(envs.step(td)["next", "observation"]).all()
    envs.close()
