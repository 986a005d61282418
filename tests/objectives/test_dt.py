"""DTLoss and OnlineDTLoss against the formulas written out by hand."""

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from tests.objectives.offpolicy_utils import (
    assert_grads_close,
    assert_no_grad,
    grads,
    loss_terms,
    total,
)
from torchrl_lite.modules import Actor, IndependentNormal, ProbabilisticActor
from torchrl_lite.objectives import DTLoss, OnlineDTLoss


def _sequences(b=4, t=5, obs=3, act=2):
    """A batch of sequences ``[b, t]`` (observations and the dataset's actions)."""
    return TensorDict(
        observation=torch.randn(b, t, obs),
        action=torch.rand(b, t, act) * 1.8 - 0.9,
        batch_size=[b, t],
    )


def _online(**kwargs):
    net = nn.Sequential(nn.Linear(3, 4), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=IndependentNormal,
    )
    return OnlineDTLoss(actor, **kwargs), net


def test_online_dt_matches_hand_computation_values_and_gradients():
    loss, net = _online(alpha_init=0.3)
    batch = _sequences()
    out = loss(batch)
    assert loss_terms(out) == ["loss_alpha", "loss_entropy", "loss_log_likelihood"]
    loc, scale = net(batch["observation"])
    x = batch["action"]
    log_prob = (-0.5 * ((x - loc) / scale) ** 2 - scale.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    entropy = (0.5 + 0.5 * math.log(2 * math.pi) + scale.log()).sum(-1).mean()
    alpha = loss.log_alpha.exp()
    expected = {
        "loss_log_likelihood": -log_prob.mean(),
        "loss_entropy": -alpha.detach() * entropy,
        "loss_alpha": alpha * (entropy.detach() + 2.0),  # target entropy "auto" = -2
    }
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value)
    torch.testing.assert_close(out["alpha"], torch.tensor(0.3))
    actor_params = list(net.parameters())
    for key in ("loss_log_likelihood", "loss_entropy"):
        assert_grads_close(grads(out[key], actor_params), grads(expected[key], actor_params))
        assert_no_grad(out[key], [loss.log_alpha])
    assert_grads_close(
        grads(out["loss_alpha"], [loss.log_alpha]), grads(expected["loss_alpha"], [loss.log_alpha])
    )
    assert_no_grad(out["loss_alpha"], actor_params)


def test_online_dt_temperature_options_and_keys():
    loss, _ = _online(fixed_alpha=True, alpha_init=0.1, target_entropy=-1.0)
    assert all(p is not loss.log_alpha for p in loss.parameters())
    out = loss(_sequences())
    assert out["loss_alpha"].item() == 0.0 and loss.target_entropy.item() == -1.0
    loss, _ = _online(max_alpha=0.5, alpha_init=2.0)
    assert loss(_sequences())["alpha"].item() == pytest.approx(0.5)
    batch = _sequences()
    batch.rename_key_("action", "target")
    loss.set_keys(action_target="target")
    loss(batch)
    del batch["target"]
    with pytest.raises(KeyError, match=r"OnlineDTLoss.*set_keys\(action_target="):
        loss(batch)
    with pytest.raises(TypeError, match="get_dist"):
        OnlineDTLoss(Actor(nn.Linear(3, 2)))


def test_online_dt_updates_decrease_the_loss():
    loss, _ = _online(alpha_init=0.01)
    batch = _sequences(8, 5)
    batch["action"] = torch.tanh(batch["observation"][..., :2])  # a learnable mapping
    optim = torch.optim.Adam(loss.parameters(), lr=2e-2)
    first = loss(batch)["loss_log_likelihood"].item()
    for _ in range(150):
        optim.zero_grad()
        total(loss(batch)).backward()
        optim.step()
    assert loss(batch)["loss_log_likelihood"].item() < first - 1.0


def test_dt_matches_hand_computation_and_keys():
    net = nn.Linear(3, 2)
    loss = DTLoss(Actor(net))
    batch = _sequences()
    before = batch.clone()
    out = loss(batch)
    expected = ((net(batch["observation"]) - batch["action"]) ** 2).mean()
    torch.testing.assert_close(out["loss"], expected)
    assert_grads_close(
        grads(out["loss"], list(net.parameters())), grads(expected, list(net.parameters()))
    )
    assert (batch == before).all()  # the actor wrote on a copy: the dataset's actions are intact
    assert set(batch.keys()) == {"observation", "action"}


def test_dt_set_keys_and_bad_inputs():
    net = nn.Linear(3, 2)
    loss = DTLoss(Actor(net, out_keys=["pred"]), loss_function="l1")
    batch = _sequences()
    with pytest.raises(ValueError, match=r"set_keys\(action_pred="):
        loss(batch)
    loss.set_keys(action_pred="pred")
    expected = (net(batch["observation"]) - batch["action"]).abs().mean()
    torch.testing.assert_close(loss(batch)["loss"], expected)
    with pytest.raises(ValueError, match="shape"):
        loss(batch.set("action", torch.zeros(4, 5, 3)))
    del batch["action"]
    with pytest.raises(KeyError, match=r"DTLoss.*set_keys\(action_target="):
        loss(batch)


def test_dt_updates_decrease_the_loss():
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
    loss = DTLoss(Actor(net))
    batch = _sequences(8, 5)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-2)
    first = loss(batch)["loss"].item()
    for _ in range(150):
        optim.zero_grad()
        loss(batch)["loss"].backward()
        optim.step()
    assert loss(batch)["loss"].item() < 0.5 * first
