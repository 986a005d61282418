"""A direct channel between a driver and a ``RolloutWorker`` on the same node.

A Ray actor call costs 1.5-2 ms on a small machine, more than everything else a batch
needs. Once a worker is started (by Ray: placement, start-up, restarts and cross-node
workers stay Ray's) and found to run on the driver's node, ``collect`` goes through this
channel instead of a Ray call:

* commands and replies: the workers' one protocol (``workers/channel.py``) on a Unix
  socket (``multiprocessing.connection``, an abstract-namespace address with an
  authentication key handed over through Ray), served by a thread inside the actor. The
  driver sends ``COLLECT (version, min_fraction, weights)``; the worker answers
  ``COLLECT ("shm", meta, layout, nbytes, fresh)`` (or ``("obj", meta, batch)`` for a
  batch that does not pack) or an ``ERROR`` reply.
* data: two shared-memory segments per worker (``workers/shm.py``: anonymous ``memfd``
  files whose descriptors travel over the socket).
  The driver writes new weights into the worker's weights segment (only when the worker
  does not hold that version, as on the Ray path; one segment per worker, so a worker
  still reading version v is never overwritten by v + 1 meant for another); the worker
  packs its batch into its batch segment with ``transport.pack_into``. A segment too small
  for a message is replaced by a bigger one (``fresh``: its descriptor follows the
  message). The batch layout (keys, shapes, dtypes) is sent only when it changes.
* the driver copies the batch out of the segment before it returns it
  (``transport.unpack_from``): the worker overwrites the segment with its next batch,
  so handing out a view would change a batch the caller still holds.

Faults read as on the Ray path: a worker that dies closes its end of the socket, so the
pending call ends at once with ``ChannelClosedError`` (``WorkerGroup.fail`` restarts the
worker, which gets a new channel and the current weights); an exception inside ``collect``
comes back as ``workers.RemoteError`` with the worker's traceback (its ``info``); a worker that hangs is
caught by the caller's timeout. Closing the driver's end ends the actor's thread.

Example (both ends in one process; the worker side normally runs inside a Ray actor):
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl_lite.collectors.distributed.transport import pack
    >>> def collect(weights, version, min_fraction):
    ...     batch = TensorDict({"x": torch.full((4, 1), float(weights["w"]))}, [4])
    ...     return batch, {"version": version}
    >>> server = ChannelServer(collect)
    >>> channel = CollectChannel(server.address, server.authkey, "worker 0")
    >>> call = channel.submit(pack({"w": torch.tensor(2.0)}), version=1)
    >>> batch, meta = call.result()
    >>> batch["x"].sum().item(), meta["version"]
    (8.0, 1)
    >>> channel.close()
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from multiprocessing.connection import Client, Listener
from multiprocessing.connection import wait as wait_connections

import numpy as np

from torchrl_lite.collectors.distributed.transport import (
    Packed,
    pack_into,
    unpack_from,
)
from torchrl_lite.workers.channel import ERROR, PipeChannel
from torchrl_lite.workers.errors import RemoteError
from torchrl_lite.workers.shm import SegmentReader, SegmentWriter, shm_supported

__all__ = [
    "CHANNEL_MODES",
    "ChannelCall",
    "ChannelClosedError",
    "ChannelServer",
    "CollectChannel",
    "channel_supported",
    "check_channel",
    "wait_calls",
]

CHANNEL_MODES = ("auto", "ray")
COLLECT = b"c"  # the one command (and the tag of its reply)


def channel_supported() -> bool:
    """True where the channel works: Linux (``memfd_create``, abstract Unix sockets)."""
    return shm_supported()


def check_channel(option: str, value) -> str:
    """``value`` if it is a channel mode, else a ValueError naming it and the valid ones.

    Example:
        >>> check_channel("channel", "shm")
        Traceback (most recent call last):
        ...
        ValueError: channel='shm' is not a channel mode; valid: ['auto', 'ray'] ('auto': a shared-memory channel to the workers on the driver's node, Ray calls to the others; 'ray': Ray calls only).
    """
    if value not in CHANNEL_MODES:
        raise ValueError(
            f"{option}={value!r} is not a channel mode; valid: {list(CHANNEL_MODES)} ('auto': "
            f"a shared-memory channel to the workers on the driver's node, Ray calls to the "
            f"others; 'ray': Ray calls only)."
        )
    return value


class ChannelClosedError(ConnectionError):
    """The worker's end of the channel closed: its process died (or was killed)."""


def _write_packed(obj, writer: SegmentWriter):
    """``("shm", layout, nbytes, fresh)`` after writing ``obj`` (a ``Packed``, or anything
    ``transport.pack_into`` packs) into ``writer``'s segment, or ``("obj", obj)`` for what
    cannot be packed (it then travels pickled in the message)."""
    if type(obj) is Packed:
        data = np.frombuffer(obj.buffer, dtype=np.uint8)
        writer.reserve(len(data))[: len(data)] = data
        return ("shm", obj.layout, len(data), writer.fresh)
    layout, nbytes = pack_into(obj, writer.reserve)
    if layout is None:
        return ("obj", obj)
    return ("shm", layout, nbytes, writer.fresh)


class ChannelServer:
    """The worker's end: listens on a fresh abstract Unix address, accepts the driver's
    connection, and answers each command with ``collect(weights, version,
    min_fraction) -> (batch, meta)`` from a daemon thread (see the module docstring).

    ``address`` and ``authkey`` are what the driver's ``CollectChannel`` needs (sent through Ray).
    """

    def __init__(self, collect):
        self.authkey = secrets.token_bytes(16)
        self.address = f"\0torchrl_lite-{os.getpid()}-{secrets.token_hex(8)}"
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self.authkey)
        self._thread = threading.Thread(
            target=self._serve, args=(collect,), name="torchrl_lite-channel", daemon=True
        )
        self._thread.start()

    def _serve(self, collect) -> None:
        try:
            conn = self._listener.accept()
        except Exception:  # the driver never connected (or failed to authenticate)
            return
        finally:
            self._listener.close()
        channel = PipeChannel(conn)
        weights, batches = SegmentReader(), SegmentWriter()
        layout_sent = None
        try:
            while True:
                try:
                    _tag, (version, min_fraction, sent) = channel.recv()
                    if sent is not None and sent[0] == "shm" and sent[3]:
                        weights.attach(channel.recv_fd())
                except (EOFError, OSError):  # the driver closed the channel (or is gone)
                    return
                try:
                    if sent is None:
                        new = None
                    elif sent[0] == "shm":
                        new = unpack_from(sent[1], weights.segment.array, sent[2])
                    else:
                        new = sent[1]
                    batch, meta = collect(new, version, min_fraction)
                    out = _write_packed(batch, batches)
                except Exception as err:
                    channel.send_error(err)
                    continue
                if out[0] == "shm":
                    layout = None if out[1] == layout_sent else out[1]
                    layout_sent = out[1]
                    channel.send(COLLECT, ("shm", meta, layout, out[2], out[3]))
                    batches.send_fd_if_fresh(channel)
                else:
                    channel.send(COLLECT, ("obj", meta, out[1]))
        finally:
            channel.close()
            weights.close()
            batches.close()


class CollectChannel:
    """The driver's end of one worker's channel (see the module docstring).

    Args:
        address, authkey: from the worker's ``ChannelServer``.
        label: the worker's name in error messages (``"collection worker 1"``).
    """

    def __init__(self, address: str, authkey: bytes, label: str):
        self.label = label
        self.conn = Client(address, family="AF_UNIX", authkey=authkey)
        self.channel = PipeChannel(self.conn)
        self._weights, self._batches = SegmentWriter(), SegmentReader()
        self._layout = None
        self.pending: ChannelCall | None = None

    def submit(self, weights=None, version: int | None = None, min_fraction: float = 1.0):
        """Start ``collect`` on the worker (``weights``: a ``Packed``, or any weights object,
        or None when it holds them already); returns the ``ChannelCall``."""
        if self.pending is not None:
            raise RuntimeError(f"{self.label} already has a collect in progress.")
        call = self.pending = ChannelCall(self)
        try:
            sent = None if weights is None else _write_packed(weights, self._weights)
            self.channel.send(COLLECT, (version, float(min_fraction), sent))
            self._weights.send_fd_if_fresh(self.channel)
        except OSError as err:
            call.error = self._closed(err)
        return call

    def _closed(self, err=None) -> ChannelClosedError:
        why = f" ({type(err).__name__}: {err})" if err is not None and str(err) else ""
        return ChannelClosedError(
            f"{self.label}'s channel closed{why}: its process died (killed, or out of memory)"
        )

    def receive(self):
        """The pending call's ``(batch, meta)`` (blocks until the worker answers)."""
        try:
            tag, reply = self.channel.recv()
            if tag != ERROR and reply[0] == "shm" and reply[4]:
                self._batches.attach(self.channel.recv_fd())
        except (EOFError, OSError) as err:
            raise self._closed(err) from None
        if tag == ERROR:
            raise RemoteError(reply)
        if reply[0] == "obj":
            return reply[2], reply[1]
        _, meta, layout, nbytes, _fresh = reply
        if layout is not None:
            self._layout = layout
        return unpack_from(self._layout, self._batches.segment.array, nbytes), meta

    def close(self) -> None:
        """Close the driver's end (the worker's thread ends) and unmap the segments."""
        self.pending = None
        with contextlib.suppress(OSError):  # already closed by a dead worker
            self.conn.close()
        self._weights.close()
        self._batches.close()


class ChannelCall:
    """A ``collect`` in progress on a channel; ``ready()`` once it has answered (or its
    worker died), ``result()`` its ``(batch, meta)`` or the error."""

    __slots__ = ("channel", "error", "_result")

    def __init__(self, channel: CollectChannel):
        self.channel, self.error, self._result = channel, None, None

    def ready(self) -> bool:
        if self.error is not None or self._result is not None:
            return True
        try:
            return self.channel.conn.poll(0)
        except (OSError, ValueError):  # closed: result() says so
            return True

    def result(self):
        if self._result is None and self.error is None:
            try:
                self._result = self.channel.receive()
            except Exception as err:
                self.error = err
            finally:
                if self.channel.pending is self:
                    self.channel.pending = None
        if self.error is not None:
            raise self.error
        return self._result


def wait_calls(calls: list, timeout: float | None) -> None:
    """Block until one of ``calls`` (``ChannelCall``) can answer, or ``timeout`` seconds."""
    conns = []
    for call in calls:
        if call.ready():
            return
        conns.append(call.channel.conn)
    wait_connections(conns, timeout)
