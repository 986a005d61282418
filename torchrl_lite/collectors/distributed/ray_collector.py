"""RayCollector: TorchRL's collector interface over N remote collectors.

Each remote worker is a ``RolloutWorker`` Ray actor (the Scheme's collection worker) that
runs a collector (``SyncDataCollector`` by default, or a ``Multi*`` one over several env
processes: ``collector_class``) on its own copy of the policy. ``update_policy_weights_()``
packs the local policy's weights once (``transport.weights_message``: sent inline when
small, else one ``ray.put``); every worker installs them with its next batch, and a
worker that holds them already is not sent them again. Batches come back packed in one
buffer and are rebuilt as TensorDicts on the driver. Workers that die are restarted with
the current weights (the ``WorkerGroup`` rules: restart cap, timeout), and collection
goes on with the others.

With ``channel="auto"`` (default) the workers on the driver's node are not sent a Ray call
per batch: weights and batches move through shared memory and a Unix socket served by a
thread in the actor (``channel.py``); Ray still places, starts and restarts them, and
serves the workers on other nodes. ``channel="ray"`` uses Ray calls for all.
"""

from __future__ import annotations

import contextlib

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite.collectors._args import check_int
from torchrl_lite.collectors._base import DataCollectorBase
from torchrl_lite.collectors._dispatch import register_backend
from torchrl_lite.collectors.collectors import SyncDataCollector
from torchrl_lite.collectors.distributed.channel import check_channel
from torchrl_lite.collectors.distributed.ray_session import (
    check_resources,
    require_ray,
    user_site,
)
from torchrl_lite.collectors.distributed.ray_workers import WorkerGroup
from torchrl_lite.collectors.distributed.transport import open_result, weights_message
from torchrl_lite.collectors.distributed.worker import RolloutWorker
from torchrl_lite.collectors.multi import MultiaSyncDataCollector, MultiSyncDataCollector
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.workers.pickling import check_picklable

__all__ = ["RayCollector"]

_CLASSES = {"single": SyncDataCollector, "sync": MultiSyncDataCollector,
            "async": MultiaSyncDataCollector}  # fmt: skip
_CLASS_NAMES = {name: cls.__name__ for name, cls in _CLASSES.items()}


def _collector_class(value):
    """The remote collector class: a collector class, or TorchRL's short names."""
    if isinstance(value, str):
        if value not in _CLASS_NAMES:
            raise ValueError(
                f"RayCollector: collector_class={value!r} is not a collector name; valid: "
                f"{sorted(_CLASS_NAMES)} or a collector class (e.g. SyncDataCollector)."
            )
        return _CLASSES[value]
    if not (isinstance(value, type) and issubclass(value, DataCollectorBase)):
        raise TypeError(
            f"RayCollector: collector_class must be a collector class (SyncDataCollector, "
            f"MultiSyncDataCollector, MultiaSyncDataCollector) or one of "
            f"{sorted(_CLASS_NAMES)}, got {value!r}."
        )
    return value


def _per_collector(name: str, value, count: int | None, check) -> list:
    """``value`` as one entry per remote collector: a list is taken as it is (its length
    must be ``count`` when given), anything else is repeated."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"RayCollector: {name} is an empty list; give one per collector.")
        if count is not None and len(value) != count:
            raise ValueError(
                f"RayCollector: {name} lists {len(value)} entries but num_collectors={count}; "
                f"give one per remote collector, or a single one for all."
            )
        items = list(value)
    else:
        items = [value] * (count or 1)
    for item in items:
        check(item)
    return items


def _check_env(fn) -> None:
    if not (isinstance(fn, EnvBase) or callable(fn)):
        raise TypeError(
            f"RayCollector: create_env_fn must be an env, a callable returning one, or a list "
            f"of them (one per remote collector), got {fn!r}."
        )


def _check_dict(name):
    def check(item):
        if item is not None and not isinstance(item, dict):
            raise TypeError(
                f"RayCollector: {name} must be a dict or a list of dicts, got {item!r}."
            )

    return check


def _worker_make(cls, create_env_fn, policy, frames, kwargs, seed, envs_per_collector):
    """The remote worker's ``make``: a ``cls`` collector (Multi* classes get
    ``envs_per_collector`` copies of the env factory) and its weight setter."""

    def make():
        envs = create_env_fn
        if cls.__name__ != "SyncDataCollector":
            envs = [create_env_fn] * envs_per_collector
        collector = cls(envs, policy, frames_per_batch=frames, **kwargs)
        if seed is not None:
            collector.set_seed(seed)
        return collector, collector.update_policy_weights_

    return make


class RayCollector(DataCollectorBase):
    """Collect with ``num_collectors`` remote collectors on Ray, TorchRL's signature.

    With ``sync=True`` each batch is the concatenation (along the env dimension) of one
    batch of ``frames_per_batch / num_collectors`` frames from every worker, gathered with
    the same weights; with ``sync=False`` each batch is the first ready worker's
    ``frames_per_batch`` frames, and that worker starts its next batch at once.

    Args:
        create_env_fn: an env, a callable returning one (or the env class), or a list of
            them, one per remote collector; sent to the workers.
        policy: the policy (a TensorDict module); each worker runs a copy of it.
        frames_per_batch: frames per yielded batch.
        total_frames: frames in all (-1: endless).
        num_collectors: remote collectors (default: the length of a ``create_env_fn``
            list, else 1).
        sync: see above.
        collector_class: the collector each worker runs: ``SyncDataCollector`` (default),
            ``MultiSyncDataCollector`` or ``MultiaSyncDataCollector`` (or ``"single"``,
            ``"sync"``, ``"async"``).
        collector_kwargs: more arguments for that collector: one dict, or a list of dicts
            (one per remote collector).
        num_workers_per_collector: env copies (processes) of a ``Multi*`` collector.
        remote_configs: Ray actor options per worker (default ``{"num_cpus": 1}``), one
            dict or a list of dicts.
        ray_init_config: ``ray.init(**ray_init_config)`` if no Ray session runs yet.
        update_after_each_batch: push the local policy's weights before every batch.
        max_weight_update_interval: a worker that collected more than this many batches
            since it last got weights is sent the local policy's current ones with its next
            request (0: every batch; -1: only ``update_policy_weights_()``).
        seed: worker ``i``'s envs get ``set_seed(seed + 1000 * i)`` (None: unseeded).
        max_restarts: restarts per worker before an error.
        timeout: seconds a batch may take before ``TimeoutError``.
        channel: ``"auto"`` or ``"ray"`` (see the module docstring).
        postproc, split_trajs: as for ``SyncDataCollector``, applied on the driver.
        replay_buffer: every worker's batches are written into it as they arrive, and
            iterating yields None.

    A context manager (``with RayCollector(...) as collector:``); one that is no longer
    referenced stops its workers by itself.

    Example (starts Ray; see tests/collectors/test_distributed.py)::

        collector = RayCollector([make_env, make_env], policy, frames_per_batch=200,
                                 total_frames=2000)
        for data in collector:
            ...  # train the local policy
            collector.update_policy_weights_()
        collector.shutdown()
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        create_env_fn,
        policy=None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        num_collectors: int | None = None,
        sync: bool = True,
        collector_class=None,
        collector_kwargs: dict | list | None = None,
        num_workers_per_collector: int = 1,
        remote_configs: dict | list | None = None,
        ray_init_config: dict | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        seed: int | None = None,
        max_restarts: int = 3,
        timeout: float = 300.0,
        channel: str = "auto",
        postproc=None,
        split_trajs: bool = False,
        replay_buffer=None,
    ):
        owner = type(self).__name__
        self._init_common(
            frames_per_batch, total_frames, None, split_trajs, postproc, replay_buffer
        )
        self.closed = True  # until the workers are up (shutdown() has nothing to stop)
        if num_collectors is not None and (
            isinstance(num_collectors, bool)
            or not isinstance(num_collectors, int)
            or num_collectors < 1
        ):
            raise ValueError(
                f"{owner}: num_collectors must be an int >= 1, got {num_collectors!r}."
            )
        envs = _per_collector("create_env_fn", create_env_fn, num_collectors, _check_env)
        count = len(envs)
        kwargs = _per_collector("collector_kwargs", collector_kwargs, count,
                                _check_dict("collector_kwargs"))  # fmt: skip
        resources = _per_collector("remote_configs", remote_configs, count,
                                   _check_dict("remote_configs"))  # fmt: skip
        resources = [dict(r or {"num_cpus": 1}) for r in resources]
        cls = _collector_class(SyncDataCollector if collector_class is None else collector_class)
        check_int("num_workers_per_collector", num_workers_per_collector, 1, owner)
        check_int("max_weight_update_interval", max_weight_update_interval, -1, owner)
        if ray_init_config is not None and not isinstance(ray_init_config, dict):
            raise TypeError(
                f"{owner}: ray_init_config must be a dict of ray.init() arguments, got "
                f"{ray_init_config!r}."
            )
        if sync and frames_per_batch % count:
            raise ValueError(
                f"{owner}: with sync=True, frames_per_batch={frames_per_batch} must be divisible "
                f"by num_collectors={count} (each worker collects an equal share)."
            )
        check_channel("channel", channel)
        check_picklable({"create_env_fn": envs, "policy": policy})
        self.policy, self.sync = policy, bool(sync)
        self.num_collectors, self.collector_class = count, cls
        self.update_after_each_batch = bool(update_after_each_batch)
        self.max_weight_update_interval = max_weight_update_interval
        self.events: list[str] = []
        require_ray(ray_init_config)
        per_worker = isinstance(remote_configs, (list, tuple))
        check_resources([("remote_configs", 1, r) for r in resources] if per_worker
                        else [("remote_configs", count, resources[0])])  # fmt: skip
        frames = frames_per_batch // count if sync else frames_per_batch
        kwargs = [dict(k or {}) for k in kwargs]
        per = num_workers_per_collector

        def args_for(index, restarts):
            s = None if seed is None else seed + 1000 * index + 100_000 * restarts
            make = _worker_make(cls, envs[index], policy, frames, kwargs[index], s, per)
            return (make,), {"pack_batches": True}

        self.group = WorkerGroup(
            "remote collector", RolloutWorker, args_for, count,
            resources if per_worker else resources[0],
            max_restarts, timeout, on_event=self.events.append, channel=channel,
            owner=f"a RayCollector (num_collectors={count}) built at {user_site()} (close it "
            f"with collector.shutdown(), or build it in a `with` block)",
        )  # fmt: skip
        self.group.start()
        self.closed = False
        self._version, self._weights, self._made_at = 0, None, -1
        self._since_weights = [0] * count  # batches each worker collected since its weights
        self._pending: dict = {}
        if policy is not None:
            self.update_policy_weights_()

    # -- weights --------------------------------------------------------------------------
    def update_policy_weights_(self, weights=None) -> None:
        """Send the local policy's weights (or ``weights``) to every worker, once: each
        installs them with its next batch."""
        self._check_open()
        if weights is None:
            if self.policy is None:
                return
            weights = TensorDict.from_module(self.policy).data
        elif isinstance(weights, torch.nn.Module):
            weights = TensorDict.from_module(weights).data
        self._version += 1
        self._weights = weights_message(weights)  # a copy: later changes are not sent
        self._made_at = self._iter

    def _submit(self, index: int):
        """``collect`` on worker ``index``, with the weights if it does not hold them yet
        (a restarted worker gets them again). A worker past ``max_weight_update_interval``
        gets the local policy's current weights (taken once per batch)."""
        interval = self.max_weight_update_interval
        if 0 <= interval < self._since_weights[index] and self._made_at != self._iter:
            self.update_policy_weights_()
        send = self._weights is not None and self.group.needs_weights(index, self._version)
        if send:
            self._since_weights[index] = 0
        return self.group.call(index, "collect", self._weights if send else None, self._version)

    # -- collection -----------------------------------------------------------------------
    def _collect_batch(self, random: bool) -> TensorDictBase:
        if self.update_after_each_batch:
            self.update_policy_weights_()
        while True:
            ready = self.group.wait_ready()
            if self.sync:
                results = self.group.gather({i: self._submit(i) for i in ready})
                for i in results:
                    self._since_weights[i] += 1
                if results:  # the healthy workers' batches (a failed one is restarting)
                    batches = [open_result(r)[0] for r in results.values()]
                    return batches[0] if len(batches) == 1 else torch.cat(batches, dim=0)
                continue
            busy = set(self._pending.values())
            for i in ready:
                if i not in busy:
                    self._pending[self._submit(i)] = i
            index, result = self.group.first(self._pending)
            self._since_weights[index] += result is not None
            if self.group.ready_flags[index]:
                self._pending[self._submit(index)] = index
            if result is not None:
                return open_result(result)[0]

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed worker ``i``'s envs with ``seed + 1000 * i``."""
        self._check_open()
        self.group.gather({i: self.group.call(i, "set_seed", seed + 1000 * i)
                           for i in self.group.ready()})  # fmt: skip
        return seed + 1000 * self.num_collectors

    def state_dict(self) -> dict:
        return {"frames": self._frames, "iter": self._iter}

    def load_state_dict(self, state_dict: dict) -> None:
        self._frames, self._iter = int(state_dict["frames"]), int(state_dict["iter"])

    def shutdown(self) -> None:
        """Stop every remote worker (idempotent; safe after ``ray.shutdown()``)."""
        if not self.closed:
            self._pending.clear()
            self.group.shutdown()
        self.closed = True

    def __del__(self):
        with contextlib.suppress(BaseException):  # a finaliser never raises
            self.shutdown()


def _build_ray(*args, sync, **kwargs) -> RayCollector:
    return RayCollector(*args, sync=bool(sync), **kwargs)


register_backend("ray", _build_ray)  # Collector(..., backend="ray")
