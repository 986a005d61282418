"""Dreamer networks: shapes, the 64x64 check, and RSSMPolicy's filter against a hand loop."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded
from torchrl_lite.envs import DreamerEnv, ExplorationType, set_exploration_type
from torchrl_lite.modules import ObsDecoder, ObsEncoder, RewardHead, RSSMPosterior, RSSMPrior
from torchrl_lite.modules.models.dreamer import RSSMPolicy, scale_image
from torchrl_lite.recipes import config_for, get_recipe


def test_encoder_decoder_shapes_and_scale():
    enc, dec = ObsEncoder(3, depth=4), ObsDecoder(10, 3, depth=4)
    x = torch.full((2, 3, 3, 64, 64), 255, dtype=torch.uint8)
    assert enc(x).shape == (2, 3, 128) and dec(torch.zeros(2, 3, 10)).shape == (2, 3, 3, 64, 64)
    assert scale_image(x).max() == 0.5 and scale_image(torch.zeros(1)).item() == 0.0
    with pytest.raises(ValueError, match="expects 64x64 images, got \\[84, 84\\]"):
        enc(torch.zeros(1, 3, 84, 84))


def test_decoder_equals_its_layers_run_as_transposed_convolutions():
    # the first transposed convolution is computed as a matrix product: same output, same grads
    torch.manual_seed(0)
    dec = ObsDecoder(10, 3, depth=4)
    features = torch.randn(2, 5, 10)
    got = dec(features)
    got.square().sum().backward()
    grads = [p.grad.clone() for p in dec.parameters()]
    dec.zero_grad()
    plain = dec.net(dec.linear(features.reshape(10, 10))[:, :, None, None]).reshape(2, 5, 3, 64, 64)
    plain.square().sum().backward()
    torch.testing.assert_close(got, plain)
    for mine, ref in zip(grads, [p.grad for p in dec.parameters()]):
        torch.testing.assert_close(mine, ref)


def test_prior_posterior_std_floor_and_sample_statistics():
    prior = RSSMPrior(2, 4, 8, 8, min_std=0.1)
    mean, std, state, belief = prior(
        torch.zeros(4096, 4), torch.zeros(4096, 8), torch.zeros(4096, 2)
    )
    assert (std > 0.1).all() and belief.shape == (4096, 8)
    torch.testing.assert_close(state.mean(0), mean.mean(0), atol=0.05, rtol=0)
    _, std, _ = RSSMPosterior(8, 5, 4, 8, min_std=0.2)(torch.zeros(3, 8), torch.zeros(3, 5))
    assert (std > 0.2).all()


def test_dreamer_env_rollout_matches_a_hand_loop_and_needs_start_states():
    torch.manual_seed(0)
    prior, rew = RSSMPrior(1, 4, 8, 8), RewardHead(12, 8)
    env = DreamerEnv(prior, rew, Bounded(-1.0, 1.0, (1,)))
    start = TensorDict(state=torch.randn(3, 4), belief=torch.randn(3, 8), batch_size=[3])
    actions = torch.rand(3, 4, 1) * 2 - 1
    steps = iter(range(4))
    policy = lambda td: td.set("action", actions[:, next(steps)])  # noqa: E731
    torch.manual_seed(1)
    out = env.rollout(4, policy, auto_reset=False, tensordict=start.clone())
    torch.manual_seed(1)
    s, h = start["state"], start["belief"]
    for t in range(4):
        _, _, s, h = prior(s, h, actions[:, t])
        torch.testing.assert_close(out["next", "reward"][:, t], rew(torch.cat([s, h], -1)))
    torch.testing.assert_close(out["next", "state"][:, -1], s)
    assert not out["next", "done"].any()
    with pytest.raises(KeyError, match="DreamerEnv starts from model states"):
        env.reset()


def test_rssm_policy_restarts_where_is_init_and_filters_elsewhere():
    torch.manual_seed(0)
    cfg = config_for(get_recipe("dreamer"), state_dim=4, belief_dim=8, hidden=8)

    class _Env:
        action_spec = Bounded(-1.0, 1.0, (1,))

    actor, _ = get_recipe("dreamer").make_actor_value(cfg, _Env())
    enc = ObsEncoder(3, depth=2)
    prior, post = RSSMPrior(1, 4, 8, 8), RSSMPosterior(8, enc.out_features, 4, 8)
    policy = RSSMPolicy(enc, prior, post, actor, -1.0, 1.0, "pixels", exploration_noise=0.0)
    px = torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8)
    td = lambda init: TensorDict(pixels=px, is_init=torch.tensor([[init], [False]]), batch_size=[2])  # noqa: E731
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        first = policy(td(True))["action"]
        state, belief, action = policy._carry
        assert (belief == 0).all()  # nothing carried yet: both start
        torch.manual_seed(3)
        policy(td(True))
        _, belief2, _ = policy._carry
        torch.manual_seed(3)
        expected = prior(state, belief, action)[3]
    assert (belief2[0] == 0).all()  # env 0 restarted
    torch.testing.assert_close(belief2[1], expected[1])  # env 1 filtered
    assert first.shape == (2, 1) and first.abs().max() <= 1


def test_full_size_config_builds_the_papers_networks():
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, **recipe.FULL_SIZE)
    assert (cfg.depth, cfg.belief_dim, cfg.batch_size, cfg.slice_len) == (32, 200, 50, 50)
    from torchrl_lite.data import Composite, Unbounded

    class _Env:
        observation_spec = Composite(
            {"pixels_stack": Unbounded((3, 64, 64), dtype=torch.uint8)}, shape=()
        )
        action_spec = Bounded(-1.0, 1.0, (1,))

    encoder, decoder, prior, posterior, reward = recipe.make_world_model(cfg, _Env())
    assert encoder.out_features == 1024  # Dreamer's embedding
    assert prior.belief_dim == 200 and prior.state_dim == 30
    small = recipe.make_world_model(config_for(recipe), _Env())
    count = lambda mods: sum(p.numel() for m in mods for p in m.parameters())  # noqa: E731
    assert count(small) < count((encoder, decoder, prior, posterior, reward)) / 3


def _ln(x, norm):
    """LayerNorm written out: standardize over the last dim, then scale and shift."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + norm.eps).sqrt() * norm.weight + norm.bias


def _randomize_norms(module):
    norms = [m for m in module.modules() if isinstance(m, torch.nn.LayerNorm)]
    for norm in norms:  # off their (1, 0) start, so a missed affine would show
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    return norms


def test_layer_norm_rssm_and_heads_match_hand_written_layers():
    """``layer_norm=True`` puts a LayerNorm before the ELU of every hidden layer: the prior,
    the posterior and the reward/value head against the formulas; off, nothing is added
    (same parameter names as before the option)."""
    torch.manual_seed(0)
    elu = torch.nn.functional.elu
    prior = RSSMPrior(action_dim=2, state_dim=3, belief_dim=5, hidden=6, layer_norm=True)
    norm_in, norm_head = _randomize_norms(prior)[::-1]  # head's first, then the input's
    s, h, a = torch.randn(4, 3), torch.randn(4, 5), torch.randn(4, 2)
    torch.manual_seed(1)
    mean, std, sample, belief = prior(s, h, a)
    lin = prior.action_state
    x = elu(_ln(torch.cat([s, a], -1) @ lin.weight.T + lin.bias, norm_in))
    expected_belief = prior.rnn(x, h)
    first, last = prior.head[0], prior.head[3]
    y = elu(_ln(expected_belief @ first.weight.T + first.bias, norm_head))
    y = y @ last.weight.T + last.bias
    torch.testing.assert_close(belief, expected_belief)
    torch.testing.assert_close(mean, y[:, :3])
    torch.testing.assert_close(std, torch.nn.functional.softplus(y[:, 3:]) + 0.1)
    torch.manual_seed(1)
    torch.testing.assert_close(sample, mean + std * torch.randn_like(std))

    post = RSSMPosterior(belief_dim=5, embed_dim=7, state_dim=3, hidden=6, layer_norm=True)
    (norm,) = _randomize_norms(post)
    e = torch.randn(4, 7)
    first, last = post.net[0], post.net[3]
    y = elu(_ln(torch.cat([h, e], -1) @ first.weight.T + first.bias, norm))
    y = y @ last.weight.T + last.bias
    torch.testing.assert_close(post(h, e)[0], y[:, :3])

    head = RewardHead(8, hidden=6, depth=3, layer_norm=True)
    norms = _randomize_norms(head)
    linears = [m for m in head.modules() if isinstance(m, torch.nn.Linear)]
    assert len(norms) == 3 and len(linears) == 4
    f = x = torch.randn(4, 8)
    for linear, norm in zip(linears, norms, strict=False):
        x = elu(_ln(x @ linear.weight.T + linear.bias, norm))
    torch.testing.assert_close(head(f), x @ linears[3].weight.T + linears[3].bias)

    plain = [RSSMPrior(2, 3, 5, 6), RSSMPosterior(5, 7, 3, 6), RewardHead(8, 6, 3)]
    for module in plain:
        assert not any(isinstance(m, torch.nn.LayerNorm) for m in module.modules())
    assert set(plain[0].state_dict()) == {
        "action_state.weight", "action_state.bias", "rnn.weight_ih", "rnn.weight_hh",
        "rnn.bias_ih", "rnn.bias_hh", "head.0.weight", "head.0.bias", "head.2.weight",
        "head.2.bias",
    }  # fmt: skip


def test_dreamer_recipe_layer_norm_reaches_every_mlp():
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, "dm_control/cartpole-swingup", pixels=False, layer_norm=True)
    env = recipe.make_train_env(cfg)
    encoder, decoder, prior, posterior, reward = recipe.make_world_model(cfg, env)
    actor, value = recipe.make_actor_value(cfg, env)
    count = lambda m: sum(isinstance(x, torch.nn.LayerNorm) for x in m.modules())  # noqa: E731
    assert [count(m) for m in (prior, posterior, reward, actor, value)] == [2, 1, 2, 3, 3]
    assert count(encoder) == count(decoder) == 0
