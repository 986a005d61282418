"""TorchRL's decision-transformer pieces as its DT scripts use them."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.envs import GymEnv, Reward2GoTransform, TransformedEnv


def _trajs():
    g = torch.Generator().manual_seed(0)
    reward = torch.randn(2, 5, 1, generator=g)
    done = torch.zeros(2, 5, 1, dtype=torch.bool)
    done[0, 1] = done[0, 4] = done[1, 4] = True  # two episodes in row 0, one in row 1
    return TensorDict({"next": {"reward": reward, "done": done}}, [2, 5])


def test_reward2go_matches_a_plain_loop_per_episode():
    data = _trajs()
    r2g = Reward2GoTransform(
        gamma=0.9,
        in_keys=[("next", "reward"), "reward"],  # the root "reward" is absent: skipped
        out_keys=[("next", "return_to_go"), "return_to_go"],
    )
    out = r2g.inv(data)
    expected = torch.zeros(2, 5)
    for b in range(2):
        g = 0.0
        for t in reversed(range(5)):
            if data["next", "done"][b, t]:
                g = 0.0
            g = float(data["next", "reward"][b, t]) + 0.9 * g
            expected[b, t] = g
    torch.testing.assert_close(out["next", "return_to_go"].squeeze(-1), expected)
    assert r2g(out) is out  # sampling: already there


def test_reward2go_refuses_envs_unfinished_episodes_and_missing_entries():
    with pytest.raises(ValueError, match="cannot run inside an env"):
        TransformedEnv(GymEnv("Pendulum-v1"), Reward2GoTransform())
    data = _trajs()
    data["next", "done"][1] = False
    with pytest.raises(RuntimeError, match="never end"):
        Reward2GoTransform().inv(data)
    with pytest.raises(KeyError, match="none of the reward entries"):
        Reward2GoTransform(in_keys=["r"]).inv(_trajs())
    with pytest.raises(ValueError, match="2 in_keys but 1 out_keys"):
        Reward2GoTransform(in_keys=["a", "b"], out_keys=["c"])
