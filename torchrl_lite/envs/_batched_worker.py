"""The ParallelEnv worker process: a plain ``SerialEnv`` loop driven by one-byte commands.

Protocol on the worker's pipe (bytes, no pickling on the hot path):

* start: the worker builds its copies and replies ``OK + pickle([_EnvInfo, ...])``; the
  parent checks the specs and sends the worker's views of the shared-memory buffers
  (``conn.send``: torch passes shared tensors as file descriptors); the worker replies.
* ``STEP``: step with the actions in the shared input buffer, write the results into the
  shared step buffer, reply ``b""``.
* ``RESET``: reset the copies set in the shared ``"_reset"`` mask, write their first
  observations into the shared reset buffer, reply ``b""``.
* ``SEED + pickle(seed)``: ``set_seed(seed)``, reply ``b""``.
* ``CLOSE``: close the copies, reply ``b""`` and exit.

Any exception becomes ``ERROR + pickle({"type", "message", "traceback"})``. The worker
ignores SIGINT (the parent decides when to stop) and exits when its pipe reaches EOF or
its parent process goes away.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback

import torch

STEP, RESET, SEED, CLOSE = b"s", b"r", b"e", b"c"
OK, ERROR = b"O", b"E"
_IDLE_S = 1.0  # how often an idle worker checks that its parent is alive


class CloudPickled:
    """A factory sent to a spawned worker with cloudpickle (lambdas and closures work)."""

    def __init__(self, fn):
        import cloudpickle

        self.payload = cloudpickle.dumps(fn)

    def load(self):
        return pickle.loads(self.payload)


def _error_reply(err: BaseException) -> bytes:
    info = {
        "type": type(err).__name__,
        "message": str(err),
        "traceback": "".join(traceback.format_exception(err)),
    }
    return ERROR + pickle.dumps(info)


def _next_message(conn, parent_pid: int) -> bytes | None:
    """The next command, or None once the parent is gone."""
    try:
        while not conn.poll(_IDLE_S):
            if os.getppid() != parent_pid:
                return None
        return conn.recv_bytes()
    except (EOFError, OSError):
        return None


def worker_main(conn, factories: list, num_threads: int, parent_pid: int, inherited: list):
    """Entry point of a worker process (see the module docstring for the protocol)."""
    for other in inherited:  # pipe ends of other workers, inherited through fork
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(num_threads)
    from torchrl_lite.envs.batched_envs import SerialEnv, _env_info

    envs, serial = [], None
    try:
        try:
            for factory in factories:
                envs.append(factory.load()() if isinstance(factory, CloudPickled) else factory())
            conn.send_bytes(OK + pickle.dumps([_env_info(env) for env in envs]))
            views = conn.recv()
            serial = SerialEnv._from_envs(envs)
            inputs = [views["input"][key] for key in serial._input_keys]
            step_out = [views["step"][key] for key in serial._step_keys]
            reset_out = [views["reset"][key] for key in serial._reset_keys]
            mask = views["mask"]
            conn.send_bytes(b"")
        except Exception as err:
            conn.send_bytes(_error_reply(err))
            return
        while True:
            message = _next_message(conn, parent_pid)
            if message is None:
                return
            command = message[:1]
            try:
                if command == STEP:
                    serial._step_into(inputs, step_out)
                elif command == RESET:
                    serial._reset_into(mask, reset_out)
                elif command == SEED:
                    serial.set_seed(pickle.loads(message[1:]))
                elif command == CLOSE:
                    serial.close()
                    conn.send_bytes(b"")
                    return
                else:
                    raise ValueError(f"unknown command {message!r}")
                conn.send_bytes(b"")
            except (BrokenPipeError, ConnectionResetError):
                return
            except Exception as err:
                conn.send_bytes(_error_reply(err))
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return
    finally:
        for env in envs:
            try:
                if not env.is_closed:
                    env.close()
            except Exception:
                pass
