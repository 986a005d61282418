"""DDPGLoss against the formulas written out by hand."""

import pytest
import torch
from torch import nn

from tests.objectives.offpolicy_utils import (
    assert_grads_close,
    assert_no_grad,
    bandit_batch,
    bandit_reward,
    big_qvalue,
    grads,
    loss_terms,
    make_batch,
    make_qvalue,
    mlp_by_hand,
    params_of,
    perturb,
    target_ids,
    train,
)
from torchrl_lite.modules import Actor
from torchrl_lite.objectives import DDPGLoss, HardUpdate, ValueEstimators


def _ddpg(**kwargs):
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    loss = DDPGLoss(Actor(net), make_qvalue(), **kwargs)
    perturb(loss.target_value_network)
    return loss, net


def test_ddpg_matches_hand_computation_values_and_gradients():
    loss, net = _ddpg(gamma=0.9)
    batch = make_batch(8)
    out = loss(batch.clone())
    obs, next_obs = batch["observation"], batch["next", "observation"]
    q = params_of(loss.value_network)
    q_target = params_of(loss.target_value_network, buffers=True)
    loss_actor = -mlp_by_hand(q.detach(), obs, net(obs)).mean()
    with torch.no_grad():  # delay_actor=False: the online actor picks the next action
        next_value = mlp_by_hand(q_target, next_obs, net(next_obs))
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * next_value
    pred = mlp_by_hand(q, obs, batch["action"])
    loss_value = ((pred - y) ** 2).mean()
    torch.testing.assert_close(out["loss_actor"], loss_actor)
    torch.testing.assert_close(out["loss_value"], loss_value)
    torch.testing.assert_close(out["td_error"], (pred - y).abs().mean().detach())
    actor_params, q_params = list(net.parameters()), list(loss.value_network.parameters())
    assert_grads_close(grads(out["loss_actor"], actor_params), grads(loss_actor, actor_params))
    assert_grads_close(grads(out["loss_value"], q_params), grads(loss_value, q_params))
    assert_no_grad(out["loss_actor"], q_params)
    assert_no_grad(out["loss_value"], actor_params)


def test_ddpg_value_loss_weighted_by_prioritized_importance_weights():
    loss, net = _ddpg(gamma=0.9)
    batch = make_batch(8)
    weight = torch.linspace(0.1, 1.0, 8)
    out = loss(batch.clone().set("_weight", weight))
    obs, next_obs = batch["observation"], batch["next", "observation"]
    q = params_of(loss.value_network)
    q_target = params_of(loss.target_value_network, buffers=True)
    with torch.no_grad():
        next_value = mlp_by_hand(q_target, next_obs, net(next_obs))
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * next_value
    pred = mlp_by_hand(q, obs, batch["action"])
    loss_value = (weight * (pred - y) ** 2).mean()  # importance-weighted mean
    torch.testing.assert_close(out["loss_value"], loss_value)
    q_params = list(loss.value_network.parameters())
    assert_grads_close(grads(out["loss_value"], q_params), grads(loss_value, q_params))
    unweighted = loss(batch.clone())["loss_value"]
    assert not torch.allclose(unweighted, out["loss_value"])
    # the key is configurable; the actor loss stays unweighted
    loss.set_keys(priority_weight="w")
    out2 = loss(batch.clone().set("w", weight))
    torch.testing.assert_close(out2["loss_value"], loss_value)
    torch.testing.assert_close(out2["loss_actor"], out["loss_actor"])


def test_ddpg_keys_targets_and_estimator():
    loss, _ = _ddpg(delay_actor=True)
    assert hasattr(loss, "target_actor_network")
    batch = make_batch()
    out = loss(batch)
    assert loss_terms(out) == ["loss_actor", "loss_value"]
    assert batch["td_error"].shape == (6,)
    assert {id(p) for p in loss.parameters()}.isdisjoint(target_ids(loss))
    HardUpdate(loss, value_network_update_interval=1).step()
    torch.testing.assert_close(
        loss.target_value_network.module[0].weight, loss.value_network.module[0].weight
    )
    loss.make_value_estimator(ValueEstimators.TD0, gamma=1.0)
    all_terminated = batch.clone()
    all_terminated["next", "terminated"].fill_(True)
    loss(all_terminated)
    target = all_terminated["next", "reward"].squeeze(-1)
    pred = loss._qvalues(all_terminated).detach()
    torch.testing.assert_close(all_terminated["td_error"], (pred - target).abs())


def test_ddpg_set_keys_and_missing_keys():
    loss, _ = _ddpg()
    batch = make_batch()
    reference = loss(batch.clone())
    renamed = batch.clone()
    renamed["next"].rename_key_("done", "d")
    renamed["next"].rename_key_("terminated", "t")
    loss.set_keys(done="d", terminated="t", priority="p")
    torch.testing.assert_close(loss(renamed)["loss_value"], reference["loss_value"])
    assert "p" in renamed.keys()
    del renamed["observation"]
    with pytest.raises(KeyError, match="DDPGLoss.*'observation'"):
        loss(renamed)


def test_ddpg_bad_value_network_output_raises():
    from torchrl_lite.modules import MLP, ValueOperator

    value = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"], out_keys=["q"])
    loss = DDPGLoss(Actor(nn.Linear(3, 2)), value)
    with pytest.raises(ValueError, match=r"set_keys\(state_action_value="):
        loss(make_batch())
    loss.set_keys(state_action_value="q")
    loss(make_batch())
    with pytest.raises(ValueError, match="loss function"):
        DDPGLoss(Actor(nn.Linear(3, 2)), value, loss_function="huber")


def test_ddpg_updates_decrease_the_loss_on_a_bandit():
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    nn.init.constant_(net[0].bias, -1.0)  # start far from the best action (0.5, 0.5)
    loss = DDPGLoss(Actor(net), big_qvalue())
    batch = bandit_batch()
    first_reward = bandit_reward(net(batch["observation"]))
    assert first_reward < -2.0
    first, last = train(loss, batch, steps=200)
    assert last["loss_value"] < 0.1 * first["loss_value"]
    assert bandit_reward(net(batch["observation"])) > -0.2


def test_ddpg_on_a_prioritized_buffer_sample_uses_its_weights():
    from torchrl_lite.data.replay_buffers import (
        LazyTensorStorage,
        TensorDictPrioritizedReplayBuffer,
    )

    torch.manual_seed(0)
    loss, _ = _ddpg(gamma=0.9)
    buffer = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(8))
    buffer.extend(make_batch(8))
    buffer.update_priority(torch.arange(8), torch.arange(1.0, 9.0))  # unequal priorities
    sample = buffer.sample(16)
    weight = sample["_weight"]
    assert not torch.allclose(weight, weight[:1].expand_as(weight))  # the weights differ
    batch = sample.clone()
    out = loss(batch)
    td_error = batch["td_error"]  # [16] per-sample |Q - y|, written by the loss
    torch.testing.assert_close(out["loss_value"], (weight * td_error.pow(2)).mean())  # l2
    unweighted = loss(sample.clone().exclude("_weight"))["loss_value"]
    torch.testing.assert_close(unweighted, td_error.pow(2).mean())
    assert not torch.allclose(out["loss_value"], unweighted)
