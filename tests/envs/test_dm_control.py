"""DMControlEnv / DMControlWrapper: specs, end flags, seeding, frame_skip, pixels, errors."""

import doctest
import subprocess
import sys

import numpy as np
import pytest
import torch

from torchrl_lite.envs import check_env_specs

pytestmark = pytest.mark.dm_control

SMALL_RENDER = {"height": 32, "width": 32}


def _raw(seed, **task_kwargs):
    from dm_control import suite

    return suite.load("cartpole", "swingup", task_kwargs={"random": seed, **task_kwargs})


def _actions(n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, generator=gen, dtype=torch.float64) * 2 - 1  # [n, 1] in [-1, 1]


class _Replay:
    """A policy writing the given actions one after another."""

    def __init__(self, actions):
        self.actions, self.t = actions, 0

    def __call__(self, td):
        td.set("action", self.actions[self.t].clone())
        self.t += 1
        return td


def test_dm_control_import_is_lazy():
    code = "import sys, torchrl_lite.envs; print('dm_control' in sys.modules or 'mujoco' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dm_control_lazy_export():
    import torchrl_lite.envs as envs
    from torchrl_lite.envs.libs.dm_control import DMControlEnv, DMControlWrapper

    assert envs.DMControlEnv is DMControlEnv
    assert envs.DMControlWrapper is DMControlWrapper
    with pytest.raises(AttributeError, match="NoSuchEnv"):
        envs.NoSuchEnv  # noqa: B018


def test_dm_control_missing_dependency_names_install_command(monkeypatch):
    from torchrl_lite.envs.libs.dm_control import DMControlEnv

    monkeypatch.setitem(sys.modules, "dm_control", None)
    with pytest.raises(ImportError, match=r"pip install 'torchrl-lite\[dm_control\]'"):
        DMControlEnv("cartpole", "swingup")


def test_dm_control_gl_import_failure_names_the_fix(monkeypatch):
    import dm_control

    from torchrl_lite.envs.libs.dm_control import DMControlEnv

    # what dm_control does when MUJOCO_GL names a backend that cannot start
    monkeypatch.delattr(dm_control, "suite", raising=False)
    monkeypatch.setitem(sys.modules, "dm_control.suite", None)
    with pytest.raises(ImportError, match=r"MUJOCO_GL=.*libegl1, libopengl0, libgl1-mesa-dri"):
        DMControlEnv("cartpole", "swingup")


def test_dm_control_check_env_specs_state():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup")
    check_env_specs(env, seed=0)


def test_dm_control_check_env_specs_pixels():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup", from_pixels=True, render_kwargs=SMALL_RENDER)
    check_env_specs(env, seed=0)
    assert set(env.observation_spec.keys()) == {"pixels"}
    pixels = env.reset()["pixels"]
    assert pixels.shape == (32, 32, 3) and pixels.dtype == torch.uint8
    assert pixels.float().std() > 0  # a real frame, not a blank buffer


def test_dm_control_pixels_and_state():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv(
        "cartpole", "swingup", from_pixels=True, pixels_only=False, render_kwargs=SMALL_RENDER
    )
    assert set(env.observation_spec.keys()) == {"pixels", "position", "velocity"}
    check_env_specs(env, seed=0)


def test_dm_control_spec_keys_and_dtypes():
    from torchrl_lite.data import Bounded, Unbounded
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup")
    obs = env.observation_spec
    assert set(obs.keys()) == {"position", "velocity"}
    assert obs["position"].shape == (3,) and obs["position"].dtype == torch.float64
    assert obs["velocity"].shape == (2,) and obs["velocity"].dtype == torch.float64
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == (1,)
    assert action.dtype == torch.float64
    assert torch.equal(action.low, torch.tensor([-1.0], dtype=torch.float64))
    assert torch.equal(action.high, torch.tensor([1.0], dtype=torch.float64))
    assert isinstance(env.reward_spec, Unbounded)
    assert env.reward_spec.shape == (1,) and env.reward_spec.dtype == torch.float32
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


def test_dm_control_scalar_observation_becomes_shape_1():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("acrobot", "swingup")  # "orientations" [4], "velocity" [2]
    env2 = DMControlEnv("pendulum", "swingup")  # "orientation" [2], "velocity" scalar
    assert env.observation_spec["orientations"].shape == (4,)
    assert env2.observation_spec["velocity"].shape == (1,)
    check_env_specs(env2, seed=0)


def test_dm_control_time_limit_is_truncated():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup", time_limit=0.1)  # 10 steps of 0.01 s
    td = env.rollout(100)
    assert td.batch_size == (10,)
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()
    assert td["next", "done"][-1].item()
    assert not td["next", "done"][:-1].any()


def test_dm_control_full_length_episode_is_truncated():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup", frame_skip=50)  # 1000 steps in 20 calls
    td = env.rollout(100)
    assert td.batch_size == (20,)
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()


def test_dm_control_zero_discount_is_terminated():
    from torchrl_lite.envs import DMControlWrapper

    raw = _raw(0)
    # the task ends the episode with discount 0 after 3 steps (as a task failure would)
    raw.task.get_termination = lambda physics: 0.0 if physics.time() >= 0.03 - 1e-9 else None
    env = DMControlWrapper(raw)
    td = env.rollout(100)
    assert td.batch_size == (3,)
    assert td["next", "terminated"][-1].item() and not td["next", "truncated"][-1].item()
    assert td["next", "done"][-1].item()


def test_dm_control_step_after_done_raises():
    from torchrl_lite.envs import DMControlEnv

    env = DMControlEnv("cartpole", "swingup", time_limit=0.02)
    td = env.rollout(10)
    assert td.batch_size == (2,)
    with pytest.raises(RuntimeError, match="reset"):
        env.rand_step(td[-1]["next"].clone())
    env.reset()
    env.rand_step()  # fine again after reset


def test_dm_control_seeding_reproducible():
    from torchrl_lite.envs import DMControlEnv

    actions = _actions(20)
    a, b = DMControlEnv("cartpole", "swingup"), DMControlEnv("cartpole", "swingup")
    assert a.set_seed(7) == 8
    b.set_seed(7)
    ra, rb = a.rollout(20, policy=_Replay(actions)), b.rollout(20, policy=_Replay(actions))
    assert (ra == rb).all()
    # re-seeding the same env replays the same episode, another seed gives another one
    a.set_seed(7)
    assert torch.equal(a.reset()["position"], ra[0]["position"])
    a.set_seed(8)
    assert not torch.equal(a.reset()["position"], ra[0]["position"])


def test_dm_control_rollout_matches_raw_loop():
    from torchrl_lite.envs import DMControlEnv

    seed, n = 3, 25
    actions = _actions(n, seed=1)
    env = DMControlEnv("cartpole", "swingup")
    env.set_seed(seed)
    td = env.rollout(n, policy=_Replay(actions))

    raw = _raw(seed)
    timestep = raw.reset()
    for t in range(n):
        for key in ("position", "velocity"):
            np.testing.assert_array_equal(td[key][t].numpy(), timestep.observation[key])
        timestep = raw.step(actions[t].numpy())
        for key in ("position", "velocity"):
            np.testing.assert_array_equal(td["next", key][t].numpy(), timestep.observation[key])
        assert td["next", "reward"][t].item() == pytest.approx(timestep.reward, rel=1e-6)


def test_dm_control_frame_skip_sums_rewards():
    from torchrl_lite.envs import DMControlEnv

    seed, skip = 2, 3
    # time_limit 0.1 s = 10 raw steps: 3 + 3 + 3 + 1, the last call stops early
    env = DMControlEnv("cartpole", "swingup", frame_skip=skip, time_limit=0.1)
    env.set_seed(seed)
    actions = _actions(10, seed=4)
    td = env.rollout(10, policy=_Replay(actions))
    assert td.batch_size == (4,)
    assert td["next", "truncated"][-1].item()

    raw = _raw(seed, time_limit=0.1)
    raw.reset()
    for t in range(4):
        total = 0.0
        for _ in range(skip):
            timestep = raw.step(actions[t].numpy())
            total += timestep.reward
            if timestep.last():
                break
        assert td["next", "reward"][t].item() == pytest.approx(total, rel=1e-6)
        np.testing.assert_array_equal(
            td["next", "position"][t].numpy(), timestep.observation["position"]
        )
    assert timestep.last()


def test_dm_control_unknown_domain():
    from torchrl_lite.envs import DMControlEnv

    with pytest.raises(
        ValueError,
        match=r"(?s)domain 'cartpol'.*Did you mean 'cartpole'.*Valid domains: \[.*'walker'",
    ):
        DMControlEnv("cartpol", "swingup")


def test_dm_control_unknown_task():
    from torchrl_lite.envs import DMControlEnv

    with pytest.raises(
        ValueError,
        match=r"(?s)task 'swingupp'.*'cartpole'.*Did you mean 'swingup'.*Valid tasks: \['balance'",
    ):
        DMControlEnv("cartpole", "swingupp")


def test_dm_control_wrapper_rejects_bad_input():
    from torchrl_lite.envs import DMControlWrapper

    with pytest.raises(TypeError, match="dm_env.Environment"):
        DMControlWrapper("cartpole")
    with pytest.raises(ValueError, match="frame_skip"):
        DMControlWrapper(_raw(0), frame_skip=0)
    with pytest.raises(ValueError, match="render_kwargs"):
        DMControlWrapper(_raw(0), from_pixels=True, render_kwargs={"heigth": 32})


def test_dm_control_action_out_of_bounds_warns_or_strict_raises():
    from torchrl_lite.envs import DMControlEnv
    from torchrl_lite.envs.utils import ActionBoundsWarning

    env = DMControlEnv("cartpole", "swingup")
    td = env.reset()
    td["action"] = torch.tensor([2.0], dtype=torch.float64)
    with pytest.warns(ActionBoundsWarning, match="'action'.*max 2"):
        env.step(td)  # passed on: dm_control clips it
    strict = DMControlEnv("cartpole", "swingup", spec_check="strict")
    td = strict.reset()
    td["action"] = torch.tensor([2.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="action"):
        strict.step(td)


def test_dm_control_docstring_examples():
    import torchrl_lite.envs.libs.dm_control as module

    result = doctest.testmod(module, globs=vars(module).copy())
    assert result.attempted > 0 and result.failed == 0
