"""Command-line errors come before torch is imported, name the option as typed and point
to the fix; ``config ALGO`` and ``eval --help`` document every option."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchrl_lite.recipes import RECIPES, get_recipe
from torchrl_lite.recipes.fields import config_fields

ROOT = Path(__file__).resolve().parents[2]

# runs main() in a fresh interpreter and reports whether torch was imported by then
PROBE = """
import json, sys
from torchrl_lite.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


def probe(*argv: str, cwd) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "ppp"], "Unknown algorithm 'ppp'. Did you mean 'ppo'?"),
        (["train", "ppo", "--frames", "-5"], "--frames -5: must be >= 1"),
        (["train", "ppo", "gama=0.99"], "Unknown option 'gama' for the ppo recipe. Did you mean"),
        (["train", "ppo", "lr", "3e-4"], "'lr' is not a key=value option: write lr=3e-4"),
        (["train", "ppo", "epochs=ten"], "Option epochs='ten' is not a valid int."),
        (["train", "ppo", "lr=-1"], "lr=-1: the learning rate must be > 0"),
        (["train", "sac", "--env", "Pendulum-v1", "tau=0"], "tau=0: the target update rate"),
        (["train", "odt", "gama=0.9"], "Did you mean 'gamma'?"),  # fields of a base class
        (["train", "--resume", "nowhere"], "No run in nowhere: the folder does not exist."),
        (["eval", "nowhere", "--episodes", "0"], "--episodes 0: must be >= 1"),
        (["config", "ppoo"], "Unknown algorithm 'ppoo'"),
    ],
)
def test_errors_come_before_torch_is_imported(argv, message, tmp_path):
    result, err = probe(*argv, cwd=tmp_path)
    assert result == {"code": 2, "torch": False}, err
    assert err.startswith("torchrl-lite: error: ") and message in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_eval_of_a_folder_without_checkpoint_names_the_folder(tmp_path, capsys):
    from torchrl_lite.cli import main

    run = tmp_path / "run"
    run.mkdir()
    cfg = dataclasses.asdict(get_recipe("ppo").Config())
    (run / "config.json").write_text(json.dumps({"algo": "ppo", "config": cfg}))
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run} has no checkpoint" in err and "written by `torchrl-lite train`" in err
    assert "Trainer.save" not in err
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "meta.json").write_text("{not json")
    assert main(["train", "--resume", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is incomplete or corrupt" in err and str(run / "checkpoint" / "meta.json") in err
    assert "no older complete copy" in err


@pytest.mark.parametrize("algo", list(RECIPES))
def test_fields_read_from_source_match_the_config_dataclass(algo):
    real = [(f.name, f.default) for f in dataclasses.fields(get_recipe(algo).Config)]
    assert [(f.name, f.default) for f in config_fields(algo).values()] == real


def test_config_prints_every_option_with_default_and_docstring(capsys):
    from torchrl_lite.cli import main

    assert main(["config", "ppo"]) == 0
    out = capsys.readouterr().out
    for field in dataclasses.fields(get_recipe("ppo").Config):
        assert f"  {field.name}={field.default!r}" in out, field.name
    assert "(float) Discount; Pendulum's short credit horizon" in out
    assert "Pendulum-v1: -200.0" in out and "target=none trains the whole frame budget" in out


def test_eval_help_documents_every_option_and_default():
    done = subprocess.run(
        [sys.executable, "-m", "torchrl_lite", "eval", "--help"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "--episodes EPISODES episodes to play (default: 10)" in text
    assert "--video VIDEO also write the episodes to this video file" in text
    assert "(default: None)" in text and "run folder written by `torchrl-lite train`" in text
