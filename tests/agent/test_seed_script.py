"""Seed 000's script and evaluation snippet (examples/), end to end on a short budget."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pybullet_envs_gymnasium", reason="needs the pybullet extra")

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_seed_script_1_1_then_evaluation(tmp_path):
    out = _run(
        "seed_000_train.py", "--target-steps", "2000", "--log-dir", str(tmp_path), "--no-ray-init"
    )
    assert "frames 2000/2000" in out
    model = tmp_path / "actor_critic.state_dict"
    assert model.is_file() and (tmp_path / "train_g0_c0_e0.monitor.csv").is_file()
    played = _run("seed_000_evaluate.py", "--restart-model", str(model))
    assert "EPISODE: reward:" in played


@pytest.mark.slow
@pytest.mark.ray
def test_seed_script_two_collection_workers(tmp_path):
    pytest.importorskip("ray")
    out = _run("seed_000_train.py", "--target-steps", "4000", "--log-dir", str(tmp_path),
               "--col-remote-workers", "2")  # fmt: skip
    assert "col workers 2/2" in out
    assert {p.name for p in tmp_path.glob("*.monitor.csv")} == {
        "train_g0_c0_e0.monitor.csv",
        "train_g0_c1_e0.monitor.csv",
    }
