"""``DataCollectorBase``: what every collector shares.

The frame budget, iteration (``for data in collector`` / ``collector.next()``), delivery
(``split_trajs``, ``postproc``, ``replay_buffer``), policy-weight checks and the
policy-version methods (``_version.py``). A collector
implements ``_collect_batch(random) -> TensorDict`` plus ``set_seed``,
``update_policy_weights_``, ``state_dict``/``load_state_dict`` and ``shutdown``.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterator

from tensordict import TensorDictBase

from torchrl_lite._utils import logger
from torchrl_lite.collectors._args import check_int
from torchrl_lite.collectors._trajs import TrajectoryAssembler, check_traj_options
from torchrl_lite.collectors._version import VersionTracking
from torchrl_lite.collectors.utils import split_trajectories

__all__ = ["DataCollectorBase"]


class DataCollectorBase(VersionTracking):
    """Frame budget, iteration and delivery shared by every collector (see module doc).

    Every collector is iterated the same way, whatever runs the envs: ``for data in
    collector`` until ``total_frames`` frames, or ``collector.next()``.

    Example:
        >>> from torchrl_lite.collectors import SyncDataCollector
        >>> from torchrl_lite.envs import PendulumEnv
        >>> collector = SyncDataCollector(PendulumEnv(), None, frames_per_batch=10)
        >>> isinstance(collector, DataCollectorBase), collector.next().batch_size
        (True, torch.Size([10]))
    """

    def _init_common(
        self,
        frames_per_batch,
        total_frames,
        init_random_frames,
        split_trajs,
        postproc,
        replay_buffer,
        trajs_per_batch=None,
        traj_format=None,
    ) -> None:
        owner = type(self).__name__
        self.trajs_per_batch, self.traj_format = check_traj_options(
            trajs_per_batch, traj_format, split_trajs, owner
        )
        self._assembler = TrajectoryAssembler()
        self._traj_iter = None
        self._thread = None
        self._stop = threading.Event()
        self.frames_per_batch = check_int("frames_per_batch", frames_per_batch, 1, owner)
        if total_frames is None:
            total_frames = -1
        total_frames = check_int("total_frames", total_frames, -(2**62), owner)
        if total_frames == 0:
            raise ValueError(f"{owner}: total_frames must be > 0, or -1 for endless collection")
        if 0 < total_frames < frames_per_batch:
            raise ValueError(
                f"{owner}: total_frames={total_frames} is smaller than "
                f"frames_per_batch={frames_per_batch}; not even one batch fits. Raise "
                "total_frames or lower frames_per_batch."
            )
        if total_frames > 0 and total_frames % frames_per_batch:
            rounded = math.ceil(total_frames / frames_per_batch) * frames_per_batch
            warnings.warn(
                f"{owner}: total_frames={total_frames} is not a multiple of "
                f"frames_per_batch={frames_per_batch}; {rounded} frames will be collected.",
                stacklevel=3,
            )
        self.total_frames = total_frames if total_frames > 0 else -1
        init = 0 if init_random_frames is None else init_random_frames
        self.init_random_frames = check_int("init_random_frames", init, 0, owner)
        if postproc is not None and not callable(postproc):
            raise TypeError(f"{owner}: postproc must be callable, got {postproc!r}")
        if replay_buffer is not None and not hasattr(replay_buffer, "extend"):
            raise TypeError(f"{owner}: replay_buffer must have an extend() method")
        self.split_trajs = bool(split_trajs)
        self.postproc = postproc
        self.replay_buffer = replay_buffer
        self._frames = 0
        self._iter = 0
        self.closed = False

    # -- what a collector implements -------------------------------------------------
    def _collect_batch(self, random: bool) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _collect_batch")

    # -- iteration -------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            reason = getattr(self, "_failure", None)
            extra = f" It was shut down after a failure: {reason}" if reason else ""
            raise RuntimeError(
                f"{type(self).__name__} was shut down; create a new one to collect more.{extra}"
            )

    def _budget_left(self) -> bool:
        return self.total_frames < 0 or self._frames < self.total_frames

    def _next_batch(self) -> TensorDictBase | None:
        batch = self._collect_batch(self._frames < self.init_random_frames)
        self._frames += batch.numel()
        self._iter += 1
        return self._deliver(batch)

    def iterator(self) -> Iterator[TensorDictBase | None]:
        """Yield batches until ``total_frames`` frames were collected (forever if -1).

        With ``trajs_per_batch=N``, each batch holds N whole trajectories instead (see
        ``_trajs.py``); with a ``replay_buffer``, each complete trajectory is written
        to it flat and ``None`` is yielded once per collected batch.
        """
        self._check_open()
        if self.trajs_per_batch is not None:
            yield from self._trajectory_batches()
            return
        while self._budget_left():
            yield self._next_batch()

    def _trajectory_batches(self) -> Iterator[TensorDictBase | None]:
        while self._budget_left():
            batch = self._collect_batch(self._frames < self.init_random_frames)
            self._frames += batch.numel()
            self._iter += 1
            self._assembler.add(batch)
            if self.replay_buffer is not None:
                if len(self._assembler):
                    self.replay_buffer.extend(self._assembler.pop(None, "cat"))
                yield None
                continue
            while len(self._assembler) >= self.trajs_per_batch:
                out = self._assembler.pop(self.trajs_per_batch, self.traj_format)
                yield out if self.postproc is None else self.postproc(out)

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        return self.iterator()

    def next(self) -> TensorDictBase | None:
        """The next batch (``None`` once ``total_frames`` frames were collected)."""
        self._check_open()
        if self.trajs_per_batch is not None:
            if self._traj_iter is None:
                self._traj_iter = self._trajectory_batches()
            return next(self._traj_iter, None)
        return self._next_batch() if self._budget_left() else None

    def reset(self) -> None:
        """Drop the trajectories held for ``trajs_per_batch`` (collectors that own their
        envs also start fresh episodes)."""
        self._assembler.clear()

    # -- background collection into the replay buffer ------------------------------
    def start(self) -> None:
        """Collect in a background thread into ``replay_buffer`` until ``async_shutdown()``.

        The iteration runs as ``for _ in collector`` would (the frame budget still ends
        it); sample from the buffer meanwhile.
        """
        self._check_open()
        if self.replay_buffer is None:
            raise RuntimeError(
                f"{type(self).__name__}.start() fills the replay buffer in the background; "
                "pass replay_buffer= to the collector (or iterate it instead)."
            )
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError(f"{type(self).__name__} is already collecting in the background.")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run_background, daemon=True)
        self._thread.start()

    def _run_background(self) -> None:
        try:
            for _ in self.iterator():
                if self._stop.is_set():
                    break
        except Exception as err:  # kept for async_shutdown to raise, and logged now: the
            # training loop may be waiting for the buffer to fill
            self._failure = f"{type(err).__name__}: {err}"
            self._background_error = err
            logger.error(
                "%s: background collection stopped (async_shutdown() raises it): %s",
                type(self).__name__,
                self._failure,
                exc_info=err,
            )

    def async_shutdown(self, timeout: float | None = None) -> None:
        """Stop the background collection started by ``start()``, then shut down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.shutdown()
        err = getattr(self, "_background_error", None)
        if err is not None:
            self._background_error = None
            raise RuntimeError(f"background collection failed: {self._failure}") from err

    def __len__(self) -> int:
        if self.total_frames < 0:
            raise TypeError(f"{type(self).__name__} with total_frames=-1 is endless: no len()")
        return math.ceil(self.total_frames / self.frames_per_batch)

    def _deliver(self, batch: TensorDictBase) -> TensorDictBase | None:
        if self.split_trajs:
            batch = split_trajectories(batch)
        if self.postproc is not None:
            batch = self.postproc(batch)
        if self.replay_buffer is None:
            return batch
        ndim = getattr(getattr(self.replay_buffer, "_storage", None), "ndim", 1)
        if batch.batch_dims > ndim:  # [*B, T] rows -> the storage's item dims
            batch = batch.reshape(-1, *batch.batch_size[batch.batch_dims - ndim + 1 :])
        self.replay_buffer.extend(batch)
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        self.closed = True
