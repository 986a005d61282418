"""Envs, policies and checks shared by the collector tests."""

import multiprocessing
import time

import psutil
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from torchrl_lite.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl_lite.envs import EnvBase, GymEnv
from torchrl_lite.modules import LSTMModule


class CountingEnv(EnvBase):
    """``"count"``: steps since the last reset; ``"seed"``: the seed it was given.

    Done (terminated) when ``count == limit``. The reward is the action. ``fail_at``
    raises ``ValueError("boom ...")`` in that step (counted over the env's life).
    """

    def __init__(self, limit=4, fail_at=None, fail_in_init=False):
        if fail_in_init:
            raise ValueError("boom while building the env")
        super().__init__()
        self.observation_spec = Composite(
            count=Unbounded((1,), dtype=torch.float32), seed=Unbounded((1,), dtype=torch.int64)
        )
        self.action_spec = Bounded(-1.0, 1.0, (1,))
        self.limit, self.fail_at = limit, fail_at
        self.count, self.steps, self.seed = 0, 0, -1

    def _obs(self):
        return {"count": torch.tensor([float(self.count)]), "seed": torch.tensor([self.seed])}

    def _reset(self, tensordict):
        self.count = 0
        return TensorDict(self._obs(), [])

    def _step(self, tensordict):
        self.steps += 1
        if self.fail_at is not None and self.steps == self.fail_at:
            raise ValueError(f"boom at step {self.steps}")
        self.count += 1
        done = torch.tensor([self.count >= self.limit])
        return TensorDict(
            {
                **self._obs(),
                "reward": tensordict["action"].clone(),
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros(1, dtype=torch.bool),
            },
            [],
        )

    def _set_seed(self, seed):
        self.seed = seed


def make_pendulum():
    return GymEnv("Pendulum-v1")


def constant_policy(value: float = 0.5, in_key: str = "count") -> TensorDictModule:
    """``action = value`` whatever the input (a Linear with zero weight: weights to update)."""
    net = nn.Linear(1, 1)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.fill_(value)
    return TensorDictModule(net, in_keys=[in_key], out_keys=["action"])


def recurrent_policy(seed: int = 1) -> TensorDictSequential:
    """An LSTM policy for Pendulum (deterministic: tanh of a linear head)."""
    torch.manual_seed(seed)
    lstm = LSTMModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
    head = TensorDictModule(
        nn.Sequential(nn.Linear(8, 1), nn.Tanh()), in_keys=["features"], out_keys=["action"]
    )
    return TensorDictSequential(lstm, head)


def assert_same(a, b, skip_prefix=("collector",)):
    """Every shared entry of two batches is equal (trajectory ids aside)."""
    keys = [k for k in b.keys(True, True) if not (isinstance(k, tuple) and k[0] in skip_prefix)]
    assert a.batch_size == b.batch_size
    for key in keys:
        torch.testing.assert_close(a[key], b[key], msg=lambda m, key=key: f"{key}: {m}")


def wait_gone(pids, timeout=5.0):
    """The pids still running (not zombies) after up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [
            p
            for p in pids
            if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
        time.sleep(0.05)
    return alive


@pytest.fixture
def no_leftover_workers():
    before = {p.pid for p in multiprocessing.active_children()}
    yield
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert not left, f"worker processes left running: {left}"
