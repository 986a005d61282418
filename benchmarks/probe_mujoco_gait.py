"""What a trained MuJoCo run's deterministic policy does: its gait, in raw gymnasium.

For each run folder, exports the policy (``torchrl-lite export``, TorchScript) and plays
``--episodes`` episodes of the run's env in plain gymnasium, then prints one markdown row
per run: return, episode length (a Hopper or Walker2d that falls ends early), mean forward
velocity, mean torso angle (``qpos[2]``, radians) and the share of steps with the torso
beyond 90 degrees (a HalfCheetah running on its back). This is how a run that falls short
is told apart: a policy stuck in another gait, or one that falls.

Run: ``python benchmarks/probe_mujoco_gait.py benchmarks/runs/ppo-HalfCheetah-v5-s*``
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path


def probe(run: Path, episodes: int, seed: int) -> list:
    import gymnasium as gym
    import numpy as np
    import torch

    from torchrl_lite._cli_deploy import export_run
    from torchrl_lite._run_folder.trained import read_config

    env_id = read_config(run)["config"]["env"]
    with tempfile.TemporaryDirectory() as tmp:
        export_run(run, "torchscript", out=Path(tmp) / "policy.pt")
        policy = torch.jit.load(str(Path(tmp) / "policy.pt"))
    env = gym.make(env_id)
    returns, lengths, speed, angle = [], [], [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, steps, done = 0.0, 0, False
        while not done:
            with torch.no_grad():
                out = policy(torch.as_tensor(obs[None]))
            action = (out[0] if isinstance(out, tuple) else out).reshape(-1).numpy()
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            steps += 1
            speed.append(info["x_velocity"])
            angle.append(env.unwrapped.data.qpos[2])
            done = terminated or truncated
        returns.append(total)
        lengths.append(steps)
    angle = np.asarray(angle)
    return [
        run.name,
        f"{np.mean(returns):,.0f}",
        f"{np.mean(lengths):.0f}",
        f"{np.mean(speed):.2f}",
        f"{angle.mean():+.2f}",
        f"{np.mean(np.abs(angle) > math.pi / 2):.2f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders of `torchrl-lite train`")
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--seed", type=int, default=100, help="reset seed of the first episode")
    args = p.parse_args()
    header = ["run", "return", "steps", "forward velocity", "torso angle", "upside down"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for run in args.runs:
        print("| " + " | ".join(probe(run, args.episodes, args.seed)) + " |", flush=True)


if __name__ == "__main__":
    main()
