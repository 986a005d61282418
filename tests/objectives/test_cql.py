"""CQLLoss and DiscreteCQLLoss against the formulas written out by hand."""

import math

import pytest
import torch
from torch import nn

from tests.objectives.offpolicy_utils import (
    ACT,
    assert_grads_close,
    assert_no_grad,
    bandit_batch,
    big_qvalue,
    grads,
    loss_terms,
    make_actor,
    make_batch,
    make_qvalue,
    mlp_by_hand,
    perturb,
    tanh_normal_sample,
    target_ids,
    train,
)
from torchrl_lite.data.tensor_specs import Bounded
from torchrl_lite.modules import QValueActor, TanhNormal
from torchrl_lite.objectives import CQLLoss, DiscreteCQLLoss

S = 3  # num_random


def _cql(**kwargs):
    actor, net = make_actor()
    loss = CQLLoss(actor, make_qvalue(), num_random=S, loss_function="l2", **kwargs)
    perturb(loss.target_qvalue_network)
    return loss, net


def _penalty_by_hand(loss, net, batch, seed, temperature=1.0, weight=1.0):
    """``[N]`` CQL(H) penalties written out, and the predictions ``[N, B]``."""
    obs, next_obs = batch["observation"], batch["next", "observation"]
    params = loss.qvalue_network.params
    n_batch = obs.shape[0]
    with torch.no_grad():
        torch.manual_seed(seed)
        uniform = torch.rand(S, n_batch, ACT) * 2 - 1  # bounds [-1, 1]
        log_uniform = torch.full((S, n_batch), -ACT * math.log(2.0))
        current, log_current = tanh_normal_sample(*net(obs), (S,))
        following, log_following = tanh_normal_sample(*net(next_obs), (S,))
    actions = torch.cat([uniform, current, following])  # [3S, B, A]
    log_q = torch.cat([log_uniform, log_current, log_following])  # [3S, B]
    penalties, preds = [], []
    for i in range(params.shape[0]):
        q = mlp_by_hand(params[i], obs.expand(3 * S, *obs.shape), actions)  # [3S, B]
        soft_max = temperature * torch.logsumexp((q - log_q) / temperature, 0)  # [B]
        pred = mlp_by_hand(params[i], obs, batch["action"])
        penalties.append(weight * (soft_max.mean() - pred.mean()))
        preds.append(pred)
    return torch.stack(penalties), torch.stack(preds)


def _target_by_hand(loss, net, batch, gamma):
    """The deterministic-backup target ``[B]`` (no entropy term)."""
    next_obs = batch["next", "observation"]
    targets = loss.target_qvalue_network.params
    with torch.no_grad():
        next_action, _ = tanh_normal_sample(*net(next_obs))
        next_q = torch.stack([mlp_by_hand(targets[i], next_obs, next_action) for i in range(2)])
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        return batch["next", "reward"].squeeze(-1) + gamma * not_term * next_q.min(0).values


@pytest.mark.parametrize("vectorized", [False, True], ids=["loop", "vmap"])
def test_cql_matches_hand_computation_values_and_gradients(vectorized):
    loss, net = _cql(gamma=0.9, temperature=0.7, min_q_weight=2.0)
    loss.qvalue_network.vectorized = loss.target_qvalue_network.vectorized = vectorized
    batch = make_batch(5)
    torch.manual_seed(11)
    out = loss(batch.clone())
    terms = ["loss_actor", "loss_actor_bc", "loss_alpha", "loss_cql", "loss_qvalue"]
    assert loss_terms(out) == terms
    penalty, pred = _penalty_by_hand(loss, net, batch, seed=11, temperature=0.7, weight=2.0)
    y = _target_by_hand(loss, net, batch, 0.9)
    loss_qvalue = ((pred - y) ** 2).mean(-1).sum()
    torch.testing.assert_close(out["loss_cql"], penalty.sum())
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_grads_close(grads(out["loss_cql"], q_params), grads(penalty.sum(), q_params))
    assert_grads_close(grads(out["loss_qvalue"], q_params), grads(loss_qvalue, q_params))
    assert_no_grad(out["loss_cql"], actor_params + [loss.log_alpha])
    assert_no_grad(out["loss_actor"], q_params)


def test_cql_lagrange_terms():
    loss, net = _cql(with_lagrange=True, lagrange_thresh=0.5)
    with torch.no_grad():
        loss.log_alpha_prime.fill_(math.log(3.0))
    batch = make_batch(5)
    torch.manual_seed(2)
    out = loss(batch.clone())
    assert "loss_alpha_prime" in loss_terms(out)
    penalty, _ = _penalty_by_hand(loss, net, batch, seed=2)
    torch.testing.assert_close(out["loss_cql"], (3.0 * (penalty - 0.5)).sum())
    torch.testing.assert_close(out["loss_alpha_prime"], -(3.0 * (penalty - 0.5)).mean().detach())
    torch.testing.assert_close(out["alpha_prime"], torch.tensor(3.0))
    (g,) = grads(out["loss_alpha_prime"], [loss.log_alpha_prime])
    torch.testing.assert_close(g, -(3.0 * (penalty - 0.5)).mean().detach())
    assert_no_grad(out["loss_cql"], [loss.log_alpha_prime])
    assert_no_grad(out["loss_alpha_prime"], list(loss.qvalue_network.parameters()))


def test_cql_backups():
    loss, net = _cql(deterministic_backup=False, alpha_init=0.5, gamma=0.9)
    batch = make_batch(5)
    out = loss(batch.clone())
    next_obs = batch["next", "observation"]
    targets = loss.target_qvalue_network.params
    next_action, next_log_prob = tanh_normal_sample(*net(next_obs))
    next_q = torch.stack([mlp_by_hand(targets[i], next_obs, next_action) for i in range(2)])
    not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
    y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * (
        next_q.min(0).values - 0.5 * next_log_prob
    )
    pred = torch.stack(
        [
            mlp_by_hand(loss.qvalue_network.params[i], batch["observation"], batch["action"])
            for i in range(2)
        ]
    )
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).mean(-1).sum())

    loss, net = _cql(max_q_backup=True, gamma=0.9)
    out = loss(batch.clone())
    targets = loss.target_qvalue_network.params
    next_actions, _ = tanh_normal_sample(*net(next_obs), (S,))
    next_q = torch.stack(
        [
            mlp_by_hand(targets[i], next_obs.expand(S, *next_obs.shape), next_actions)
            for i in range(2)
        ]
    )  # [N, S, B]
    y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * next_q.max(1).values.min(0).values
    pred = torch.stack(
        [
            mlp_by_hand(loss.qvalue_network.params[i], batch["observation"], batch["action"])
            for i in range(2)
        ]
    )
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).mean(-1).sum())


def test_cql_bounds_and_bad_arguments():
    actor, _ = make_actor()
    actor.module[-1]._spec = None
    with pytest.raises(ValueError, match="action_spec=Bounded"):
        CQLLoss(actor, make_qvalue())
    loss = CQLLoss(actor, make_qvalue(), action_spec=Bounded(-2.0, 2.0, shape=(2,)))
    assert loss.action_high.tolist() == [2.0, 2.0] and loss.target_entropy.item() == -2.0
    with pytest.raises(ValueError, match="num_random"):
        CQLLoss(make_actor()[0], make_qvalue(), num_random=0)
    with pytest.raises(ValueError, match="temperature"):
        CQLLoss(make_actor()[0], make_qvalue(), temperature=0.0)


def test_cql_parameters_and_missing_keys():
    loss, _ = _cql(with_lagrange=True)
    params = {id(p) for p in loss.parameters()}
    assert params.isdisjoint(target_ids(loss)) and id(loss.log_alpha_prime) in params
    batch = make_batch()
    del batch["action"]
    with pytest.raises(KeyError, match=r"CQLLoss.*set_keys\(action="):
        loss(batch)


def test_cql_updates_decrease_the_loss_offline():
    actor, _ = make_actor(dist=TanhNormal)
    loss = CQLLoss(actor, big_qvalue(), loss_function="l2", alpha_init=0.05, num_random=4)
    first, last = train(loss, bandit_batch(), steps=150)
    assert last["loss_qvalue"] < 0.2 * first["loss_qvalue"]
    assert total_of(last) < total_of(first) - 1.0


# -- discrete ------------------------------------------------------------------------
def _discrete(**kwargs):
    loss = DiscreteCQLLoss(QValueActor(nn.Linear(3, 4), action_space="categorical"), **kwargs)
    perturb(loss.target_value_network)
    return loss


def _linear(module, buffers=False):
    layer = next(m for m in module.modules() if isinstance(m, nn.Linear))
    if buffers:
        return layer._buffers["weight"], layer._buffers["bias"]
    return layer.weight, layer.bias


def test_discrete_cql_matches_hand_computation():
    loss = _discrete(gamma=0.8, min_q_weight=0.5)
    batch = make_batch(6, action=torch.randint(4, (6,)))
    batch["_weight"] = torch.rand(6)
    out = loss(batch.clone())
    assert loss_terms(out) == ["loss_cql", "loss_qvalue"]
    w, b = _linear(loss.value_network)
    wt, bt = _linear(loss.target_value_network, buffers=True)
    q = batch["observation"] @ w.T + b
    pred = q.gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        next_q = (batch["next", "observation"] @ wt.T + bt).max(-1).values
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.8 * not_term * next_q
    loss_qvalue = (batch["_weight"] * (pred - y) ** 2).mean()
    loss_cql = 0.5 * (torch.logsumexp(q, -1) - pred).mean()
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    torch.testing.assert_close(out["loss_cql"], loss_cql)
    assert_grads_close(grads(out["loss_cql"], [w, b]), grads(loss_cql, [w, b]))
    assert {id(p) for p in loss.parameters()} == {id(w), id(b)}


def test_discrete_cql_keys_and_bad_actions():
    loss = _discrete()
    batch = make_batch(6, action=torch.randint(4, (6,)))
    batch["next"].rename_key_("reward", "r")
    loss.set_keys(reward="r")
    loss(batch)
    assert batch["td_error"].shape == (6,)
    with pytest.raises(ValueError, match="action"):
        loss(batch.clone().set("action", torch.zeros(6, 2, 2, dtype=torch.long)))
    del batch["next", "r"]
    with pytest.raises(KeyError, match=r"DiscreteCQLLoss.*set_keys\(reward="):
        loss(batch)


def test_discrete_cql_updates_decrease_the_loss():
    loss = _discrete()
    batch = make_batch(32, action=torch.randint(4, (32,)))
    first, last = train(loss, batch, steps=200)
    assert total_of(last) < total_of(first)


def total_of(out):
    return (out["loss_qvalue"] + out["loss_cql"]).item()
