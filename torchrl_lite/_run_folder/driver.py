"""The one driver that writes a training run's folder, whichever loop trains it.

Both training paths (a recipe's ``Trainer``, and ``Scheme`` + ``Learner``) are built and
checked before anything is written; then :func:`drive` makes the folder appear (or, when
resuming, cuts its logs back to the checkpoint), attaches the logger, runs the loop under
the Ctrl-C handling (the first one finishes the update in flight and saves, a second one
aborts) and writes ``episodes.csv``, ``learning_curve.png`` and ``summary.json``. What
differs between the paths sits behind :class:`Run`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Protocol

from torchrl_lite._run_folder import files

__all__ = ["Run", "drive"]

ANNOUNCE = (
    "Ctrl-C: finishing the update in flight, then saving a checkpoint (Ctrl-C again "
    "aborts at once, keeping the last complete checkpoint)"
)


class Run(Protocol):
    """A built training loop, as :func:`drive` runs it.

    Attributes:
        frames: the frames (gradient steps, offline) trained so far; after a resume, the
            checkpoint's.
        logger: set by the driver before :meth:`train` (None: no logger).
        episodes: the run's :class:`~torchrl_lite.trainers.episodes.EpisodeLog` (or an
            offline recipe's evaluation returns, with the same ``history``).
    """

    frames: int
    logger: object
    episodes: object

    def train(self) -> None:
        """Train to the end; a second Ctrl-C raises KeyboardInterrupt out of it."""

    def request_stop(self) -> None:
        """Finish the update in flight, save a checkpoint and return from :meth:`train`."""

    def close(self) -> None:
        """Release the workers and the logger."""

    def summary(self, seconds: float) -> dict:
        """The run's ``summary.json`` (and any file of its own it writes beside it)."""

    def report(self, summary: dict, seconds: float) -> str:
        """The line printed when the run ends."""


def drive(run: Run, out: Path, run_config: dict, *, resume: bool, overwrite: bool,
          logger_kind: str | None, cfg, title: str, unit: str = "frames") -> dict:  # fmt: skip
    """Write the run folder ``out`` around ``run`` and return its summary.

    Args:
        run: the built loop (every input already checked).
        out: the run folder (checked writable; new or holding this run when resuming).
        run_config: ``config.json``'s content (``"algo"``, ``"config"``, ``"target"``, ...).
        resume: continue the run in ``out`` (its logs past ``run.frames`` are dropped).
        overwrite: move a run already in ``out`` aside first.
        logger_kind: ``"csv"``, ``"tensorboard"``, ``"wandb"`` or None.
        cfg: the config logged as hyperparameters.
        title: the learning curve's title.
        unit: what ``frames`` counts (the curve's x label).
    """
    from torchrl_lite.record import get_logger

    text = json.dumps(run_config, indent=2)
    try:
        if resume:  # the logs past the checkpoint are logged again: drop them
            files.truncate_logs(out / "logs", run.frames)
            files.write_text_atomic(files.config_path(out), text)
        else:
            moved = files.start_run(out, {"config.json": text}, overwrite)
            if moved is not None:
                print(f"moved the run that was in {out} to {moved}", flush=True)
    except BaseException:
        run.close()
        raise
    algo, env = run_config["algo"], run_config["config"]["env"]
    print(f"{'resuming' if resume else 'training'} {algo} on {env} in {out}", flush=True)
    if logger_kind:
        purge = {"purge_step": run.frames + 1} if resume and logger_kind == "tensorboard" else {}
        run.logger = get_logger(logger_kind, logger_name=str(out), experiment_name="logs", **purge)
        run.logger.log_hparams(cfg)
    start, aborted = time.perf_counter(), False
    with files.first_sigint_stops(run.request_stop, ANNOUNCE) as pressed:
        try:
            run.train()
        except KeyboardInterrupt:
            aborted = True
    seconds = time.perf_counter() - start
    if aborted:  # the second Ctrl-C: what is on disk is the last complete checkpoint
        run.close()
        print(files.interrupted_message(out, aborted=True), file=sys.stderr, flush=True)
        raise SystemExit(130)
    history = run.episodes.history
    files.write_rows(out / "episodes.csv", ("frames", "episode_return"), history)
    files.plot_curve(out / "learning_curve.png", history, title, run_config["target"], unit)
    summary = run.summary(seconds)
    files.write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    print(run.report(summary, seconds), flush=True)
    run.close()
    if pressed:
        print(files.interrupted_message(out, aborted=False), file=sys.stderr, flush=True)
        raise SystemExit(130)
    return summary
