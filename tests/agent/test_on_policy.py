"""OnPolicyActor, PPO/A2C and the on-policy storages against the library components."""

import copy

import gymnasium
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.agent.actors import OnPolicyActor, get_feature_extractor
from torchrl_lite.agent.algos import A2C, PPO
from torchrl_lite.agent.env import VecEnv
from torchrl_lite.agent.storages import GAEBuffer, OnPolicyGAEBuffer, VanillaOnPolicyBuffer
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import GymEnv, gym_train_env_factory
from torchrl_lite.objectives import A2CLoss, ClipPPOLoss
from torchrl_lite.objectives.value import GAE, TD1Estimator
from torchrl_lite.recipes import ppo as ppo_recipe

OBS = gymnasium.spaces.Box(-1, 1, (3,))
ACT = gymnasium.spaces.Box(-2, 2, (1,))


def _batch(actor, seed=0):
    """A real [2, 16] Pendulum batch collected by the actor's policy."""
    torch.manual_seed(seed)
    make, _, _ = VecEnv.create_factory(gym_train_env_factory, {"env_id": "Pendulum-v1"}, 2)
    collector = SyncDataCollector(
        make("cpu", seed), actor.policy, frames_per_batch=32, total_frames=32
    )
    batch = next(iter(collector))
    collector.shutdown()
    return batch


def test_actor_default_networks_are_the_ppo_recipes():
    torch.manual_seed(0)
    actor = OnPolicyActor.create_factory(
        OBS, ACT, feature_extractor_network=get_feature_extractor("MLP")
    )("cpu")
    torch.manual_seed(0)
    policy, value = ppo_recipe.make_actor_critic(ppo_recipe.Config(), GymEnv("Pendulum-v1"))
    ours = list(actor.policy.parameters()) + list(actor.value.parameters())
    theirs = list(policy.parameters()) + list(value.parameters())
    assert [p.shape for p in ours] == [p.shape for p in theirs]
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_actor_get_action_shapes_and_determinism():
    actor = OnPolicyActor(OBS, ACT)
    obs, rhs, done = torch.randn(5, 3), torch.zeros(5, 1), torch.zeros(5, 1)
    with torch.no_grad():
        a1, c1, logp1, rhs1, ent = actor.get_action(obs, rhs, done, deterministic=True)
        a2, *_ = actor.get_action(obs, rhs, done, deterministic=True)
        sampled = [actor.get_action(obs, rhs, done)[0] for _ in range(3)]
    assert a1.shape == c1.shape == (5, 1) and logp1.shape == ent.shape == (5, 1)
    assert torch.equal(a1, a2) and rhs1 is rhs
    assert not torch.equal(sampled[0], sampled[1])
    assert (c1.abs() <= 2).all()
    # deterministic action = the policy's own deterministic output
    loc = actor.policy.get_dist(TensorDict(observation=obs, batch_size=[5])).deterministic_sample
    torch.testing.assert_close(a1, loc)


def test_actor_discrete_gives_indices_for_gymnasium():
    actor = OnPolicyActor(OBS, gymnasium.spaces.Discrete(4))
    action, clipped, logp, _, _ = actor.get_action(torch.randn(6, 3), None, None)
    assert action.shape == (6, 4) and clipped.shape == (6, 1)
    assert torch.equal(clipped.squeeze(-1), action.long().argmax(-1))


def test_actor_restart_model_round_trip(tmp_path):
    actor = OnPolicyActor(OBS, ACT)
    path = tmp_path / "actor_critic.state_dict"
    torch.save(actor.state_dict(), path)
    loaded = OnPolicyActor.create_factory(OBS, ACT, restart_model=str(path))("cpu")
    obs = torch.randn(4, 3)
    with torch.no_grad():
        a = actor.get_action(obs, None, None, deterministic=True)[0]
        b = loaded.get_action(obs, None, None, deterministic=True)[0]
    torch.testing.assert_close(a, b)


def test_actor_restart_model_missing_file(tmp_path):
    missing = str(tmp_path / "nope.state_dict")
    with pytest.raises(
        FileNotFoundError, match="restart_model=.*nope.state_dict.*no such file.*Learner.save_model"
    ):
        OnPolicyActor.create_factory(OBS, ACT, restart_model=missing)


def test_actor_restart_model_wrong_shape(tmp_path):
    path = tmp_path / "other.state_dict"
    torch.save(OnPolicyActor(gymnasium.spaces.Box(-1, 1, (5,)), ACT).state_dict(), path)
    with pytest.raises(
        ValueError, match=r"does not fit this actor \(wrong shapes: .*\[64, 5\] vs actor \[64, 3\]"
    ):
        OnPolicyActor.create_factory(OBS, ACT, restart_model=str(path))


def test_actor_restart_model_not_a_state_dict(tmp_path):
    path = tmp_path / "junk.state_dict"
    path.write_text("hello")
    with pytest.raises(ValueError, match="is not a saved state_dict"):
        OnPolicyActor.create_factory(OBS, ACT, restart_model=str(path))


def test_actor_recurrent_not_supported():
    with pytest.raises(ValueError, match="recurrent_nets=True is not available"):
        OnPolicyActor.create_factory(OBS, ACT, recurrent_nets=True)


def test_unknown_feature_extractor():
    with pytest.raises(ValueError, match="Unknown feature extractor 'Mlp'. Did you mean 'MLP'"):
        get_feature_extractor("Mlp")


def _grads_by_hand(loss, batch):
    params = [p for p in loss.parameters() if p.requires_grad]
    out = loss(batch)
    sum(v for k, v in out.items() if k.startswith("loss_")).backward()
    return [p.grad for p in params]


def test_ppo_compute_gradients_equal_clip_ppo_loss():
    actor = OnPolicyActor(OBS, ACT)
    algo = PPO.create_factory(clip_param=0.1, entropy_coef=0.01, value_loss_coef=0.7,
                              use_clipped_value_loss=True, num_mini_batch=4)("cpu", actor)  # fmt: skip
    batch = _batch(actor)
    GAE(gamma=algo.gamma, lmbda=0.95, value_network=actor.value)(batch)
    reference_actor = copy.deepcopy(actor)
    reference = ClipPPOLoss(reference_actor.policy, reference_actor.value, clip_epsilon=0.1,
                            entropy_coef=0.01, critic_coef=0.7, normalize_advantage=True,
                            clip_value=0.1)  # fmt: skip
    mb = batch.reshape(-1)[:16]
    torch.manual_seed(1)  # TanhNormal's entropy is a Monte-Carlo estimate
    grads, info = algo.compute_gradients(mb.clone())
    torch.manual_seed(1)
    expected = _grads_by_hand(reference, mb.clone())
    assert len(grads) == len(expected) == len(algo.parameters_to_train())
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e)
    assert {"loss_objective", "loss_critic", "loss_entropy", "loss"} <= set(info)


def test_ppo_apply_gradients_is_a_clipped_adam_step():
    actor = OnPolicyActor(OBS, ACT)
    algo = PPO.create_factory(lr=1e-2, max_grad_norm=0.5)("cpu", actor)
    reference = copy.deepcopy(actor)
    grads = [torch.randn_like(p) for p in algo.parameters_to_train()]
    algo.apply_gradients(grads)
    params = list(reference.policy.parameters()) + list(reference.value.parameters())
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, 0.5)
    torch.optim.Adam(params, lr=1e-2).step()
    for a, b in zip(algo.parameters_to_train(), params):
        torch.testing.assert_close(a, b)
    assert algo.num_gradient_updates == 1


def test_ppo_weights_state_and_parameters():
    actor = OnPolicyActor(OBS, ACT)
    algo = PPO.create_factory()("cpu", actor)
    assert (
        algo.mini_batch_size == ppo_recipe.Config().mini_batch_size and algo.num_mini_batch is None
    )
    other = PPO.create_factory()("cpu", OnPolicyActor(OBS, ACT))
    other.set_weights(algo.get_weights())
    obs = torch.randn(3, 3)
    torch.testing.assert_close(actor.get_value(obs), other.actor.get_value(obs))
    algo.update_algorithm_parameter("lr", 0.123)
    algo.update_algorithm_parameter("clip_param", 0.3)
    algo.update_algorithm_parameter("entropy_coef", 0.05)
    assert algo.optimizers["optimizer"].param_groups[0]["lr"] == 0.123
    assert algo.loss_module.clip_epsilon == 0.3
    assert algo.loss_module.entropy_coef.item() == pytest.approx(0.05)
    with pytest.raises(
        ValueError, match="unknown algorithm parameter 'clip_parm'. Did you mean 'clip_param'"
    ):
        algo.update_algorithm_parameter("clip_parm", 0.1)
    state = algo.state_dict()
    other.load_state_dict(state)
    assert other.optimizers["optimizer"].param_groups[0]["lr"] == 0.123


def test_ppo_bad_minibatch_arguments():
    with pytest.raises(
        ValueError, match="give num_mini_batch \\(4\\) or mini_batch_size \\(64\\), not both"
    ):
        PPO.create_factory(num_mini_batch=4, mini_batch_size=64)
    with pytest.raises(ValueError, match="num_mini_batch must be an int >= 1, got 0"):
        PPO.create_factory(num_mini_batch=0)


def test_a2c_compute_gradients_equal_a2c_loss():
    actor = OnPolicyActor(OBS, ACT)
    algo = A2C.create_factory(entropy_coef=0.0)("cpu", actor)
    batch = _batch(actor)
    GAE(gamma=algo.gamma, lmbda=0.9, value_network=actor.value)(batch)
    ref_actor = copy.deepcopy(actor)
    reference = A2CLoss(
        ref_actor.policy,
        ref_actor.value,
        entropy_bonus=False,
        critic_coef=0.5,
        loss_critic_type="l2",
    )
    grads, _ = algo.compute_gradients(batch.reshape(-1).clone())
    for g, e in zip(grads, _grads_by_hand(reference, batch.reshape(-1).clone())):
        torch.testing.assert_close(g, e)


def test_gae_buffer_advantages_and_minibatches():
    assert OnPolicyGAEBuffer is GAEBuffer
    actor = OnPolicyActor(OBS, ACT)
    algo = PPO.create_factory(num_mini_batch=4, num_epochs=2)("cpu", actor)
    storage = GAEBuffer.create_factory(size=16, gae_lambda=0.9)("cpu", actor, algo)
    assert storage.steps_per_collection == 16
    first, second = _batch(actor, 0), _batch(actor, 1)[:, :8]  # two workers, different T
    storage.insert(first)
    storage.insert(second)
    storage.before_gradients()
    expected = torch.cat([
        GAE(gamma=algo.gamma, lmbda=0.9, value_network=actor.value)(b.clone()).reshape(-1)
        for b in (first, second)
    ])  # fmt: skip
    torch.testing.assert_close(storage._data["advantage"], expected["advantage"])
    torch.testing.assert_close(storage._data["value_target"], expected["value_target"])
    minibatches = list(
        storage.generate_batches(algo.num_mini_batch, algo.mini_batch_size, algo.num_epochs)
    )
    assert len(minibatches) == 8 and all(mb.numel() == 48 // 4 for mb in minibatches)
    storage.after_gradients()
    assert len(storage) == 0


def test_vanilla_buffer_uses_td1_returns():
    actor = OnPolicyActor(OBS, ACT)
    algo = A2C.create_factory()("cpu", actor)
    storage = VanillaOnPolicyBuffer.create_factory(size=16)("cpu", actor, algo)
    batch = _batch(actor)
    storage.insert(batch)
    storage.before_gradients()
    expected = TD1Estimator(gamma=algo.gamma, value_network=actor.value)(batch.clone()).reshape(-1)
    torch.testing.assert_close(storage._data["value_target"], expected["value_target"])
    (mb,) = storage.generate_batches(algo.num_mini_batch, algo.mini_batch_size, algo.num_epochs)
    assert mb.numel() == 32


def test_storage_bad_size():
    with pytest.raises(ValueError, match="size must be an int >= 1, got 0"):
        GAEBuffer.create_factory(size=0)("cpu", OnPolicyActor(OBS, ACT), None)
