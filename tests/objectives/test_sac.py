"""SACLoss and DiscreteSACLoss against the formulas written out by hand."""

import math

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

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
    tanh_normal_sample,
    target_ids,
    train,
)
from torchrl_lite.data import Bounded, Composite
from torchrl_lite.modules import OneHotCategorical, ProbabilisticActor, TanhNormal
from torchrl_lite.objectives import DiscreteSACLoss, SACLoss, SoftUpdate, ValueEstimators


def _sac(**kwargs):
    actor, net = make_actor()
    kwargs.setdefault("loss_function", "l2")
    loss = SACLoss(actor, make_qvalue(), **kwargs)
    if hasattr(loss, "target_qvalue_network"):
        perturb(loss.target_qvalue_network)
    return loss, net


def _sac_by_hand(loss, net, batch, gamma, target_entropy):
    """The SAC v2 losses written out (l2 distance, min over the Q-networks)."""
    obs, act = batch["observation"], batch["action"]
    next_obs = batch["next", "observation"]
    reward = batch["next", "reward"].squeeze(-1)
    not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
    alpha = loss.log_alpha.detach().exp()
    params, targets = loss.qvalue_network.params, loss.target_qvalue_network.params
    n = params.shape[0]
    action, log_prob = tanh_normal_sample(*net(obs))
    q_pi = torch.stack([mlp_by_hand(params[i].detach(), obs, action) for i in range(n)])
    loss_actor = (alpha * log_prob - q_pi.min(0).values).mean()
    with torch.no_grad():
        next_action, next_log_prob = tanh_normal_sample(*net(next_obs))
        next_q = torch.stack([mlp_by_hand(targets[i], next_obs, next_action) for i in range(n)])
        y = reward + gamma * not_term * (next_q.min(0).values - alpha * next_log_prob)
    pred = torch.stack([mlp_by_hand(params[i], obs, act) for i in range(n)])
    loss_qvalue = sum(((pred[i] - y) ** 2).mean() for i in range(n))
    loss_alpha = -(loss.log_alpha * (log_prob.detach() + target_entropy)).mean()
    return {"loss_actor": loss_actor, "loss_qvalue": loss_qvalue, "loss_alpha": loss_alpha}, pred, y


def test_sac_loss_keys_and_parameters():
    loss, _ = _sac()
    out = loss(make_batch())
    assert loss_terms(out) == ["loss_actor", "loss_alpha", "loss_qvalue"]
    assert {"alpha", "entropy", "td_error"} <= set(out.keys())
    assert all(v.shape == () for v in out.values())
    assert all(not v.requires_grad for k, v in out.items() if not k.startswith("loss_"))
    params = {id(p) for p in loss.parameters()}
    assert params.isdisjoint(target_ids(loss))
    assert id(loss.log_alpha) in params
    assert id(loss.qvalue_network.params["module", "0", "weight"]) in params


@pytest.mark.parametrize("vectorized", [False, True], ids=["loop", "vmap"])
def test_sac_matches_hand_computation_values_and_gradients(vectorized):
    loss, net = _sac(alpha_init=0.5, gamma=0.9, num_qvalue_nets=3)
    loss.qvalue_network.vectorized = loss.target_qvalue_network.vectorized = vectorized
    batch = make_batch()
    out = loss(batch.clone())
    expected, pred, y = _sac_by_hand(loss, net, batch, 0.9, target_entropy=-2.0)
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value, rtol=1e-5, atol=1e-5)
    assert math.isclose(out["alpha"].item(), 0.5, rel_tol=1e-6)
    assert out["td_error"].item() == pytest.approx(
        (pred - y).abs().max(0).values.mean().item(), rel=1e-5
    )
    actor_params = list(net.parameters())
    q_params = list(loss.qvalue_network.parameters())
    assert_grads_close(
        grads(out["loss_actor"], actor_params), grads(expected["loss_actor"], actor_params)
    )
    assert_grads_close(
        grads(out["loss_qvalue"], q_params), grads(expected["loss_qvalue"], q_params)
    )
    assert_grads_close(
        grads(out["loss_alpha"], [loss.log_alpha]), grads(expected["loss_alpha"], [loss.log_alpha])
    )


def test_sac_gradients_reach_only_intended_parameters():
    loss, net = _sac()
    out = loss(make_batch())
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_no_grad(out["loss_actor"], q_params + [loss.log_alpha])
    assert_no_grad(out["loss_qvalue"], actor_params + [loss.log_alpha])
    assert_no_grad(out["loss_alpha"], actor_params + q_params)
    assert all(g.abs().sum() > 0 for g in grads(out["loss_actor"], actor_params))
    assert all(g.abs().sum() > 0 for g in grads(out["loss_qvalue"], q_params))


def test_sac_writes_per_sample_td_error_into_the_batch():
    loss, _ = _sac()
    batch = make_batch()
    loss(batch)
    assert batch["td_error"].shape == (6,) and not batch["td_error"].requires_grad


def test_sac_value_estimator_gamma_is_used():
    loss, net = _sac(alpha_init=0.3)
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.5)
    batch = make_batch()
    out = loss(batch.clone())
    expected, _, _ = _sac_by_hand(loss, net, batch, 0.5, target_entropy=-2.0)
    torch.testing.assert_close(out["loss_qvalue"], expected["loss_qvalue"])


def test_sac_v1_value_network_matches_hand_computation():
    actor, net = make_actor()
    loss = SACLoss(actor, make_qvalue(), make_value(), loss_function="l2", gamma=0.9)
    perturb(loss.target_value_network)
    assert not hasattr(loss, "target_qvalue_network")
    batch = make_batch()
    out = loss(batch.clone())
    assert loss_terms(out) == ["loss_actor", "loss_alpha", "loss_qvalue", "loss_value"]
    obs, params = batch["observation"], loss.qvalue_network.params
    vp, vt = loss.value_network, loss.target_value_network
    v_params, t_params = params_of(vp), params_of(vt, buffers=True)
    y = batch["next", "reward"].squeeze(-1) + 0.9 * (
        1 - batch["next", "terminated"].squeeze(-1).float()
    ) * mlp_by_hand(t_params, batch["next", "observation"])
    pred = torch.stack([mlp_by_hand(params[i], obs, batch["action"]) for i in range(2)])
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).mean(-1).sum())
    action, log_prob = tanh_normal_sample(*net(obs))
    q_min = torch.stack([mlp_by_hand(params[i], obs, action) for i in range(2)]).min(0).values
    v_target = (q_min - log_prob).detach()
    expected_value = ((mlp_by_hand(v_params, obs) - v_target) ** 2).mean()
    torch.testing.assert_close(out["loss_value"], expected_value)
    assert_no_grad(
        out["loss_value"], list(net.parameters()) + list(loss.qvalue_network.parameters())
    )
    assert_no_grad(out["loss_qvalue"], list(vp.parameters()))


def test_sac_target_entropy_from_spec_batch_or_number():
    loss, _ = _sac()  # "auto", no action_spec: read from the first batch
    assert math.isnan(loss.target_entropy.item())
    loss(make_batch())
    assert loss.target_entropy.item() == -2.0
    loss = SACLoss(make_actor()[0], make_qvalue(), action_spec=Bounded(-1.0, 1.0, shape=(3,)))
    assert loss.target_entropy.item() == -3.0
    composite = Composite(action=Bounded(-1.0, 1.0, shape=(2, 2)))
    assert (
        SACLoss(make_actor()[0], make_qvalue(), action_spec=composite).target_entropy.item() == -4.0
    )
    with pytest.raises(ValueError, match="no entry 'action'"):
        SACLoss(
            make_actor()[0], make_qvalue(), action_spec=Composite(other=Bounded(0.0, 1.0, (1,)))
        )
    loss = SACLoss(make_actor()[0], make_qvalue(), target_entropy=-0.5)
    assert loss.target_entropy.item() == -0.5


def test_sac_fixed_alpha_and_alpha_bounds():
    loss, _ = _sac(fixed_alpha=True, alpha_init=0.2)
    assert all(p is not loss.log_alpha for p in loss.parameters())
    out = loss(make_batch())
    assert out["loss_alpha"].item() == 0.0 and out["alpha"].item() == pytest.approx(0.2)
    loss, _ = _sac(alpha_init=1.0, max_alpha=0.5, min_alpha=0.1)
    out = loss(make_batch())
    assert out["alpha"].item() == pytest.approx(0.5)
    with torch.no_grad():
        loss.log_alpha.fill_(math.log(0.01))
    assert loss(make_batch())["alpha"].item() == pytest.approx(0.1)


def test_sac_soft_update_moves_targets_towards_online():
    loss, _ = _sac()
    online = loss.qvalue_network.params["module", "0", "weight"]
    target = loss.target_qvalue_network.params["module", "0", "weight"]
    before = (online - target).abs().sum().item()
    SoftUpdate(loss, tau=0.5).step()
    after = (online - target).abs().sum().item()
    assert after == pytest.approx(before / 2, rel=1e-4)


def test_sac_set_keys_are_honoured():
    loss, _ = _sac()
    batch = make_batch()
    reference = loss(batch.clone())
    renamed = batch.clone()
    renamed["next"].rename_key_("reward", "r")
    renamed["next"].rename_key_("done", "d")
    renamed["next"].rename_key_("terminated", "term")
    loss.set_keys(reward="r", done="d", terminated="term", priority="prio")
    out = loss(renamed)
    torch.testing.assert_close(out["loss_qvalue"], reference["loss_qvalue"])
    assert "prio" in renamed.keys() and "td_error" not in renamed.keys()


@pytest.mark.parametrize(
    "missing", [("next", "reward"), ("next", "done"), "action", ("next", "observation")]
)
def test_sac_missing_key_raises_naming_it(missing):
    loss, _ = _sac()
    batch = make_batch()
    del batch[missing]
    with pytest.raises(KeyError) as info:
        loss(batch)
    text = str(info.value)
    assert repr(missing) in text and "SACLoss" in text
    if missing != ("next", "observation"):
        assert "set_keys" in text


def test_sac_bad_construction_arguments():
    actor, _ = make_actor()
    with pytest.raises(ValueError, match="loss function"):
        SACLoss(actor, make_qvalue(), loss_function="l3")
    with pytest.raises(ValueError, match="alpha_init"):
        SACLoss(actor, make_qvalue(), alpha_init=0.0)
    with pytest.raises(ValueError, match="min_alpha"):
        SACLoss(actor, make_qvalue(), min_alpha=1.0, max_alpha=0.5)
    with pytest.raises(TypeError, match="get_dist"):
        SACLoss(make_qvalue(), make_qvalue())
    with pytest.raises(TypeError, match="target_entropy"):
        SACLoss(actor, make_qvalue(), target_entropy="high")
    with pytest.raises(ValueError, match="gamma"):
        SACLoss(actor, make_qvalue(), gamma=1.5)


def test_sac_reward_shape_mismatch_raises():
    loss, _ = _sac()
    batch = make_batch()
    batch["next"] = batch["next"].exclude("reward").set("reward", torch.randn(6, 2))
    with pytest.raises(ValueError, match=r"SACLoss.*reward.*\[6, 2\]"):
        loss(batch)


def test_sac_updates_decrease_the_loss_on_a_bandit():
    actor, net = make_actor(dist=TanhNormal)
    with torch.no_grad():
        net[0].bias[:2] = -1.0  # start far from the best action (0.5, 0.5)
    loss = SACLoss(actor, big_qvalue(), loss_function="l2", alpha_init=0.05)
    batch = bandit_batch()
    assert bandit_reward(torch.tanh(net(batch["observation"])[0])) < -2.0
    first, last = train(loss, batch, steps=200)
    assert last["loss_qvalue"] < 0.1 * first["loss_qvalue"]
    assert bandit_reward(torch.tanh(net(batch["observation"])[0])) > -0.3


# -- discrete ------------------------------------------------------------------------
def _discrete(n=4, **kwargs):
    net = nn.Linear(3, n)
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
    )
    qvalue = TensorDictModule(
        nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, n)),
        ["observation"],
        ["action_value"],
    )
    loss = DiscreteSACLoss(actor, qvalue, num_actions=n, loss_function="l2", **kwargs)
    perturb(loss.target_qvalue_network)
    return loss, net


def _q_all(p, obs):
    h = torch.tanh(obs @ p["module", "0", "weight"].T + p["module", "0", "bias"])
    return h @ p["module", "2", "weight"].T + p["module", "2", "bias"]


def test_discrete_sac_matches_hand_computation_values_and_gradients():
    loss, net = _discrete(alpha_init=0.7, gamma=0.8)
    batch = make_batch(action=torch.randint(4, (6,)))
    out = loss(batch.clone())
    assert loss_terms(out) == ["loss_actor", "loss_alpha", "loss_qvalue"]
    obs, idx = batch["observation"], batch["action"]
    next_obs = batch["next", "observation"]
    alpha = 0.7
    params, targets = loss.qvalue_network.params, loss.target_qvalue_network.params
    with torch.no_grad():
        next_pi = torch.softmax(net(next_obs), -1)
        next_q = torch.minimum(_q_all(targets[0], next_obs), _q_all(targets[1], next_obs))
        v_next = (next_pi * (next_q - alpha * next_pi.log())).sum(-1)
        y = (
            batch["next", "reward"].squeeze(-1)
            + 0.8 * (1 - batch["next", "terminated"].squeeze(-1).float()) * v_next
        )
    q = [_q_all(params[i], obs) for i in range(2)]
    pred = [qi.gather(-1, idx.unsqueeze(-1)).squeeze(-1) for qi in q]
    loss_qvalue = sum(((p - y) ** 2).mean() for p in pred)
    pi = torch.softmax(net(obs), -1)
    q_min = torch.minimum(q[0], q[1]).detach()
    loss_actor = (pi * (alpha * pi.log() - q_min)).sum(-1).mean()
    entropy = -(pi * pi.log()).sum(-1).detach()
    target_entropy = 0.98 * math.log(4)
    loss_alpha = -(loss.log_alpha * (target_entropy - entropy)).mean()
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    torch.testing.assert_close(out["loss_actor"], loss_actor)
    torch.testing.assert_close(out["loss_alpha"], loss_alpha)
    torch.testing.assert_close(out["entropy"], entropy.mean())
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_grads_close(grads(out["loss_actor"], actor_params), grads(loss_actor, actor_params))
    assert_grads_close(grads(out["loss_qvalue"], q_params), grads(loss_qvalue, q_params))
    assert_no_grad(out["loss_actor"], q_params)
    assert_no_grad(out["loss_qvalue"], actor_params + [loss.log_alpha])


def test_discrete_sac_one_hot_and_index_actions_agree():
    loss, _ = _discrete()
    index = torch.randint(4, (6,))
    batch = make_batch(action=index)
    a = loss(batch.clone())["loss_qvalue"]
    b = loss(batch.clone().set("action", torch.eye(4)[index].long()))["loss_qvalue"]
    c = loss(batch.clone().set("action", index.unsqueeze(-1)))["loss_qvalue"]
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)


def test_discrete_sac_bad_inputs():
    loss, _ = _discrete()
    with pytest.raises(ValueError, match="action"):
        loss(make_batch(action=torch.zeros(6, 2, 3)))
    batch = make_batch(action=torch.randint(4, (6,)))
    del batch["next", "reward"]
    with pytest.raises(KeyError, match="DiscreteSACLoss"):
        loss(batch)
    with pytest.raises(ValueError, match="num_actions"):
        _discrete(n=1)
    qvalue = TensorDictModule(nn.Linear(3, 5), ["observation"], ["action_value"])
    bad = DiscreteSACLoss(loss.actor_network, qvalue, num_actions=4)
    with pytest.raises(ValueError, match="num_actions=4"):
        bad(make_batch(action=torch.randint(4, (6,))))


def test_discrete_sac_updates_decrease_the_loss_on_a_bandit():
    loss, net = _discrete(alpha_init=0.05)
    batch = make_batch(64, action=torch.randint(4, (64,)))
    batch["observation"] = torch.zeros(64, 3)
    batch["next", "reward"] = torch.tensor([0.0, 1.0, 0.0, 0.5])[batch["action"]].unsqueeze(-1)
    batch["next", "terminated"] = torch.ones(64, 1, dtype=torch.bool)
    batch["next", "done"] = torch.ones(64, 1, dtype=torch.bool)
    first, last = train(loss, batch, steps=200)
    assert last["loss_qvalue"] < 0.1 * first["loss_qvalue"]
    assert torch.softmax(net(torch.zeros(3)), -1)[1] > 0.5


def test_sac_delay_actor_samples_next_actions_from_the_target_actor():
    loss, net = _sac(delay_actor=True)
    perturb(loss.target_actor_network)
    batch = make_batch()
    out = loss(batch.clone())
    assert {id(p) for p in loss.parameters()}.isdisjoint(target_ids(loss))
    target_net = loss.target_actor_network.module[0].module  # the frozen copy of ``net``
    with torch.no_grad():
        next_action, next_log_prob = tanh_normal_sample(*target_net(batch["next", "observation"]))
        targets = loss.target_qvalue_network.params
        next_obs = batch["next", "observation"]
        next_q = torch.stack([mlp_by_hand(targets[i], next_obs, next_action) for i in range(2)])
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.99 * not_term * (
            next_q.min(0).values - next_log_prob
        )
    params = loss.qvalue_network.params
    pred = torch.stack(
        [mlp_by_hand(params[i], batch["observation"], batch["action"]) for i in range(2)]
    )
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).mean(-1).sum())
