"""Clean output: headless renders and videos print nothing a user cannot act on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = str(Path(__file__).resolve().parents[2])


def test_headless_pixel_render_prints_no_sdl_noise():
    env = {k: v for k, v in os.environ.items() if k not in ("SDL_VIDEODRIVER", "DISPLAY")}
    env.pop("XDG_RUNTIME_DIR", None)
    env["PYTHONPATH"] = REPO
    script = (
        "from torchrl_lite.envs import GymEnv\n"
        "env = GymEnv('CartPole-v1', from_pixels=True, pixels_only=False)\n"
        "print(tuple(env.rollout(2)['pixels'].shape))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 400, 600, 3)"
    assert "XDG_RUNTIME_DIR" not in done.stderr and done.stderr.strip() == "", done.stderr


def test_user_sdl_driver_is_left_alone(monkeypatch):
    from torchrl_lite.envs.libs._headless import use_offscreen_sdl

    monkeypatch.setenv("SDL_VIDEODRIVER", "x11")
    use_offscreen_sdl()
    assert os.environ["SDL_VIDEODRIVER"] == "x11"
    monkeypatch.delenv("SDL_VIDEODRIVER")
    monkeypatch.setenv("DISPLAY", ":0")
    use_offscreen_sdl()
    assert "SDL_VIDEODRIVER" not in os.environ


def read_video(path) -> np.ndarray:
    iio = pytest.importorskip("imageio.v3")
    return iio.imread(path, plugin="FFMPEG")


def test_cli_video_is_padded_not_rescaled_and_silent(tmp_path, capfd):
    pytest.importorskip("imageio_ffmpeg")
    import torch

    from torchrl_lite.record._video_sink import VideoSink

    sink = VideoSink(tmp_path / "v.mp4")  # what `eval --video` streams the frames through
    for _ in range(3):
        sink._write(torch.full((400, 600, 3), 200, dtype=torch.uint8))
    sink.finish()
    err = capfd.readouterr().err
    assert "macro_block_size" not in err and "resizing" not in err, err
    video = read_video(tmp_path / "v.mp4")
    assert video.shape[1:] == (400, 608, 3)  # 600 padded to 38 x 16, not rescaled
    assert abs(float(video[:, :, :600].mean()) - 200) < 3  # the picture is untouched


def test_pyproject_license_is_an_spdx_string():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python >= 3.11")
    meta = tomllib.loads((Path(REPO) / "pyproject.toml").read_text())["project"]
    assert isinstance(meta["license"], str) and meta["license"] == "MIT"


def test_headless_dm_control_prints_no_glfw_noise():
    pytest.importorskip("dm_control")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM")
    }
    env["PYTHONPATH"] = REPO
    script = (
        "from torchrl_lite.envs.libs.dm_control import DMControlEnv\n"
        "print(tuple(DMControlEnv('cartpole', 'swingup').rollout(2).shape))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2,)"
    assert "DISPLAY" not in done.stderr and done.stderr.strip() == "", done.stderr


@pytest.mark.parametrize("wrap", [False, True])
def test_sigterm_stops_a_process_rendering_cartpole(wrap):
    # pygame's SDL turns SIGTERM into a quit event nobody reads: `kill PID` left pixel runs going
    env = {k: v for k, v in os.environ.items() if k != "SDL_NO_SIGNAL_HANDLERS"}
    env["PYTHONPATH"] = REPO
    make = (
        "GymWrapper(gymnasium.make('CartPole-v1', render_mode='rgb_array'), from_pixels=True)"
        if wrap
        else "GymEnv('CartPole-v1', from_pixels=True)"
    )
    script = (
        "import time, gymnasium\n"
        "from torchrl_lite.envs import GymEnv, GymWrapper\n"
        f"env = {make}\n"
        "env.rollout(2)\n"
        "print('rendered', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "rendered"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
