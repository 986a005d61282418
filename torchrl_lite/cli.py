"""The ``torchrl-lite`` command (also ``python -m torchrl_lite``).

``torchrl-lite demo --env CartPole-v1``: roll out a random policy in a gymnasium env and
print a summary (episodes, returns, frames per second).
"""

from __future__ import annotations

import argparse
import time

import torch

from torchrl_lite import _keys as K


def episode_returns(rollout) -> list[float]:
    """Returns of the episodes that finished inside a ``[*batch, T]`` rollout."""
    reward = rollout.get((K.NEXT, K.REWARD)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    done = rollout.get((K.NEXT, K.DONE)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    returns = []
    for r_row, d_row in zip(reward, done):
        total = 0.0
        for r, d in zip(r_row.tolist(), d_row.tolist()):
            total += r
            if d:
                returns.append(total)
                total = 0.0
    return returns


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrl-lite", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="random-policy rollout with a summary")
    p_demo.add_argument("--env", default="CartPole-v1", help="gymnasium env id")
    p_demo.add_argument("--num-envs", type=int, default=4, help="vectorized copies (0: one env)")
    p_demo.add_argument("--steps", type=int, default=500, help="rollout length")
    p_demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(args.env, args.num_envs, args.steps, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
