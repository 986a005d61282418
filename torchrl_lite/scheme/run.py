"""``torchrl-lite train ALGO --col-workers N --grad-workers M ...``: a recipe run through
``Scheme`` + ``Learner``, written by the same run-folder driver as the Trainer path
(:func:`~torchrl_lite._run_folder.driver.drive`).

The run folder: ``config.json`` (the recipe's config and a ``"scheme"`` entry with the
worker options, so ``--resume`` and ``eval`` rebuild the same run), ``checkpoint/`` (the
Learner's, resumable), ``logs/`` (the logger's files), ``actor_critic.state_dict`` (the
actor, what ``restart_model=`` and ``eval`` load), ``events.csv`` (worker faults),
``episodes.csv``, ``learning_curve.png`` and ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import torch

__all__ = ["LearnerRun", "build_learner", "scheme_options", "scheme_policy"]

_CHECKPOINT_EVERY_S = 60.0


def scheme_options(args) -> dict | None:
    """The Scheme options from the CLI flags, or None when none was given."""
    counts = (args.col_workers, args.grad_workers, args.address)
    if all(c is None for c in counts) and not (args.async_col or args.async_grad):
        return None
    for name, value in (("--col-workers", args.col_workers), ("--grad-workers", args.grad_workers)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value} (1 runs that group in-process).")
    return {
        "col_remote_workers": args.col_workers or 1,
        "col_communication": "asynchronous" if args.async_col else "synchronous",
        "grad_remote_workers": args.grad_workers or 1,
        "grad_communication": "asynchronous" if args.async_grad else "synchronous",
        "address": args.address,
    }


def _factories(recipe, cfg) -> dict:
    try:
        from torchrl_lite.agent import factories_from_recipe
    except ImportError as err:  # pragma: no cover - the agent package ships with the library
        raise ImportError(
            f"the Scheme path needs torchrl_lite.agent.factories_from_recipe: {err}"
        ) from err
    return factories_from_recipe(recipe.ALGO, cfg)


def _connect(address: str | None) -> None:
    if address is None:
        return
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False)


def build_learner(recipe, cfg, options: dict, out: Path | None, logger: str | None, quiet: bool):
    """The Scheme and Learner of a recipe run (every input checked before workers start).

    ``out`` None: the Learner writes nothing until ``log_dir``/``logger`` are set (the
    command line sets them once the run folder is in place)."""
    from torchrl_lite.learner import Learner
    from torchrl_lite.scheme.scheme import Scheme

    _connect(options.get("address"))
    factories = _factories(recipe, cfg)
    kwargs = {k: v for k, v in options.items() if k != "address"}
    scheme = Scheme(**factories, **kwargs, seed=cfg.seed)
    return Learner(scheme, cfg.frames, log_dir=out, logger=logger, progress_bar=not quiet)


def _read_episodes(path: Path) -> list:
    if not path.is_file():
        return []
    with path.open() as f:
        return [(int(r["frames"]), float(r["episode_return"])) for r in csv.DictReader(f)]


class LearnerRun:
    """A recipe's Scheme and Learner, as the run-folder driver runs them: one
    ``learner.step()`` at a time until ``cfg.frames`` frames or the target mean return,
    a checkpoint every minute and at the end, the actor saved for ``eval``."""

    def __init__(self, recipe, cfg, out: Path, options: dict, resume: bool, quiet: bool):
        from torchrl_lite.trainers.episodes import EpisodeLog

        self.recipe, self.cfg, self.out, self.options = recipe, cfg, out, options
        self.learner = build_learner(recipe, cfg, options, None, None, quiet)
        self.episodes = EpisodeLog(window=10, target=cfg.target)
        self.previous: dict = {}
        self._stop, self._closed = False, False
        try:
            if resume:
                self.learner.load_checkpoint(out / "checkpoint")
                self.episodes.history = [
                    h for h in _read_episodes(out / "episodes.csv") if h[0] <= self.learner.frames
                ]
                self.previous = _read_summary(out)
        except BaseException:
            self.close()
            raise
        self.seconds_before = self.learner.seconds["total"]

    @property
    def frames(self) -> int:
        return self.learner.frames

    @property
    def logger(self):
        return self.learner.logger

    @logger.setter
    def logger(self, logger) -> None:
        self.learner.logger = logger

    def request_stop(self) -> None:
        self._stop = True

    def train(self) -> None:
        learner, out = self.learner, self.out
        learner.log_dir = out
        last_save = time.perf_counter()
        try:
            while not learner.done() and self.episodes.solved_at is None and not self._stop:
                info = learner.step()
                self.episodes.add(learner.frames, info["returns"])
                if time.perf_counter() - last_save > _CHECKPOINT_EVERY_S:
                    learner.save_checkpoint(out / "checkpoint")
                    last_save = time.perf_counter()
            learner.save_checkpoint(out / "checkpoint")
            learner.save_model(out / "actor_critic.state_dict")
        finally:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.learner.close()

    def summary(self, seconds: float) -> dict:
        learner, history = self.learner, self.episodes.history
        last = [r for _, r in history[-10:]]
        total = learner.seconds["total"]
        return {
            "algo": self.recipe.name, "env": self.cfg.env, "frames": learner.frames,
            "seconds": round(total, 1),
            "segment_seconds": [*self.previous.get("segment_seconds", []),
                                round(total - self.seconds_before, 1)],
            "episodes": len(history),
            "mean_return_last10": sum(last) / len(last) if last else None,
            "target": self.cfg.target, "solved_at_frames": self.episodes.solved_at,
            "scheme": self.options, "updates": learner.updates,
        }  # fmt: skip

    def report(self, summary: dict, seconds: float) -> str:
        options = self.options
        return (
            f"{self.recipe.name} on {self.cfg.env} (Scheme {options['col_remote_workers']}x"
            f"{options['grad_remote_workers']}): {self.learner.frames} frames in {seconds:.0f}s, "
            f"mean return (last 10 episodes) {summary['mean_return_last10']}; run folder {self.out}"
        )


def _read_summary(out: Path) -> dict:
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def scheme_policy(folder: Path, recipe, cfg):
    """The trained policy of a Scheme run folder (its actor with the saved weights)."""
    path = Path(folder) / "actor_critic.state_dict"
    if not path.is_file():
        raise FileNotFoundError(f"no trained actor in {folder}: {path} is missing.")
    actor = _factories(recipe, cfg)["actor_factory"](torch.device("cpu"))
    actor.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return actor.policy
