"""Worker process life cycle: start method, factories, dead workers, stopping.

* ``start_method`` picks ``"fork"`` where it is safe (fast start-up), else ``"spawn"``
  (CUDA or an OpenGL driver started in this process: ``gl_started``).
* ``CloudPickled`` carries a factory (lambdas, closures) to a spawned worker.
* ``start_worker`` starts one daemon worker process with a channel to it.
* ``death_message`` says how a worker died; ``parent_alive`` lets a worker notice that
  its parent is gone; ``stop_processes`` asks workers to close over their channels, joins
  them and terminates the ones that linger.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import time
import warnings

import torch

__all__ = [
    "CloudPickled",
    "death_message",
    "gl_started",
    "parent_alive",
    "start_method",
    "start_worker",
    "stop_processes",
    "unguarded_main",
]


def start_method(method: str | None, owner: str) -> str:
    """The start method to use: ``method`` if given (checked), else ``"fork"`` where the
    platform has it and neither CUDA nor an OpenGL driver (``gl_started``) has started
    in this process, else ``"spawn"``."""
    available = multiprocessing.get_all_start_methods()
    if method is None:
        cuda_started = torch.cuda.is_available() and torch.cuda.is_initialized()
        if "fork" not in available or cuda_started:
            return "spawn"
        if not gl_started():
            return "fork"
        if unguarded_main():  # a spawned child would run the script again
            warnings.warn(
                f"{owner}: an OpenGL driver has started in this process, and the workers "
                'are built by a script\'s top-level code (no `if __name__ == "__main__":` '
                "guard), which a spawned worker would run again: they are forked. A forked "
                "worker that renders with OpenGL waits forever; put the script's code under "
                "the guard to have them spawned.",
                UserWarning,
                stacklevel=3,
            )
            return "fork"
        return "spawn"
    if method not in available:
        raise ValueError(f"{owner}: mp_start_method must be one of {available}, got {method!r}")
    return method


# Mesa names its driver threads (llvmpipe's rasterizers, the shader-cache queue
# "<process>:disk$0"); NVIDIA's GL core libraries are loaded when a display starts.
_GL_THREADS = ("llvmpipe", ":disk$", ":gdrv")
_GL_LIBRARIES = ("libnvidia-eglcore", "libnvidia-glcore")


def gl_started() -> bool:
    """Whether an OpenGL driver has started in this process (a MuJoCo/dm_control env
    rendered pixels, under ``MUJOCO_GL=egl``, ``osmesa`` or ``glfw``).

    Such a driver keeps threads and locks that a forked child inherits without the
    threads: the child's first rendering context waits for them forever (a
    ``ParallelEnv`` of pixel envs that never reports ready), so workers are spawned.
    Linux only (``/proc``); False elsewhere.
    """
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in threads:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        if any(mark in name for mark in _GL_THREADS):
            return True
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return False
    return any(lib in maps for lib in _GL_LIBRARIES)


def unguarded_main() -> bool:
    """Whether the caller runs inside a script's top-level code outside an ``if __name__ ==
    "__main__":`` block: a ``spawn`` child imports the script again (as ``__mp_main__``)
    and would run that code again, so such workers can only be forked. False in a
    notebook or an interactive session (no script file) and under ``python -m``."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return False
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)
    ):
        frame = frame.f_back
    if frame is None:
        return False  # not called from the script's top-level code
    return not _in_main_guard(path, frame.f_lineno)


def _in_main_guard(path: str, line: int) -> bool:
    import ast

    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return True  # unreadable: assume the usual guarded script
    for node in tree.body:
        test = getattr(node, "test", None)
        if (
            isinstance(node, ast.If)
            and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and node.lineno <= line <= node.end_lineno
        ):
            return True
    return False


class CloudPickled:
    """An object sent to a spawned worker with cloudpickle (lambdas and closures work).

    Example:
        >>> CloudPickled(lambda: 3).load()()
        3
    """

    def __init__(self, obj):
        import cloudpickle

        self.payload = cloudpickle.dumps(obj)

    def load(self):
        return pickle.loads(self.payload)


def start_worker(
    ctx, target, args: tuple, name: str, channels: list, share_tensors: bool, daemon: bool
):
    """Start a process running ``target(conn, *args, parent_pid, inherited)``; return it
    and this side's :class:`PipeChannel` to it. A daemon worker stops with this process
    but cannot start processes of its own.

    ``channels`` are the channels to the workers started before: a forked worker inherits
    their parent ends and closes them (``inherited``), so that each worker reads EOF as
    soon as the parent goes away.
    """
    from torchrl_lite.workers.channel import PipeChannel

    parent_conn, child_conn = ctx.Pipe(duplex=True)
    forked = ctx.get_start_method() == "fork"
    inherited = [c.conn for c in channels] if forked else []
    proc = ctx.Process(
        target=target, args=(child_conn, *args, os.getpid(), inherited), name=name, daemon=daemon
    )
    proc.start()
    child_conn.close()
    return proc, PipeChannel(parent_conn, share_tensors=share_tensors)


def death_message(proc, where: str, what: str) -> str:
    """``"<where> was killed by signal SIGKILL during <what>. ..."`` for a dead worker."""
    proc.join(timeout=1.0)
    code = proc.exitcode
    if code is None:
        how = "closed its pipe"
    elif code < 0:
        try:
            how = f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return f"{where} {how} during {what}. The other workers were shut down."


def parent_alive(parent_pid: int) -> bool:
    """False once the process that started this worker is gone (the worker is orphaned)."""
    return os.getppid() == parent_pid


def stop_processes(procs: list, channels: list, close_tag: bytes, grace: float = 3.0) -> None:
    """Send the command ``close_tag`` over each live worker's channel, join the workers,
    terminate (then kill) the ones still running after ``grace`` seconds, and close the
    channels."""
    for channel, proc in zip(channels, procs):
        if proc.is_alive():
            try:
                channel.send(close_tag)
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=1.0)
    for channel in channels:
        channel.close()
