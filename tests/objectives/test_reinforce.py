"""REINFORCE (https://doi.org/10.1007/BF00992696) against returns computed with a loop."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tests.objectives.loss_nets import (
    assert_grads_close,
    categorical_actor,
    critic,
    grads,
    transitions,
)
from torchrl_lite.objectives import ReinforceLoss, SoftUpdate


def _returns(reward, done, terminated, next_value, gamma):
    """Discounted return to the episode end with a loop; bootstraps at truncations and
    at the last step. All ``[T, 1]``."""
    T = reward.shape[0]
    out = torch.zeros_like(reward)
    running = next_value[-1] * (~terminated[-1])
    for t in reversed(range(T)):
        if t < T - 1 and not done[t]:
            boot = running
        else:
            boot = next_value[t] * (~terminated[t])
        running = reward[t] + gamma * boot
        out[t] = running
    return out


def _batch(actor, T=10):
    td = transitions((T,), done_every=4)
    with torch.no_grad():
        actor(td)
    return td


def test_reinforce_without_baseline_uses_returns():
    actor, linear = categorical_actor()
    td = _batch(actor)
    loss = ReinforceLoss(actor, gamma=0.9)
    work = td.clone()
    out = loss(work)
    nxt = td["next"]
    ret = _returns(nxt["reward"], nxt["done"], nxt["terminated"], torch.zeros(10, 1), 0.9)
    torch.testing.assert_close(work["advantage"], ret)
    dist = torch.distributions.OneHotCategorical(logits=linear(td["observation"]))
    expected = -(dist.log_prob(td["action"]) * ret.squeeze(-1)).mean()
    torch.testing.assert_close(out["loss_actor"], expected.detach())
    params = list(loss.parameters())
    assert_grads_close(grads(out["loss_actor"], params), grads(expected, params))
    assert set(out.keys()) == {"loss_actor"}


def test_reinforce_with_value_baseline():
    actor, linear = categorical_actor()
    value, value_net = critic()
    td = _batch(actor)
    loss = ReinforceLoss(actor, value, gamma=0.9, loss_critic_type="l2")
    work = td.clone()
    out = loss(work)
    nxt = td["next"]
    with torch.no_grad():
        v, next_v = value_net(td["observation"]), value_net(nxt["observation"])
    ret = _returns(nxt["reward"], nxt["done"], nxt["terminated"], next_v, 0.9)
    torch.testing.assert_close(work["advantage"], ret - v)
    dist = torch.distributions.OneHotCategorical(logits=linear(td["observation"]))
    expected = {
        "loss_actor": -(dist.log_prob(td["action"]) * (ret - v).squeeze(-1)).mean(),
        "loss_value": F.mse_loss(value_net(td["observation"]), ret),
    }
    for key, val in expected.items():
        torch.testing.assert_close(out[key], val.detach(), msg=key)
    params = list(loss.parameters())
    total = out["loss_actor"] + out["loss_value"]
    assert_grads_close(grads(total, params), grads(sum(expected.values()), params))
    assert all(g is None for g in grads(out["loss_value"], actor.parameters()))
    assert all(g is None for g in grads(out["loss_actor"], value.parameters()))


def test_reinforce_delay_value_uses_target_critic():
    actor, _ = categorical_actor()
    value, _ = critic()
    loss = ReinforceLoss(actor, value, delay_value=True)
    assert loss.value_estimator.value_network is loss.target_critic_network
    assert not any(n.startswith("target") for n, _ in loss.named_parameters())
    SoftUpdate(loss, tau=0.5).step()
    with pytest.raises(ValueError, match="needs a critic"):
        ReinforceLoss(actor, delay_value=True)


def test_reinforce_missing_reward_names_set_keys():
    actor, _ = categorical_actor()
    td = _batch(actor)
    td["next"] = td["next"].rename_key_("reward", "rew")
    with pytest.raises(KeyError, match=r"ReinforceLoss.*'reward'.*set_keys\(reward="):
        ReinforceLoss(actor)(td)
    out = ReinforceLoss(actor).set_keys(reward="rew")(td)
    assert out["loss_actor"].shape == ()


def test_reinforce_few_hundred_updates_decrease_loss():
    actor, _ = categorical_actor()
    value, _ = critic()
    td = _batch(actor, T=32)
    loss = ReinforceLoss(actor, value)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-2)
    totals = []
    for _ in range(200):
        out = loss(td)
        total = out["loss_actor"] + out["loss_value"]
        total.backward()
        optim.step()
        optim.zero_grad()
        totals.append(total.item())
    assert totals[-1] < totals[0]
