"""TorchRL v0.4's Decision Transformer scripts: the env and buffer call shapes they rely on.

The scripts mirror the action into the observations with ``TensorDictPrimer(action=...)``
(so ``CatFrames`` can stack past actions) and read the root ``"reward"`` of a D4RL
dataset (its reward-to-go at the root comes from it).
"""

import pytest
import torch

from torchrl_lite.data.datasets import D4RLExperienceReplay
from torchrl_lite.data.datasets.cache_writers import random_transitions, write_d4rl_cache
from torchrl_lite.envs import GymEnv, SerialEnv, TensorDictPrimer, TransformedEnv


@pytest.mark.parametrize("batched", [False, True])
def test_primer_on_the_action_key_mirrors_the_action_taken(batched):
    base = SerialEnv(2, lambda: GymEnv("Pendulum-v1")) if batched else GymEnv("Pendulum-v1")
    env = TransformedEnv(base, TensorDictPrimer(action=base.action_spec))
    # the spec given already carries the env's batch dims: it is not expanded again
    assert env.observation_spec["action"].shape == base.action_spec.shape
    assert env.action_spec.shape == base.action_spec.shape
    env.set_seed(0)
    td = env.reset()
    torch.testing.assert_close(td["action"], torch.zeros(base.action_spec.shape))
    td["action"] = torch.full(base.action_spec.shape, 0.5)
    out = env.step(td)
    torch.testing.assert_close(out["next", "action"], torch.full(base.action_spec.shape, 0.5))
    rollout = env.rollout(4)
    # each step's next action is the action the policy (random here) took at that step
    torch.testing.assert_close(rollout["next", "action"], rollout["action"])
    env.close()


def test_primer_still_refuses_an_observation_key():
    base = GymEnv("Pendulum-v1")
    with pytest.raises(ValueError, match=r"\['observation'\] already have a spec"):
        TransformedEnv(base, TensorDictPrimer(observation=base.observation_spec["observation"]))


def test_d4rl_root_reward_is_the_previous_rows_reward(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("D4RL_DATASET_DIR", "TORCHRL_LITE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    env = GymEnv("Pendulum-v1")
    steps = random_transitions(env, 16, seed=1)
    env.close()
    write_d4rl_cache("halfcheetah-medium-v2", steps)
    data = D4RLExperienceReplay("halfcheetah-medium-v2", 4, direct_download=True).data
    next_reward = steps["next", "reward"]
    expected = torch.cat([torch.zeros(1, 1), next_reward[:-1]])
    torch.testing.assert_close(data["reward"], expected)
