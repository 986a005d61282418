"""Run TorchRL's own tutorials and example scripts against torchrl_lite.

TorchRL's code is never part of this repository: point this runner at a copy of it
(``git archive <tag> tutorials sota-implementations .github | tar -x -C DIR``). Each
tutorial or script is copied into a fresh temporary folder, every ``torchrl`` name is
replaced by ``torchrl_lite`` (imports, attribute paths, hydra ``_target_`` strings), tutorials
run at their own budgets (``--set total_frames=...`` raises one to the complete training
a tutorial recommends) and each file runs in its own process with a timeout. The table (name, era, result, seconds, first error)
is printed as Markdown and, with ``--json``, saved for RESULTS.md.

Usage::

    python tools/torchrl_conformance.py tutorials DIR/tutorials/sphinx-tutorials --era v0.4
    python tools/torchrl_conformance.py scripts DIR --era current --only sac,td3

    python tools/torchrl_conformance.py report a.json b.json --out TABLE.md

``scripts`` reads the commands TorchRL's own CI runs (the small-budget hydra overrides
in ``.github/unittest/linux_sota/scripts/test_sota.py`` or, for older releases,
``.github/unittest/linux_examples/scripts/run_test.sh``) from DIR. The offline scripts
read D4RL/Minari datasets from the usual cache folders and download nothing here: fill
them first with ``python tools/make_offline_cache.py torchrl-ci`` (small datasets from
random rollouts, in the caches' own layouts).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWAP = re.compile(r"\btorchrl\b(?!_lite)")
ROOT = Path(__file__).resolve().parents[1]
# machine-specific paths left out of the table: the checkout, temporary folders, the venv
LOCAL_PATHS = re.compile(re.escape(str(ROOT)) + r"/|/tmp/[^/\s'\"]+/|/[^\s'\"(]*/site-packages/")

# Out of scope: downloaded weights or datasets, LLM and multi-agent tutorials.
SKIP_TUTORIALS = {
    "pretrained_models": "downloads R3M/VIP weights",
    "llm_browser": "LLM",
    "llm_wrappers": "LLM",
    "trl_interop": "LLM",
    "vla": "LLM (vision-language-action model weights)",
    "multiagent_ppo": "multi-agent",
    "multiagent_competitive_ddpg": "multi-agent",
}
SKIP_SCRIPTS = {
    "multiagent": "multi-agent",
    "grpo": "LLM",
    "expert-iteration": "LLM",
    "vla_grpo": "LLM",
    "mappo_ippo": "multi-agent",
    "maddpg_iddpg": "multi-agent",
    "iql_marl": "multi-agent",
    "qmix_vdn": "multi-agent",
    "marl_sac": "multi-agent",
}


def set_assignments(text: str, settings: dict[str, str]) -> str:
    """Rewrite module-level ``NAME = ...`` lines (``--set total_frames=1_000_000``), for
    running a tutorial at the complete budget its text recommends. A name that has no
    module-level assignment is an error, so a typo cannot pass silently."""
    for name, value in settings.items():
        pattern = re.compile(rf"^{re.escape(name)}\s*=\s*[^\n]*$", flags=re.M)
        text, count = pattern.subn(f"{name} = {value}", text)
        if count == 0:
            raise SystemExit(f"--set {name}=...: the file has no module-level `{name} = ...`")
    return text


def swap_text(text: str) -> str:
    """``torchrl`` -> ``torchrl_lite`` as a whole word, leaving ``torchrl_lite`` alone."""
    return SWAP.sub("torchrl_lite", text)


def first_error(output: str) -> str:
    """The exception line of the last traceback (or the last non-empty line), paths relative."""
    return LOCAL_PATHS.sub("", _first_error(output)).replace(str(Path.home()), "~")


def _first_error(output: str) -> str:
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback"):
            for ln in lines[i + 1 :]:
                if not ln.startswith((" ", "\t")) and ":" in ln:
                    return ln[:300]
    exc = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Interrupt)\b", ln)]
    if exc:
        return exc[-1][:300]
    return lines[-1][:300] if lines else ""


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    env.setdefault("SDL_VIDEODRIVER", "dummy")
    env.setdefault("WANDB_MODE", "offline")
    env.setdefault("HYDRA_FULL_ERROR", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_one(cmd: list[str], cwd: Path, timeout: float, log: Path | None) -> dict:
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or ""
        out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        rc = None
    seconds = time.perf_counter() - start
    if log is not None:
        log.write_text(out)
    if rc == 0:
        result, error = "pass", ""
    elif rc is None:
        result, error = "timeout", f"no end within {timeout:.0f} s"
    else:
        result, error = "fail", first_error(out)
    return {"result": result, "seconds": round(seconds, 1), "error": error, "rc": rc}


def tutorial_list(folder: Path, only: set[str] | None) -> list[Path]:
    files = sorted(p for p in folder.glob("*.py"))
    return [p for p in files if only is None or p.stem in only]


def run_tutorials(args) -> list[dict]:
    folder = Path(args.path).resolve()
    rows = []
    for path in tutorial_list(folder, args.only):
        row = {"name": path.stem, "era": args.era}
        if path.stem in SKIP_TUTORIALS and args.only is None:
            rows.append({**row, "result": "skip", "seconds": 0, "error": SKIP_TUTORIALS[path.stem]})
            print_row(rows[-1])
            continue
        with tempfile.TemporaryDirectory(prefix=f"tut-{path.stem}-") as tmp:
            text = set_assignments(swap_text(path.read_text()), args.set)
            script = Path(tmp) / path.name
            script.write_text(text)
            log = Path(args.logs) / f"{args.era}-{path.stem}.log" if args.logs else None
            row.update(run_one([sys.executable, script.name], Path(tmp), args.timeout, log))
        rows.append(row)
        print_row(row)
    return rows


def ci_commands(root: Path) -> dict[str, str]:
    """The small-budget commands TorchRL's CI runs, read from the checkout at ``root``."""
    new = root / ".github/unittest/linux_sota/scripts/test_sota.py"
    old = root / ".github/unittest/linux_examples/scripts/run_test.sh"
    if new.exists():
        tree = ast.parse(new.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "commands" for t in node.targets)
                and isinstance(node.value, ast.Dict)
            ):
                return {k: " ".join(v.split()) for k, v in ast.literal_eval(node.value).items()}
        raise SystemExit(f"{new} has no `commands = {{...}}` dict")
    if old.exists():
        joined = old.read_text().replace("\\\n", " ")
        cmds: dict[str, str] = {}
        for line in joined.splitlines():
            match = re.search(r"(sota-implementations/\S+\.py)(.*)$", line)
            if not line.lstrip().startswith("python") or match is None:
                continue
            script, rest = match.group(1), " ".join(match.group(2).split())
            folder, key = Path(script).parent.name, Path(script).stem
            if folder in ("multiagent", "bandits"):
                key = f"{folder}/{key}"
            base, n = key, 1
            while key in cmds:  # the same script again (e.g. with one env instead of two)
                n += 1
                key = f"{base}#{n}"
            cmds[key] = f"python {script} {rest}".strip()
        return cmds
    raise SystemExit(f"{root} holds neither {new.relative_to(root)} nor {old.relative_to(root)}")


def run_scripts(args) -> list[dict]:
    root = Path(args.path).resolve()
    cmds = ci_commands(root)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sota-") as tmp:
        tree = Path(tmp) / "sota-implementations"
        shutil.copytree(root / "sota-implementations", tree)
        for path in tree.rglob("*"):
            if path.is_file() and path.suffix in {".py", ".yaml", ".yml"}:
                path.write_text(swap_text(path.read_text()))
        for name, cmd in cmds.items():
            if args.only is not None and name not in args.only:
                continue
            row = {"name": name, "era": args.era}
            folder = cmd.split()[1].split("/")[1]
            reason = SKIP_SCRIPTS.get(name) or SKIP_SCRIPTS.get(folder)
            if reason and args.only is None:
                rows.append({**row, "result": "skip", "seconds": 0, "error": reason})
                print_row(rows[-1])
                continue
            argv = shlex.split(cmd)
            argv[0] = sys.executable
            slug = re.sub(r"[^\w.#-]", "_", name)  # "bandits/dqn" -> "bandits_dqn"
            with tempfile.TemporaryDirectory(prefix=f"run-{slug}-") as work:
                # Hydra writes ./outputs under the working folder; scripts are found by path.
                argv[1] = str(Path(tmp) / argv[1])
                log = Path(args.logs) / f"{args.era}-{slug}.log" if args.logs else None
                row.update(run_one(argv, Path(work), args.timeout, log))
            row["command"] = " ".join(shlex.quote(a) for a in shlex.split(cmd)[1:])
            rows.append(row)
            print_row(row)
    return rows


def print_row(row: dict) -> None:
    print(
        f"{row['name']:<34} {row['era']:<8} {row['result']:<7} {row['seconds']:>7}  {row['error']}",
        flush=True,
    )


def markdown(rows: list[dict]) -> str:
    out = ["| name | era | result | seconds | first error |", "|---|---|---|---:|---|"]
    for r in rows:
        err = r["error"].replace("|", "\\|")
        out.append(f"| {r['name']} | {r['era']} | {r['result']} | {r['seconds']} | {err} |")
    ran = [r for r in rows if r["result"] != "skip"]
    passed = sum(r["result"] == "pass" for r in ran)
    out.append("")
    out.append(f"{passed} of {len(ran)} run to their end ({len(rows) - len(ran)} out of scope).")
    return "\n".join(out)


REPORT_HEAD = """## TorchRL's own tutorials and example scripts, import swapped

Each row is one of TorchRL's tutorials (`tutorials/sphinx-tutorials/`) or one of the
example-script commands TorchRL's CI runs (`sota-implementations/`, its own small-budget
hydra overrides), run unchanged but for `torchrl` -> `torchrl_lite`, each in a fresh
folder, by `tools/torchrl_conformance.py` (see its docstring for how to get TorchRL's
files; none are kept in this repository). "v0.4" is TorchRL's tag v0.4.0 (the seed's era),
"current" its main branch at {commit}. Out of scope: downloaded weights or datasets, LLM
and multi-agent code. Seconds on the 2-core development machine.
"""


def report(paths: list[str], out: str | None, commit: str) -> str:
    """One Markdown section from the JSON files of several runs: one table per kind and
    era, in the order first seen; a later file's row replaces an earlier row of the same
    name (a rerun of a few names updates the full table)."""
    parts = [REPORT_HEAD.format(commit=commit)]
    tables: dict[tuple[str, str], dict[str, dict]] = {}
    for path in paths:
        rows = json.loads(Path(path).read_text())
        kind = "scripts" if any("command" in r for r in rows) else "tutorials"
        for row in rows:
            tables.setdefault((kind, row["era"]), {})[row["name"]] = row
    for (kind, era), rows in tables.items():
        parts.append(f"### {kind.capitalize()}, {era}\n\n{markdown(list(rows.values()))}\n")
    text = "\n".join(parts)
    if out:
        Path(out).write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        rep = argparse.ArgumentParser(prog="torchrl_conformance.py report")
        rep.add_argument("json", nargs="+")
        rep.add_argument("--out", default=None)
        rep.add_argument("--commit", default="(see the JSON files)")
        ns = rep.parse_args(argv[1:])
        print(report(ns.json, ns.out, ns.commit))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["tutorials", "scripts"])
    parser.add_argument(
        "path", help="tutorials: the sphinx-tutorials folder; scripts: the checkout's root"
    )
    parser.add_argument("--era", required=True, help="a label for the table (v0.4, current)")
    parser.add_argument("--only", type=lambda s: set(s.split(",")), default=None)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="tutorials: rewrite a module-level assignment (e.g. total_frames=1_000_000)",
    )
    parser.add_argument("--logs", default=None, help="a folder for each run's full output")
    parser.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = parser.parse_args(argv)
    args.set = dict(item.split("=", 1) for item in args.set)
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    rows = run_tutorials(args) if args.kind == "tutorials" else run_scripts(args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print()
    print(markdown(rows))
    return 0 if all(r["result"] in ("pass", "skip") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
