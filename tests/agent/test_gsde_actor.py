"""OnPolicyActor with gSDE / an unsquashed clipped Gaussian, with PPO, and the PPO recipe's
``use_sde`` learning Pendulum."""

import sys
from pathlib import Path

import gymnasium
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.agent.actors import OnPolicyActor
from torchrl_lite.agent.algos import A2C, PPO
from torchrl_lite.agent.env import VecEnv
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import gym_train_env_factory
from torchrl_lite.modules import ClippedProbabilisticActor, GSDEHead
from torchrl_lite.objectives.value import GAE

OBS = gymnasium.spaces.Box(-1, 1, (3,))
ACT = gymnasium.spaces.Box(-2, 2, (1,))


def _actor(**kwargs):
    torch.manual_seed(0)
    return OnPolicyActor.create_factory(OBS, ACT, **kwargs)("cpu")


def _batch(actor, seed=0, steps=16):
    torch.manual_seed(seed)
    make, _, _ = VecEnv.create_factory(gym_train_env_factory, {"env_id": "Pendulum-v1"}, 2)
    collector = SyncDataCollector(
        make("cpu", seed), actor.policy, frames_per_batch=2 * steps, total_frames=2 * steps
    )
    batch = next(iter(collector))
    collector.shutdown()
    return batch


def test_gsde_actor_get_action_raw_clipped_and_deterministic_mean():
    actor = _actor(use_sde=True, sde_sample_freq=4, log_std_init=1.0)
    assert isinstance(actor.policy, ClippedProbabilisticActor)
    heads = [m for m in actor.modules() if isinstance(m, GSDEHead)]
    assert len(heads) == 1 and heads[0].sample_freq == 4
    assert float(heads[0].log_sigma.detach().mean()) == 1.0
    obs, rhs, done = torch.randn(64, 3), torch.zeros(64, 1), torch.zeros(64, 1)
    with torch.no_grad():
        action, clipped, logp, _, entropy = actor.get_action(obs, rhs, done)
        det, det_clipped, *_ = actor.get_action(obs, rhs, done, deterministic=True)
    assert bool((action.abs() > 2).any())  # log-std 1 over 64 features: wide
    torch.testing.assert_close(clipped, action.clamp(-2, 2))
    assert logp.shape == entropy.shape == (64, 1)
    dist = actor.policy.get_dist(TensorDict(observation=obs, batch_size=[64]))
    torch.testing.assert_close(logp.reshape(-1), dist.log_prob(action))  # the raw sample's
    torch.testing.assert_close(det, dist.mode)


def test_unsquashed_actor_without_sde_is_a_clipped_normal():
    actor = _actor(squash_output=False, log_std_init=0.5)
    assert isinstance(actor.policy, ClippedProbabilisticActor)
    assert not any(isinstance(m, GSDEHead) for m in actor.modules())
    with torch.no_grad():
        action, clipped, *_ = actor.get_action(torch.randn(8, 3), None, None)
    torch.testing.assert_close(clipped, action.clamp(-2, 2))


@pytest.mark.parametrize(
    ("kwargs", "space", "match"),
    [
        ({"use_sde": True, "squash_output": True}, ACT, "use_sde=True takes an unsquashed"),
        ({"use_sde": True}, gymnasium.spaces.Discrete(3), "need a Box action space.*Discrete"),
        ({"squash_output": False}, gymnasium.spaces.Discrete(3), "need a Box action space"),
    ],
)
def test_bad_sde_options(kwargs, space, match):
    with pytest.raises(ValueError, match=match):
        OnPolicyActor.create_factory(OBS, space, **kwargs)
    with pytest.raises(ValueError, match=match):
        OnPolicyActor(OBS, space, **kwargs)


def test_ppo_scores_the_raw_sample_and_starts_at_ratio_one():
    actor = _actor(use_sde=True, sde_sample_freq=4, log_std_init=0.0)
    algo = PPO.create_factory(num_mini_batch=2)("cpu", actor)
    assert algo.loss_module.tensor_keys.action == "raw_action"
    assert A2C.create_factory()("cpu", actor).loss_module.tensor_keys.action == "raw_action"
    batch = _batch(actor)
    assert {"raw_action", "sde_noise", "loc", "scale"} <= set(batch.keys())
    assert bool((batch["raw_action"].abs() > 2).any())  # some actions were clipped
    torch.testing.assert_close(batch["action"], batch["raw_action"].clamp(-2, 2))
    # the raw action is the mean plus the held state-dependent noise
    noise = batch["sde_noise"]  # [2, 16, 1]
    torch.testing.assert_close(batch["raw_action"], batch["loc"] + noise)
    GAE(gamma=algo.gamma, lmbda=0.95, value_network=actor.value)(batch)
    grads, info = algo.compute_gradients(batch.reshape(-1))
    # the same weights: the loss's log-prob of the raw action is the collected one
    assert abs(float(info["kl_approx"])) < 1e-5 and abs(float(info["ESS"]) - 1) < 1e-5
    head = next(m for m in actor.modules() if isinstance(m, GSDEHead))
    params = list(algo.parameters_to_train())
    index = next(i for i, p in enumerate(params) if p is head.log_sigma)
    assert len(grads) == len(params) and float(grads[index].abs().sum()) > 0


def test_restart_model_round_trip_with_sde(tmp_path):
    actor = _actor(use_sde=True, sde_sample_freq=4)
    path = tmp_path / "actor.state_dict"
    torch.save(actor.state_dict(), path)
    assert any(k.endswith("log_sigma") for k in actor.state_dict())
    loaded = OnPolicyActor.create_factory(
        OBS, ACT, use_sde=True, sde_sample_freq=4, restart_model=path
    )("cpu")
    obs = torch.randn(4, 3)
    with torch.no_grad():
        a = actor.get_action(obs, None, None, deterministic=True)[0]
        b = loaded.get_action(obs, None, None, deterministic=True)[0]
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="does not fit this actor"):  # a TanhNormal actor
        OnPolicyActor.create_factory(OBS, ACT, restart_model=path)


def test_episode_start_tracking_reads_is_init():
    actor = _actor(use_sde=True, sde_sample_freq=0, sde_reset_on_episode_start=True)
    assert "is_init" in actor.in_keys
    with torch.no_grad():  # get_action fills is_init (no episode start)
        assert actor.get_action(torch.randn(3, 3), None, None)[0].shape == (3, 1)
    batch = _batch(actor, steps=8)
    assert batch["is_init"][:, 0].all() and not batch["is_init"][:, 1:].any()


def test_ppo_recipe_with_gsde_learns_pendulum_short():
    """PPO + gSDE (the recipe's ``use_sde``) on Pendulum, 12k frames: returns improve."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "recipes"))
    from test_ppo_sac import _train

    returns = _train("ppo", frames=12_288, use_sde=True, lr=2e-3, mini_batch_size=128,
                     init_log_std=-0.5)  # fmt: skip
    first, last = sum(returns[:8]) / 8, sum(returns[-8:]) / 8
    assert last > first + 250, (first, last)
