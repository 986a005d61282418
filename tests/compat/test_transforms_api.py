"""Seed-era TorchRL transform usage (issue 13, items 3 and 4), import changed only."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import LazyTensorStorage, ReplayBuffer, Unbounded
from torchrl_lite.data.replay_buffers import SliceSampler  # noqa: F401  (import path check)
from torchrl_lite.envs import (
    BatchSizeTransform,
    Compose,
    GymEnv,
    PendulumEnv,
    RandomCropTensorDict,
    SerialEnv,
    SqueezeTransform,
    StepCounter,
    ToTensorImage,
    Transform,
    TransformedEnv,
    UnsqueezeTransform,
    check_env_specs,
)
from torchrl_lite.envs.transforms.transforms import _apply_to_composite


class ConcatTwice(Transform):
    """A seed-era custom transform: its spec hook is written for one leaf spec."""

    def _apply_transform(self, x):
        return torch.cat([x, x], -1)

    @_apply_to_composite
    def transform_observation_spec(self, observation_spec):
        shape = (*observation_spec.shape[:-1], 2 * observation_spec.shape[-1])
        return Unbounded(shape, dtype=observation_spec.dtype, device=observation_spec.device)


def test_apply_to_composite_custom_transform():
    env = TransformedEnv(GymEnv("Pendulum-v1"), ConcatTwice(in_keys=["observation"]))
    assert env.observation_spec["observation"].shape == (6,)
    data = env.rollout(3)
    assert data["observation"].shape == (3, 6)
    torch.testing.assert_close(data["observation"][:, :3], data["observation"][:, 3:])
    check_env_specs(env)


def test_squeeze_unsqueeze_dim_aliases_equal_canonical():
    base = lambda: GymEnv("Pendulum-v1")  # noqa: E731
    for alias, canonical in [
        (
            UnsqueezeTransform(unsqueeze_dim=-1, in_keys=["observation"]),
            UnsqueezeTransform(dim=-1, in_keys=["observation"]),
        ),
        (
            UnsqueezeTransform(unsqueeze_dim=-2, in_keys=["observation"]),
            UnsqueezeTransform(-2, in_keys=["observation"]),
        ),
    ]:
        a, c = TransformedEnv(base(), alias), TransformedEnv(base(), canonical)
        assert a.observation_spec == c.observation_spec and alias.dim == canonical.dim
        a.set_seed(0), c.set_seed(0)
        torch.testing.assert_close(a.reset()["observation"], c.reset()["observation"])
    td = TensorDict({"x": torch.zeros(3, 1)}, [])
    assert SqueezeTransform(squeeze_dim=-1, in_keys=["x"])(td.clone())["x"].shape == (3,)
    assert (
        SqueezeTransform(squeeze_dim=-1, in_keys=["x"]).dim
        == SqueezeTransform(-1, in_keys=["x"]).dim
    )
    with pytest.raises(TypeError, match="not both"):
        UnsqueezeTransform(-1, in_keys=["x"], unsqueeze_dim=-1)
    with pytest.raises(TypeError, match="missing the dim"):
        SqueezeTransform(in_keys=["x"])


def test_transform_with_absent_in_key_is_skipped_and_check_env_specs_says_so():
    # a transform list written for pixel envs, used on a state env (TorchRL skips it)
    with pytest.warns(UserWarning, match="'pixels'.*skipped"):
        env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(ToTensorImage(), StepCounter()))
    data = env.rollout(3)
    assert data["step_count"].flatten().tolist() == [0, 1, 2]  # the others still run
    assert "pixels" not in data.keys()
    with pytest.raises(ValueError, match="ToTensorImage.*'pixels'"):
        check_env_specs(env)


def test_batch_size_transform_batches_a_batch_unlocked_env():
    env = TransformedEnv(PendulumEnv(seed=0), BatchSizeTransform(batch_size=[4]))
    assert env.batch_size == (4,) and env.action_spec.shape == (4, 1)
    data = env.rollout(3)
    assert data.batch_size == (4, 3)
    check_env_specs(env)
    # the reference: the same env reset with a [4] TensorDict by hand
    ref = PendulumEnv(seed=0)
    start = ref.reset(TensorDict(batch_size=[4]))
    torch.testing.assert_close(data["observation"][:, 0], start["observation"])


def test_batch_size_transform_reshape_fn():
    env = TransformedEnv(
        SerialEnv(1, lambda: GymEnv("Pendulum-v1")),
        BatchSizeTransform(batch_size=[], reshape_fn=lambda td: td.squeeze(0)),
    )
    assert env.batch_size == () and env.action_spec.shape == (1,)
    assert env.rollout(3).batch_size == (3,)
    check_env_specs(env)
    with pytest.raises(ValueError, match="batch_locked=False"):
        TransformedEnv(GymEnv("Pendulum-v1"), BatchSizeTransform(batch_size=[4])).reset()


def test_random_crop_tensordict_on_stored_trajectories():
    torch.manual_seed(0)
    steps = torch.arange(20).expand(3, 20)  # [3, 20]: the step index of each trajectory
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    rb.extend(TensorDict({"t": steps, "row": torch.arange(3).unsqueeze(-1).expand(3, 20)}, [3, 20]))
    rb.append_transform(RandomCropTensorDict(sub_seq_len=5))
    sample = rb.sample()
    assert sample.batch_size == (3, 5)
    assert (sample["t"].diff(dim=-1) == 1).all()  # contiguous
    assert (sample["t"] >= 0).all() and (sample["t"] <= 19).all()
    # with a mask: the crop stays inside the valid steps of each row
    mask = torch.arange(20).expand(3, 20) < torch.tensor([[6], [20], [8]])
    td = TensorDict({"t": steps, "mask": mask}, [3, 20])
    for _ in range(20):
        out = RandomCropTensorDict(5, mask_key="mask")(td)
        assert out["mask"].all()
    with pytest.raises(ValueError, match="fewer than sub_seq_len=7"):
        RandomCropTensorDict(7, mask_key="mask")(td)
