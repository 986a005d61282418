"""RayCollector: TorchRL's collector interface over N remote ``SyncDataCollector``s.

Each remote worker is a ``RolloutWorker`` Ray actor (the Scheme's collection worker) that
runs a ``SyncDataCollector`` on its own copy of the policy. ``update_policy_weights_()``
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

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite.collectors._base import DataCollectorBase
from torchrl_lite.collectors.distributed.channel import check_channel
from torchrl_lite.collectors.distributed.ray_workers import (
    WorkerGroup,
    check_resources,
    require_ray,
)
from torchrl_lite.collectors.distributed.transport import open_result, weights_message
from torchrl_lite.collectors.distributed.worker import RolloutWorker

__all__ = ["RayCollector"]


def _worker_make(create_env_fn, policy, frames, kwargs, seed):
    def make():
        from torchrl_lite.collectors import SyncDataCollector

        collector = SyncDataCollector(create_env_fn, policy, frames_per_batch=frames, **kwargs)
        if seed is not None:
            collector.set_seed(seed)
        return collector, collector.update_policy_weights_

    return make


class RayCollector(DataCollectorBase):
    """Collect with ``num_collectors`` remote ``SyncDataCollector``s on Ray.

    With ``sync=True`` each batch is the concatenation (along the env dimension) of one
    batch of ``frames_per_batch / num_collectors`` frames from every worker, gathered with
    the same weights; with ``sync=False`` each batch is the first ready worker's
    ``frames_per_batch`` frames, and that worker starts its next batch at once.

    Args:
        create_env_fn: a callable returning an env (or the env class), sent to the workers.
        policy: the policy (a TensorDict module); each worker runs a copy of it.
        frames_per_batch: frames per yielded batch.
        total_frames: frames in all (-1: endless).
        num_collectors: remote workers.
        sync: see above.
        collector_kwargs: more ``SyncDataCollector`` arguments for the workers.
        remote_configs: Ray actor options per worker (default ``{"num_cpus": 1}``).
        update_after_each_batch: push the local policy's weights before every batch.
        seed: worker ``i``'s envs get ``set_seed(seed + 1000 * i)`` (None: unseeded).
        max_restarts: restarts per worker before an error.
        timeout: seconds a batch may take before ``TimeoutError``.
        channel: ``"auto"`` or ``"ray"`` (see the module docstring).

    Example (starts Ray; see tests/collectors/test_distributed.py)::

        collector = RayCollector(lambda: GymEnv("Pendulum-v1"), policy, frames_per_batch=200,
                                 total_frames=2000, num_collectors=2)
        for data in collector:
            ...  # train the local policy
            collector.update_policy_weights_()
        collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn,
        policy=None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        num_collectors: int = 2,
        sync: bool = True,
        collector_kwargs: dict | None = None,
        remote_configs: dict | None = None,
        update_after_each_batch: bool = False,
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
        if (
            isinstance(num_collectors, bool)
            or not isinstance(num_collectors, int)
            or num_collectors < 1
        ):
            raise ValueError(
                f"{owner}: num_collectors must be an int >= 1, got {num_collectors!r}."
            )
        if sync and frames_per_batch % num_collectors:
            raise ValueError(
                f"{owner}: with sync=True, frames_per_batch={frames_per_batch} must be divisible "
                f"by num_collectors={num_collectors} (each worker collects an equal share)."
            )
        check_channel("channel", channel)
        if not callable(create_env_fn):
            raise TypeError(f"{owner}: create_env_fn must be a callable returning an env.")
        from torchrl_lite.scheme.scheme import check_picklable

        check_picklable({"create_env_fn": create_env_fn, "policy": policy})
        self.policy, self.sync = policy, bool(sync)
        self.num_collectors = num_collectors
        self.update_after_each_batch = bool(update_after_each_batch)
        self.events: list[str] = []
        resources = dict(remote_configs or {"num_cpus": 1})
        require_ray()
        check_resources([("remote_configs", num_collectors, resources)])
        frames = frames_per_batch // num_collectors if sync else frames_per_batch
        kwargs = dict(collector_kwargs or {})

        def args_for(index, restarts):
            s = None if seed is None else seed + 1000 * index + 100_000 * restarts
            return (_worker_make(create_env_fn, policy, frames, kwargs, s),), {"pack_batches": True}

        self.group = WorkerGroup("remote collector", RolloutWorker, args_for, num_collectors,
                                 resources, max_restarts, timeout, on_event=self.events.append,
                                 channel=channel)  # fmt: skip
        self.group.start()
        self._version, self._weights = 0, None
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

    def _submit(self, index: int):
        """``collect`` on worker ``index``, with the weights if it does not hold them yet
        (a restarted worker gets them again)."""
        send = self._weights is not None and self.group.needs_weights(index, self._version)
        return self.group.call(index, "collect", self._weights if send else None, self._version)

    # -- collection -----------------------------------------------------------------------
    def _collect_batch(self, random: bool) -> TensorDictBase:
        if self.update_after_each_batch:
            self.update_policy_weights_()
        while True:
            ready = self.group.wait_ready()
            if self.sync:
                results = self.group.gather({i: self._submit(i) for i in ready})
                if results:  # the healthy workers' batches (a failed one is restarting)
                    batches = [open_result(r)[0] for r in results.values()]
                    return batches[0] if len(batches) == 1 else torch.cat(batches, dim=0)
                continue
            busy = set(self._pending.values())
            for i in ready:
                if i not in busy:
                    self._pending[self._submit(i)] = i
            index, result = self.group.first(self._pending)
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
        """Stop every remote worker."""
        if not self.closed:
            self._pending.clear()
            self.group.shutdown()
        self.closed = True
