"""Scheme: how many processes collect data and compute gradients, and how they talk.

Seed 000's training architecture. ``Scheme`` takes the component factories (see
``notes``/``torchrl_lite.agent``: ``algo_factory(device, actor)``,
``actor_factory(device)``, ``storage_factory(device, actor, algo)``,
``train_envs_factory(device, seed, index_col_worker, index_grad_worker)``) and builds:

* 1 collection and 1 gradient worker: everything in this process; Ray is not imported.
  It repeats a hand-written loop step for step (``GradientWorker``'s docstring).
* N > 1 collection workers: N ``RolloutWorker`` Ray actors feed each gradient worker,
  ``col_communication`` ``"synchronous"`` (rounds, optional preemption thresholds) or
  ``"asynchronous"`` (first batch ready; policy lag tracked).
* M > 1 gradient workers: M ``GradientWorker`` Ray actors; ``grad_communication``
  ``"synchronous"`` averages their gradients before one update in this process,
  ``"asynchronous"`` applies each as it arrives (gradient asynchrony tracked);
  ``decentralized_update=True`` lets the workers all-reduce (torch.distributed, gloo) and
  each apply the average: no central update.

Life cycle: ``shutdown()`` (or leaving ``with Scheme(...) as scheme:``, or the Learner's
``close()``) stops the workers; a Scheme that is no longer referenced stops them by
itself (nothing in it points back at it, so CPython frees it at once), and its finaliser
never starts or waits on Ray. When the CPUs its workers need are held by another Scheme
of this process still referenced (a notebook cell run again builds the new Scheme before
the old one is dropped), the workers start at the first call that needs them instead of
at construction; if that one still holds them then, the error names it.

Weights move once per update, packed in one buffer (``collectors.distributed.transport``:
inline in the calls when small, else one ``ray.put`` read by every worker); batches come
back packed the same way and are rebuilt as TensorDicts; gradients move as tensor lists.
``step()`` is one update (one minibatch).
"""

from __future__ import annotations

import contextlib
import time

import torch

from torchrl_lite._utils import did_you_mean
from torchrl_lite.collectors.distributed.channel import check_channel
from torchrl_lite.collectors.distributed.ray_session import user_site
from torchrl_lite.collectors.distributed.transport import weights_message
from torchrl_lite.scheme.gradient_worker import GradientWorker
from torchrl_lite.workers.pickling import check_picklable

__all__ = ["Scheme"]

MODES = ("synchronous", "asynchronous")
_FACTORIES = ("algo_factory", "actor_factory", "storage_factory", "train_envs_factory")


def _check_mode(option: str, value) -> str:
    if value not in MODES:
        hint = did_you_mean(str(value), MODES)
        raise ValueError(
            f"{option}={value!r} is not a communication mode; valid: {list(MODES)}.{hint}"
        )
    return value


def _check_count(option: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{option} must be an int >= 1, got {value!r}.")
    if value < 1:
        raise ValueError(
            f"{option}={value} must be >= 1 (1 runs that group in this process, without Ray)."
        )
    return value


def _check_fraction(option: str, value) -> float:
    if not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError(f"{option}={value!r} must be a fraction in (0, 1].")
    return float(value)


def _recorder(events: list):
    """``on_event`` for the workers: appends ``(time, message)`` to ``events`` (a closure
    over the list, not a method of the Scheme, so the workers hold no reference to it)."""

    def on_event(message: str) -> None:
        events.append((time.time(), message))

    return on_event


class Scheme:
    """The training architecture: collection and gradient workers, sync or async.

    Args:
        algo_factory, actor_factory, storage_factory, train_envs_factory: the component
            factories (``create_factory`` of the agent's classes).
        test_envs_factory: kept for evaluation (optional).
        col_remote_workers: collection workers per gradient worker (1: in its process).
        col_communication: ``"synchronous"`` or ``"asynchronous"``.
        col_worker_resources: Ray actor options per collection worker.
        col_fraction_workers: sync only: a round ends once this fraction of the workers
            delivered (the others are preempted).
        col_fraction_samples: what a preempted worker must have collected first.
        col_preemption_chunks: a collection batch is gathered in this many pieces, the
            points where a preempted worker may stop.
        col_channel: ``"auto"``: collection workers on the gradient worker's node are sent
            their batches' requests and return the batches over a shared-memory channel
            (no Ray call per batch; ``collectors/distributed/channel.py``), those on other
            nodes through Ray calls; ``"ray"``: Ray calls for all.
        grad_remote_workers: gradient workers (1: in this process).
        grad_communication: ``"synchronous"`` or ``"asynchronous"``.
        grad_worker_resources: Ray actor options per gradient worker.
        decentralized_update: sync grad workers all-reduce their gradients (gloo) and
            each applies them (no central update).
        seed: the run's seed (env seeds differ per gradient/collection worker and env).
        device: where the components live.
        max_worker_restarts: restarts per worker before giving up with an error.
        worker_timeout: seconds a worker call may take before ``TimeoutError``.

    A context manager: ``with Scheme(...) as scheme:`` shuts it down on leaving.

    Example:
        >>> Scheme(None, None, None, None, col_communication="sync")
        Traceback (most recent call last):
        ...
        ValueError: col_communication='sync' is not a communication mode; valid: ['synchronous', 'asynchronous'].
    """

    def __init__(  # noqa: PLR0913 (seed 000's signature)
        self,
        algo_factory,
        actor_factory,
        storage_factory,
        train_envs_factory,
        test_envs_factory=None,
        col_remote_workers: int = 1,
        col_communication: str = "synchronous",
        col_worker_resources: dict | None = None,
        col_fraction_workers: float = 1.0,
        col_fraction_samples: float = 1.0,
        col_preemption_chunks: int = 1,
        col_channel: str = "auto",
        grad_remote_workers: int = 1,
        grad_communication: str = "synchronous",
        grad_worker_resources: dict | None = None,
        decentralized_update: bool = False,
        seed: int = 0,
        device="cpu",
        max_worker_restarts: int = 3,
        worker_timeout: float = 300.0,
    ):
        self.col_communication = _check_mode("col_communication", col_communication)
        self.grad_communication = _check_mode("grad_communication", grad_communication)
        self.col_workers = _check_count("col_remote_workers", col_remote_workers)
        self.grad_workers = _check_count("grad_remote_workers", grad_remote_workers)
        _check_count("col_preemption_chunks", col_preemption_chunks)
        check_channel("col_channel", col_channel)
        self.col_fraction_workers = _check_fraction("col_fraction_workers", col_fraction_workers)
        self.col_fraction_samples = _check_fraction("col_fraction_samples", col_fraction_samples)
        if self.col_fraction_workers < 1.0 and self.col_communication != "synchronous":
            raise ValueError(
                "col_fraction_workers < 1 (preemption) is for col_communication="
                "'synchronous'; asynchronous collection never waits for a round."
            )
        if decentralized_update and (self.grad_workers < 2 or grad_communication != "synchronous"):
            raise ValueError(
                "decentralized_update=True needs grad_remote_workers >= 2 and "
                f"grad_communication='synchronous', got {grad_remote_workers} and "
                f"{grad_communication!r}."
            )
        factories = dict(
            zip(_FACTORIES, (algo_factory, actor_factory, storage_factory, train_envs_factory))
        )
        for name, factory in factories.items():
            if not callable(factory):
                raise TypeError(
                    f"{name} must be a callable (a create_factory result), got {factory!r}."
                )
        if test_envs_factory is not None and not callable(test_envs_factory):
            raise TypeError(
                f"test_envs_factory must be a callable or None, got {test_envs_factory!r}."
            )
        self.factories, self.test_envs_factory = factories, test_envs_factory
        self.seed, self.device = int(seed), torch.device(device)
        self.decentralized = bool(decentralized_update)
        self.col_resources = dict(col_worker_resources or {"num_cpus": 1})
        self.grad_resources = dict(grad_worker_resources or {"num_cpus": 1})
        self.max_restarts, self.timeout = int(max_worker_restarts), float(worker_timeout)
        self.events: list[tuple[float, str]] = []
        self.version = 0  # updates applied
        self.remote = self.col_workers > 1 or self.grad_workers > 1
        self._grad_asynchrony: list[int] = []
        self._col_options = {
            "resources": self.col_resources,
            "fraction_workers": self.col_fraction_workers,
            "fraction_samples": self.col_fraction_samples,
            "chunks": col_preemption_chunks,
            "max_restarts": self.max_restarts,
            "timeout": self.timeout,
            "channel": col_channel,
        }
        self.local = self.group = None
        self._closed = False
        self._started = False
        if self.grad_workers > 1 and getattr(actor_factory, "kwargs", {}).get("normalize_obs"):
            raise ValueError(
                f"grad_remote_workers={self.grad_workers} with an actor built with "
                f"normalize_obs=True: the observation statistics are updated by the one "
                f"gradient worker; use grad_remote_workers=1 or normalize_obs=False."
            )
        self._on_event = _recorder(self.events)
        self._owner = (
            f"a Scheme (col_remote_workers={self.col_workers}, col_communication="
            f"{self.col_communication!r}, grad_remote_workers={self.grad_workers}) built at "
            f"{user_site()} (close it with learner.close() or scheme.shutdown(), or build it "
            f"in a `with` block)"
        )
        self._col_options["owner"] = self._owner
        if not self.remote:
            self.local = GradientWorker(factories, 0, self.seed, self.device,
                                        on_event=self._on_event)  # fmt: skip
            self._started = True
            return
        from torchrl_lite.collectors.distributed.ray_session import (
            ResourcesHeldError,
            require_ray,
        )

        check_picklable(self.factories)
        require_ray()
        try:
            self._check_resources()
        except ResourcesHeldError as err:
            if not err.holders:  # held by other processes: nothing here will free them
                raise
            self._on_event(
                "the workers start at the first step: the CPUs they need are held by "
                + "; ".join(owner for owner, _ in err.holders)
            )
            return
        self._start_remote()

    # -- construction ---------------------------------------------------------------------
    def _check_resources(self) -> None:
        from torchrl_lite.collectors.distributed.ray_session import check_resources

        col = self.col_workers if self.col_workers > 1 else 0
        requests = [("col_worker_resources", col * self.grad_workers, self.col_resources)]
        if self.grad_workers > 1:
            requests.append(("grad_worker_resources", self.grad_workers, self.grad_resources))
        check_resources([r for r in requests if r[1]])

    def _ensure_started(self) -> None:
        """Start the workers if construction left that to the first call (see the module
        docstring); raises if the CPUs are still held."""
        if self._closed:
            raise RuntimeError("this Scheme was shut down: build a new Scheme.")
        if self._started:
            return
        self._check_resources()
        try:
            self._start_remote()
        except BaseException:
            self.shutdown()  # a failed start is not retried: its error stands
            raise

    def _start_remote(self) -> None:
        self._started = True
        if self.grad_workers == 1:
            self.local = GradientWorker(
                self.factories, 0, self.seed, self.device, self.col_workers,
                self.col_communication, self._col_options, on_event=self._on_event,
            )  # fmt: skip
            return
        from torchrl_lite.collectors.distributed.ray_workers import WorkerGroup

        # the central copy that applies the gradients (not with decentralized updates)
        torch.manual_seed(self.seed)
        self.actor = self.factories["actor_factory"](self.device)
        self.algo = self.factories["algo_factory"](self.device, self.actor)
        # what the workers are built from, bound here: a closure over self would make a
        # reference cycle (self -> group -> args_for -> self) that only the GC breaks
        head = (self.factories,)
        tail = (self.seed, "cpu", self.col_workers, self.col_communication, self._col_options)

        def args_for(index, restarts):
            return head + (index, *tail, restarts), {}

        self.group = WorkerGroup(
            "gradient worker", GradientWorker, args_for, self.grad_workers, self.grad_resources,
            self.max_restarts, self.timeout, on_event=self._on_event,
            restart_option="max_worker_restarts", owner=self._owner,
        )  # fmt: skip
        self.group.start()
        self._pending: dict = {}
        self._weights_ref = None
        if self.decentralized:
            self._join_process_group()

    def _join_process_group(self) -> None:
        import ray

        address = ray.get(self.group.call(0, "free_address"))
        # fetched once, before any worker blocks in the rendezvous (asking worker 0 for its
        # weights while it waits for the others would deadlock)
        weights = weights_message(self.get_weights())
        refs = {
            i: self.group.call(i, "init_process_group", address, i, self.grad_workers, weights)
            for i in range(self.grad_workers)
        }
        self.group.gather(refs)

    # -- one update -------------------------------------------------------------------------
    def step(self) -> dict:
        """One update; returns what happened (frames, returns, lags, timings)."""
        if self._closed:
            raise RuntimeError("Scheme.step() after shutdown(): build a new Scheme.")
        self._ensure_started()
        start = time.perf_counter()
        if self.group is None:
            grads, info = self.local.step()
            t = time.perf_counter()
            self.local.apply_gradients(grads)
            info["update_s"] = time.perf_counter() - t
            self.version = self.local.version
            infos = [info]
        elif self.decentralized:
            infos = self._step_decentralized()
        elif self.grad_communication == "synchronous":
            infos = self._step_sync()
        else:
            infos = self._step_async()
        out = _merge(infos)
        out["step_s"] = time.perf_counter() - start
        out["version"] = self.version
        return out

    def _weights(self):
        if self._weights_ref is None or self._weights_ref[0] != self.version:
            self._weights_ref = (self.version, weights_message(self.algo.get_weights()))
        return self._weights_ref[1]

    def _step_sync(self) -> list:
        while True:
            ready = self.group.wait_ready()
            weights = self._weights()
            refs = {i: self.group.call(i, "step", weights, self.version) for i in ready}
            results = self.group.gather(refs)
            if results:
                break
        grads = _average([g for g, _ in results.values()])
        t = time.perf_counter()
        self.algo.apply_gradients(grads)
        self.version += 1
        infos = [info for _, info in results.values()]
        infos[0]["update_s"] = time.perf_counter() - t
        self._grad_asynchrony.append(0)
        return infos

    def _step_async(self) -> list:
        while True:
            busy = set(self._pending.values())
            for i in self.group.wait_ready():
                if i not in busy:
                    self._pending[self.group.call(i, "step", self._weights(), self.version)] = i
            index, result = self.group.first(self._pending)
            if result is not None:
                break
        grads, info = result
        t = time.perf_counter()
        info["grad_asynchrony"] = [self.version - info["version"]]
        self.algo.apply_gradients(grads)
        self.version += 1
        info["update_s"] = time.perf_counter() - t
        if self.group.ready_flags[index]:
            self._pending[self.group.call(index, "step", self._weights(), self.version)] = index
        return [info]

    def _step_decentralized(self) -> list:
        refs = {i: self.group.call(i, "step_allreduce") for i in range(self.grad_workers)}
        results = self.group.gather(refs)
        if len(results) < self.grad_workers:
            raise RuntimeError(
                "a gradient worker of the decentralized update failed; the all-reduce group "
                "cannot continue without it (see the events above). Use the central update "
                "(decentralized_update=False) for fault tolerance."
            )
        self.version += 1
        return list(results.values())

    # -- parameters, weights, status ----------------------------------------------------------
    def get_weights(self) -> dict:
        """The current weights (of the updating copy)."""
        self._ensure_started()
        if self.group is None:
            return self.local.get_weights()
        if self.decentralized:
            import ray

            return ray.get(self.group.call(0, "get_weights"))
        return self.algo.get_weights()

    def update_algorithm_parameter(self, name: str, value) -> None:
        """Set an algorithm parameter (``"lr"``, ``"clip_param"``, ...) on every worker."""
        self._ensure_started()
        if self.group is None:
            self.local.update_algorithm_parameter(name, value)
            return
        if not self.decentralized:
            self.algo.update_algorithm_parameter(name, value)  # raises on a bad name
        refs = {
            i: self.group.call(i, "update_algorithm_parameter", name, value)
            for i in self.group.ready()
        }
        self.group.gather(refs)

    def save_actor(self, path) -> str:
        """Write the actor's ``state_dict`` (what ``restart_model=`` loads) to ``path``."""
        self._ensure_started()
        if self.group is None:
            return self.local.save_actor(str(path))
        if self.decentralized:
            self.actor.load_state_dict(_actor_part(self.get_weights(), self.actor))
        torch.save(self.actor.state_dict(), str(path))
        return str(path)

    def status(self) -> dict:
        """``{"col_alive", "col_workers", "grad_alive", "grad_workers", "restarts"}``."""
        self._ensure_started()
        if self.group is None:
            s = self.local.status()
            return {"col_alive": s["alive"], "col_workers": self.col_workers, "grad_alive": 1,
                    "grad_workers": 1, "restarts": s["restarts"]}  # fmt: skip
        import ray

        refs = {i: self.group.call(i, "status") for i in self.group.ready()}
        try:
            inner = list(ray.get(list(refs.values()), timeout=self.timeout))
        except Exception:
            inner = []
        return {
            "col_alive": sum(s["alive"] for s in inner),
            "col_workers": self.col_workers * self.grad_workers,
            "grad_alive": self.group.alive,
            "grad_workers": self.grad_workers,
            "restarts": sum(self.group.restarts) + sum(s["restarts"] for s in inner),
        }

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs: exact for the in-process gradient worker (and
        its sync collection workers); with remote gradient workers, the central algorithm
        and the update count (their storages restart empty)."""
        self._ensure_started()
        if self.group is None:
            return {"version": self.version, "local": self.local.state_dict()}
        if self.decentralized:
            return {"version": self.version, "weights": self.get_weights()}
        return {"version": self.version, "algo": self.algo.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self._ensure_started()
        self.version = int(state["version"])
        if self.group is None:
            self.local.load_state_dict(state["local"])
            return
        if self.decentralized:
            refs = {i: self.group.call(i, "set_weights", state["weights"], self.version)
                    for i in range(self.grad_workers)}  # fmt: skip
            self.group.gather(refs)
            return
        self.algo.load_state_dict(state["algo"])
        self._weights_ref = None

    def shutdown(self) -> None:
        """Stop every worker (idempotent); also on Ctrl-C through the Learner. Safe after
        ``ray.shutdown()`` and in a finaliser: it never starts Ray nor waits on it."""
        if self._closed:
            return
        self._closed = True
        if self.group is not None:
            self.group.shutdown()
        if self.local is not None:
            self.local.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __del__(self):
        with contextlib.suppress(BaseException):  # a finaliser never raises
            self.shutdown()


def _average(grad_lists: list) -> list:
    """Element-wise mean of the workers' gradient lists (None where all are None)."""
    out = []
    for grads in zip(*grad_lists):
        present = [g for g in grads if g is not None]
        out.append(torch.stack(present).mean(0) if present else None)
    return out


def _actor_part(weights: dict, actor) -> dict:
    keys = set(actor.state_dict())
    return {k: v for k, v in weights.items() if k in keys} or weights


def _merge(infos: list) -> dict:
    """One info dict from the gradient workers' (sums and concatenations)."""
    out = {"frames": 0, "returns": [], "policy_lag": [], "grad_asynchrony": [], "collect_s": 0.0,
           "col_frames_s": 0.0, "grad_s": 0.0, "update_s": 0.0, "algo": {}}  # fmt: skip
    for info in infos:
        for key in ("frames", "collect_s", "col_frames_s", "grad_s", "update_s"):
            out[key] += info.get(key, 0)
        for key in ("returns", "policy_lag", "grad_asynchrony"):
            out[key] += info.get(key, [])
        for key, value in info.get("algo", {}).items():
            out["algo"][key] = out["algo"].get(key, 0.0) + value / len(infos)
    out["grad_s"] /= max(1, len(infos))
    return out
