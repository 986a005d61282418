"""MuJoCo learning curves and table from the run folders under ``benchmarks/runs/``.

Reads each ``<algo>-<env>-s<seed>`` folder's periodic deterministic evaluations
(``evaluations.csv``, or the checkpoint's copy while the run is still going), draws one
PNG per algorithm and env (each seed, the published return as a dashed line, the target
as a dotted one) into ``benchmarks/results/`` and prints two markdown tables: each run,
then each algorithm and env over its finished seeds with the defaults (median, mean and
worst of the last evaluations, against the target).

Run: ``python benchmarks/plot_mujoco.py``
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

RUNS = Path(__file__).parent / "runs"
RESULTS = Path(__file__).parent / "results"
# (algo, env) -> (published mean return at 1M env steps, where from, our target)
PUBLISHED = {
    ("sac", "HalfCheetah-v5"): (9_635, "CleanRL (v2)", 8_700),
    ("td3", "HalfCheetah-v5"): (9_583, "CleanRL (v4)", 8_600),
    ("sac", "Hopper-v5"): (2_310, "CleanRL (v2)", 2_100),
    ("td3", "Hopper-v5"): (3_135, "CleanRL (v4)", 2_800),
    ("sac", "Walker2d-v5"): (3_591, "CleanRL (v2)", 3_230),
    ("td3", "Walker2d-v5"): (4_058, "CleanRL (v4)", 3_650),
    ("ppo", "HalfCheetah-v5"): (5_819, "rl-zoo (v3, tuned)", 2_000),
    ("ppo", "Hopper-v5"): (2_410, "rl-zoo (v3, tuned)", 2_100),
    ("ppo", "Walker2d-v5"): (3_479, "rl-zoo (v3, tuned)", 2_500),
}
# ALGO_VARIANT-ENV-sSEED: a variant (e.g. ``ppo_tanh``, the earlier defaults) is drawn on
# its algorithm's figure, dashed
FOLDER = re.compile(r"(?P<algo>[a-z0-9]+)(?:_(?P<variant>[a-z0-9_]+))?-(?P<env>.+)-s(?P<seed>\d+)$")
VARIANTS = {
    "tanh": "earlier defaults: TanhNormal, default init, constant lr",
    "clipped": "Gaussian clipped to the bounds, orthogonal init, lr decay",
}


def evaluations(folder: Path) -> tuple[list[tuple[int, float]], bool]:
    """``([(frames, mean return)], finished)`` of a run folder: ``evaluations.csv`` or the
    checkpoint's copy, whichever is longer (an interrupted run's CSV stops where it was
    interrupted; a resumed one's checkpoint goes on)."""
    rows = []
    path = folder / "evaluations.csv"
    if path.is_file():
        with path.open() as f:
            rows = [(int(r["frames"]), float(r["mean_return"])) for r in csv.DictReader(f)]
    state_file = folder / "checkpoint" / "state.pt"
    if state_file.is_file():
        import torch

        state = torch.load(state_file, weights_only=False, map_location="cpu")
        history = state["hooks"].get("periodic_evaluation", {}).get("history", [])
        if len(history) > len(rows):
            rows = [(int(h[0]), float(h[1])) for h in history]
    summary = folder / "summary.json"
    budget = json.loads((folder / "config.json").read_text())["config"]["frames"]
    finished = summary.is_file() and json.loads(summary.read_text())["frames"] >= budget
    return rows, finished


def _num(x: float) -> str:
    """A return as the table writes it ("-" before the first evaluation)."""
    return "-" if x != x else f"{x:,.0f}"


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs: dict[tuple[str, str], list] = {}
    for folder in sorted(RUNS.iterdir()):
        match = FOLDER.match(folder.name)
        if not match or not (folder / "config.json").is_file():
            continue
        rows, finished = evaluations(folder)
        summary = folder / "summary.json"
        done = json.loads(summary.read_text()) if summary.is_file() else {}
        seconds = (done.get("seconds"), done.get("frames"))
        key = (match["algo"], match["env"])
        runs.setdefault(key, []).append(
            (int(match["seed"]), match["variant"], rows, finished, seconds)
        )
    lines = [
        "| algo | env | seed | env steps | last eval | best eval | target | published | state |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    summary_lines = [
        "| algo | env | finished seeds | median | mean | worst | target | published | worst >= target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    RESULTS.mkdir(exist_ok=True)
    for (algo, env), seeds in sorted(runs.items()):
        published, source, target = PUBLISHED.get((algo, env), (None, "", None))
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for seed, variant, rows, finished, (seconds, frames) in sorted(
            seeds, key=lambda s: (bool(s[1]), s[0])
        ):
            label = f"seed {seed}" + (f", {variant}" if variant else "")
            if rows:
                ax.plot([r[0] for r in rows], [r[1] for r in rows], label=label,
                        ls="--" if variant else "-", lw=1)  # fmt: skip
            last = rows[-1] if rows else (0, float("nan"))
            best = max((r[1] for r in rows), default=float("nan"))
            state = (
                "finished"
                if finished
                else "not finished (`--resume` continues it from its checkpoint)"
            )
            if finished and seconds:
                state += f", {seconds / 3600:.1f} h, {frames / seconds:,.0f} env steps/s"
            name = algo.upper() + (f" ({VARIANTS.get(variant, variant)})" if variant else "")
            lines.append(
                f"| {name} | {env} | {seed} | {last[0]:,} | {_num(last[1])} | {_num(best)} "
                f"| {target or '-'} | {published or '-'} {source} | {state} |"
            )
        finals = sorted(  # the last evaluation of each finished run with the defaults
            rows[-1][1]
            for _, variant, rows, finished, _ in seeds
            if finished and rows and not variant
        )
        if finals:
            median = statistics.median(finals)
            met = "yes" if target and finals[0] >= target else ("no" if target else "-")
            summary_lines.append(
                f"| {algo.upper()} | {env} | {len(finals)} | {_num(median)} "
                f"| {_num(statistics.fmean(finals))} | {_num(finals[0])} "
                f"| {target or '-'} | {published or '-'} {source} | {met} |"
            )
        if published:
            ax.axhline(published, ls="--", c="k", lw=1, label=f"{source}: {published:,}")
        if target:
            ax.axhline(target, ls=":", c="gray", lw=1, label=f"target {target:,}")
        ax.set(xlabel="env steps", ylabel="deterministic return (10 episodes)",
               title=f"{algo.upper()} on {env}")  # fmt: skip
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(RESULTS / f"mujoco_{algo}_{env}.png", dpi=80)
        plt.close(fig)
    print("\n".join(lines) + "\n\n" + "\n".join(summary_lines))


if __name__ == "__main__":
    main()
