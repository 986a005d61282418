"""The ParallelEnv worker process: a plain ``SerialEnv`` loop driven by one-byte commands.

Protocol on the worker's pipe (length-prefixed byte messages, no pickling per step):

* start: the worker builds its copies and replies ``OK + pickle([_EnvInfo, ...])``; the
  parent checks the specs and sends the worker's views of the shared-memory buffers
  (``conn.send``: torch passes shared tensors as file descriptors); the worker replies.
* ``STEP``: step with the actions in the shared input buffer, write the results into the
  shared step buffer, reply ``b""``.
* ``RESET``: reset the copies set in the shared ``"_reset"`` mask, write their first
  observations into the shared reset buffer, reply ``b""``.
* ``STEP_RESET``: ``STEP``, then copy the step's ``"done"`` into the ``"_reset"`` mask and
  ``RESET`` those copies (``ParallelEnv.step_and_maybe_reset``: one message, not two).
* ``SEED + pickle(seed)``: ``set_seed(seed)``, reply ``b""``.
* ``STEP_SOME + pickle([k, ...])`` and ``SEED_SOME + pickle([(k, seed), ...])``: step
  (or seed) only the worker's copies ``k`` (an indexed view of the env, ``env[1:]``).
* ``ATTR + pickle((name, call))``: per copy, read attribute ``name`` (``call`` None) or
  call it with ``call = (args, kwargs)``; reply ``OK + pickle([(kind, value), ...])``
  (kind ``"method"`` with value None when reading a method).
* ``CLOSE``: close the copies, reply ``b""`` and exit.

Any exception becomes ``ERROR + pickle(error_info(err))``. Factories, error descriptions,
the parent check and stopping come from ``torchrl_lite._mp``, the one worker-process layer
(the multiprocess collectors use it too); only the byte protocol is this module's. The worker
ignores SIGINT (the parent decides when to stop) and exits when its pipe reaches EOF or
its parent process goes away.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import pickle
import select
import signal
import struct

import torch

from torchrl_lite import _keys as K
from torchrl_lite._mp import CloudPickled, error_info, parent_alive, stop_processes
from torchrl_lite.envs import _batched_utils as U

STEP, RESET, STEP_RESET, SEED, CLOSE, ATTR = b"s", b"r", b"x", b"e", b"c", b"a"
STEP_SOME, SEED_SOME = b"p", b"d"
OK, ERROR = b"O", b"E"
_IDLE_S = 1.0  # how often an idle worker checks that its parent is alive
_RAW_IO = os.name == "posix" and hasattr(select, "poll")
_HEADER = struct.Struct("!i")  # multiprocessing.Connection's length prefix


class Channel:
    """One end of a worker pipe: byte messages in ``multiprocessing.Connection``'s format.

    On POSIX each message is one ``os.write``/``os.read`` on the pipe's file descriptor
    (a few times cheaper than ``Connection.send_bytes``/``recv_bytes``, and this runs
    twice per worker per step); elsewhere it falls back to the Connection methods.
    """

    def __init__(self, conn):
        self.conn = conn
        self.fd = conn.fileno() if _RAW_IO else None

    def send(self, payload: bytes) -> None:
        if self.fd is None:
            self.conn.send_bytes(payload)
            return
        data = _HEADER.pack(len(payload)) + payload
        while data:
            data = data[os.write(self.fd, data) :]

    def recv(self) -> bytes:
        if self.fd is None:
            return self.conn.recv_bytes()
        size = _HEADER.unpack(_read_exact(self.fd, 4))[0]
        return _read_exact(self.fd, size) if size else b""


def _read_exact(fd: int, size: int) -> bytes:
    data = os.read(fd, size)
    while len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            raise EOFError("the other end of the worker pipe is closed")
        data += more
    return data


class Poller:
    """Waits until some of the given channels have a message (or EOF) to read."""

    def __init__(self, channels: list[Channel]):
        self.channels = channels
        if _RAW_IO:
            self._poll = select.poll()
            self._by_fd = {}
            for i, channel in enumerate(channels):
                self._poll.register(channel.fd, select.POLLIN)
                self._by_fd[channel.fd] = i

    def ready(self, timeout: float) -> list[int]:
        """Indices of the channels that can be read, waiting up to ``timeout`` seconds."""
        if _RAW_IO:
            return [self._by_fd[fd] for fd, _event in self._poll.poll(int(timeout * 1000))]
        conns = [c.conn for c in self.channels]
        return [conns.index(c) for c in multiprocessing.connection.wait(conns, timeout)]


def error_reply(err: BaseException) -> bytes:
    return ERROR + pickle.dumps(error_info(err))


def worker_main(conn, factories: list, num_threads: int, parent_pid: int, inherited: list):
    """Entry point of a worker process (see the module docstring for the protocol)."""
    for other in inherited:  # parent ends of other workers' pipes, inherited through fork
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(num_threads)
    from torchrl_lite.envs.batched_envs import SerialEnv  # imports this module

    channel = Channel(conn)
    envs = []
    try:
        try:
            for factory in factories:
                envs.append(factory.load()() if isinstance(factory, CloudPickled) else factory())
            channel.send(OK + pickle.dumps([U.env_info(env) for env in envs]))
            views = conn.recv()
            if isinstance(views, list):  # buffers per copy: copies of different specs
                loop = _CopiesLoop(SerialEnv, envs, views)
            else:
                loop = _Loop(SerialEnv._from_envs(envs), views)
            channel.send(b"")
        except Exception as err:
            channel.send(error_reply(err))
            return
        _serve(channel, loop, parent_pid)
    except (OSError, EOFError):  # the parent is gone
        return
    finally:
        for env in envs:
            try:
                if not env.is_closed:
                    env.close()
            except Exception:
                pass


class _Loop:
    """The worker's ``SerialEnv`` bound to its views of the shared buffers.

    When the copies are plain GymWrappers (``serial._group``), their gymnasium results
    are written straight into numpy views of the shared buffers; otherwise each copy's
    ``_step``/``_reset`` leaves are copied into its rows.
    """

    def __init__(self, serial, views: dict):
        k = len(serial._envs)
        self.serial, self.group = serial, serial._group
        if self.group is not None:
            self.action = views["input"][K.ACTION]
            self.step_out = [views["step"][key].numpy() for key in serial._step_keys]
            self.reset_out = [views["reset"][key].numpy() for key in serial._reset_keys]
            self.mask_np = views["mask"].numpy()
            self.done_np = views["step"][K.DONE].numpy()
        self.rows = U.rows([views["input"][key] for key in serial._input_keys], k)
        self.step_rows = U.rows([views["step"][key] for key in serial._step_keys], k)
        self.reset_rows = U.rows([views["reset"][key] for key in serial._reset_keys], k)
        self.mask, self.done = views["mask"], views["step"].get(K.DONE)

    def step_some(self, copies: list[int]) -> None:
        """Step only ``copies`` (positions among the worker's copies), one by one."""
        rows, out = [self.rows[k] for k in copies], [self.step_rows[k] for k in copies]
        self.serial._step_into(rows, out, copies=copies)

    def step(self) -> None:
        if self.group is not None:
            self.group.step(self.action, self.step_out)
        else:
            self.serial._step_into(self.rows, self.step_rows)

    def reset(self) -> None:
        """Reset the copies set in the shared ``"_reset"`` mask."""
        if self.group is not None:
            self.group.reset(U.chosen(self.mask, len(self.serial._envs)), self.reset_out)
        else:
            self.serial._reset_into(self.mask, self.reset_rows)

    def step_reset(self) -> None:
        """Step, then reset the copies that are done (the mask is set to ``"done"``)."""
        self.step()
        if self.group is not None:  # numpy: a fraction of the cost of the torch calls
            self.mask_np[...] = self.done_np
            any_done = self.mask_np.any()
        else:
            self.mask.copy_(self.done)
            any_done = bool(self.mask.any())
        if any_done:
            self.reset()


class _CopiesLoop:
    """The worker loop of a ParallelEnv whose copies differ in specs (``_batched_lazy``):
    each copy has its own shared buffers (``[1, *env_batch, ...]``, from its own specs)
    and its own one-copy ``_Loop``; ``serial`` (all the worker's copies) seeds and closes."""

    def __init__(self, serial_cls, envs: list, views: list):
        self.serial = serial_cls._from_envs(envs)
        self.loops = [_Loop(serial_cls._from_envs([env]), v) for env, v in zip(envs, views)]

    def step(self) -> None:
        for loop in self.loops:
            loop.step()

    def reset(self) -> None:
        for loop in self.loops:
            loop.reset()

    def step_reset(self) -> None:
        for loop in self.loops:
            loop.step_reset()


def _serve(channel, loop: _Loop, parent_pid: int) -> None:
    poller = Poller([channel])
    while True:
        while not poller.ready(_IDLE_S):
            if not parent_alive(parent_pid):
                return
        message = channel.recv()
        command = message[:1]
        try:
            if command == STEP:
                loop.step()
            elif command == STEP_RESET:
                loop.step_reset()
            elif command == RESET:
                loop.reset()
            elif command == SEED:
                loop.serial.set_seed(pickle.loads(message[1:]))
            elif command == STEP_SOME:
                loop.step_some(pickle.loads(message[1:]))
            elif command == SEED_SOME:
                for k, seed in pickle.loads(message[1:]):
                    loop.serial._envs[k].set_seed(seed)
            elif command == ATTR:
                channel.send(OK + _attr(loop.serial._envs, message[1:]))
                continue
            elif command == CLOSE:
                loop.serial.close()
                channel.send(b"")
                return
            else:
                raise ValueError(f"unknown command {message!r}")
        except Exception as err:
            channel.send(error_reply(err))
            continue
        channel.send(b"")


def _attr(envs: list, payload: bytes) -> bytes:
    """Per copy, ``(kind, value)`` of an attribute read or method call, pickled (see
    ``ATTR``); a failure (a missing attribute, a raising method, a value that does not
    pickle) is ``[("error", info)]``: the copies stay usable."""
    name, call = pickle.loads(payload)
    try:
        out = []
        for env in envs:
            value = getattr(env, name)
            if call is not None:
                out.append(("value", value(*call[0], **call[1])))
            elif callable(value):
                out.append(("method", None))
            else:
                out.append(("value", value))
        return pickle.dumps(out)
    except Exception as err:
        return pickle.dumps([("error", pickle.loads(error_reply(err)[1:]))])


def stop_workers(procs: list, conns: list, grace: float) -> None:
    """Ask each worker to close, join them, terminate (then kill) the ones that linger."""
    stop_processes(procs, conns, CLOSE, grace)
