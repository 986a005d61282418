"""Environment benchmarks: GymEnv, SerialEnv/ParallelEnv and transforms against gymnasium.

Run: ``python benchmarks/bench_envs.py`` (``make bench`` runs every benchmark). Every
ratio compares two loops measured in this run on this machine.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import gymnasium as gym
import numpy as np
import torch

from _common import smoke, timeit, write_table
from torchrl_lite.envs import (
    Compose,
    GymEnv,
    InitTracker,
    ObservationNorm,
    ParallelEnv,
    RewardScaling,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)

torch.set_num_threads(1)
STEPS = 2_000 if smoke() else 10_000
FRAMES = 4_000 if smoke() else 20_000  # batched envs: frames per run
COPIES = 4


def raw_loop(env_id: str, steps: int) -> None:
    """The floor: step a gymnasium env with random actions, observation -> torch tensor."""
    env = gym.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        torch.as_tensor(obs)
        if terminated or truncated:
            obs, _ = env.reset()
            torch.as_tensor(obs)


def raw_vector_loop(env_id: str, num_envs: int, steps: int) -> None:
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps // num_envs):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        torch.as_tensor(obs)


def lib_rollout(env: GymEnv, steps: int) -> None:
    env.set_seed(0)
    env.rollout(steps, break_when_any_done=False)


def per_step_rows() -> list[list]:
    rows = []
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        env = GymEnv(env_id)
        raw = timeit(lambda env_id=env_id: raw_loop(env_id, STEPS))
        lib = timeit(lambda env=env: lib_rollout(env, STEPS))
        rows.append(
            [f"GymEnv({env_id!r}).rollout", raw / STEPS * 1e6, lib / STEPS * 1e6, lib / raw]
        )
    n = 8
    env = GymEnv("CartPole-v1", num_envs=n)
    raw = timeit(lambda: raw_vector_loop("CartPole-v1", n, STEPS * n))
    lib = timeit(lambda: lib_rollout(env, STEPS))
    rows.append(
        [
            f"GymEnv('CartPole-v1', num_envs={n}) per frame",
            raw / (STEPS * n) * 1e6,
            lib / (STEPS * n) * 1e6,
            lib / raw,
        ]
    )
    return rows


def gym_vector_run(vec_env, frames: int):
    """The floor of a batched env: a gymnasium vector env, random actions, obs -> torch."""

    def run() -> None:
        vec_env.reset(seed=0)
        vec_env.action_space.seed(0)
        for _ in range(frames // vec_env.num_envs):
            obs, reward, terminated, truncated, _ = vec_env.step(vec_env.action_space.sample())
            torch.as_tensor(obs)

    return run


def batched_rows() -> list[list]:
    """4 CartPole copies: SerialEnv vs SyncVectorEnv, ParallelEnv vs AsyncVectorEnv."""
    make = functools.partial(GymEnv, "CartPole-v1")
    steps = FRAMES // COPIES
    cases = [
        ("sync", "SerialEnv(4)", lambda: SerialEnv(COPIES, make)),
        ("async", "ParallelEnv(4)", lambda: ParallelEnv(COPIES, make)),
        (
            "async",
            "ParallelEnv(4, num_processes=2)",
            lambda: ParallelEnv(COPIES, make, num_processes=2),
        ),
    ]
    rows = []
    for mode, name, build in cases:
        vec_env = gym.make_vec("CartPole-v1", num_envs=COPIES, vectorization_mode=mode)
        env = build()
        try:
            raw = timeit(gym_vector_run(vec_env, FRAMES))
            lib = timeit(lambda env=env: lib_rollout(env, steps))
        finally:
            env.close()
            vec_env.close()
        floor = "SyncVectorEnv" if mode == "sync" else "AsyncVectorEnv"
        rows.append([f"{name} vs {floor}", FRAMES / raw, FRAMES / lib, raw / lib])
    return rows


def transform_rows() -> list[list]:
    """What a Compose of 5 simple transforms adds to each step of a CartPole rollout."""
    plain = GymEnv("CartPole-v1")
    transformed = TransformedEnv(
        GymEnv("CartPole-v1"),
        Compose(
            ObservationNorm(loc=0.0, scale=2.0, in_keys=["observation"]),
            RewardScaling(loc=0.0, scale=0.5),
            RewardSum(),
            StepCounter(),
            InitTracker(),
        ),
    )
    base = timeit(lambda: lib_rollout(plain, STEPS)) / STEPS * 1e6
    composed = timeit(lambda: lib_rollout(transformed, STEPS)) / STEPS * 1e6
    return [["GymEnv('CartPole-v1') + Compose of 5 transforms", base, composed, composed - base]]


def import_time(code: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time; t=time.perf_counter(); {code}; print(time.perf_counter()-t)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        best = min(best, float(out.stdout.strip()))
    return best


def import_rows() -> list[list]:
    base = import_time("import tensordict")
    rows = [["import tensordict", base, 0.0]]
    for mod in ("torchrl_lite", "torchrl_lite.envs", "torchrl_lite.data"):
        t = import_time(f"import tensordict, {mod}")
        rows.append([f"import tensordict, {mod}", t, t - base])
    return rows


def main() -> None:
    write_table(
        "envs_per_step",
        "Env per-step cost (random policy)",
        ["case", "raw gymnasium+torch (us/step)", "torchrl_lite (us/step)", "ratio"],
        per_step_rows(),
        notes=f"{STEPS} steps, median of 5 runs; raw loop = gymnasium step + action_space.sample() + torch.as_tensor(obs). Target ratio <= 2.",
    )
    write_table(
        "envs_batched",
        f"Batched envs: {COPIES} CartPole-v1 copies, random policy",
        [
            "case",
            "gymnasium (frames/s)",
            "torchrl_lite (frames/s)",
            "ratio (torchrl_lite / gymnasium)",
        ],
        batched_rows(),
        notes=f"{FRAMES} frames per run, median of 5 runs (wall time). Targets: SerialEnv >= 0.67 "
        "(within 1.5x of SyncVectorEnv), ParallelEnv >= 1.",
    )
    write_table(
        "envs_transforms",
        "Per-step cost of transforms",
        ["case", "without (us/step)", "with (us/step)", "added (us/step)"],
        transform_rows(),
        notes="ObservationNorm, RewardScaling, RewardSum, StepCounter, InitTracker on a random "
        f"CartPole rollout of {STEPS} steps, median of 5 runs. Target: under 15 us added per step.",
    )
    write_table(
        "import_time",
        "Import time",
        ["import", "seconds (best of 5)", "added to tensordict"],
        import_rows(),
        notes="Target: torchrl_lite adds at most 0.3 s to `import tensordict`.",
    )


if __name__ == "__main__":
    np.random.seed(0)
    main()
