"""Run folders from the command line: never overwritten or mixed, nothing written before
every input is checked, and a start that fails leaves no folder (``torchrl-lite train`` in
a subprocess, as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchrl_lite import _run_folder as run_folder
from torchrl_lite.cli import main

TINY = ["--quiet", "frames_per_batch=128", "num_envs=1", "mini_batch_size=64", "epochs=1"]


def torchrl_lite(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "torchrl_lite", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    """A finished tiny PPO run in ``runs/`` under a fresh working folder."""
    cwd = tmp_path_factory.mktemp("work")
    done = torchrl_lite("train", "ppo", "--env", "Pendulum-v1", "--frames", "256", *TINY, cwd=cwd)
    assert done.returncode == 0, done.stderr
    run = cwd / "runs" / "ppo-Pendulum-v1-s0"
    assert f"in {Path('runs') / 'ppo-Pendulum-v1-s0'}" in done.stdout  # it names the folder
    return run


def test_default_folder_gets_the_next_free_suffix(ppo_run):
    before = snapshot(ppo_run)
    done = torchrl_lite(
        "train", "ppo", "--env", "Pendulum-v1", "--frames", "128", *TINY, cwd=ppo_run.parents[1]
    )
    assert done.returncode == 0, done.stderr
    second = ppo_run.with_name("ppo-Pendulum-v1-s0-2")
    assert f"in {Path('runs') / second.name}" in done.stdout
    assert json.loads((second / "summary.json").read_text())["frames"] == 128
    assert snapshot(ppo_run) == before  # the first run is untouched


def test_an_out_folder_holding_a_run_is_refused_and_untouched(ppo_run):
    before = snapshot(ppo_run)
    done = torchrl_lite(
        "train", "sac", "--env", "Pendulum-v1", "--out", ppo_run, "--quiet", cwd=ppo_run.parent
    )
    assert done.returncode == 2
    err = done.stderr.strip()
    assert err.startswith("torchrl-lite: error: --out") and "a ppo run on Pendulum-v1" in err
    assert f"--resume {ppo_run}" in err and "--overwrite" in err
    assert snapshot(ppo_run) == before


def test_overwrite_moves_the_old_run_aside(ppo_run, tmp_path):
    out = tmp_path / "run"
    os.rename(ppo_run, out)  # a copy of our own (the module's run stays for other tests)
    try:
        before = snapshot(out)
        done = torchrl_lite(
            "train", "ppo", "--env", "Pendulum-v1", "--frames", "128", "--seed", "1", "--out",
            out, "--overwrite", *TINY, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        (aside,) = tmp_path.glob("run.replaced-*")
        assert f"moved the run that was in {out} to {aside}" in done.stdout
        assert snapshot(aside) == before  # kept whole, nothing deleted
        assert json.loads((out / "config.json").read_text())["config"]["seed"] == 1
        steps = [row.split(",")[0] for row in (out / "logs/metrics.csv").read_text().split()]
        assert steps == ["step", "128"]  # the new run's logs alone, nothing appended
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run", aside.name]
    finally:
        os.rename(aside, ppo_run)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ppo", "--env", "Pendulum-v9"], "Unknown gymnasium env id 'Pendulum-v9'"),
        (["ppo", "--logger", "wandb"], "--logger wandb needs wandb"),
        (["sac", "--env", "CartPole-v1"], "SAC needs a continuous action space"),
    ],
)
def test_a_failed_start_leaves_no_folder(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, whatever this machine has
    out = tmp_path / "runs" / "new"
    assert main(["train", *argv, "--out", str(out), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not any(out.parent.glob(".new.*"))


def test_a_failed_resume_changes_nothing(ppo_run, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    before = snapshot(ppo_run)
    code = main(["train", "--resume", str(ppo_run), "--logger", "wandb", "frames=512", "--quiet"])
    assert code == 2 and "--logger wandb needs wandb" in capsys.readouterr().err
    code = main(["train", "sac", "--resume", str(ppo_run), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "that folder holds a ppo run; resume it without the algorithm" in err
    assert snapshot(ppo_run) == before


def test_out_that_is_a_file_or_under_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["train", "ppo", "--out", str(tmp_path / "f"), *TINY]) == 2
    assert "this is a file, not a folder" in capsys.readouterr().err
    assert main(["train", "ppo", "--out", str(tmp_path / "f" / "run"), *TINY]) == 2
    assert f"{tmp_path / 'f'} is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "f").read_text() == "x"


def test_overwrite_and_out_with_resume_are_refused(tmp_path, capsys):
    assert main(["train", "ppo", "--overwrite", *TINY]) == 2
    assert "--overwrite needs --out DIR" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "drop --out" in capsys.readouterr().err


def test_start_run_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "run"
    real_rename = os.rename

    def failing_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="disk full"):
        run_folder.start_run(out, {"config.json": "{}"}, overwrite=False)
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its staging copy
    monkeypatch.setattr(os, "rename", real_rename)
    assert run_folder.start_run(out, {"config.json": "{}"}, overwrite=False) is None
    assert [p.name for p in out.iterdir()] == ["config.json"]
    out.joinpath("extra").write_text("kept")  # taken meanwhile by another run: not touched
    with pytest.raises(ValueError, match="written by another process meanwhile"):
        run_folder.start_run(out, {"config.json": "[]"}, overwrite=False)
    assert (out / "config.json").read_text() == "{}" and (out / "extra").is_file()


def test_next_free_skips_folders_with_files_and_reuses_empty_ones(tmp_path):
    base = tmp_path / "runs" / "ppo"
    assert run_folder.next_free(base) == base
    base.mkdir(parents=True)
    assert run_folder.next_free(base) == base  # an empty folder holds no run
    (base / "config.json").write_text("{}")
    (tmp_path / "runs" / "ppo-2").mkdir()
    (tmp_path / "runs" / "ppo-2" / "x").write_text("")
    assert run_folder.next_free(base) == tmp_path / "runs" / "ppo-3"


def test_truncate_logs_drops_rows_past_the_checkpoint(tmp_path):
    logs = tmp_path / "logs"
    (logs / "scalars").mkdir(parents=True)
    (logs / "metrics.csv").write_text("step,a,b\n100,1.0,2.0\n200,3.0,\n300,,4.0\n")
    (logs / "scalars" / "a.csv").write_text("100,1.0\n200,3.0\n")
    (logs / "scalars" / "b.csv").write_text("100,2.0\n300,4.0\n")
    assert run_folder.truncate_logs(logs, 200) == 2
    assert (logs / "metrics.csv").read_text() == "step,a,b\n100,1.0,2.0\n200,3.0,\n"
    assert (logs / "scalars" / "a.csv").read_text() == "100,1.0\n200,3.0\n"
    assert (logs / "scalars" / "b.csv").read_text() == "100,2.0\n"
