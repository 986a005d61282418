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

from _common import interleaved, load_average, smoke, timeit, write_table
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


def raw_loop(env_id: str, steps: int):
    """The floor: ``env.step(env.action_space.sample())`` + ``torch.from_numpy(obs)``."""
    env = gym.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)

    def run() -> None:
        for _ in range(steps):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            torch.from_numpy(obs)
            if terminated or truncated:
                obs, _ = env.reset()
                torch.from_numpy(obs)

    return run


def raw_vector_loop(env_id: str, num_envs: int, steps: int, mode: str = "sync"):
    """The floor of a batched env: a gymnasium vector env, random actions, obs -> torch."""
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)
    env.reset(seed=0)
    env.action_space.seed(0)

    def run() -> None:
        for _ in range(steps // num_envs):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            torch.from_numpy(obs)

    return run, env


def lib_rollout(env, steps: int, general: bool = False):
    """``env.rollout(steps, break_when_any_done=False)``; ``general``: through the general
    loop (one TensorDict per step), as a rollout with a policy or transforms runs."""
    if general:
        env._numpy_stepper = lambda: None
    env.set_seed(0)

    def run() -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


def per_step_rows() -> list[list]:
    rows = []
    for env_id, target in (("CartPole-v1", "<= 1.5"), ("Pendulum-v1", "<= 1.2")):
        t = interleaved(
            {
                "raw": raw_loop(env_id, STEPS),
                "lib": lib_rollout(GymEnv(env_id), STEPS),
                "general": lib_rollout(GymEnv(env_id), STEPS, general=True),
            }
        )
        us = {k: v / STEPS * 1e6 for k, v in t.items()}
        rows.append(
            [f"GymEnv({env_id!r}).rollout", us["raw"], us["lib"], us["lib"] / us["raw"], target]
        )
        rows.append(
            ["  the same, general loop", us["raw"], us["general"], us["general"] / us["raw"], "-"]
        )
    n = 8
    raw, vec = raw_vector_loop("CartPole-v1", n, STEPS * n)
    t = interleaved({"raw": raw, "lib": lib_rollout(GymEnv("CartPole-v1", num_envs=n), STEPS)})
    vec.close()
    frames = STEPS * n
    rows.append(
        [
            f"GymEnv('CartPole-v1', num_envs={n}) per frame",
            t["raw"] / frames * 1e6,
            t["lib"] / frames * 1e6,
            t["lib"] / t["raw"],
            "<= 1.3",
        ]
    )
    return rows


def batched_rows() -> list[list]:
    """4 CartPole copies: SerialEnv vs SyncVectorEnv, ParallelEnv vs AsyncVectorEnv."""
    make = functools.partial(GymEnv, "CartPole-v1")
    steps = FRAMES // COPIES
    cases = [
        ("sync", "SerialEnv(4)", lambda: SerialEnv(COPIES, make), ">= 0.9"),
        ("async", "ParallelEnv(4)", lambda: ParallelEnv(COPIES, make), ">= 1.2"),
        (
            "async",
            "ParallelEnv(4, num_processes=2)",
            lambda: ParallelEnv(COPIES, make, num_processes=2),
            "-",
        ),
    ]
    rows = []
    for mode, name, build, target in cases:
        raw, vec_env = raw_vector_loop("CartPole-v1", COPIES, FRAMES, mode)
        env = build()
        try:
            t = interleaved({"raw": raw, "lib": lib_rollout(env, steps)})
        finally:
            env.close()
            vec_env.close()
        floor = "SyncVectorEnv" if mode == "sync" else "AsyncVectorEnv"
        rows.append(
            [
                f"{name} vs {floor}",
                FRAMES / t["raw"],
                FRAMES / t["lib"],
                t["raw"] / t["lib"],
                target,
            ]
        )
    return rows


def _five() -> Compose:
    return Compose(
        ObservationNorm(loc=0.0, scale=2.0, in_keys=["observation"]),
        RewardScaling(loc=0.0, scale=0.5),
        RewardSum(),
        StepCounter(),
        InitTracker(),
    )


def _general(env):
    env._numpy_stepper = lambda: None  # the general loop: one TensorDict per step
    return env


def transform_rows() -> list[list]:
    """What a Compose of 5 simple transforms adds to each step of a CartPole rollout."""
    t = interleaved(
        {
            "plain": lib_rollout(GymEnv("CartPole-v1"), STEPS),
            "empty": lib_rollout(TransformedEnv(GymEnv("CartPole-v1"), Compose()), STEPS),
            "five": lib_rollout(TransformedEnv(GymEnv("CartPole-v1"), _five()), STEPS),
            "empty_general": lib_rollout(
                _general(TransformedEnv(GymEnv("CartPole-v1"), Compose())), STEPS
            ),
            "five_general": lib_rollout(
                _general(TransformedEnv(GymEnv("CartPole-v1"), _five())), STEPS
            ),
        }
    )
    us = {k: v / STEPS * 1e6 for k, v in t.items()}
    return [
        [
            "TransformedEnv(GymEnv, Compose()) -> + 5 transforms",
            us["empty"],
            us["five"],
            us["five"] - us["empty"],
            "<= 8",
        ],
        [
            "GymEnv -> TransformedEnv + 5 transforms",
            us["plain"],
            us["five"],
            us["five"] - us["plain"],
            "-",
        ],
        [
            "the same, general loop: Compose() -> + 5 transforms",
            us["empty_general"],
            us["five_general"],
            us["five_general"] - us["empty_general"],
            "-",
        ],
    ]


def breakdown_rows() -> list[list]:
    """Where the microseconds of one CartPole step go, each part timed alone."""
    from tensordict import TensorDict

    from torchrl_lite import _td
    from torchrl_lite.envs.utils import step_mdp

    genv = gym.make("Pendulum-v1")  # never terminates: stepped without resets
    genv.reset(seed=0)
    env = GymEnv("Pendulum-v1")
    td = env.rand_action(env.reset())
    spec = env.action_spec
    obs = np.zeros(3, dtype=np.float32)
    action = np.zeros(1, dtype=np.float32)
    reps = 20_000 if not smoke() else 2_000

    def per_call(fn) -> float:
        def run() -> None:
            for _ in range(reps):
                fn()

        return timeit(run, repeats=3) / reps * 1e6

    stepped = env.step(td.clone())
    parts = [
        ("gymnasium step (Pendulum)", lambda: genv.step(action)),
        ("action_space.sample() (the raw loop's action)", genv.action_space.sample),
        ("action_spec.rand() (one torch draw per step)", spec.rand),
        ("torch.from_numpy (one leaf)", lambda: torch.from_numpy(obs)),
        (
            "TensorDict(...) public constructor, 1 leaf",
            lambda: TensorDict({"a": torch.zeros(1)}, []),
        ),
        (
            "a TensorDict without checks (_td.new), 1 leaf",
            lambda: _td.new({"a": obs}, torch.Size([])),
        ),
        ("td.get(key) public", lambda: td.get("action")),
        ("_td.get(td, key)", lambda: _td.get(td, "action")),
        ("GymWrapper._step (gym step + 5 leaves + 1 TensorDict)", lambda: env._step(td)),
        ("step_mdp (next -> root, one new TensorDict)", lambda: step_mdp(stepped)),
        ("spec check of an action (is_in)", lambda: spec.is_in(td.get("action"))),
    ]
    return [[name, per_call(fn)] for name, fn in parts]


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
    quiet = f"load average {load_average():.1f} at the start"
    write_table(
        "envs_per_step",
        "Env per-step cost (random policy)",
        ["case", "raw gymnasium+torch (us/step)", "torchrl_lite (us/step)", "ratio", "target"],
        per_step_rows(),
        notes=f"{STEPS} steps, median of 7 interleaved runs ({quiet}); raw loop = "
        "`env.step(env.action_space.sample())` + `torch.from_numpy(obs)`. A rollout without "
        "policy or callback steps gymnasium straight into numpy buffers (the fast rollout); "
        "'general loop' is the path a rollout with a policy or transforms takes.",
    )
    write_table(
        "envs_batched",
        f"Batched envs: {COPIES} CartPole-v1 copies, random policy",
        [
            "case",
            "gymnasium (frames/s)",
            "torchrl_lite (frames/s)",
            "ratio (torchrl_lite / gymnasium)",
            "target",
        ],
        batched_rows(),
        notes=f"{FRAMES} frames per run, median of 7 interleaved runs (wall time, {quiet}).",
    )
    write_table(
        "envs_transforms",
        "Per-step cost of transforms",
        ["case", "without (us/step)", "with (us/step)", "added (us/step)", "target"],
        transform_rows(),
        notes="ObservationNorm, RewardScaling, RewardSum, StepCounter, InitTracker on a random "
        f"CartPole rollout of {STEPS} steps, median of 7 interleaved runs. A TransformedEnv "
        "whose transforms all have a numpy form steps through its wrapped env's numpy stepper "
        "and applies the transforms to many rows at once (each transform's _numpy_form(); "
        "StepCounter with max_steps per step); 'general loop' is the one-TensorDict-per-step "
        "path (the env's stepper switched off), which a rollout with a policy takes.",
    )
    write_table(
        "envs_breakdown",
        "Where a step's microseconds go (Pendulum-v1, each part timed alone)",
        ["part", "us per call"],
        breakdown_rows(),
        notes="Median of 3 runs. The general loop pays per step: the action draw, the "
        "gymnasium step, ~5 leaves converted, 2 TensorDicts built (the step's and step_mdp's), "
        "~10 dict reads and the recorder's share; the fast rollout pays the gymnasium step and "
        "~5 numpy element writes.",
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
