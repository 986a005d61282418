"""REDQLoss against the formulas written out by hand."""

import pytest
import torch

from tests.objectives.offpolicy_utils import (
    assert_grads_close,
    assert_no_grad,
    bandit_batch,
    big_qvalue,
    grads,
    loss_terms,
    make_actor,
    make_batch,
    make_qvalue,
    make_value,
    mlp_by_hand,
    perturb,
    tanh_normal_sample,
    target_ids,
    train,
)
from torchrl_lite.modules import TanhNormal
from torchrl_lite.objectives import REDQLoss

N, M = 4, 2


def _redq(**kwargs):
    actor, net = make_actor()
    loss = REDQLoss(
        actor, make_qvalue(), num_qvalue_nets=N, sub_sample_len=M, loss_function="l2", **kwargs
    )
    perturb(loss.target_qvalue_network)
    return loss, net


@pytest.mark.parametrize("vectorized", [False, True], ids=["loop", "vmap"])
def test_redq_matches_hand_computation_values_and_gradients(vectorized):
    loss, net = _redq(alpha_init=0.4, gamma=0.9)
    loss.qvalue_network.vectorized = loss.target_qvalue_network.vectorized = vectorized
    batch = make_batch(8)
    torch.manual_seed(5)
    out = loss(batch.clone())
    torch.manual_seed(5)
    subset = torch.randperm(N)[:M]  # the only random draw of the call
    obs, next_obs = batch["observation"], batch["next", "observation"]
    params, targets = loss.qvalue_network.params, loss.target_qvalue_network.params
    alpha = 0.4
    action, log_prob = tanh_normal_sample(*net(obs))
    q_pi = torch.stack([mlp_by_hand(params[i].detach(), obs, action) for i in range(N)])
    loss_actor = (alpha * log_prob - q_pi.mean(0)).mean()
    with torch.no_grad():
        next_action, next_log_prob = tanh_normal_sample(*net(next_obs))
        next_q = torch.stack([mlp_by_hand(targets[int(i)], next_obs, next_action) for i in subset])
        not_term = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        y = batch["next", "reward"].squeeze(-1) + 0.9 * not_term * (
            next_q.min(0).values - alpha * next_log_prob
        )
    pred = torch.stack([mlp_by_hand(params[i], obs, batch["action"]) for i in range(N)])
    loss_qvalue = ((pred - y) ** 2).mean(-1).sum()
    torch.testing.assert_close(out["loss_actor"], loss_actor)
    torch.testing.assert_close(out["loss_qvalue"], loss_qvalue)
    actor_params, q_params = list(net.parameters()), list(loss.qvalue_network.parameters())
    assert_grads_close(grads(out["loss_actor"], actor_params), grads(loss_actor, actor_params))
    assert_grads_close(grads(out["loss_qvalue"], q_params), grads(loss_qvalue, q_params))
    assert_no_grad(out["loss_actor"], q_params)
    assert_no_grad(out["loss_qvalue"], actor_params + [loss.log_alpha])


def test_redq_keys_parameters_and_ensemble():
    loss, _ = _redq()
    out = loss(make_batch())
    assert loss_terms(out) == ["loss_actor", "loss_alpha", "loss_qvalue"]
    assert loss.qvalue_network.params.batch_size == (N,)
    assert {id(p) for p in loss.parameters()}.isdisjoint(target_ids(loss))
    weights = loss.qvalue_network.params["module", "0", "weight"]
    assert not torch.equal(weights[0], weights[1])  # the copies are initialised independently


def test_redq_target_subset_changes_between_calls():
    loss, _ = _redq()
    batch = make_batch()
    errors = {round(loss(batch.clone())["td_error"].item(), 6) for _ in range(12)}
    assert len(errors) > 1


def test_redq_bad_arguments_and_missing_keys():
    actor, _ = make_actor()
    with pytest.raises(ValueError, match="sub_sample_len"):
        REDQLoss(actor, make_qvalue(), num_qvalue_nets=3, sub_sample_len=4)
    with pytest.raises(TypeError, match="value network"):
        REDQLoss(actor, make_qvalue(), value_network=make_value())
    loss, _ = _redq()
    batch = make_batch()
    del batch["next", "done"]
    with pytest.raises(KeyError, match=r"REDQLoss.*set_keys\(done="):
        loss(batch)


def test_redq_updates_decrease_the_loss_on_a_bandit():
    actor, net = make_actor(dist=TanhNormal)
    loss = REDQLoss(actor, big_qvalue(), num_qvalue_nets=5, loss_function="l2", alpha_init=0.05)
    first, last = train(loss, bandit_batch(), steps=150)
    assert last["loss_qvalue"] < 0.1 * first["loss_qvalue"]
