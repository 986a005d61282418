"""Multiprocess collectors: one ``SyncDataCollector`` per worker process.

How the processes talk (a pipe per worker carries short tagged messages, the workers' one
protocol of ``workers/channel.py`` with the tags of ``_worker.py``; data never travels
through it):

* **Start.** Each worker gets a zero-argument env factory (forked, or cloudpickled with
  ``"spawn"``), the policy, the shared weights and a version counter; it builds its env
  and a plain ``SyncDataCollector`` and replies ``STARTED``.
* **Weights.** ``TensorDict.from_module(policy)`` is copied once into shared memory.
  ``update_policy_weights_()`` copies the new weights into it under a lock and bumps the
  version counter; a worker whose version is behind copies them into its own policy
  before its next batch. Nothing is pickled.
* **Batches.** A worker copies each batch into a shared-memory TensorDict, allocated when
  its layout (keys, shapes, dtypes) first appears or changes and then sent once over the
  pipe (torch passes shared storage as file descriptors); ``BATCH (frames, None)``
  says a batch is ready. The entry ``("collector", "worker_id")`` says which worker
  collected each frame; trajectory ids are ``local_id * num_workers + worker_id``, so they
  stay unique.
* **Sync** (``MultiSyncDataCollector``): each iteration sends ``COLLECT random`` to
  every worker, waits for all, and stacks (or concatenates) the shared buffers into a new
  TensorDict. Workers idle while the training step runs, so every batch uses the latest
  weights.
* **Async** (``MultiaSyncDataCollector``): workers collect continuously; a worker collects
  its next batch while the parent reads the last one, and writes its shared buffer again
  only after the parent's ``ACK random`` says it was copied.
* **Faults.** A worker's exception comes back as an ``ERROR`` reply and is raised in the
  parent with the worker's traceback; a dead worker is noticed within ``_POLL_S``; either
  way every worker is shut down. Workers ignore SIGINT and exit when their parent dies;
  ``shutdown()`` (also run when the collector is garbage-collected or at exit) joins them.
"""

from __future__ import annotations

import multiprocessing
import weakref

import torch
from tensordict import TensorDictBase

from torchrl_lite.collectors._args import check_int, check_policy
from torchrl_lite.collectors._base import DataCollectorBase
from torchrl_lite.collectors._compile import compile_policy_in_place
from torchrl_lite.collectors._dispatch import register_backend
from torchrl_lite.collectors._multi_args import _factories, _per_worker
from torchrl_lite.collectors._policy import (
    copy_weights,
    has_lazy_params,
    materialize_lazy,
    policy_weights,
)
from torchrl_lite.collectors._version import make_tracker
from torchrl_lite.collectors._worker import (
    ACK,
    BATCH,
    CLOSE,
    COLLECT,
    LOAD,
    RUN,
    SEED,
    STARTED,
    STATE,
    _worker_main,
)
from torchrl_lite.envs.utils import ExplorationType
from torchrl_lite.workers.channel import ERROR, Poller
from torchrl_lite.workers.errors import remote_error
from torchrl_lite.workers.process import (
    CloudPickled,
    death_message,
    start_method,
    start_worker,
    stop_processes,
)

__all__ = [
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "MultiSyncCollector",
    "MultiAsyncCollector",
    "MultiCollector",
]

_POLL_S = 0.2  # how often a parent waiting on workers checks that they are alive
_JOIN_S = 3.0  # how long shutdown() waits for workers before terminating them


class _MultiDataCollector(DataCollectorBase):
    """Worker processes, weights, faults and shutdown shared by the sync and async modes."""

    _mode = "sync"

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        create_env_fn,
        policy=None,
        *,
        num_workers: int | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        devices=None,
        storing_device=None,
        policy_device=None,
        env_device=None,
        create_env_kwargs=None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc=None,
        split_trajs: bool = False,
        exploration_type=ExplorationType.RANDOM,
        reset_when_done: bool = True,
        replay_buffer=None,
        num_sub_threads: int = 1,
        mp_start_method: str | None = None,
        compile_policy=False,
        cudagraph_policy=False,
        trust_policy: bool = False,
        update_at_each_batch: bool = False,
        trajs_per_batch: int | None = None,
        traj_format: str | None = None,
        auto_register_policy_transforms: bool | None = None,
        track_policy_version=False,
    ):
        owner = type(self).__name__
        # checked here (a warning without CUDA); the workers run the policy as it is
        compile_policy_in_place(None, False, cudagraph_policy, owner)
        # this process's tracker; each worker stamps frames with its own (``_version.py``)
        self.policy_version_tracker = make_tracker(track_policy_version, owner)
        self._update_at_each_batch = bool(update_at_each_batch)
        self._procs, self._channels, self._finalizer = [], [], None
        factories = _factories(owner, create_env_fn, num_workers, create_env_kwargs)
        self.num_workers = n = len(factories)
        self._backlog = {w: [] for w in range(n)}  # messages read while waiting for others
        self._init_common(
            frames_per_batch,
            total_frames,
            init_random_frames,
            split_trajs,
            postproc,
            replay_buffer,
            trajs_per_batch,  # whole trajectories are assembled in this process
            traj_format,
        )
        self.closed = True  # until the workers are up
        if devices is not None and device is not None:
            raise ValueError(f"{owner}: pass device or devices (the same thing), not both.")
        device = devices if device is None else device
        per_batch = self._frames_per_worker(frames_per_batch, n)
        check_int("num_sub_threads", num_sub_threads, 1, owner)
        self.policy = check_policy(policy, owner)
        if has_lazy_params(self.policy):  # lazy layers get their shapes from one reset
            env = factories[0]()
            try:
                materialize_lazy(self.policy, env)
            finally:
                env.close()
        weights = policy_weights(self.policy)
        if weights is not None:
            weights = weights.apply(lambda t: t.detach().to("cpu", copy=True)).share_memory_()
        self._weights = weights
        self.mp_start_method = start_method(mp_start_method, owner)
        ctx = multiprocessing.get_context(self.mp_start_method)
        self._version = ctx.Value("q", 0)
        options = {
            name: _per_worker(owner, name, value, n)
            for name, value in (
                ("device", device),
                ("storing_device", storing_device),
                ("policy_device", policy_device),
                ("env_device", env_device),
            )
        }
        forked = self.mp_start_method == "fork"
        shipped_policy = policy if forked or policy is None else CloudPickled(policy)
        base_seed = torch.initial_seed()
        try:
            for w, factory in enumerate(factories):
                setup = {
                    "factory": factory if forked else CloudPickled(factory),
                    "policy": shipped_policy,
                    "weights": weights,
                    "version": self._version,
                    "mode": self._mode,
                    "num_workers": n,
                    "num_threads": num_sub_threads,
                    "torch_seed": (base_seed + 7919 * (w + 1)) % 2**63,
                    "collector_kwargs": {
                        "frames_per_batch": per_batch,
                        "max_frames_per_traj": max_frames_per_traj,
                        "reset_at_each_iter": reset_at_each_iter,
                        "exploration_type": exploration_type,
                        "reset_when_done": reset_when_done,
                        "compile_policy": compile_policy,  # each worker compiles its copy
                        "auto_register_policy_transforms": auto_register_policy_transforms,
                        "track_policy_version": self.policy_version_tracker is not None,
                        **{name: values[w] for name, values in options.items()},
                    },
                }
                self._start_worker(ctx, w, setup)
            self.closed = False
            self._wait(range(n), "start", STARTED)
        except BaseException:
            self._shutdown(grace=1.0)
            self.closed = True
            raise
        self._buffers: list = [None] * n

    def _frames_per_worker(self, frames_per_batch: int, n: int) -> int:
        if frames_per_batch % n:
            raise ValueError(
                f"{type(self).__name__}: frames_per_batch={frames_per_batch} is not divisible by "
                f"num_workers={n}; each worker collects frames_per_batch / num_workers frames "
                f"per batch. Use a multiple of {n}."
            )
        return frames_per_batch // n

    def _start_worker(self, ctx, w: int, setup: dict) -> None:
        proc, channel = start_worker(
            ctx,
            _worker_main,
            (w, setup),
            f"{type(self).__name__}-worker-{w}",
            self._channels,
            share_tensors=True,  # the batch buffers travel shared
            # not daemonic: a worker's env may run processes (ParallelEnv); the finalizer
            # below stops the workers when the collector is dropped or at exit
            daemon=False,
        )
        self._procs.append(proc)
        self._channels.append(channel)
        if self._finalizer is None:  # stops the workers if the collector is dropped / at exit
            self._finalizer = weakref.finalize(
                self, stop_processes, self._procs, self._channels, CLOSE, _JOIN_S
            )

    # -- talking to workers ----------------------------------------------------------------
    def _where(self, w: int) -> str:
        return f"{type(self).__name__} worker {w} (pid {self._procs[w].pid})"

    def _send(self, w: int, tag: bytes, payload, what: str) -> None:
        try:
            self._channels[w].send(tag, payload)
        except (OSError, ValueError):
            self._fail(RuntimeError(death_message(self._procs[w], self._where(w), what)))

    def _read(self, w: int, what: str) -> tuple:
        try:
            tag, payload = self._channels[w].recv()
        except (EOFError, OSError):
            self._fail(RuntimeError(death_message(self._procs[w], self._where(w), what)))
        if tag == ERROR:
            self._fail(remote_error(payload, self._where(w), what))
        return tag, payload

    def _wait(self, workers, what: str, tag: bytes, any_one: bool = False) -> dict:
        """Wait for a ``tag`` message from each of ``workers`` (from one, with ``any_one``)
        and return ``{worker: payload}``; ``BATCH`` messages that come meanwhile are kept
        for later. Raises (after shutting every worker down) if a worker fails or dies."""
        self._check_open()
        pending, replies = list(workers), {}
        try:
            while pending and not (any_one and replies):
                poller = Poller([self._channels[w] for w in pending])
                ready = [pending[j] for j in poller.ready(_POLL_S)]
                if not ready:
                    for w in pending:
                        if not self._procs[w].is_alive():
                            if self._channels[w].poll(0):  # its last words: read them first
                                self._read(w, what)
                            message = death_message(self._procs[w], self._where(w), what)
                            self._fail(RuntimeError(message))
                for w in ready:
                    if any_one and replies:
                        break  # leave the other messages in their pipes
                    got, payload = self._read(w, what)
                    if got != tag:
                        self._backlog[w].append(payload)  # only BATCH comes unasked
                        continue
                    replies[w] = payload
                    pending.remove(w)
        except KeyboardInterrupt:
            self._failure = f"interrupted while waiting for the workers ({what})"
            self.shutdown()
            raise
        return replies

    def _fail(self, error: Exception):
        """Shut every worker down, mark the collector closed and raise ``error``."""
        self._failure = str(error).split("\n", 1)[0]
        self._shutdown(grace=1.0)
        self.closed = True
        raise error

    def _store(self, w: int, batch: tuple) -> TensorDictBase:
        """The shared buffer of worker ``w`` after its ``BATCH (frames, new)`` message."""
        if batch[1] is not None:
            self._buffers[w] = batch[1]
        return self._buffers[w]

    # -- weights, seeds, state ---------------------------------------------------------------
    def update_policy_weights_(self, weights=None) -> None:
        """Make every worker use new policy weights from its next batch on.

        Args:
            weights: a TensorDict (``TensorDict.from_module(policy)``), a ``state_dict`` or
                a module of the policy's architecture; ``None`` reads the policy given at
                construction (after your optimizer step changed it).
        """
        self._check_open()
        owner = type(self).__name__
        if self._weights is None:
            if weights is not None:
                raise ValueError(f"{owner}: the policy ({self.policy!r}) has no weights to update.")
            return
        source = policy_weights(self.policy) if weights is None else weights
        lock = self._version.get_lock()
        while not lock.acquire(timeout=_POLL_S):
            dead = [w for w, p in enumerate(self._procs) if not p.is_alive()]
            if dead:  # a worker died holding the lock
                message = death_message(
                    self._procs[dead[0]], self._where(dead[0]), "a weight update"
                )
                self._fail(RuntimeError(message))
        try:
            copy_weights(self._weights, source, owner)
            self._version.value += 1
        finally:
            lock.release()

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed worker 0's env with ``seed``, worker 1's with the seed that returned, and so
        on (each worker's torch RNG too); return the next unused seed."""
        self._check_open()
        for w in range(self.num_workers):
            self._send(w, SEED, (seed, static_seed), "set_seed")
            seed = self._wait([w], "set_seed", SEED)[w]
        return seed

    def state_dict(self) -> dict:
        """The policy's state, the frame counters and each worker's env state and carry
        (``"worker<i>"``: what its ``SyncDataCollector.state_dict()`` has under
        ``"env_state_dict"`` and ``"carry"``)."""
        self._check_open()
        out = {"frames": self._frames, "iter": self._iter}
        if isinstance(self.policy, torch.nn.Module):
            out["policy_state_dict"] = self.policy.state_dict()
        if self.policy_version_tracker is not None:
            out["policy_version"] = self.policy_version
        for w in range(self.num_workers):
            self._send(w, STATE, None, "state_dict")
            out[f"worker{w}"] = self._wait([w], "state_dict", STATE)[w]
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict()`` returned (the workers get the policy's weights)."""
        self._check_open()
        if "policy_state_dict" in state_dict:
            self.policy.load_state_dict(state_dict["policy_state_dict"])
            self.update_policy_weights_()
        for w in range(self.num_workers):
            if f"worker{w}" in state_dict:
                self._send(w, LOAD, state_dict[f"worker{w}"], "load_state_dict")
                self._wait([w], "load_state_dict", LOAD)
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))
        if "policy_version" in state_dict and self.policy_version_tracker is not None:
            self.policy_version_tracker.version = state_dict["policy_version"]

    # -- life cycle ------------------------------------------------------------------------
    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the workers."""
        return [p.pid for p in self._procs]

    def _shutdown(self, grace: float = _JOIN_S) -> None:
        # detach() returns None once the finalizer ran: the workers are stopped once
        if self._finalizer is not None and self._finalizer.detach() is not None:
            stop_processes(self._procs, self._channels, CLOSE, grace)

    def shutdown(self) -> None:
        """Stop and join every worker; the collector cannot be used afterwards."""
        self._shutdown()
        self.closed = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames}, "
            f"frames={self._frames})"
        )


class MultiSyncDataCollector(_MultiDataCollector):
    """Collect with one ``SyncDataCollector`` per worker process; each batch holds one
    batch from every worker, collected with the latest policy weights.

    Each worker collects ``frames_per_batch / num_workers`` frames per iteration; the
    results are stacked (``cat_results="stack"``: ``[num_workers, *env_batch, T]``) or
    concatenated along a dim. Batches carry ``("collector", "worker_id")``; trajectory ids
    are unique across workers. Call ``update_policy_weights_()`` after each optimizer
    step: the weights go to the workers through shared memory.

    Args:
        create_env_fn: a list of zero-argument env constructors (one worker each), or one
            constructor with ``num_workers``. Never a live env.
        policy: as for ``SyncDataCollector`` (each worker runs its own copy).
        num_workers: the number of workers when ``create_env_fn`` is one constructor.
        frames_per_batch: frames per yielded batch (all workers together).
        total_frames: frames to collect in all; ``-1`` for endless collection.
        device: the workers' device (one, or a list with one per worker).
        devices: the same as ``device`` (the spelling of the seed's examples).
        storing_device, policy_device, env_device: per worker, as for
            ``SyncDataCollector`` (one value or a list). Batches reach this process
            through shared CPU memory.
        create_env_kwargs: keyword arguments for the constructors (a dict, or one per worker).
        max_frames_per_traj, init_random_frames, reset_at_each_iter, postproc, split_trajs,
            exploration_type, reset_when_done, replay_buffer, trajs_per_batch, traj_format,
            auto_register_policy_transforms: as for ``SyncDataCollector`` (``postproc``,
            ``split_trajs``, ``replay_buffer`` and trajectory assembly apply in this process).
        track_policy_version: True or a ``PolicyVersion``: the tracker of this process
            (``increment_version()``, ``policy_version``); each worker writes
            ``"policy_version"`` into its frames, the number of weight updates it has
            loaded (``_version.py``).
        num_sub_threads: torch threads in each worker.
        mp_start_method: ``"fork"`` (default where available and CUDA is not initialised:
            fast start-up), ``"spawn"`` or ``"forkserver"``.
        cat_results: ``"stack"`` (default) or the dim along which to concatenate the
            workers' batches (``-1``: time).

    Example:
        >>> from torchrl_lite.envs import GymEnv
        >>> make = lambda: GymEnv("Pendulum-v1")
        >>> collector = MultiSyncDataCollector([make, make], None, frames_per_batch=100,
        ...     total_frames=200)
        >>> [data.batch_size for data in collector]
        [torch.Size([2, 50]), torch.Size([2, 50])]
        >>> collector.shutdown()
    """

    _mode = "sync"

    def __init__(self, create_env_fn, policy=None, *, cat_results="stack", **kwargs):
        if cat_results != "stack" and (
            isinstance(cat_results, bool) or not isinstance(cat_results, int)
        ):
            raise ValueError(
                f"MultiSyncDataCollector: cat_results must be 'stack' or a dim (int), got "
                f"{cat_results!r}"
            )
        self.cat_results = cat_results
        super().__init__(create_env_fn, policy, **kwargs)

    def _collect_batch(self, random: bool) -> TensorDictBase:
        self._check_open()
        if self._update_at_each_batch:
            self.update_policy_weights_()
        workers = range(self.num_workers)
        for w in workers:
            self._send(w, COLLECT, random, "collect")
        replies = self._wait(workers, "collect", BATCH)
        buffers = [self._store(w, replies[w]) for w in workers]
        if self.cat_results == "stack":
            return torch.stack(buffers, 0)
        return torch.cat(buffers, self.cat_results)


class MultiaSyncDataCollector(_MultiDataCollector):
    """Collect with one ``SyncDataCollector`` per worker process, yielding each worker's
    batch as soon as it is ready; workers keep collecting while you train.

    Every batch comes from one worker (``frames_per_batch`` frames, ``[*env_batch, T]``)
    and says which in ``("collector", "worker_id")``. A worker starts using new weights
    (``update_policy_weights_()``) at its next batch, so a batch in flight may still use
    the previous ones.

    Args:
        create_env_fn, policy, num_workers, total_frames, device, devices, storing_device,
            policy_device, env_device, create_env_kwargs, max_frames_per_traj,
            init_random_frames, reset_at_each_iter, postproc, split_trajs,
            exploration_type, reset_when_done, replay_buffer, num_sub_threads,
            mp_start_method: as for ``MultiSyncDataCollector``.
        frames_per_batch: frames per yielded batch (each worker collects that many).

    Example:
        >>> from torchrl_lite.envs import GymEnv
        >>> make = lambda: GymEnv("Pendulum-v1")
        >>> collector = MultiaSyncDataCollector([make, make], None, frames_per_batch=50,
        ...     total_frames=200)
        >>> sum(data.numel() for data in collector)
        200
        >>> collector.shutdown()
    """

    _mode = "async"

    def __init__(self, create_env_fn, policy=None, **kwargs):
        self._running = False
        self._next_worker = 0
        super().__init__(create_env_fn, policy, **kwargs)

    def _frames_per_worker(self, frames_per_batch: int, n: int) -> int:
        return frames_per_batch

    def _collect_batch(self, random: bool) -> TensorDictBase:
        self._check_open()
        if self._update_at_each_batch:
            self.update_policy_weights_()
        if not self._running:
            for w in range(self.num_workers):
                self._send(w, RUN, random, "collect")
            self._running = True
        n = self.num_workers
        order = [(self._next_worker + i) % n for i in range(n)]  # fair among ready workers
        w = next((w for w in order if self._backlog[w]), None)
        if w is not None:
            message = self._backlog[w].pop(0)
        else:
            w, message = next(iter(self._wait(order, "collect", BATCH, any_one=True).items()))
        self._next_worker = (w + 1) % n
        out = self._store(w, message).clone()
        still_random = self._frames + out.numel() < self.init_random_frames
        self._send(w, ACK, still_random, "collect")
        return out


MultiSyncCollector = MultiSyncDataCollector
MultiAsyncCollector = MultiaSyncDataCollector


class _MultiDispatch(type):
    def __call__(cls, *args, sync: bool | None = None, **kwargs):
        if sync is None:
            raise TypeError(
                "MultiCollector needs sync=True (MultiSyncCollector: one batch from every "
                "worker) or sync=False (MultiAsyncCollector: each worker's batch when ready)."
            )
        if not isinstance(sync, bool):
            raise TypeError(f"MultiCollector: sync must be True or False, got {sync!r}")
        target = MultiSyncDataCollector if sync else MultiaSyncDataCollector
        return target(*args, **kwargs)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, _MultiDataCollector)


class MultiCollector(metaclass=_MultiDispatch):
    """TorchRL's ``MultiCollector(..., sync=...)``: builds ``MultiSyncCollector``
    (``sync=True``) or ``MultiAsyncCollector`` (``sync=False``) with the other arguments.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> collector = MultiCollector([PendulumEnv], None, frames_per_batch=10, sync=True)
        >>> type(collector).__name__
        'MultiSyncDataCollector'
        >>> isinstance(collector, MultiCollector)
        True
        >>> collector.shutdown()
    """


def _build_process(*args, sync, **kwargs) -> _MultiDataCollector:
    target = MultiSyncDataCollector if sync else MultiaSyncDataCollector
    return target(*args, **kwargs)


register_backend("process", _build_process)  # Collector(..., backend="process")
