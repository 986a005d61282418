"""Learning benchmark: frames and wall-clock seconds for each recipe to reach its target.

Each run is ``torchrl-lite train ALGO --env ENV --seed S`` in its own process (one torch
thread), stopped when the mean return of the last 10 training episodes reaches the target
or the frame budget runs out. Reports the median and the worst seed. ``TORCHRL_LITE_SMOKE=1``
runs one seed of the fast cases only.

Usage: ``python bench_learning.py [ALGO/ENV[/pixels] ...]`` (default: every case).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import smoke, write_table

# (algo, env, target, frame budget, seconds allowed per run[, config overrides])
CASES = [
    ("ppo", "Pendulum-v1", -200.0, 1_000_000, 1200),
    ("dqn", "CartPole-v1", 475.0, 100_000, 1200),
    ("sac", "Pendulum-v1", -200.0, 8_000, 600),
    ("td3", "Pendulum-v1", -200.0, 8_000, 600),
    ("ppo", "dm_control/cartpole-swingup", 700.0, 1_000_000, 2400),
    # not required by the issue; measured alongside
    ("ddpg", "Pendulum-v1", -200.0, 8_000, 600),
    ("a2c", "Pendulum-v1", -200.0, 400_000, 900),
    ("redq", "Pendulum-v1", -200.0, 8_000, 900),
    # from pixels (issue 17). Frames count agent steps: SAC repeats each action 8 times and
    # Dreamer 4 (12.5k and 25k steps = 100k env frames); an Atari step is 4 emulator frames
    # (500k steps = 2M frames; Breakout's random policy scores 1.7, Mnih et al. 2015)
    ("sac", "dm_control/cartpole-swingup", 700.0, 12_500, 36_000, ("pixels=true",)),
    ("dqn", "CartPole-v1", 475.0, 500_000, 36_000, ("pixels=true",)),
    ("ppo", "ALE/Breakout-v5", 10.0, 500_000, 36_000),
    ("dreamer", "dm_control/cartpole-swingup", 300.0, 25_000, 36_000),
]
SEEDS = (0, 1, 2)


def run(algo: str, env: str, target: float, frames: int, timeout: int, seed: int, extra=()) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable, "-m", "torchrl_lite", "train", algo, "--env", env,
            "--seed", str(seed), "--frames", str(frames), "--out", out,
            "--logger", "none", "--quiet", f"target={target}", *extra,
        ]  # fmt: skip
        start = time.perf_counter()
        try:
            env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
            subprocess.run(
                cmd, check=True, timeout=timeout, capture_output=True, text=True, env=env
            )
        except subprocess.TimeoutExpired:
            return {"solved_at_frames": None, "seconds": timeout, "timeout": True}
        except subprocess.CalledProcessError as err:
            print(err.stderr[-2000:], file=sys.stderr)
            raise
        summary = json.loads((Path(out) / "summary.json").read_text())
        summary["wall"] = time.perf_counter() - start
        return summary


def main(selected: list[str]) -> None:
    rows = _previous_rows() if selected else []  # a partial rerun replaces its own rows
    seeds = SEEDS[:1] if smoke() else SEEDS
    for algo, env, target, frames, timeout, *extra in CASES:
        extra = tuple(extra[0]) if extra else ()
        name = f"{algo}/{env}" + ("/pixels" if "pixels=true" in extra else "")
        if selected and name not in selected:
            continue
        if smoke() and (env.startswith(("dm_control/", "ALE/")) or extra):
            continue
        results = [run(algo, env, target, frames, timeout, s, extra) for s in seeds]
        solved = [r for r in results if r.get("solved_at_frames")]
        frames_to = [r["solved_at_frames"] for r in solved]
        secs = [r["seconds"] for r in solved]
        print(name, [(r.get("solved_at_frames"), r.get("seconds")) for r in results], flush=True)
        label = algo.upper() + (" (pixels)" if "pixels=true" in extra else "")
        row = [
            label,
            env,
            target,
            f"{len(solved)}/{len(results)}",
            f"{statistics.median(frames_to):,.0f}" if frames_to else "-",
            f"{max(frames_to):,}" if len(solved) == len(results) else "not reached",
            f"{statistics.median(secs):.0f}" if secs else "-",
            f"{max(secs):.0f}" if len(solved) == len(results) else "-",
        ]
        same = [i for i, r in enumerate(rows) if (r[0], r[1]) == (label, env)]
        if same:
            rows[same[0]] = row
        else:
            rows.append(row)
        _write(rows, seeds)  # after every case: a long run that dies keeps what it measured


def _previous_rows() -> list[list[str]]:
    """The rows of the last ``results/learning.md`` (empty if there is none)."""
    path = Path(__file__).parent / "results" / "learning.md"
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]


def _write(rows: list, seeds) -> None:
    write_table(
        "learning",
        "Learning: frames and seconds to the target (mean of the last 10 training episodes)",
        [
            "algo",
            "env",
            "target",
            "seeds reaching",
            "median frames",
            "worst frames",
            "median s",
            "worst s",
        ],
        rows,
        notes=(
            f"Seeds {list(seeds)}; one process per run, 1 torch thread, this machine. Seconds "
            "are the training time reported by `torchrl-lite train` (env steps + updates); "
            "they follow the shared host's speed at the time (the same code has measured up "
            "to 1.7x apart at different hours), frames do not. "
            "For comparison, measured on this machine: Stable-Baselines3's SAC "
            "reaches -200 on Pendulum after 6.6k frames in 82 s, TorchRL's after 6.2k frames "
            "in 104 s; with their zoo settings neither their DQN (CartPole) nor SB3's PPO "
            "(Pendulum) reached the threshold within 10 minutes."
        ),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
