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


def build_learner(recipe, cfg, options: dict, out: Path, logger: str | None, quiet: bool):
    """The Scheme and Learner of a recipe run (every input checked before workers start)."""
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
                      target) -> dict:  # fmt: skip
    """Train until ``cfg.frames`` frames or the target mean return; write the run folder."""
    from torchrl_lite._run_folder import config_path, plot_curve, write_rows

    learner = build_learner(recipe, cfg, options, out, logger, quiet)
    history = []
    if resume:
        learner.load_checkpoint(out / "checkpoint")
        history = [h for h in _read_episodes(out / "episodes.csv") if h[0] <= learner.frames]
    saved = {"algo": recipe.ALGO, "config": dataclasses.asdict(cfg), "scheme": options}
    config_path(out).write_text(json.dumps(saved, indent=2))
    if learner.logger is not None:
        learner.logger.log_hparams(cfg)
    start = last_save = time.perf_counter()
    solved_at, interrupted = None, False
    try:
        while not learner.done() and solved_at is None:
            info = learner.step()
            history += [(learner.frames, r) for r in info["returns"]]
            last = [r for _, r in history[-10:]]
            if target is not None and len(history) >= 10 and sum(last) / len(last) >= target:
                solved_at = learner.frames
            if time.perf_counter() - last_save > _CHECKPOINT_EVERY_S:
                learner.save_checkpoint()
                last_save = time.perf_counter()
        learner.save_checkpoint()
        learner.save_model()
    except KeyboardInterrupt:
        interrupted = True
        print(f"\ninterrupted: the last checkpoint in {out / 'checkpoint'} is intact", flush=True)
    finally:
        learner.close()
    seconds = time.perf_counter() - start
    write_rows(out / "episodes.csv", ("frames", "episode_return"), history)
    plot_curve(out / "learning_curve.png", history, f"{recipe.ALGO} on {cfg.env} (Scheme)", target)
    last = [r for _, r in history[-10:]]
    summary = {
        "algo": recipe.ALGO, "env": cfg.env, "frames": learner.frames,
        "seconds": round(seconds, 1), "episodes": len(history),
        "mean_return_last10": sum(last) / len(last) if last else None, "target": target,
        "solved_at_frames": solved_at, "scheme": options, "updates": learner.updates,
    }  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"{recipe.ALGO} on {cfg.env} (Scheme {options['col_remote_workers']}x"
        f"{options['grad_remote_workers']}): {learner.frames} frames in {seconds:.0f}s, mean "
        f"return (last 10 episodes) {summary['mean_return_last10']}; run folder {out}",
        flush=True,
    )
    if interrupted:
        raise SystemExit(130)
    return summary


def scheme_policy(folder: Path, recipe, cfg):
    """The trained policy of a Scheme run folder (its actor with the saved weights)."""
    path = Path(folder) / "actor_critic.state_dict"
    if not path.is_file():
        raise FileNotFoundError(f"no trained actor in {folder}: {path} is missing.")
    actor = _factories(recipe, cfg)["actor_factory"](torch.device("cpu"))
    actor.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return actor.policy
