"""OffPolicyActor, SAC/TD3/DDPG/DQN and the replay storages against the library components."""

import copy

import gymnasium
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.agent.actors import OffPolicyActor
from torchrl_lite.agent.algos import DDPG, DDQN, DQN, SAC, TD3
from torchrl_lite.agent.storages import NStepReplayBuffer, PERBuffer, ReplayBuffer
from torchrl_lite.envs import GymEnv
from torchrl_lite.objectives import SACLoss
from torchrl_lite.recipes import sac as sac_recipe

OBS = gymnasium.spaces.Box(-1, 1, (3,))
BOX = gymnasium.spaces.Box(-2, 2, (1,))
DISCRETE = gymnasium.spaces.Discrete(2)


def _transitions(n, obs_dim=3, discrete=False, seed=0):
    """``n`` random flat transitions of the shape the collector writes."""
    g = torch.Generator().manual_seed(seed)
    if discrete:
        action = torch.nn.functional.one_hot(
            torch.randint(0, 2, (n,), generator=g), 2
        )  # long, as the env
    else:
        action = torch.rand(n, 1, generator=g) * 4 - 2
    zeros = torch.zeros(n, 1, dtype=torch.bool)
    return TensorDict({
        "observation": torch.randn(n, obs_dim, generator=g), "action": action,
        "next": {"observation": torch.randn(n, obs_dim, generator=g),
                 "reward": torch.randn(n, 1, generator=g), "done": zeros.clone(),
                 "terminated": zeros.clone(), "truncated": zeros.clone()},
    }, batch_size=[n])  # fmt: skip


def test_off_policy_actor_networks_are_the_sac_recipes():
    torch.manual_seed(0)
    actor = OffPolicyActor.create_factory(OBS, BOX, algorithm_name="SAC")("cpu")
    torch.manual_seed(0)
    policy, q = sac_recipe.make_actor_qvalue(sac_recipe.Config(), GymEnv("Pendulum-v1"))
    ours = list(actor.policy.parameters()) + list(actor.q.parameters())
    theirs = list(policy.parameters()) + list(q.parameters())
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


@pytest.mark.parametrize(
    "name, space", [("SAC", BOX), ("TD3", BOX), ("DDPG", BOX), ("DQN", DISCRETE)]
)
def test_off_policy_actor_get_action(name, space):
    actor = OffPolicyActor(OBS, space, algorithm_name=name)
    obs = torch.randn(4, 3)
    with torch.no_grad():
        action, clipped, logp, rhs, entropy = actor.get_action(
            obs, torch.zeros(4, 1), None, deterministic=True
        )
        again = actor.get_action(obs, None, None, deterministic=True)[0]
    assert clipped.shape == (4, 1) and logp.shape == entropy.shape == (4, 1)
    assert torch.equal(action, again)
    assert actor.recurrent_hidden_state_size == 1


def test_off_policy_actor_bad_algorithm_and_space():
    with pytest.raises(ValueError, match="unknown algorithm_name 'SACC'. Did you mean 'SAC'"):
        OffPolicyActor(OBS, BOX, algorithm_name="SACC")
    with pytest.raises(TypeError, match="DQN needs a Discrete action space"):
        OffPolicyActor(OBS, BOX, algorithm_name="DQN")


def test_off_policy_actor_restart_model(tmp_path):
    actor = OffPolicyActor(OBS, BOX, algorithm_name="TD3")
    torch.save(actor.state_dict(), tmp_path / "a.pt")
    loaded = OffPolicyActor.create_factory(
        OBS, BOX, algorithm_name="TD3", restart_model=tmp_path / "a.pt"
    )("cpu")
    obs = torch.randn(2, 3)
    torch.testing.assert_close(
        actor.get_action(obs, None, None)[0], loaded.get_action(obs, None, None)[0]
    )
    with pytest.raises(ValueError, match="does not fit this actor"):
        OffPolicyActor.create_factory(
            OBS, BOX, algorithm_name="SAC", restart_model=tmp_path / "a.pt"
        )


def test_sac_compute_gradients_equal_sac_loss():
    actor = OffPolicyActor(OBS, BOX, algorithm_name="SAC")
    algo = SAC.create_factory(lr_pi=1e-3, lr_q=2e-3, lr_alpha=3e-3)("cpu", actor)
    reference_actor = copy.deepcopy(actor)
    reference = SACLoss(reference_actor.policy, reference_actor.q, num_qvalue_nets=2,
                        gamma=algo.gamma, action_spec=actor.action_spec)  # fmt: skip
    reference.load_state_dict(algo.loss_module.state_dict())  # the same Q copies and targets
    batch = _transitions(32)
    torch.manual_seed(3)
    grads, info = algo.compute_gradients(batch.clone())
    torch.manual_seed(3)
    out = reference(batch.clone())
    sum(v for k, v in out.items() if k.startswith("loss_")).backward()
    expected = [p.grad for p in reference.parameters()]
    for g, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, e)
    lrs = {g["name"]: g["lr"] for g in algo.optimizers["optimizer"].param_groups}
    assert lrs == {"pi": 1e-3, "q": 2e-3, "alpha": 3e-3}
    assert algo.num_mini_batch == algo.num_updates and algo.num_epochs == 1


def test_sac_soft_target_update_uses_polyak():
    algo = SAC.create_factory(polyak=0.9)("cpu", OffPolicyActor(OBS, BOX, algorithm_name="SAC"))
    online = dict(algo.loss_module.named_parameters())["qvalue_network.params.module.0.weight"]
    target = dict(algo.loss_module.named_buffers())["target_qvalue_network.params.module.0.weight"]
    before = target.clone()
    algo.compute_gradients(_transitions(16))
    algo.apply_gradients()
    torch.testing.assert_close(target, 0.9 * before + 0.1 * online.detach())


def test_td3_actor_moves_every_policy_delay_updates():
    algo = TD3.create_factory(policy_delay=2)("cpu", OffPolicyActor(OBS, BOX, algorithm_name="TD3"))
    actor_weight = next(algo.loss_module.actor_network.parameters())
    q_weight = dict(algo.loss_module.named_parameters())["qvalue_network.params.module.0.weight"]
    history = []
    for _ in range(3):
        a, q = actor_weight.clone(), q_weight.clone()
        algo.compute_gradients(_transitions(16))
        algo.apply_gradients()
        history.append((not torch.equal(a, actor_weight), not torch.equal(q, q_weight)))
    assert history == [(True, True), (False, True), (True, True)]


def test_ddpg_and_exploration_policies():
    actor = OffPolicyActor(OBS, BOX, algorithm_name="DDPG")
    algo = DDPG.create_factory(exploration_noise=0.5)("cpu", actor)
    td = TensorDict(observation=torch.zeros(64, 3), batch_size=[64])
    from torchrl_lite.envs import ExplorationType, set_exploration_type

    with set_exploration_type(ExplorationType.RANDOM):
        noisy = algo.acting_policy(td.clone())["action"]
    assert noisy.std() > 0.3 and (noisy.abs() <= 2).all()
    grads, info = algo.compute_gradients(_transitions(16))
    assert {"loss_actor", "loss_value"} <= set(info)


def test_dqn_epsilon_schedule_and_weights():
    actor = OffPolicyActor(OBS, DISCRETE)
    algo = DQN.create_factory(initial_epsilon=1.0, final_epsilon=0.1, epsilon_annealing_steps=4,
                              target_update_interval=2)("cpu", actor)  # fmt: skip
    assert not algo.loss_module.double_dqn and DDQN.double_dqn
    eps = []
    for _ in range(5):
        algo.compute_gradients(_transitions(8, discrete=True))
        algo.apply_gradients()
        eps.append(round(algo.epsilon, 4))
    assert eps == [0.775, 0.55, 0.325, 0.1, 0.1]
    worker = DQN.create_factory()("cpu", OffPolicyActor(OBS, DISCRETE))
    worker.set_weights(algo.get_weights())
    assert worker.epsilon == pytest.approx(0.1)
    decaying = DQN.create_factory(epsilon_decay=0.5, final_epsilon=0.2)(
        "cpu", OffPolicyActor(OBS, DISCRETE)
    )
    for _ in range(3):
        decaying.compute_gradients(_transitions(8, discrete=True))
        decaying.apply_gradients()
    assert decaying.epsilon == pytest.approx(0.2)


def test_off_policy_bad_hyperparameters():
    with pytest.raises(
        TypeError,
        match=r"SAC.create_factory: unknown hyperparameter\(s\) \['lr_policy'\]. Valid: lr, lr_pi",
    ):
        SAC.create_factory(lr_policy=1e-3)
    with pytest.raises(ValueError, match="polyak must lie in \\[0, 1\\)"):
        SAC.create_factory(polyak=1.5)("cpu", OffPolicyActor(OBS, BOX, algorithm_name="SAC"))
    with pytest.raises(TypeError, match="TD3 needs an actor with a Q-network"):
        TD3.create_factory()("cpu", OffPolicyActor(OBS, DISCRETE))


def test_replay_buffer_waits_for_start_steps_then_samples():
    actor = OffPolicyActor(OBS, BOX, algorithm_name="SAC")
    algo = SAC.create_factory(start_steps=50, num_updates=3, mini_batch_size=8, update_every=5)(
        "cpu", actor
    )
    storage = ReplayBuffer.create_factory(size=100)("cpu", actor, algo)
    assert storage.steps_per_collection == 5
    storage.insert(_transitions(40).reshape(4, 10))
    assert list(storage.generate_batches(algo.num_mini_batch, algo.mini_batch_size, 1)) == []
    storage.insert(_transitions(20, seed=1).reshape(2, 10))
    batches = list(storage.generate_batches(algo.num_mini_batch, algo.mini_batch_size, 1))
    assert len(batches) == 3 and all(b.numel() == 8 for b in batches)
    copy_ = ReplayBuffer.create_factory(size=100)("cpu", actor, algo)
    copy_.load_state_dict(storage.state_dict())
    assert len(copy_) == 60


def test_nstep_returns_equal_a_plain_loop():
    actor = OffPolicyActor(OBS, BOX, algorithm_name="SAC")
    algo = SAC.create_factory(gamma=0.9)("cpu", actor)
    storage = NStepReplayBuffer.create_factory(size=100, n_step=3)("cpu", actor, algo)
    T = 10
    batch = _transitions(T).unsqueeze(0)  # [1, T]
    batch["next", "reward"] = torch.arange(1.0, T + 1).reshape(1, T, 1)
    batch["next", "observation"] = torch.arange(float(T)).reshape(1, T, 1).expand(1, T, 3).clone()
    batch["next", "done"][0, [4, 7]] = True  # step 4 terminates, step 7 hits a time limit
    batch["next", "terminated"][0, 4] = True
    batch["next", "truncated"][0, 7] = True
    out = storage._transitions(batch)
    rewards = batch["next", "reward"][0, :, 0].tolist()
    done, terminated = batch["next", "done"][0, :, 0], batch["next", "terminated"][0, :, 0]
    expected = []  # (n-step return, steps k, index of the window's last step)
    for t in range(T):  # every step starts a window, cut by an episode end or the batch end
        ret, k = 0.0, 0
        while k < 3 and t + k < T:
            ret += 0.9**k * rewards[t + k]
            k += 1
            if done[t + k - 1]:
                break
        expected.append((ret, k, t + k - 1))
    assert out.numel() == T
    torch.testing.assert_close(out["next", "reward"][:, 0], torch.tensor([e[0] for e in expected]))
    assert out["steps_to_next_obs"][:, 0].tolist() == [e[1] for e in expected]
    assert out["next", "observation"][:, 0].tolist() == [float(e[2]) for e in expected]
    assert out["next", "terminated"][:, 0].tolist() == [bool(terminated[e[2]]) for e in expected]
    # the loss's TD(0) target: r_t^(k) + 0.9^k V(s_{t+k}), no bootstrap after the termination
    next_value = torch.full((T, 1), 10.0)
    target = algo.loss_module.value_estimator.value_estimate(out, next_value=next_value)
    plain = [e[0] + (0.0 if terminated[e[2]] else 0.9 ** e[1] * 10.0) for e in expected]
    torch.testing.assert_close(target[:, 0], torch.tensor(plain))


def test_nstep_buffer_loads_windows_saved_without_their_length():
    # buffers saved before "steps_to_next_obs" held only full windows and terminated ones
    actor = OffPolicyActor(OBS, BOX, algorithm_name="SAC")
    algo = SAC.create_factory(gamma=0.9)("cpu", actor)
    old = ReplayBuffer.create_factory(size=100)("cpu", actor, algo)
    old.insert(_transitions(20))
    storage = NStepReplayBuffer.create_factory(size=100, n_step=3)("cpu", actor, algo)
    storage.load_state_dict(old.state_dict())
    storage.insert(_transitions(10, seed=1))
    steps = storage.buffer.sample(30)["steps_to_next_obs"]
    assert (
        len(storage) == 30 and steps.shape == (30, 1) and set(steps.flatten().tolist()) <= {1, 2, 3}
    )
    assert (storage.buffer.storage[:20]["steps_to_next_obs"] == 3).all()


def test_per_buffer_updates_priorities_from_td_error():
    actor = OffPolicyActor(OBS, DISCRETE)
    algo = DQN.create_factory(start_steps=0, mini_batch_size=16, num_updates=1)("cpu", actor)
    storage = PERBuffer.create_factory(size=64, alpha=1.0, beta=0.5)("cpu", actor, algo)
    storage.insert(_transitions(64, discrete=True))
    sampler = storage.buffer.sampler
    before = sampler.priorities().clone()
    for mb in storage.generate_batches(1, 16, 1):
        assert "_weight" in mb.keys()
        algo.compute_gradients(mb)
        index, td_error = mb["index"], mb["td_error"]
    after = sampler.priorities()
    torch.testing.assert_close(after[index], (td_error + storage.epsilon) ** 1.0, check_dtype=False)
    untouched = torch.ones(64, dtype=torch.bool)
    untouched[index] = False
    assert torch.equal(after[untouched], before[untouched])
