"""``torchrl_lite.render`` used as TorchRL's rlrender tutorial and DQN/PPO scripts use it."""

import json

import numpy as np
import pytest
import torch
from tensordict.nn import TensorDictModule

from torchrl_lite.checkpoint import Checkpoint
from torchrl_lite.envs import GymEnv, PendulumEnv
from torchrl_lite.render import (
    RenderConfig,
    RenderEnvSpec,
    RenderPolicySpec,
    checkpoint_hash,
    infer_state_dict,
    load_checkpoint,
    render_policy,
    save_render_checkpoint,
)


def _pendulum(spec: RenderEnvSpec):
    assert isinstance(spec, RenderEnvSpec)
    return PendulumEnv(device=spec.device)


def _linear_policy(spec: RenderPolicySpec):
    torch.manual_seed(123)  # other weights than saved: the render must load them
    return TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])


def test_jsonl_render_logs_each_step_of_a_zero_policy(tmp_path):
    torch.save({}, tmp_path / "policy.pt")
    seen = {}

    def make_policy(spec):
        seen["spec"] = spec
        return lambda td: td.set("action", torch.zeros(1, device=spec.device))

    config = RenderConfig(
        ckpt=tmp_path / "policy.pt",
        policy=make_policy,
        env=_pendulum,
        max_steps=3,
        num_trajs=2,
        format="jsonl",
        out=tmp_path / "r.jsonl",
        auto_load_policy=False,
    )
    result = render_policy(config)
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "metadata" and lines[0]["num_trajs"] == 2
    steps = [line for line in lines[1:] if line["type"] == "step"]
    assert [(s["trajectory"], s["step"]) for s in steps] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert result.artifact_path == tmp_path / "r.jsonl"
    assert [t.batch_size[0] for t in result.trajectories] == [3, 3]
    rewards = result.trajectories[0]["next", "reward"].squeeze(-1).tolist()
    assert [s["reward"] for s in steps[:3]] == pytest.approx(rewards)
    assert seen["spec"].checkpoint_hash == checkpoint_hash(tmp_path / "policy.pt")
    assert result.metadata["checkpoint"]["sha256"] == seen["spec"].checkpoint_hash


@pytest.mark.parametrize("fmt", [None, "directory", "archive"])
def test_render_checkpoint_roundtrip_loads_the_weights(tmp_path, fmt):
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    model = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    path = save_render_checkpoint(
        tmp_path / "ckpt",
        model,
        env_metadata={"env_name": "Pendulum-v1"},
        frames=64,
        metrics={"reward": -3.0},
        format=fmt,
    )
    payload = load_checkpoint(path)
    assert payload["env_name"] == "Pendulum-v1" and payload["frames"] == 64
    assert payload["metrics"] == {"reward": -3.0}
    torch.testing.assert_close(infer_state_dict(payload)["module.weight"], net.weight)
    if fmt is not None:
        assert Checkpoint.is_checkpoint(path)
    # the render loads the saved weights into the factory's policy
    config = RenderConfig(
        ckpt=path,
        policy=_linear_policy,
        env=_pendulum,
        max_steps=4,
        format="jsonl",
        out=tmp_path / "r.jsonl",
    )
    traj = render_policy(config).trajectories[0]
    obs = traj["observation"]
    torch.testing.assert_close(traj["action"], obs @ net.weight.T + net.bias)


def test_gif_and_png_frames_from_a_pixel_env(tmp_path):
    torch.save({}, tmp_path / "p.pt")
    common = dict(
        ckpt=tmp_path / "p.pt",
        env=lambda spec: GymEnv("CartPole-v1", from_pixels=True),
        policy=lambda spec: lambda td: td.set("action", torch.tensor([1, 0])),
        max_steps=3,
        auto_load_policy=False,
    )
    gif = render_policy(RenderConfig(format="gif", out=tmp_path / "v.gif", **common))
    import imageio.v2 as imageio

    assert len(gif.frames[0]) == 4  # the reset and three steps
    frames = imageio.mimread(tmp_path / "v.gif")  # (repeated frames may be merged)
    np.testing.assert_array_equal(frames[0][..., :3], gif.frames[0][0].frames["default"])
    first = gif.frames[0][0].frames["default"]
    assert first.dtype == np.uint8 and first.shape[-1] == 3
    mp4 = render_policy(RenderConfig(format="mp4", out=tmp_path / "v.mp4", **common))
    assert len(imageio.mimread(mp4.artifact_path, memtest=False)) == 4
    png = render_policy(RenderConfig(format="png", out=tmp_path / "frames", **common))
    assert len(png.frame_paths) == 4 and all(p.is_file() for p in png.frame_paths)


def test_render_refuses_to_overwrite_and_needs_frames_for_video(tmp_path):
    torch.save({}, tmp_path / "p.pt")
    (tmp_path / "r.mp4").write_bytes(b"old")
    config = RenderConfig(
        ckpt=tmp_path / "p.pt",
        policy=lambda s: lambda td: td.set("action", torch.zeros(1)),
        env=_pendulum,
        max_steps=2,
        out=tmp_path / "r.mp4",
        auto_load_policy=False,
    )
    with pytest.raises(FileExistsError, match="overwrite=True"):
        render_policy(config)
    config.overwrite = True
    with pytest.raises(ValueError, match="needs frames"):
        render_policy(config)
    assert (tmp_path / "r.mp4").read_bytes() == b"old"


def test_render_without_weights_in_the_checkpoint_says_so(tmp_path):
    torch.save({"notes": "none"}, tmp_path / "p.pt")
    config = RenderConfig(
        ckpt=tmp_path / "p.pt",
        policy=_linear_policy,
        env=_pendulum,
        max_steps=2,
        format="jsonl",
        out=tmp_path / "r.jsonl",
    )
    with pytest.raises(ValueError, match="holds no policy weights"):
        render_policy(config)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"format": "ipynb"}, "format must be one of"),
        ({"num_trajs": 0}, "num_trajs must be an int >= 1"),
        ({"max_steps": 0}, "max_steps must be an int >= 1 or None"),
    ],
)
def test_render_config_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RenderConfig(ckpt="x.pt", policy=_linear_policy, env=_pendulum, **kwargs)


def test_missing_checkpoint():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint("/nonexistent/ckpt.pt")
