"""How a training script with remote workers ends, run as a user runs it (its own Python
process and its own small Ray): at its normal end, after ``ray.shutdown()``, on Ctrl-C
(SIGINT to its process group, as a terminal sends it) and on an exception, never having
called ``close()``. Each must exit within a bound and leave no Ray process behind: every
process the script started carries a tag in its environment, and none may be left."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("ray", reason="the distributed tests need ray")
pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
START_S = 240  # Ray and two workers starting on a loaded 2-core machine
# from the script's last line (or the signal) to the process gone; the bug was forever, a
# Ctrl-C exit takes ~4 s alone and under 10 s on a loaded machine
EXIT_S = 60

SCRIPT = textwrap.dedent(
    """
    import gc, sys
    import cloudpickle, ray
    from tests.scheme import doubles
    from tests.scheme.conftest import start_ray
    from torchrl_lite import Learner
    from torchrl_lite.scheme import Scheme

    cloudpickle.register_pickle_by_value(doubles)
    start_ray(ray, address="local", num_cpus=2, include_dashboard=False,
              object_store_memory=100 * 1024**2)
    mode = sys.argv[1]
    scheme = Scheme(**doubles.factories(), col_remote_workers=2)
    learner = Learner(scheme, target_steps=10**9 if mode == "sigint" else 160)
    group = scheme.local.collection.group
    print("workers", *ray.get([group.call(i, "ping") for i in range(2)]), flush=True)
    while not learner.done():
        learner.step()
        if mode == "sigint" and learner.updates == 2:
            print("training", flush=True)
        if mode == "error" and learner.updates == 3:
            raise RuntimeError("failed on purpose mid-training")
    if mode == "ray_shutdown":
        ray.shutdown()
        del learner, scheme, group  # the finaliser runs now, Ray being down
        gc.collect()
        print("ray running again:", ray.is_initialized(), flush=True)
    print("end", flush=True)
    """
)


def _tagged(tag: str) -> list:
    """Processes whose environment holds ``tag`` (everything the script started)."""
    out = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.environ().get("TORCHRL_LITE_EXIT_TEST") == tag:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return [p for p in out if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _still_running(pids: list[int], within: float = 15.0) -> list[int]:
    """Those of ``pids`` still running after up to ``within`` seconds (Ray stops a dead
    driver's workers shortly after it exits, not at the same instant)."""
    deadline = time.monotonic() + within
    while (left := [p for p in pids if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _none_left(tag: str, within: float = 15.0) -> list:
    deadline = time.monotonic() + within
    while (left := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [f"{p.pid} {p.name()}" for p in left]


def _as_from_a_terminal() -> None:
    """In the child before it starts: Ctrl-C at its default, as a shell in a terminal
    leaves it. A test run started in the background of a non-interactive shell (``cmd &``,
    as CI runners and ``nohup`` do) inherits SIGINT ignored, and a Python started so
    ignores Ctrl-C: the script would then train on after the "Ctrl-C"."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(mode: str, tag: str, tmp_path) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TORCHRL_LITE_EXIT_TEST": tag, "PYTHONPATH": str(ROOT),
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, str(script), mode], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )  # fmt: skip


def _read_until(proc, word: str, lines: list) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(word):
            return
    pytest.fail(f"the script never printed {word!r}:\n{''.join(lines)[-3000:]}")


def _finish(proc, lines: list) -> tuple[int, str, float]:
    """Wait for the process (at most ``EXIT_S``); its code, its output, the seconds."""
    start = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=EXIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the script did not exit within {EXIT_S}s:\n{(''.join(lines) + out)[-3000:]}")
    return proc.returncode, "".join(lines) + out, time.monotonic() - start


def _worker_pids(lines: list) -> list[int]:
    return [int(pid) for pid in next(x for x in lines if x.startswith("workers")).split()[1:]]


@pytest.mark.parametrize("mode", ["end", "ray_shutdown"])
def test_script_exits_promptly_at_its_end(tmp_path, mode):
    """The seed's way of ending (no close), plain or after ``ray.shutdown()`` (then the
    Scheme dropped): its finaliser, at interpreter exit or when dropped, must neither
    start Ray again nor wait."""
    tag, lines = uuid.uuid4().hex, []
    proc = _start(mode, tag, tmp_path)
    try:
        _read_until(proc, "end", lines)
        code, out, _ = _finish(proc, lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 0, out[-3000:]
    assert "Exception ignored" not in out  # the finaliser raised nothing
    if mode == "ray_shutdown":  # freeing the Scheme did not start Ray again
        assert "ray running again: False" in out
    assert _still_running(_worker_pids(lines)) == []
    assert _none_left(tag) == []


def test_script_exits_on_ctrl_c_mid_training(tmp_path):
    tag, lines = uuid.uuid4().hex, []
    proc = _start("sigint", tag, tmp_path)
    try:
        _read_until(proc, "training", lines)
        workers = _worker_pids(lines)
        assert {p.pid for p in _tagged(tag)} >= set(workers)  # the tag reaches Ray's workers
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        code, out, _ = _finish(proc, lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code != 0 and "KeyboardInterrupt" in out, out[-3000:]
    assert _still_running(workers) == []
    assert _none_left(tag) == []


def test_script_exits_on_an_exception_mid_training(tmp_path):
    tag, lines = uuid.uuid4().hex, []
    proc = _start("error", tag, tmp_path)
    try:
        _read_until(proc, "workers", lines)
        code, out, _ = _finish_after_start(proc, lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 1 and "RuntimeError: failed on purpose mid-training" in out, out[-3000:]
    assert _still_running(_worker_pids(lines)) == []
    assert _none_left(tag) == []


def _finish_after_start(proc, lines):
    """``_finish`` with the training's own time allowed (the error comes a few steps in)."""
    try:
        proc.wait(timeout=START_S)
    except subprocess.TimeoutExpired:
        pass
    return _finish(proc, lines)
