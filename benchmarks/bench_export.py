"""Exported policies against the eager TensorDict policy, and a tuned config against the
recipe's defaults.

    python bench_export.py latency   per-call latency, PPO's Pendulum policy, batch 1 and 256:
                                     eager TensorDict policy vs onnxruntime vs torch.export
    python bench_export.py tune      PPO on Pendulum-v1 tuned for 40 trials of 30k frames
                                     (study in benchmarks/runs/tune-ppo-pendulum; resumable:
                                     run it again to continue)
    python bench_export.py compare   frames to reach -200 (mean of the last 10 training
                                     episodes) with the tuned config vs the defaults, 3 seeds

Latency is measured in one process, the cases interleaved (``_common.interleaved``), one
torch thread and one onnxruntime thread; the ratios are the figures to compare.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from _common import interleaved, load_average, smoke, write_table

ROOT = Path(__file__).resolve().parent.parent
STUDY = Path("benchmarks/runs/tune-ppo-pendulum")  # relative to ROOT
TRIALS, FRAMES, SEEDS, BUDGET = 40, 30_000, (0, 1, 2), 200_000


def latency() -> None:
    from torchrl_lite.export import export_policy, load_runtime
    from torchrl_lite.recipes import config_for, get_recipe

    torch.set_num_threads(1)
    recipe = get_recipe("ppo")
    cfg = config_for(recipe, "Pendulum-v1")
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    trainer.collector.shutdown()
    policy.eval()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runtimes = {}
        for fmt in ("onnx", "pt2"):
            path = Path(tmp) / f"policy.{fmt}"
            export_policy(recipe.make_eval_env(cfg), policy, path, fmt, max_steps=50)
            runtimes[fmt] = load_runtime(path)
        for batch in (1, 256):
            calls = 100 if smoke() else 2_000
            times = interleaved(_cases(policy, runtimes, batch, calls), repeats=5)
            us = {k: v / calls * 1e6 for k, v in times.items()}
            rows.append([batch, us["eager"], us["onnx"], us["pt2"],
                         us["eager"] / us["onnx"], us["eager"] / us["pt2"]])  # fmt: skip
    write_table(
        "export_latency",
        "Exported policy latency (PPO, Pendulum-v1, CPU, 1 thread)",
        [
            "batch",
            "eager TensorDict (us)",
            "onnxruntime (us)",
            "torch.export pt2 (us)",
            "eager / onnx",
            "eager / pt2",
        ],  # fmt: skip
        rows,
        notes=f"load average {load_average():.1f}; the exported file includes the observation "
        "pipeline and the action mapping (none but the tanh squash for Pendulum).",
    )


def _cases(policy, runtimes: dict, batch: int, calls: int) -> dict:
    """``calls`` calls of the eager policy and of each runtime on one ``[batch, 3]`` input."""
    from tensordict import TensorDict

    from torchrl_lite.envs import ExplorationType, set_exploration_type

    obs = torch.randn(batch, 3)
    x = [obs.numpy()]

    def eager():
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            return policy(TensorDict(observation=obs, batch_size=[batch]))["action"]

    def loop(fn):
        return lambda: [fn() for _ in range(calls)]

    return {
        "eager": loop(eager),
        "onnx": loop(lambda: runtimes["onnx"](x, ["observation"])),
        "pt2": loop(lambda: runtimes["pt2"](x, ["observation"])),
    }


def _cli(*args: str) -> None:
    """The command line, run from the repository root (paths relative to it)."""
    subprocess.run([sys.executable, "-m", "torchrl_lite", *args], check=True, cwd=ROOT)


def tune() -> None:
    trials, frames = (3, 2_048) if smoke() else (TRIALS, FRAMES)
    _cli("tune", "ppo", "--env", "Pendulum-v1", "--trials", str(trials), "--frames",
         str(frames), "--study", str(STUDY))  # fmt: skip


def compare() -> None:
    best = STUDY / "best_config.json"
    if not (ROOT / best).is_file():
        raise SystemExit(f"{best} is missing: run `python bench_export.py tune` first.")
    rows = []
    for name, extra in (("defaults", []), ("tuned", [f"config={best}"])):
        reached = []
        for seed in SEEDS:
            out = STUDY / "compare" / f"{name}-s{seed}"
            if not (ROOT / out / "summary.json").is_file():
                _cli("train", "ppo", "--env", "Pendulum-v1", "--seed", str(seed), "--frames",
                     str(BUDGET), "--out", str(out), "--quiet", "--logger", "none", *extra)  # fmt: skip
            reached.append(
                json.loads((ROOT / out / "summary.json").read_text())["solved_at_frames"]
            )
        rows.append([name, *[r if r is not None else f"> {BUDGET}" for r in reached]])
    write_table(
        "export_tune_compare",
        "PPO on Pendulum-v1: frames to a mean return of -200, tuned config vs defaults",
        ["config", *[f"seed {s}" for s in SEEDS]],
        rows,
        notes=f"tuned: the best of the study in `{STUDY}`: "
        f"`{json.dumps(json.loads((ROOT / best).read_text()))}`. The study ranks trials by "
        "the mean evaluation return after 30k frames, not by frames to -200; training stops "
        "at the recipe's target, checked every 2,048-frame batch.",
    )


if __name__ == "__main__":
    {"latency": latency, "tune": tune, "compare": compare}[
        sys.argv[1] if len(sys.argv) > 1 else "latency"
    ]()
