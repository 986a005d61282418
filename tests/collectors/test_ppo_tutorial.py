"""tutorials/ppo_pendulum.py: the seed's PPO script runs, and its pipeline learns."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "tutorials" / "ppo_pendulum.py"
# what makes PPO learn Pendulum in 30k frames (the seed's values learn far slower)
TUNED = {
    "gamma=0.99": "gamma=0.9",
    "lr=2e-4": "lr=1e-3",
    "ClipPPOLoss(actor, critic)": 'ClipPPOLoss(actor, critic, loss_critic_type="l2")',
}


def run(source: str, smoke: bool, timeout: int) -> list[float]:
    """Run the script's source in a fresh process; return the printed average rewards."""
    env = dict(os.environ, TORCHRL_LITE_SMOKE="1" if smoke else "0", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=SCRIPT.parent,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rewards = [float(x) for x in re.findall(r"avg reward:\s*(-?[\d.]+)", out.stdout)]
    assert all(-16.3 <= r <= 0.0 for r in rewards), rewards  # Pendulum's reward range
    return rewards


def seeded(source: str, total_frames: int) -> str:
    """The script with a fixed seed (torch and env) and ``total_frames`` frames."""
    source = re.sub(r"TOTAL_FRAMES = .*", f"TOTAL_FRAMES = {total_frames}", source)
    source = source.replace(
        'env = GymEnv("Pendulum-v1")', 'env = GymEnv("Pendulum-v1")\nenv.set_seed(0)'
    )
    return "import torch\ntorch.manual_seed(0)\n" + source


def test_ppo_tutorial_short_form_runs():
    rewards = run(SCRIPT.read_text(), smoke=True, timeout=300)
    assert len(rewards) == 3  # one line per batch of 1000 frames


def test_ppo_tutorial_learns_with_tuned_hyperparameters():
    source = SCRIPT.read_text()
    for seed_value, tuned in TUNED.items():
        assert seed_value in source, seed_value
        source = source.replace(seed_value, tuned)
    rewards = run(seeded(source, 30_000), smoke=False, timeout=600)
    assert len(rewards) == 30
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 1.0, f"no clear improvement: {rewards}"


@pytest.mark.slow
def test_ppo_tutorial_seed_values_learn_over_500k_frames():
    """The seed's script with the seed's values (seeded, 500k of its 1M frames): flat while
    the critic catches up with the returns' scale, then a clear rise (see the module note)."""
    rewards = run(seeded(SCRIPT.read_text(), 500_000), smoke=False, timeout=3600)
    assert len(rewards) == 500
    first, last = sum(rewards[:50]) / 50, sum(rewards[-50:]) / 50
    assert last > first + 1.5, f"no clear improvement: first {first:.2f}, last {last:.2f}"
