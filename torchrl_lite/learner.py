"""Learner: drives a ``Scheme`` to a frame budget, with logs, models and checkpoints.

Seed 000's loop::

    learner = Learner(scheme, target_steps=1_000_000, log_dir="/tmp/train_example")
    while not learner.done():
        learner.step()
        learner.print_info()
    learner.save_model()  # log_dir/actor_critic.state_dict, what restart_model= loads

The same as a context manager, which stops the workers on leaving the block (also on an
error or Ctrl-C)::

    with Learner(scheme, target_steps=1_000_000) as learner:
        while not learner.done():
            learner.step()

Without ``close()`` the workers stop when the Learner and its Scheme are no longer
referenced (reassigning ``learner`` in a notebook frees the old one's workers).

Under ``log_dir``: ``logs/metrics.csv`` (the logger's files: one row per collection,
TensorBoard with ``logger="tensorboard"``), ``events.csv`` (worker deaths and restarts),
``actor_critic.state_dict`` and ``checkpoint/`` (``save_checkpoint``/``load_checkpoint``:
the trainer's atomic checkpoint format; a 1/1 run resumes exactly).
"""

from __future__ import annotations

import collections
import csv
import math
import statistics
import time
from pathlib import Path

from torchrl_lite.trainers.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["Learner"]

_MODEL_FILE = "actor_critic.state_dict"


class Learner:
    """Train with a ``Scheme`` until ``target_steps`` frames are collected.

    Args:
        scheme: the ``torchrl_lite.scheme.Scheme``.
        target_steps: frames (env steps over all envs and workers) to collect.
        log_dir: where logs, the model and checkpoints go (None: nothing written, and
            ``save_model``/``save_checkpoint`` need a path).
        logger: ``"csv"``, ``"tensorboard"`` or None.
        progress_bar: a tqdm bar of frames.
        window: episodes in the running mean return.

    A context manager: ``with Learner(...) as learner:`` calls ``close()`` on leaving.

    Example:
        >>> Learner(object(), target_steps=0)
        Traceback (most recent call last):
        ...
        ValueError: target_steps must be an int >= 1, got 0.
    """

    def __init__(self, scheme, target_steps: int, log_dir=None, logger: str | None = "csv",
                 progress_bar: bool = False, window: int = 10):  # fmt: skip
        if isinstance(target_steps, bool) or not isinstance(target_steps, int) or target_steps < 1:
            raise ValueError(f"target_steps must be an int >= 1, got {target_steps!r}.")
        if not hasattr(scheme, "step") or not hasattr(scheme, "state_dict"):
            raise TypeError(f"scheme must be a torchrl_lite.scheme.Scheme, got {scheme!r}.")
        self.scheme, self.target_steps = scheme, target_steps
        self.log_dir = None if log_dir is None else Path(log_dir)
        self.frames = self.updates = self.episodes = 0
        self.seconds = {"collect": 0.0, "col_worker": 0.0, "gradient": 0.0, "update": 0.0,
                        "wait": 0.0, "total": 0.0}  # fmt: skip
        self._returns = collections.deque(maxlen=window)
        self._lags = collections.deque(maxlen=100)
        self._asynchrony = collections.deque(maxlen=100)
        self._algo_info: dict = {}
        self._events_seen = 0
        self.events: list[str] = []
        self._started = None
        self._closed = False
        self.logger = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            if logger:
                from torchrl_lite.record import get_logger

                self.logger = get_logger(logger, str(self.log_dir), "logs")
        self._pbar = None
        if progress_bar:
            try:
                from tqdm.auto import tqdm

                self._pbar = tqdm(total=target_steps, unit="frames")
            except ImportError:
                import warnings

                warnings.warn("tqdm is not installed: no progress bar (pip install tqdm).")

    # -- the loop -------------------------------------------------------------------------
    def done(self) -> bool:
        """True once ``target_steps`` frames were collected."""
        return self.frames >= self.target_steps

    def step(self) -> dict:
        """One update of the scheme; returns its info. Ctrl-C or an error stops every
        worker before propagating."""
        if self._closed:
            raise RuntimeError(
                "Learner.step() after close(): its workers are stopped; build a new Scheme "
                "and Learner to train more (load_checkpoint continues a saved run)."
            )
        if self._started is None:
            self._started = time.perf_counter() - self.seconds["total"]
        try:
            info = self.scheme.step()
        except BaseException:
            self.close()
            raise
        self._record(info)
        return info

    def _record(self, info: dict) -> None:
        self.updates += 1
        self.frames += info["frames"]
        self.episodes += len(info["returns"])
        self._returns.extend(info["returns"])
        self._lags.extend(info["policy_lag"])
        self._asynchrony.extend(info["grad_asynchrony"])
        self._algo_info = info["algo"] or self._algo_info
        s = self.seconds
        s["collect"] += info["collect_s"]
        s["col_worker"] += info["col_frames_s"]
        s["gradient"] += info["grad_s"]
        s["update"] += info["update_s"]
        s["wait"] += max(
            0.0, info["step_s"] - info["collect_s"] - info["grad_s"] - info["update_s"]
        )
        s["total"] = time.perf_counter() - self._started
        self._log_events()
        if self._pbar is not None:
            self._pbar.update(info["frames"])
        if info["frames"] and self.logger is not None:
            self.logger.log_metrics(self._loggable(), step=self.frames)

    def _log_events(self) -> None:
        new = self.scheme.events[self._events_seen :]
        self._events_seen = len(self.scheme.events)
        for stamp, message in new:
            self.events.append(message)
            print(f"[frames {self.frames}] {message}", flush=True)
            if self.log_dir is not None:
                path = self.log_dir / "events.csv"
                first = not path.exists()
                with path.open("a", newline="") as f:
                    writer = csv.writer(f)
                    if first:
                        writer.writerow(["time", "frames", "updates", "event"])
                    writer.writerow([f"{stamp:.3f}", self.frames, self.updates, message])

    # -- reporting ------------------------------------------------------------------------
    def get_metrics(self) -> dict:
        """Counters, speeds, returns, policy lag, gradient asynchrony, times, workers."""
        total = max(self.seconds["total"], 1e-9)
        lags, asyn = list(self._lags), list(self._asynchrony)
        status = self.scheme.status()
        return {
            "frames": self.frames,
            "updates": self.updates,
            "episodes": self.episodes,
            "fps": self.frames / total,
            "collection_fps": self.frames / max(self.seconds["col_worker"], 1e-9),
            "episode_return": statistics.fmean(self._returns) if self._returns else math.nan,
            "policy_lag_min": min(lags) if lags else 0,
            "policy_lag_mean": statistics.fmean(lags) if lags else 0.0,
            "policy_lag_max": max(lags) if lags else 0,
            "grad_asynchrony_mean": statistics.fmean(asyn) if asyn else 0.0,
            "grad_asynchrony_max": max(asyn) if asyn else 0,
            **{f"time_{k}_s": v for k, v in self.seconds.items()},
            **status,
            **{f"algo_{k}": v for k, v in self._algo_info.items()},
        }

    def _loggable(self) -> dict:
        return {k: v for k, v in self.get_metrics().items() if isinstance(v, (int, float))
                and not (isinstance(v, float) and math.isnan(v))}  # fmt: skip

    def print_info(self) -> str:
        """Print (and return) one line: frames, FPS, return, lag, asynchrony, times, workers."""
        m = self.get_metrics()
        s = self.seconds
        split = "/".join(f"{s[k]:.1f}" for k in ("collect", "gradient", "update", "wait"))
        line = (
            f"frames {m['frames']}/{self.target_steps} | FPS {m['fps']:.0f} (collection "
            f"{m['collection_fps']:.0f}) | return {m['episode_return']:.1f} | policy lag "
            f"{m['policy_lag_min']}/{m['policy_lag_mean']:.1f}/{m['policy_lag_max']} | grad "
            f"asynchrony {m['grad_asynchrony_mean']:.1f} | collect/grad/update/wait {split}s | "
            f"col workers {m['col_alive']}/{m['col_workers']}, grad workers "
            f"{m['grad_alive']}/{m['grad_workers']}, restarts {m['restarts']}"
        )
        print(line, flush=True)
        return line

    def update_algorithm_parameter(self, name: str, value) -> None:
        """Set ``name`` (e.g. ``"lr"``) to ``value`` on every worker's algorithm."""
        self.scheme.update_algorithm_parameter(name, value)

    # -- files ----------------------------------------------------------------------------
    def _path(self, path, default: str) -> Path:
        if path is not None:
            return Path(path)
        if self.log_dir is None:
            raise ValueError(
                f"no log_dir: pass a path (the Learner has nowhere to write {default})."
            )
        return self.log_dir / default

    def save_model(self, path=None) -> str:
        """Write the actor's weights (default ``log_dir/actor_critic.state_dict``); returns
        the path, which ``actor_factory(..., restart_model=path)`` loads."""
        return self.scheme.save_actor(self._path(path, _MODEL_FILE))

    def state_dict(self) -> dict:
        return {
            "scheme": self.scheme.state_dict(),
            "counters": {
                "frames": self.frames,
                "updates": self.updates,
                "episodes": self.episodes,
                "seconds": dict(self.seconds),
                "returns": list(self._returns),
                "lags": list(self._lags),
                "asynchrony": list(self._asynchrony),
            },  # fmt: skip
        }

    def load_state_dict(self, state: dict) -> None:
        self.scheme.load_state_dict(state["scheme"])
        c = state["counters"]
        self.frames, self.updates, self.episodes = c["frames"], c["updates"], c["episodes"]
        self.seconds.update(c["seconds"])
        self._returns.extend(c["returns"])
        self._lags.extend(c["lags"])
        self._asynchrony.extend(c["asynchrony"])
        self._started = None

    def save_checkpoint(self, path=None) -> Path:
        """Atomically write a full checkpoint (default ``log_dir/checkpoint``)."""
        return save_checkpoint(self._path(path, "checkpoint"), self.state_dict(),
                               meta={"frames": self.frames, "kind": "learner"})  # fmt: skip

    def load_checkpoint(self, path=None) -> None:
        """Continue from what ``save_checkpoint`` wrote."""
        state, _ = load_checkpoint(self._path(path, "checkpoint"))
        if "scheme" not in state:
            raise ValueError(
                f"{path} is a trainer checkpoint, not a Learner's (no 'scheme' entry)."
            )
        self.load_state_dict(state)

    def close(self) -> None:
        """Stop the workers, close the logger and the progress bar (idempotent)."""
        self._closed = True
        self.scheme.shutdown()
        if self.logger is not None:
            self.logger.close()
            self.logger = None
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
