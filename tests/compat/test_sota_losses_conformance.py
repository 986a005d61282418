"""Losses and value estimators TorchRL's online example scripts use (sota-implementations):
each checked against its textbook formula or a plain per-step reference."""

import copy

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded


# -- objectives.group_optimizers ----------------------------------------------------------
def test_group_optimizers_steps_every_group_with_its_own_lr():
    from torchrl_lite.objectives import group_optimizers

    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    opt = group_optimizers(torch.optim.SGD([a], lr=0.1), None, torch.optim.SGD([b], lr=0.01))
    (a.sum() + b.sum()).backward()
    opt.step()
    torch.testing.assert_close(a.detach(), torch.full((2,), 0.9))
    torch.testing.assert_close(b.detach(), torch.full((3,), 0.99))
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]


def test_group_optimizers_refuses_mixed_classes_and_nothing():
    from torchrl_lite.objectives import group_optimizers

    p = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(ValueError, match="different classes"):
        group_optimizers(torch.optim.SGD([p], lr=0.1), torch.optim.Adam([p]))
    with pytest.raises(ValueError, match="at least one optimizer"):
        group_optimizers(None)


# -- VTrace -----------------------------------------------------------------------------------
def _vtrace_loop(gamma, log_pi, log_mu, v, nv, r, done, term, rho_bar, c_bar):
    """Espeholt et al. (2018), eq. 1, written per step for one trajectory batch."""
    T = r.shape[-2]
    rho = torch.exp(log_pi - log_mu)
    vs = torch.zeros_like(v)
    acc = torch.zeros_like(v[..., 0, :])
    for t in reversed(range(T)):
        rb, c = rho[..., t, :].clamp(max=rho_bar), rho[..., t, :].clamp(max=c_bar)
        nt = (~term[..., t, :]).float()
        nd = (~done[..., t, :]).float()
        delta = rb * (r[..., t, :] + gamma * nt * nv[..., t, :] - v[..., t, :])
        acc = delta + gamma * nd * c * acc
        vs[..., t, :] = v[..., t, :] + acc
    adv = torch.zeros_like(v)
    for t in range(T):
        nxt = vs[..., t + 1, :] if t + 1 < T else nv[..., t, :]
        nxt = torch.where(done[..., t, :], nv[..., t, :], nxt)
        rb = rho[..., t, :].clamp(max=rho_bar)
        nt = (~term[..., t, :]).float()
        adv[..., t, :] = rb * (r[..., t, :] + gamma * nt * nxt - v[..., t, :])
    return adv, vs


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5)])
def test_vtrace_function_matches_the_per_step_formula(rho_bar, c_bar):
    from torchrl_lite.objectives.value import vtrace_advantage_estimate

    g = torch.Generator().manual_seed(0)
    shape = (3, 12, 1)
    log_pi, log_mu = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    v, nv, r = (torch.randn(shape, generator=g) for _ in range(3))
    done = torch.rand(shape, generator=g) < 0.2
    term = done & (torch.rand(shape, generator=g) < 0.5)
    adv, vs = vtrace_advantage_estimate(
        0.95, log_pi, log_mu, v, nv, r, done, term, rho_thresh=rho_bar, c_thresh=c_bar
    )
    ref_adv, ref_vs = _vtrace_loop(0.95, log_pi, log_mu, v, nv, r, done, term, rho_bar, c_bar)
    torch.testing.assert_close(vs, ref_vs)
    torch.testing.assert_close(adv, ref_adv)


def test_vtrace_on_policy_equals_n_step_bellman_targets():
    """With pi = mu and no clipping, v_s is the discounted return bootstrapped at the end."""
    from torchrl_lite.objectives.value import vtrace_advantage_estimate

    T = 6
    r = torch.arange(T, dtype=torch.float32).reshape(T, 1)
    v = torch.randn(T, 1)
    nv = torch.cat([v[1:], torch.full((1, 1), 10.0)])  # V(s_{t+1}), 10 after the last step
    lp = torch.zeros(T, 1)
    done = torch.zeros(T, 1, dtype=torch.bool)
    _, vs = vtrace_advantage_estimate(0.5, lp, lp, v, nv, r, done, rho_thresh=5.0, c_thresh=5.0)
    expected = [
        sum(0.5**k * r[t + k, 0] for k in range(T - t)) + 0.5 ** (T - t) * 10 for t in range(T)
    ]
    torch.testing.assert_close(vs[:, 0], torch.tensor(expected))


def test_vtrace_module_reads_the_behaviour_log_prob_and_writes_targets():
    from tensordict.nn import NormalParamExtractor, TensorDictModule

    from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl_lite.objectives.value import VTrace, vtrace_advantage_estimate

    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(
            torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
            ["observation"],
            ["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )
    critic = ValueOperator(torch.nn.Linear(3, 1), in_keys=["observation"])
    B, T = 2, 5
    seq = torch.randn(B, T + 1, 3)
    obs, nobs = seq[:, :-1], seq[:, 1:]  # one trajectory per row, in time order
    td = TensorDict(
        observation=obs,
        action=torch.rand(B, T, 1) * 1.8 - 0.9,
        sample_log_prob=torch.randn(B, T),
        next=TensorDict(
            observation=nobs,
            reward=torch.randn(B, T, 1),
            done=torch.zeros(B, T, 1, dtype=torch.bool),
            terminated=torch.zeros(B, T, 1, dtype=torch.bool),
            batch_size=[B, T],
        ),
        batch_size=[B, T],
    )
    est = VTrace(gamma=0.9, actor_network=actor, value_network=critic)
    out = est(td.clone())
    with torch.no_grad():
        log_pi = actor.get_dist(td).log_prob(td["action"]).reshape(B, T, 1)
        v, nv = critic(td.clone())["state_value"], critic(td["next"].clone())["state_value"]
    adv, vs = vtrace_advantage_estimate(
        0.9,
        log_pi,
        td["sample_log_prob"].unsqueeze(-1),
        v,
        nv,
        td["next", "reward"],
        td["next", "done"],
        td["next", "terminated"],
    )
    torch.testing.assert_close(out["advantage"], adv)
    torch.testing.assert_close(out["value_target"], vs)
    with pytest.raises(KeyError, match="return_log_prob=True"):
        est(td.exclude("sample_log_prob"))
    with pytest.raises(TypeError, match="get_dist"):
        VTrace(gamma=0.9, actor_network=critic, value_network=critic)


# -- CrossQ / TQC ------------------------------------------------------------------------------
def _actor_and_batch(B=6):
    from tensordict.nn import NormalParamExtractor, TensorDictModule

    from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal

    actor = ProbabilisticActor(
        TensorDictModule(
            torch.nn.Sequential(
                MLP(in_features=3, out_features=2, num_cells=[8]), NormalParamExtractor()
            ),
            ["observation"],
            ["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
    )
    td = TensorDict(
        observation=torch.randn(B, 3),
        action=torch.rand(B, 1) * 2 - 1,
        next=TensorDict(
            observation=torch.randn(B, 3),
            reward=torch.randn(B, 1),
            done=torch.zeros(B, 1, dtype=torch.bool),
            terminated=torch.tensor([[False]] * (B - 1) + [[True]]),
            batch_size=[B],
        ),
        batch_size=[B],
    )
    return actor, td


def test_crossq_critic_loss_uses_one_joint_call_and_no_target_network():
    from torchrl_lite.modules import MLP, ValueOperator
    from torchrl_lite.modules.models.batchrenorm import BatchRenorm1d
    from torchrl_lite.objectives import CrossQLoss

    torch.manual_seed(0)
    actor, td = _actor_and_batch()
    net = MLP(
        in_features=4,
        out_features=1,
        num_cells=[8],
        norm_class=BatchRenorm1d,
        norm_kwargs={"num_features": 8, "warmup_steps": 0},
    )
    loss = CrossQLoss(
        actor,
        ValueOperator(net, in_keys=["observation", "action"]),
        num_qvalue_nets=2,
        loss_function="l2",
        alpha_init=0.5,
    )
    loss.make_value_estimator(gamma=0.9)
    assert not hasattr(loss, "target_qvalue_network")
    state = copy.deepcopy(loss.qvalue_network.state_dict())  # running statistics move
    torch.manual_seed(1)
    q_loss, meta = loss.qvalue_loss(td)
    loss.qvalue_network.load_state_dict(state)
    # reference: the same next action, both halves through each critic in one batch
    torch.manual_seed(1)
    a_next = actor.get_dist(td["next"].select("observation")).sample()
    logp = actor.get_dist(td["next"].select("observation")).log_prob(a_next)
    B = td.shape[0]
    total = 0.0
    nexts = []
    preds = []
    for q in loss.qvalue_network:
        q.train()
        x = torch.cat(
            [
                torch.cat([td["observation"], td["action"]], -1),
                torch.cat([td["next", "observation"], a_next], -1),
            ]
        )
        v = q.module(x).squeeze(-1)
        preds.append(v[:B])
        nexts.append(v[B:])
    nv = torch.stack(nexts).min(0).values - 0.5 * logp
    y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"].squeeze(-1)) * nv
    for p in preds:
        total = total + ((p - y) ** 2).mean()
    torch.testing.assert_close(q_loss, total.detach(), rtol=1e-4, atol=1e-5)
    actor_loss, ameta = loss.actor_loss(td)
    assert ameta["log_prob"].shape == (B,)
    assert loss.qvalue_network.training  # restored after the eval-mode actor pass
    out = loss(td)
    assert {"loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"} <= set(out.keys())
    assert len(list(loss.qvalue_network_params.flatten_keys().values())) > 0


def test_quantile_huber_loss_matches_the_definition():
    from torchrl_lite.objectives.tqc import quantile_huber_loss

    torch.manual_seed(0)
    pred, target = torch.randn(2, 3, 4), torch.randn(3, 5)
    total, count = 0.0, 0
    for n in range(2):
        for b in range(3):
            for m in range(4):
                tau = (m + 0.5) / 4
                for j in range(5):
                    u = float(target[b, j] - pred[n, b, m])
                    huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                    total += abs(tau - (u < 0)) * huber
                    count += 1
    torch.testing.assert_close(quantile_huber_loss(pred, target), torch.tensor(total / count))


def test_tqc_target_drops_the_top_quantiles_of_the_pooled_targets():
    from torchrl_lite.modules import MLP, ValueOperator
    from torchrl_lite.objectives import TQCLoss

    torch.manual_seed(0)
    actor, td = _actor_and_batch()
    critic = ValueOperator(
        MLP(in_features=4, out_features=5, num_cells=[8]), in_keys=["observation", "action"]
    )
    loss = TQCLoss(
        actor, critic, num_qvalue_nets=3, top_quantiles_to_drop_per_net=2, alpha_init=0.5, gamma=0.9
    )
    out = loss(td)
    assert {"loss_actor", "loss_qvalue", "loss_alpha"} <= set(out.keys())
    # reference target for one fixed next action
    torch.manual_seed(3)
    pred = loss._quantiles(td)
    nobs = td["next", "observation"]
    torch.manual_seed(4)
    dist = actor.get_dist(td["next"].select("observation"))
    a2 = dist.sample()
    lp = dist.log_prob(a2)
    z = loss._quantiles(td["next"], a2, target=True)  # [3, B, 5]
    pooled = torch.cat(list(z), -1).sort(-1).values[:, : 3 * 5 - 3 * 2]
    y = td["next", "reward"] + 0.9 * (~td["next", "terminated"]) * (pooled - 0.5 * lp[:, None])
    from torchrl_lite.objectives.tqc import quantile_huber_loss

    expected = quantile_huber_loss(pred, y)
    torch.manual_seed(4)
    got = {}
    loss._qvalue_terms(td, torch.tensor(0.5), got)
    torch.testing.assert_close(got["loss_qvalue"], expected)
    assert nobs.shape[0] == pred.shape[1]
    with pytest.raises(ValueError, match="top_quantiles_to_drop_per_net"):
        TQCLoss(actor, critic, top_quantiles_to_drop_per_net=-1)


# -- GAIL ----------------------------------------------------------------------------------------
def _discriminator():
    from tensordict.nn import TensorDictModule

    class D(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, s, a):
            return torch.sigmoid(self.lin(torch.cat([s, a], -1)))

    return TensorDictModule(D(), ["observation", "action"], ["d_logits"])


def test_gail_loss_is_the_binary_cross_entropy_of_expert_vs_policy():
    from torchrl_lite.objectives import GAILLoss

    torch.manual_seed(0)
    disc = _discriminator()
    loss = GAILLoss(disc)
    td = TensorDict(
        observation=torch.randn(5, 2),
        action=torch.randn(5, 1),
        collector_observation=torch.randn(5, 2),
        collector_action=torch.randn(5, 1),
        batch_size=[5],
    )
    out = loss(td)
    d_e = disc.module(td["observation"], td["action"])
    d_c = disc.module(td["collector_observation"], td["collector_action"])
    expected = -torch.log(d_e).mean() - torch.log(1 - d_c).mean()
    torch.testing.assert_close(out["loss"], expected)
    out["loss"].backward()
    assert disc.module.lin.weight.grad is not None


def test_gail_gradient_penalty_is_added_and_checked():
    from torchrl_lite.objectives import GAILLoss

    torch.manual_seed(0)
    disc = _discriminator()
    td = TensorDict(
        observation=torch.randn(5, 2),
        action=torch.randn(5, 1),
        collector_observation=torch.randn(5, 2),
        collector_action=torch.randn(5, 1),
        batch_size=[5],
    )
    plain = GAILLoss(disc)(td)["loss"]
    out = GAILLoss(disc, use_grad_penalty=True, gp_lambda=10.0)(td)
    torch.testing.assert_close(out["loss"] - out["gp_loss"], plain)
    assert out["gp_loss"] >= 0
    with pytest.raises(TypeError, match="TensorDict module"):
        GAILLoss(torch.nn.Linear(3, 1))
    with pytest.raises(KeyError, match="collector_action"):
        GAILLoss(disc)(td.exclude("collector_action"))


def test_clip_ppo_clip_epsilon_is_a_buffer_annealed_in_place():
    from tensordict.nn import NormalParamExtractor, TensorDictModule

    from torchrl_lite.modules import ProbabilisticActor, TanhNormal
    from torchrl_lite.objectives import ClipPPOLoss

    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(
            torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
            ["observation"],
            ["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )
    loss = ClipPPOLoss(actor, None, clip_epsilon=0.2)
    assert "clip_epsilon" in dict(loss.named_buffers())
    td = TensorDict(
        observation=torch.randn(64, 3),
        action=torch.rand(64, 1) * 1.8 - 0.9,
        sample_log_prob=torch.randn(64),
        advantage=torch.randn(64, 1),
        batch_size=[64],
    )
    with torch.no_grad():
        ratio = (actor.get_dist(td).log_prob(td["action"]) - td["sample_log_prob"]).exp()
    for eps in (0.2, 0.05):
        loss.clip_epsilon.copy_(eps)
        out = loss(td.clone())
        expected = ((ratio - 1).abs() > eps).float().mean()
        torch.testing.assert_close(out["clip_fraction"], expected)


def test_redq_loss_deprecated_is_redq_with_the_old_temperature_bounds():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules import MLP, ValueOperator
    from torchrl_lite.objectives import REDQLoss
    from torchrl_lite.objectives.deprecated import REDQLoss_deprecated

    actor, td = _actor_and_batch()
    q = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"])
    loss = REDQLoss_deprecated(
        actor, q, num_qvalue_nets=4, loss_function="smooth_l1", delay_qvalue=True
    )
    assert isinstance(loss, REDQLoss)
    with torch.no_grad():
        loss.log_alpha.fill_(10.0)
    assert float(loss._alpha()) == pytest.approx(10.0)  # clamped to max_alpha
    assert {"loss_actor", "loss_qvalue"} <= set(loss(td).keys())
    with pytest.raises(ValueError, match="gSDE"):
        REDQLoss_deprecated(actor, q, gSDE=True)
    assert isinstance(q, TensorDictModule)


def test_td3_and_ddpg_losses_split_into_their_terms_as_forward():
    from torchrl_lite.modules import MLP, Actor, ValueOperator
    from torchrl_lite.objectives import DDPGLoss, TD3Loss

    _, td = _actor_and_batch()
    actor = Actor(MLP(in_features=3, out_features=1, num_cells=[8]), spec=Bounded(-1.0, 1.0, (1,)))
    q = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"])
    ddpg = DDPGLoss(actor, q)
    full = ddpg(td.clone())
    torch.testing.assert_close(ddpg.loss_actor(td.clone())[0], full["loss_actor"])
    value, meta = ddpg.loss_value(td.clone())
    torch.testing.assert_close(value, full["loss_value"])
    assert {"td_error", "pred_value", "target_value"} <= set(meta)
    td3 = TD3Loss(actor, q, action_spec=Bounded(-1.0, 1.0, (1,)), policy_noise=0.0, noise_clip=0.0)
    full = td3(td.clone())
    torch.testing.assert_close(td3.actor_loss(td.clone())[0], full["loss_actor"])
    torch.testing.assert_close(td3.value_loss(td.clone())[0], full["loss_qvalue"])
