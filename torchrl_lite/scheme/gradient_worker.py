"""GradientWorker: builds the components, gets data, and computes one minibatch gradient.

One ``step()`` is one minibatch: when the storage has no minibatch left, the worker
collects (``LocalCollection`` or ``RemoteCollection``), inserts the batches, prepares them
(``storage.before_gradients()``: GAE for on-policy) and starts a new pass of
``storage.generate_batches``; then ``algo.compute_gradients(minibatch)``. Applying the
gradients is the caller's: the Scheme applies them in this process (one gradient worker),
or averages / applies those of M remote workers, or (decentralized) the workers all-reduce
and apply them themselves.

Components are built in the contract's order after ``torch.manual_seed(seed)``::

    envs = train_envs_factory(device, seed, index_col_worker=0, index_grad_worker=g)
    actor = actor_factory(device); algo = algo_factory(device, actor)
    storage = storage_factory(device, actor, algo)

which is what a hand-written loop does, so the 1/1 Scheme repeats it step for step.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import torch

from torchrl_lite.collectors.distributed.transport import unpack, weights_message
from torchrl_lite.scheme.collection import LocalCollection, RemoteCollection, build_collector

__all__ = ["GradientWorker", "worker_seed"]


def worker_seed(seed: int, index_grad_worker: int, index_col_worker: int, restarts: int = 0) -> int:
    """The torch seed of a worker: ``seed`` for (0, 0), distinct for every index pair and
    every restart, reproducible from ``seed``.

    Example:
        >>> worker_seed(7, 0, 0), worker_seed(7, 0, 1), worker_seed(7, 1, 0)
        (7, 7926, 1000010)
    """
    return (
        seed + 1_000_003 * index_grad_worker + 7_919 * index_col_worker + 104_729 * restarts
    ) % (2**31)


def _collection_worker_make(factories, device, seed, index_grad_worker, index_col_worker, chunks):
    """The ``make`` of a remote collection worker: its own envs, actor, algo and storage
    (for ``steps_per_collection``), a collector on ``algo.acting_policy``."""

    def make():
        envs = factories["train_envs_factory"](
            device, seed, index_col_worker=index_col_worker, index_grad_worker=index_grad_worker
        )
        actor = factories["actor_factory"](device)
        algo = factories["algo_factory"](device, actor)
        storage = factories["storage_factory"](device, actor, algo)
        return build_collector(envs, algo, storage, chunks), algo.set_weights

    return make


class GradientWorker:
    """One gradient worker (in this process, or a Ray actor); see the module docstring.

    Args:
        factories: ``{"algo_factory", "actor_factory", "storage_factory",
            "train_envs_factory"}``.
        index_grad_worker: this worker's index (env seeds depend on it).
        seed: the run's seed.
        device: where the components live.
        col_workers: collection workers feeding this one (1: in this process).
        col_communication: ``"synchronous"`` or ``"asynchronous"``.
        col_options: ``{"resources", "fraction_workers", "fraction_samples", "chunks",
            "max_restarts", "timeout", "channel", "owner"}`` for remote collection
            (``owner``: the Scheme's description, named when others need its CPUs).
        on_event: called with a message on each worker death/restart.
    """

    def __init__(
        self,
        factories: dict,
        index_grad_worker: int = 0,
        seed: int = 0,
        device="cpu",
        col_workers: int = 1,
        col_communication: str = "synchronous",
        col_options: dict | None = None,
        restarts: int = 0,
        on_event=None,
    ):
        self.index = index_grad_worker
        self.events: list[str] = []
        on_event = on_event or self.events.append
        device = torch.device(device)
        torch.manual_seed(worker_seed(seed, index_grad_worker, 0, restarts))
        if col_workers == 1:
            envs = factories["train_envs_factory"](
                device, seed + restarts, index_col_worker=0, index_grad_worker=index_grad_worker
            )
        self.actor = factories["actor_factory"](device)
        self.algo = factories["algo_factory"](device, self.actor)
        self.storage = factories["storage_factory"](device, self.actor, self.algo)
        self.on_policy = bool(getattr(self.algo, "on_policy", True))
        if col_workers == 1:
            self.collection = LocalCollection(envs, self.algo, self.storage)
        else:
            self.collection = self._remote_collection(
                factories, device, seed, col_workers, col_communication, col_options or {}, on_event
            )
        self.version = 0  # the update whose weights this worker holds
        self.frames = 0  # frames inserted so far
        self._batches = None  # the current pass over the storage
        self._gen_rng = None  # RNG state when that pass started (exact resume)
        self._consumed = 0  # minibatches taken from it
        self._weights_ref = None

    def _remote_collection(self, factories, device, seed, count, communication, opts, on_event):
        from torchrl_lite.collectors.distributed.ray_session import require_ray
        from torchrl_lite.collectors.distributed.ray_workers import WorkerGroup
        from torchrl_lite.collectors.distributed.worker import RolloutWorker

        require_ray()
        g, chunks = self.index, int(opts.get("chunks", 1))
        steps = int(self.storage.steps_per_collection)
        if steps % chunks:  # checked here: before any worker starts
            raise ValueError(
                f"storage.steps_per_collection={steps} is not divisible by the preemption "
                f"chunks ({chunks}); use col_preemption_chunks dividing {steps}."
            )

        def args_for(index, restarts):
            make = _collection_worker_make(factories, device, seed + restarts, g, index, chunks)
            seed_i = worker_seed(seed, g, index, restarts)
            return (make,), {"seed": seed_i, "chunks": chunks, "pack_batches": True}

        group = WorkerGroup(
            "collection worker",
            RolloutWorker,
            args_for,
            count,
            opts.get("resources", {"num_cpus": 1}),
            max_restarts=opts.get("max_restarts", 3),
            timeout=opts.get("timeout", 300.0),
            on_event=on_event,
            max_concurrency=2 if chunks > 1 else 1,
            suffix=f" of gradient worker {g}" if g else "",
            restart_option="max_worker_restarts",
            channel=opts.get("channel", "auto"),
            owner=opts.get("owner", ""),
        )
        group.start()
        return RemoteCollection(
            group,
            synchronous=communication == "synchronous",
            fraction_workers=opts.get("fraction_workers", 1.0),
            fraction_samples=opts.get("fraction_samples", 1.0),
        )

    # -- remote-friendly API ----------------------------------------------------------------
    def ping(self) -> int:
        return os.getpid()

    def _current_weights(self):
        """The current weights as sent to the collection workers, made once per version."""
        if self._weights_ref is None or self._weights_ref[0] != self.version:
            self._weights_ref = (self.version, weights_message(self.algo.get_weights()))
        return self._weights_ref[1]

    def step(self, weights=None, version: int | None = None):
        """One minibatch gradient: ``(grads, info)``. ``weights`` (with their update
        ``version``) are installed first when given."""
        if weights is not None:
            self.algo.set_weights(unpack(weights))
        if version is not None:
            self.version = int(version)
        info = {"frames": 0, "returns": [], "policy_lag": [], "collect_s": 0.0, "col_frames_s": 0.0}
        while True:
            if self._batches is None:
                self._collect(info)
                continue
            minibatch = next(self._batches, None)
            if minibatch is None:
                self.storage.after_gradients()
                self._batches = None
                continue
            self._consumed += 1
            break
        start = time.perf_counter()
        grads, algo_info = self.algo.compute_gradients(minibatch)
        info["grad_s"] = time.perf_counter() - start
        info["algo"] = dict(algo_info)
        info["version"] = self.version
        return grads, info

    def _collect(self, info: dict) -> None:
        start = time.perf_counter()
        results = self.collection.collect(self._current_weights, self.version)
        info["collect_s"] += time.perf_counter() - start
        for batch, meta in results:
            self.storage.insert(batch)
            info["frames"] += meta["frames"]
            info["col_frames_s"] += meta["seconds"]
            info["returns"] += meta["returns"]
            info["policy_lag"].append(self.version - meta["version"])
            self.frames += meta["frames"]
        start_steps = 0 if self.on_policy else int(getattr(self.algo, "start_steps", 0) or 0)
        if self.frames < start_steps:
            return
        self._start_pass()

    def _generate(self):
        algo = self.algo  # on-policy: one of num_mini_batch / mini_batch_size is None;
        # off-policy: num_mini_batch == num_updates, num_epochs == 1
        args = (algo.num_mini_batch, getattr(algo, "mini_batch_size", None), algo.num_epochs)
        return iter(self.storage.generate_batches(*args))

    def _start_pass(self) -> None:
        from torchrl_lite.workers.rng import rng_state

        self.storage.before_gradients()
        self._gen_rng = rng_state()
        self._consumed = 0
        self._batches = self._generate()

    def apply_gradients(self, grads) -> None:
        self.algo.apply_gradients(grads)
        self.version += 1

    def get_weights(self):
        return self.algo.get_weights()

    def set_weights(self, weights, version: int) -> None:
        self.algo.set_weights(unpack(weights))
        self.version = int(version)

    # -- decentralized update (torch.distributed, gloo) --------------------------------------
    def free_address(self) -> str:
        """``tcp://ip:port`` of a free port on this worker's node (rank 0's rendezvous)."""
        import socket

        import ray

        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def init_process_group(self, address: str, rank: int, world_size: int, weights) -> None:
        """Join the gloo group (all workers call it together) and start from ``weights``."""
        import datetime

        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=120))  # fmt: skip
        self._world = world_size
        self.set_weights(weights, 0)

    def step_allreduce(self) -> dict:
        """One minibatch gradient, averaged over the group with ``all_reduce``, applied here
        (every worker applies the same average: no central update)."""
        import torch.distributed as dist

        grads, info = self.step()
        start = time.perf_counter()
        for index, grad in enumerate(grads):
            if grad is None:  # a gradient missing here joins as zeros
                grad = torch.zeros_like(self.algo.parameters_to_train()[index])
            dist.all_reduce(grad)
            grad /= self._world
            grads[index] = grad
        self.apply_gradients(grads)
        info["update_s"] = time.perf_counter() - start
        return info

    def update_algorithm_parameter(self, name: str, value) -> None:
        self.algo.update_algorithm_parameter(name, value)

    def status(self) -> dict:
        return {"alive": self.collection.alive, "restarts": self.collection.restarts}

    def save_actor(self, path: str) -> str:
        torch.save(self.actor.state_dict(), path)
        return path

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Algorithm, storage, collection state, RNG and the position in the current pass.

        Resuming is exact between passes, and inside one when the storage's state holds the
        pass's data and its minibatches depend only on the RNG; otherwise (e.g. an on-policy
        storage whose state is empty) the resumed worker drops the rest of that pass."""
        from torchrl_lite.workers.rng import rng_state

        state = {
            "algo": self.algo.state_dict(),
            "version": self.version,
            "frames": self.frames,
            "collection": self.collection.state_dict(),
            "rng": rng_state(),
            "pass": None,
        }
        if hasattr(self.storage, "state_dict"):
            state["storage"] = self.storage.state_dict()
        if self._batches is not None:
            state["pass"] = {"rng": self._gen_rng, "consumed": self._consumed}
        return state

    def load_state_dict(self, state: dict) -> None:
        from torchrl_lite.workers.rng import set_rng_state

        self.algo.load_state_dict(state["algo"])
        self.version, self.frames = int(state["version"]), int(state["frames"])
        if "storage" in state:
            self.storage.load_state_dict(state["storage"])
        self.collection.load_state_dict(state["collection"])
        self._batches = None
        # a storage whose state holds the pass's data (on-policy ones keep statistics only)
        replayable = bool(state.get("storage")) and not getattr(self.storage, "on_policy", False)
        if state["pass"] is not None and not replayable:
            self.storage.after_gradients()  # the rest of that pass is dropped: collect anew
        elif state["pass"] is not None:  # replay the pass's draws up to where it was
            set_rng_state(state["pass"]["rng"])
            self._gen_rng, self._batches = state["pass"]["rng"], self._generate()
            for _ in range(state["pass"]["consumed"]):
                next(self._batches)
            self._consumed = state["pass"]["consumed"]
        set_rng_state(state["rng"])

    def shutdown(self) -> None:
        """Stop the collection (its workers) and leave the all-reduce group, if any."""
        self.collection.shutdown()
        dist = sys.modules.get("torch.distributed")  # never imported here: only if in use
        with contextlib.suppress(Exception):  # best effort, also at interpreter exit
            if dist is not None and dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
