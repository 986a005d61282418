"""The seed's task, long run: PPO on HalfCheetahBulletEnv-v0 with 2 Ray collection workers
through ``Scheme`` + ``Learner``, to 2M frames, with a deterministic evaluation curve.

The seed's own values (``examples/seed_000_train.py``: one env, 1000 steps per round,
4 epochs, lr 1e-4, no normalization) are kept runnable there; this run uses the settings
published for PPO on HalfCheetahBulletEnv-v0 in SB3's rl-zoo (``hyperparams/ppo.yml``:
observation and reward normalization, 16 envs x 512 steps, minibatches of 128, 20
epochs, gamma 0.99, GAE lambda 0.9, clip 0.4, lr 3e-5, no entropy bonus, value coef 0.5,
grad-norm clip 0.5, [256, 256] ReLU networks without orthogonal init, gSDE with
``sde_sample_freq=4`` and log-std init -2): ``OnPolicyActor(use_sde=True, ...)``, an
unsquashed state-dependent Gaussian (``torchrl_lite.modules.GSDEHead`` on the policy's last
hidden layer) whose samples are clipped to the action bounds for the env, the
log-probability being the raw sample's (``ClippedProbabilisticActor``). The 16 envs are
2 collection workers x 8 envs; noise matrices are per env, redrawn every 4 steps.

``--no-sde`` runs the previous setting (the reference paragraph of the report): the same
values without gSDE, a tanh-squashed Normal with a state-independent log-std initialised at
-1.0 (``NO_SDE``); it reached a deterministic return of 1,135 at 2M frames (run folder
committed at ``benchmarks/runs/halfcheetah-ppo``). With gSDE (seed 0) the deterministic
return passed 2,000 at 352k frames (2,120) and was 3,114 at 2.0M; the curve is in
``benchmarks/results/scheme_halfcheetah.md``, the run folder in
``benchmarks/runs/halfcheetah-ppo-sde`` (its README has the exact resume line).

Normalization: the observation statistics live in the actor (``normalize_obs=True``), so
checkpoints, ``actor_critic.state_dict`` and the deterministic evaluation use them; the
reward statistics live in the storage (``normalize_reward=True``), in the checkpoints.

Run folder (default ``runs/halfcheetah-ppo-sde``; ``--no-sde``:
``runs/halfcheetah-ppo``): ``config.json`` (the recipe; ``--resume`` uses it, so a
folder keeps its setting), ``checkpoint/`` (every ``--checkpoint-every`` seconds, resumable
with ``--resume``), ``actor_critic.state_dict``,
``eval.csv`` (frames, seconds, deterministic return of ``--eval-episodes`` episodes),
``train.csv`` (training returns per round), ``logs/`` (the Learner's CSV) and ``PGID``.

Run: ``setsid nice -n 19 python benchmarks/scheme_halfcheetah.py --run-dir DIR [--resume]``;
a short check: ``--frames 20000 --eval-every 10000``. Results: ``--report`` writes
``benchmarks/results/scheme_halfcheetah.md`` from the run folder's ``eval.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

ENV_ID = "HalfCheetahBulletEnv-v0"
RECIPE = {  # SB3 rl-zoo's PPO HalfCheetahBulletEnv-v0 values (see the module docstring)
    "col_workers": 2, "envs_per_worker": 8, "steps": 512, "mini_batch_size": 128,
    "epochs": 20, "gamma": 0.99, "gae_lambda": 0.9, "clip": 0.4, "lr": 3e-5,
    "entropy_coef": 0.0, "value_coef": 0.5, "max_grad_norm": 0.5, "hidden": [256, 256],
    "log_std_init": -2.0, "normalize_obs": True, "normalize_reward": True,
    "use_sde": True, "sde_sample_freq": 4,
}  # fmt: skip
# the first run's setting (--no-sde): no gSDE, tanh-squashed Normal, log-std init -1
NO_SDE = dict(RECIPE, log_std_init=-1.0, use_sde=False, sde_sample_freq=-1)
REFERENCE_RUN = Path(__file__).parent / "runs" / "halfcheetah-ppo"  # the --no-sde run


def factories(cfg: dict) -> dict:
    """The Scheme's factories of the recipe ``cfg`` (a ``RECIPE``-like dict)."""
    from torch import nn

    from torchrl_lite.agent.actors import OnPolicyActor
    from torchrl_lite.agent.algos import PPO
    from torchrl_lite.agent.env import VecEnv
    from torchrl_lite.agent.storages import GAEBuffer
    from torchrl_lite.envs import pybullet_test_env_factory, pybullet_train_env_factory

    kwargs = {"env_id": cfg.get("env", ENV_ID)}
    envs, action_space, obs_space = VecEnv.create_factory(
        pybullet_train_env_factory, kwargs, cfg["envs_per_worker"]
    )
    test, _, _ = VecEnv.create_factory(pybullet_test_env_factory, kwargs, 1, name="test")
    extractor = {"hidden_sizes": tuple(cfg["hidden"]), "activation": nn.ReLU}
    sde = {"use_sde": True, "sde_sample_freq": cfg["sde_sample_freq"]} if cfg.get("use_sde") else {}
    return {
        "algo_factory": PPO.create_factory(
            lr=cfg["lr"],
            num_epochs=cfg["epochs"],
            clip_param=cfg["clip"],
            entropy_coef=cfg["entropy_coef"],
            value_loss_coef=cfg["value_coef"],
            max_grad_norm=cfg["max_grad_norm"],
            mini_batch_size=cfg["mini_batch_size"],
            gamma=cfg["gamma"],
        ),  # fmt: skip
        "actor_factory": OnPolicyActor.create_factory(
            obs_space,
            action_space,
            feature_extractor_kwargs=extractor,
            normalize_obs=cfg["normalize_obs"],
            log_std_init=cfg["log_std_init"],
            **sde,
        ),  # fmt: skip
        "storage_factory": GAEBuffer.create_factory(
            size=cfg["steps"],
            gae_lambda=cfg["gae_lambda"],
            normalize_reward=cfg["normalize_reward"],
        ),  # fmt: skip
        "train_envs_factory": envs,
        "test_envs_factory": test,
    }


def evaluate(actor, episodes: int, seed: int = 0, env_id: str = ENV_ID) -> list[float]:
    """Deterministic returns of ``actor`` (its observation statistics included) on fresh
    test envs, through the seed's ``get_action``."""
    from torchrl_lite.envs import pybullet_test_env_factory

    returns = []
    for k in range(episodes):
        env = pybullet_test_env_factory(env_id, index_env=k, seed=seed)
        try:
            obs, _ = env.reset()
            total, done = 0.0, False
            while not done:
                with torch.no_grad():
                    obs_t = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
                    _, clipped, _, _, _ = actor.get_action(
                        obs_t, torch.zeros(1, 1), torch.zeros(1, 1), deterministic=True
                    )
                obs, reward, terminated, truncated, _ = env.step(clipped[0].numpy())
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        finally:
            env.close()
    return returns


def _append(path: Path, row: dict) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def _truncate(path: Path, frames: int) -> None:
    """Drop rows past ``frames`` (written after the checkpoint a resume starts from)."""
    if not path.is_file():
        return
    with path.open() as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if int(r["frames"]) <= frames]
    if len(kept) != len(rows) and rows:
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(kept)


def train(args) -> None:
    import ray

    from torchrl_lite import Learner
    from torchrl_lite.scheme import Scheme

    run = Path(args.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    (run / "PGID").write_text(f"{os.getpgid(0)}\n")
    config_path = run / "config.json"
    if args.resume and config_path.is_file():
        saved = json.loads(config_path.read_text())
        cfg, frames, seed = saved["recipe"], args.frames or saved["frames"], saved["seed"]
        if args.frames:
            saved["frames"] = frames
            config_path.write_text(json.dumps(saved, indent=2))
    else:
        cfg = dict(NO_SDE if args.no_sde else RECIPE, col_workers=args.col_workers, env=args.env)
        frames, seed = args.frames or 2_000_000, args.seed
        config_path.write_text(json.dumps({"recipe": cfg, "frames": frames, "seed": seed,
                                           "eval_every": args.eval_every}, indent=2))  # fmt: skip
    # our own Ray instance ("local": never the test suite's or a `ray start` cluster)
    ray.init(address="local", num_cpus=cfg["col_workers"] + 1, include_dashboard=False,
             object_store_memory=150 * 1024**2, log_to_driver=False)  # fmt: skip
    scheme = Scheme(**factories(cfg), col_remote_workers=cfg["col_workers"], seed=seed,
                    worker_timeout=args.worker_timeout)  # fmt: skip
    learner = Learner(scheme, target_steps=frames, log_dir=run)
    if args.resume and (run / "checkpoint").exists():
        learner.load_checkpoint(run / "checkpoint")
        print(f"resumed at {learner.frames} frames", flush=True)
    for name in ("eval.csv", "train.csv"):
        _truncate(run / name, learner.frames)
    next_eval = (learner.frames // args.eval_every + 1) * args.eval_every
    if learner.frames == 0:
        next_eval = 0
    last_save = time.perf_counter()
    frames_per_round = cfg["col_workers"] * cfg["envs_per_worker"] * cfg["steps"]
    per_pass = cfg["epochs"] * (frames_per_round // cfg["mini_batch_size"])
    try:
        while not learner.done():
            if learner.frames >= next_eval:
                start = time.perf_counter()
                scores = evaluate(scheme.local.actor, args.eval_episodes, seed)
                row = {"frames": learner.frames, "updates": learner.updates,
                       "train_seconds": round(learner.seconds["total"], 1),
                       "eval_mean": round(statistics.fmean(scores), 1),
                       "eval_min": round(min(scores), 1), "eval_max": round(max(scores), 1),
                       "eval_seconds": round(time.perf_counter() - start, 1),
                       "wall_time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}  # fmt: skip
                _append(run / "eval.csv", row)
                print("eval", row, flush=True)
                next_eval += args.eval_every
            info = learner.step()
            if info["frames"]:
                returns = info["returns"]
                _append(run / "train.csv", {
                    "frames": learner.frames, "updates": learner.updates,
                    "seconds": round(learner.seconds["total"], 1), "episodes": len(returns),
                    "mean_return": round(statistics.fmean(returns), 1) if returns else "",
                    "fps": round(learner.frames / max(learner.seconds["total"], 1e-9), 1),
                })  # fmt: skip
                learner.print_info()
            # at the end of a pass (its last minibatch applied): a resume then collects anew
            # and loses nothing (an on-policy pass's data are not in the checkpoint)
            pass_done = getattr(scheme.local, "_consumed", 0) == per_pass
            if time.perf_counter() - last_save > args.checkpoint_every and pass_done:
                learner.save_checkpoint()
                learner.save_model()
                last_save = time.perf_counter()
        scores = evaluate(scheme.local.actor, args.eval_episodes, seed)
        _append(run / "eval.csv", {
            "frames": learner.frames, "updates": learner.updates,
            "train_seconds": round(learner.seconds["total"], 1),
            "eval_mean": round(statistics.fmean(scores), 1), "eval_min": round(min(scores), 1),
            "eval_max": round(max(scores), 1), "eval_seconds": 0.0,
            "wall_time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        })  # fmt: skip
        learner.save_checkpoint()
        learner.save_model()
    finally:
        learner.close()
        ray.shutdown()


def _eval_rows(run: Path) -> list[list]:
    with (run / "eval.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [[int(r["frames"]), float(r["train_seconds"]), float(r["eval_mean"]),
             float(r["eval_min"]), float(r["eval_max"])] for r in rows]  # fmt: skip


def _describe(run: Path) -> str:
    cfg = json.loads((run / "config.json").read_text())["recipe"]
    if cfg.get("use_sde"):
        return (f"gSDE, sde_sample_freq {cfg['sde_sample_freq']}, log-std init "
                f"{cfg['log_std_init']}, Normal clipped to the bounds")  # fmt: skip
    return f"no gSDE, TanhNormal, log-std init {cfg['log_std_init']}"


def _reference(run: Path) -> str:
    """A paragraph on the --no-sde run (the committed one), unless it is ``run``."""
    if not (REFERENCE_RUN / "eval.csv").is_file() or run.resolve() == REFERENCE_RUN.resolve():
        return ""
    table = _eval_rows(REFERENCE_RUN)
    final = table[-1]
    return (
        f"\n\nReference, the first run ({_describe(REFERENCE_RUN)}; same values otherwise, "
        f"run folder benchmarks/runs/halfcheetah-ppo): deterministic mean {final[2]:,.0f} "
        f"(min {final[3]:,.0f}, max {final[4]:,.0f}) at {final[0]:,} frames after "
        f"{final[1]:,.0f} s of training, best {max(r[2] for r in table):,.0f}; "
        f"{_collapses(table)}."
    )


def _collapses(table: list[list]) -> str:
    """How many evaluations past 100k frames had an episode below -1,000."""
    late = [r for r in table if r[0] > 100_000]
    low = sum(1 for r in late if r[3] < -1000)
    return (f"{low} of the {len(late)} evaluations past 100k frames had an episode below "
            f"-1,000 (the cheetah flipped or stuck)")  # fmt: skip


def report(run_dir: str) -> None:
    from _common import write_table

    run = Path(run_dir)
    table = _eval_rows(run)
    best = max((r[2] for r in table), default=float("nan"))
    with (run / "train.csv").open() as f:
        train_rows = list(csv.DictReader(f))
    last = train_rows[-1] if train_rows else {"frames": 0, "seconds": 1}
    fps = int(last["frames"]) / max(float(last["seconds"]), 1e-9)
    recent = [float(r["mean_return"]) for r in train_rows[-20:] if r["mean_return"]]
    frames = json.loads((run / "config.json").read_text())["frames"]
    write_table(
        "scheme_halfcheetah",
        "Scheme: PPO on HalfCheetahBulletEnv-v0, 2 Ray collection workers (deterministic eval)",
        ["frames", "training s", "eval mean", "eval min", "eval max"],
        table,
        notes=(
            f"benchmarks/scheme_halfcheetah.py (SB3 rl-zoo's PPO values, {_describe(run)}; "
            f"observation and reward normalization), run folder {run}; one seed, nice 19 on "
            f"a shared 2-core machine. Best deterministic mean so far {best:,.0f}; target "
            f">= 2,000 at 2M frames (SB3 zoo PPO: 2,925). Training so far: "
            f"{int(last['frames']):,} of {frames:,} frames in {float(last['seconds']):,.0f} s "
            f"({fps:.0f} frames/s overall, collection and 20 epochs of updates; at this rate "
            f"2M frames take {2e6 / max(fps, 1e-9) / 3600:.1f} h); mean training return of "
            f"the last rounds {statistics.fmean(recent) if recent else float('nan'):.0f}; "
            f"{_collapses(table)}.{_reference(run)}"
        ),
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default=None, help="default: runs/halfcheetah-ppo-sde "
                        "(--no-sde: runs/halfcheetah-ppo)")  # fmt: skip
    parser.add_argument("--no-sde", action="store_true",
                        help="the first run's setting: no gSDE, TanhNormal, log-std init -1")  # fmt: skip
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--frames", type=int, default=None, help="2M (with --resume: saved)")
    parser.add_argument("--env", default=ENV_ID)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--col-workers", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--eval-episodes", type=int, default=3)
    parser.add_argument("--checkpoint-every", type=float, default=240.0, help="seconds")
    parser.add_argument("--worker-timeout", type=float, default=14400.0, help="seconds")
    parser.add_argument("--report", action="store_true", help="write the results table only")
    args = parser.parse_args(argv)
    if args.run_dir is None:
        args.run_dir = "runs/halfcheetah-ppo" + ("" if args.no_sde else "-sde")
    if args.report:
        report(args.run_dir)
    else:
        train(args)


if __name__ == "__main__":
    main(sys.argv[1:])
