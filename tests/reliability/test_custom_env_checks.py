"""Custom envs: the first step's output of a user's ``_step`` is checked against the specs."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import Bounded, Categorical, Composite, Unbounded
from torchrl_lite.envs import EnvBase


class UserEnv(EnvBase):
    """A counter env whose ``_step`` can be broken in one way, as a user's might be."""

    def __init__(self, broken: str | None = None, batch: int = 0):
        super().__init__(batch_size=[batch] if batch else [])
        self.broken = broken
        b = tuple(self.batch_size)
        self.observation_spec = Composite(observation=Unbounded((*b, 2)), shape=self.batch_size)
        self.action_spec = Categorical(2, shape=b)
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Composite(
            done=Categorical(2, (*b, 1), dtype=torch.bool),
            terminated=Categorical(2, (*b, 1), dtype=torch.bool),
            truncated=Categorical(2, (*b, 1), dtype=torch.bool),
            shape=self.batch_size,
        )

    def _reset(self, tensordict):
        b = tuple(self.batch_size)
        flags = torch.zeros((*b, 1), dtype=torch.bool)
        return TensorDict(
            observation=torch.zeros((*b, 2)),
            done=flags,
            terminated=flags.clone(),
            truncated=flags.clone(),
            batch_size=self.batch_size,
        )

    def _step(self, tensordict):
        b = tuple(self.batch_size)
        flags = torch.zeros((*b, 1), dtype=torch.bool)
        out = {
            "observation": torch.ones((*b, 2)),
            "reward": torch.ones((*b, 1)),
            "done": flags,
            "terminated": flags.clone(),
            "truncated": flags.clone(),
        }
        if self.broken == "reward_shape":
            out["reward"] = torch.ones(b or (3,))  # [B] instead of [B, 1]
        elif self.broken == "reward_dtype":
            out["reward"] = torch.ones((*b, 1), dtype=torch.float64)
        elif self.broken == "done_dtype":
            out["done"] = torch.zeros((*b, 1))
        elif self.broken == "obs_shape":
            out["observation"] = torch.ones((*b, 3))
        elif self.broken == "no_reward":
            del out["reward"]
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


CASES = {
    "reward_shape": (ValueError, r"reward 'reward' of shape \[.*\], but its spec has shape"),
    "reward_dtype": (ValueError, r"reward 'reward' of dtype torch.float64.*torch.float32"),
    "done_dtype": (ValueError, r"done 'done' of dtype torch.float32.*torch.bool"),
    "obs_shape": (ValueError, r"observation 'observation' of shape \[.*3\].*\[.*2\]"),
    "no_reward": (KeyError, r"returned no reward entry 'reward'"),
}


@pytest.mark.parametrize("batch", [0, 4])
@pytest.mark.parametrize("broken", sorted(CASES))
def test_rollout_checks_the_first_step_output(broken, batch):
    error, match = CASES[broken]
    with pytest.raises(error, match=match) as info:
        UserEnv(broken, batch).rollout(5)
    assert "UserEnv._step" in str(info.value)


@pytest.mark.parametrize("broken", sorted(CASES))
def test_collector_checks_the_first_step_output(broken):
    error, match = CASES[broken]
    collector = SyncDataCollector(UserEnv(broken, 2), None, frames_per_batch=8, total_frames=8)
    with pytest.raises(error, match=match):
        next(iter(collector))
    collector.shutdown()


def test_a_correct_custom_env_runs_and_the_check_is_once_per_rollout(monkeypatch):
    env = UserEnv(batch=2)
    calls = []
    import torchrl_lite.envs.common as common

    original = common.check_step_output
    monkeypatch.setattr(common, "check_step_output", lambda *a: calls.append(1) or original(*a))
    rollout = env.rollout(6, break_when_any_done=False)
    assert rollout.batch_size == (2, 6) and len(calls) == 1
    assert rollout["next", "reward"].shape == (2, 6, 1)
    collector = SyncDataCollector(UserEnv(batch=2), None, frames_per_batch=8, total_frames=16)
    assert [b.batch_size for b in collector] == [torch.Size([2, 4])] * 2
    collector.shutdown()


def test_bounded_observation_dtype_mismatch_names_the_spec():
    env = UserEnv()
    env.observation_spec = Composite(observation=Bounded(-1.0, 1.0, (2,), dtype=torch.float64))
    with pytest.raises(ValueError, match=r"observation 'observation' of dtype torch.float32"):
        env.rollout(2)
