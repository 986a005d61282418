"""``torchrl-lite train ALGO --col-workers N --grad-workers M ...``: a recipe run through
``Scheme`` + ``Learner``, writing the same run folder as the Trainer path.

The run folder: ``config.json`` (the recipe's config and a ``"scheme"`` entry with the
worker options, so ``--resume`` and ``eval`` rebuild the same run), ``checkpoint/`` (the
Learner's, resumable), ``logs/`` (the logger's files), ``actor_critic.state_dict`` (the
actor, what ``restart_model=`` and ``eval`` load), ``events.csv`` (worker faults),
``episodes.csv``, ``learning_curve.png`` and ``summary.json``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

__all__ = ["scheme_options", "scheme_policy", "train_with_scheme"]

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


def train_with_scheme(recipe, cfg, out: Path, options: dict, resume: bool, logger, quiet: bool,
                      target, overwrite: bool = False) -> dict:  # fmt: skip
    """Train until ``cfg.frames`` frames or the target mean return; write the run folder.

    The run folder appears (or, resuming, its logs are cut back to the checkpoint) once
    the workers are built; the first Ctrl-C saves a checkpoint and ends, a second aborts."""
    from torchrl_lite import _run_folder as run_folder
    from torchrl_lite._run_folder import config_path, plot_curve, write_rows
    from torchrl_lite.record import get_logger

    learner = build_learner(recipe, cfg, options, None, None, quiet)
    history = []
    try:
        if resume:
            learner.load_checkpoint(out / "checkpoint")
            history = [h for h in _read_episodes(out / "episodes.csv") if h[0] <= learner.frames]
        saved = {"algo": recipe.ALGO, "config": dataclasses.asdict(cfg), "scheme": options,
                 "target": target}  # fmt: skip
        text = json.dumps(saved, indent=2)
        if resume:
            run_folder.truncate_logs(out / "logs", learner.frames)
            run_folder.write_text_atomic(config_path(out), text)
        else:
            moved = run_folder.start_run(out, {"config.json": text}, overwrite)
            if moved is not None:
                print(f"moved the run that was in {out} to {moved}", flush=True)
    except BaseException:
        learner.close()
        raise
    learner.log_dir = out
    if logger:
        purge = {"purge_step": learner.frames + 1} if resume and logger == "tensorboard" else {}
        learner.logger = get_logger(logger, str(out), "logs", **purge)
        learner.logger.log_hparams(cfg)
    seconds_before = learner.seconds["total"]
    start = last_save = time.perf_counter()
    solved_at, aborted = None, False
    announce = "Ctrl-C: finishing the update in flight, then saving a checkpoint (again: abort)"
    stop = []
    with run_folder.first_sigint_stops(lambda: stop.append(True), announce) as pressed:
        try:
            while not learner.done() and solved_at is None and not stop:
                info = learner.step()
                history += [(learner.frames, r) for r in info["returns"]]
                last = [r for _, r in history[-10:]]
                if target is not None and len(history) >= 10 and sum(last) / len(last) >= target:
                    solved_at = learner.frames
                if time.perf_counter() - last_save > _CHECKPOINT_EVERY_S:
                    learner.save_checkpoint(out / "checkpoint")
                    last_save = time.perf_counter()
            learner.save_checkpoint(out / "checkpoint")
            learner.save_model(out / "actor_critic.state_dict")
        except KeyboardInterrupt:
            aborted = True
        finally:
            learner.close()
    if aborted:
        print(run_folder.interrupted_message(out, aborted=True), file=sys.stderr, flush=True)
        raise SystemExit(130)
    seconds = time.perf_counter() - start
    write_rows(out / "episodes.csv", ("frames", "episode_return"), history)
    plot_curve(out / "learning_curve.png", history, f"{recipe.ALGO} on {cfg.env} (Scheme)", target)
    last = [r for _, r in history[-10:]]
    previous = _read_summary(out) if resume else {}
    summary = {
        "algo": recipe.ALGO, "env": cfg.env, "frames": learner.frames,
        "seconds": round(learner.seconds["total"], 1),
        "segment_seconds": [*previous.get("segment_seconds", []),
                            round(learner.seconds["total"] - seconds_before, 1)],
        "episodes": len(history),
        "mean_return_last10": sum(last) / len(last) if last else None, "target": target,
        "solved_at_frames": solved_at, "scheme": options, "updates": learner.updates,
    }  # fmt: skip
    run_folder.write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    print(
        f"{recipe.ALGO} on {cfg.env} (Scheme {options['col_remote_workers']}x"
        f"{options['grad_remote_workers']}): {learner.frames} frames in {seconds:.0f}s, mean "
        f"return (last 10 episodes) {summary['mean_return_last10']}; run folder {out}",
        flush=True,
    )
    if pressed:
        print(run_folder.interrupted_message(out, aborted=False), file=sys.stderr, flush=True)
        raise SystemExit(130)
    return summary


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
