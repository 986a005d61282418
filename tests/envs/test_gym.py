"""GymEnv / GymWrapper against raw gymnasium with the same seeds and actions."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from torchrl_lite.data import Binary, Bounded, Categorical, Composite, MultiCategorical, OneHot
from torchrl_lite.envs import GymEnv, GymWrapper, check_env_specs, step_mdp
from torchrl_lite.envs.utils import ActionBoundsWarning


class SpacesEnv(gym.Env):
    """A tiny env with Dict/Tuple observations and a MultiDiscrete action."""

    def __init__(self, action_space=None):
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "flags": spaces.MultiBinary(3),
                "pair": spaces.Tuple((spaces.Discrete(4), spaces.Box(0, 5, (1,), np.float32))),
            }
        )
        self.action_space = action_space or spaces.MultiDiscrete([2, 3])
        self.t = 0

    def _obs(self):
        rng = self.np_random
        return {
            "pos": rng.uniform(-1, 1, 2).astype(np.float32),
            "flags": rng.integers(0, 2, 3).astype(np.int8),
            "pair": (int(rng.integers(0, 4)), rng.uniform(0, 5, 1).astype(np.float32)),
        }

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(np.sum(action)), self.t >= 4, False, {}


def raw_actions(n, space, seed=0):
    space.seed(seed)
    return [space.sample() for _ in range(n)]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
def test_gym_check_env_specs(env_id):
    check_env_specs(GymEnv(env_id))


def test_gym_specs_of_cartpole():
    env = GymEnv("CartPole-v1")
    assert isinstance(env.action_spec, OneHot) and env.action_spec.n == 2
    assert env.observation_spec["observation"].shape == (4,)
    assert env.reward_spec.shape == (1,)
    assert set(env.done_spec.keys()) == {"done", "terminated", "truncated"}
    cat = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(cat.action_spec, Categorical) and cat.action_spec.shape == ()
    pend = GymEnv("Pendulum-v1")
    assert isinstance(pend.action_spec, Bounded)
    assert torch.equal(pend.action_spec.high, torch.tensor([2.0]))


def test_gym_dict_tuple_multidiscrete_multibinary_spaces():
    env = GymWrapper(SpacesEnv())
    assert set(env.observation_spec.keys()) == {"pos", "flags", "pair"}
    assert isinstance(env.observation_spec["flags"], Binary)
    assert isinstance(env.observation_spec["pair"], Composite)
    assert isinstance(env.observation_spec["pair", "0"], Categorical)
    cat_env = GymWrapper(SpacesEnv(), categorical_action_encoding=True)
    assert isinstance(cat_env.action_spec, MultiCategorical)
    check_env_specs(env)
    check_env_specs(cat_env)
    env.set_seed(3)
    td = env.reset()
    raw = SpacesEnv()
    obs, _ = raw.reset(seed=3)
    torch.testing.assert_close(td["pos"], torch.from_numpy(obs["pos"]))
    assert td["pair", "0"].item() == obs["pair"][0]
    # one-hot MultiDiscrete action [1, 0, 0, 1, 0] means (0, 1): reward = 1
    td["action"] = torch.tensor([1, 0, 0, 1, 0])
    assert env.step(td)["next", "reward"].item() == 1.0


def test_gym_multibinary_action():
    env = GymWrapper(SpacesEnv(action_space=spaces.MultiBinary(4)))
    assert isinstance(env.action_spec, Binary)
    td = env.reset()
    td["action"] = torch.tensor([1, 1, 0, 1], dtype=torch.int8)
    assert env.step(td)["next", "reward"].item() == 3.0


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_gym_seeding_matches_raw_gymnasium(env_id):
    env = GymEnv(env_id, categorical_action_encoding=True)
    raw = gym.make(env_id)
    actions = raw_actions(60, raw.action_space, seed=1)
    assert env.set_seed(7) == 8
    td = env.reset()
    obs, _ = raw.reset(seed=7)
    np.testing.assert_array_equal(td["observation"].numpy(), obs)
    for action in actions:
        td["action"] = torch.as_tensor(action)
        td = env.step(td)
        obs, reward, terminated, truncated, _ = raw.step(action)
        np.testing.assert_array_equal(td["next", "observation"].numpy(), obs)
        assert td["next", "reward"].item() == pytest.approx(reward)
        assert td["next", "terminated"].item() == terminated
        assert td["next", "truncated"].item() == truncated
        td = step_mdp(td)
        if terminated or truncated:
            td = env.reset()
            obs, _ = raw.reset()
            np.testing.assert_array_equal(td["observation"].numpy(), obs)


def test_gym_terminated_and_truncated_kept_apart():
    env = GymEnv("CartPole-v1", max_episode_steps=5, categorical_action_encoding=True)
    env.set_seed(0)
    td = env.rollout(10, policy=lambda td: td.set("action", torch.tensor(0)))
    assert td.batch_size == (5,)
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()
    assert td["next", "done"][-1].item()
    # pushing left for long terminates (the pole falls) before 500 steps
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    env.set_seed(0)
    td = env.rollout(500, policy=lambda td: td.set("action", torch.tensor(0)))
    assert td["next", "terminated"][-1].item() and not td["next", "truncated"][-1].item()
    assert not td["next", "done"][:-1].any()


def test_gym_rollout_equals_manual_step_loop():
    env = GymEnv("CartPole-v1")
    env.set_seed(3)
    torch.manual_seed(0)
    rollout = env.rollout(300, break_when_any_done=False)
    assert rollout.batch_size == (300,)
    env.set_seed(3)
    torch.manual_seed(0)
    td = env.reset()
    for t in range(300):
        td = env.rand_action(td)
        td = env.step(td)
        assert (rollout[t] == td).all(), t
        td = step_mdp(td)
        if td["done"].item():
            td = env.reset()
    assert rollout["next", "done"].sum() > 3  # several episodes, reset inside the rollout
    # after a done step the next root observation is a fresh reset, not the final one
    t = int(rollout["next", "done"].squeeze(-1).nonzero()[0])
    assert not rollout["done"][t + 1].item()
    assert not torch.equal(rollout["observation"][t + 1], rollout["next", "observation"][t])


def test_gym_rollout_longer_than_the_first_buffer_rows_equals_manual_loop():
    env = GymEnv("Pendulum-v1")  # 2600 steps: the buffers (1024 rows at first) grow twice
    env.set_seed(5)
    torch.manual_seed(1)
    rollout = env.rollout(2600, break_when_any_done=False)
    assert rollout.batch_size == (2600,)
    env.set_seed(5)
    torch.manual_seed(1)
    td = env.reset()
    for t in range(2600):
        td = env.step(env.rand_action(td))
        if t in (0, 1023, 1024, 2047, 2048, 2599):
            assert (rollout[t] == td).all(), t
        td = step_mdp(td)
        if td["done"].item():
            td = env.reset()


def test_gym_rollout_huge_max_steps_stopping_early_allocates_little():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    # 10**9 preallocated rows would need tens of GB; the buffers grow with the steps taken
    rollout = env.rollout(10**9, break_when_any_done=True)
    assert 1 <= rollout.shape[0] <= 500 and rollout["next", "done"][-1].item()


def test_gym_rollout_break_when_any_done_and_callback():
    env = GymEnv("CartPole-v1")
    seen = []
    td = env.rollout(1000, callback=lambda e, td: seen.append(td["next", "done"].item()))
    assert td["next", "done"][-1].item() and len(seen) == td.shape[0]


def test_gym_frame_skip_sums_rewards():
    env = GymEnv("Pendulum-v1", frame_skip=3)
    raw = gym.make("Pendulum-v1")
    env.set_seed(0)
    td = env.reset()
    raw.reset(seed=0)
    for a in (0.5, -1.0, 2.0):
        td["action"] = torch.tensor([a])
        td = env.step(td)
        total = 0.0
        for _ in range(3):
            obs, r, *_ = raw.step(np.array([a], dtype=np.float32))
            total += r
        assert td["next", "reward"].item() == pytest.approx(total, rel=1e-6)
        np.testing.assert_allclose(td["next", "observation"].numpy(), obs)
        td = step_mdp(td)


def test_gym_from_pixels():
    env = GymEnv("CartPole-v1", from_pixels=True)
    assert set(env.observation_spec.keys()) == {"pixels"}
    td = env.reset()
    assert td["pixels"].dtype == torch.uint8 and td["pixels"].shape[-1] == 3
    check_env_specs(env)
    both = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=False)
    assert set(both.observation_spec.keys()) == {"pixels", "observation"}
    td = both.rollout(3)
    assert td["next", "pixels"].shape[:2] == (3, both.observation_spec["pixels"].shape[0])
    np.testing.assert_array_equal(both.render(), td["next", "pixels"][-1].numpy())


def test_gym_vector_autoreset_matches_single_envs():
    n, steps = 3, 120
    env = GymEnv("CartPole-v1", num_envs=n, categorical_action_encoding=True)
    assert env.batch_size == (n,)
    check_env_specs(env)
    assert env.set_seed(10) == 10 + n
    torch.manual_seed(0)
    rollout = env.rollout(steps, break_when_any_done=False)
    assert rollout.batch_size == (n, steps)
    assert rollout["next", "done"].sum() >= n  # every copy finished at least one episode
    for i in range(n):
        raw = gym.make("CartPole-v1")
        obs, _ = raw.reset(seed=10 + i)
        for t in range(steps):
            np.testing.assert_allclose(rollout["observation"][i, t].numpy(), obs)
            obs, reward, terminated, truncated, _ = raw.step(int(rollout["action"][i, t]))
            np.testing.assert_allclose(rollout["next", "observation"][i, t].numpy(), obs)
            assert rollout["next", "terminated"][i, t].item() == terminated
            if terminated or truncated:
                obs, _ = raw.reset()


def test_gym_vector_step_and_maybe_reset_resets_only_done():
    env = GymEnv("CartPole-v1", num_envs=2, categorical_action_encoding=True)
    env.set_seed(0)
    td = env.reset()
    for _ in range(200):
        td["action"] = torch.zeros(2, dtype=torch.long)
        td, root = env.step_and_maybe_reset(td)
        done = td["next", "done"].squeeze(-1)
        if done.any() and not done.all():
            break
        td = root
    else:
        pytest.fail("never saw exactly one copy done")
    keep = ~done
    torch.testing.assert_close(root["observation"][keep], td["next", "observation"][keep])
    assert not root["done"].any()
    assert (root["observation"][done].abs() <= 0.05).all()  # a fresh CartPole state


# -- bad input ------------------------------------------------------------------------


def test_gym_unknown_id_names_it_and_suggests():
    with pytest.raises(ValueError, match=r"Unknown gymnasium env id 'CartPol-v1'.*CartPole-v1"):
        GymEnv("CartPol-v1")
    with pytest.raises(ValueError, match="Unknown gymnasium env id 'NoSuchEnvAtAll-v0'"):
        GymEnv("NoSuchEnvAtAll-v0")


def test_gym_step_missing_action():
    env = GymEnv("CartPole-v1")
    td = env.reset()
    with pytest.raises(KeyError, match="'action'.*Available keys"):
        env.step(td)


def test_gym_step_wrong_shape_dtype_and_out_of_bounds():
    env = GymEnv("Pendulum-v1")
    td = env.reset()
    with pytest.raises(ValueError, match=r"'action' has shape \[2\]"):
        env.step(td.set("action", torch.zeros(2)))
    with pytest.raises(ValueError, match=r"(?s)'action'.*dtype torch.float64.*Bounded"):
        env.step(td.set("action", torch.zeros(1, dtype=torch.float64)))
    # a float action beyond its bounds warns once and goes on (gymnasium clips it)
    with pytest.warns(ActionBoundsWarning, match=r"(?s)'action'.*max 5.*Bounded"):
        env.step(td.set("action", torch.tensor([5.0])))
    env.step(td.set("action", torch.tensor([1.0])))  # a valid action goes through
    strict = GymEnv("Pendulum-v1", spec_check="strict")
    td = strict.reset()
    with pytest.raises(ValueError, match=r"(?s)'action'.*outside.*Bounded.*values=\[5.0\]"):
        strict.step(td.set("action", torch.tensor([5.0])))


def test_gym_spec_check_modes():
    env = GymEnv("Pendulum-v1", spec_check="always")
    td = env.reset()
    env.step(td.set("action", torch.tensor([1.0])))
    with pytest.raises(ValueError, match="dtype"):  # checked on every step
        env.step(td.set("action", torch.tensor([1.0], dtype=torch.float64)))
    fast = GymEnv("Pendulum-v1", spec_check="never")
    td = fast.reset()
    fast.step(td.set("action", torch.tensor([3.0])))  # not checked: gymnasium clips it
    with pytest.raises(ValueError, match="spec_check must be"):
        GymEnv("Pendulum-v1", spec_check="sometimes")


@pytest.mark.parametrize("max_steps", [0, -3, 2.5])
def test_gym_rollout_bad_max_steps(max_steps):
    with pytest.raises(ValueError, match="max_steps >= 1"):
        GymEnv("CartPole-v1").rollout(max_steps)


@pytest.mark.parametrize("seed", ["0", 1.5, None])
def test_gym_set_seed_needs_int(seed):
    with pytest.raises(TypeError, match="set_seed expects an int"):
        GymEnv("CartPole-v1").set_seed(seed)


def test_gym_step_before_reset_and_after_close():
    env = GymEnv("CartPole-v1")
    td = TensorDict({"action": torch.tensor([1, 0])}, [])
    with pytest.raises(RuntimeError, match=r"Call reset\(\) before step\(\)"):
        env.step(td)
    env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(td)
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
    with GymEnv("CartPole-v1") as env:
        env.rollout(2)
    assert env.is_closed


def test_gym_fake_tensordict_and_rand_step():
    env = GymEnv("CartPole-v1")
    fake = env.fake_tensordict()
    real = env.rand_step()
    assert set(fake.keys(True, True)) == set(real.keys(True, True))
    assert repr(env).startswith("GymEnv(env=CartPole-v1")


def test_gym_rollout_keeps_gradients_of_a_differentiable_policy():
    env = GymEnv("Pendulum-v1")
    weight = torch.ones(3, 1, requires_grad=True)

    def policy(td):
        return td.set("action", (td["observation"] @ weight).tanh() * 2)

    td = env.rollout(300, policy=policy, break_when_any_done=False)  # > one recording chunk
    assert td["action"].shape == (300, 1) and td["action"].requires_grad
    td["action"].sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0


def test_gym_rollout_entry_changing_shape_is_named():
    env = GymEnv("Pendulum-v1")
    step = iter(range(1000))

    def policy(td):
        td.set("extra", torch.zeros(1 + (next(step) == 5)))
        return td.set("action", torch.zeros(1))

    with pytest.raises(RuntimeError, match="'extra' changed shape"):
        env.rollout(10, policy=policy)


def test_gym_vector_action_spec_has_batch_dims_even_when_ambiguous():
    env = GymEnv("CartPole-v1", num_envs=2)  # OneHot(2) in a batch of 2
    assert env.action_spec.shape == (2, 2)
    td = env.rollout(5, break_when_any_done=False)
    assert td["action"].shape == (2, 5, 2)
