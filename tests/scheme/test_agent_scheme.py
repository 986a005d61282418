"""The 1/1 Scheme with the agent package's real components (PPO, OnPolicyActor, GAEBuffer,
VecEnv over gymnasium Pendulum) equals the contract's hand-written loop, and the seed's
``restart_model=`` loads what ``Learner.save_model()`` wrote."""

import pytest
import torch

from torchrl_lite import Learner
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.scheme import Scheme

agent = pytest.importorskip("torchrl_lite.agent.algos", reason="the agent package")


def _factories():
    from torchrl_lite.agent.actors import OnPolicyActor, get_feature_extractor
    from torchrl_lite.agent.algos import PPO
    from torchrl_lite.agent.env import VecEnv
    from torchrl_lite.agent.storages import OnPolicyGAEBuffer
    from torchrl_lite.envs import gym_train_env_factory

    envs, action_space, obs_space = VecEnv.create_factory(
        env_fn=gym_train_env_factory, env_kwargs={"env_id": "Pendulum-v1"}, vec_env_size=2
    )
    return {
        "algo_factory": PPO.create_factory(lr=1e-3, num_epochs=2, num_mini_batch=2),
        "actor_factory": OnPolicyActor.create_factory(
            obs_space, action_space, feature_extractor_network=get_feature_extractor("MLP")
        ),
        "storage_factory": OnPolicyGAEBuffer.create_factory(size=32, gae_lambda=0.95),
        "train_envs_factory": envs,
    }, (obs_space, action_space)


def _hand_loop(seed, updates):
    factories, _ = _factories()
    torch.manual_seed(seed)
    envs = factories["train_envs_factory"]("cpu", seed, index_col_worker=0, index_grad_worker=0)
    actor = factories["actor_factory"]("cpu")
    algo = factories["algo_factory"]("cpu", actor)
    storage = factories["storage_factory"]("cpu", actor, algo)
    collector = SyncDataCollector(
        envs, algo.acting_policy, frames_per_batch=2 * storage.steps_per_collection
    )
    done = 0
    while done < updates:
        storage.insert(collector.next())
        storage.before_gradients()
        for mb in storage.generate_batches(algo.num_mini_batch, algo.mini_batch_size,
                                           algo.num_epochs):  # fmt: skip
            if done == updates:
                break
            algo.compute_gradients(mb)
            algo.apply_gradients()
            done += 1
        storage.after_gradients()
    collector.shutdown()
    return algo.get_weights()


def test_scheme_local_with_agent_components_equals_hand_loop(tmp_path):
    factories, (obs_space, action_space) = _factories()
    learner = Learner(Scheme(**factories, seed=2), target_steps=10_000, log_dir=tmp_path)
    for _ in range(6):  # a collection of 64 frames is 4 updates: the second pass half done
        learner.step()
    expected = _hand_loop(2, 6)
    got = learner.scheme.get_weights()
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[k], expected[k]) for k in got)
    path = learner.save_model()
    from torchrl_lite.agent.actors import OnPolicyActor

    actor = OnPolicyActor.create_factory(obs_space, action_space, restart_model=path)("cpu")
    assert all(torch.equal(a, b) for a, b in zip(actor.state_dict().values(),
                                                 learner.scheme.local.actor.state_dict().values()))  # fmt: skip
    learner.close()
