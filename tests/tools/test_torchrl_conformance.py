"""The runner of TorchRL's tutorials and scripts (tools/torchrl_conformance.py), on files
written here in TorchRL's layout (TorchRL's own files are never part of the repository)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("conformance", ROOT / "tools/torchrl_conformance.py")
conf = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = conf
_spec.loader.exec_module(conf)


def test_swap_replaces_whole_words_only():
    text = "import torchrl\nfrom torchrl.envs import GymEnv\nx = torchrl_lite.y\nmytorchrl = 1\n"
    assert conf.swap_text(text) == (
        "import torchrl_lite\nfrom torchrl_lite.envs import GymEnv\nx = torchrl_lite.y\n"
        "mytorchrl = 1\n"
    )
    assert conf.swap_text("_target_: torchrl.envs.GymEnv") == "_target_: torchrl_lite.envs.GymEnv"


def test_first_error_is_the_exception_line_without_local_paths():
    out = (
        'some output\nTraceback (most recent call last):\n  File "x.py", line 1\n'
        "    boom()\nImportError: cannot import name 'x' from 'torchrl_lite._utils' "
        f"({conf.ROOT}/torchrl_lite/_utils.py)\n"
    )
    assert conf.first_error(out) == (
        "ImportError: cannot import name 'x' from 'torchrl_lite._utils' (torchrl_lite/_utils.py)"
    )


def test_ci_commands_read_both_eras_layouts(tmp_path):
    new = tmp_path / "new/.github/unittest/linux_sota/scripts"
    new.mkdir(parents=True)
    (new / "test_sota.py").write_text(
        'commands = {\n    "sac": """python sota-implementations/sac/sac.py \\\n'
        '  collector.total_frames=48 \\\n  logger.backend=\n""",\n}\n'
    )
    assert conf.ci_commands(tmp_path / "new") == {
        "sac": "python sota-implementations/sac/sac.py collector.total_frames=48 logger.backend="
    }
    old = tmp_path / "old/.github/unittest/linux_examples/scripts"
    old.mkdir(parents=True)
    (old / "run_test.sh").write_text(
        "python .github/x.py sota-implementations/td3/td3.py \\\n  a=1 \\\n  b=2\n"
        "python .github/x.py sota-implementations/td3/td3.py \\\n  a=3\n"
        "python .github/x.py sota-implementations/multiagent/sac.py\n"
    )
    assert conf.ci_commands(tmp_path / "old") == {
        "td3": "python sota-implementations/td3/td3.py a=1 b=2",
        "td3#2": "python sota-implementations/td3/td3.py a=3",
        "multiagent/sac": "python sota-implementations/multiagent/sac.py",
    }


def test_tutorials_run_swapped_in_a_fresh_folder_and_report(tmp_path):
    tuts = tmp_path / "tuts"
    tuts.mkdir()
    (tuts / "good.py").write_text(
        "import torchrl\nimport os\nassert torchrl.__name__ == 'torchrl_lite'\n"
        "assert not os.listdir('.') == []\nopen('made_here.txt', 'w').write('x')\n"
    )
    (tuts / "bad.py").write_text("from torchrl.nothing_here import x\n")
    (tuts / "pretrained_models.py").write_text("raise SystemExit(3)\n")
    out = tmp_path / "rows.json"
    rc = conf.main(["tutorials", str(tuts), "--era", "t", "--json", str(out), "--timeout", "120"])
    rows = {r["name"]: r for r in json.loads(out.read_text())}
    assert rc == 1
    assert rows["good"]["result"] == "pass"
    assert rows["bad"]["result"] == "fail"
    assert rows["bad"]["error"].startswith("ModuleNotFoundError: No module named 'torchrl_lite.")
    assert rows["pretrained_models"]["result"] == "skip"
    assert not (tuts / "made_here.txt").exists()
    table = conf.report([str(out)], None, "abc")
    assert "| good | t | pass |" in table and "1 of 2 run to their end (1 out of scope)." in table


def test_set_rewrites_module_level_assignments_and_refuses_unknown_names():
    text = "total_frames = 10_000  # bring up to 1M\nframes_per_batch = 1000\n"
    out = conf.set_assignments(text, {"total_frames": "1_000_000"})
    assert out.splitlines()[0] == "total_frames = 1_000_000"
    assert out.splitlines()[1] == "frames_per_batch = 1000"
    with pytest.raises(SystemExit, match="no module-level `totl_frames = ...`"):
        conf.set_assignments(text, {"totl_frames": "5"})


def test_report_merges_reruns_into_the_full_table(tmp_path):
    def row(name, era, result, error="", **extra):
        return {"name": name, "era": era, "result": result, "seconds": 1.0, "error": error, **extra}

    full = [
        row("a", "v0.4", "fail", "KeyError: x", command="a.py"),
        row("b", "v0.4", "pass", command="b.py"),
    ]
    rerun = [row("a", "v0.4", "pass", command="a.py")]
    (tmp_path / "full.json").write_text(json.dumps(full))
    (tmp_path / "rerun.json").write_text(json.dumps(rerun))
    table = conf.report([str(tmp_path / "full.json"), str(tmp_path / "rerun.json")], None, "c")
    assert table.count("### Scripts, v0.4") == 1
    assert "| a | v0.4 | pass |" in table and "KeyError" not in table
    assert table.index("| a |") < table.index("| b |")
    assert "2 of 2 run to their end" in table
