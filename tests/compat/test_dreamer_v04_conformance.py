"""TorchRL v0.4's Dreamer example script, call shapes: pixel envs in worker processes and
a ``TensorDictPrimer`` inside each copy of a batched env.

The script builds ``ParallelEnv(n, EnvCreator(make_env))`` over dm_control pixel envs
under ``MUJOCO_GL=egl`` (``EnvCreator`` renders one env in the parent to read its specs),
and ``make_env`` appends ``TensorDictPrimer(state=..., belief=...)`` to each copy.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PIXEL_WORKERS = textwrap.dedent(
    """
    import torch
    from torchrl_lite.envs import DMControlEnv, EnvCreator, ParallelEnv
    from torchrl_lite.workers import gl_started

    def make():
        return DMControlEnv("cartpole", "balance", from_pixels=True, pixels_only=True)

    if __name__ == "__main__":
        before = gl_started()
        creator = EnvCreator(make)  # renders one env here, as TorchRL's script does
        single = make()
        single.set_seed(0)
        expected = single.reset()["pixels"]
        env = ParallelEnv(2, creator)
        env.set_seed(0)
        pixels = env.reset()["pixels"]
        env.rand_step()
        print("RESULT", before, gl_started(), env.mp_start_method, tuple(pixels.shape),
              bool(torch.equal(pixels[0], expected)))
        env.close()
    """
)


@pytest.mark.slow  # ~40 s: three processes import torch and render (one spawned per worker)
@pytest.mark.dm_control
def test_parallel_pixel_envs_start_after_the_parent_rendered(tmp_path):
    pytest.importorskip("dm_control")
    script = tmp_path / "pixel_workers.py"
    script.write_text(_PIXEL_WORKERS)
    env = {**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "PYTHONPATH": str(ROOT)}
    try:
        out = subprocess.run(
            [sys.executable, str(script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            "ParallelEnv of pixel envs did not start within 240 s (forked after rendering?)"
        )
    if "MUJOCO_GL=egl" in out.stderr and "ImportError" in out.stderr:
        pytest.skip("EGL rendering is not available here")
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))
    # no driver before rendering; one after; so the workers are spawned, not forked
    assert line.split()[1:] == ["False", "True", "spawn", "(2,", "240,", "320,", "3)", "True"]
