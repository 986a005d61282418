"""Which start method workers get once an OpenGL driver runs in the process: spawned (a
forked child of a process that rendered waits forever in the driver), except when the
workers are built by a script's unguarded top-level code, which a spawned child would run
again (TorchRL's v0.4 ``torchrl_envs`` tutorial renders, then builds a ``ParallelEnv`` at
its top level). Each case runs as a real script in its own interpreter."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PICK = """
import warnings
import torchrl_lite.workers.process as process
process.gl_started = lambda: True  # as after a MuJoCo env rendered under EGL

def build():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        method = process.start_method(None, "ParallelEnv")
    print(process.unguarded_main(), method, any("guard" in str(w.message) for w in seen))
"""

CASES = {
    # script body after PICK -> (unguarded_main, method, warned)
    "top level": ("build()", "True fork True"),
    "a function called at the top level": ("def outer():\n    build()\nouter()", "True fork True"),
    "under the main guard": ('if __name__ == "__main__":\n    build()', "False spawn False"),
    "a function called under the guard": (
        'def main():\n    build()\nif __name__ == "__main__":\n    main()',
        "False spawn False",
    ),
}


def _run(body: str, tmp_path: Path, *args: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(PICK) + "\n" + body + "\n")
    out = subprocess.run(
        [sys.executable, *args, str(script)] if args else [sys.executable, str(script)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.parametrize("case", list(CASES))
def test_start_method_after_opengl_depends_on_the_main_guard(tmp_path, case):
    body, expected = CASES[case]
    assert _run(body, tmp_path) == expected


def test_no_script_file_is_not_an_unguarded_main(tmp_path):
    """``python -c`` (and a notebook) have no script a spawned child would run again."""
    code = textwrap.dedent(PICK) + "\nbuild()\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False spawn False"


def test_without_opengl_workers_are_forked():
    from torchrl_lite.workers.process import gl_started, start_method

    if gl_started():
        pytest.skip("an OpenGL driver already runs in this test process")
    assert start_method(None, "ParallelEnv") == "fork"
