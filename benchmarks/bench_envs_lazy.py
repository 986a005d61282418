"""Batched envs over copies whose specs differ (lazy stacks) against copies of equal specs.

Four gymnasium copies, random actions: two Pendulum-v1 and two MountainCarContinuous-v0
(observations of 3 and 2 entries: lazily stacked) against four Pendulum-v1 (the equal-specs
path, which steps gymnasium copies at the numpy level). Writes ``results/envs_lazy.md``.
"""

from __future__ import annotations

import torch

from _common import smoke, timeit, write_table
from torchrl_lite.envs import GymEnv, ParallelEnv, SerialEnv


def pendulum():
    return GymEnv("Pendulum-v1")


def mountain_car():
    return GymEnv("MountainCarContinuous-v0")


def frames_per_s(env, steps: int) -> float:
    env.set_seed(0)
    seconds = timeit(lambda: env.rollout(steps, break_when_any_done=False), repeats=5)
    return steps * env.batch_size.numel() / seconds


def main() -> None:
    torch.set_num_threads(1)
    steps = 100 if smoke() else 1000
    rows = []
    for cls in (SerialEnv, ParallelEnv):
        equal = cls(4, pendulum)
        lazy = cls(4, [pendulum, mountain_car, pendulum, mountain_car])
        a, b = frames_per_s(equal, steps), frames_per_s(lazy, steps)
        equal.close()
        lazy.close()
        rows.append([f"{cls.__name__}(4)", a, b, b / a])
    write_table(
        "envs_lazy",
        "Batched envs of copies with different specs (lazy stacks), 4 gymnasium copies",
        ["case", "equal copies (frames/s)", "copies that differ (frames/s)", "ratio"],
        rows,
        notes=(
            f"{steps} steps per rollout, median of 5 runs, random actions. Equal copies: 4 "
            "Pendulum-v1; copies that differ: 2 Pendulum-v1 + 2 MountainCarContinuous-v0 "
            "(each copy stepped through its own `_step`, data lazily stacked). The equal-copies "
            "path has no per-step branch for this (same Python calls per step as before)."
        ),
    )


if __name__ == "__main__":
    main()
