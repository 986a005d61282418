"""``torchrl-lite train``: check every input, resolve the config, then run the recipe.

Checks that need no torch (:func:`precheck_train`: the algorithm, ``key=value`` options,
the logger, the output folder) run first; :func:`train` resolves the config
(:func:`~torchrl_lite.recipes.config.resolve`), builds the recipe's trainer or, with
``--col-workers``/``--grad-workers``, its Scheme and Learner (every remaining input
checked), and hands the built loop to the run-folder driver
(:func:`~torchrl_lite._run_folder.driver.drive`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from torchrl_lite._run_folder import files as run_folder
from torchrl_lite._run_folder.files import config_path
from torchrl_lite._run_folder.trained import check_resumable, load_run, read_config

__all__ = ["precheck_train", "train", "load_run", "check_resumable"]


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
        saved = read_config(Path(args.resume))
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
    """Resolve the config, build the run, train it in its run folder; returns the summary.

    Everything is built and checked before the run folder is touched; a new run's folder
    appears at once with its config (see :func:`~torchrl_lite._run_folder.driver.drive`).
    """
    from torchrl_lite._run_folder.driver import drive
    from torchrl_lite.recipes import get_recipe, resolve

    overrides = _parse_overrides(args.overrides)
    typed = _typed_options(args, overrides)
    flags = {name: getattr(args, name) for name in ("frames", "seed")}
    if args.resume:  # options given with --resume act as overrides of the saved config
        out = Path(args.resume)
        saved_run = read_config(out)
        recipe, _ = load_run(out)
        check_resumable(out / "checkpoint")
        flags["env"] = args.env  # these options win over the same key=value
        overrides = {**overrides, **{k: str(v) for k, v in flags.items() if v is not None}}
        scheme = _scheme_options(args, out)
        cfg = resolve(recipe, None, overrides, saved_run, typed=typed,
                      distributed=scheme is not None)  # fmt: skip
    else:
        recipe, saved_run = get_recipe(args.algo), None
        overrides = {**{k: v for k, v in flags.items() if v is not None}, **overrides}
        cfg = resolve(recipe, args.env, overrides, typed=typed)
        # the default folder is named by the options, not by key=value overrides
        seed, env = args.seed, args.env or recipe.Config().env
        seed = recipe.Config().seed if seed is None else seed
        default = Path(f"runs/{recipe.name}-{env.replace('/', '-')}-s{seed}")
        out = Path(args.out) if args.out else run_folder.next_free(default)
        run_folder.check_writable(out)
        scheme = _scheme_options(args, out)
    evaluation = _evaluation_options(args, out, recipe.offline, scheme)
    run_config = {"algo": recipe.name, "config": dataclasses.asdict(cfg), "target": cfg.target}
    if scheme is not None:  # distributed: Scheme + Learner
        from torchrl_lite.scheme.run import LearnerRun

        run_config["scheme"] = scheme
        run = LearnerRun(recipe, cfg, out, scheme, bool(args.resume), args.quiet)
        title = f"{recipe.name} on {cfg.env} (Scheme)"
    else:
        run = TrainerRun(recipe, cfg, out, evaluation, saved_run, args.quiet)
        title = f"{recipe.name} on {cfg.env}"
    if evaluation is not None:
        run_config["evaluation"] = evaluation
    logger_kind = None if args.logger == "none" else args.logger
    return drive(run, out, run_config, resume=bool(args.resume), overwrite=args.overwrite,
                 logger_kind=logger_kind, cfg=cfg, title=title,
                 unit="gradient steps" if recipe.offline else "frames")  # fmt: skip


class TrainerRun:
    """A recipe's ``Trainer`` with its episode returns (offline: evaluation returns) and
    optional periodic evaluations, as the run-folder driver runs it."""

    def __init__(self, recipe, cfg, out: Path, evaluation: dict | None, saved_run: dict | None,
                 quiet: bool):  # fmt: skip
        from torchrl_lite.trainers.episodes import EpisodeReturns, PeriodicEvaluation

        self.recipe, self.cfg, self.evaluation = recipe, cfg, evaluation
        self.trainer, policy = recipe.make_trainer(
            cfg, checkpoint=out / "checkpoint", progress_bar=not quiet
        )
        if recipe.offline:  # the returns of periodic evaluation episodes are the learning signal
            self.episodes = recipe.make_evaluation(cfg, policy, target=cfg.target)
        else:
            self.episodes = EpisodeReturns(window=10, target=cfg.target)
        self.episodes.register(self.trainer)
        self.periodic = None
        if evaluation is not None:  # the deterministic policy, every `every` frames
            self.periodic = PeriodicEvaluation(
                recipe.make_eval_env(cfg), policy, interval=evaluation["every"],
                episodes=evaluation["episodes"],
            )  # fmt: skip
        # a checkpoint holds the hooks it was saved with: one started without evaluations
        # gets its evaluation hook after loading
        evaluated_before = saved_run is not None and "evaluation" in saved_run
        if self.periodic is not None and (evaluated_before or saved_run is None):
            self.periodic.register(self.trainer)
        if saved_run is not None:
            self.trainer.load(out / "checkpoint")
            if self.periodic is not None and not evaluated_before:
                self.periodic.register(self.trainer)
        self.out = out

    @property
    def frames(self) -> int:
        return self.trainer.collected_frames

    @property
    def logger(self):
        return self.trainer.logger

    @logger.setter
    def logger(self, logger) -> None:
        self.trainer.logger = logger

    def train(self) -> None:
        self.trainer.train()

    def request_stop(self) -> None:
        self.trainer.request_stop()

    def close(self) -> None:
        if self.trainer.logger is not None:
            self.trainer.logger.close()

    def summary(self, seconds: float) -> dict:
        """``summary.json``; ``evaluations.csv`` is written beside it."""
        trainer, episodes, periodic = self.trainer, self.episodes, self.periodic
        segments = trainer.segment_seconds or [seconds]
        summary = {
            "algo": self.recipe.name,
            "env": self.cfg.env,
            "frames": trainer.collected_frames,
            "seconds": round(sum(segments), 1),
            "segment_seconds": [round(s, 1) for s in segments],
            "episodes": len(episodes.history),
            "mean_return_last10": episodes.running_mean(),
            "target": self.cfg.target,
            "solved_at_frames": episodes.solved_at,
        }
        if periodic is not None:
            run_folder.write_rows(
                self.out / "evaluations.csv", ("frames", "mean_return", "std_return"),
                periodic.history,
            )  # fmt: skip
            if periodic.history:
                frames_at, mean, std = periodic.history[-1]
                summary["evaluation"] = {
                    "frames": frames_at, "mean_return": mean, "std_return": std,
                    "episodes": self.evaluation["episodes"],
                    "best_mean_return": max(h[1] for h in periodic.history),
                }  # fmt: skip
        return summary

    def report(self, summary: dict, seconds: float) -> str:
        offline, target = self.recipe.offline, self.cfg.target
        unit = "gradient steps" if offline else "frames"
        solved_at = summary["solved_at_frames"]
        return (
            f"{self.recipe.name} on {self.cfg.env}: {summary['frames']} {unit} in {seconds:.0f}s, "
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
            + f"; run folder {self.out}"
        )
