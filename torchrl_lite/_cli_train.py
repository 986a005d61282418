"""``torchrl-lite train``: resolve the config, check every input, then write the run folder.

Checks that need no torch (:func:`precheck_train`: the algorithm, ``key=value`` options,
the logger, the output folder) run first; :func:`train` builds the recipe's trainer (envs,
networks: every remaining input checked), and only then makes the run folder appear
(``_run_folder.start_run``) or, resuming, drops the log rows past the checkpoint. The
first Ctrl-C finishes the update in flight and saves; a second one aborts.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from torchrl_lite import _run_folder as run_folder
from torchrl_lite._run_folder import config_path, plot_curve, write_rows

__all__ = ["precheck_train", "train", "load_run", "check_resumable"]


def _from_json(value):
    return tuple(value) if isinstance(value, list) else value


def _read_config(folder: Path) -> dict:
    """A run folder's ``config.json`` as a dict (errors name the file)."""
    path = config_path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"No run in {folder}: the folder does not exist.")
    if not path.is_file():
        raise FileNotFoundError(
            f"No run in {folder}: {path} is missing (pass a folder that "
            f"`torchrl-lite train` wrote)."
        )
    try:
        saved = json.loads(path.read_text())
        saved["algo"], saved["config"]["env"]  # noqa: B018 - the entries every run has
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a valid run config: {err!r}.") from err
    return saved


def load_run(folder: Path):
    """The recipe and config saved in a run folder."""
    from torchrl_lite.recipes import get_recipe

    path = config_path(folder)
    if not path.is_file():
        raise FileNotFoundError(
            f"No run in {folder}: {path} is missing (pass a folder that "
            f"`torchrl-lite train` wrote)."
        )
    try:
        saved = json.loads(path.read_text())
        recipe = get_recipe(saved["algo"])
        cfg = recipe.Config(**{k: _from_json(v) for k, v in saved["config"].items()})
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a valid run config: {err}") from err
    return recipe, cfg


def check_resumable(checkpoint: Path, verb: str = "resume") -> None:
    """A complete checkpoint is at ``checkpoint``, or beside it after a killed save; else
    an error that says whether one is missing or corrupt."""
    from torchrl_lite.trainers.checkpoint import checkpoint_exists

    if checkpoint_exists(checkpoint):
        return
    run = checkpoint.parent
    if not checkpoint.exists():
        raise FileNotFoundError(
            f"Cannot {verb}: {run} has no checkpoint ({checkpoint} is missing): was it "
            f"written by `torchrl-lite train`, and did its first checkpoint finish?"
        )
    meta = checkpoint / "meta.json"
    problem = "is missing" if not meta.is_file() else "is corrupt (not a checkpoint's metadata)"
    raise ValueError(
        f"Cannot {verb}: the checkpoint in {checkpoint} is incomplete or corrupt: {meta} "
        f"{problem}, and no older complete copy lies beside it."
    )


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out, from_file = {}, {}
    for i, item in enumerate(items):
        key, sep, value = item.partition("=")
        if not sep or not key:
            after = items[i + 1] if i + 1 < len(items) and "=" not in items[i + 1] else None
            if after is not None and item.isidentifier():  # ``lr 3e-4``
                hint = f"write {item}={after} (no spaces around =)"
            else:
                hint = "write key=value, e.g. lr=3e-4"
            raise ValueError(f"{item!r} is not a key=value option: {hint}.")
        if key.strip() == "config":  # config=FILE: a JSON file of options (tune's best config)
            from torchrl_lite.tune.config_file import read_config_file

            from_file.update(read_config_file(value.strip()))
            continue
        out[key.strip()] = value.strip()
    return {**from_file, **out}  # options typed on the command line win


def _typed_options(args, overrides: dict[str, str]) -> dict[str, str]:
    """Config field -> the option as the user typed it (``--frames -5``, ``lr=-1``)."""
    typed = {k: f"{k}={v}" for k, v in overrides.items()}
    for name in ("frames", "seed", "env"):
        if getattr(args, name) is not None:
            typed[name] = f"--{name} {getattr(args, name)}"
    return typed


def _check_config_ranges(cfg, typed: dict[str, str]) -> None:
    from torchrl_lite.recipes.ranges import check_ranges

    check_ranges(cfg, typed)


def _check_resume_overrides(saved, cfg, typed: dict[str, str]) -> None:
    """Refuse overrides that change the saved run's networks, env or buffer."""
    from torchrl_lite.recipes.ranges import STRUCTURAL

    changed = [k for k in STRUCTURAL if hasattr(saved, k) and getattr(saved, k) != getattr(cfg, k)]
    if changed:
        was = ", ".join(f"{k}={getattr(saved, k)!r}" for k in changed)
        raise ValueError(
            f"--resume: {', '.join(typed.get(k, k) for k in changed)} would change the network, "
            f"env or buffer of the saved run (its config.json has {was}), so its checkpoint "
            f"cannot load; drop these overrides, or start a new run with --out."
        )


def _check_scheme_resume_overrides(saved, cfg, typed: dict[str, str]) -> None:
    """A distributed run restores its workers' optimizers as saved: refuse a new rate."""
    rates = [k for k in typed if (k == "lr" or k.endswith("_lr")) and hasattr(saved, k)]
    changed = [k for k in rates if getattr(saved, k) != getattr(cfg, k)]
    if changed:
        raise ValueError(
            f"--resume: {', '.join(typed[k] for k in changed)} cannot change a distributed "
            f"(Scheme) run's learning rate: its workers' optimizers are restored as saved. "
            f"Resume without it, or resume without --col-workers/--grad-workers."
        )


def _check_logger(kind: str) -> None:
    """The logger's back end is installed (checked before anything is written)."""
    import importlib.util

    package = {"tensorboard": "tensorboard", "wandb": "wandb"}.get(kind)
    if package and importlib.util.find_spec(package) is None:
        raise ImportError(
            f"--logger {kind} needs {package}, which is not installed: `pip install "
            f"{package}`, or choose --logger csv."
        )


def _evaluation_options(args, out: Path, offline: bool, scheme) -> dict | None:
    """``{"every": frames, "episodes": n}`` of ``--eval-every`` / ``--eval-episodes`` (a
    resumed run keeps its saved ones unless given again), or None."""
    saved = json.loads(config_path(out).read_text()).get("evaluation") if args.resume else None
    if args.eval_every is None and args.eval_episodes is None:
        return saved
    if args.eval_every is None and saved is None:
        raise ValueError("--eval-episodes needs --eval-every FRAMES (how often to evaluate).")
    if offline:
        raise ValueError(
            "--eval-every: offline recipes already evaluate the policy every eval_interval "
            "gradient steps (set eval_interval=... and eval_episodes=... instead)."
        )
    if scheme is not None:
        raise ValueError(
            "--eval-every is not available with --col-workers/--grad-workers (the Scheme "
            "path); evaluate the saved run with torchrl-lite eval."
        )
    options = dict(saved or {"episodes": 5})
    if args.eval_every is not None:
        options["every"] = args.eval_every
    if args.eval_episodes is not None:
        options["episodes"] = args.eval_episodes
    return options


def _scheme_options(args, out: Path) -> dict | None:
    """The Scheme options of the flags (or of the resumed run's config.json)."""
    from torchrl_lite.scheme.run import scheme_options

    if args.resume:
        return json.loads(config_path(out).read_text()).get("scheme")
    return scheme_options(args)


def _resolve_target(recipe, cfg, overrides: dict, saved: dict | None):
    """The return the run stops at: ``target=X`` (``target=none``: none, the whole budget),
    else the resumed run's, else the recipe's for the env."""
    if "target" in overrides:
        return cfg.target
    if saved is not None and "target" in saved:  # resolved when the run started
        return cfg.target
    return cfg.target if cfg.target is not None else recipe.TARGETS.get(cfg.env)


def precheck_train(args) -> None:
    """What ``train`` can check before torch is imported: the algorithm, the ``key=value``
    options (keys, types, ranges), the logger, the output folder (its state and rights)."""
    from torchrl_lite.recipes import recipe_key
    from torchrl_lite.recipes.fields import check_overrides

    if args.algo is None and not args.resume:
        raise ValueError(
            "train needs an algorithm (e.g. `torchrl-lite train ppo`) or --resume DIR."
        )
    if args.resume and (args.out or args.overwrite):
        raise ValueError(
            f"--resume {args.resume} continues that run in its own folder: drop "
            f"{'--out' if args.out else '--overwrite'}."
        )
    if args.overwrite and not args.out:
        raise ValueError("--overwrite needs --out DIR (the folder whose run to move aside).")
    overrides = _parse_overrides(args.overrides)
    algo = args.algo
    if args.resume:
        saved = _read_config(Path(args.resume))
        if algo is not None and recipe_key(algo) != saved["algo"]:
            raise ValueError(
                f"train {algo} --resume {args.resume}: that folder holds a {saved['algo']} "
                f"run; resume it without the algorithm (`torchrl-lite train --resume "
                f"{args.resume}`), or start a {algo} run in a new folder with --out."
            )
        algo = saved["algo"]
        run_folder.check_writable(Path(args.resume))
    else:
        algo = recipe_key(algo)
        if args.out:
            run_folder.check_new_run(Path(args.out), args.overwrite)
    check_overrides(algo, overrides, _typed_options(args, overrides))
    _check_logger(args.logger)


def train(args) -> dict:
    """Build the recipe, train, write the run folder; returns a summary dict.

    Everything is built and checked before the run folder is touched; a new run's folder
    appears at once with its config (see ``_run_folder.start_run``).
    """
    from torchrl_lite.recipes import config_for, get_recipe
    from torchrl_lite.recipes.common import EpisodeReturns, PeriodicEvaluation, apply_overrides
    from torchrl_lite.record import get_logger

    overrides = _parse_overrides(args.overrides)
    typed = _typed_options(args, overrides)
    saved_run = None
    if args.resume:  # options given with --resume act as overrides of the saved config
        for name in ("frames", "seed", "env"):
            if getattr(args, name) is not None:
                overrides[name] = str(getattr(args, name))
        out = Path(args.resume)
        saved_run = _read_config(out)
        recipe, cfg = load_run(out)
        check_resumable(out / "checkpoint")
    else:
        recipe = get_recipe(args.algo)
        changes = {k: v for k, v in (("frames", args.frames), ("seed", args.seed)) if v is not None}
        cfg = config_for(recipe, args.env, **changes)
        default = Path(f"runs/{recipe.ALGO}-{cfg.env.replace('/', '-')}-s{cfg.seed}")
        out = Path(args.out) if args.out else run_folder.next_free(default)
        run_folder.check_writable(out)
    saved, cfg = cfg, apply_overrides(cfg, overrides)
    _check_config_ranges(cfg, typed)
    if args.resume:
        _check_resume_overrides(saved, cfg, typed)
    if getattr(cfg, "dataset", None):  # offline: saved absolute, so eval/resume work anywhere
        cfg = dataclasses.replace(cfg, dataset=str(Path(cfg.dataset).resolve()))
    target = _resolve_target(recipe, cfg, overrides, saved_run)
    cfg = dataclasses.replace(cfg, target=target)  # config.json records the target in force
    scheme = _scheme_options(args, out)
    if args.resume and scheme is not None:
        _check_scheme_resume_overrides(saved, cfg, typed)
    offline = getattr(recipe, "OFFLINE", False)  # learns from a dataset: no training episodes
    evaluation = _evaluation_options(args, out, offline, scheme)
    logger_kind = None if args.logger == "none" else args.logger
    run_config = {"algo": recipe.ALGO, "config": dataclasses.asdict(cfg), "target": target}
    if scheme is not None:  # distributed: Scheme + Learner, the same run folder
        from torchrl_lite.scheme.run import train_with_scheme

        return train_with_scheme(
            recipe, cfg, out, scheme, bool(args.resume), logger_kind, args.quiet, target,
            overwrite=args.overwrite,
        )  # fmt: skip

    trainer, policy = recipe.make_trainer(
        cfg, checkpoint=out / "checkpoint", progress_bar=not args.quiet
    )
    if offline:  # the returns of periodic evaluation episodes are the learning signal
        episodes = recipe.make_evaluation(cfg, policy, target=target)
    else:
        episodes = EpisodeReturns(window=10, target=target)
    episodes.register(trainer)
    periodic = None
    if evaluation is not None:  # the deterministic policy, every `every` frames
        periodic = PeriodicEvaluation(
            recipe.make_eval_env(cfg), policy, interval=evaluation["every"],
            episodes=evaluation["episodes"],
        )  # fmt: skip
    # a checkpoint holds the hooks it was saved with: one started without evaluations
    # gets its evaluation hook after loading
    evaluated_before = args.resume and "evaluation" in saved_run
    if periodic is not None and (evaluated_before or not args.resume):
        periodic.register(trainer)
    unit = "gradient steps" if offline else "frames"
    if args.resume:
        trainer.load(out / "checkpoint")
        if periodic is not None and not evaluated_before:
            periodic.register(trainer)
    if evaluation is not None:
        run_config["evaluation"] = evaluation
    # -- everything is checked: the first write to the run folder ----------------------
    text = json.dumps(run_config, indent=2)
    if args.resume:  # the logs past the checkpoint are logged again: drop them
        run_folder.truncate_logs(out / "logs", trainer.collected_frames)
        run_folder.write_text_atomic(config_path(out), text)
    else:
        moved = run_folder.start_run(out, {"config.json": text}, args.overwrite)
        if moved is not None:
            print(f"moved the run that was in {out} to {moved}", flush=True)
    print(f"{'resuming' if args.resume else 'training'} {recipe.ALGO} on {cfg.env} in {out}",
          flush=True)  # fmt: skip
    if logger_kind:
        purge = {"purge_step": trainer.collected_frames + 1} if logger_kind == "tensorboard" else {}
        trainer.logger = get_logger(logger_kind, logger_name=str(out), experiment_name="logs",
                                    **(purge if args.resume else {}))  # fmt: skip
        trainer.logger.log_hparams(cfg)
    announce = (
        "Ctrl-C: finishing the update in flight, then saving a checkpoint (Ctrl-C again "
        "aborts at once, keeping the last complete checkpoint)"
    )
    start, aborted = time.perf_counter(), False
    with run_folder.first_sigint_stops(trainer.request_stop, announce) as pressed:
        try:
            trainer.train()
        except KeyboardInterrupt:
            aborted = True
    seconds = time.perf_counter() - start
    if aborted:  # the second Ctrl-C: what is on disk is the last complete checkpoint
        if trainer.logger is not None:
            trainer.logger.close()
        print(run_folder.interrupted_message(out, aborted=True), file=sys.stderr, flush=True)
        raise SystemExit(130)
    summary = _write_results(out, recipe, cfg, trainer, episodes, periodic, evaluation,
                             target, seconds)  # fmt: skip
    _print_summary(summary, recipe, cfg, unit, offline, out, target, seconds)
    if trainer.logger is not None:
        trainer.logger.close()
    if pressed:
        print(run_folder.interrupted_message(out, aborted=False), file=sys.stderr, flush=True)
        raise SystemExit(130)
    return summary


def _write_results(out, recipe, cfg, trainer, episodes, periodic, evaluation, target,
                   seconds) -> dict:  # fmt: skip
    """``episodes.csv``, ``learning_curve.png``, ``evaluations.csv`` and ``summary.json``."""
    unit = "gradient steps" if getattr(recipe, "OFFLINE", False) else "frames"
    write_rows(out / "episodes.csv", ("frames", "episode_return"), episodes.history)
    plot_curve(
        out / "learning_curve.png", episodes.history, f"{recipe.ALGO} on {cfg.env}", target, unit
    )
    segments = trainer.segment_seconds or [seconds]
    summary = {
        "algo": recipe.ALGO,
        "env": cfg.env,
        "frames": trainer.collected_frames,
        "seconds": round(sum(segments), 1),
        "segment_seconds": [round(s, 1) for s in segments],
        "episodes": len(episodes.history),
        "mean_return_last10": episodes.running_mean(),
        "target": target,
        "solved_at_frames": episodes.solved_at,
    }
    if periodic is not None:
        write_rows(
            out / "evaluations.csv", ("frames", "mean_return", "std_return"), periodic.history
        )
        if periodic.history:
            frames_at, mean, std = periodic.history[-1]
            summary["evaluation"] = {
                "frames": frames_at, "mean_return": mean, "std_return": std,
                "episodes": evaluation["episodes"],
                "best_mean_return": max(h[1] for h in periodic.history),
            }  # fmt: skip
    run_folder.write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    return summary


def _print_summary(summary, recipe, cfg, unit, offline, out, target, seconds) -> None:
    solved_at = summary["solved_at_frames"]
    print(
        f"{recipe.ALGO} on {cfg.env}: {summary['frames']} {unit} in {seconds:.0f}s, "
        + (
            f"mean evaluation return {summary['mean_return_last10']:.1f}"
            if offline
            else f"mean return (last 10 episodes) {summary['mean_return_last10']:.1f}"
        )
        + (f", target {target} reached at {solved_at} {unit}" if solved_at else "")
        + (
            f"; deterministic evaluation {summary['evaluation']['mean_return']:.1f} "
            f"+/- {summary['evaluation']['std_return']:.1f}"
            if "evaluation" in summary
            else ""
        )
        + f"; run folder {out}",
        flush=True,
    )
