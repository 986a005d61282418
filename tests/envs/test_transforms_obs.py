"""Observation transforms: images, normalisation, dtypes, shapes, frame stacks, VecNorm."""

import multiprocessing as mp

import pytest
import torch
from tensordict import TensorDict

from tests.envs.transform_envs import CountingEnv
from torchrl_lite.data.tensor_specs import Bounded, Composite
from torchrl_lite.envs import (
    CatFrames,
    CatTensors,
    CenterCrop,
    Compose,
    DoubleToFloat,
    DTypeCastTransform,
    ExcludeTransform,
    FlattenObservation,
    GrayScale,
    GymEnv,
    InitTracker,
    ObservationNorm,
    PermuteTransform,
    RenameTransform,
    Resize,
    SqueezeTransform,
    TimeMaxPool,
    ToTensorImage,
    TransformedEnv,
    UnsqueezeTransform,
    VecNorm,
    check_env_specs,
)


def _frame(count: int) -> torch.Tensor:
    """The CountingEnv frame as ToTensorImage returns it: [3, 6, 8] in [0, 1]."""
    raw = (count + torch.arange(6 * 8 * 3).reshape(6, 8, 3)) % 256
    return raw.permute(2, 0, 1).float() / 255


# -- images ------------------------------------------------------------------------------
def test_totensorimage_values_and_spec():
    env = TransformedEnv(CountingEnv(pixels=True, max_count=3), ToTensorImage())
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (3, 6, 8) and spec.dtype == torch.float32
    assert spec.low.min() == 0.0 and spec.high.max() == 1.0
    td = env.reset()
    assert td["pixels"][1, 2, 3].item() == pytest.approx((2 * 24 + 3 * 3 + 1) / 255)
    data = env.rollout(4, break_when_any_done=False)
    torch.testing.assert_close(data["next", "pixels"][0], _frame(1))
    torch.testing.assert_close(data["pixels"][3], _frame(0))  # after the reset
    check_env_specs(env)


def test_totensorimage_on_stored_batch():
    td = TensorDict({"pixels": torch.full((2, 5, 4, 4, 3), 51, dtype=torch.uint8)}, [2, 5])
    out = ToTensorImage()(td)["pixels"]
    assert out.shape == (2, 5, 3, 4, 4) and torch.allclose(out, torch.full_like(out, 0.2))


def test_resize_nearest_hand_computed_and_env_spec():
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])  # [1, 2, 2]
    out = Resize(4, 4, interpolation="nearest")(TensorDict({"pixels": x}, []))["pixels"]
    expected = torch.tensor([[1.0, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])
    torch.testing.assert_close(out[0], expected)
    env = TransformedEnv(CountingEnv(pixels=True), Compose(ToTensorImage(), Resize(3, 4)))
    assert env.observation_spec["pixels"].shape == (3, 3, 4)
    check_env_specs(env)
    with pytest.raises(ValueError, match="positive int"):
        Resize(0)


def test_centercrop_hand_computed():
    x = torch.arange(16.0).reshape(1, 4, 4)
    out = CenterCrop(2)(TensorDict({"pixels": x}, []))["pixels"]
    torch.testing.assert_close(out, torch.tensor([[[5.0, 6.0], [9.0, 10.0]]]))
    env = TransformedEnv(CountingEnv(pixels=True), Compose(ToTensorImage(), CenterCrop(3, 5)))
    assert env.observation_spec["pixels"].shape == (3, 3, 5)
    td = env.reset()
    torch.testing.assert_close(td["pixels"], _frame(0)[:, 2:5, 2:7])  # top = left = round(1.5) = 2
    check_env_specs(env)
    with pytest.raises(ValueError, match="smaller than the crop"):
        TransformedEnv(CountingEnv(pixels=True), Compose(ToTensorImage(), CenterCrop(7, 5)))


def test_grayscale_hand_computed():
    x = torch.zeros(3, 1, 2)
    x[0, 0, 0] = 1.0
    x[1, 0, 1] = 1.0
    out = GrayScale()(TensorDict({"pixels": x}, []))["pixels"]
    torch.testing.assert_close(out, torch.tensor([[[0.2989, 0.587]]]))
    env = TransformedEnv(CountingEnv(pixels=True), Compose(ToTensorImage(), GrayScale()))
    assert env.observation_spec["pixels"].shape == (1, 6, 8)
    assert env.reset()["pixels"][0, 0, 0].item() == pytest.approx((0.587 + 2 * 0.114) / 255)
    check_env_specs(env)
    with pytest.raises(ValueError, match="3 channels at dim -3"):
        TransformedEnv(CountingEnv(pixels=True), GrayScale())  # [H, W, C]: ToTensorImage first


def test_grayscale_same_for_channel_planes_and_a_channels_last_view():
    g = torch.Generator().manual_seed(0)
    hwc = torch.randint(0, 256, (2, 5, 7, 3), generator=g, dtype=torch.uint8)  # a rendered frame
    w = torch.tensor([0.2989, 0.587, 0.114])
    expected = (hwc.double() @ w.double()).round().to(torch.uint8).unsqueeze(-3)  # [2, 1, 5, 7]
    for x in (hwc.permute(0, 3, 1, 2), hwc.permute(0, 3, 1, 2).contiguous()):
        out = GrayScale()(TensorDict({"pixels": x}, [2]))["pixels"]
        assert out.dtype == torch.uint8 and out.shape == (2, 1, 5, 7)
        assert (out.int() - expected.int()).abs().max() <= 1  # float32 rounding at .5


# -- ObservationNorm -----------------------------------------------------------------------
def test_observationnorm_affine_and_standard_normal():
    env = TransformedEnv(
        CountingEnv(max_count=3), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])
    )
    assert env.rollout(3)["next", "observation"].flatten().tolist() == [3.0, 5.0, 7.0]
    check_env_specs(env)
    env = TransformedEnv(
        CountingEnv(max_count=3),
        ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True),
    )
    assert env.rollout(3)["observation"].flatten().tolist() == [-0.5, 0.0, 0.5]


def test_observationnorm_bounded_spec_and_negative_scale():
    env = TransformedEnv(
        CountingEnv(pixels=True),
        Compose(ToTensorImage(), ObservationNorm(loc=0.5, scale=-2.0, in_keys=["pixels"])),
    )
    spec = env.observation_spec["pixels"]
    assert spec.low.min().item() == -1.5 and spec.high.max().item() == 0.5
    check_env_specs(env)


def test_observationnorm_inverse_on_action():
    base = CountingEnv()
    env = TransformedEnv(
        base, ObservationNorm(loc=1.0, scale=2.0, in_keys=[], in_keys_inv=["action"])
    )
    spec = env.action_spec
    assert spec.low.item() == -3.0 and spec.high.item() == 5.0  # [-2, 2] * 2 + 1
    env.step(env.reset().set("action", torch.tensor([3.0])))
    assert base.actions[-1].item() == 1.0  # (3 - 1) / 2


def test_observationnorm_init_stats():
    env = TransformedEnv(
        CountingEnv(max_count=3), ObservationNorm(in_keys=["observation"], standard_normal=True)
    )
    norm = env.transform[0]
    assert not norm.initialized
    with pytest.raises(RuntimeError, match="init_stats"):
        env.reset()
    norm.init_stats(6)  # two episodes of observations 0, 1, 2
    torch.testing.assert_close(norm.loc, torch.tensor([1.0]))
    torch.testing.assert_close(norm.scale, torch.tensor([0.8]).sqrt())
    out = env.rollout(3)["observation"].flatten()
    torch.testing.assert_close(out, (torch.tensor([0.0, 1.0, 2.0]) - 1) / 0.8**0.5)
    check_env_specs(env)
    plain = TransformedEnv(CountingEnv(max_count=3), ObservationNorm(in_keys=["observation"]))
    plain.transform[0].init_stats(6)
    torch.testing.assert_close(
        plain.rollout(3)["observation"].flatten(), (torch.tensor([0.0, 1.0, 2.0]) - 1) / 0.8**0.5
    )


def test_observationnorm_init_stats_keep_dims():
    env = TransformedEnv(
        CountingEnv(pixels=True, max_count=3),
        Compose(ToTensorImage(), ObservationNorm(in_keys=["pixels"], standard_normal=True)),
    )
    env.transform[1].init_stats(3, reduce_dim=(0, -2, -1), cat_dim=0, keep_dims=(-2, -1))
    assert env.transform[1].loc.shape == (3, 1, 1)
    check_env_specs(env)


def test_observationnorm_bad_use():
    with pytest.raises(RuntimeError, match="no loc/scale yet"):
        ObservationNorm(in_keys=["observation"])(TensorDict({"observation": torch.ones(1)}, []))
    with pytest.raises(RuntimeError, match="TransformedEnv"):
        ObservationNorm(in_keys=["observation"]).init_stats(3)
    with pytest.raises(ValueError, match="both loc and scale"):
        ObservationNorm(loc=0.0)
    env = TransformedEnv(CountingEnv(pixels=True), Compose(ToTensorImage(), ObservationNorm()))
    assert env.transform[1].in_keys == ["observation", "pixels"]
    with pytest.raises(ValueError, match="pass key="):
        env.transform[1].init_stats(3)


def test_observationnorm_default_keys():
    state_only = TransformedEnv(GymEnv("CartPole-v1"), ObservationNorm(loc=0.0, scale=1.0))
    assert state_only.transform[0].in_keys == ["observation"]
    pixels_only = TransformedEnv(
        CountingEnv(pixels=True),
        Compose(
            ExcludeTransform("observation"), ToTensorImage(), ObservationNorm(loc=0.5, scale=1.0)
        ),
    )
    assert pixels_only.transform[2].in_keys == ["pixels"]
    check_env_specs(pixels_only)
    with pytest.warns(UserWarning, match="'observation'.*Available keys.*skipped"):
        TransformedEnv(
            CountingEnv(),
            Compose(RenameTransform(["observation"], ["obs"]), ObservationNorm(loc=0.0, scale=1.0)),
        )


# -- dtypes ------------------------------------------------------------------------------
def test_doubletofloat_observations_and_actions():
    base = CountingEnv(max_count=3, obs_dtype=torch.float64, action_dtype=torch.float64)
    env = TransformedEnv(base, DoubleToFloat())
    assert env.observation_spec["observation"].dtype == torch.float32
    assert env.action_spec.dtype == torch.float32
    data = env.rollout(3)
    assert data["observation"].dtype == data["next", "observation"].dtype == torch.float32
    assert data["action"].dtype == torch.float32 and base.actions[-1].dtype == torch.float64
    check_env_specs(env)


def test_dtypecast_explicit_keys():
    env = TransformedEnv(
        CountingEnv(), DTypeCastTransform(torch.float32, torch.float64, in_keys=["observation"])
    )
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.action_spec.dtype == torch.float32  # in_keys given: actions untouched
    assert env.reset()["observation"].dtype == torch.float64
    check_env_specs(env)
    with pytest.raises(TypeError, match="torch.dtype"):
        DTypeCastTransform("float32", torch.float64)


# -- shapes ------------------------------------------------------------------------------
def test_unsqueeze_and_inverse():
    base = CountingEnv()
    env = TransformedEnv(
        base,
        Compose(
            UnsqueezeTransform(-1, in_keys=["observation"]),
            UnsqueezeTransform(-1, in_keys_inv=["action"]),
        ),
    )
    assert env.observation_spec["observation"].shape == (1, 1) and env.action_spec.shape == (1, 1)
    td = env.step(env.reset().set("action", torch.tensor([[0.5]])))
    assert td["next", "observation"].shape == (1, 1) and base.actions[-1].shape == (1,)
    check_env_specs(env)
    with pytest.raises(ValueError, match="negative int"):
        UnsqueezeTransform(1, in_keys=["observation"])
    with pytest.raises(ValueError, match="needs in_keys"):
        UnsqueezeTransform(-1)


def test_squeeze():
    env = TransformedEnv(CountingEnv(max_count=3), SqueezeTransform(-1, in_keys=["observation"]))
    assert env.observation_spec["observation"].shape == ()
    assert env.rollout(3)["observation"].tolist() == [0.0, 1.0, 2.0]
    check_env_specs(env)
    with pytest.raises(ValueError, match="size 1"):
        TransformedEnv(CountingEnv(pixels=True), SqueezeTransform(-1, in_keys=["pixels"]))


def test_flatten_and_permute():
    env = TransformedEnv(CountingEnv(pixels=True), FlattenObservation(-3, -1))
    td = env.reset()
    assert td["pixels"].shape == (144,) and td["pixels"][:4].tolist() == [0, 1, 2, 3]
    check_env_specs(env)
    env = TransformedEnv(
        CountingEnv(pixels=True), PermuteTransform([-1, -3, -2], in_keys=["pixels"])
    )
    assert env.observation_spec["pixels"].shape == (3, 6, 8)
    td = env.reset()
    torch.testing.assert_close(td["pixels"].float() / 255, _frame(0))
    check_env_specs(env)
    t = PermuteTransform([-1, -3, -2], in_keys=[], in_keys_inv=["x"])
    x = torch.randn(2, 4, 5, 3)
    back = t.inv(TensorDict({"x": x}, [2]))["x"]  # inverse: [C, H, W] -> [H, W, C]
    assert back.shape == (2, 5, 3, 4)
    with pytest.raises(ValueError, match="reordering"):
        PermuteTransform([-1, -2, 0], in_keys=["pixels"])
    with pytest.raises(ValueError, match="first_dim"):
        FlattenObservation(-1, -2)


def test_cattensors_values_and_specs():
    env = TransformedEnv(
        CountingEnv(max_count=3),
        Compose(
            ObservationNorm(loc=1.0, scale=1.0, in_keys=["observation"], out_keys=["shifted"]),
            CatTensors(["observation", "shifted"], "vec"),
        ),
    )
    assert set(env.observation_spec.keys()) == {"vec"}
    assert env.rollout(3)["next", "vec"].tolist() == [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
    check_env_specs(env)
    spec = Composite(a=Bounded(0.0, 1.0, (2,)), b=Bounded(-1.0, 1.0, (1,)))
    out = CatTensors(["a", "b"], "ab", del_keys=False).transform_observation_spec(spec)
    assert out["ab"].low.tolist() == [0.0, 0.0, -1.0] and out["ab"].high.tolist() == [1.0, 1.0, 1.0]
    assert "a" in out.keys()
    with pytest.raises(KeyError, match="'obs'"):
        TransformedEnv(CountingEnv(), CatTensors(["observation", "obs"], "vec"))


# -- frame stacks ------------------------------------------------------------------------
def test_catframes_in_env_hand_computed():
    env = TransformedEnv(CountingEnv(max_count=3), CatFrames(3, -1, in_keys=["observation"]))
    assert env.observation_spec["observation"].shape == (3,)
    data = env.rollout(5, break_when_any_done=False)
    assert data["observation"].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0], [0, 0, 1]]
    assert data["next", "observation"].tolist() == [
        [0, 0, 1],
        [0, 1, 2],
        [1, 2, 3],
        [0, 0, 1],
        [0, 1, 2],
    ]
    check_env_specs(env)


@pytest.mark.parametrize("make", [lambda: CatFrames(3, -1, in_keys=["observation"]),
                                  lambda: TimeMaxPool(in_keys=["observation"], T=3)])  # fmt: skip
def test_frame_transforms_running_state_round_trips_through_state_dict(make):
    env = TransformedEnv(GymEnv("CartPole-v1"), make())
    env.set_seed(0)
    td = env.reset()
    for _ in range(4):  # the stacks/windows now hold 4 steps of history
        td = env.step(env.rand_action(td))["next"].select("observation")
    restored = make()
    restored.load_state_dict(env.transform[0].state_dict())
    frame = td.clone().set("observation", torch.ones(4))
    expected = env.transform[0]._step(td.clone(), frame.clone())["observation"]
    torch.testing.assert_close(restored._step(td.clone(), frame.clone())["observation"], expected)
    with pytest.raises(RuntimeError, match="must be reset before it steps"):
        make()._step(td.clone(), frame.clone())  # without the state: no history to extend


def test_catframes_constant_padding_and_spec():
    env = TransformedEnv(
        CountingEnv(max_count=3),
        CatFrames(3, -1, in_keys=["observation"], padding="constant", padding_value=-1.0),
    )
    assert env.rollout(3)["observation"].tolist() == [[-1, -1, 0], [-1, 0, 1], [0, 1, 2]]
    env = TransformedEnv(
        CountingEnv(pixels=True),
        Compose(ToTensorImage(), CatFrames(2, -3, padding="constant", padding_value=-1.0)),
    )
    spec = env.observation_spec["pixels"]
    assert spec.shape == (6, 6, 8) and spec.low.min() == -1.0 and spec.high.max() == 1.0
    td = env.reset()
    assert (td["pixels"][:3] == -1).all()
    torch.testing.assert_close(td["pixels"][3:], _frame(0))
    check_env_specs(env)


@pytest.mark.parametrize("batch_size, max_count", [((), 3), ((2,), [[2], [3]])])
def test_catframes_stored_batch_matches_env(batch_size, max_count):
    def transforms():
        return CatFrames(3, -3, in_keys=["pixels"])

    env = TransformedEnv(
        CountingEnv(batch_size, max_count=max_count, pixels=True),
        Compose(ToTensorImage(), transforms()),
    )
    expected = env.rollout(7, break_when_any_done=False)
    raw = CountingEnv(batch_size, max_count=max_count, pixels=True).rollout(
        7, break_when_any_done=False
    )
    got = Compose(ToTensorImage(in_keys=["pixels", ("next", "pixels")]), transforms())(raw)
    torch.testing.assert_close(got["pixels"], expected["pixels"])
    torch.testing.assert_close(got["next", "pixels"], expected["next", "pixels"])


def test_catframes_stored_batch_uses_is_init():
    env = TransformedEnv(
        CountingEnv((2,), max_count=[[2], [3]]),
        Compose(InitTracker(), CatFrames(2, -1, in_keys=["observation"])),
    )
    expected = env.rollout(6, break_when_any_done=False)
    raw = TransformedEnv(CountingEnv((2,), max_count=[[2], [3]]), InitTracker()).rollout(
        6, break_when_any_done=False
    )
    del raw["next", "done"]  # episode starts come from is_init alone
    got = CatFrames(2, -1, in_keys=["observation"])(raw)
    torch.testing.assert_close(got["observation"], expected["observation"])


def test_catframes_bad_arguments():
    with pytest.raises(ValueError, match="negative int"):
        CatFrames(4, 0)
    with pytest.raises(ValueError, match="N must be"):
        CatFrames(0, -1)
    with pytest.raises(ValueError, match="padding"):
        CatFrames(2, -1, padding="zeros")
    with pytest.raises(ValueError, match="time dim"):
        CatFrames(2, -1, in_keys=["observation"])(TensorDict({"observation": torch.zeros(1)}, []))


def test_timemaxpool_env_and_stored_batch():
    def make():
        return TransformedEnv(
            CountingEnv(max_count=3), ObservationNorm(loc=0.0, scale=-1.0, in_keys=["observation"])
        )

    env = make()
    env.append_transform(TimeMaxPool(in_keys=["observation"], T=2))
    data = env.rollout(5, break_when_any_done=False)  # raw observations 0, -1, -2 | 0, -1
    assert data["observation"].flatten().tolist() == [0.0, 0.0, -1.0, 0.0, 0.0]
    assert data["next", "observation"].flatten().tolist() == [0.0, -1.0, -2.0, 0.0, -1.0]
    check_env_specs(env)
    got = TimeMaxPool(in_keys=["observation"], T=2)(make().rollout(5, break_when_any_done=False))
    torch.testing.assert_close(got["observation"], data["observation"])


# -- VecNorm -----------------------------------------------------------------------------
def test_vecnorm_hand_computed():
    env = TransformedEnv(CountingEnv(max_count=5), VecNorm(in_keys=["observation"], decay=1.0))
    data = env.rollout(2)
    # seen: 0 -> mean 0, std sqrt(eps); then 1 -> mean .5, std .5; then 2 -> mean 1, var 2/3
    torch.testing.assert_close(data["observation"].flatten(), torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(
        data["next", "observation"].flatten(), torch.tensor([1.0, 1.0 / (2 / 3) ** 0.5])
    )
    assert env.observation_spec["observation"].dtype == torch.float32
    check_env_specs(env)


def test_vecnorm_state_dict_and_observation_norm():
    env = TransformedEnv(CountingEnv(max_count=5), VecNorm(decay=1.0))
    env.rollout(4)
    vecnorm = env.transform[0]
    restored = VecNorm(decay=1.0)
    restored.load_state_dict(vecnorm.state_dict())
    for a, b in zip(vecnorm._loc_scale("observation"), restored._loc_scale("observation")):
        torch.testing.assert_close(a, b)
    norm = vecnorm.to_observation_norm()
    x = TensorDict({"observation": torch.tensor([3.0])}, [])
    mean, std = vecnorm._loc_scale("observation")
    torch.testing.assert_close(norm(x)["observation"], (torch.tensor([3.0]) - mean) / std)
    vecnorm.freeze()
    before = vecnorm._td.clone()
    env.rollout(3)
    assert (vecnorm._td == before).all()


def _update_shared(td):
    t = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
    t(TensorDict({"observation": torch.full((4, 1), 2.0)}, [4]))


def test_vecnorm_shared_across_processes():
    env = CountingEnv()
    shared = VecNorm.build_td_for_shared_vecnorm(env, ["observation"])
    assert shared.is_shared()
    proc = mp.get_context("fork").Process(target=_update_shared, args=(shared,))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    assert shared["observation_count"].item() == 4.0 and shared["observation_sum"].item() == 8.0
    local = VecNorm(in_keys=["observation"], shared_td=shared, decay=1.0)
    TransformedEnv(env, local).reset()
    assert shared["observation_count"].item() == 5.0
    with pytest.raises(KeyError, match="build_td_for_shared_vecnorm"):
        VecNorm(in_keys=["pixels"], shared_td=shared)
