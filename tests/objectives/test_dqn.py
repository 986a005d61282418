"""DQN (https://www.nature.com/articles/nature14236), double DQN
(https://arxiv.org/abs/1509.06461) and C51 (https://arxiv.org/abs/1707.06887) losses
against their formulas computed by hand."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torch.nn import functional as F

from tests.objectives.loss_nets import assert_grads_close, grads, qvalue_actor, transitions
from torchrl_lite.data.tensor_specs import Categorical, OneHot
from torchrl_lite.modules import DistributionalQValueActor, QValueActor
from torchrl_lite.objectives import (
    DistributionalDQNLoss,
    DQNLoss,
    HardUpdate,
    SoftUpdate,
    ValueEstimators,
)
from torchrl_lite.objectives.dqn import c51_projection

OBS, N_ACT, B = 4, 3, 10


def _batch(action_space="one_hot", n=B, seed=0):
    td = transitions((n,), obs=OBS, done_every=3, generator_seed=seed)
    g = torch.Generator().manual_seed(seed + 7)
    index = torch.randint(N_ACT, (n,), generator=g)
    td["action"] = F.one_hot(index, N_ACT) if action_space == "one_hot" else index
    return td, index


def _perturb(module):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.5 * torch.randn_like(p))


def _hand_target(target_net, online_net, td, gamma, double):
    with torch.no_grad():
        nxt = td["next"]
        next_q = target_net(nxt["observation"])
        if double:
            best = online_net(nxt["observation"]).argmax(-1, keepdim=True)
            next_v = next_q.gather(-1, best)
        else:
            next_v = next_q.max(-1, keepdim=True).values
        return nxt["reward"] + gamma * (~nxt["terminated"]) * next_v


@pytest.mark.parametrize("action_space", ["one_hot", "categorical"])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("loss_function", ["l2", "smooth_l1"])
def test_dqn_matches_formula(action_space, double, loss_function):
    actor, net = qvalue_actor(OBS, N_ACT, action_space)
    target_net = copy.deepcopy(net)
    loss = DQNLoss(actor, gamma=0.9, double_dqn=double, loss_function=loss_function)
    _perturb(net)  # online and target now differ
    td, index = _batch(action_space)
    work = td.clone()
    out = loss(work)
    pred = net(td["observation"]).gather(-1, index.unsqueeze(-1))
    y = _hand_target(target_net, net, td, 0.9, double)
    dist = F.mse_loss if loss_function == "l2" else F.smooth_l1_loss
    expected = dist(pred, y)
    torch.testing.assert_close(out["loss"], expected.detach())
    torch.testing.assert_close(work["td_error"], (pred - y).abs().squeeze(-1).detach())
    torch.testing.assert_close(out["td_error"], (pred - y).abs().mean().detach())
    params = list(loss.parameters())
    assert len(params) == len(list(net.parameters()))
    assert_grads_close(grads(out["loss"], params), grads(expected, params))


def test_dqn_without_target_uses_online_net_without_gradient():
    actor, net = qvalue_actor(OBS, N_ACT)
    loss = DQNLoss(actor, gamma=0.9, delay_value=False)
    assert not hasattr(loss, "target_value_network")
    td, index = _batch()
    out = loss(td)
    pred = net(td["observation"]).gather(-1, index.unsqueeze(-1))
    expected = F.mse_loss(pred, _hand_target(net, net, td, 0.9, False))
    params = list(loss.parameters())
    assert_grads_close(grads(out["loss"], params), grads(expected, params))
    with pytest.raises(ValueError, match="double_dqn=True needs delay_value"):
        DQNLoss(actor, double_dqn=True, delay_value=False)
    with pytest.raises(ValueError, match="no target network"):
        HardUpdate(loss)


def test_dqn_importance_weights():
    actor, net = qvalue_actor(OBS, N_ACT)
    loss = DQNLoss(actor, gamma=0.9)
    td, index = _batch()
    td["_weight"] = torch.rand(B)
    out = loss(td)
    pred = net(td["observation"]).gather(-1, index.unsqueeze(-1))
    y = _hand_target(net, net, td, 0.9, False)
    expected = ((pred - y).pow(2).squeeze(-1) * td["_weight"]).mean()
    torch.testing.assert_close(out["loss"], expected.detach())


@pytest.mark.parametrize(
    "spec, action",
    [
        (OneHot(N_ACT), lambda i: F.one_hot(i, N_ACT)),
        (Categorical(N_ACT), lambda i: i),
        (None, lambda i: F.one_hot(i, N_ACT)),  # inferred from the shape
        (None, lambda i: i),
        (None, lambda i: i.unsqueeze(-1)),  # an index with a trailing singleton
    ],
)
def test_dqn_action_space_from_spec_or_shape(spec, action):
    net = nn.Linear(OBS, N_ACT)
    if spec is not None:
        value_network = QValueActor(net, spec=spec)
    else:
        value_network = TensorDictModule(net, ["observation"], ["action_value"])
    loss = DQNLoss(value_network, gamma=0.9)
    assert loss.action_space == (None if spec is None else value_network.action_space)
    td, index = _batch("categorical")
    td["action"] = action(index)
    out = loss(td)
    pred = net(td["observation"]).gather(-1, index.unsqueeze(-1))
    expected = F.mse_loss(pred, _hand_target(net, net, td, 0.9, False))
    torch.testing.assert_close(out["loss"], expected.detach())


def test_dqn_seed_form_and_value_estimator():
    value_network, net = qvalue_actor(OBS, N_ACT)
    loss_module = DQNLoss(value_network=value_network, gamma=0.99)
    td, _ = _batch()
    assert loss_module(td.clone())["loss"].shape == ()
    assert loss_module.value_estimator.gamma == 0.99
    loss_module.make_value_estimator(ValueEstimators.TD0, gamma=0.5)
    work = td.clone()
    loss_module(work)
    _, index = _batch()
    pred = net(td["observation"]).gather(-1, index.unsqueeze(-1))
    y = _hand_target(net, net, td, 0.5, False)
    torch.testing.assert_close(work["td_error"], (pred - y).abs().squeeze(-1).detach())


def test_dqn_set_keys_and_errors():
    value_network, _ = qvalue_actor(OBS, N_ACT)
    loss = DQNLoss(value_network, gamma=0.9)
    td, _ = _batch()
    td.rename_key_("action", "act")
    with pytest.raises(KeyError, match=r"DQNLoss.*'action'.*set_keys\(action="):
        loss(td.clone())
    loss.set_keys(action="act", priority="prio")
    work = td.clone()
    loss(work)
    assert work["prio"].shape == (B,)
    bad = work.clone()
    bad["next", "reward"] = bad["next", "reward"].squeeze(-1)
    with pytest.raises(ValueError, match=r"DQNLoss.*reward.*\[10\].*\[10, 1\]"):
        loss(bad)
    no_next = work.exclude(("next", "observation"))
    with pytest.raises(KeyError, match=r"DQNLoss.*'next', 'observation'"):
        loss(no_next)
    wrong = work.clone()
    wrong["act"] = torch.zeros(B, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="DQNLoss"):
        DQNLoss(value_network, gamma=0.9, action_space="one_hot").set_keys(action="act")(wrong)
    with pytest.raises(ValueError, match="loss function"):
        DQNLoss(value_network, loss_function="huber")


def test_dqn_few_hundred_updates_decrease_loss():
    torch.manual_seed(0)
    actor, _ = qvalue_actor(OBS, N_ACT)
    loss = DQNLoss(actor, gamma=0.9)
    updater = SoftUpdate(loss, tau=0.05)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-2)
    td, _ = _batch(n=64)
    losses = []
    for _ in range(300):
        out = loss(td)
        out["loss"].backward()
        optim.step()
        optim.zero_grad()
        updater.step()
        losses.append(out["loss"].item())
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10


# -- distributional -------------------------------------------------------------------
def _projection_loop(next_probs, support, reward, discount):
    """C51's Algorithm 1, one atom at a time."""
    v_min, v_max = support[0].item(), support[-1].item()
    n = support.numel()
    dz = (v_max - v_min) / (n - 1)
    out = torch.zeros_like(next_probs)
    for i in range(next_probs.shape[0]):
        for j in range(n):
            tz = min(
                max(reward[i, 0].item() + discount[i, 0].item() * support[j].item(), v_min), v_max
            )
            b = (tz - v_min) / dz
            low, up = int(torch.tensor(b).floor()), int(torch.tensor(b).ceil())
            p = next_probs[i, j].item()
            if low == up:
                out[i, low] += p
            else:
                out[i, low] += p * (up - b)
                out[i, up] += p * (b - low)
    return out


def test_c51_projection_matches_loop():
    g = torch.Generator().manual_seed(0)
    support = torch.linspace(-2.0, 3.0, 11)
    probs = torch.rand(7, 11, generator=g).softmax(-1)
    reward = torch.tensor([[0.0], [0.5], [-10.0], [10.0], [0.25], [1.0], [-0.3]])
    discount = torch.tensor([[0.9], [0.0], [0.9], [0.9], [1.0], [0.5], [0.99]])
    got = c51_projection(probs, support, reward, discount)
    torch.testing.assert_close(got, _projection_loop(probs, support, reward, discount))
    torch.testing.assert_close(got.sum(-1), torch.ones(7))


def _dist_actor(atoms=7, action_space="categorical"):
    net = nn.Sequential(nn.Linear(OBS, atoms * N_ACT), nn.Unflatten(-1, (atoms, N_ACT)))
    actor = DistributionalQValueActor(
        net, support=torch.linspace(-3, 3, atoms), action_space=action_space
    )
    return actor, net


@pytest.mark.parametrize("action_space", ["one_hot", "categorical"])
def test_distributional_dqn_matches_formula(action_space):
    actor, net = _dist_actor(action_space=action_space)
    target_net = copy.deepcopy(net)
    loss = DistributionalDQNLoss(actor, gamma=0.9)
    _perturb(net)
    td, index = _batch(action_space)
    work = td.clone()
    out = loss(work)
    support = torch.linspace(-3, 3, 7)
    log_p = net(td["observation"]).log_softmax(-2)  # [B, atoms, n]
    log_p_a = log_p[torch.arange(B), :, index]  # [B, atoms]
    with torch.no_grad():
        next_p = target_net(td["next", "observation"]).softmax(-2)
        best = (next_p * support.unsqueeze(-1)).sum(-2).argmax(-1)
        next_p_a = next_p[torch.arange(B), :, best]
        discount = 0.9 * (~td["next", "terminated"]).float()
        m = _projection_loop(next_p_a, support, td["next", "reward"], discount)
    ce = -(m * log_p_a).sum(-1)
    torch.testing.assert_close(out["loss"], ce.mean().detach())
    torch.testing.assert_close(work["td_error"], ce.detach())
    params = list(loss.parameters())
    assert_grads_close(grads(out["loss"], params), grads(ce.mean(), params))
    assert not any(n.startswith("target") for n, _ in loss.named_parameters())


def test_distributional_dqn_needs_support_and_learns():
    with pytest.raises(ValueError, match="support"):
        DistributionalDQNLoss(
            TensorDictModule(nn.Linear(4, 6), ["observation"], ["action_value"]), 0.9
        )
    actor, _ = _dist_actor()
    loss = DistributionalDQNLoss(actor, gamma=0.9)
    updater = HardUpdate(loss, value_network_update_interval=20)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-2)
    td, _ = _batch("categorical", n=64)
    losses = []
    for _ in range(200):
        out = loss(td)
        out["loss"].backward()
        optim.step()
        optim.zero_grad()
        updater.step()
        losses.append(out["loss"].item())
    assert losses[-1] < losses[0]
