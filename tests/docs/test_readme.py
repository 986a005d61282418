"""The README: at most 250 lines, every link into the repository resolves, and its commands
run as written.

Each line of a ```` ```bash ```` block is a command. A command is run here when it is cheap
(``CHEAP``: seconds, writes nothing) and skipped with the reason given in ``NOT_RUN``
otherwise; a command that matches neither fails ``test_readme_commands_are_classified``, so a
new one cannot go untested unnoticed. ```` ```text ```` blocks (synopses with placeholders)
are not commands. The ```` ```python ```` loop is run whole by a slow test, which checks the
README's claim that it reaches -200 on Pendulum-v1.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250

# command prefix -> what makes it cheap enough to run in every test session
CHEAP = {
    "torchrl-lite config ": "prints a recipe's options (about a second)",
    "torchrl-lite demo ": "a random-policy rollout of 2000 frames (seconds)",
}
# command prefix -> why the test suite does not run it
NOT_RUN = {
    "make train": "installs the project and trains PPO to -200 (minutes); the recipe is "
    "trained to its target by tests/recipes and benchmarks/bench_learning.py",
    "make test": "runs the whole test suite, this test included",
    "torchrl-lite train ": "trains to the recipe's target (minutes on 2 cores); the "
    "recipes train on small budgets in tests/recipes and to their targets in "
    "benchmarks/bench_learning.py",
    "torchrl-lite eval runs/": "reads the run folder that the train command before it writes",
}


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks of ``language`` in ``text``, in order."""
    pattern = rf"^```{re.escape(language)}\n(.*?)^```$"
    return re.findall(pattern, text, flags=re.DOTALL | re.MULTILINE)


def commands(text: str) -> list[str]:
    """Each command of the ``bash`` blocks, without its trailing ``# comment``."""
    out = []
    for block in fenced_blocks(text, "bash"):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                out.append(command)
    return out


def classify(command: str) -> tuple[str, str]:
    """``("cheap", why)`` or ``("not run", why)``; ``ValueError`` for a command no rule covers."""
    for table, kind in ((CHEAP, "cheap"), (NOT_RUN, "not run")):
        for prefix, why in table.items():
            if command.startswith(prefix):
                return kind, why
    raise ValueError(
        f"README command {command!r} is neither in CHEAP nor in NOT_RUN of "
        f"tests/docs/test_readme.py; add its prefix to one of them (with the reason)."
    )


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _run(command: str, timeout: float) -> subprocess.CompletedProcess:
    """``command`` in a shell at the repository root, with this interpreter's scripts
    (``torchrl-lite``) first on the PATH."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_readme_is_at_most_250_lines():
    lines = _readme().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move sections into docs/."


def test_readme_links_resolve():
    text = _readme()
    headings = {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", text, flags=re.MULTILINE)
    }
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local), "README links into no docs page"
    for link in local:
        path, _, anchor = link.partition("#")
        if path:
            assert (ROOT / path).is_file(), f"README links to {link!r}: no such file"
        else:
            assert anchor in headings, f"README links to #{anchor}: no such heading"


def test_readme_commands_are_classified():
    found = commands(_readme())
    assert found, "README has no bash block"
    kinds = {classify(c)[0] for c in found}
    assert "cheap" in kinds, "no README command is cheap enough to run in the tests"


def test_classify_names_the_unknown_command():
    with pytest.raises(ValueError, match=r"'rm -rf runs' is neither in CHEAP nor in NOT_RUN"):
        classify("rm -rf runs")


def test_commands_strip_comments_and_skip_other_languages():
    text = "```bash\nmake x   # comment\n# only a comment\n```\n```text\nnot a command\n```\n"
    assert commands(text) == ["make x"]


@pytest.mark.parametrize("command", commands(README.read_text(encoding="utf-8")))
def test_readme_command_runs(command):
    kind, why = classify(command)
    if kind == "not run":
        pytest.skip(f"not run here: {why}")
    proc = _run(command, timeout=300)
    assert proc.returncode == 0, f"{command!r} failed:\n{proc.stdout[-2000:]}\n{proc.stderr}"
    assert proc.stdout.strip(), f"{command!r} printed nothing"


def test_readme_loop_is_the_docs_loop():
    """The fast loop is shown twice (README and the "Writing your own loop" page); the two
    copies stay the same."""
    docs = (ROOT / "docs" / "your-own-loop.md").read_text(encoding="utf-8")
    assert fenced_blocks(_readme(), "python")[0] in fenced_blocks(docs, "python")


@pytest.mark.slow
def test_readme_loop_reaches_minus_200(tmp_path):
    """The README's loop, run as written, prints a mean of the last 10 episodes >= -200
    before its frame budget ends (it stops there)."""
    script = tmp_path / "loop.py"
    script.write_text(fenced_blocks(_readme(), "python")[0], encoding="utf-8")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"(\d+) frames: mean return of the last 10 episodes (-?\d+)", last)
    assert match, f"unexpected last line {last!r}"
    frames, mean = int(match[1]), int(match[2])
    print(f"README loop: {mean} at {frames} frames, {seconds:.0f} s wall")
    assert mean >= -200 and frames < 200_704, f"stopped at {frames} frames with {mean}"
