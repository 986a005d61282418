"""Checkpoints: exact resume, atomic saves, Ctrl-C, missing or corrupt checkpoints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainers.setups import FPB, dqn_run, ppo_run, sac_run
from torchrl_lite.envs import GymEnv, SerialEnv
from torchrl_lite.trainers import load_checkpoint, save_checkpoint
from torchrl_lite.trainers.checkpoint import _sigint_deferred

BUILDERS = {"sac": sac_run, "dqn": dqn_run, "ppo": ppo_run}
N, K = 6, 3  # batches of the straight run, batches before the checkpoint


def assert_same_losses(expected: list, got: list) -> None:
    assert len(got) == len(expected)
    for step, (a, b) in enumerate(zip(expected, got)):
        for key in a.keys():
            if key.startswith("loss"):
                torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6, msg=f"step {step}")


@pytest.mark.parametrize("algo", sorted(BUILDERS))
def test_checkpoint_resume_is_exact(tmp_path, algo):
    """K batches, save, rebuild everything, load, N - K batches == N batches straight."""
    build = BUILDERS[algo]
    straight = build(N)
    straight.trainer.train()
    first = build(K, path=tmp_path / "ckpt")
    first.trainer.train()
    resumed = build(N, path=tmp_path / "ckpt", seed=123)  # other seed: load must override
    resumed.trainer.load()
    assert resumed.trainer.collected_frames == K * FPB
    resumed.trainer.train()
    assert_same_losses(straight.losses, first.losses + resumed.losses)


def test_checkpoint_resume_in_a_new_process(tmp_path):
    """The first part runs in a subprocess: no state survives in memory."""
    script = f"""
        import torch
        from tests.trainers.setups import sac_run
        run = sac_run({K}, path={str(tmp_path / "ckpt")!r})
        run.trainer.train()
        torch.save([td.to_dict() for td in run.losses], {str(tmp_path / "losses.pt")!r})
    """
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=True, cwd=root)
    straight = sac_run(N)
    straight.trainer.train()
    resumed = sac_run(N, path=tmp_path / "ckpt")
    resumed.trainer.load()
    resumed.trainer.train()
    from tensordict import TensorDict

    first = [TensorDict(d) for d in torch.load(tmp_path / "losses.pt")]
    assert_same_losses(straight.losses, first + resumed.losses)


def test_checkpoint_folder_contents_and_buffer_dump(tmp_path):
    run = sac_run(2, path=tmp_path / "ckpt")
    run.trainer.train()
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert names == ["meta.json", "replay_buffer", "state.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temporary left
    state, _ = load_checkpoint(tmp_path / "ckpt")
    assert "replay_buffer" not in state["hooks"]  # dumped as files, not pickled
    assert {"loss_module", "collector", "rng", "owners"} <= set(state)
    assert {"env_state_dict", "carry"} <= set(state["collector"])  # the env state, the episode
    assert "log_alpha" in state["loss_module"]  # SAC's temperature
    assert "optimizer" in state["hooks"] and "reward_normalizer" in state["hooks"]


def test_checkpoint_keyboard_interrupt_leaves_last_interval(tmp_path):
    """Ctrl-C mid-run: the checkpoint of the last completed interval loads and resumes."""
    straight = dqn_run(N)
    straight.trainer.train()
    run = dqn_run(N, path=tmp_path / "ckpt", save_trainer_interval=2 * FPB)

    def interrupt():
        if run.trainer.batch_count == 5 and run.trainer.optim_count == 9:
            raise KeyboardInterrupt  # in the middle of the 5th batch's optimisation

    run.trainer.register_op("post_optim", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run.trainer.train()
    assert run.collector.closed  # the collector was shut down
    state, _ = load_checkpoint(tmp_path / "ckpt")
    assert state["trainer"]["collected_frames"] == 4 * FPB  # saved after batches 2 and 4
    resumed = dqn_run(N, path=tmp_path / "ckpt")
    resumed.trainer.register_op("post_optim", lambda: None)
    resumed.trainer.load()
    resumed.trainer.train()
    assert_same_losses(straight.losses, run.losses[:8] + resumed.losses)


def test_checkpoint_interrupted_save_keeps_previous(tmp_path):
    path = tmp_path / "ckpt"
    save_checkpoint(path, {"step": 1})

    def crash(folder):
        Path(folder).mkdir()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 2}, dumpers={"buffer": crash})
    assert load_checkpoint(path)[0] == {"step": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_checkpoint_sigint_deferred_during_swap(sigint_raises):
    with pytest.raises(KeyboardInterrupt):
        with _sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done = True  # reached: the signal waits for the block to end
    assert done


def test_checkpoint_crash_between_renames_falls_back(tmp_path):
    path = tmp_path / "ckpt"
    save_checkpoint(path, {"step": 1})
    os.rename(path, tmp_path / "ckpt.old")  # the state after the first of the two renames
    with pytest.warns(UserWarning, match="previous checkpoint"):
        state, folder = load_checkpoint(path)
    assert state == {"step": 1} and folder.name == "ckpt.old"


def test_checkpoint_missing_is_file_not_found(tmp_path):
    run = ppo_run(2)
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope"))):
        run.trainer.load(tmp_path / "nope")
    with pytest.raises(ValueError, match="no checkpoint path"):
        run.trainer.load()


@pytest.mark.parametrize("damage", ["no_meta", "bad_meta", "truncated_state", "is_file"])
def test_checkpoint_corrupt_is_value_error_and_changes_nothing(tmp_path, damage):
    saved = ppo_run(2, path=tmp_path / "ckpt")
    saved.trainer.train()
    path = tmp_path / "ckpt"
    if damage == "no_meta":
        (path / "meta.json").unlink()
    elif damage == "bad_meta":
        (path / "meta.json").write_text("{not json")
    elif damage == "truncated_state":
        data = (path / "state.pt").read_bytes()
        (path / "state.pt").write_bytes(data[: len(data) // 2])
    else:
        path = tmp_path / "file.pt"
        path.write_bytes(b"torch")
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run = ppo_run(2, seed=5)
    before = {k: v.clone() for k, v in run.loss.state_dict().items()}
    with pytest.raises(ValueError, match=re.escape(str(path))):
        run.trainer.load(path)
    assert run.trainer.collected_frames == 0
    for key, value in run.loss.state_dict().items():
        assert torch.equal(value, before[key])
    assert files == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}


def test_checkpoint_mismatched_trainer_is_value_error_and_rolls_back(tmp_path):
    saved = ppo_run(2, path=tmp_path / "ckpt")
    saved.trainer.train()
    other = dqn_run(2)  # other hooks
    with pytest.raises(ValueError, match="register the same hooks"):
        other.trainer.load(tmp_path / "ckpt")
    wrong = ppo_run(2)
    wrong.loss.critic_network.module[0] = torch.nn.Linear(3, 5)  # other shapes
    before = {k: v.clone() for k, v in wrong.loss.state_dict().items()}
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match="does not fit this trainer"):
        wrong.trainer.load(tmp_path / "ckpt")
    assert wrong.trainer.collected_frames == 0
    assert all(torch.equal(v, before[k]) for k, v in wrong.loss.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)


def test_checkpoint_refuses_to_replace_other_files(tmp_path):
    target = tmp_path / "notes"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="refusing to replace"):
        save_checkpoint(target, {"x": 1})
    assert (target / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("kind", ["vector", "serial"])
def test_env_state_dict_round_trip_batched_gym(kind):
    def make():
        if kind == "vector":
            return GymEnv("CartPole-v1", num_envs=2)
        return SerialEnv(2, lambda: GymEnv("CartPole-v1"))

    env = make()
    env.set_seed(0)
    td = env.reset()
    actions = [env.rand_action(td.clone()) for _ in range(4)]  # no episode ends
    td = env.rand_step(td)
    state = env.state_dict()
    expected = [env.step(a.clone())["next", "observation"] for a in actions]
    other = make()
    other.set_seed(99)
    other.reset()
    other.load_state_dict(state)
    got = [other.step(a.clone())["next", "observation"] for a in actions]
    for a, b in zip(expected, got):
        assert torch.equal(a, b)
    env.close()
    other.close()


def test_checkpoint_restores_global_rngs(tmp_path):
    run = ppo_run(2, path=tmp_path / "ckpt")
    run.trainer.train()
    expected = (torch.rand(3), np.random.rand(3), __import__("random").random())
    other = ppo_run(2, seed=9)
    other.trainer.load(tmp_path / "ckpt")
    torch.manual_seed(1)  # loading restored the saved states, not these
    other.trainer.load(tmp_path / "ckpt")
    got = (torch.rand(3), np.random.rand(3), __import__("random").random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert got[2] == expected[2]
