"""Dreamer losses against hand-written formulas and plain loops."""

import pytest
import torch
from tensordict import TensorDict
from torch.distributions import Normal, kl_divergence

from torchrl_lite.data import Bounded
from torchrl_lite.envs import DreamerEnv, ExplorationType, set_exploration_type
from torchrl_lite.modules import ObsDecoder, ObsEncoder, RewardHead, RSSMPosterior, RSSMPrior
from torchrl_lite.modules.models.dreamer import scale_image
from torchrl_lite.objectives import (
    DreamerActorLoss,
    DreamerLoss,
    DreamerModelLoss,
    DreamerValueLoss,
)
from torchrl_lite.objectives.dreamer import gaussian_kl, kl_balanced_free_nats, lambda_returns
from torchrl_lite.recipes import config_for, get_recipe

S, D, H, A = 3, 6, 8, 1


def _normals(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(*shape, generator=g) if i % 2 == 0 else torch.rand(*shape, generator=g) + 0.2
        for i in range(4)
    ]


def test_gaussian_kl_matches_torch_distributions():
    qm, qs, pm, ps = _normals(5, 4)
    expected = kl_divergence(Normal(qm, qs), Normal(pm, ps)).sum(-1)
    torch.testing.assert_close(gaussian_kl(qm, qs, pm, ps), expected)


def test_kl_free_nats_and_balancing_against_the_formulas():
    qm, qs, pm, ps = (x.requires_grad_() for x in _normals(5, 4))
    kl = kl_divergence(Normal(qm, qs), Normal(pm, ps)).sum(-1).mean()
    torch.testing.assert_close(kl_balanced_free_nats(qm, qs, pm, ps, free_nats=0.0), kl)
    assert kl_balanced_free_nats(qm, qs, pm, ps, free_nats=kl.item() + 1) == kl.item() + 1
    # balance a: the value is the KL, the prior gets a of its gradient, the posterior 1 - a
    a = 0.8
    value = kl_balanced_free_nats(qm, qs, pm, ps, balance=a, free_nats=0.0)
    torch.testing.assert_close(value, kl)
    full = torch.autograd.grad(kl, [qm, pm], retain_graph=True)
    balanced = torch.autograd.grad(value, [qm, pm])
    torch.testing.assert_close(balanced[0], (1 - a) * full[0])
    torch.testing.assert_close(balanced[1], a * full[1])
    with pytest.raises(ValueError, match="kl_balance must lie in \\[0, 1\\].*got 1.5"):
        kl_balanced_free_nats(qm, qs, pm, ps, balance=1.5)


def test_lambda_returns_match_a_plain_backward_loop():
    g = torch.Generator().manual_seed(1)
    reward, next_value = torch.randn(3, 7, 1, generator=g), torch.randn(3, 7, 1, generator=g)
    gamma, lmbda = 0.9, 0.7
    expected = torch.empty_like(reward)
    for b in range(3):
        ret = next_value[b, -1]  # V^lambda_{H-1} = r + gamma v(s_H)
        for t in reversed(range(7)):
            ret = reward[b, t] + gamma * ((1 - lmbda) * next_value[b, t] + lmbda * ret)
            if t == 6:
                ret = reward[b, t] + gamma * next_value[b, t]
            expected[b, t] = ret
    torch.testing.assert_close(lambda_returns(reward, next_value, gamma, lmbda), expected)


def _world_model(seed=0):
    torch.manual_seed(seed)
    enc = ObsEncoder(3, depth=2)
    return (
        enc,
        ObsDecoder(S + D, 3, 2),
        RSSMPrior(A, S, D, H),
        RSSMPosterior(D, enc.out_features, S, H),
        RewardHead(S + D, H),
    )


def _batch(b=2, t=4):
    g = torch.Generator().manual_seed(3)
    px = torch.randint(0, 256, (b, t, 3, 64, 64), generator=g, dtype=torch.uint8)
    nxt = torch.randint(0, 256, (b, t, 3, 64, 64), generator=g, dtype=torch.uint8)
    return TensorDict(
        pixels=px,
        action=torch.rand(b, t, A, generator=g) * 2 - 1,
        next=TensorDict(pixels=nxt, reward=torch.randn(b, t, 1, generator=g), batch_size=[b, t]),
        batch_size=[b, t],
    )


def test_model_loss_matches_a_hand_written_filter():
    enc, dec, prior, post, rew = _world_model()
    loss = DreamerModelLoss(enc, dec, prior, post, rew, free_nats=0.0)
    batch = _batch()
    torch.manual_seed(5)
    out = loss(batch)
    torch.manual_seed(5)
    b, t = batch.batch_size
    belief = torch.zeros(b, D)
    state = post(belief, enc(batch["pixels"][:, 0]))[2]
    reco = rwd = kl = 0.0
    for i in range(t):  # the textbook loop, one step and one term at a time
        pm, ps, _, belief = prior(state, belief, batch["action"][:, i])
        qm, qs, state = post(belief, enc(batch["next", "pixels"][:, i]))
        feat = torch.cat([state, belief], -1)
        target = batch["next", "pixels"][:, i].float() / 255 - 0.5
        reco = reco + 0.5 * ((dec(feat) - target) ** 2).sum((-3, -2, -1)).mean() / t
        rwd = rwd + 0.5 * ((rew(feat) - batch["next", "reward"][:, i]) ** 2).mean() / t
        kl = kl + kl_divergence(Normal(qm, qs), Normal(pm, ps)).sum(-1).mean() / t
    torch.testing.assert_close(out["loss_model_reco"], reco, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out["loss_model_reward"], rwd, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["loss_model_kl"], kl, rtol=1e-4, atol=1e-5)
    assert batch["next", "state"].shape == (b, t, S) and not batch["next", "state"].requires_grad
    torch.manual_seed(5)  # the recipe's reward_scale weights the reward term only
    scaled = DreamerModelLoss(enc, dec, prior, post, rew, free_nats=0.0, reward_scale=30.0)(batch)
    torch.testing.assert_close(scaled["loss_model_reward"], 30 * rwd, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(scaled["loss_model_reco"], reco, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="slices of batch \\[B, T\\], got \\[8\\]"):
        loss(_batch().reshape(-1))


def test_model_loss_on_state_vectors_sums_the_squared_error_over_the_entries():
    from torchrl_lite.modules import MLP

    torch.manual_seed(0)
    prior, post, rew = RSSMPrior(A, S, D, H), RSSMPosterior(D, 7, S, H), RewardHead(S + D, H)
    enc = MLP(in_features=5, out_features=7, num_cells=8, depth=1)
    dec = MLP(in_features=S + D, out_features=5, num_cells=8, depth=1)
    loss = DreamerModelLoss(enc, dec, prior, post, rew, pixels_key="observation", free_nats=0.0)
    g = torch.Generator().manual_seed(4)
    b, t = 3, 5
    batch = TensorDict(
        observation=torch.randn(b, t, 5, generator=g),
        action=torch.rand(b, t, A, generator=g) * 2 - 1,
        next=TensorDict(
            observation=torch.randn(b, t, 5, generator=g),
            reward=torch.randn(b, t, 1, generator=g),
            batch_size=[b, t],
        ),
        batch_size=[b, t],
    )
    torch.manual_seed(6)
    out = loss(batch)
    torch.manual_seed(6)
    belief = torch.zeros(b, D)
    state = post(belief, enc(batch["observation"][:, 0]))[2]
    reco = 0.0
    for i in range(t):  # floats are the targets as they are (no image scaling)
        belief = prior(state, belief, batch["action"][:, i])[3]
        state = post(belief, enc(batch["next", "observation"][:, i]))[2]
        error = dec(torch.cat([state, belief], -1)) - batch["next", "observation"][:, i]
        reco = reco + 0.5 * (error**2).sum(-1).mean() / t
    torch.testing.assert_close(out["loss_model_reco"], reco, rtol=1e-4, atol=1e-5)


def _losses(**config):
    enc, dec, prior, post, rew = _world_model()
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, state_dim=S, belief_dim=D, hidden=H, **config)

    class _Env:  # what make_actor_value reads from an env
        action_spec = Bounded(-1.0, 1.0, (A,))

    actor, value = recipe.make_actor_value(cfg, _Env())
    model = DreamerModelLoss(enc, dec, prior, post, rew)
    actor_loss = DreamerActorLoss(
        actor, value, DreamerEnv(prior, rew, _Env.action_spec), imagination_horizon=5
    )
    return (
        DreamerLoss(model, actor_loss, DreamerValueLoss(value)),
        (enc, dec, prior, post, rew),
        actor,
        value,
    )


def test_each_dreamer_term_trains_only_its_own_networks():
    loss, model_parts, actor, value = _losses()
    out = loss(_batch())
    groups = {
        "model": [p for m in model_parts for p in m.parameters()],
        "actor": list(actor.parameters()),
        "value": list(value.parameters()),
    }
    terms = {
        "model": out["loss_model_reco"] + out["loss_model_kl"] + out["loss_model_reward"],
        "actor": out["loss_actor"],
        "value": out["loss_value"],
    }
    for term_name, term in terms.items():
        grads = torch.autograd.grad(
            term, [p for g in groups.values() for p in g], retain_graph=True, allow_unused=True
        )
        i = 0
        for group_name, params in groups.items():
            got = grads[i : i + len(params)]
            i += len(params)
            moved = any(g is not None and g.abs().sum() > 0 for g in got)
            assert moved == (group_name == term_name), (term_name, group_name)
    assert all(p.requires_grad for g in groups.values() for p in g)  # unfrozen after


def _imagine_by_hand(batch, actor, prior, rew, value, detach_actor_inputs=False, steps=5):
    """The imagined rollout as a plain loop: ``(lambda returns [N, steps, 1], log pi [N, steps])``;
    seed torch as before the loss's own rollout."""
    state = batch["next", "state"].reshape(-1, S)
    belief = batch["next", "belief"].reshape(-1, D)
    rewards, values, log_probs = [], [], []
    with set_exploration_type(ExplorationType.RANDOM):
        for _ in range(steps):
            seen = (state.detach(), belief.detach()) if detach_actor_inputs else (state, belief)
            td = actor(TensorDict(state=seen[0], belief=seen[1], batch_size=[state.shape[0]]))
            log_probs.append(actor.get_dist(td).log_prob(td["action"]))
            _, _, state, belief = prior(state, belief, td["action"])
            rewards.append(rew(torch.cat([state, belief], -1)))
            values.append(value(torch.cat([state, belief], -1)))
    returns = lambda_returns(torch.stack(rewards, 1), torch.stack(values, 1), 0.99, 0.95)
    return returns, torch.stack(log_probs, 1)


DISCOUNTS = (0.99 ** torch.arange(5.0)).reshape(1, 5, 1)  # gamma^t over 5 imagined steps


def _actor_loss_by_hand(returns):
    """``-mean(gamma^t V^lambda_t)`` of by-hand returns ``[N, 5, 1]``."""
    return -(returns * DISCOUNTS).mean()


def _variant(loss, **options):
    """Another actor loss on ``loss``'s actor, value model and imagination env."""
    a = loss.actor_loss
    return DreamerActorLoss(a.actor, a.value_model, a.model_env, imagination_horizon=5, **options)


def test_actor_loss_is_the_discounted_mean_of_lambda_returns_of_the_imagined_rollout():
    loss, (enc, dec, prior, post, rew), actor, value = _losses()
    batch = _batch()
    loss.model_loss(batch)
    torch.manual_seed(9)
    out, imagined = loss.actor_loss(batch)
    torch.manual_seed(9)
    returns = _imagine_by_hand(batch, actor, prior, rew, value)[0]
    torch.testing.assert_close(out["loss_actor"], _actor_loss_by_hand(returns))
    torch.testing.assert_close(imagined["lambda_return"], returns.detach())
    value_loss = loss.value_loss(imagined)["loss_value"]
    v = value(torch.cat([imagined["state"], imagined["belief"]], -1))
    torch.testing.assert_close(value_loss, (DISCOUNTS * 0.5 * (v - returns.detach()) ** 2).mean())


def test_entropy_bonus_adds_the_discounted_mean_log_probability_of_the_imagined_actions():
    # a narrow actor: no sample rounds to a bound, so log_prob(action) is exact by hand too
    loss, (enc, dec, prior, post, rew), actor, value = _losses(actor_init_std=0.3)
    batch = _batch()
    loss.model_loss(batch)
    eta = 0.3
    bonus = _variant(loss, entropy_coef=eta)
    torch.manual_seed(9)
    plain = loss.actor_loss(batch)[0]
    torch.manual_seed(9)
    out = bonus(batch)[0]
    torch.manual_seed(9)
    log_prob = _imagine_by_hand(batch, actor, prior, rew, value)[1]  # [N, 5]
    bonus_by_hand = eta * (DISCOUNTS[..., 0] * log_prob).mean()
    torch.testing.assert_close(out["loss_actor"], plain["loss_actor"] + bonus_by_hand)
    torch.testing.assert_close(out["entropy"], -log_prob.mean().detach())
    grad = torch.autograd.grad(out["loss_actor"], list(actor.parameters()), allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grad)


def test_detached_actor_inputs_same_loss_gradient_only_through_the_dynamics():
    loss, (enc, dec, prior, post, rew), actor, value = _losses()
    batch = _batch()
    loss.model_loss(batch)
    detached = _variant(loss, detach_actor_inputs=True)
    params = list(actor.parameters())
    torch.manual_seed(9)
    full = loss.actor_loss(batch)[0]["loss_actor"]
    torch.manual_seed(9)
    got = detached(batch)[0]["loss_actor"]
    torch.testing.assert_close(got, full)
    torch.manual_seed(9)  # by hand: the actor sees sg(state), the dynamics the real one
    returns = _imagine_by_hand(batch, actor, prior, rew, value, detach_actor_inputs=True)[0]
    expected = _actor_loss_by_hand(returns)
    want = torch.autograd.grad(expected, params)
    for w, h in zip(want, torch.autograd.grad(got, params)):
        torch.testing.assert_close(h, w)
    full_grad = torch.autograd.grad(full, params)  # the pathwise gradient differs
    assert any(not torch.allclose(f, w) for f, w in zip(full_grad, want))


def test_slow_value_model_bootstraps_the_returns_until_a_hard_update_copies_it():
    import copy

    from torchrl_lite.objectives import HardUpdate

    loss, (enc, dec, prior, post, rew), actor, value = _losses()
    batch = _batch()
    loss.model_loss(batch)
    slow = _variant(loss, delay_value=True)
    before = copy.deepcopy(value)  # what the slow copy holds
    with torch.no_grad():
        value.net[-1].bias.add_(5.0)  # the value model moves on

    def by_hand(v):
        torch.manual_seed(9)
        returns = _imagine_by_hand(batch, actor, prior, rew, v)[0]
        return _actor_loss_by_hand(returns), returns

    torch.manual_seed(9)
    out, imagined = slow(batch)
    expected, returns = by_hand(before)
    torch.testing.assert_close(out["loss_actor"], expected)
    torch.testing.assert_close(imagined["lambda_return"], returns.detach())
    assert not torch.allclose(by_hand(value)[0], expected)
    params = list(actor.parameters())  # the actor's gradient goes through the slow copy
    for g, w in zip(
        torch.autograd.grad(out["loss_actor"], params), torch.autograd.grad(expected, params)
    ):
        torch.testing.assert_close(g, w)
    assert not any(p.requires_grad for p in slow.target_value_model.buffers())
    HardUpdate(slow, value_network_update_interval=1).step()  # copies value into the slow one
    torch.manual_seed(9)
    torch.testing.assert_close(slow(batch)[0]["loss_actor"], by_hand(value)[0])


def test_entropy_bonus_bad_inputs_are_clear_errors():
    loss, (enc, dec, prior, post, rew), actor, value = _losses()
    env = loss.actor_loss.model_env
    with pytest.raises(ValueError, match="entropy_coef must be >= 0.*got -0.1"):
        DreamerActorLoss(actor, value, env, entropy_coef=-0.1)
    from tensordict.nn import NormalParamExtractor, TensorDictModule

    from torchrl_lite.modules import ProbabilisticActor, TanhNormal

    net = torch.nn.Sequential(torch.nn.Linear(D, 2 * A), NormalParamExtractor())
    no_log_prob = ProbabilisticActor(
        TensorDictModule(net, ["belief"], ["loc", "scale"]), ["loc", "scale"],
        distribution_class=TanhNormal,
    )  # fmt: skip
    batch = _batch()
    loss.model_loss(batch)
    with pytest.raises(KeyError, match="needs the actor's log-probability.*return_log_prob=True"):
        DreamerActorLoss(no_log_prob, value, env, imagination_horizon=3, entropy_coef=0.1)(batch)


def test_actor_loss_before_the_model_loss_is_a_clear_error():
    loss, *_ = _losses()
    with pytest.raises(KeyError, match="run DreamerModelLoss on the batch first"):
        loss.actor_loss(_batch())


def test_world_model_loss_goes_down_on_a_fixed_batch():
    loss, model_parts, *_ = _losses()
    opt = torch.optim.Adam([p for m in model_parts for p in m.parameters()], lr=3e-3)
    batch = _batch()
    batch["next", "pixels"] = torch.full_like(batch["next", "pixels"], 200)  # a learnable scene
    first = None
    for _ in range(20):
        out = loss.model_loss(batch.clone())
        total = out["loss_model_reco"] + out["loss_model_reward"] + out["loss_model_kl"]
        first = total.item() if first is None else first
        opt.zero_grad()
        total.backward()
        opt.step()
    assert total.item() < 0.5 * first
    assert scale_image(batch["pixels"]).min() >= -0.5
