"""The worker process of the multiprocess collectors: a loop around a ``SyncDataCollector``.

It speaks the workers' one protocol (``workers/channel.py``) with the tags below; see
``multi.py`` for what each command does. The worker ignores SIGINT (the parent decides when to
stop), exits when its parent is gone (pipe EOF, or a new parent pid), and after an error
stays alive until the parent says ``close``, so that the parent can still read the
shared memory of a batch message sent just before.
"""

from __future__ import annotations

import signal

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl_lite.collectors._policy import policy_weights
from torchrl_lite.collectors.collectors import SyncDataCollector
from torchrl_lite.workers.channel import PipeChannel
from torchrl_lite.workers.process import CloudPickled, parent_alive
from torchrl_lite.workers.rng import seed_rngs

_IDLE_S = 1.0  # how often an idle worker checks that its parent is alive
WORKER_ID = ("collector", "worker_id")

# parent -> worker: collect one batch (sync), collect continuously / the last batch was
# read (async), seed, send state, load state, close
COLLECT, RUN, ACK, SEED, STATE, LOAD, CLOSE = b"c", b"r", b"a", b"e", b"s", b"l", b"q"
# worker -> parent: started, a batch is in shared memory (SEED, STATE, LOAD: the replies)
STARTED, BATCH = b"S", b"b"


class _Worker:
    """The loop of one worker process around its ``SyncDataCollector``."""

    def __init__(self, channel, index, collector, weights, version, parent_pid):
        self.channel, self.index, self.collector = channel, index, collector
        self.weights, self.version, self.parent_pid = weights, version, parent_pid
        self.local = policy_weights(collector.policy) if weights is not None else None
        self.seen = -1  # weights version loaded into the local policy
        self.buffer, self.signature = None, None

    def recv(self, block: bool):
        """The next message from the parent (None if none and not ``block``)."""
        while True:
            if not parent_alive(self.parent_pid):
                raise EOFError("the parent process is gone")
            if self.channel.poll(_IDLE_S if block else 0):
                return self.channel.recv()
            if not block:
                return None

    def collect(self, random: bool) -> TensorDictBase:
        if self.local is not None and self.version.value != self.seen:
            with self.version.get_lock():
                self.local.update_(self.weights)
                self.seen = self.version.value
            tracker = self.collector.policy_version_tracker
            if tracker is not None:  # frames from now on: this many weight updates
                tracker.version = self.seen
        return self.collector._collect_batch(random)

    def publish(self, batch: TensorDictBase) -> None:
        """Copy ``batch`` into the shared buffer (a new one if its layout changed)."""
        signature = _signature(batch)
        new = None
        if signature != self.signature:
            buf = batch.to("cpu") if batch.device != torch.device("cpu") else batch.clone()
            ids = torch.full(batch.batch_size, self.index, dtype=torch.int64)
            buf.set(WORKER_ID, ids)
            self.buffer = new = buf.share_memory_()
            self.signature = signature
        else:
            self.buffer.update_(batch)
        self.channel.send(BATCH, (batch.numel(), new))

    def control(self, tag: bytes, payload) -> bool:
        """Answer a control command; False for ``CLOSE``."""
        if tag == CLOSE:
            return False
        if tag == SEED:
            seed, static = payload
            seed_rngs(seed)
            self.channel.send(SEED, self.collector.set_seed(seed, static_seed=static))
        elif tag == STATE:
            # the parent keeps the counters and the policy: the worker's env and carry
            state = self.collector.state_dict()
            self.channel.send(STATE, {k: state[k] for k in ("env_state_dict", "carry")})
        elif tag == LOAD:
            self.collector.load_state_dict(payload)
            self.channel.send(LOAD)
        else:
            raise ValueError(f"unknown command {tag!r}")
        return True

    def serve_sync(self) -> None:
        while True:
            tag, payload = self.recv(block=True)
            if tag == COLLECT:
                self.publish(self.collect(payload))
            elif not self.control(tag, payload):
                return

    def serve_async(self) -> None:
        running, free, random, ready = False, True, False, None
        while True:
            message = self.recv(block=not running or (ready is not None and not free))
            if message is not None:
                tag, payload = message
                if tag == RUN:
                    running, random = True, payload
                elif tag == ACK:
                    free, random = True, payload
                elif not self.control(tag, payload):
                    return
                continue
            if ready is None:
                ready = self.collect(random)
            if free:
                self.publish(ready)
                ready, free = None, False


def _worker_main(conn, index, setup: dict, parent_pid: int, inherited: list) -> None:
    """Entry point of a worker process (see the module docstring for the protocol)."""
    for other in inherited:  # parent ends of earlier workers' pipes, inherited by fork
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(setup["num_threads"])
    seed_rngs(setup["torch_seed"])  # forked workers would otherwise share RNG states
    channel = PipeChannel(conn, share_tensors=True)  # the batch buffer travels shared
    collector = None
    try:
        try:
            factory, policy = setup["factory"], setup["policy"]
            factory = factory.load() if isinstance(factory, CloudPickled) else factory
            policy = policy.load() if isinstance(policy, CloudPickled) else policy
            collector = SyncDataCollector(factory(), policy, **setup["collector_kwargs"])
            collector._traj_stride, collector._traj_offset = setup["num_workers"], index
            worker = _Worker(
                channel, index, collector, setup["weights"], setup["version"], parent_pid
            )
            channel.send(STARTED)
            if setup["mode"] == "sync":
                worker.serve_sync()
            else:
                worker.serve_async()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return  # the parent is gone
        except Exception as err:
            channel.send_error(err)
            # stay alive until told to close: the parent may still be unpickling a batch
            # message whose shared memory this process must hand over
            while parent_alive(parent_pid):
                if channel.poll(_IDLE_S) and channel.recv()[0] == CLOSE:
                    break
    except (OSError, EOFError):
        return
    finally:
        if collector is not None:
            try:
                collector.shutdown()
            except Exception:
                pass


def _signature(batch: TensorDictBase) -> tuple:
    """The keys, shapes and dtypes of ``batch`` (per copy for a lazy stack: copies whose
    specs differ)."""
    if isinstance(batch, LazyStackedTensorDict):
        return tuple(_signature(row) for row in batch.tensordicts)
    return tuple((k, v.shape, v.dtype) for k, v in batch.items(True, True))
