"""A2C loss against the formula of https://arxiv.org/abs/1602.01783 computed by hand."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Normal
from torch.nn import functional as F

from tests.objectives.loss_nets import (
    assert_grads_close,
    categorical_actor,
    critic,
    gaussian_actor,
    grads,
    transitions,
)
from torchrl_lite.objectives import A2CLoss
from torchrl_lite.objectives.value import GAE

N = 12


def _batch(actor, n=N):
    td = transitions((n,))
    with torch.no_grad():
        actor(td)
    td["advantage"] = torch.randn(n, 1)
    td["value_target"] = torch.randn(n, 1)
    return td


def _total(out):
    return sum(v for k, v in out.items() if k.startswith("loss"))


def test_a2c_matches_formula_values_and_gradients():
    actor, net = gaussian_actor()
    value, value_net = critic()
    td = _batch(actor)
    loss = A2CLoss(actor, value, entropy_coef=0.02, critic_coef=0.5, loss_critic_type="l2")
    out = loss(td.clone())
    loc, scale = net(td["observation"])
    dist = Normal(loc, scale)
    log_prob = dist.log_prob(td["action"]).sum(-1)
    entropy = dist.entropy().sum(-1).mean()
    expected = {
        "loss_objective": -(log_prob * td["advantage"].squeeze(-1)).mean(),
        "loss_entropy": -0.02 * entropy,
        "loss_critic": 0.5 * F.mse_loss(value_net(td["observation"]), td["value_target"]),
    }
    for key, value_ in expected.items():
        torch.testing.assert_close(out[key], value_.detach(), msg=key)
    torch.testing.assert_close(out["entropy"], entropy.detach())
    params = list(loss.parameters())
    assert_grads_close(grads(_total(out), params), grads(_total(expected), params))


def test_a2c_gradients_reach_only_their_networks():
    actor, _ = categorical_actor()
    value, _ = critic()
    out = A2CLoss(actor, value)(_batch(actor))
    assert set(out.keys()) == {"loss_objective", "loss_critic", "loss_entropy", "entropy"}
    assert all(g is None for g in grads(out["loss_critic"], actor.parameters()))
    assert all(g is None for g in grads(out["loss_objective"], value.parameters()))


def test_a2c_does_not_need_sample_log_prob_and_computes_advantage():
    actor, _ = gaussian_actor()
    value, _ = critic()
    td = transitions((2, 6), done_every=4)
    with torch.no_grad():
        actor(td)
    td = td.exclude("sample_log_prob")
    loss = A2CLoss(actor, value, gamma=0.9)
    work = td.clone()
    loss(work)
    reference = GAE(gamma=0.9, lmbda=0.95, value_network=value)(td.clone())
    torch.testing.assert_close(work["advantage"], reference["advantage"])


def test_a2c_set_keys_and_missing_key():
    actor, _ = gaussian_actor()
    value, _ = critic()
    td = _batch(actor).rename_key_("action", "act")
    loss = A2CLoss(actor, value)
    with pytest.raises(KeyError, match=r"A2CLoss.*'action'.*set_keys\(action="):
        loss(td.clone())
    assert loss.set_keys(action="act")(td.clone())["loss_objective"].shape == ()


def test_a2c_few_hundred_updates_decrease_loss():
    actor, _ = categorical_actor()
    value, _ = critic()
    td = _batch(actor, n=64)
    loss = A2CLoss(actor, value, entropy_coef=0.0)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-2)
    totals = []
    for _ in range(200):
        total = _total(loss(td))
        total.backward()
        optim.step()
        optim.zero_grad()
        totals.append(total.item())
    assert totals[-1] < totals[0] - 0.1
