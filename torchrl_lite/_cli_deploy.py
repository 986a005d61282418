"""The ``eval``, ``dataset``, ``export`` and ``tune`` commands: their options, the checks
that run before torch is imported, and the calls into :mod:`torchrl_lite.export` and
:mod:`torchrl_lite.tune`.

    torchrl-lite export RUN [--format onnx|pt2|torchscript] [--out FILE] [--tolerance X]
    torchrl-lite eval --exported FILE [--env ID] [--episodes N]
    torchrl-lite tune ALGO --trials N [--env ID] [--frames F] [--jobs J] [--timeout S]
                      [--study DIR] [--space FILE] [--seed S] [--eval-episodes E] [key=value ...]
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from pathlib import Path

__all__ = [
    "add_parsers",
    "add_eval_options",
    "check_eval_exported",
    "evaluate",
    "export_run",
    "make_dataset",
    "precheck",
    "run",
]

FORMATS = ("onnx", "pt2", "torchscript")


def add_parsers(sub) -> None:
    """Add the ``export`` and ``tune`` subcommands to ``sub``."""
    p = sub.add_parser(
        "export",
        help="write a trained run's deterministic policy as one file (raw observation in, "
        "env action out), parity-checked against the eager policy",
    )
    p.add_argument("run", help="run folder written by `torchrl-lite train`")
    p.add_argument("--format", default="onnx", choices=FORMATS, help="file format (onnx)")
    p.add_argument("--out", default=None, help="file to write (default RUN/policy.onnx|pt2|pt)")
    p.add_argument(
        "--tolerance", type=float, default=1e-5, help="largest accepted action difference"
    )
    p = sub.add_parser(
        "tune", help="tune a recipe's options with Optuna (TPE, median pruning, resumable)"
    )
    p.add_argument("algo", help="ppo, a2c, dqn, sac, ddpg, td3, redq (or any with --space)")
    p.add_argument("--env", default=None, help="env id (the recipe's default)")
    p.add_argument("--trials", type=int, required=True, help="finished trials the study holds")
    p.add_argument("--frames", type=int, default=None, help="frames per trial (recipe's)")
    p.add_argument("--jobs", type=int, default=1, help="trial processes run at once")
    p.add_argument("--timeout", type=float, default=None, help="stop starting trials after S s")
    p.add_argument("--study", default=None, help="study folder (default studies/ALGO-ENV)")
    p.add_argument("--space", default=None, help="JSON search space (default: the recipe's)")
    p.add_argument("--seed", type=int, default=0, help="seed of every trial's training")
    p.add_argument("--eval-episodes", type=int, default=3, help="episodes per evaluation")
    p.add_argument("overrides", nargs="*", help="key=value options fixed for every trial")


def add_eval_options(p) -> None:
    """``eval --exported FILE [--env ID]``: play an exported file instead of a run."""
    p.add_argument("--exported", default=None, help="play this exported policy file instead")
    p.add_argument("--env", default=None, help="with --exported: the env id (the file's own)")


def check_eval_exported(args) -> None:
    """``eval`` takes a run folder or ``--exported FILE``, not both."""
    if args.exported is None:
        if args.run is None:
            raise ValueError("eval needs a run folder, or --exported FILE (an exported policy).")
        if args.env is not None:
            raise ValueError("eval --env goes with --exported FILE; a run folder plays its env.")
        return
    if args.run is not None:
        raise ValueError(f"eval: give the run folder {args.run} or --exported, not both.")
    if args.video:
        raise ValueError("eval --video plays a run folder; it is not available with --exported.")
    if not Path(args.exported).is_file():
        raise FileNotFoundError(f"--exported {args.exported}: no such file.")


def _tune_setup(args):
    from torchrl_lite._cli_train import _parse_overrides
    from torchrl_lite.recipes import recipe_key
    from torchrl_lite.recipes.fields import check_overrides, config_fields
    from torchrl_lite.tune import TuneSetup, space_for

    algo = recipe_key(args.algo)
    for option, value, low in (
        ("--trials", args.trials, 1),
        ("--frames", args.frames, 1),
        ("--jobs", args.jobs, 1),
        ("--eval-episodes", args.eval_episodes, 1),
    ):
        if value is not None and value < low:
            raise ValueError(f"{option} {value}: must be >= {low}.")
    if args.timeout is not None and not args.timeout > 0:
        raise ValueError(f"--timeout {args.timeout}: must be > 0 seconds.")
    cores = os.cpu_count() or 1
    if args.jobs > cores:
        raise ValueError(
            f"--jobs {args.jobs} is above the {cores} CPU cores of this machine: each trial "
            f"process trains on one core. Use --jobs {cores} or fewer."
        )
    fixed = _parse_overrides(args.overrides)
    check_overrides(algo, fixed, {k: f"{k}={v}" for k, v in fixed.items()})
    for key in ("env", "frames", "seed"):
        if key in fixed:
            raise ValueError(f"tune: give {key} as --{key}, not {key}={fixed[key]}.")
    defaults = config_fields(algo)
    env = args.env or defaults["env"].default
    frames = args.frames or defaults["frames"].default
    space = space_for(algo, args.space, fixed)
    return TuneSetup(algo, env, frames, args.seed, args.eval_episodes, fixed, space)


def _study_folder(args, setup) -> Path:
    return Path(args.study or f"studies/{setup.algo}-{setup.env.replace('/', '-')}")


def precheck(args) -> None:
    """What ``export``, ``tune`` and ``eval --exported`` check before torch is imported."""
    if args.command == "eval":
        check_eval_exported(args)
    elif args.command == "export":
        from torchrl_lite._run_folder import config_path

        if not config_path(Path(args.run)).is_file():
            raise FileNotFoundError(
                f"No run in {args.run}: {config_path(Path(args.run))} is missing."
            )
        if not args.tolerance >= 0:
            raise ValueError(f"--tolerance {args.tolerance}: must be >= 0.")
        if args.format == "onnx":
            _require("onnxruntime", "export --format onnx")
    elif args.command == "tune":
        from torchrl_lite.tune import check_study_folder

        _require("optuna", "tune")
        setup = _tune_setup(args)
        check_study_folder(_study_folder(args, setup), setup)


def _require(package: str, what: str) -> None:
    if importlib.util.find_spec(package) is None:
        extra = "tune" if package == "optuna" else "export"
        raise ImportError(f"{what} needs {package}: pip install 'torchrl-lite[{extra}]'")


# -- eval --------------------------------------------------------------------------------


def evaluate(
    folder: str,
    episodes: int = 10,
    video: str | None = None,
    quiet: bool = True,
    max_steps: int = 2_000,
) -> tuple[float, float]:
    """Mean and std of the deterministic policy's return over ``episodes`` episodes.

    Each episode runs until done or ``max_steps`` steps. With ``video``, the frames of
    every episode are streamed to that file as they are rendered (memory does not grow
    with the episodes); the path is checked before the first episode.
    """
    from torchrl_lite import _keys as K
    from torchrl_lite._run_folder.trained import trained_policy
    from torchrl_lite.trainers.episodes import play_deterministic

    sink = None
    if video:  # a bad path or a missing writer fails before anything runs
        from torchrl_lite.record._video_sink import VideoSink

        sink = VideoSink(video)
    recipe, cfg, policy = trained_policy(folder)
    env_kwargs = {"from_pixels": True, "pixels_only": False} if video else {}
    env = recipe.make_eval_env(cfg, **env_kwargs)
    try:
        if sink is not None:
            env.append_transform(sink)
        returns = [
            float(rollout.get((K.NEXT, K.REWARD)).sum())
            for rollout in play_deterministic(env, policy, episodes, max_steps)
        ]
        if sink is not None:
            sink.finish()
    finally:
        env.close()
        if sink is not None:
            sink.discard()
    mean, std = statistics.fmean(returns), statistics.pstdev(returns)
    if not quiet:
        print(f"mean return: {mean:.1f} +/- {std:.1f} over {episodes} episodes", flush=True)
        if sink is not None:
            print(f"wrote {sink.frames} frames ({episodes} episodes) to {video}", flush=True)
    return mean, std


def make_dataset(folder: str, path: str, frames: int, noise: float, seed: int) -> dict:
    """Write a D4RL-layout dataset file from a trained run's policy (for offline recipes).

    The policy acts as it explores: a stochastic actor (SAC's TanhNormal) samples its
    actions, as D4RL's files were collected from partially trained SAC policies; ``noise``
    adds Gaussian noise of that fraction of the half-range on top (0: none)."""
    from torchrl_lite._run_folder.trained import trained_policy
    from torchrl_lite.recipes.offline import collect_dataset

    recipe, cfg, policy = trained_policy(folder)
    env = recipe.make_eval_env(cfg)
    info = collect_dataset(env, policy, frames, path, seed=seed, noise=noise)
    env.close()
    print(
        f"wrote {info['transitions']} transitions ({info['episodes']} episodes, mean return "
        f"{info['mean_return']:.1f}) to {info['path']}; train on it with `torchrl-lite train "
        f"iql --env {cfg.env} dataset={info['path']}`",
        flush=True,
    )
    return info


def export_run(run, fmt: str, out=None, tolerance: float | None = None) -> dict:
    """Export the deterministic policy of the run folder ``run`` (``torchrl-lite export``)."""
    from torchrl_lite._run_folder.trained import trained_policy
    from torchrl_lite.export.formats import FORMATS as SUFFIXES
    from torchrl_lite.export.policy_file import TOLERANCE, export_trained

    if fmt not in SUFFIXES:
        raise ValueError(f"Unknown export format {fmt!r}; choose one of {', '.join(SUFFIXES)}.")
    recipe, cfg, policy = trained_policy(str(run))
    path = Path(out) if out else Path(run) / f"policy{SUFFIXES[fmt]}"
    return export_trained(
        recipe, cfg, policy, path, fmt, TOLERANCE if tolerance is None else tolerance
    )


def run(args) -> int:
    """Run ``export``, ``tune`` or ``eval --exported`` (after :func:`precheck`)."""
    if args.command == "export":
        info = export_run(args.run, args.format, args.out, args.tolerance)
        shapes = lambda items: ", ".join(  # noqa: E731
            f"{i['name']} {i['shape']} {i['dtype']}" for i in items
        )
        parity = info["parity"]
        path = Path(args.out) if args.out else Path(args.run) / info["file"]
        print(
            f"exported the deterministic {info['algo']} policy to {path} ({args.format}): "
            f"{shapes(info['inputs'])} -> {shapes(info['outputs'])}; parity with the eager "
            f"policy over {parity['steps']} steps, loaded by {parity['runtime']}: max |action "
            f"difference| {parity['max_abs_diff']:.3g} (tolerance {parity['tolerance']:g}); "
            f"description in {path}.json",
            flush=True,
        )
    elif args.command == "eval":
        from torchrl_lite.export import play_exported

        mean, std = play_exported(args.exported, args.env, args.episodes)
        print(
            f"mean return: {mean:.1f} +/- {std:.1f} over {args.episodes} episodes "
            f"(exported policy {args.exported})",
            flush=True,
        )
    else:
        from torchrl_lite.tune import run_study

        setup = _tune_setup(args)
        folder = _study_folder(args, setup)
        summary = run_study(folder, setup, args.trials, args.jobs, args.timeout)
        counts = ", ".join(f"{n} {state}" for state, n in summary["trials"].items())
        best = (
            f"best mean evaluation return {summary['best_value']:.1f} (trial "
            f"{summary['best_trial']}); train it with `torchrl-lite train {setup.algo} --env "
            f"{setup.env} config={folder / summary['best_config_file']}`"
            if "best_value" in summary
            else "no trial completed yet"
        )
        print(f"study {folder}: {counts}; {best}; summary in {folder}/summary.png", flush=True)
    return 0
