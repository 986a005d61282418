"""Run the tutorial notebooks: smoke budgets (the test suite) or full ones (``make tutorials``).

Each notebook ``tutorials/NN_slug.ipynb`` is the jupytext pair of ``tutorials/NN_slug.py``
(the source of truth; ``make notebooks`` rewrites the ``.ipynb`` files from them). Its first
cell reads ``TORCHRL_LITE_SMOKE`` and sets the budgets; its last cell prints one line
``RESULT {"metric": ..., "value": ..., ...}`` and asserts the claim. The claims live here too
(:data:`CLAIMS`), so a notebook whose assert was deleted or whose target was lowered still
fails :func:`check_result`.

Usage::

    python tutorials/notebooks.py sync            # .py -> .ipynb (no outputs); see sync()
    python tutorials/notebooks.py run 05 [--smoke] [--save OUT.ipynb]  # one notebook
    python tutorials/notebooks.py full [NAME ...]  # full runs; times/results in README.md
    python tutorials/notebooks.py index            # rewrite README.md's table

In smoke mode every figure a notebook shows is checked before it is drawn
(:data:`FIGURE_CHECK`): an axes with nothing plotted, or a line of fewer than two points
drawn without markers, fails the run.
"""

from __future__ import annotations

import fcntl
import json
import operator
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
README = HERE / "README.md"
RESULTS = HERE / "full_runs.json"
NOTEBOOK = re.compile(r"^\d\d_[a-z0-9_]+$")
RESULT_LINE = re.compile(r"^RESULT (\{.*\})\s*$", re.MULTILINE)
HEADLESS = {
    "TORCHRL_LITE_SMOKE": "1",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    "SDL_VIDEODRIVER": "dummy",
    "OMP_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
FIGURE_CALLS = ("plt.show()", "display(Image")
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq}


@dataclass(frozen=True)
class Claim:
    """What a notebook's last cell claims: ``value <op> target`` for ``metric``."""

    metric: str
    op: str
    smoke: float
    full: float
    video: bool = False


CLAIMS: dict[str, Claim] = {
    # fraction of spec samples (and projected out-of-bound values) that the spec accepts
    "01_tensordict_and_specs": Claim("fraction_in_spec", "==", 1.0, 1.0),
    # largest difference between a ParallelEnv and a SerialEnv rollout of the same seeds
    "02_envs_and_transforms": Claim("max_abs_diff_parallel_vs_serial", "==", 0.0, 0.0),
    # spread of the deterministic actions for one observation (the random ones spread)
    "03_modules_and_actors": Claim("deterministic_action_std", "==", 0.0, 0.0),
    # correlation between how often an index is sampled and its priority
    "04_replay_buffers": Claim("priority_frequency_correlation", ">=", 0.9, 0.99),
    # average reward per step over the last 5 batches (tuned values; random: about -6.5)
    "05_ppo_pendulum": Claim("avg_reward_last_batches", ">=", -16.3, -3.5),
    # mean return of the greedy policy over 10 evaluation episodes
    "06_dqn_cartpole": Claim("greedy_mean_return", ">=", 8.0, 475.0),
    # return of deterministic evaluation episodes on dm_control cartpole-balance
    "07_sac_dm_control": Claim("eval_mean_return", ">=", 0.0, 800.0, video=True),
    # fraction of steps whose batched pure-torch env matches a per-env loop
    "08_custom_env_and_transform": Claim("fraction_matching_loop", "==", 1.0, 1.0),
    # largest policy lag of synchronous collection (the asynchronous run must lag)
    "09_scaling_out_with_ray": Claim("sync_policy_lag_max", "==", 0.0, 0.0),
    # largest loss difference between a resumed run and an uninterrupted one
    "10_cli_trainer_resume": Claim("max_abs_loss_diff_resumed", "==", 0.0, 0.0),
}


# Run in the kernel before the first cell in smoke mode: ``plt.show()`` checks that each
# figure shows data (small budgets make one-point lines, invisible without markers).
FIGURE_CHECK = """
import matplotlib.pyplot as _plt
import numpy as _np

def _figure_problems(fig):
    problems = []
    for ax in fig.axes:
        drawn = list(ax.images) + list(ax.collections) + list(ax.patches)
        for line in ax.get_lines():
            x, y = (_np.asarray(v, dtype=float).ravel() for v in line.get_data())
            points = int(_np.isfinite(x[: len(y)] + y[: len(x)]).sum())
            if points == 0:
                problems.append(f"{ax.get_title()!r}: line {line.get_label()!r} has no point")
            elif points < 2 and line.get_marker() in (None, "", " ", "None", "none"):
                problems.append(
                    f"{ax.get_title()!r}: line {line.get_label()!r} has {points} point "
                    "and no marker"
                )
            else:
                drawn.append(line)
        if not drawn and ax.axison:
            problems.append(f"axes {ax.get_title()!r} shows no data")
    return problems

_show = _plt.show

def _checked_show(*args, **kwargs):
    problems = [p for n in _plt.get_fignums() for p in _figure_problems(_plt.figure(n))]
    if problems:
        raise AssertionError("a figure shows no data: " + "; ".join(problems))
    return _show(*args, **kwargs)

_plt.show = _checked_show
"""


def notebooks() -> list[str]:
    """The tutorial notebooks' names (``NN_slug``), in order."""
    return sorted(p.stem for p in HERE.glob("[0-9][0-9]_*.py") if NOTEBOOK.match(p.stem))


def to_notebook(name: str):
    """The notebook a ``.py`` source describes (jupytext percent format, no outputs)."""
    import jupytext

    nb = jupytext.read(HERE / f"{name}.py", fmt="py:percent")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(nb.cells):
        cell.id = f"{name[:2]}-{index:03d}"  # stable ids: `make notebooks` is idempotent
    return nb


def resolve(name: str) -> str:
    """``"05"``, ``"05_ppo_pendulum"`` or ``"ppo_pendulum"`` -> the notebook's name."""
    found = [n for n in notebooks() if name in (n, n[:2], n[3:]) or n == name.removesuffix(".py")]
    if len(found) != 1:
        raise SystemExit(f"no single notebook named {name!r}; choose from {notebooks()}")
    return found[0]


def _cells(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def sync(names: list[str] | None = None) -> None:
    """Pair each ``NN_slug.py`` with ``NN_slug.ipynb`` (no outputs).

    The ``.py`` is the source of truth, except when the ``.ipynb`` was edited later (e.g.
    in Jupyter) and its cells differ: then the ``.py`` is rewritten from it first, so the
    edit is kept (outputs are never kept).
    """
    import jupytext
    import nbformat

    for name in names or notebooks():
        source, paired = HERE / f"{name}.py", HERE / f"{name}.ipynb"
        if paired.exists() and paired.stat().st_mtime > source.stat().st_mtime:
            edited = nbformat.read(paired, as_version=4)
            if _cells(edited) != _cells(to_notebook(name)):
                edited.metadata["jupytext"] = {
                    "notebook_metadata_filter": "-all",
                    "cell_metadata_filter": "-all",
                }
                source.write_text(jupytext.writes(edited, fmt="py:percent"))
                print(f"wrote tutorials/{name}.py (from the edited notebook)")
        nbformat.write(to_notebook(name), paired)
        print(f"wrote tutorials/{name}.ipynb")


def execute(name: str, smoke: bool, cwd: str | os.PathLike, timeout: int = 3600):
    """Execute the committed ``NN_slug.ipynb`` headless in ``cwd``; return ``(nb, seconds)``.

    Raises ``nbclient.exceptions.CellExecutionError`` from the failing cell; the partly
    executed notebook is then in the exception's ``nb`` attribute.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    if smoke:
        nb.cells.insert(0, nbformat.v4.new_code_cell(FIGURE_CHECK, id="figure-check"))
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, **HEADLESS, PYTHONPATH=pythonpath)
    env["TORCHRL_LITE_SMOKE"] = "1" if smoke else "0"
    env["TORCHRL_LITE_WORKDIR"] = str(cwd)  # where notebooks that write files write them
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3")
    start = time.perf_counter()
    try:
        client.execute(cwd=str(cwd), env=env)
    except CellExecutionError as err:
        err.nb = nb
        raise
    finally:
        if smoke:
            nb.cells.pop(0)
    return nb, time.perf_counter() - start


def outputs(nb, kind: str) -> list:
    """Every output of the code cells whose data holds the MIME type ``kind``."""
    return [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if kind in out.get("data", {})
    ]


def stream_text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if "text" in out)


def parse_result(nb) -> dict:
    """The ``RESULT {...}`` JSON printed by the last code cell."""
    last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
    found = RESULT_LINE.findall(stream_text(last))
    if len(found) != 1:
        raise ValueError(f"the last code cell printed {len(found)} RESULT lines, expected 1")
    return json.loads(found[0])


def has_video(nb) -> bool:
    return any("<video" in out["data"]["text/html"] for out in outputs(nb, "text/html"))


def check_result(name: str, nb, smoke: bool) -> dict:
    """Check the executed notebook against :data:`CLAIMS`; return its RESULT."""
    claim = CLAIMS[name]
    result = parse_result(nb)
    if result.get("metric") != claim.metric:
        raise AssertionError(
            f"{name}: RESULT metric {result.get('metric')!r}, expected {claim.metric!r}"
        )
    if bool(result.get("smoke")) != smoke:
        raise AssertionError(f"{name}: RESULT says smoke={result.get('smoke')}, ran smoke={smoke}")
    target = claim.smoke if smoke else claim.full
    value = float(result["value"])
    if not OPS[claim.op](value, target):
        raise AssertionError(f"{name}: {claim.metric} = {value}, claimed {claim.op} {target}")
    if not outputs(nb, "image/png"):
        raise AssertionError(f"{name}: no figure in the outputs")
    if claim.video and not has_video(nb):
        raise AssertionError(f"{name}: no inline video in the outputs")
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if any(call in cell.source for call in FIGURE_CALLS) and not outputs(
            _only(cell), "image/png"
        ):
            raise AssertionError(
                f"{name}: code cell {index} shows a figure, but has no image output"
            )
        if "display(Video" in cell.source and not has_video(_only(cell)):
            raise AssertionError(
                f"{name}: code cell {index} shows a video, but has no <video> output"
            )
    return result


def _only(cell):
    """A notebook-like object holding one cell (for :func:`outputs`)."""
    from types import SimpleNamespace

    return SimpleNamespace(cells=[cell])


def _record(name: str, seconds: float, result: dict) -> None:
    """Store one full run in ``full_runs.json`` and rewrite the README's table."""
    with open(RESULTS.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        runs[name] = {
            "seconds": round(seconds),
            "result": result,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        RESULTS.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
        _write_table(runs)


def _fmt(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


TEACHES = {
    "01_tensordict_and_specs": "TensorDict batch dims, nested keys, stacking; `Bounded`, "
    "`Categorical`, `OneHot`, `Composite`; `rand`, `is_in`, `project`",
    "02_envs_and_transforms": "`GymEnv`, `reset`/`step`/`step_mdp`, `rollout`, `check_env_specs`; "
    "`TransformedEnv` with `StepCounter`, `RewardSum`, `ObservationNorm`, `CatFrames`, `Resize`; "
    "`SerialEnv`/`ParallelEnv`, partial resets",
    "03_modules_and_actors": "`TensorDictModule`/`Sequential`, `MLP`, `ProbabilisticActor` + "
    "`TanhNormal`, `ValueOperator`, `QValueActor`, exploration under `set_exploration_type`",
    "04_replay_buffers": "storages, samplers (prioritized with `update_priority`, slices), "
    "`dumps`/`loads`, a D4RL-layout HDF5 file written and read back",
    "05_ppo_pendulum": "the seed's PPO loop read like supervised learning; why its values "
    "learn slowly and the three that fix it",
    "06_dqn_cartpole": "DQN (double, Huber, hard target copies, epsilon-greedy) to 475 on CartPole",
    "07_sac_dm_control": "SAC on dm_control cartpole-balance, action repeat, EGL rendering, "
    "an inline video",
    "08_custom_env_and_transform": "`EnvBase` hooks and specs, a batched pure-torch env, a "
    "custom `Transform` with its spec",
    "09_scaling_out_with_ray": "seed 000's Scheme/Learner on a local Ray: 1/1 in-process, then "
    "2 collection workers sync vs async (frames/s, policy lag)",
    "10_cli_trainer_resume": "`torchrl-lite train/eval --video/--resume`, `Trainer` with hooks "
    "and a CSV logger, a resumed run equal to an uninterrupted one",
}


def title(name: str) -> str:
    """The notebook's title: its first markdown heading."""
    for line in (HERE / f"{name}.py").read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return name


def _write_table(runs: dict) -> None:
    text = README.read_text()
    start, end = "<!-- full-runs -->", "<!-- /full-runs -->"
    rows = [
        "| notebook | what it teaches | full run | result (claim) |",
        "|---|---|---|---|",
    ]
    for name in notebooks():
        run = runs.get(name)
        link = f"[{name[:2]}. {title(name)}]({name}.ipynb)"
        if run is None:
            rows.append(f"| {link} | {TEACHES.get(name, '')} | not yet run | |")
            continue
        res, claim = run["result"], CLAIMS[name]
        rows.append(
            f"| {link} | {TEACHES.get(name, '')} | {run['seconds']} s ({run['date']}) | "
            f"{res['metric']} = {_fmt(res['value'])} ({claim.op} {_fmt(claim.full)}) |"
        )
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    README.write_text(head + start + "\n" + "\n".join(rows) + "\n" + end + tail)


def full(names: list[str]) -> int:
    """Run each notebook in full, check its claim, record time and result."""
    failed = 0
    for name in names or notebooks():
        with tempfile.TemporaryDirectory() as tmp:
            try:
                nb, seconds = execute(name, smoke=False, cwd=tmp)
                result = check_result(name, nb, smoke=False)
            except Exception as err:  # report and go on with the next notebook
                failed += 1
                print(f"FAILED {name}: {str(err)[-2000:]}", flush=True)
                continue
        _record(name, seconds, result)
        print(f"{name}: {seconds:.0f} s, {json.dumps(result)}", flush=True)
    return failed


def run(argv: list[str]) -> int:
    """``run NAME [--smoke] [--save OUT.ipynb]``: execute one notebook, check its claim."""
    import argparse

    parser = argparse.ArgumentParser(prog="notebooks.py run")
    parser.add_argument("name", help="05, 05_ppo_pendulum or ppo_pendulum")
    parser.add_argument("--smoke", action="store_true", help="the test suite's small budgets")
    parser.add_argument("--save", default=None, help="write the executed notebook here")
    args = parser.parse_args(argv)
    name = resolve(args.name)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            nb, seconds = execute(name, smoke=args.smoke, cwd=tmp)
        except Exception as err:
            if args.save and getattr(err, "nb", None) is not None:
                import nbformat

                nbformat.write(err.nb, args.save)
            print(f"FAILED {name}: {str(err)[-2000:]}", flush=True)
            return 1
    if args.save:
        import nbformat

        nbformat.write(nb, args.save)
        print(f"wrote {args.save}")
    result = check_result(name, nb, smoke=args.smoke)
    print(f"{name}: {seconds:.0f} s, {json.dumps(result)}", flush=True)
    return 0


if __name__ == "__main__":
    command, *args = sys.argv[1:] or ["sync"]
    if command == "sync":
        sync(args or None)
    elif command == "run":
        sys.exit(run(args))
    elif command == "index":
        _write_table(json.loads(RESULTS.read_text()) if RESULTS.exists() else {})
    elif command == "full":
        sys.exit(1 if full(args) else 0)
    else:
        sys.exit(f"unknown command {command!r}: use 'sync', 'run', 'full' or 'index'")
