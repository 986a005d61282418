"""Helpers for worker processes: start method, factories, error forwarding, dead workers.

Used by the multiprocess collectors (and meant for every component that runs workers):

* ``start_method`` picks ``"fork"`` where it is safe (fast start-up), else ``"spawn"``.
* ``CloudPickled`` carries a factory (lambdas, closures) to a spawned worker.
* ``error_info`` turns a worker's exception into a picklable dict (type, message,
  traceback); ``remote_error`` rebuilds an exception in the parent with the worker's
  traceback in its message.
* ``death_message`` says how a worker died; ``parent_alive`` lets a worker notice that
  its parent is gone; ``stop_processes`` joins workers, terminating the ones that linger.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import time
import traceback

import torch

__all__ = [
    "CloudPickled",
    "RemoteKeyError",
    "death_message",
    "error_info",
    "parent_alive",
    "remote_error",
    "start_method",
    "stop_processes",
]


class RemoteKeyError(KeyError):
    """A worker's KeyError, printed as its message (KeyError would print it quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# exception types rebuilt as themselves in the parent (their constructor takes a message)
_REBUILT = {
    cls.__name__: cls
    for cls in (ValueError, TypeError, RuntimeError, NotImplementedError, IndexError)
}
_REBUILT["KeyError"] = RemoteKeyError


def start_method(method: str | None, owner: str) -> str:
    """The start method to use: ``method`` if given (checked), else ``"fork"`` where the
    platform has it and CUDA is not initialised in this process, else ``"spawn"``."""
    available = multiprocessing.get_all_start_methods()
    if method is None:
        cuda_started = torch.cuda.is_available() and torch.cuda.is_initialized()
        return "fork" if "fork" in available and not cuda_started else "spawn"
    if method not in available:
        raise ValueError(f"{owner}: mp_start_method must be one of {available}, got {method!r}")
    return method


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


def error_info(err: BaseException) -> dict:
    """A picklable description of ``err``: its type name, message and formatted traceback."""
    return {
        "type": type(err).__name__,
        "message": str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err),
        "traceback": "".join(traceback.format_exception(err)),
    }


def remote_error(info: dict, where: str, what: str) -> Exception:
    """The exception to raise in the parent for a worker's ``error_info``.

    Common built-in types (ValueError, TypeError, KeyError, ...) keep their type so that
    bad input reported by a worker reads as it would in one process; others become
    ``RuntimeError``. The message names the worker and holds its traceback.
    """
    cls = _REBUILT.get(info["type"], RuntimeError)
    return cls(
        f"{where} raised {info['type']}: {info['message']} (during {what}). The other "
        f"workers were shut down.\n\nWorker traceback:\n{info['traceback']}"
    )


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


def stop_processes(procs: list, conns: list, close_message, grace: float = 3.0) -> None:
    """Send ``close_message`` to each live worker (``send_bytes`` for bytes, else ``send``),
    join them, terminate (then kill) the ones still running after ``grace`` seconds, and
    close the pipes."""
    for conn, proc in zip(conns, procs):
        if proc.is_alive():
            try:
                if isinstance(close_message, bytes):
                    conn.send_bytes(close_message)
                else:
                    conn.send(close_message)
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
    for conn in conns:
        conn.close()
