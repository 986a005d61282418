"""Reward, episode, key and action transforms."""

import pytest
import torch
from tensordict import TensorDict

from tests.envs.transform_envs import CountingEnv
from torchrl_lite.data.tensor_specs import Bounded, Categorical, Unbounded
from torchrl_lite.envs import (
    ActionScaling,
    Compose,
    ExcludeTransform,
    FrameSkipTransform,
    GymEnv,
    InitTracker,
    NoopResetEnv,
    RenameTransform,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SelectTransform,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)


# -- rewards -----------------------------------------------------------------------------
def test_rewardscaling_on_cartpole():
    env = TransformedEnv(GymEnv("CartPole-v1"), RewardScaling(loc=0.5, scale=2.0))
    assert env.rollout(3)["next", "reward"].flatten().tolist() == [2.5, 2.5, 2.5]  # 1 * 2 + 0.5
    check_env_specs(env)
    env = TransformedEnv(
        GymEnv("CartPole-v1"), RewardScaling(loc=0.5, scale=2.0, standard_normal=True)
    )
    assert env.rollout(2)["next", "reward"].flatten().tolist() == [0.25, 0.25]  # (1 - 0.5) / 2


def test_rewardclipping_values_and_spec():
    env = TransformedEnv(CountingEnv(max_count=3), RewardClipping(0.0, 0.5))
    spec = env.reward_spec
    assert isinstance(spec, Bounded) and spec.low.item() == 0.0 and spec.high.item() == 0.5
    assert env.rollout(3)["next", "reward"].flatten().tolist() == [0.5, 0.5, 0.5]
    check_env_specs(env)
    env = TransformedEnv(CountingEnv(max_count=3), RewardClipping(clamp_min=2.0))
    assert isinstance(env.reward_spec, Unbounded)
    assert env.rollout(2)["next", "reward"].flatten().tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="clamp_min, clamp_max or both"):
        RewardClipping()
    with pytest.raises(ValueError, match="clamp_min 1.0 > clamp_max -1.0"):
        RewardClipping(1.0, -1.0)


def test_rewardsum_across_resets():
    env = TransformedEnv(CountingEnv(max_count=3), RewardSum())
    assert isinstance(env.observation_spec["episode_reward"], Unbounded)
    assert env.reset()["episode_reward"].tolist() == [0.0]
    data = env.rollout(5, break_when_any_done=False)
    assert data["next", "episode_reward"].flatten().tolist() == [1, 2, 3, 1, 2]
    assert data["episode_reward"].flatten().tolist() == [0, 1, 2, 0, 1]
    check_env_specs(env)


def test_rewardsum_partial_reset_of_batched_env():
    env = TransformedEnv(CountingEnv((2,), max_count=[[2], [3]]), RewardSum())
    data = env.rollout(5, break_when_any_done=False)
    assert data["next", "episode_reward"].squeeze(-1).tolist() == [[1, 2, 1, 2, 1], [1, 2, 3, 1, 2]]
    check_env_specs(env)


def test_rewardsum_bad_use():
    with pytest.raises(KeyError, match="'observation'.*Available keys: \\['reward'\\]"):
        TransformedEnv(CountingEnv(), RewardSum(in_keys=["observation"]))
    with pytest.raises(NotImplementedError, match="TransformedEnv"):
        RewardSum()(TensorDict({"reward": torch.ones(1)}, []))
    env = TransformedEnv(CountingEnv(), RewardSum())
    env.reset()
    with pytest.raises(KeyError, match="no 'episode_reward'.*reset\\(\\)"):
        env.step(TensorDict({"action": torch.zeros(1)}, []))


# -- episode -----------------------------------------------------------------------------
def test_stepcounter_truncates_at_max_steps():
    env = TransformedEnv(CountingEnv(max_count=100), StepCounter(max_steps=2))
    spec = env.observation_spec["step_count"]
    assert isinstance(spec, Bounded) and spec.dtype == torch.int64 and spec.high.item() == 2
    data = env.rollout(5, break_when_any_done=False)
    assert data["step_count"].flatten().tolist() == [0, 1, 0, 1, 0]
    assert data["next", "step_count"].flatten().tolist() == [1, 2, 1, 2, 1]
    assert data["next", "truncated"].flatten().tolist() == [False, True, False, True, False]
    assert data["next", "done"].flatten().tolist() == [False, True, False, True, False]
    assert not data["next", "terminated"].any()
    check_env_specs(env)
    assert env.rollout(10).shape == (2,)  # a rollout stops at the truncation


def test_stepcounter_without_max_and_bad_input():
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    assert isinstance(env.observation_spec["step_count"], Unbounded)
    assert env.rollout(3)["next", "step_count"].flatten().tolist() == [1, 2, 3]
    check_env_specs(env)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="max_steps"):
            StepCounter(bad)
    env.reset()
    with pytest.raises(KeyError, match="no 'step_count'"):
        env.step(TensorDict({"action": torch.tensor([1, 0])}, []))


def test_inittracker_marks_first_steps():
    env = TransformedEnv(CountingEnv(max_count=2), InitTracker())
    spec = env.observation_spec["is_init"]
    assert isinstance(spec, Categorical) and spec.dtype == torch.bool
    data = env.rollout(5, break_when_any_done=False)
    assert data["is_init"].flatten().tolist() == [True, False, True, False, True]
    assert not data["next", "is_init"].any()
    check_env_specs(env)
    with pytest.raises(NotImplementedError):
        InitTracker()(TensorDict({}, []))


def test_noopresetenv_fixed_and_random():
    base = CountingEnv(max_count=100)
    env = TransformedEnv(base, NoopResetEnv(noops=3, random=False))
    td = env.reset()
    assert td["observation"].item() == 3.0 and len(base.actions) == 3 and "reward" not in td.keys()
    check_env_specs(env)
    env = TransformedEnv(CountingEnv(max_count=100), NoopResetEnv(noops=4))
    seen = {int(env.reset()["observation"].item()) for _ in range(30)}
    assert seen <= {0, 1, 2, 3} and len(seen) > 1


def test_noopresetenv_retries_then_fails():
    base = CountingEnv(max_count=2)
    env = TransformedEnv(base, NoopResetEnv(noops=3, random=False))
    with pytest.raises(RuntimeError, match="ended during the no-op steps 10 times"):
        env.reset()
    with pytest.raises(ValueError, match="noops"):
        NoopResetEnv(noops=0)


def test_noopresetenv_batched_env():
    env = TransformedEnv(
        CountingEnv((2,), max_count=[[3], [5]]), NoopResetEnv(noops=1, random=False)
    )
    assert env.reset()["observation"].flatten().tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="cannot reset only some sub-envs"):
        env.rollout(5, break_when_any_done=False)


def test_frameskip_repeats_actions_and_sums_rewards():
    base = CountingEnv(max_count=3)
    env = TransformedEnv(base, FrameSkipTransform(2))
    data = env.rollout(5)
    assert data["next", "observation"].flatten().tolist() == [2.0, 3.0]
    assert data["next", "reward"].flatten().tolist() == [2.0, 1.0]  # stops early when done
    assert len(base.actions) == 3 and torch.equal(base.actions[0], base.actions[1])
    check_env_specs(env)
    with pytest.raises(ValueError, match="frame_skip"):
        FrameSkipTransform(0)


# -- keys --------------------------------------------------------------------------------
def test_excludetransform():
    env = TransformedEnv(CountingEnv(pixels=True), ExcludeTransform("pixels"))
    assert set(env.observation_spec.keys()) == {"observation"}
    assert "pixels" not in env.rollout(2).keys(True, True)
    check_env_specs(env)
    with pytest.raises(KeyError, match="'pixel'.*Did you mean 'pixels'"):
        TransformedEnv(CountingEnv(pixels=True), ExcludeTransform("pixel"))
    with pytest.raises(ValueError, match="done flag 'done'"):
        TransformedEnv(CountingEnv(), ExcludeTransform("done"))


def test_selecttransform():
    env = TransformedEnv(CountingEnv(pixels=True), SelectTransform("observation"))
    assert set(env.observation_spec.keys()) == {"observation"}
    assert set(env.reset().keys()) == {"observation", "done", "terminated", "truncated"}
    assert "reward" in env.rollout(2)["next"].keys()
    check_env_specs(env)
    td = TensorDict(
        {"a": torch.zeros(1), "b": torch.zeros(1), "done": torch.zeros(1, dtype=torch.bool)}, []
    )
    assert sorted(SelectTransform("a")(td).keys()) == ["a", "done"]
    with pytest.raises(ValueError, match="done flags"):
        SelectTransform("observation", keep_dones=False)
    with pytest.raises(KeyError, match="'obs'"):
        TransformedEnv(CountingEnv(), SelectTransform("obs"))


def test_renametransform_outputs_and_actions():
    env = TransformedEnv(CountingEnv(max_count=3), RenameTransform(["observation"], ["obs"]))
    assert set(env.observation_spec.keys()) == {"obs"}
    assert env.rollout(2)["next", "obs"].flatten().tolist() == [1.0, 2.0]
    check_env_specs(env)
    env = TransformedEnv(
        CountingEnv(max_count=3), RenameTransform(["observation"], ["obs"], create_copy=True)
    )
    assert set(env.observation_spec.keys()) == {"observation", "obs"}
    check_env_specs(env)
    base = CountingEnv()
    env = TransformedEnv(
        base, RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["act"])
    )
    assert list(env.full_action_spec.keys()) == ["act"]
    env.step(env.reset().set("act", torch.tensor([1.5])))
    assert base.actions[-1].item() == 1.5
    check_env_specs(env)
    with pytest.raises(ValueError, match="done flag"):
        TransformedEnv(CountingEnv(), RenameTransform(["done"], ["finished"]))


# -- actions -----------------------------------------------------------------------------
def test_actionscaling_maps_unit_box_to_bounds():
    base = CountingEnv(max_count=10)
    env = TransformedEnv(base, ActionScaling())
    spec = env.action_spec
    assert spec.low.item() == -1.0 and spec.high.item() == 1.0
    td = env.reset()
    for a, expected in ((-1.0, -2.0), (0.0, 0.0), (1.0, 2.0), (0.5, 1.0)):
        td = env.step(td.set("action", torch.tensor([a])))["next"].set("action", torch.zeros(1))
        assert base.actions[-1].item() == expected
    check_env_specs(env)


def test_actionscaling_on_pendulum_and_bad_spec():
    env = TransformedEnv(GymEnv("Pendulum-v1"), ActionScaling())
    check_env_specs(env)
    with pytest.raises(TypeError, match="Bounded action spec for 'action'"):
        TransformedEnv(GymEnv("CartPole-v1"), ActionScaling())


def test_reward_and_episode_transforms_compose_on_batched_env():
    env = TransformedEnv(
        CountingEnv((3,), max_count=[[2], [3], [4]]),
        Compose(StepCounter(3), RewardSum(), InitTracker(), RewardScaling(0.0, 0.5)),
    )
    check_env_specs(env)
    data = env.rollout(6, break_when_any_done=False)
    torch.testing.assert_close(data["next", "episode_reward"], data["next", "step_count"].float())
    assert torch.equal(data["is_init"], data["step_count"] == 0)
    assert (data["next", "reward"] == 0.5).all()
