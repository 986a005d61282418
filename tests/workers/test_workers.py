"""The worker layer (torchrl_lite/workers/): the one channel protocol between two
processes, the error reply, shared-memory segments, the pickling check and RNG states."""

import multiprocessing
import pickle
import random
import socket
import threading

import numpy as np
import pytest
import torch

from torchrl_lite.collectors._dispatch import register_backend
from torchrl_lite.workers import (
    ERROR,
    OK,
    ErrorReply,
    PipeChannel,
    Poller,
    RemoteError,
    check_picklable,
    remote_error,
    rng_state,
    seed_rngs,
    set_rng_state,
)
from torchrl_lite.workers.errors import RemoteKeyError
from torchrl_lite.workers.shm import SegmentReader, SegmentWriter


def _echo(conn, share: bool) -> None:
    """A worker: replies OK to b"o", echoes a payload under b"p", doubles a tensor in place
    under b"t", raises under b"x", and stops at b"c"."""
    channel = PipeChannel(conn, share_tensors=share)
    while True:
        tag, payload = channel.recv()
        if tag == b"c":
            return
        try:
            if tag == b"o":
                channel.send(OK)
            elif tag == b"p":
                channel.send(b"p", payload)
            elif tag == b"t":
                payload.mul_(2)
                channel.send(OK)
            else:
                raise ValueError(f"worker refuses {tag!r}")
        except Exception as err:
            channel.send_error(err)


def _start(share: bool):
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_echo, args=(child, share), daemon=True)
    proc.start()
    child.close()
    return proc, PipeChannel(parent, share_tensors=share)


def test_pipe_channel_commands_replies_and_error_reply_across_processes():
    proc, channel = _start(share=False)
    try:
        channel.send(b"o")
        assert Poller([channel]).ready(10.0) == [0]
        assert channel.recv() == (OK, None)
        payload = {"seed": 3, "keys": ["a", ("next", "b")], "none": None}
        channel.send(b"p", payload)
        assert channel.recv() == (b"p", payload)
        channel.send(b"p", None)  # a None payload is a payload
        assert channel.recv() == (b"p", None)
        channel.send(b"x")
        tag, reply = channel.recv()
        assert tag == ERROR and isinstance(reply, ErrorReply)
        assert (reply.type, reply.message) == ("ValueError", "worker refuses b'x'")
        assert "in _echo" in reply.traceback and reply["traceback"] == reply.traceback
        channel.send(b"c")
    finally:
        proc.join(10)
        channel.close()
    assert proc.exitcode == 0


@pytest.mark.parametrize("share", [False, True])
def test_pipe_channel_tensors_travel_by_value_or_shared(share):
    proc, channel = _start(share=share)
    try:
        tensor = torch.ones(3)
        if share:
            tensor.share_memory_()
        channel.send(b"t", tensor)
        assert channel.recv() == (OK, None)
        # shared: the worker doubled this very storage; by value: a copy of it
        expected = torch.full((3,), 2.0) if share else torch.ones(3)
        assert torch.equal(tensor, expected)
        channel.send(b"c")
    finally:
        proc.join(10)
        channel.close()


def test_pipe_channel_reads_eof_when_the_worker_is_gone():
    proc, channel = _start(share=False)
    channel.send(b"c")
    proc.join(10)
    assert Poller([channel]).ready(10.0) == [0]
    with pytest.raises(EOFError, match="other end of the worker channel is closed"):
        channel.recv()
    channel.close()


def test_error_reply_reads_as_the_dict_it_replaced_and_pickles():
    reply = ErrorReply.of(KeyError("'obs' is missing"))
    assert reply.message == "'obs' is missing"  # not quoted twice
    assert pickle.loads(pickle.dumps(reply)) == reply
    assert [reply[k] for k in ("type", "message")] == ["KeyError", "'obs' is missing"]
    with pytest.raises(KeyError, match="ErrorReply has type, message and traceback, not 'info'"):
        reply["info"]
    error = RemoteError(reply)
    assert str(error) == "KeyError: 'obs' is missing" and error.info is reply


@pytest.mark.parametrize(
    "err, cls",
    [(ValueError("v"), ValueError), (KeyError("k"), RemoteKeyError), (OSError("o"), RuntimeError)],
)
def test_remote_error_keeps_common_types_and_names_the_worker(err, cls):
    raised = remote_error(ErrorReply.of(err), "worker 2 (pid 7)", "a step")
    assert type(raised) is cls
    assert str(raised).startswith(f"worker 2 (pid 7) raised {type(err).__name__}: ")
    assert "(during a step)" in str(raised) and "Worker traceback:" in str(raised)


def test_segments_grow_and_their_descriptors_cross_a_unix_socket():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender = PipeChannel(multiprocessing.connection.Connection(a.detach()))
    receiver = PipeChannel(multiprocessing.connection.Connection(b.detach()))
    writer, reader = SegmentWriter(), SegmentReader()
    try:
        for size in (10, 200_000):  # the second needs a bigger segment: a fresh descriptor
            writer.reserve(size)[:size] = np.arange(size) % 251
            fresh = writer.fresh
            sender.send(b"d", (size, fresh))
            writer.send_fd_if_fresh(sender)
            _tag, (n, was_fresh) = receiver.recv()
            assert was_fresh
            reader.attach(receiver.recv_fd())
            assert reader.segment.size >= n
            assert np.array_equal(reader.segment.array[:n], np.arange(n) % 251)
        assert not writer.fresh
    finally:
        writer.close(), reader.close(), sender.close(), receiver.close()


def test_check_picklable_names_the_factory_that_cannot_be_sent():
    check_picklable({"env": lambda: 3})  # cloudpickle sends lambdas
    with pytest.raises(TypeError, match="policy_factory cannot be pickled, so it cannot be sent"):
        check_picklable({"env": lambda: 3, "policy_factory": threading.Lock()})


def test_rng_states_round_trip_and_seeding_is_deterministic():
    state = rng_state()
    draws = (torch.rand(2), np.random.rand(), random.random())
    set_rng_state(state)
    again = (torch.rand(2), np.random.rand(), random.random())
    assert torch.equal(draws[0], again[0]) and draws[1:] == again[1:]
    seed_rngs(2**40 + 5)  # numpy's seed is taken modulo 2**32
    first = (torch.rand(1).item(), np.random.rand(), random.random())
    seed_rngs(2**40 + 5)
    assert first == (torch.rand(1).item(), np.random.rand(), random.random())


def test_register_backend_refuses_an_unknown_backend():
    with pytest.raises(
        ValueError, match=r"register_backend: 'rpc' is not one of \['process', 'ray'\]"
    ):
        register_backend("rpc", lambda *a, **k: None)
