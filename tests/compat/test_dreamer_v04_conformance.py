"""TorchRL v0.4's Dreamer example script, call shapes: pixel envs in worker processes and
a ``TensorDictPrimer`` inside each copy of a batched env.

The script builds ``ParallelEnv(n, EnvCreator(make_env))`` over dm_control pixel envs
under ``MUJOCO_GL=egl`` (``EnvCreator`` renders one env in the parent to read its specs),
and ``make_env`` appends ``TensorDictPrimer(state=..., belief=...)`` to each copy.
"""

import os
import signal
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
    # its own process group: workers stuck in the GL driver are killed with it on a timeout
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(
            "ParallelEnv of pixel envs did not start within 240 s (forked after rendering?)"
        )
    out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if "MUJOCO_GL=egl" in out.stderr and "ImportError" in out.stderr:
        pytest.skip("EGL rendering is not available here")
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))
    # no driver before rendering; one after; so the workers are spawned, not forked
    assert line.split()[1:] == ["False", "True", "spawn", "(2,", "240,", "320,", "3)", "True"]


def _make_primed_env():
    from torchrl_lite.data import Unbounded
    from torchrl_lite.envs import GymEnv, TensorDictPrimer

    # TorchRL v0.4's _make_env: the recurrent state is primed inside each copy
    env = GymEnv("Pendulum-v1")
    primer = TensorDictPrimer(
        random=False, default_value=0, state=Unbounded(shape=(3,)), belief=Unbounded(shape=(4,))
    )
    return env.append_transform(primer)


def _dreamer_like_policy():
    """Writes "state" at the root and the next "belief" (belief + 1) under "next", as the
    script's real-world actor does; the action depends on the observation and belief."""
    import torch
    from tensordict.nn import TensorDictModule, TensorDictSequential

    def act(obs, belief):
        return (obs[..., :1] * 0.5 + belief[..., :1] * 0.1).clamp(-2, 2), obs * 2

    def next_belief(belief):
        return belief + 1

    return TensorDictSequential(
        TensorDictModule(act, ["observation", "belief"], ["action", "state"]),
        TensorDictModule(next_belief, ["belief"], [("next", "belief")]),
    ), torch


@pytest.mark.parametrize("kind", ["SerialEnv", "ParallelEnv"])
def test_primer_inside_the_copies_carries_the_policy_state(kind):
    from torchrl_lite.envs import EnvCreator, ParallelEnv, SerialEnv, check_env_specs

    policy, torch = _dreamer_like_policy()
    cls = {"SerialEnv": SerialEnv, "ParallelEnv": ParallelEnv}[kind]
    env = cls(2, EnvCreator(_make_primed_env))
    assert set(env.full_state_spec.keys()) == {"state", "belief"}
    check_env_specs(env)
    reset = env.reset()
    assert (reset["state"] == 0).all() and (reset["belief"] == 0).all()
    assert reset["belief"].shape == (2, 4)
    env.set_seed(0)
    with torch.no_grad():
        data = env.rollout(5, policy, break_when_any_done=False)
    env.close()
    # reference: each copy alone, seeded as the batched env seeds it (seed + i)
    expected = []
    for i in range(2):
        single = _make_primed_env()
        single.set_seed(i)
        with torch.no_grad():
            expected.append(single.rollout(5, policy, break_when_any_done=False))
    expected = torch.stack(expected)
    for key in expected.keys(True, True):
        torch.testing.assert_close(data[key], expected[key], msg=f"{kind}: {key}")
    # the belief the policy wrote under "next" came back as the next step's input
    steps = torch.arange(5.0).view(1, 5, 1).expand(2, 5, 4)
    torch.testing.assert_close(data["belief"], steps)
    torch.testing.assert_close(data["state"], data["observation"] * 2)


def test_slice_sampler_compile_keyword_gives_the_same_samples():
    import torch
    from tensordict import TensorDict

    from torchrl_lite.data import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer

    def sample(**kwargs):
        # the script's sampler: SliceSampler(slice_len=, strict_length=False, traj_key=,
        # cache_values=True, compile=True)
        sampler = SliceSampler(
            slice_len=4, strict_length=False, traj_key="traj", cache_values=True, **kwargs
        )
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40), sampler=sampler, batch_size=8)
        rb.extend(TensorDict(traj=torch.arange(30) // 7, x=torch.arange(30.0), batch_size=[30]))
        torch.manual_seed(5)
        return rb.sample()["x"], sampler.compile

    plain, flag = sample()
    assert not flag
    for value in (True, {"mode": "reduce-overhead"}):
        compiled, flag = sample(compile=value)
        assert flag and torch.equal(compiled, plain)
    with pytest.raises(TypeError, match="compile must be a bool or a dict .* got str"):
        SliceSampler(slice_len=4, compile="yes")


def test_transformed_env_appends_a_plain_function():
    """The script appends a function (pixels to uint8) to its model-based env."""
    import torch

    from torchrl_lite.envs import GymEnv, TransformedEnv
    from torchrl_lite.envs.transforms import Compose

    def double(data):
        return data.set("doubled", data.get("observation") * 2)

    env = TransformedEnv(GymEnv("Pendulum-v1"))
    env.append_transform(double)
    env.insert_transform(0, lambda data: data)
    td = env.rollout(3)
    torch.testing.assert_close(td["next", "doubled"], td["next", "observation"] * 2)
    torch.testing.assert_close(td["doubled"], td["observation"] * 2)  # at reset too
    compose = Compose()
    compose.append(double)
    with pytest.raises(TypeError, match="append expects a Transform, got int"):
        compose.append(3)


def test_ndim2_storage_smaller_than_one_row_holds_one_row(tmp_path):
    """The script's CI budget with one env: a [1, 200] batch into LazyMemmapStorage(120,
    ndim=2); TorchRL allocates ceil(120 / 200) = 1 row, and each batch replaces it."""
    import torch
    from tensordict import TensorDict

    from torchrl_lite.data import LazyMemmapStorage, SliceSampler, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(120, scratch_dir=tmp_path, ndim=2),
        sampler=SliceSampler(slice_len=12, strict_length=False, traj_key="traj"),
        batch_size=24,
    )
    for start in (0.0, 1000.0):
        x = torch.arange(200.0).view(1, 200) + start
        rb.extend(TensorDict(x=x, traj=torch.zeros(1, 200, dtype=torch.long), batch_size=[1, 200]))
        assert len(rb) == 200
        steps = rb.sample()["x"].view(2, 12)
        assert (steps.diff(dim=1) == 1).all() and (steps >= start).all()
    with pytest.raises(ValueError, match="ndim must be at least 1"):
        LazyMemmapStorage(120, ndim=0)


def test_replay_buffer_writes_through_the_transform_inverse():
    """The script stores "pixels_int" only (ExcludeTransform(..., inverse=True) on the
    way in) and rebuilds float "pixels" from it at each sample."""
    import torch
    from tensordict import TensorDict

    from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl_lite.envs.transforms import Compose, ExcludeTransform, ToTensorImage

    seen = []

    def check_no_pixels(data):
        seen.append("pixels" in data.keys())
        return data

    transform = Compose(
        ExcludeTransform("pixels", ("next", "pixels"), inverse=True),
        check_no_pixels,
        ToTensorImage(in_keys=["pixels_int"], out_keys=["pixels"]),
    )
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), transform=transform, batch_size=3)
    ints = torch.randint(0, 256, (4, 5, 5, 3), dtype=torch.uint8)
    data = TensorDict(
        pixels=torch.ones(4, 3, 5, 5),
        pixels_int=ints,
        next=TensorDict(pixels=torch.ones(4, 3, 5, 5), batch_size=[4]),
        batch_size=[4],
    )
    rb.extend(data)
    rb.add(data[0])
    stored = rb.storage.get(torch.arange(5))
    assert "pixels" not in stored.keys() and ("next", "pixels") not in stored.keys(True)
    assert "pixels" in data.keys()  # the caller's data are not changed
    sample = rb.sample()
    assert seen == [False]
    expected = ints.permute(0, 3, 1, 2).float() / 255
    index = rb.sample(5)  # positions 0-3 hold data[0:4], position 4 data[0]
    assert sample["pixels"].shape == (3, 3, 5, 5)
    for row in index["pixels"]:
        assert any(torch.allclose(row, e) for e in expected)
