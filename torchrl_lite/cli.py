"""The ``torchrl-lite`` command (also ``python -m torchrl_lite``).

    torchrl-lite train ALGO --env ID [--frames N] [--seed S] [--logger csv|tensorboard|wandb]
                       [--out DIR] [--resume DIR] [key=value ...]
                       [--col-workers N] [--grad-workers M] [--async-col] [--async-grad]
                       [--address auto]   (Scheme + Learner, seed 000's architecture)
    torchrl-lite eval DIR [--episodes N] [--video out.mp4]
    torchrl-lite dataset DIR OUT.hdf5 [--frames N] [--noise X] [--seed S]
    torchrl-lite bench
    torchrl-lite demo --env ID   (a random-policy rollout)

``train`` writes to its output folder: ``config.json``, ``checkpoint/`` (resumable),
``logs/`` (the logger's files, with ``metrics.csv`` for csv), ``episodes.csv`` (frames and
return of every training episode) and ``learning_curve.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from torchrl_lite import _keys as K
from torchrl_lite._run_folder import config_path, plot_curve, write_rows


def episode_returns(rollout) -> list[float]:
    """Returns of the episodes that finished inside a ``[*batch, T]`` rollout."""
    reward = rollout.get((K.NEXT, K.REWARD)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    done = rollout.get((K.NEXT, K.DONE)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    returns = []
    for r_row, d_row in zip(reward.tolist(), done.tolist()):
        total = 0.0
        for r, d in zip(r_row, d_row):
            total += r
            if d:
                returns.append(total)
                total = 0.0
    return returns


# -- train -------------------------------------------------------------------------------


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"Overrides are key=value, got {item!r}.")
        out[key.strip()] = value.strip()
    return out


def _load_run(folder: Path):
    """The recipe and config saved in a run folder."""
    from torchrl_lite.recipes import get_recipe

    path = config_path(folder)
    if not path.is_file():
        raise FileNotFoundError(f"No run in {folder}: {path} is missing.")
    try:
        saved = json.loads(path.read_text())
        recipe = get_recipe(saved["algo"])
        cfg = recipe.Config(**{k: _from_json(v) for k, v in saved["config"].items()})
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a valid run config: {err}") from err
    return recipe, cfg


def _restored(run: Path, recipe, cfg):
    """``(trainer, policy)`` of a recipe-trained run, the loss module (so the policy) with
    its checkpoint's weights, the collector shut down."""
    from torchrl_lite.trainers.checkpoint import load_checkpoint

    state, _ = load_checkpoint(run / "checkpoint")
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    trainer.loss_module.load_state_dict(state["loss_module"])
    getattr(trainer.collector, "shutdown", lambda: None)()
    return trainer, policy


def trained_trainer(folder):
    """``(recipe, cfg, trainer, policy)`` of a run folder trained by a recipe's trainer (not
    Scheme), with its checkpoint's weights: for probes that need the loss module's networks."""
    run = Path(folder)
    recipe, cfg = _load_run(run)
    return (recipe, cfg, *_restored(run, recipe, cfg))


def _trained_policy(folder: str):
    """``(recipe, cfg, policy)`` of a run folder, the policy with its checkpoint's weights."""
    run = Path(folder)
    recipe, cfg = _load_run(run)
    if "scheme" in json.loads(config_path(run).read_text()):  # trained by Scheme + Learner
        from torchrl_lite.scheme.run import scheme_policy

        return recipe, cfg, scheme_policy(run, recipe, cfg)
    return recipe, cfg, _restored(run, recipe, cfg)[1]


def _check_resumable(checkpoint: Path) -> None:
    """A complete checkpoint is at ``checkpoint``, or beside it after a killed save."""
    from torchrl_lite.trainers.checkpoint import checkpoint_exists

    if not checkpoint_exists(checkpoint):
        raise FileNotFoundError(f"Cannot resume: no checkpoint in {checkpoint}.")


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


def _check_options(args) -> None:
    """Range-check the command's own options before anything runs."""
    rules = {  # option -> (attribute, lowest allowed value)
        "train": [
            ("--frames", "frames", 1),
            ("--seed", "seed", 0),
            ("--eval-every", "eval_every", 1),
            ("--eval-episodes", "eval_episodes", 1),
        ],
        "eval": [("--episodes", "episodes", 1)],
        "dataset": [("--frames", "frames", 1), ("--seed", "seed", 0), ("--noise", "noise", 0)],
        "demo": [("--num-envs", "num_envs", 0), ("--steps", "steps", 1), ("--seed", "seed", 0)],
    }.get(args.command, [])
    for option, attr, low in rules:
        value = getattr(args, attr, None)
        if value is not None and not (math.isfinite(value) and value >= low):
            raise ValueError(f"{option} {value}: must be >= {low} (and finite).")


def _report_unexpected(err: BaseException) -> int:
    """One ``torchrl-lite: error:`` line for an unexpected exception; the traceback saved."""
    import tempfile
    import traceback

    folder = Path(os.environ.get("TORCHRL_LITE_TRACEBACK_DIR", tempfile.gettempdir()))
    path = folder / f"torchrl-lite-traceback-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(err)))
        where = f"traceback saved to {path}"
    except OSError as write_err:
        where = f"the traceback could not be saved ({write_err})"
    message = " ".join(str(err).split()) or "(no message)"
    print(f"torchrl-lite: error: {type(err).__name__}: {message} ({where})", file=sys.stderr)
    return 1


def _from_json(value):
    return tuple(value) if isinstance(value, list) else value


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


def train(args) -> dict:
    """Build the recipe, train, write the run folder; returns a summary dict."""
    from torchrl_lite.recipes import config_for, get_recipe
    from torchrl_lite.recipes.common import EpisodeReturns, PeriodicEvaluation, apply_overrides
    from torchrl_lite.record import get_logger

    overrides = _parse_overrides(args.overrides)
    typed = _typed_options(args, overrides)
    if args.resume:  # options given with --resume act as overrides of the saved config
        for name in ("frames", "seed", "env"):
            if getattr(args, name) is not None:
                overrides[name] = str(getattr(args, name))
        out = Path(args.resume)
        recipe, cfg = _load_run(out)
        _check_resumable(out / "checkpoint")
    else:
        recipe = get_recipe(args.algo)
        changes = {k: v for k, v in (("frames", args.frames), ("seed", args.seed)) if v is not None}
        cfg = config_for(recipe, args.env, **changes)
        out = Path(args.out or f"runs/{recipe.ALGO}-{cfg.env.replace('/', '-')}-s{cfg.seed}")
    saved, cfg = cfg, apply_overrides(cfg, overrides)
    _check_config_ranges(cfg, typed)
    if args.resume:
        _check_resume_overrides(saved, cfg, typed)
    if getattr(cfg, "dataset", None):  # offline: saved absolute, so eval/resume work anywhere
        cfg = dataclasses.replace(cfg, dataset=str(Path(cfg.dataset).resolve()))
    target = cfg.target if cfg.target is not None else recipe.TARGETS.get(cfg.env)
    scheme = _scheme_options(args, out)
    if args.resume and scheme is not None:
        _check_scheme_resume_overrides(saved, cfg, typed)
    offline = getattr(recipe, "OFFLINE", False)  # learns from a dataset: no training episodes
    evaluation = _evaluation_options(args, out, offline, scheme)
    if scheme is not None:  # distributed: Scheme + Learner, the same run folder
        from torchrl_lite.scheme.run import train_with_scheme

        logger = None if args.logger == "none" else args.logger
        return train_with_scheme(
            recipe, cfg, out, scheme, bool(args.resume), logger, args.quiet, target
        )

    # everything is built (and every input checked) before the run folder is touched
    logger_kind = None if args.logger == "none" else args.logger
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
    evaluated_before = args.resume and "evaluation" in json.loads(config_path(out).read_text())
    if periodic is not None and (evaluated_before or not args.resume):
        periodic.register(trainer)
    unit = "gradient steps" if offline else "frames"
    if args.resume:
        trainer.load(out / "checkpoint")
        if periodic is not None and not evaluated_before:
            periodic.register(trainer)
    out.mkdir(parents=True, exist_ok=True)
    run_config = {"algo": recipe.ALGO, "config": dataclasses.asdict(cfg)}
    if evaluation is not None:
        run_config["evaluation"] = evaluation
    config_path(out).write_text(json.dumps(run_config, indent=2))
    if logger_kind:
        trainer.logger = get_logger(logger_kind, logger_name=str(out), experiment_name="logs")
        trainer.logger.log_hparams(cfg)
    start = time.perf_counter()
    interrupted = False
    try:
        trainer.train()
    except KeyboardInterrupt:
        interrupted = True
        print(f"\ninterrupted: the last checkpoint in {out / 'checkpoint'} is intact", flush=True)
    seconds = time.perf_counter() - start
    write_rows(out / "episodes.csv", ("frames", "episode_return"), episodes.history)
    plot_curve(
        out / "learning_curve.png", episodes.history, f"{recipe.ALGO} on {cfg.env}", target, unit
    )
    summary = {
        "algo": recipe.ALGO,
        "env": cfg.env,
        "frames": trainer.collected_frames,
        "seconds": round(seconds, 1),
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
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"{recipe.ALGO} on {cfg.env}: {summary['frames']} {unit} in {seconds:.0f}s, "
        + (
            f"mean evaluation return {summary['mean_return_last10']:.1f}"
            if offline
            else f"mean return (last 10 episodes) {summary['mean_return_last10']:.1f}"
        )
        + (
            f", target {target} reached at {episodes.solved_at} {unit}"
            if episodes.solved_at
            else ""
        )
        + (
            f"; deterministic evaluation {summary['evaluation']['mean_return']:.1f} "
            f"+/- {summary['evaluation']['std_return']:.1f}"
            if "evaluation" in summary
            else ""
        )
        + f"; run folder {out}",
        flush=True,
    )
    if trainer.logger is not None:
        trainer.logger.close()
    if interrupted:
        raise SystemExit(130)
    return summary


# -- eval --------------------------------------------------------------------------------


def evaluate(
    folder: str,
    episodes: int = 10,
    video: str | None = None,
    quiet: bool = True,
    max_steps: int = 2_000,
) -> tuple[float, float]:
    """Mean and std of the deterministic policy's return over ``episodes`` episodes.

    Each episode runs until done or ``max_steps`` steps.
    """
    from torchrl_lite.recipes.common import play_deterministic

    recipe, cfg, policy = _trained_policy(folder)
    env_kwargs = {"from_pixels": True, "pixels_only": False} if video else {}
    env = recipe.make_eval_env(cfg, **env_kwargs)
    rollouts = play_deterministic(env, policy, episodes, max_steps)
    env.close()
    returns = [float(rollout.get((K.NEXT, K.REWARD)).sum()) for rollout in rollouts]
    mean, std = statistics.fmean(returns), statistics.pstdev(returns)
    if video:
        _write_video(video, torch.cat([r.get((K.NEXT, K.PIXELS)) for r in rollouts]).numpy())
    if not quiet:
        print(f"mean return: {mean:.1f} +/- {std:.1f} over {episodes} episodes", flush=True)
    return mean, std


def _write_video(path: str, frames) -> None:
    """Write ``[T, H, W, 3]`` uint8 frames padded to codec-friendly sizes (no rescaling)."""
    import imageio.v2 as imageio

    from torchrl_lite.record.loggers.common import codec_friendly

    imageio.mimsave(path, codec_friendly(frames), fps=30, macro_block_size=1)


def make_dataset(folder: str, path: str, frames: int, noise: float, seed: int) -> dict:
    """Write a D4RL-layout dataset file from a trained run's policy (for offline recipes).

    The policy acts as it explores: a stochastic actor (SAC's TanhNormal) samples its
    actions, as D4RL's files were collected from partially trained SAC policies; ``noise``
    adds Gaussian noise of that fraction of the half-range on top (0: none)."""
    from torchrl_lite.recipes.offline import collect_dataset

    recipe, cfg, policy = _trained_policy(folder)
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


# -- demo / bench ------------------------------------------------------------------------


def demo(env_id: str, num_envs: int, steps: int, seed: int) -> dict:
    """Random-policy rollout of ``steps`` steps; returns the printed summary as a dict."""
    from torchrl_lite.envs import GymEnv

    torch.manual_seed(seed)
    env = GymEnv(env_id, num_envs=num_envs)
    env.set_seed(seed)
    start = time.perf_counter()
    rollout = env.rollout(steps, break_when_any_done=False)
    elapsed = time.perf_counter() - start
    env.close()
    returns = episode_returns(rollout)
    frames = rollout.numel()
    summary = {
        "env": env_id,
        "batch": list(rollout.batch_size),
        "frames": frames,
        "episodes": len(returns),
        "mean_return": sum(returns) / len(returns) if returns else float("nan"),
        "frames_per_s": frames / elapsed,
    }
    print(
        f"random policy on {env_id}: rollout batch {summary['batch']}, {frames} frames, "
        f"{len(returns)} finished episodes, mean return {summary['mean_return']:.2f}, "
        f"{summary['frames_per_s']:,.0f} frames/s"
    )
    return summary


def bench() -> int:
    """Run the repository's benchmarks (``benchmarks/run_all.py``)."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "run_all.py"
    if not script.is_file():
        raise FileNotFoundError(f"The benchmarks live in the source checkout; {script} is missing.")
    return subprocess.call([sys.executable, script.name], cwd=script.parent)


# -- entry point -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchrl-lite", description="torchrl_lite command line")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train an agent with a recipe")
    p.add_argument(
        "algo",
        nargs="?",
        default=None,
        help="ppo, a2c, dqn, ddpg, td3, sac, redq, cql, iql, td3_bc, dreamer, dt, odt",
    )
    p.add_argument(
        "--env", default=None, help="gymnasium id, dm_control/DOMAIN-TASK or ALE/GAME-v5"
    )
    p.add_argument("--frames", type=int, default=None, help="frame budget")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--logger", default="csv", choices=["csv", "tensorboard", "wandb", "none"])
    p.add_argument("--out", default=None, help="run folder (default runs/ALGO-ENV-sSEED)")
    p.add_argument("--resume", default=None, help="continue the run in this folder")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--col-workers", type=int, default=None, help="Scheme collection workers")
    p.add_argument("--grad-workers", type=int, default=None, help="Scheme gradient workers")
    p.add_argument("--async-col", action="store_true", help="asynchronous collection")
    p.add_argument("--async-grad", action="store_true", help="asynchronous gradients")
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. auto)")
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="evaluate the deterministic policy every this many frames (evaluations.csv)",
    )
    p.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation (5)")
    p.add_argument("overrides", nargs="*", help="config overrides key=value")
    p = sub.add_parser("eval", help="evaluate a trained run deterministically")
    p.add_argument("run", help="run folder written by train")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--video", default=None, help="write an mp4 of the episodes")
    p = sub.add_parser(
        "dataset",
        help="write an offline dataset from a trained run's policy (a stochastic actor's "
        "actions are sampled, as in D4RL; --noise adds Gaussian noise on top)",
    )
    p.add_argument("run", help="run folder written by train")
    p.add_argument("out", help="the .hdf5 file to write")
    p.add_argument("--frames", type=int, default=50_000)
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="extra Gaussian action noise (x half-range) on the sampled actions; 0: the "
        "policy's own samples only (D4RL's protocol)",
    )
    p.add_argument("--seed", type=int, default=0)
    sub.add_parser("bench", help="run the benchmarks (source checkout)")
    p = sub.add_parser("demo", help="random-policy rollout with a summary")
    p.add_argument("--env", default="CartPole-v1", help="gymnasium env id")
    p.add_argument("--num-envs", type=int, default=4, help="vectorized copies (0: one env)")
    p.add_argument("--steps", type=int, default=500, help="rollout length")
    p.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    torch.set_num_threads(int(os.environ.get("TORCHRL_LITE_THREADS", "1")))
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (args.command != "train" or any("=" not in item for item in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:  # key=value overrides given after options
        args.overrides += extra
    try:
        _check_options(args)
        if args.command == "train":
            if args.algo is None and not args.resume:
                raise ValueError(
                    "train needs an algorithm (e.g. `torchrl-lite train ppo`) or --resume DIR."
                )
            # the first positional may be an override when only --resume is given
            if args.resume and args.algo and "=" in args.algo:
                args.overrides.insert(0, args.algo)
            train(args)
        elif args.command == "eval":
            evaluate(args.run, args.episodes, args.video, quiet=False)
        elif args.command == "dataset":
            make_dataset(args.run, args.out, args.frames, args.noise, args.seed)
        elif args.command == "bench":
            return bench()
        else:
            demo(args.env, args.num_envs, args.steps, args.seed)
    except (ValueError, FileNotFoundError, ImportError) as err:
        print(f"torchrl-lite: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug or an unforeseen failure: one line, traceback on disk
        return _report_unexpected(err)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
