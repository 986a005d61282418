"""DreamerV3 (TorchRL's current ``dreamer_v3`` script's names): symlog and two-hot maths,
the discrete-latent RSSM and the three losses, each against a reference written out here
(plain loops, NumPy, or numbers worked by hand)."""

import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from torch import nn

from torchrl_lite.data import Unbounded
from torchrl_lite.envs import GymEnv, TensorDictPrimer, TransformedEnv
from torchrl_lite.envs.model_based.dreamer import DreamerEnv
from torchrl_lite.modules import (
    DreamerV3MLP,
    IndependentNormal,
    SymExpTwoHot,
    TanhNormal,
    WorldModelWrapper,
)
from torchrl_lite.modules.models.dreamer_v3 import RSSMPosteriorV3, RSSMPriorV3, RSSMRolloutV3
from torchrl_lite.modules.models.two_hot import (
    straight_through_sample,
    symlog_bins,
    unimix_probs,
)
from torchrl_lite.objectives import (
    DreamerV3ActorLoss,
    DreamerV3ModelLoss,
    DreamerV3ValueLoss,
    SoftUpdate,
    categorical_kl_balanced,
    categorical_kl_terms,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from torchrl_lite.objectives.dreamer_v3_maths import continuation_lambda_returns
from torchrl_lite.objectives.value import ValueEstimators
from torchrl_lite.objectives.value.functional import vec_td_lambda_return_estimate


# -- symlog, bins, two-hot ------------------------------------------------------------
def test_symlog_matches_the_formula_and_symexp_inverts_it():
    xs = [-1e6, -37.5, -1.0, -1e-3, 0.0, 2e-4, 0.5, 3.0, 1e5]
    x = torch.tensor(xs, dtype=torch.float64)
    expected = [math.copysign(math.log(1 + abs(v)), v) for v in xs]
    torch.testing.assert_close(symlog(x), torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(symexp(symlog(x)), x)
    torch.testing.assert_close(symlog(symexp(x.clamp(-30, 30))), x.clamp(-30, 30))


def test_bins_are_symexp_of_an_even_grid_and_exactly_symmetric():
    for k in (2, 11, 255, 256):
        grid = np.linspace(-20.0, 20.0, k)
        expected = np.sign(grid) * np.expm1(np.abs(grid))
        bins = symlog_bins(k, dtype=torch.float64)
        np.testing.assert_allclose(bins.numpy(), expected, rtol=1e-12, atol=1e-9)
        assert torch.equal(bins, -bins.flip(0))
        assert bool((bins[1:] > bins[:-1]).all())
    with pytest.raises(ValueError, match="num_bins must be at least 2, got 1"):
        symlog_bins(1)


def _two_hot_loop(value: float, bins: list[float]) -> list[float]:
    out = [0.0] * len(bins)
    if value <= bins[0]:
        out[0] = 1.0
    elif value >= bins[-1]:
        out[-1] = 1.0
    else:
        for k in range(len(bins) - 1):
            if bins[k] <= value < bins[k + 1]:
                frac = (value - bins[k]) / (bins[k + 1] - bins[k])
                out[k], out[k + 1] = 1 - frac, frac
                break
    return out


def test_two_hot_encode_matches_a_loop_and_decodes_back():
    bins = symlog_bins(21, dtype=torch.float64)
    values = torch.tensor([-5e9, -300.0, -1.3, 0.0, 0.07, 1.0, 42.0, 9e3, 5e9], dtype=torch.float64)
    encoded = two_hot_encode(values, bins)
    expected = torch.tensor([_two_hot_loop(v, bins.tolist()) for v in values.tolist()])
    torch.testing.assert_close(encoded, expected.double())
    inside = values.abs() < bins[-1]
    # the log of a two-hot vector is -inf off its two bins: softmax gives the vector back
    decoded = two_hot_decode(encoded.log(), bins)
    torch.testing.assert_close(decoded[inside], values[inside])
    torch.testing.assert_close(decoded[~inside], values[~inside].clamp(bins[0], bins[-1]))


def test_two_hot_decode_pairs_mirrored_bins_and_matches_float64():
    bins = symlog_bins(255)
    assert two_hot_decode(torch.zeros(4, 255), bins).eq(0).all()  # symmetric: exactly 0
    logits = torch.randn(6, 255) * 3
    reference = (torch.softmax(logits.double(), -1) * bins.double()).sum(-1)
    torch.testing.assert_close(
        two_hot_decode(logits, bins).double(), reference, rtol=1e-4, atol=1e-2
    )
    with pytest.raises(ValueError, match="logits have 5 classes but there are 255 bins"):
        two_hot_decode(torch.zeros(5), bins)
    with pytest.raises(ValueError, match="1-D ascending tensor"):
        two_hot_encode(torch.zeros(2), torch.zeros(2, 2))


def test_two_hot_cross_entropy_against_explicit_sum():
    bins = symlog_bins(7, dtype=torch.float64)
    logits, target = (
        torch.randn(3, 7, dtype=torch.float64),
        torch.tensor([[-2.0], [0.3], [40.0]]).double(),
    )
    expected = []
    for row, y in zip(logits.tolist(), target[:, 0].tolist()):
        norm = math.log(sum(math.exp(v) for v in row))
        weights = _two_hot_loop(y, bins.tolist())
        expected.append(-sum(w * (v - norm) for w, v in zip(weights, row)))
    torch.testing.assert_close(
        two_hot_cross_entropy(logits, target, bins), torch.tensor(expected).double()
    )
    with pytest.raises(ValueError, match=r"need targets of shape \(3,\) or \(3, 1\), got \(3, 2\)"):
        two_hot_cross_entropy(logits, torch.zeros(3, 2), bins)


def test_symexp_two_hot_module_reads_out_with_a_value_dim():
    head = SymExpTwoHot(11)
    assert head.bins.shape == (11,) and "bins" in dict(head.named_buffers())
    assert head(torch.zeros(2, 3, 11)).shape == (2, 3, 1)
    values = torch.tensor([-7.0, 0.25, 123.0])
    torch.testing.assert_close(head.decode(head.encode(values).log()), values, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        head.loss(torch.zeros(3, 11), values), torch.full((3,), math.log(11))
    )


# -- unimix and straight-through samples ------------------------------------------------
def test_unimix_probabilities_mix_in_a_uniform_share():
    logits = torch.tensor([[3.0, -1.0, 0.0, 50.0]])
    soft = [math.exp(v) for v in logits[0].tolist()]
    soft = [v / sum(soft) for v in soft]
    expected = torch.tensor([[0.99 * p + 0.01 / 4 for p in soft]])
    probs = unimix_probs(logits, 0.01)
    torch.testing.assert_close(probs, expected)
    assert probs.min() >= 0.01 / 4 and torch.isclose(probs.sum(), torch.tensor(1.0))
    torch.testing.assert_close(unimix_probs(logits, 0.0), torch.softmax(logits, -1))
    with pytest.raises(
        ValueError, match=r"unimix must lie in \[0, 1\) \(DreamerV3: 0.01\), got 1.0"
    ):
        unimix_probs(logits, 1.0)


def test_straight_through_sample_is_one_hot_with_the_gradient_of_the_probabilities():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 2.0]], requires_grad=True)
    weights = torch.tensor([1.0, -2.0, 0.5])
    (straight_through_sample(logits, 0.1) * weights).sum().backward()
    via_sample = logits.grad.clone()
    logits.grad = None
    (unimix_probs(logits, 0.1) * weights).sum().backward()
    torch.testing.assert_close(via_sample, logits.grad)
    draws = straight_through_sample(logits.detach().expand(20000, 3), 0.1)
    assert set(draws.unique().tolist()) == {0.0, 1.0} and draws.sum(-1).eq(1).all()
    torch.testing.assert_close(
        draws.mean(0), unimix_probs(logits.detach(), 0.1)[0], atol=0.015, rtol=0
    )


# -- networks --------------------------------------------------------------------------
def test_dreamer_v3_mlp_concatenates_inputs_and_normalises_hidden_layers():
    torch.manual_seed(0)
    mlp = DreamerV3MLP(5, 3, depth=2, num_cells=16)
    kinds = [type(m).__name__ for m in mlp.model]
    assert kinds == ["Linear", "RMSNorm", "SiLU", "Linear", "RMSNorm", "SiLU", "Linear"]
    a, b = torch.randn(4, 2), torch.randn(4, 3)
    torch.testing.assert_close(mlp(a, b), mlp(torch.cat([a, b], -1)))
    first = mlp.model[0].weight
    assert first.abs().max() <= 2 * 1.1368 / math.sqrt(5) + 1e-6  # truncated at 2 std
    assert DreamerV3MLP(5, 3, depth=1, num_cells=8, outscale=0.0)(a, b).eq(0).all()
    with pytest.raises(ValueError, match="depth must be >= 0 hidden layers, got -1"):
        DreamerV3MLP(5, 3, depth=-1)


@pytest.mark.parametrize("core", ["gru", "block_gru"])
def test_rssm_prior_and_posterior_shapes_and_one_hot_states(core):
    prior = RSSMPriorV3(action_shape=(2,), hidden_dim=8, rnn_hidden_dim=8, num_categoricals=3,
                        num_classes=4, action_dim=2, recurrent_model=core, num_blocks=4, unimix=0.01)  # fmt: skip
    post = RSSMPosteriorV3(hidden_dim=8, num_categoricals=3, num_classes=4, rnn_hidden_dim=8,
                           obs_embed_dim=5, use_rms_norm=True, num_layers=2, unimix=0.01)  # fmt: skip
    logits, state, belief = prior(torch.zeros(2, 7, 12), torch.zeros(2, 7, 8), torch.randn(2, 7, 2))
    assert (logits.shape, state.shape, belief.shape) == ((2, 7, 3, 4), (2, 7, 12), (2, 7, 8))
    assert state.unflatten(-1, (3, 4)).sum(-1).eq(1).all()
    post_logits, post_state = post(belief, torch.randn(2, 7, 5))
    assert post_logits.shape == (2, 7, 3, 4) and post_state.shape == (2, 7, 12)
    assert prior.action_shape == torch.Size([2])


def test_rssm_prior_rejects_bad_arguments():
    with pytest.raises(
        ValueError, match="recurrent_model must be 'gru' or 'block_gru', got 'lstm'"
    ):
        RSSMPriorV3(action_shape=(1,), recurrent_model="lstm")
    with pytest.raises(ValueError, match="needs action_dim=<A>"):
        RSSMPriorV3(action_shape=(1,), recurrent_model="block_gru")
    with pytest.raises(ValueError, match="rnn_hidden_dim=10 must be divisible by num_blocks=4"):
        RSSMPriorV3(action_dim=1, rnn_hidden_dim=10, recurrent_model="block_gru", num_blocks=4)
    with pytest.raises(ValueError, match="give action_spec or action_shape, not both"):
        RSSMPriorV3(action_spec=Unbounded(1), action_shape=(1,))
    with pytest.raises(ValueError, match="needs rnn_hidden_dim= and obs_embed_dim="):
        RSSMPosteriorV3(use_rms_norm=True)
    with pytest.raises(ValueError, match="RSSMPosteriorV3: unimix must lie in"):
        RSSMPosteriorV3(unimix=-0.1)


def _rssm_modules():
    prior = RSSMPriorV3(action_shape=(1,), hidden_dim=8, rnn_hidden_dim=8, num_categoricals=2,
                        num_classes=3, action_dim=1, recurrent_model="block_gru", num_blocks=2)  # fmt: skip
    post = RSSMPosteriorV3(hidden_dim=8, num_categoricals=2, num_classes=3, rnn_hidden_dim=8,
                           obs_embed_dim=4, use_rms_norm=True)  # fmt: skip
    return prior, post


def test_rssm_rollout_matches_a_step_loop_and_restarts_at_episode_starts():
    torch.manual_seed(0)
    prior, post = _rssm_modules()
    rollout = RSSMRolloutV3(
        TensorDictModule(prior, ["state", "belief", "action"],
                         [("next", "prior_logits"), ("next", "state"), ("next", "belief")]),
        TensorDictModule(post, [("next", "belief"), ("next", "embed")],
                         [("next", "posterior_logits"), ("next", "state")]),
    )  # fmt: skip
    assert rollout.action_key == "action"
    B, T = 2, 4
    is_init = torch.zeros(B, T, 1, dtype=torch.bool)
    is_init[0, 2] = True  # batch 0 starts a new episode at t = 2
    td = TensorDict(state=torch.zeros(B, T, 6), belief=torch.zeros(B, T, 8), is_init=is_init,
                    action=torch.randn(B, T, 1), next={"embed": torch.randn(B, T, 4)},
                    batch_size=[B, T])  # fmt: skip
    torch.manual_seed(1)
    out = rollout(td.clone())
    torch.manual_seed(1)  # the same samples, drawn by a plain loop
    state, belief = torch.zeros(B, 6), torch.zeros(B, 8)
    for t in range(T):
        action = td["action"][:, t]
        keep = (~is_init[:, t]).float()  # [B, 1]
        state, belief, action = state * keep, belief * keep, action * keep
        prior_logits, _, belief = prior(state, belief, action)
        post_logits, state = post(belief, td["next", "embed"][:, t])
        torch.testing.assert_close(out["next", "prior_logits"][:, t], prior_logits)
        torch.testing.assert_close(out["next", "posterior_logits"][:, t], post_logits)
        torch.testing.assert_close(out["next", "state"][:, t], state)
        torch.testing.assert_close(out["next", "belief"][:, t], belief)
    assert out["belief"][0, 2].eq(0).all() and not out["belief"][1, 2].eq(0).all()


# -- losses ----------------------------------------------------------------------------
def test_categorical_kl_terms_by_hand():
    # one categorical of 2 classes: q = (0.5, 0.5), p = (0.2, 0.8) (logits = log-probs)
    q = torch.tensor([[[0.5, 0.5]]]).log()
    p = torch.tensor([[[0.2, 0.8]]]).log()
    kl = 0.5 * math.log(0.5 / 0.2) + 0.5 * math.log(0.5 / 0.8)
    dyn, rep = categorical_kl_terms(q, p, free_nats=0.0, unimix=0.0)
    assert dyn.item() == pytest.approx(kl, rel=1e-5) and rep.item() == pytest.approx(kl, rel=1e-5)
    dyn, rep = categorical_kl_terms(q, p, free_nats=1.0, unimix=0.0)
    assert dyn.item() == rep.item() == 1.0  # below the free nat: clamped
    q2, p2 = 0.9 * torch.tensor([0.5, 0.5]) + 0.05, 0.9 * torch.tensor([0.2, 0.8]) + 0.05
    mixed = (q2 * (q2 / p2).log()).sum().item()
    assert categorical_kl_terms(q, p, free_nats=0.0, unimix=0.1)[0].item() == pytest.approx(
        mixed, rel=1e-5
    )


def test_kl_terms_send_gradients_to_prior_or_posterior_only():
    q = torch.randn(3, 2, 4, requires_grad=True)
    p = torch.randn(3, 2, 4, requires_grad=True)
    dyn, rep = categorical_kl_terms(q, p, free_nats=0.0)
    dyn.backward()
    assert q.grad is None and p.grad.abs().sum() > 0
    p.grad = None
    rep.backward()
    assert p.grad is None and q.grad.abs().sum() > 0


def test_continuation_lambda_returns_by_hand_and_against_td_lambda():
    r = torch.tensor([[[1.0], [2.0]]])
    v = torch.tensor([[[10.0], [20.0]]])
    c = torch.tensor([[[0.5], [1.0]]])
    # R_1 = 2 + 0.9 * 1 * 20 = 20; R_0 = 1 + 0.9 * 0.5 * (0.2 * 10 + 0.8 * 20) = 9.1
    torch.testing.assert_close(
        continuation_lambda_returns(r, v, c, 0.9, 0.8), torch.tensor([[[9.1], [20.0]]])
    )
    reward, value = torch.randn(3, 6, 1), torch.randn(3, 6, 1)
    done = torch.zeros(3, 6, 1, dtype=torch.bool)
    expected = vec_td_lambda_return_estimate(0.97, 0.9, value, reward, done)
    torch.testing.assert_close(
        continuation_lambda_returns(reward, value, torch.ones_like(reward), 0.97, 0.9), expected
    )


class _FixedWorldModel(nn.Module):
    """Writes fixed logits and predictions under "next" (a world model's outputs)."""

    def __init__(self, prior, post, reco, reward_logits, cont):
        super().__init__()
        self.out = dict(prior_logits=prior, posterior_logits=post, reco_pixels=reco,
                        reward_logits=reward_logits, continue_pred=cont)  # fmt: skip

    def forward(self, td):
        for key, value in self.out.items():
            td.set(("next", key), value)
        return td


def test_model_loss_terms_against_hand_computation():
    B, T, K = 1, 2, 5
    prior = torch.tensor([0.2, 0.8]).log().expand(B, T, 1, 2)
    post = torch.tensor([0.9, 0.1]).log().expand(B, T, 1, 2)
    obs = torch.tensor([[[3.0, -1.0], [0.0, 8.0]]])
    reco = torch.tensor([[[2.0, -1.0], [1.0, 8.0]]])
    reward_logits = torch.zeros(B, T, K)
    cont = torch.tensor([[[0.0], [2.0]]])
    terminated = torch.tensor([[[False], [True]]])
    wm = _FixedWorldModel(prior, post, reco, reward_logits, cont)
    loss = DreamerV3ModelLoss(wm, num_reward_bins=K, free_bits=0.0, kl_mode="separate",
                              lambda_dynamic=1.0, lambda_representation=0.1, lambda_continue=1.0,
                              continue_target_scale=0.5)  # fmt: skip
    loss.set_keys(pixels="observation")
    batch = TensorDict(action=torch.zeros(B, T, 1),
                       next=TensorDict(observation=obs, reward=torch.tensor([[[0.0], [1.0]]]),
                                       terminated=terminated, batch_size=[B, T]),
                       batch_size=[B, T])  # fmt: skip
    out, model_out = loss(batch)
    kl = 0.9 * math.log(0.9 / 0.2) + 0.1 * math.log(0.1 / 0.8)
    assert out["loss_model_dynamic"].item() == pytest.approx(kl, rel=1e-5)
    assert out["loss_model_representation"].item() == pytest.approx(0.1 * kl, rel=1e-5)
    sl = lambda v: math.copysign(math.log1p(abs(v)), v)  # noqa: E731
    step0 = (sl(3) - sl(2)) ** 2
    step1 = (sl(0) - sl(1)) ** 2
    assert out["loss_model_reco"].item() == pytest.approx((step0 + step1) / 2, rel=1e-5)
    assert out["loss_model_reward"].item() == pytest.approx(math.log(K), rel=1e-5)  # uniform logits
    bce0 = -(0.5 * math.log(0.5) + 0.5 * math.log(0.5))  # logit 0, target 0.5
    bce1 = -math.log(1 - 1 / (1 + math.exp(-2.0)))  # terminated: target 0
    assert out["loss_model_continue"].item() == pytest.approx((bce0 + bce1) / 2, rel=1e-5)
    assert out["loss_model_reco"].shape == (1,)
    assert ("next", "true_reward") in model_out.keys(True) and not model_out.requires_grad


def test_model_loss_rejects_bad_settings_and_bin_mismatch():
    wm = _FixedWorldModel(
        *(torch.zeros(1, 1, 1, 2),) * 2,
        torch.zeros(1, 1, 1),
        torch.zeros(1, 1, 4),
        torch.zeros(1, 1, 1),
    )
    with pytest.raises(ValueError, match="kl_mode must be 'balanced' or 'separate', got 'sum'"):
        DreamerV3ModelLoss(wm, kl_mode="sum")
    with pytest.raises(ValueError, match="reco_loss must be 'l1' or 'l2', got 'huber'"):
        DreamerV3ModelLoss(wm, reco_loss="huber")
    with pytest.raises(ValueError, match=r"continue_target_scale must lie in \(0, 1\]"):
        DreamerV3ModelLoss(wm, continue_target_scale=0.0)
    batch = TensorDict(action=torch.zeros(1, 1, 1), next=TensorDict(pixels=torch.zeros(1, 1, 1),
                       reward=torch.zeros(1, 1, 1), batch_size=[1, 1]), batch_size=[1, 1])  # fmt: skip
    with pytest.raises(ValueError, match="reward logits have 4 classes but num_reward_bins=255"):
        DreamerV3ModelLoss(wm)(batch)


# -- actor and critic in imagination ----------------------------------------------------
S, D, A = 4, 8, 1  # state (2 x 2), belief, action


def _imagination(outscale: float = 1.0):
    """Imagination env, actor, critic, continuation model and start states; ``outscale``
    scales the reward and value heads' initial outputs (0: they predict exactly 0)."""
    torch.manual_seed(0)
    prior = RSSMPriorV3(action_shape=(A,), hidden_dim=8, rnn_hidden_dim=D, num_categoricals=2,
                        num_classes=2, action_dim=A, recurrent_model="block_gru", num_blocks=2)  # fmt: skip
    reward_net = DreamerV3MLP(S + D, 11, depth=1, num_cells=8, outscale=outscale)
    world = WorldModelWrapper(
        TensorDictSequential(
            TensorDictModule(prior, ["state", "belief", "action"], ["_", "state", "belief"])
        ),
        TensorDictSequential(
            TensorDictModule(reward_net, ["state", "belief"], ["reward_logits"]),
            TensorDictModule(SymExpTwoHot(11), ["reward_logits"], ["reward"]),
        ),
    )
    real = TransformedEnv(GymEnv("Pendulum-v1"), TensorDictPrimer(random=False, default_value=0,
                          state=Unbounded(S), belief=Unbounded(D)))  # fmt: skip
    env = DreamerEnv(world_model=world, prior_shape=torch.Size([S]), belief_shape=torch.Size([D]))
    env.set_specs_from_env(real)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = DreamerV3MLP(S + D, 2 * A, depth=1, num_cells=8)

        def forward(self, state, belief):
            loc, scale = self.net(state, belief).chunk(2, -1)
            return loc, 0.9 * torch.sigmoid(scale + 2) + 0.1

    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(Actor(), ["state", "belief"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                      distribution_class=TanhNormal, return_log_prob=True,
                                      default_interaction_type=InteractionType.RANDOM),
    )  # fmt: skip
    value = TensorDictSequential(
        TensorDictModule(
            DreamerV3MLP(S + D, 11, depth=1, num_cells=8, outscale=outscale),
            ["state", "belief"],
            ["state_value_logits"],
        ),
        TensorDictModule(SymExpTwoHot(11), ["state_value_logits"], ["state_value"]),
    )
    cont = TensorDictSequential(
        TensorDictModule(
            DreamerV3MLP(S + D, 1, depth=1, num_cells=8), ["state", "belief"], ["continue_logits"]
        ),
        TensorDictModule(nn.Sigmoid(), ["continue_logits"], ["continuation"]),
    )
    start = TensorDict(
        state=torch.eye(2).repeat(3, 2)[:, :S], belief=torch.randn(6, D), batch_size=[6]
    )
    return env, actor, value, cont, start


def test_actor_loss_returns_weights_and_normalised_reinforce_by_hand():
    env, actor, value, cont, start = _imagination()
    loss = DreamerV3ActorLoss(actor, value, env, continuation_model=cont, imagination_horizon=5,
                              use_reinforce=True, entropy_bonus=0.0, return_normalization_rate=0.5)  # fmt: skip
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.8)
    out, fake = loss(start)
    assert fake.shape == (6, 5) and out["loss_actor"].requires_grad
    # the returns, from the rollout's own rewards, values and continuations
    reward, c_next = fake["next", "reward"], fake["next", "continuation"]
    with torch.no_grad():
        v_next = value(fake["next"].select("state", "belief").clone())["state_value"]
        v_root = value(fake.select("state", "belief").clone())["state_value"]
    ret = torch.zeros(6, 5, 1)
    nxt = v_next[:, -1]
    for t in reversed(range(5)):
        nxt = reward[:, t] + 0.9 * c_next[:, t] * (0.2 * v_next[:, t] + 0.8 * nxt)
        ret[:, t] = nxt
    torch.testing.assert_close(fake["lambda_target"], ret)
    c_root = fake["continuation"]
    w = torch.ones(6, 5, 1)
    for t in range(5):
        w[:, t] = c_root[:, 0] if t == 0 else w[:, t - 1] * 0.9 * c_root[:, t]
    torch.testing.assert_close(fake["discount_weight"], w)
    low, high = np.percentile(ret.flatten().numpy(), [5, 95])
    scale = max(1.0, 0.5 * (high - low))  # one EMA step (rate 0.5) from zero
    assert out["return_scale"].item() == pytest.approx(scale, rel=1e-5)
    dist = actor.get_dist(fake.select("state", "belief"))
    log_prob = dist.log_prob(fake["action"]).reshape(6, 5, 1)
    expected = -(w * log_prob * (ret - v_root) / scale).mean()
    assert out["loss_actor"].item() == pytest.approx(expected.item(), rel=1e-4)


def test_actor_loss_trains_only_the_actor_and_checks_its_arguments():
    env, actor, value, cont, start = _imagination()
    loss = DreamerV3ActorLoss(actor, value, env, imagination_horizon=3)
    out, _ = loss(start)
    out["loss_actor"].backward()
    assert all(p.grad is not None for p in actor.parameters())
    assert all(p.grad is None for p in [*value.parameters(), *env.parameters()])
    assert {n for n, _ in loss.named_parameters()} == {
        f"actor_model.{n}" for n, _ in actor.named_parameters()
    }
    with pytest.raises(
        TypeError, match=r"call loss.make_value_estimator\(ValueEstimators.TDLambda"
    ):
        DreamerV3ActorLoss(actor, value, env, gamma=0.9)
    with pytest.raises(ValueError, match=r"return_normalization_quantiles must be \(low, high\)"):
        DreamerV3ActorLoss(actor, value, env, return_normalization_quantiles=(0.9, 0.1))
    with pytest.raises(ValueError, match="value_type must be one of"):
        loss.make_value_estimator(ValueEstimators.GAE)


def test_value_loss_two_hot_with_slow_critic_and_soft_update():
    env, actor, value, cont, start = _imagination()
    actor_loss = DreamerV3ActorLoss(
        actor, value, env, continuation_model=cont, imagination_horizon=4
    )
    actor_loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.95, lmbda=0.9)
    _, fake = actor_loss(start)
    loss = DreamerV3ValueLoss(value, value_loss="two_hot", num_value_bins=11, actor_loss=actor_loss,
                              slow_critic_regularization=1.0)  # fmt: skip
    assert len(list(loss.parameters())) == len(
        list(value.parameters())
    )  # the slow copy is not trained
    out, _ = loss(fake)
    logits = value(fake.select("state", "belief").clone())["state_value_logits"]
    own = SymExpTwoHot(11).decode(logits).detach()  # the slow copy still equals the critic
    ce = SymExpTwoHot(11).loss(logits, fake["lambda_target"].squeeze(-1))
    slow = SymExpTwoHot(11).loss(logits, own)
    w = fake["discount_weight"].squeeze(-1)
    assert out["loss_value"].item() == pytest.approx((w * (ce + slow)).mean().item(), rel=1e-5)
    assert out["value_slow_loss"].item() == pytest.approx((w * slow).mean().item(), rel=1e-5)
    before = [b.clone() for b in loss.target_value_model.buffers()]
    with torch.no_grad():
        for p in value.parameters():
            p.add_(1.0)
    SoftUpdate(loss, tau=0.02).step()
    moved = [
        b for b, old in zip(loss.target_value_model.buffers(), before) if not torch.equal(b, old)
    ]
    assert moved, "the slow critic did not move"


def test_value_loss_gamma_weights_without_discount_weight_and_bad_settings():
    value = TensorDictModule(nn.Linear(2, 1), ["state"], ["state_value"])
    data = TensorDict(
        state=torch.randn(3, 4, 2), lambda_target=torch.randn(3, 4, 1), batch_size=[3, 4]
    )
    out, _ = DreamerV3ValueLoss(value, gamma=0.5)(data)
    pred = value(data.clone())["state_value"].squeeze(-1)
    err = (symlog(pred) - symlog(data["lambda_target"].squeeze(-1))) ** 2
    w = torch.tensor([1.0, 0.5, 0.25, 0.125])
    assert out["loss_value"].item() == pytest.approx((w * err).mean().item(), rel=1e-5)
    with pytest.raises(ValueError, match="value_loss must be 'symlog_mse' or 'two_hot', got 'l2'"):
        DreamerV3ValueLoss(value, value_loss="l2")
    with pytest.raises(ValueError, match="slow_critic_regularization must be >= 0"):
        DreamerV3ValueLoss(value, slow_critic_regularization=-1.0)
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        DreamerV3ValueLoss(value, reduction="max")
    with pytest.raises(KeyError, match="wrote no 'state_value_logits'"):
        DreamerV3ValueLoss(value, value_loss="two_hot")(data)


def test_balanced_kl_mixes_per_categorical_clamped_terms():
    q = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]).log()  # two categoricals
    p = torch.tensor([[[0.2, 0.8], [0.9, 0.1]]]).log()
    first = 0.5 * math.log(0.5 / 0.2) + 0.5 * math.log(0.5 / 0.8)  # the second KL is 0
    expected = (max(first, 0.05) + 0.05) / 2  # each categorical clamped at 0.05, averaged
    assert categorical_kl_balanced(q, p, alpha=0.8, free_bits=0.05).item() == pytest.approx(
        expected, rel=1e-5
    )
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\] \(paper: 0.8\), got 1.5"):
        categorical_kl_balanced(q, p, alpha=1.5)


def test_actor_entropy_bonus_with_an_analytic_entropy():
    env, _, value, _, start = _imagination(outscale=0.0)  # zero returns: the bonus alone

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = DreamerV3MLP(S + D, 2 * A, depth=1, num_cells=8)

        def forward(self, state, belief):
            loc, scale = self.net(state, belief).chunk(2, -1)
            return loc, 0.5 + torch.sigmoid(scale)

    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(Actor(), ["state", "belief"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                      distribution_class=IndependentNormal,
                                      default_interaction_type=InteractionType.RANDOM),
    )  # fmt: skip
    losses = {}
    for eta in (0.0, 0.1):
        loss = DreamerV3ActorLoss(actor, value, env, imagination_horizon=3, entropy_bonus=eta)
        torch.manual_seed(3)  # the same imagined rollout for both
        out, fake = loss(start)
        losses[eta] = out["loss_actor"].item()
    entropy = 0.5 * torch.log(2 * math.pi * math.e * fake["scale"] ** 2).sum(-1, keepdim=True)
    bonus = (fake["discount_weight"] * entropy).mean().item()
    assert losses[0.0] == 0.0
    assert losses[0.1] == pytest.approx(-0.1 * bonus, rel=1e-5)
    torch.testing.assert_close(fake["discount_weight"][0, :, 0], torch.tensor([1.0, 0.99, 0.99**2]))


def test_value_loss_reductions():
    value = TensorDictModule(nn.Linear(2, 1), ["state"], ["state_value"])
    data = TensorDict(state=torch.randn(3, 4, 2), lambda_target=torch.randn(3, 4, 1),
                      discount_weight=torch.rand(3, 4, 1), batch_size=[3, 4])  # fmt: skip
    none = DreamerV3ValueLoss(value, reduction="none")(data)[0]["loss_value"]
    assert none.shape == (3, 4)
    total = DreamerV3ValueLoss(value, reduction="sum")(data)[0]["loss_value"]
    mean = DreamerV3ValueLoss(value)(data)[0]["loss_value"]
    torch.testing.assert_close(total, none.sum())
    torch.testing.assert_close(mean, none.mean())


def test_script_world_model_chain_trains_every_part_on_env_data():
    """TorchRL's script's world model: symlog encoder, RSSM rollout, symexp decoder, two-hot
    reward head and continuation head in one TensorDictSequential, on real env steps."""
    torch.manual_seed(0)
    env = GymEnv("Pendulum-v1")
    data = torch.stack([env.rollout(4), env.rollout(4)])  # [2, 4]
    data = data.select(
        "action", ("next", "observation"), ("next", "reward"), ("next", "terminated")
    )
    data.set("is_init", torch.zeros(2, 4, 1, dtype=torch.bool))
    data.set("state", torch.zeros(2, 4, S))
    data.set("belief", torch.zeros(2, 4, D))
    encoder = DreamerV3MLP(3, 5, depth=1, num_cells=8)
    prior, post = (
        RSSMPriorV3(action_shape=(A,), hidden_dim=8, rnn_hidden_dim=D, num_categoricals=2,
                    num_classes=2, action_dim=A, recurrent_model="block_gru", num_blocks=2),
        RSSMPosteriorV3(hidden_dim=8, num_categoricals=2, num_classes=2, rnn_hidden_dim=D,
                        obs_embed_dim=5, use_rms_norm=True),
    )  # fmt: skip
    world = TensorDictSequential(
        TensorDictModule(symlog, [("next", "observation")], [("next", "symlog_obs")]),
        TensorDictModule(encoder, [("next", "symlog_obs")], [("next", "encoded_latents")]),
        RSSMRolloutV3(
            TensorDictModule(prior, ["state", "belief", "action"],
                             [("next", "prior_logits"), ("next", "state"), ("next", "belief")]),
            TensorDictModule(post, [("next", "belief"), ("next", "encoded_latents")],
                             [("next", "posterior_logits"), ("next", "state")]),
        ),
        TensorDictModule(DreamerV3MLP(S + D, 3, depth=1, num_cells=8),
                         [("next", "state"), ("next", "belief")], [("next", "reco_symlog")]),
        TensorDictModule(symexp, [("next", "reco_symlog")], [("next", "reco_pixels")]),
        TensorDictModule(DreamerV3MLP(S + D, 11, depth=1, num_cells=8, outscale=0.0),
                         [("next", "state"), ("next", "belief")], [("next", "reward_logits")]),
        TensorDictModule(SymExpTwoHot(11), [("next", "reward_logits")], [("next", "reward")]),
        TensorDictModule(DreamerV3MLP(S + D, 1, depth=1, num_cells=8),
                         [("next", "state"), ("next", "belief")], [("next", "continue_pred")]),
    )  # fmt: skip
    loss = DreamerV3ModelLoss(world, num_reward_bins=11, kl_mode="separate", unimix=0.01,
                              lambda_continue=1.0, continue_target_scale=1 - 1 / 333)  # fmt: skip
    loss.set_keys(pixels="observation")
    out, model_out = loss(data)
    assert set(out.keys()) == {"loss_model_dynamic", "loss_model_representation",
                               "loss_model_reco", "loss_model_reward", "loss_model_continue"}  # fmt: skip
    assert out["loss_model_reward"].item() == pytest.approx(math.log(11), rel=1e-5)  # zero head
    sum(out.values()).sum().backward()
    untrained = [n for n, p in world.named_parameters() if p.grad is None]
    assert not untrained, f"no gradient reached {untrained}"
    assert model_out["next", "state"].shape == (2, 4, S)
    torch.testing.assert_close(model_out["next", "true_reward"], data["next", "reward"])
