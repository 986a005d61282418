"""The ``torchrl-lite`` command (also ``python -m torchrl_lite``).

    torchrl-lite train ALGO --env ID [--frames N] [--seed S] [--logger csv|tensorboard|wandb]
                       [--out DIR [--overwrite]] [--resume DIR] [key=value ...]
                       [--col-workers N] [--grad-workers M] [--async-col] [--async-grad]
                       [--address auto]   (Scheme + Learner, seed 000's architecture)
    torchrl-lite eval DIR [--episodes N] [--video out.mp4]
    torchrl-lite config ALGO   (every key=value option of a recipe, its default and meaning)
    torchrl-lite dataset DIR OUT.hdf5 [--frames N] [--noise X] [--seed S]
    torchrl-lite bench
    torchrl-lite demo --env ID   (a random-policy rollout)

``train`` writes a run folder (see ``torchrl_lite/_run_folder/``): ``config.json``,
``checkpoint/`` (resumable), ``logs/`` (the logger's files, with ``metrics.csv`` for csv),
``episodes.csv`` (frames and return of every training episode), ``learning_curve.png`` and
``summary.json``. Options and ``key=value`` overrides are checked before torch is imported.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from torchrl_lite import _cli_deploy as deploy
from torchrl_lite._cli_deploy import evaluate, make_dataset
from torchrl_lite._cli_train import precheck_train, train
from torchrl_lite._run_folder.trained import trained_trainer

__all__ = ["build_parser", "evaluate", "main", "make_dataset", "trained_trainer"]


def _check_options(args) -> None:
    """Range-check the command's own options before anything runs."""
    rules = {  # option -> (attribute, lowest allowed value)
        "train": [("--frames", "frames", 1), ("--seed", "seed", 0)]
        + [(f"--eval-{what}", f"eval_{what}", 1) for what in ("every", "episodes")],
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


# -- config ------------------------------------------------------------------------------


def print_config(algo: str) -> None:
    """Print every ``key=value`` option of a recipe: its default and its docstring (read
    from the recipe's source, without importing torch)."""
    import textwrap

    from torchrl_lite.recipes import recipe_key
    from torchrl_lite.recipes.fields import config_fields, recipe_constant

    key = recipe_key(algo)
    fields = config_fields(key).values()
    width = max(len(f"{f.name}={f.default!r}") for f in fields)
    print(f"torchrl-lite train {key} [key=value ...]; the options, their defaults and meaning:")
    for f in fields:
        head = f"  {f.name}={f.default!r}".ljust(width + 4)
        doc = textwrap.wrap(f"({f.annotation}) {f.doc}", 96 - len(head)) or [""]
        print(head + doc[0])
        for line in doc[1:]:
            print(" " * len(head) + line)
    targets = recipe_constant(key, "TARGETS") or {}
    known = ", ".join(f"{env}: {value}" for env, value in targets.items()) or "none"
    notes = (
        f"target unset: the recipe's target for the env ({known}); target=none trains the "
        "whole frame budget. MuJoCo, dm_control and Atari env ids change some defaults "
        "(ENV_DEFAULTS); a run's config.json records the values it used."
    )
    print("\n".join(textwrap.wrap(notes, 96)))


# -- demo / bench ------------------------------------------------------------------------


def demo(env_id: str, num_envs: int, steps: int, seed: int) -> dict:
    """Random-policy rollout of ``steps`` steps; returns the printed summary as a dict."""
    import torch

    from torchrl_lite.envs import GymEnv
    from torchrl_lite.trainers.episodes import episode_returns

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
    helpful = argparse.ArgumentDefaultsHelpFormatter
    p = sub.add_parser("train", help="train an agent with a recipe", formatter_class=helpful)
    p.add_argument(
        "algo",
        nargs="?",
        default=None,
        help="ppo, a2c, dqn, ddpg, td3, sac, redq, cql, iql, td3_bc, dreamer, dt, odt",
    )
    p.add_argument(
        "--env", default=None, help="gymnasium id, dm_control/DOMAIN-TASK or ALE/GAME-v5"
    )
    p.add_argument("--frames", type=int, default=None, help="frame budget (recipe's default)")
    p.add_argument("--seed", type=int, default=None, help="seed (recipe's default: 0)")
    p.add_argument("--logger", default="csv", choices=["csv", "tensorboard", "wandb", "none"])
    p.add_argument(
        "--out",
        default=None,
        help="run folder, new or empty (default runs/ALGO-ENV-sSEED, or the next free -2, -3)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="with --out: move a run already there aside (DIR.replaced-DATE) and start anew",
    )
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
    p.add_argument(
        "overrides", nargs="*", help="config overrides key=value (see `torchrl-lite config ALGO`)"
    )
    p = sub.add_parser(
        "eval", help="evaluate a trained run deterministically", formatter_class=helpful
    )
    p.add_argument(
        "run", nargs="?", default=None, help="run folder written by `torchrl-lite train`"
    )
    p.add_argument("--episodes", type=int, default=10, help="episodes to play")
    p.add_argument(
        "--video",
        default=None,
        help="also write the episodes to this video file (.mp4, .gif, ...), streamed as "
        "they play; checked before the first episode",
    )
    deploy.add_eval_options(p)  # eval --exported FILE --env ID
    deploy.add_parsers(sub)  # export, tune
    p = sub.add_parser("config", help="list a recipe's key=value options with defaults and meaning")
    p.add_argument("algo", help="ppo, a2c, dqn, ddpg, td3, sac, redq, cql, iql, td3_bc, ...")
    p = sub.add_parser(
        "dataset",
        help="write an offline dataset from a trained run's policy (a stochastic actor's "
        "actions are sampled, as in D4RL; --noise adds Gaussian noise on top)",
        formatter_class=helpful,
    )
    p.add_argument("run", help="run folder written by train")
    p.add_argument("out", help="the .hdf5 file to write")
    p.add_argument("--frames", type=int, default=50_000, help="transitions to collect")
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="extra Gaussian action noise (x half-range) on the sampled actions; 0: the "
        "policy's own samples only (D4RL's protocol)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the collection")
    sub.add_parser("bench", help="run the benchmarks (source checkout)")
    p = sub.add_parser("demo", help="random-policy rollout with a summary", formatter_class=helpful)
    p.add_argument("--env", default="CartPole-v1", help="gymnasium env id")
    p.add_argument("--num-envs", type=int, default=4, help="vectorized copies (0: one env)")
    p.add_argument("--steps", type=int, default=500, help="rollout length")
    p.add_argument("--seed", type=int, default=0, help="seed")
    return parser


def _headless_rendering() -> None:
    """With no display, MuJoCo renders through EGL: set before mujoco is imported (a
    user's own ``MUJOCO_GL`` is kept)."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules:
            os.environ["MUJOCO_GL"] = "egl"
            os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def _run(args) -> int:
    """Run the parsed command: checks that need no torch first, then the command."""
    _check_options(args)
    if args.command == "train":
        # the first positional may be an override when only --resume is given
        if args.resume and args.algo and "=" in args.algo:
            args.overrides.insert(0, args.algo)
            args.algo = None
        precheck_train(args)
    if args.command in ("export", "tune", "eval"):
        deploy.precheck(args)
    if args.command == "config":
        print_config(args.algo)
        return 0
    if args.command == "bench":
        return bench()
    _headless_rendering()
    import torch

    torch.set_num_threads(int(os.environ.get("TORCHRL_LITE_THREADS", "1")))
    if args.command in ("export", "tune") or (args.command == "eval" and args.exported):
        return deploy.run(args)
    if args.command == "train":
        train(args)
    elif args.command == "eval":
        evaluate(args.run, args.episodes, args.video, quiet=False)
    elif args.command == "dataset":
        make_dataset(args.run, args.out, args.frames, args.noise, args.seed)
    else:
        demo(args.env, args.num_envs, args.steps, args.seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (args.command not in ("train", "tune") or any("=" not in item for item in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:  # key=value overrides given after options
        args.overrides += extra
    try:
        return _run(args)
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, FileNotFoundError, ImportError, PermissionError) as err:
        print(f"torchrl-lite: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug or an unforeseen failure: one line, traceback on disk
        return _report_unexpected(err)


if __name__ == "__main__":
    raise SystemExit(main())
