"""IQLLoss against the formulas written out by hand."""

import math

import pytest
import torch

from tests.objectives.offpolicy_utils import (
    assert_grads_close,
    assert_no_grad,
    bandit_batch,
    bandit_reward,
    big_qvalue,
    grads,
    loss_terms,
    make_actor,
    make_batch,
    make_qvalue,
    make_value,
    mlp_by_hand,
    params_of,
    perturb,
    target_ids,
    train,
)
from torchrl_lite.modules import TanhNormal
from torchrl_lite.objectives import IQLLoss


def _iql(**kwargs):
    actor, net = make_actor(dist=TanhNormal)
    loss = IQLLoss(actor, make_qvalue(), make_value(), **kwargs)
    perturb(loss.target_qvalue_network)
    return loss, net


def _tanh_normal_log_prob(loc, scale, action):
    """``log p(a)`` of a tanh-squashed Normal: ``x = atanh(a)``, minus ``log(1 - a^2)``."""
    x = torch.atanh(action)
    log_normal = -0.5 * ((x - loc) / scale) ** 2 - scale.log() - 0.5 * math.log(2 * math.pi)
    return (log_normal - torch.log(1 - action**2)).sum(-1)


def test_iql_matches_hand_computation_values_and_gradients():
    loss, net = _iql(gamma=0.9, temperature=2.0, expectile=0.8)
    batch = make_batch(8)
    out = loss(batch.clone())
    assert loss_terms(out) == ["loss_actor", "loss_qvalue", "loss_value"]
    obs, act = batch["observation"], batch["action"]
    params, targets = loss.qvalue_network.params, loss.target_qvalue_network.params
    v_params = params_of(loss.value_network)
    q_target = torch.stack([mlp_by_hand(targets[i], obs, act) for i in range(2)]).min(0).values
    value = mlp_by_hand(v_params, obs)
    u = q_target - value
    loss_value = (torch.where(u < 0, 0.2, 0.8) * u**2).mean()
    weights = torch.exp(2.0 * u.detach()).clamp(max=100.0)
    loss_actor = -(weights * _tanh_normal_log_prob(*net(obs), act)).mean()
    with torch.no_grad():
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * mlp_by_hand(
            v_params, batch["next", "observation"]
        )
    pred = torch.stack([mlp_by_hand(params[i], obs, act) for i in range(2)])
    loss_qvalue = ((pred - y) ** 2).mean(-1).sum()
    torch.testing.assert_close(out["loss_value"], loss_value)
    torch.testing.assert_close(out["loss_actor"], loss_actor, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    actor_params = list(net.parameters())
    q_params, v = list(loss.qvalue_network.parameters()), list(loss.value_network.parameters())
    assert_grads_close(grads(out["loss_value"], v), grads(loss_value, v))
    assert_grads_close(
        grads(out["loss_actor"], actor_params), grads(loss_actor, actor_params), atol=1e-4
    )
    assert_grads_close(grads(out["loss_qvalue"], q_params), grads(loss_qvalue, q_params))
    assert_no_grad(out["loss_value"], actor_params + q_params)
    assert_no_grad(out["loss_actor"], q_params + v)
    assert_no_grad(out["loss_qvalue"], actor_params + v)


def test_iql_weights_are_clipped_and_parameters_exclude_targets():
    loss, _ = _iql(temperature=1000.0)
    out = loss(make_batch())
    assert torch.isfinite(out["loss_actor"])
    assert {id(p) for p in loss.parameters()}.isdisjoint(target_ids(loss))


def test_iql_set_keys_missing_keys_and_bad_arguments():
    loss, _ = _iql()
    batch = make_batch()
    reference = loss(batch.clone())
    renamed = batch.clone()
    renamed["next"].rename_key_("terminated", "term")
    loss.set_keys(terminated="term")
    torch.testing.assert_close(loss(renamed)["loss_qvalue"], reference["loss_qvalue"])
    del renamed["next", "observation"]
    with pytest.raises(KeyError, match=r"IQLLoss.*\('next', 'observation'\)"):
        loss(renamed)
    actor, _ = make_actor()
    with pytest.raises(ValueError, match="expectile"):
        IQLLoss(actor, make_qvalue(), make_value(), expectile=1.0)
    with pytest.raises(TypeError, match="value_network"):
        IQLLoss(actor, make_qvalue(), torch.nn.Linear(3, 1))


def test_iql_updates_decrease_the_loss_offline():
    actor, net = make_actor(dist=TanhNormal)
    with torch.no_grad():
        net[0].bias[:2] = -1.0  # start far from the best action (0.5, 0.5)
    loss = IQLLoss(actor, big_qvalue(), make_value())
    batch = bandit_batch()
    assert bandit_reward(torch.tanh(net(batch["observation"])[0])) < -2.0
    first, last = train(loss, batch, steps=150)
    assert last["loss_qvalue"] < 0.2 * first["loss_qvalue"]
    assert (last["loss_qvalue"] + last["loss_value"]) < 0.5 * (
        first["loss_qvalue"] + first["loss_value"]
    )
    assert (
        bandit_reward(torch.tanh(net(batch["observation"])[0])) > -0.5
    )  # weighted towards good actions
