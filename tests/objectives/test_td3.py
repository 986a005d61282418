"""TD3Loss and TD3BCLoss against the formulas written out by hand."""

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
from torchrl_lite.data.tensor_specs import Bounded
from torchrl_lite.modules import Actor
from torchrl_lite.objectives import TD3BCLoss, TD3Loss

LOW, HIGH = -0.8, 0.8


def _actor(spec=True):
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    return Actor(net, spec=Bounded(LOW, HIGH, shape=(2,)) if spec else None), net


def _td3(cls=TD3Loss, **kwargs):
    actor, net = _actor()
    kwargs.setdefault("loss_function", "l2")
    loss = cls(actor, make_qvalue(), **kwargs)
    perturb(loss.target_actor_network)
    perturb(loss.target_qvalue_network)
    return loss, net


def _by_hand(loss, net, batch, gamma, policy_noise, noise_clip, seed):
    """TD3's actor and critic losses written out (l2 distance)."""
    obs, act = batch["observation"], batch["action"]
    next_obs = batch["next", "observation"]
    not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
    params, targets = loss.qvalue_network.params, loss.target_qvalue_network.params
    q_first = mlp_by_hand(params[0].detach(), obs, net(obs))
    with torch.no_grad():
        t = params_of(loss.target_actor_network, buffers=True)
        mu_next = torch.tanh(next_obs @ t["module", "0", "weight"].T + t["module", "0", "bias"])
        torch.manual_seed(seed)
        noise = (torch.randn(mu_next.shape) * policy_noise).clamp(-noise_clip, noise_clip)
        next_action = (mu_next + noise).clamp(LOW, HIGH)
        next_q = torch.stack([mlp_by_hand(targets[i], next_obs, next_action) for i in range(2)])
        y = batch["next", "reward"].squeeze(-1) + gamma * not_term * next_q.min(0).values
    pred = torch.stack([mlp_by_hand(params[i], obs, act) for i in range(2)])
    loss_qvalue = ((pred - y) ** 2).mean(-1).sum()
    return q_first, loss_qvalue, next_action


def test_td3_matches_hand_computation_values_and_gradients():
    loss, net = _td3(policy_noise=0.4, noise_clip=0.3, gamma=0.9)
    batch = make_batch(8)
    torch.manual_seed(3)
    out = loss(batch.clone())
    q_first, loss_qvalue, next_action = _by_hand(loss, net, batch, 0.9, 0.4, 0.3, seed=3)
    assert (next_action.abs() == HIGH).any()  # the bounds clip some target actions
    torch.testing.assert_close(out["loss_actor"], -q_first.mean())
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_grads_close(grads(out["loss_actor"], actor_params), grads(-q_first.mean(), actor_params))
    assert_grads_close(grads(out["loss_qvalue"], q_params), grads(loss_qvalue, q_params))


def test_td3_keys_parameters_and_gradient_isolation():
    loss, net = _td3()
    out = loss(make_batch())
    assert loss_terms(out) == ["loss_actor", "loss_qvalue"]
    assert {"td_error", "pred_value", "target_value"} <= set(out.keys())
    assert {id(p) for p in loss.parameters()}.isdisjoint(target_ids(loss))
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_no_grad(out["loss_actor"], q_params)
    assert_no_grad(out["loss_qvalue"], actor_params)


def test_td3_bounds_from_argument_or_spec_else_error():
    actor, _ = _actor(spec=False)
    with pytest.raises(ValueError, match="action_spec=Bounded"):
        TD3Loss(actor, make_qvalue())
    loss = TD3Loss(actor, make_qvalue(), bounds=(-0.5, 0.5))
    assert loss.action_low.item() == -0.5
    loss = TD3Loss(actor, make_qvalue(), action_spec=Bounded(-2.0, 2.0, shape=(2,)))
    assert loss.action_high.tolist() == [2.0, 2.0]


def test_td3_set_keys_and_missing_keys():
    loss, _ = _td3()
    batch = make_batch()
    torch.manual_seed(0)
    reference = loss(batch.clone())
    renamed = batch.clone()
    renamed["next"].rename_key_("reward", "r")
    loss.set_keys(reward="r")
    torch.manual_seed(0)
    torch.testing.assert_close(loss(renamed)["loss_qvalue"], reference["loss_qvalue"])
    del renamed["next", "r"]
    with pytest.raises(KeyError, match=r"TD3Loss.*set_keys\(reward="):
        loss(renamed)


def test_td3_bad_arguments():
    actor, _ = _actor()
    with pytest.raises(ValueError, match="policy_noise"):
        TD3Loss(actor, make_qvalue(), policy_noise=-1.0)
    with pytest.raises(ValueError, match="num_qvalue_nets"):
        TD3Loss(actor, make_qvalue(), num_qvalue_nets=0)
    with pytest.raises(TypeError, match="qvalue_network"):
        TD3Loss(actor, nn.Linear(5, 1))


def test_td3_updates_decrease_the_loss_on_a_bandit():
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    nn.init.constant_(net[0].bias, -1.0)  # start far from the best action (0.5, 0.5)
    loss = TD3Loss(
        Actor(net, spec=Bounded(-1.0, 1.0, shape=(2,))), big_qvalue(), loss_function="l2"
    )
    batch = bandit_batch()
    first_reward = bandit_reward(net(batch["observation"]))
    assert first_reward < -2.0
    first, last = train(loss, batch, steps=200)
    assert last["loss_qvalue"] < 0.1 * first["loss_qvalue"]
    assert bandit_reward(net(batch["observation"])) > -0.2


# -- TD3 + BC -------------------------------------------------------------------------
def test_td3_bc_actor_loss_matches_hand_computation():
    loss, net = _td3(TD3BCLoss, alpha=2.5, gamma=0.9)
    batch = make_batch(8)
    torch.manual_seed(1)
    out = loss(batch.clone())
    q_first, loss_qvalue, _ = _by_hand(loss, net, batch, 0.9, 0.2, 0.5, seed=1)
    pi = net(batch["observation"])
    lmbda = 2.5 / q_first.abs().mean().detach()
    bc = ((pi - batch["action"]) ** 2).mean()
    expected = -lmbda * q_first.mean() + bc
    torch.testing.assert_close(out["loss_actor"], expected)
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    torch.testing.assert_close(out["bc_loss"], bc.detach())
    torch.testing.assert_close(out["lmbda"], lmbda)
    actor_params = list(net.parameters())
    assert_grads_close(grads(out["loss_actor"], actor_params), grads(expected, actor_params))
    assert_no_grad(out["loss_actor"], list(loss.qvalue_network.parameters()))


def test_td3_bc_alpha_zero_is_behaviour_cloning():
    loss, net = _td3(TD3BCLoss, alpha=0.0)
    batch = make_batch(8)
    out = loss(batch)
    torch.testing.assert_close(
        out["loss_actor"], ((net(batch["observation"]) - batch["action"]) ** 2).mean()
    )
    with pytest.raises(ValueError, match="alpha"):
        TD3BCLoss(_actor()[0], make_qvalue(), alpha=-1.0)


def test_td3_done_without_trailing_dim_raises():
    loss, _ = _td3()
    batch = make_batch()
    batch["next"] = batch["next"].exclude("done").set("done", torch.zeros(6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"TD3Loss.*done"):
        loss(batch)
