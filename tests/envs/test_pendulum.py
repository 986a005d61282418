"""PendulumEnv: specs, agreement with gymnasium's Pendulum-v1, statelessness, batching."""

import doctest
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

import torchrl_lite.envs.custom.pendulum as pendulum_module
from torchrl_lite.envs import PendulumEnv, check_env_specs, step_mdp

TOL = 1e-5


def _state(th, thdot, batch=()):
    """A TensorDict holding a given state and default params."""
    td = PendulumEnv.gen_params(batch_size=list(batch))
    td["th"] = torch.as_tensor(th, dtype=torch.float64).expand(batch).clone()
    td["thdot"] = torch.as_tensor(thdot, dtype=torch.float64).expand(batch).clone()
    return td


def _numpy_step(th, thdot, u, g=10.0, m=1.0, length=1.0, dt=0.05, max_speed=8.0, max_torque=2.0):
    """One step of Pendulum-v1 written with Python floats (the plain-loop reference)."""
    u = min(max(u, -max_torque), max_torque)
    cost = ((th + math.pi) % (2 * math.pi) - math.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
    thdot = thdot + (3 * g / (2 * length) * math.sin(th) + 3.0 / (m * length**2) * u) * dt
    thdot = min(max(thdot, -max_speed), max_speed)
    th = th + thdot * dt
    return th, thdot, -cost


@pytest.mark.parametrize("batch_size", [[], [4]])
def test_pendulum_check_env_specs(batch_size):
    env = PendulumEnv(batch_size=batch_size, seed=0)
    check_env_specs(env)
    assert env.action_spec.shape == torch.Size([*batch_size, 1])
    assert env.action_spec.dtype == torch.float32
    assert env.reward_spec.shape == torch.Size([*batch_size, 1])
    assert env.observation_spec["observation"].shape == torch.Size([*batch_size, 3])
    assert ("params", "g") in env.state_spec.keys(True, True)


def test_pendulum_matches_gymnasium_trajectories():
    gym_env = gym.make("Pendulum-v1").unwrapped
    gym_env.reset(seed=0)
    env = PendulumEnv(seed=0)
    rng = np.random.default_rng(0)
    max_obs_diff = max_rew_diff = 0.0
    for _episode in range(5):
        td = env.reset()
        gym_env.state = np.array([td["th"].item(), td["thdot"].item()])
        np.testing.assert_allclose(td["observation"].numpy(), gym_env._get_obs(), atol=TOL)
        for _ in range(200):
            action = rng.uniform(-2.0, 2.0, size=(1,)).astype(np.float32)
            obs, reward, terminated, truncated, _ = gym_env.step(action)
            td["action"] = torch.from_numpy(action)
            td = env.step(td)
            max_obs_diff = max(
                max_obs_diff, float(np.abs(td["next", "observation"].numpy() - obs).max())
            )
            max_rew_diff = max(max_rew_diff, abs(td["next", "reward"].item() - reward))
            assert not td["next", "done"].item() and not terminated and not truncated
            assert td["next", "th"].item() == pytest.approx(gym_env.state[0], abs=TOL)
            td = step_mdp(td)
    assert max_obs_diff <= TOL, max_obs_diff
    assert max_rew_diff <= TOL, max_rew_diff


def test_pendulum_matches_gymnasium_batched_with_clipping():
    """A batch of 4 envs against 4 gymnasium envs, with actions past the torque limit."""
    n = 4
    gym_envs = [gym.make("Pendulum-v1").unwrapped for _ in range(n)]
    for i, e in enumerate(gym_envs):
        e.reset(seed=i)
    # actions past the bounds exercise the clipping, so the spec check is off
    env = PendulumEnv(batch_size=[n], seed=1, spec_check="never")
    td = env.reset()
    for i, e in enumerate(gym_envs):
        e.state = np.array([td["th"][i].item(), td["thdot"][i].item()])
    rng = np.random.default_rng(1)
    rollout_obs = []
    for _ in range(200):
        actions = rng.uniform(-3.0, 3.0, size=(n, 1)).astype(np.float32)
        td["action"] = torch.from_numpy(actions)
        td = env.step(td)
        for i, e in enumerate(gym_envs):
            obs, reward, *_ = e.step(actions[i])
            np.testing.assert_allclose(td["next", "observation"][i].numpy(), obs, atol=TOL, rtol=0)
            assert abs(td["next", "reward"][i, 0].item() - reward) <= TOL
        rollout_obs.append(td["next", "observation"])
        td = step_mdp(td)
    assert torch.stack(rollout_obs).abs()[..., 2].max() <= 8.0


def test_pendulum_step_honours_user_state():
    env = PendulumEnv(seed=0)
    td = env.reset()
    td["th"] = torch.tensor(0.5, dtype=torch.float64)
    td["thdot"] = torch.tensor(-0.25, dtype=torch.float64)
    td["action"] = torch.tensor([1.5])
    out = env.step(td)["next"]
    th, thdot, reward = _numpy_step(0.5, -0.25, 1.5)
    assert out["th"].item() == pytest.approx(th, abs=1e-12)
    assert out["thdot"].item() == pytest.approx(thdot, abs=1e-12)
    assert out["reward"].item() == pytest.approx(reward, abs=1e-5)
    expected_obs = torch.tensor([math.cos(th), math.sin(th), thdot], dtype=torch.float32)
    torch.testing.assert_close(out["observation"], expected_obs)


def test_pendulum_step_is_a_pure_function_of_its_input():
    env = PendulumEnv(seed=0)
    td = _state(1.0, 0.5, batch=(3,))
    td["action"] = torch.tensor([[0.1], [-1.0], [2.0]])
    first = env.step(td.clone())["next"]
    env.reset()  # advancing the reset generator must not matter
    second = env.step(td.clone())["next"]
    assert (first == second).all()
    # no reset needed: a fresh env steps a hand-made state
    fresh = PendulumEnv(seed=123).step(td.clone())["next"]
    assert (first == fresh).all()


def test_pendulum_per_element_params_follow_numpy_reference():
    g, m, max_torque = [10.0, 9.81, 3.7, 24.8], [1.0, 2.0, 1.0, 0.5], [2.0, 2.0, 1.0, 3.0]
    td = _state(0.3, 0.0, batch=(4,))
    td["params", "g"] = torch.tensor(g, dtype=torch.float64)
    td["params", "m"] = torch.tensor(m, dtype=torch.float64)
    td["params", "max_torque"] = torch.tensor(max_torque, dtype=torch.float64)
    env = PendulumEnv(seed=0, spec_check="never")  # torques up to 3 are in bounds for one element
    state = [(0.3, 0.0)] * 4
    for u in torch.linspace(-2.5, 2.5, 50).tolist():
        td["action"] = torch.full((4, 1), u)
        td = step_mdp(env.step(td))
        for i in range(4):  # Python floats: gymnasium's float32 torque rounding differs by ~1e-9
            state[i] = _numpy_step(*state[i], u, g=g[i], m=m[i], max_torque=max_torque[i])[:2]
        torch.testing.assert_close(
            td["th"], torch.tensor([s[0] for s in state], dtype=torch.float64), atol=1e-6, rtol=0
        )
        torch.testing.assert_close(
            td["thdot"], torch.tensor([s[1] for s in state], dtype=torch.float64), atol=1e-6, rtol=0
        )
    assert td["th"].unique().numel() == 4  # different params gave different dynamics


def test_pendulum_env_params_are_used_when_reset_gets_none():
    env = PendulumEnv(td_params=PendulumEnv.gen_params(g=3.0), batch_size=[2], seed=0)
    td = env.reset()
    assert td["params", "g"].tolist() == [3.0, 3.0]
    td["th"] = torch.full((2,), math.pi / 2, dtype=torch.float64)
    td["thdot"] = torch.zeros(2, dtype=torch.float64)
    td["action"] = torch.zeros(2, 1)
    expected = _numpy_step(math.pi / 2, 0.0, 0.0, g=3.0)[1]
    assert env.step(td)["next", "thdot"].tolist() == pytest.approx([expected] * 2)


def test_pendulum_seeding_is_reproducible():
    a = PendulumEnv(batch_size=[5], seed=7).reset()
    b = PendulumEnv(batch_size=[5], seed=7).reset()
    c = PendulumEnv(batch_size=[5], seed=8).reset()
    assert torch.equal(a["th"], b["th"]) and torch.equal(a["thdot"], b["thdot"])
    assert not torch.equal(a["th"], c["th"])
    env = PendulumEnv(batch_size=[5], seed=0)
    assert env.set_seed(7) == 12
    assert torch.equal(env.reset()["th"], a["th"])
    # reset's state follows gymnasium's ranges
    big = PendulumEnv(batch_size=[10_000], seed=0).reset()
    assert big["th"].abs().max() <= math.pi and big["th"].abs().max() > 3.0
    assert big["thdot"].abs().max() <= 1.0 and big["thdot"].abs().max() > 0.99


def test_pendulum_partial_reset_changes_only_masked_elements():
    env = PendulumEnv(batch_size=[4], seed=0)
    td = env.rollout(3)[..., -1]
    td = step_mdp(td)
    td["params", "g"] = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    mask = torch.tensor([[True], [False], [True], [False]])
    td["_reset"] = mask
    out = env.reset(td.clone())
    keep = ~mask.squeeze(-1)
    for key in ("th", "thdot", "observation"):
        assert torch.equal(out[key][keep], td[key][keep]), key
        assert not (out[key][~keep] == td[key][~keep]).all(), key
    assert out["params", "g"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert "_reset" not in out.keys()


@pytest.mark.parametrize("how", ["env_batch", "td_batch"])
def test_pendulum_rollout_batch_of_8(how):
    if how == "env_batch":
        rollout = PendulumEnv(batch_size=[8], seed=0).rollout(20)
    else:
        env = PendulumEnv(seed=0)
        rollout = env.rollout(20, tensordict=TensorDict(batch_size=[8]))
    assert rollout.batch_size == torch.Size([8, 20])
    assert rollout["next", "observation"].shape == torch.Size([8, 20, 3])
    assert rollout["next", "reward"].shape == torch.Size([8, 20, 1])
    assert not rollout["next", "done"].any()
    # consecutive steps chain: next state of step t is the state of step t+1
    assert torch.equal(rollout["next", "th"][:, :-1], rollout["th"][:, 1:])


def test_pendulum_action_out_of_bounds_warns_or_strict_raises():
    from torchrl_lite.envs.utils import ActionBoundsWarning

    env = PendulumEnv(seed=0)
    td = env.reset()
    td["action"] = torch.tensor([2.5])
    with pytest.warns(ActionBoundsWarning, match="'action'.*max 2.5"):
        env.step(td)  # passed on: the env clips torques as gymnasium does
    strict = PendulumEnv(seed=0, spec_check="strict")
    td = strict.reset()
    td["action"] = torch.tensor([2.5])
    with pytest.raises(ValueError, match="action"):
        strict.step(td)
    batched = PendulumEnv(seed=0, spec_check="strict")
    td = batched.reset(TensorDict(batch_size=[3]))
    td["action"] = torch.tensor([[0.0], [-2.1], [1.0]])
    with pytest.raises(ValueError, match="action"):
        batched.step(td)


def test_pendulum_missing_state_raises():
    env = PendulumEnv(seed=0)
    td = TensorDict(action=torch.zeros(1))
    with pytest.raises(KeyError, match="'th'"):
        env.step(td)
    td = _state(0.0, 0.0)
    td["action"] = torch.zeros(1)
    del td["params"]
    with pytest.raises(KeyError, match="params"):
        env.step(td)


def test_pendulum_bad_td_params_raise():
    with pytest.raises(KeyError, match="params"):
        PendulumEnv(td_params=TensorDict(g=torch.tensor(9.81)))
    with pytest.raises(ValueError, match="batch_size"):
        PendulumEnv(td_params=PendulumEnv.gen_params(batch_size=[3]), batch_size=[4])
    with pytest.raises(ValueError, match="gen_params"):
        PendulumEnv(batch_size=[4]).reset(TensorDict(batch_size=[8]))


def test_pendulum_docstring_examples():
    globs = {"torch": torch, "TensorDict": TensorDict}
    result = doctest.testmod(pendulum_module, extraglobs=globs)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.gpu
def test_pendulum_runs_on_cuda():
    env = PendulumEnv(batch_size=[16], seed=0, device="cuda")
    rollout = env.rollout(10)
    assert rollout.device.type == "cuda"
    assert rollout["next", "observation"].device.type == "cuda"
    check_env_specs(env)
    cpu = PendulumEnv(batch_size=[16], seed=0)
    td = cpu.reset()
    td["action"] = torch.rand(16, 1) * 4 - 2
    expected = cpu.step(td.clone())["next", "observation"]
    got = env.step(td.clone().to("cuda"))["next", "observation"]
    torch.testing.assert_close(got.cpu(), expected, atol=1e-6, rtol=0)
