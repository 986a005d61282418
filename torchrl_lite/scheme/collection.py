"""How a gradient worker gets its data: in-process, or from N Ray collection workers.

``LocalCollection`` steps a ``SyncDataCollector`` on the gradient worker's own acting
policy (the 1/1 mode: no copy of the weights, no Ray). ``RemoteCollection`` drives N
``RolloutWorker`` Ray actors:

* synchronous: a round sends the current weights (made once per version, see
  ``transport.weights_message``) to every healthy worker that does not hold them yet and
  gathers their batches, in worker order (so a seeded run repeats). With preemption
  thresholds (``fraction_workers`` < 1), once that fraction of the workers has delivered,
  the others are asked to return what they hold, at least ``fraction_samples`` of a batch.
* the workers on this process's node are sent ``collect`` over a shared-memory channel
  (``collectors/distributed/channel.py``, the group's ``channel="auto"``), the others
  through Ray calls; both give the same batches.
* asynchronous: every worker always has a batch in progress; ``collect`` returns the first
  one ready and resubmits that worker at once with the current weights. The batch's
  ``meta["version"]`` says which update's weights collected it (policy lag).
"""

from __future__ import annotations

import math

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.collectors.distributed.transport import open_result
from torchrl_lite.collectors.distributed.worker import RolloutWorker

__all__ = ["LocalCollection", "RemoteCollection", "build_collector"]


def build_collector(envs, algo, storage, chunks: int = 1) -> SyncDataCollector:
    """The collector of one collection worker: ``storage.steps_per_collection`` steps per
    env per batch (split in ``chunks`` sub-batches for preemption), with
    ``algo.acting_policy``; off-policy algorithms act randomly for ``algo.start_steps``."""
    n_envs = envs.batch_size.numel()
    steps = int(storage.steps_per_collection)
    if steps % chunks:
        raise ValueError(
            f"storage.steps_per_collection={steps} is not divisible by the preemption chunks "
            f"({chunks}); use col_preemption_chunks dividing {steps}."
        )
    frames = steps // chunks * n_envs
    start = 0 if getattr(algo, "on_policy", True) else int(getattr(algo, "start_steps", 0) or 0)
    return SyncDataCollector(
        envs,
        algo.acting_policy,
        frames_per_batch=frames,
        init_random_frames=math.ceil(start / frames) * frames if start else None,
    )


class LocalCollection:
    """One collector in this process, on the gradient worker's own policy."""

    def __init__(self, envs, algo, storage):
        collector = build_collector(envs, algo, storage)
        self.worker = RolloutWorker(lambda: (collector, lambda weights: None))
        self.count = 1

    def collect(self, weights_fn, version: int) -> list:
        self.worker.version = version
        return [self.worker.collect()]

    @property
    def alive(self) -> int:
        return 1

    @property
    def restarts(self) -> int:
        return 0

    def state_dict(self) -> dict:
        return {"local": self.worker.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.worker.load_state_dict(state["local"])

    def shutdown(self) -> None:
        self.worker.shutdown()


class RemoteCollection:
    """N Ray collection workers (a ``WorkerGroup`` of ``RolloutWorker``), sync or async.

    Args:
        group: the started ``WorkerGroup``.
        synchronous: gather every worker per round (True) or take the first ready.
        fraction_workers / fraction_samples: the sync preemption thresholds.
    """

    def __init__(self, group, synchronous=True, fraction_workers=1.0, fraction_samples=1.0):
        self.group, self.synchronous = group, synchronous
        self.fraction_workers, self.fraction_samples = fraction_workers, fraction_samples
        self.count = group.count
        self._pending: dict = {}  # async: ref -> index

    def collect(self, weights_fn, version: int) -> list:
        """``[(batch, meta), ...]``; ``weights_fn()`` gives the current weights as sent to
        the workers (``transport.weights_message``: packed, or their ObjectRef)."""
        group = self.group
        while True:
            ready = group.wait_ready()
            if self.synchronous:
                out = self._round(ready, weights_fn, version)
            else:
                out = self._first(ready, weights_fn, version)
            if out:
                return [open_result(result) for result in out]

    def _call_collect(self, index: int, weights_fn, version: int, *args):
        """``collect`` on worker ``index``, with the weights if it does not hold ``version``
        yet (a restarted worker gets them again)."""
        weights = weights_fn() if self.group.needs_weights(index, version) else None
        return self.group.call(index, "collect", weights, version, *args)

    def _round(self, ready, weights_fn, version) -> list:
        group = self.group
        refs = {i: self._call_collect(i, weights_fn, version, self.fraction_samples)
                for i in ready}  # fmt: skip
        if self.fraction_workers >= 1.0:
            return list(group.gather(refs).values())
        need = max(1, math.ceil(self.fraction_workers * len(refs)))
        by_ref = {ref: i for i, ref in refs.items()}
        done, _ = group.wait(list(by_ref), num_returns=need, timeout=group.timeout)
        if len(done) < need:
            group.gather(refs)  # raises the timeout error naming the silent workers
        stops = {i: group.call(i, "preempt") for ref, i in by_ref.items() if ref not in done}
        out = list(group.gather(refs).values())
        group.gather(stops)  # the flags are set before the next round starts
        return out

    def _first(self, ready, weights_fn, version) -> list:
        group = self.group
        busy = set(self._pending.values())
        for index in ready:
            if index not in busy:
                self._pending[self._call_collect(index, weights_fn, version)] = index
        index, result = group.first(self._pending)
        if result is not None and group.ready_flags[index]:
            self._pending[self._call_collect(index, weights_fn, version)] = index
        return [] if result is None else [result]

    @property
    def alive(self) -> int:
        return self.group.alive

    @property
    def restarts(self) -> int:
        return sum(self.group.restarts)

    def state_dict(self) -> dict:
        """The workers' collector and RNG states (sync mode, between rounds)."""
        if not self.synchronous:
            return {}
        refs = {i: self.group.call(i, "state_dict") for i in self.group.ready()}
        return {"remote": self.group.gather(refs)}

    def load_state_dict(self, state: dict) -> None:
        remote = state.get("remote", {})
        refs = {i: self.group.call(i, "load_state_dict", s) for i, s in remote.items()}
        self.group.gather(refs)
        self.group.forget_weights()  # the workers' versions changed: send weights again

    def shutdown(self) -> None:
        self._pending.clear()
        self.group.shutdown()
