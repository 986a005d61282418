"""TransformedEnv, Compose and the Transform contract (list edits, validation, parent)."""

import pickle

import pytest
import torch
from tensordict import TensorDict

from tests.envs.transform_envs import CountingEnv
from torchrl_lite.envs import (
    ActionScaling,
    CatFrames,
    Compose,
    GymEnv,
    InitTracker,
    NoopResetEnv,
    ObservationNorm,
    RenameTransform,
    RewardClipping,
    RewardScaling,
    RewardSum,
    StepCounter,
    ToTensorImage,
    Transform,
    TransformedEnv,
    VecNorm,
    check_env_specs,
)


def test_transformedenv_seed_snippet_pixels():
    env_base = GymEnv("Pendulum-v1", from_pixels=True)
    env = TransformedEnv(env_base, Compose(ToTensorImage(), ObservationNorm(loc=0.5, scale=1.0)))
    td = env.reset()
    pixels = td["pixels"]
    assert pixels.shape == (3, 500, 500) and pixels.dtype == torch.float32
    assert pixels.min() >= 0.5 and pixels.max() <= 1.5  # x * 1.0 + 0.5 of [0, 1] images
    spec = env.observation_spec["pixels"]
    assert spec.shape == (3, 500, 500) and spec.low.min() == 0.5 and spec.high.max() == 1.5
    env.insert_transform(0, NoopResetEnv())
    assert isinstance(env.transform[0], NoopResetEnv) and len(env.transform) == 3
    assert env.reset()["pixels"].shape == (3, 500, 500)
    env.close()


def test_transformedenv_specs_pass_check_env_specs_on_gym():
    env = TransformedEnv(
        GymEnv("CartPole-v1"), Compose(StepCounter(10), RewardSum(), InitTracker())
    )
    check_env_specs(env, seed=0)
    assert set(env.observation_spec.keys()) == {
        "observation",
        "step_count",
        "episode_reward",
        "is_init",
    }


def test_transformedenv_partial_resets_on_vector_gym():
    env = TransformedEnv(
        GymEnv("CartPole-v1", num_envs=3), Compose(StepCounter(), RewardSum(), InitTracker())
    )
    env.set_seed(0)
    data = env.rollout(60, break_when_any_done=False)
    assert data.batch_size == (3, 60)
    assert data["next", "done"].any()  # some sub-env ended and was reset alone
    # CartPole pays 1 per step: the return equals the step count, both reset-aware
    torch.testing.assert_close(data["next", "episode_reward"], data["next", "step_count"].float())
    assert torch.equal(data["is_init"], data["step_count"] == 0)


def test_compose_list_interface():
    a, b, c = RewardScaling(0.0, 2.0), RewardClipping(-1.0, 1.0), StepCounter()
    t = Compose(Compose(a, b), c)  # nested Composes are flattened
    assert len(t) == 3 and list(t) == [a, b, c] and t[0] is a and t[-1] is c
    sliced = t[1:]
    assert isinstance(sliced, Compose) and list(sliced) == [b, c]
    assert t.pop(0) is a and list(t) == [b, c]
    t.insert(0, a)
    t.append(RewardSum())
    assert [type(x).__name__ for x in t] == [
        "RewardScaling",
        "RewardClipping",
        "StepCounter",
        "RewardSum",
    ]
    out = Compose(a, b)(TensorDict({"reward": torch.tensor([0.3, 0.8])}, [2]))
    torch.testing.assert_close(out["reward"], torch.tensor([0.6, 1.0]))


def test_transformedenv_insert_and_pop_recompute_specs():
    env = TransformedEnv(CountingEnv(max_count=3), StepCounter())
    env.append_transform(RewardSum())
    env.insert_transform(-1, InitTracker())  # list semantics: before the last one
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "InitTracker", "RewardSum"]
    assert {"step_count", "is_init", "episode_reward"} <= set(env.observation_spec.keys())
    check_env_specs(env)
    popped = env.transform.pop(1)
    assert isinstance(popped, InitTracker) and popped.container is None
    assert "is_init" not in env.observation_spec.keys()
    assert "is_init" not in env.reset().keys()
    check_env_specs(env)


def test_insert_transform_index_out_of_range():
    env = TransformedEnv(CountingEnv(), Compose(StepCounter(), RewardSum()))
    with pytest.raises(IndexError, match=r"index 5.*length 2"):
        env.insert_transform(5, InitTracker())
    with pytest.raises(IndexError, match=r"index -3.*length 2"):
        env.insert_transform(-3, InitTracker())
    assert len(env.transform) == 2
    env.insert_transform(2, InitTracker())  # == len: append
    env.insert_transform(-3, RewardScaling(0.0, 1.0))  # == -len: first
    assert [type(t).__name__ for t in env.transform] == [
        "RewardScaling",
        "StepCounter",
        "RewardSum",
        "InitTracker",
    ]


def test_insert_transform_not_a_transform():
    env = TransformedEnv(CountingEnv(), StepCounter())
    # a plain function is a transform, wrapped as in TorchRL (its v0.4 dreamer appends one)
    env.insert_transform(0, lambda td: td)
    assert type(env.transform[0]).__name__ == "FunctionTransform"
    with pytest.raises(TypeError, match="expects a Transform, got str"):
        env.append_transform("StepCounter")
    with pytest.raises(TypeError, match="Transform or Compose, got int"):
        TransformedEnv(CountingEnv(), 3)
    with pytest.raises(TypeError, match="expects an EnvBase, got str"):
        TransformedEnv("CartPole-v1", StepCounter())
    assert len(env.transform) == 2


def test_transform_with_in_keys_missing_from_specs():
    # none of its keys there: skipped as in TorchRL, with a warning; check_env_specs raises
    with pytest.warns(UserWarning, match="skipped") as record:
        env = TransformedEnv(
            CountingEnv(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["observaton"])
        )
    text = str(record[0].message)
    assert (
        "'observaton'" in text and "Available keys" in text and "Did you mean 'observation'" in text
    )
    assert env.rollout(2)["observation"].flatten().tolist() == [0.0, 1.0]  # untouched
    with pytest.raises(ValueError, match="skipped.*'observaton'"):
        check_env_specs(env)
    with pytest.warns(UserWarning, match="'pixels'.*Available keys"):
        TransformedEnv(GymEnv("CartPole-v1"), ToTensorImage())
    # some of its keys missing: an error
    with pytest.raises(KeyError, match="'observaton'.*Available keys"):
        TransformedEnv(
            CountingEnv(),
            ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation", "observaton"]),
        )


def test_append_invalid_transform_leaves_env_unchanged():
    env = TransformedEnv(
        CountingEnv(max_count=3), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])
    )
    spec_before = env.observation_spec.clone()
    with pytest.raises(KeyError, match="'obs'"):
        env.append_transform(RewardScaling(0.0, 1.0, in_keys=["reward", "obs"]))
    assert len(env.transform) == 1 and env.observation_spec == spec_before
    assert env.transform[0].container is env
    torch.testing.assert_close(
        env.rollout(2)["next", "observation"], torch.tensor([[3.0], [5.0]])
    )  # x * 2 + 1
    # a transform that takes a later one's key away: the later one is skipped (TorchRL's
    # rule), with a warning, and check_env_specs raises
    with pytest.warns(UserWarning, match="ObservationNorm.*'observation'.*skipped"):
        env.insert_transform(0, RenameTransform(["observation"], ["obs"]))
    with pytest.raises(ValueError, match="ObservationNorm"):
        check_env_specs(env)


def test_transform_parent_is_env_before_it():
    base = CountingEnv(max_count=3)
    first, second = StepCounter(), RewardSum()
    env = TransformedEnv(base, Compose(first, second))
    assert first.parent.base_env is base and len(first.parent._transforms) == 0
    parent = second.parent
    assert "step_count" in parent.observation_spec.keys()
    assert "episode_reward" not in parent.observation_spec.keys()
    assert StepCounter().parent is None
    assert second.container is env


def test_transform_in_two_envs_needs_clone():
    t = StepCounter()
    env = TransformedEnv(CountingEnv(), t)
    with pytest.raises(ValueError, match="already belongs to another TransformedEnv"):
        TransformedEnv(CountingEnv(), t)
    copy = t.clone()
    assert copy.container is None
    other = TransformedEnv(CountingEnv(), copy)
    assert other.transform[0] is copy and env.transform[0] is t
    assert pickle.loads(pickle.dumps(t)).container is None


def test_inverse_transform_keeps_policy_action():
    base = CountingEnv(max_count=5)
    env = TransformedEnv(base, ActionScaling())
    td = env.reset()
    td["action"] = torch.tensor([0.5])
    out = env.step(td)
    assert out["action"].item() == 0.5  # the caller still sees the policy's action
    assert base.actions[-1].item() == 1.0  # the env got it mapped to [-2, 2]


def test_transformedenv_set_seed_forwards():
    base = CountingEnv()
    env = TransformedEnv(base, StepCounter())
    assert env.set_seed(7) == base.set_seed(7)
    assert base.seed == 7


def test_nested_transformedenv():
    inner = TransformedEnv(CountingEnv(max_count=3), RewardSum())
    outer = TransformedEnv(inner, Compose(StepCounter(), InitTracker()))
    assert len(inner.transform) == 1 and len(outer.transform) == 2
    check_env_specs(outer)
    data = outer.rollout(4, break_when_any_done=False)
    assert data["next", "episode_reward"].flatten().tolist() == [1.0, 2.0, 3.0, 1.0]
    assert data["next", "step_count"].flatten().tolist() == [1, 2, 3, 1]
    assert outer.max_count.item() == 3  # attribute lookups fall through to the base env


def test_transform_to_and_state_dict():
    t = Compose(
        ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]), RewardScaling(0.0, 3.0)
    )
    assert t.to("cpu") is t
    t.double()
    td = t(
        TensorDict(
            {
                "observation": torch.ones(1, dtype=torch.float64),
                "reward": torch.ones(1, dtype=torch.float64),
            },
            [],
        )
    )
    assert td["observation"].dtype == torch.float64 and td["observation"].item() == 3.0
    assert td["reward"].item() == 3.0
    t2 = Compose(ObservationNorm(in_keys=["observation"]), RewardScaling(0.0, 1.0))
    t2.load_state_dict(t.state_dict())
    out = t2(TensorDict({"observation": torch.ones(1), "reward": torch.ones(1)}, []))
    assert out["observation"].item() == 3.0 and out["reward"].item() == 3.0


def test_forward_missing_key_names_it():
    with pytest.raises(KeyError, match="RewardScaling.*'reward'.*Available keys"):
        RewardScaling(0.0, 1.0)(TensorDict({"rewards": torch.ones(1)}, []))


def test_custom_transform_subclass():
    class Double(Transform):
        def _apply_transform(self, x):
            return x * 2

    env = TransformedEnv(
        CountingEnv(max_count=3), Double(in_keys=["observation"], out_keys=["twice"])
    )
    assert "twice" in env.observation_spec.keys()
    check_env_specs(env)
    assert env.rollout(2)["next", "twice"].flatten().tolist() == [2.0, 4.0]


def test_transformedenv_catframes_and_vecnorm_compose():
    env = TransformedEnv(
        CountingEnv(pixels=True, max_count=3),
        Compose(ToTensorImage(), CatFrames(2, -3), VecNorm(in_keys=["observation"])),
    )
    check_env_specs(env)
    assert env.observation_spec["pixels"].shape == (6, 6, 8)


def test_transforms_inside_and_outside_serialenv():
    from torchrl_lite.envs import SerialEnv

    def make():
        return TransformedEnv(CountingEnv(max_count=3), Compose(StepCounter(), RewardSum()))

    env = TransformedEnv(
        SerialEnv(2, make), Compose(InitTracker(), CatFrames(2, -1, in_keys=["observation"]))
    )
    assert "step_count" in env.full_state_spec.keys()  # passed to the sub-envs at each step
    check_env_specs(env)
    data = env.rollout(4, break_when_any_done=False)
    assert data["next", "step_count"][0].flatten().tolist() == [1, 2, 3, 1]
    assert data["observation"][0].tolist() == [[0, 0], [0, 1], [1, 2], [0, 0]]


def test_every_transform_is_importable_from_torchrl_module_path():
    import torchrl_lite.envs.transforms as package
    import torchrl_lite.envs.transforms.transforms as module

    for name in package.__all__:
        assert getattr(module, name) is getattr(package, name), name
    with pytest.raises(AttributeError, match="NoSuchTransform"):
        module.NoSuchTransform  # noqa: B018
