"""VideoRecorder: the frames an env shows become a video with one frame per recorded step."""

import imageio.v3 as iio
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.envs import (
    Compose,
    GymEnv,
    SerialEnv,
    ToTensorImage,
    TransformedEnv,
)
from torchrl_lite.record import CSVLogger, VideoRecorder


def _cartpole(recorder, *transforms):
    env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
    env.set_seed(0)
    return TransformedEnv(env, Compose(*transforms, recorder))


def _shown_frames(rollout):
    """The frames of a rollout: the reset frame, then each step's, uint8 [T + 1, H, W, 3]."""
    return torch.cat([rollout["pixels"][:1], rollout["next", "pixels"]])


def test_video_recorder_rollout_writes_every_frame(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4", video_fps=10)
    recorder = VideoRecorder(logger, "cartpole")
    env = _cartpole(recorder)
    rollout = env.rollout(5, break_when_any_done=False)
    assert rollout["pixels"].shape == (5, 400, 600, 3)  # data unchanged
    assert set(env.observation_spec.keys()) == {"observation", "pixels"}
    shown = _shown_frames(rollout)
    assert torch.equal(recorder.frames, shown.permute(0, 3, 1, 2))
    recorder.dump()
    assert recorder.obs == [] and recorder.iter == 1
    frames = iio.imread(tmp_path / "exp" / "videos" / "cartpole_0.mp4", index=None)
    assert frames.shape == (6, 400, 600, 3)

    env.rollout(2, break_when_any_done=False)
    recorder.dump(suffix="eval")
    logger.close()
    frames = iio.imread(tmp_path / "exp" / "videos" / "cartpole_eval_1.mp4", index=None)
    assert frames.shape[0] == 3


def test_video_recorder_skip_and_center_crop():
    recorder = VideoRecorder(None, "cartpole", skip=2, center_crop=100)
    env = _cartpole(recorder)
    rollout = env.rollout(5, break_when_any_done=False)
    shown = _shown_frames(rollout)[::2, 150:250, 250:350].permute(0, 3, 1, 2)
    assert torch.equal(recorder.frames, shown)  # frames 0, 2, 4 of 6
    recorder.dump()  # no logger: the frames are dropped
    assert recorder.obs == []


def test_video_recorder_float_chw_frames():
    recorder = VideoRecorder(None, "cartpole")
    env = _cartpole(recorder, ToTensorImage())
    rollout = env.rollout(2, break_when_any_done=False)
    assert rollout["pixels"].shape == (2, 3, 400, 600)
    assert recorder.frames.dtype == torch.uint8
    assert recorder.frames.shape == (3, 3, 400, 600)
    expected = torch.cat([rollout["pixels"][:1], rollout["next", "pixels"]])
    assert torch.equal(recorder.frames, (expected * 255).round().to(torch.uint8))


@pytest.mark.parametrize("make_grid", [True, False])
def test_video_recorder_batched_env(make_grid):
    recorder = VideoRecorder(None, "cartpole", make_grid=make_grid)
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1", from_pixels=True)), recorder)
    rollout = env.rollout(3, break_when_any_done=False)  # pixels [2, 3, 400, 600, 3]
    last = rollout["next", "pixels"][:, -1].permute(0, 3, 1, 2)  # [B, C, H, W]
    if make_grid:
        assert recorder.frames.shape == (4, 3, 400, 1200)
        assert torch.equal(recorder.frames[-1], torch.cat([last[0], last[1]], dim=-1))
    else:
        assert recorder.frames.shape == (4, 3, 400, 600)
        assert torch.equal(recorder.frames[-1], last[0])


@pytest.mark.parametrize("make_grid", [True, False])
def test_video_recorder_batched_resets(make_grid):
    # A reset frame is recorded when every shown env was reset (all envs on a grid, the
    # first env otherwise): a partial reset of other envs would repeat the last frame.
    recorder = VideoRecorder(None, "cartpole", make_grid=make_grid)
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1", from_pixels=True)), recorder)
    env.set_seed(0)
    rollout = env.rollout(40, break_when_any_done=False)
    done = rollout["next", "done"][..., :-1, 0]  # [B, T - 1]: resets inside the rollout
    assert done.any() and not done.all(0).any()  # partial resets only
    shown_resets = done.all(0).sum() if make_grid else done[0].sum()
    assert recorder.frames.shape[0] == 1 + 40 + shown_resets


def test_video_recorder_partial_reset_of_first_env_recorded_without_grid():
    frames = TensorDict({"pixels": torch.zeros(2, 8, 8, 3, dtype=torch.uint8)}, [2])
    first_reset = TensorDict({"_reset": torch.tensor([[True], [False]])}, [2])
    for make_grid, expected in [(True, 0), (False, 1)]:
        recorder = VideoRecorder(None, "v", make_grid=make_grid)
        recorder._reset(first_reset, frames)
        assert len(recorder.obs) == expected


def test_video_recorder_forward_on_stored_batch(tmp_path):
    pixels = torch.randint(0, 256, (4, 5, 8, 8, 3), dtype=torch.uint8)  # [B, T, H, W, C]
    data = TensorDict({"pixels": pixels}, [4, 5])
    with CSVLogger("exp", log_dir=tmp_path, video_format="pt") as logger:
        recorder = VideoRecorder(logger, "data", fps=5)
        assert recorder(data) is data
        assert recorder.frames.shape == (5, 3, 16, 16)  # 5 time steps, 4 envs on a 2x2 grid
        recorder.dump(step=3)
    video = torch.load(tmp_path / "exp" / "videos" / "data_3.pt")
    assert video.shape == (1, 5, 3, 16, 16)
    assert torch.equal(video[0, :, :, :8, 8:], pixels[1].permute(0, 3, 1, 2))


def test_video_recorder_failed_dump_keeps_frames(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    recorder = VideoRecorder(logger, "data")
    recorder(TensorDict({"pixels": torch.zeros(2, 8, 8, 3, dtype=torch.uint8)}, [2]))
    logger.close()
    with pytest.raises(RuntimeError, match="closed"):
        recorder.dump()
    assert len(recorder.obs) == 2


def test_video_recorder_clone_shares_logger(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        recorder = VideoRecorder(logger, "data")
        copy = recorder.clone()
    assert copy.logger is logger and copy is not recorder


def test_video_recorder_bad_input(tmp_path):
    with pytest.raises(ValueError, match="skip"):
        VideoRecorder(None, "v", skip=0)
    with pytest.raises(ValueError, match="one frame entry"):
        VideoRecorder(None, "v", in_keys=["pixels", "image"])
    with pytest.raises(TypeError, match="log_video"):
        VideoRecorder(object(), "v")
    # an absent frame key: a warning naming it; the recorder records only steps that carry
    # it (as in TorchRL): none here
    with pytest.warns(UserWarning, match="'image' is not in the specs.*check the key"):
        env = _cartpole(VideoRecorder(None, "v", in_keys=["image"]))
    env.rollout(3)
    assert env.transform[-1].obs == []
    recorder = VideoRecorder(None, "v")
    with pytest.raises(ValueError, match="\\[H, W, C\\]"):
        recorder(TensorDict({"pixels": torch.zeros(2, 8, dtype=torch.uint8)}, [2]))
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        recorder(TensorDict({"pixels": torch.full((3, 8, 8), 2.0)}, []))
    with pytest.raises(ValueError, match="center_crop=20"):
        VideoRecorder(None, "v", center_crop=20)(
            TensorDict({"pixels": torch.zeros(8, 8, 3, dtype=torch.uint8)}, [])
        )


def test_recorder_dump_through_the_env_transform(tmp_path):
    from torchrl_lite.envs import GymEnv, TransformedEnv
    from torchrl_lite.record import CSVLogger, VideoRecorder

    logger = CSVLogger("exp", log_dir=str(tmp_path), video_format="pt")
    env = TransformedEnv(GymEnv("CartPole-v1", from_pixels=True), VideoRecorder(logger, "run"))
    env.rollout(3)
    env.transform.dump()  # TorchRL style: Compose.dump reaches the recorder
    assert env.transform[0].frames is None or len(env.transform[0].frames) == 0
    assert list((tmp_path / "exp" / "videos").iterdir())


def test_recorder_of_an_entry_no_spec_declares_records_the_steps_that_carry_it():
    """TorchRL's v0.4 Dreamer records ``"reco_pixels"``, which a decoder transform writes
    without declaring it in any spec: the recorder warns once and records what it finds,
    frame for frame the entry the steps carry."""
    from torchrl_lite.envs import PendulumEnv, TransformedEnv
    from torchrl_lite.envs.transforms import Compose, Transform

    class Picture(Transform):  # writes an undeclared [4, 4] uint8 entry from the angle
        def _call(self, td):
            level = (td["observation"][..., 0] * 100 + 128).to(torch.uint8)
            td.set("reco", level[..., None, None].expand(*level.shape, 4, 4).clone())
            return td

    recorder_key = "reco"
    with pytest.warns(UserWarning, match="'reco' is not in the specs.*records that entry"):
        env = TransformedEnv(
            PendulumEnv(seed=0),
            Compose(
                Picture(in_keys=["observation"]), VideoRecorder(None, "v", in_keys=[recorder_key])
            ),
        )
    rollout = env.rollout(5)
    recorder = env.transform[-1]
    frames = torch.stack(recorder.obs)  # [T, 1, 4, 4]
    expected = rollout["next", "reco"]  # the steps' frames (the reset frame is not written)
    assert frames.shape[0] in (5, 6)
    torch.testing.assert_close(frames[-5:, 0], expected)
