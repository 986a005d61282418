"""The one wire protocol between a parent and its workers, and its pipe implementation.

A message is one frame on a stream (``multiprocessing.Connection``'s format: a 4-byte
length, then the bytes): a one-byte **tag** (the command, or the kind of reply), then,
if the message carries one, its **payload**, pickled. A channel built with
``share_tensors=True`` (or a ``send(..., share_tensors=True)``) pickles with
``ForkingPickler``, as ``Connection.send`` does: tensors in shared memory travel as file
descriptors, the others are moved to shared memory; otherwise tensors travel by value.
A command without payload is a single byte, and the reply :data:`OK` without payload
is the empty frame (one read of the length, nothing after it): the per-step commands of
a ParallelEnv (``STEP``, ``RESET``) cost one small write and read each way and no
pickling.

The reply to a failed command is the tag :data:`ERROR` with an
:class:`~torchrl_lite.workers.errors.ErrorReply` (type, message, worker traceback).

Every component that runs workers speaks this protocol through :class:`Channel`:
ParallelEnv's workers (``envs/batched/worker.py``), the multiprocess collectors
(``collectors/_worker.py``) and the same-node channel of the Ray collection workers
(``collectors/distributed/channel.py``, which adds shared-memory segments for the data:
``workers/shm.py``). Each defines its own tags.

Example (both ends in one process):
    >>> import multiprocessing
    >>> a, b = multiprocessing.Pipe()
    >>> parent, worker = PipeChannel(a), PipeChannel(b)
    >>> parent.send(b"s", {"seed": 3})
    >>> worker.recv()
    (b's', {'seed': 3})
    >>> worker.send_error(ValueError("bad seed"))
    >>> tag, reply = parent.recv()
    >>> tag == ERROR, reply.type, reply.message
    (True, 'ValueError', 'bad seed')
"""

from __future__ import annotations

import multiprocessing.connection
import os
import pickle
import select
import struct
from multiprocessing.reduction import ForkingPickler, recv_handle, send_handle
from typing import Any, Protocol

from torchrl_lite.workers.errors import ErrorReply

__all__ = ["ERROR", "OK", "Channel", "PipeChannel", "Poller"]

OK = b"O"
"""The tag of a reply without payload (the command succeeded)."""
ERROR = b"E"
"""The tag of a reply holding an :class:`~torchrl_lite.workers.errors.ErrorReply`."""
_NOTHING = object()
_RAW_IO = os.name == "posix" and hasattr(select, "poll")
_HEADER = struct.Struct("!i")  # multiprocessing.Connection's length prefix


class Channel(Protocol):
    """One end of a worker channel: tagged messages both ways (see the module docstring)."""

    def send(self, tag: bytes, payload: Any = ...) -> None:
        """Send the one-byte ``tag`` and, if given, ``payload``."""

    def send_error(self, err: BaseException) -> None:
        """Reply :data:`ERROR` with ``err``'s :class:`ErrorReply`."""

    def recv(self) -> tuple[bytes, Any]:
        """The next message: ``(tag, payload)``, payload None when it has none."""

    def poll(self, timeout: float) -> bool:
        """True once a message (or EOF) can be read, waiting up to ``timeout`` seconds."""

    def close(self) -> None:
        """Close this end (the other end reads EOF)."""


class PipeChannel:
    """A :class:`Channel` over a ``multiprocessing`` Connection (a pipe or a Unix socket).

    Args:
        conn: this end's Connection.
        share_tensors: pickle payloads with ``ForkingPickler`` (see the module docstring).

    On POSIX each message is one ``os.write``/``os.read`` on the connection's file
    descriptor (a few times cheaper than ``Connection.send_bytes``/``recv_bytes``; a
    ParallelEnv does this twice per worker per step); elsewhere the Connection methods.
    """

    def __init__(self, conn, *, share_tensors: bool = False):
        self.conn = conn
        self.fd = conn.fileno() if _RAW_IO else None
        self.share_tensors = share_tensors

    def send(self, tag: bytes, payload: Any = _NOTHING, *, share_tensors: bool | None = None):
        if payload is _NOTHING:
            data = b"" if tag == OK else tag
        elif self.share_tensors if share_tensors is None else share_tensors:
            data = tag + ForkingPickler.dumps(payload)
        else:
            data = tag + pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        if self.fd is None:
            self.conn.send_bytes(data)
            return
        data = _HEADER.pack(len(data)) + data
        while data:
            data = data[os.write(self.fd, data) :]

    def send_error(self, err: BaseException) -> None:
        self.send(ERROR, ErrorReply.of(err))

    def recv(self) -> tuple[bytes, Any]:
        if self.fd is None:
            data = self.conn.recv_bytes()
        else:
            size = _HEADER.unpack(_read_exact(self.fd, 4))[0]
            if not size:
                return OK, None
            data = _read_exact(self.fd, size)
        if not data:
            return OK, None
        return data[:1], (pickle.loads(data[1:]) if len(data) > 1 else None)

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def send_fd(self, fd: int) -> None:
        """Pass the file descriptor ``fd`` to the other end (Unix sockets only)."""
        send_handle(self.conn, fd, None)

    def recv_fd(self) -> int:
        """A file descriptor passed with :meth:`send_fd`."""
        return recv_handle(self.conn)

    def fileno(self) -> int:
        return self.conn.fileno()

    def close(self) -> None:
        self.conn.close()


def _read_exact(fd: int, size: int) -> bytes:
    data = os.read(fd, size)
    if not data and size:
        raise EOFError("the other end of the worker channel is closed")
    while len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            raise EOFError("the other end of the worker channel is closed")
        data += more
    return data


class Poller:
    """Waits until some of the given channels have a message (or EOF) to read."""

    def __init__(self, channels: list[PipeChannel]):
        self.channels = channels
        if _RAW_IO:
            self._poll = select.poll()
            self._by_fd = {}
            for i, channel in enumerate(channels):
                self._poll.register(channel.fd, select.POLLIN)
                self._by_fd[channel.fd] = i

    def ready(self, timeout: float | None) -> list[int]:
        """Indices of the channels that can be read, waiting up to ``timeout`` seconds
        (None: until one can)."""
        if _RAW_IO:
            wait_ms = None if timeout is None else int(timeout * 1000)
            return [self._by_fd[fd] for fd, _event in self._poll.poll(wait_ms)]
        conns = [c.conn for c in self.channels]
        return [conns.index(c) for c in multiprocessing.connection.wait(conns, timeout)]
