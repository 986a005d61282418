"""Training speed against Stable-Baselines3: SAC, TD3 and PPO on HalfCheetah-v5, one thread.

Each measurement is a fresh subprocess (``--worker ours|sb3``) that builds the agent, runs
the steps before learning starts untimed, then times ``--steps`` env steps of training
(each with its gradient steps). The two libraries run in turn, ``--repeats`` rounds
(interleaved, so a noisy machine slows both alike); the table gives the medians of env
steps per second and their ratio. Same settings on both sides:

* SAC: actor and two Q-networks of 2 x 256 ReLU, batch 256, one gradient step per env
  step, Adam 3e-4, learned temperature, 1,000 random steps first.
* TD3: actor and two critics of 2 x 256 ReLU, batch 256, one critic step per env step,
  the actor and the targets every second one, exploration noise 0.1.
* PPO: actor and critic of 2 x 64 tanh, orthogonally initialised, one env, 2,048 steps
  per batch, 10 epochs of 64-step minibatches, observation and reward normalization (SB3:
  ``VecNormalize``); the first batch and its updates are untimed. SB3's Gaussian is
  clipped to the bounds, ours is the recipe's default (``squash``); ours also decays the
  learning rate (a negligible cost).

Ours runs the recipes (``torchrl_lite.recipes``, the MuJoCo defaults); SB3 is not a
dependency of the package: install it in its own venv (``python -m venv .venv-sb3 &&
.venv-sb3/bin/pip install -c constraints.txt stable-baselines3 "gymnasium[mujoco]"``)
and pass its interpreter with ``--sb3-python``. ``--compile`` also times ours with the
update compiled (``compile_update=true``), after 200 untimed steps of updates (the
compilation).

Run: ``python benchmarks/bench_train_speed.py --sb3-python .venv-sb3/bin/python``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENV = "HalfCheetah-v5"
LEARNING_STARTS = {"sac": 1_000, "td3": 1_000, "ppo": 2_048}
COMPILE_WARMUP = 200  # env steps of compiled updates left untimed (compilation)


def _rate(marks: list[tuple[float, int]], start: int) -> float:
    """Env steps per second between the first mark at or past ``start`` and the last one."""
    first = next((t, n) for t, n in marks if n >= start)
    last = marks[-1]
    return (last[1] - first[1]) / (last[0] - first[0])


# -- workers (run in their own process) ---------------------------------------------------
def run_ours(algo: str, steps: int, seed: int, compile_update: bool) -> float:
    import torch

    from torchrl_lite.recipes import config_for, get_recipe

    torch.set_num_threads(1)
    recipe = get_recipe(algo)
    start = LEARNING_STARTS[algo]
    changes = {"frames": start + steps, "seed": seed}
    if algo in ("sac", "td3"):
        changes.update(init_random_frames=start, buffer_size=start + steps)
    if compile_update:
        changes["compile_update"] = True
    warmup = COMPILE_WARMUP if compile_update else 0  # the first updates compile
    changes["frames"] += warmup
    if algo in ("sac", "td3"):
        changes["buffer_size"] += warmup
    cfg = config_for(recipe, ENV, **changes)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    marks: list[tuple[float, int]] = []
    trainer.register_op(
        "post_steps", lambda: marks.append((time.perf_counter(), trainer.collected_frames))
    )
    trainer.train()
    return _rate(marks, start + warmup)


def run_sb3(algo: str, steps: int, seed: int) -> float:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO, SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    start = LEARNING_STARTS[algo]
    marks: list[tuple[float, int]] = []

    class Marks(BaseCallback):
        def _on_step(self) -> bool:
            if algo != "ppo":
                marks.append((time.perf_counter(), self.num_timesteps))
            return True

        def _on_rollout_start(self) -> None:  # PPO: after the previous batch's updates
            if algo == "ppo":
                marks.append((time.perf_counter(), self.num_timesteps))

        def _on_training_end(self) -> None:
            marks.append((time.perf_counter(), self.num_timesteps))

    common = dict(seed=seed, device="cpu", verbose=0)
    if algo == "sac":
        model = SAC("MlpPolicy", ENV, learning_starts=start, batch_size=256,
                    buffer_size=start + steps, policy_kwargs=dict(net_arch=[256, 256]),
                    **common)  # fmt: skip
    elif algo == "td3":
        act_dim = gym.make(ENV).action_space.shape[0]
        noise = NormalActionNoise(mean=[0.0] * act_dim, sigma=[0.1] * act_dim)
        model = TD3("MlpPolicy", ENV, learning_starts=start, batch_size=256,
                    buffer_size=start + steps, learning_rate=3e-4, action_noise=noise,
                    policy_kwargs=dict(net_arch=[256, 256]), **common)  # fmt: skip
    else:
        env = VecNormalize(make_vec_env(ENV, n_envs=1, seed=seed), gamma=0.99)
        model = PPO("MlpPolicy", env, n_steps=2048, batch_size=64, n_epochs=10,
                    policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])),
                    **common)  # fmt: skip
    model.learn(total_timesteps=start + steps, callback=Marks())
    return _rate(marks, start)


# -- driver -------------------------------------------------------------------------------
def measure(python: str, worker: str, algo: str, steps: int, seed: int, compiled=False) -> float:
    here = Path(__file__).resolve()
    cmd = [python, str(here), "--worker", worker, "--algo", algo, "--steps", str(steps),
           "--seed", str(seed)] + (["--compile"] if compiled else [])  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent.parent), env.get("PYTHONPATH", "")])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{worker} {algo} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["steps_per_s"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sb3-python", default=None, help="interpreter of a venv with SB3")
    p.add_argument("--algos", default="sac,td3,ppo")
    p.add_argument(
        "--steps", type=int, default=None, help="timed env steps (SAC/TD3: 3000, PPO: 8192)"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="also time ours with compile_update")
    p.add_argument("--worker", choices=["ours", "sb3"], default=None, help=argparse.SUPPRESS)
    p.add_argument("--algo", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.worker is not None:
        default = 8192 if args.algo == "ppo" else 3000
        steps = args.steps or default
        if args.worker == "ours":
            rate = run_ours(args.algo, steps, args.seed, args.compile)
        else:
            rate = run_sb3(args.algo, steps, args.seed)
        print(json.dumps({"steps_per_s": rate}))
        return
    if args.sb3_python is None:
        p.error("--sb3-python PATH is needed (SB3 lives in its own venv; see the docstring)")
    algos = args.algos.split(",")
    cases = [("ours", False), ("sb3", False)] + ([("ours", True)] if args.compile else [])
    rates = {(a, c): [] for a in algos for c in cases}
    for r in range(args.repeats):
        for algo in algos:
            for worker, compiled in cases:
                python = sys.executable if worker == "ours" else args.sb3_python
                steps = args.steps or (8192 if algo == "ppo" else 3000)
                rate = measure(python, worker, algo, steps, args.seed + r, compiled)
                rates[(algo, (worker, compiled))].append(rate)
                print(f"round {r}: {algo} {worker}{' compiled' if compiled else ''}: "
                      f"{rate:.1f} env steps/s", flush=True)  # fmt: skip
    sys.path.insert(0, str(Path(__file__).parent))
    from _common import load_average, write_table

    rows = []
    for algo in algos:
        ours = statistics.median(rates[(algo, ("ours", False))])
        sb3 = statistics.median(rates[(algo, ("sb3", False))])
        row = [algo.upper(), ours, sb3, ours / sb3]
        if args.compile:
            compiled = statistics.median(rates[(algo, ("ours", True))])
            row += [compiled, compiled / ours]
        rows.append(row)
    header = ["algo", "ours (steps/s)", "SB3 (steps/s)", "ours / SB3"]
    if args.compile:
        header += ["ours compiled", "compiled / eager"]
    write_table(
        "train_speed",
        f"Training speed on {ENV}, one torch thread (medians of {args.repeats}, interleaved)",
        header,
        rows,
        notes=f"Env steps per second during training; load average {load_average():.1f}.",
    )


if __name__ == "__main__":
    main()
