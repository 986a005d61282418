"""Observation normalization in the actor (``normalize_obs``) and reward normalization in
the on-policy storage (``normalize_reward``): statistics, where they are updated, saved
and loaded, and their bad input."""

import gymnasium
import pytest
import torch
from tensordict import TensorDict

from tests.scheme import doubles
from torchrl_lite.agent.actors import OnPolicyActor
from torchrl_lite.agent.algos import PPO
from torchrl_lite.agent.normalization import ReturnNormalizer, RunningNorm
from torchrl_lite.agent.storages import GAEBuffer
from torchrl_lite.scheme import Scheme

OBS = gymnasium.spaces.Box(-10, 10, (3,))
ACT = gymnasium.spaces.Box(-1, 1, (2,))


def test_running_norm_merges_batches_like_one_batch():
    torch.manual_seed(0)
    data = torch.randn(50, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 7.0])
    norm = RunningNorm((3,))
    for chunk in data.split([7, 20, 23]):
        norm.update(chunk)
    assert norm.count.item() == 50
    torch.testing.assert_close(norm.mean, data.mean(0))
    torch.testing.assert_close(norm.var, data.var(0, unbiased=False))
    out = norm(data)
    torch.testing.assert_close(out.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    assert norm(torch.full((1, 3), 1e6)).max().item() == 10.0  # clipped at +-10


def test_return_normalizer_hand_computed_with_episode_end():
    """gamma 0.5, rewards 1, an episode ending after step 1: returns 1, 1.5 | 1, 1.5;
    mean 1.25, var 0.0625, std 0.25: the rewards become 1 / 0.25 = 4."""
    norm = ReturnNormalizer(gamma=0.5)
    done = torch.tensor([[False, True, False, False]])
    scaled = norm.normalize(torch.ones(1, 4), done)
    assert norm.count == 4 and norm.mean == pytest.approx(1.25)
    assert norm.var == pytest.approx(0.0625)
    torch.testing.assert_close(scaled, torch.full((1, 4), 4.0), rtol=1e-6, atol=0)
    state = norm.state_dict()
    other = ReturnNormalizer(gamma=0.5)
    other.load_state_dict(state)
    assert other.state_dict() == state


def _batch(obs, reward, done):
    b, t = obs.shape[:2]
    following = torch.cat([obs[:, 1:], obs[:, -1:] + 3], 1)  # obs[:, t + 1] = next[:, t]
    return TensorDict(
        {"observation": obs, "action": torch.zeros(b, t, 2),
         "sample_log_prob": torch.zeros(b, t),
         "next": {"observation": following, "reward": reward.unsqueeze(-1),
                  "done": done.unsqueeze(-1), "terminated": done.unsqueeze(-1),
                  "truncated": torch.zeros(b, t, 1, dtype=torch.bool)}},
        batch_size=[b, t],
    )  # fmt: skip


def test_storage_updates_obs_statistics_after_the_round_and_scales_rewards():
    actor = OnPolicyActor.create_factory(OBS, ACT, normalize_obs=True)("cpu")
    algo = PPO.create_factory(gamma=0.5)("cpu", actor)
    storage = GAEBuffer.create_factory(size=4, normalize_reward=True)("cpu", actor, algo)
    obs = torch.arange(24.0).reshape(2, 4, 3)
    done = torch.tensor([[False, True, False, False]] * 2)
    storage.insert(_batch(obs, torch.ones(2, 4), done))
    # rewards scaled before the advantages (same returns as the hand-computed case)
    torch.testing.assert_close(storage._batches[0]["next", "reward"], torch.full((2, 4, 1), 4.0))
    norms = actor.normalizers()
    assert len(norms) == 2 and all(n.count.item() == 0 for n in norms)  # not before training
    storage.before_gradients()
    for _ in storage.generate_batches(num_mini_batch=2, num_epochs=1):
        pass
    storage.after_gradients()  # the round's observations enter the statistics
    for n in norms:
        assert n.count.item() == 8
        torch.testing.assert_close(n.mean, obs.reshape(-1, 3).mean(0))
    assert storage.state_dict() == {"reward_normalizer": {"count": 8, "mean": 1.25, "var": 0.0625}}


def test_normalized_actor_saves_and_restarts_with_its_statistics(tmp_path):
    factory = OnPolicyActor.create_factory(OBS, ACT, normalize_obs=True, log_std_init=-1.0)
    actor = factory("cpu")
    assert actor.policy.module[0].module[-1].log_std.tolist() == [-1.0, -1.0]
    actor.update_normalizers(torch.randn(100, 3) * 4 + 3)
    path = tmp_path / "actor.pt"
    torch.save(actor.state_dict(), path)
    obs = torch.randn(5, 3) * 4 + 3
    rhs, done = torch.zeros(5, 1), torch.zeros(5, 1)
    expected = actor.get_action(obs, rhs, done, deterministic=True)[0]
    restarted = OnPolicyActor.create_factory(OBS, ACT, normalize_obs=True, log_std_init=-1.0,
                                             restart_model=str(path))("cpu")  # fmt: skip
    torch.testing.assert_close(
        restarted.get_action(obs, rhs, done, deterministic=True)[0], expected
    )
    fresh = factory("cpu")  # same init (no seed difference in the loaded weights), no stats
    fresh.load_state_dict(
        {k: v for k, v in actor.state_dict().items() if "norm" not in k}, strict=False
    )
    assert not torch.allclose(fresh.get_action(obs, rhs, done, deterministic=True)[0], expected)
    with pytest.raises(ValueError, match="does not fit this actor.*unexpected entries"):
        OnPolicyActor.create_factory(OBS, ACT, restart_model=str(path))


def test_normalize_obs_bad_input():
    space = gymnasium.spaces.Dict({"a": OBS})
    with pytest.raises(ValueError, match="normalize_obs=True needs a Box observation space"):
        OnPolicyActor(space, ACT, normalize_obs=True)
    factories = {**doubles.factories(),
                 "actor_factory": OnPolicyActor.create_factory(OBS, ACT, normalize_obs=True)}  # fmt: skip
    with pytest.raises(ValueError, match=r"grad_remote_workers=2 with an actor built with "
                       r"normalize_obs=True"):  # fmt: skip
        Scheme(**factories, grad_remote_workers=2)


def _pendulum_factories():
    from torchrl_lite.agent.env import VecEnv
    from torchrl_lite.envs import gym_train_env_factory

    envs, act, obs = VecEnv.create_factory(gym_train_env_factory, {"env_id": "Pendulum-v1"}, 2)
    return {
        "algo_factory": PPO.create_factory(num_epochs=1, mini_batch_size=32),
        "actor_factory": OnPolicyActor.create_factory(obs, act, normalize_obs=True),
        "storage_factory": GAEBuffer.create_factory(size=32, normalize_reward=True),
        "train_envs_factory": envs,
    }


def test_learner_checkpoint_keeps_both_normalizations(tmp_path):
    """2 rounds of 2 envs x 32 steps (2 minibatches each) in one process: the checkpoint
    holds the actor's observation statistics and the storage's reward statistics."""
    from torchrl_lite import Learner

    learner = Learner(Scheme(**_pendulum_factories(), seed=3), 10_000, log_dir=tmp_path)
    for _ in range(5):  # the 5th step collects round 3: rounds 1-2 are in the statistics
        learner.step()
    worker = learner.scheme.local
    assert worker.actor.normalizers()[0].count.item() == 128
    assert worker.storage.reward_normalizer.count == 192
    learner.save_checkpoint()
    model = learner.save_model()
    learner.close()
    resumed = Learner(Scheme(**_pendulum_factories(), seed=99), 10_000, log_dir=tmp_path)
    resumed.load_checkpoint()
    other = resumed.scheme.local
    for a, b in zip(worker.actor.normalizers(), other.actor.normalizers()):
        assert torch.equal(a.mean, b.mean) and torch.equal(a.var, b.var) and a.count == b.count
    assert (
        other.storage.reward_normalizer.state_dict()
        == worker.storage.reward_normalizer.state_dict()
    )
    resumed.close()
    saved = torch.load(model, weights_only=True)
    assert any(k.endswith("norm.mean") for k in saved)  # the evaluation's actor file too
