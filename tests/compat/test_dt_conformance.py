"""TorchRL's decision-transformer pieces as its DT scripts use them."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.envs import GymEnv, Reward2GoTransform, TransformedEnv


def _trajs():
    g = torch.Generator().manual_seed(0)
    reward = torch.randn(2, 5, 1, generator=g)
    done = torch.zeros(2, 5, 1, dtype=torch.bool)
    done[0, 1] = done[0, 4] = done[1, 4] = True  # two episodes in row 0, one in row 1
    return TensorDict({"next": {"reward": reward, "done": done}}, [2, 5])


def test_reward2go_matches_a_plain_loop_per_episode():
    data = _trajs()
    r2g = Reward2GoTransform(
        gamma=0.9,
        in_keys=[("next", "reward"), "reward"],  # the root "reward" is absent: skipped
        out_keys=[("next", "return_to_go"), "return_to_go"],
    )
    out = r2g.inv(data)
    expected = torch.zeros(2, 5)
    for b in range(2):
        g = 0.0
        for t in reversed(range(5)):
            if data["next", "done"][b, t]:
                g = 0.0
            g = float(data["next", "reward"][b, t]) + 0.9 * g
            expected[b, t] = g
    torch.testing.assert_close(out["next", "return_to_go"].squeeze(-1), expected)
    assert r2g(out) is out  # sampling: already there


def test_reward2go_refuses_envs_unfinished_episodes_and_missing_entries():
    with pytest.raises(ValueError, match="cannot run inside an env"):
        TransformedEnv(GymEnv("Pendulum-v1"), Reward2GoTransform())
    data = _trajs()
    data["next", "done"][1] = False
    with pytest.raises(RuntimeError, match="never end"):
        Reward2GoTransform().inv(data)
    with pytest.raises(KeyError, match="none of the reward entries"):
        Reward2GoTransform(in_keys=["r"]).inv(_trajs())
    with pytest.raises(ValueError, match="2 in_keys but 1 out_keys"):
        Reward2GoTransform(in_keys=["a", "b"], out_keys=["c"])


CONFIG = dict(n_embd=16, n_layer=1, n_head=1, n_inner=32, activation="relu",
              n_positions=60, resid_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip


def test_dt_actors_take_torchrls_config_and_respect_causality():
    from torchrl_lite.modules import DTActor, OnlineDTActor

    torch.manual_seed(0)
    actor = DTActor(state_dim=4, action_dim=2, transformer_config=CONFIG).eval()
    obs, act, rtg = torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1)
    out = actor(obs, act, rtg)
    assert out.shape == (3, 10, 2)
    # the prediction at step t sees steps <= t only (and not the action at t)
    later = obs.clone()
    later[:, 6:] += 1.0
    act2 = act.clone()
    act2[:, 5:] += 1.0
    torch.testing.assert_close(actor(later, act2, rtg)[:, :6], out[:, :6])
    assert not torch.allclose(actor(later, act, rtg)[:, 6:], out[:, 6:])
    online = OnlineDTActor(4, 2, CONFIG)
    loc, scale = online(obs, act, rtg)
    assert loc.shape == scale.shape == (3, 10, 2)
    assert bool((scale >= torch.exp(torch.tensor(-5.0)) - 1e-6).all())
    assert bool((scale <= torch.exp(torch.tensor(2.0)) + 1e-6).all())
    with pytest.raises(ValueError, match=r"unknown entries \['n_embed'\]"):
        DTActor(4, 2, {"n_embed": 8})


def test_inference_wrapper_masks_the_old_context_and_keeps_the_last_step():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules import DecisionTransformerInferenceWrapper

    seen = {}

    def spy(observation, action, return_to_go):
        seen.update(obs=observation.clone(), act=action.clone(), rtg=return_to_go.clone())
        return action * 2 + 1

    module = TensorDictModule(spy, ["observation_cat", "action_cat", "return_to_go_cat"],
                              ["action"])  # fmt: skip
    policy = DecisionTransformerInferenceWrapper(policy=module, inference_context=3)
    policy.set_tensor_keys(observation="observation_cat", action="action_cat",
                           return_to_go="return_to_go_cat")  # fmt: skip
    td = TensorDict(observation_cat=torch.ones(2, 8, 4), action_cat=torch.ones(2, 8, 2),
                    return_to_go_cat=torch.arange(8.0).expand(2, 8).unsqueeze(-1),
                    batch_size=[2])  # fmt: skip
    out = policy(td)
    assert seen["obs"][:, :5].abs().sum() == 0 and bool((seen["obs"][:, 5:] == 1).all())
    # actions move one step back (the env's window lags by one); the current one is zero
    assert seen["act"][:, :5].abs().sum() == 0 and bool((seen["act"][:, 5:7] == 1).all())
    assert seen["act"][:, 7].abs().sum() == 0
    assert out["action"].shape == (2, 2) and bool((out["action"] == 1).all())
    assert out["return_to_go_cat"].flatten().tolist() == [7.0, 7.0]
    assert bool((out["observation_cat"] == 1).all())  # the unmasked window comes back
    with pytest.raises(KeyError, match="accepted"):
        policy.set_tensor_keys(reward="r")
    with pytest.raises(ValueError, match="inference_context must be >= 1"):
        DecisionTransformerInferenceWrapper(module, inference_context=0)


def test_v04_exploration_mode_names_are_aliases():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.envs.utils import (
        ExplorationType,
        exploration_type,
        set_exploration_mode,
        set_exploration_type,
    )
    from torchrl_lite.modules import ProbabilisticActor, TanhNormal

    assert set_exploration_mode is set_exploration_type
    with set_exploration_mode("random"):
        assert exploration_type() == ExplorationType.RANDOM
    module = TensorDictModule(lambda x: (x, x.exp()), ["observation"], ["loc", "scale"])
    actor = ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               default_interaction_mode="random", cache_dist=False)  # fmt: skip
    td = TensorDict(observation=torch.zeros(500, 1), batch_size=[500])
    # outside any exploration block the actor samples (the random default), not the mode
    assert actor(td)["action"].std() > 0.1


def test_target_return_modes_reduce_and_constant():
    from torchrl_lite.envs import TargetReturn

    runs = {}
    for mode in ("reduce", "constant"):
        env = TransformedEnv(GymEnv("CartPole-v1"), TargetReturn(10.0, out_keys=["return_to_go"],
                                                                 mode=mode))  # fmt: skip
        env.set_seed(0)
        runs[mode] = env.rollout(3, break_when_any_done=False)["next", "return_to_go"].flatten()
    assert runs["reduce"].tolist() == [9.0, 8.0, 7.0]  # CartPole pays 1 per step
    assert runs["constant"].tolist() == [10.0, 10.0, 10.0]
    with pytest.raises(ValueError, match="mode must be 'reduce' or 'constant', got 'sum'"):
        TargetReturn(10.0, mode="sum")


def _env_windows(obs, act, rtg, t, steps):
    """The windows a CatFrames env holds at step ``t`` of one episode (zero-padded):
    states and returns-to-go up to ``t``, actions up to ``t - 1`` (the env's action entry
    at ``t`` is the one taken before ``s_t``)."""

    def window(seq, last):
        out = torch.zeros(steps, seq.shape[-1])
        for i in range(steps):
            j = last - (steps - 1) + i
            if j >= 0:
                out[i] = seq[j]
        return out

    return window(obs, t), window(act, t - 1), window(rtg, t)


def test_inference_wrapper_feeds_each_state_with_the_action_taken_at_it():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules import DecisionTransformerInferenceWrapper

    seen = {}

    def spy(observation, action, return_to_go):
        seen.update(obs=observation, act=action, rtg=return_to_go)
        return action.sum(-1, keepdim=True)

    module = TensorDictModule(spy, ["o", "a", "r"], ["action"])
    policy = DecisionTransformerInferenceWrapper(module, inference_context=4)
    policy.set_tensor_keys(observation="o", action="a", return_to_go="r")
    g = torch.Generator().manual_seed(1)
    obs, act, rtg = (torch.randn(12, d, generator=g) for d in (3, 2, 1))  # one episode
    steps, ctx = 6, 4
    for t in (0, 2, 9):
        o, a, r = _env_windows(obs, act, rtg, t, steps)
        policy(TensorDict(o=o, a=a, r=r))
        # reference: window position i holds step j = t - 5 + i; kept when i >= steps - ctx,
        # and its action is the one taken at s_j, known only for j < t
        for i in range(steps):
            j = t - (steps - 1) + i
            kept = i >= steps - ctx and j >= 0
            torch.testing.assert_close(seen["obs"][i], obs[j] if kept else torch.zeros(3))
            torch.testing.assert_close(seen["rtg"][i], rtg[j] if kept else torch.zeros(1))
            torch.testing.assert_close(seen["act"][i], act[j] if kept and j < t else torch.zeros(2))
    with pytest.raises(ValueError, match=r"differ in length \{'o': 6, 'a': 5, 'r': 6\}"):
        policy(TensorDict(o=torch.zeros(6, 3), a=torch.zeros(5, 2), r=torch.zeros(6, 1)))


def _odt_policy(state_dim, action_dim, steps, ctx, seed=0):
    from tensordict.nn import TensorDictModule

    from torchrl_lite.data import Bounded
    from torchrl_lite.modules import (
        DecisionTransformerInferenceWrapper,
        OnlineDTActor,
        ProbabilisticActor,
        TanhNormal,
    )

    torch.manual_seed(seed)
    config = dict(CONFIG, n_embd=32, n_layer=2, n_head=2, n_inner=64, n_positions=3 * steps,
                  resid_pdrop=0.1, attn_pdrop=0.1)  # fmt: skip
    net = OnlineDTActor(state_dim, action_dim, config)
    keys = ["observation_cat", "action_cat", "return_to_go_cat"]
    actor = ProbabilisticActor(
        TensorDictModule(net, keys, ["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=Bounded(-1.0, 1.0, (action_dim,)),
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
    )
    policy = DecisionTransformerInferenceWrapper(policy=actor, inference_context=ctx)
    policy.set_tensor_keys(observation=keys[0], action=keys[1], return_to_go=keys[2])
    return net, policy.eval()


def test_inference_wrapper_action_equals_each_env_computed_alone():
    """Several envs at once (their zeroed old context runs once for all) give each env
    the action the plain model gives it alone, from its hand-masked window."""
    from torchrl_lite.envs.utils import ExplorationType, set_exploration_type

    steps, ctx, n = 10, 3, 4
    net, policy = _odt_policy(3, 2, steps, ctx)
    g = torch.Generator().manual_seed(2)
    obs, act, rtg = torch.randn(n, steps, 3, generator=g), torch.randn(n, steps, 2, generator=g), \
        torch.randn(n, steps, 1, generator=g)  # fmt: skip
    td = TensorDict(observation_cat=obs, action_cat=act, return_to_go_cat=rtg, batch_size=[n])
    with torch.no_grad(), set_exploration_type(ExplorationType.MODE):
        out = policy(td)["action"]
        for b in range(n):
            o, a, r = obs[b].clone(), torch.zeros(steps, 2), rtg[b].clone()
            o[: steps - ctx] = 0
            r[: steps - ctx] = 0
            a[steps - ctx : steps - 1] = act[b, steps - ctx + 1 :]  # the action taken at s_i
            loc, _ = net.eval()(o[None], a[None], r[None])  # one env: nothing shared
            torch.testing.assert_close(out[b], torch.tanh(loc[0, -1]), atol=1e-5, rtol=1e-5)


def test_shared_prefix_blocks_equal_the_plain_blocks_and_refuse_training():
    from torchrl_lite.modules.models.decision_transformer import DecisionTransformer
    from torchrl_lite.modules.models.dt_shared_prefix import (
        blocks_with_shared_prefix,
        shared_prefix_length,
    )

    torch.manual_seed(0)
    net = DecisionTransformer(3, 2, 8, hidden=16, n_layer=2, n_head=2).eval()
    tokens = torch.randn(5, 12, 16)
    tokens[:, :7] = tokens[:1, :7]  # 7 leading tokens shared by all rows
    assert shared_prefix_length(tokens) == 7
    plain = net.blocks(tokens, mask=torch.ones(12, 12, dtype=torch.bool).tril().logical_not())
    torch.testing.assert_close(blocks_with_shared_prefix(net.blocks, tokens, 7), plain,
                               atol=1e-5, rtol=1e-5)  # fmt: skip
    with pytest.raises(ValueError, match=r"shared must be in \[1, 12\), got 12"):
        blocks_with_shared_prefix(net.blocks, tokens, 12)
    with pytest.raises(ValueError, match="eval mode"):
        blocks_with_shared_prefix(net.blocks.train(), tokens, 7)


def test_acting_model_sees_fixed_windows_and_runs_old_context_once():
    """In a CatFrames env (as TorchRL's online DT script builds it), the model gets the
    same window shape at every step however long the episode, and the zeroed old context
    passes through the blocks once per step, not once per env."""
    from torchrl_lite.data import Bounded
    from torchrl_lite.envs import (
        CatFrames,
        SerialEnv,
        TargetReturn,
        TensorDictPrimer,
        UnsqueezeTransform,
    )
    from torchrl_lite.envs.utils import ExplorationType, set_exploration_type

    steps, ctx, n = 6, 2, 2
    base = SerialEnv(n, lambda: GymEnv("Pendulum-v1"))
    env = TransformedEnv(base, TargetReturn(-100.0, out_keys=["return_to_go"]))
    env.append_transform(TensorDictPrimer(action=Bounded(-2.0, 2.0, (n, 1))))
    keys = ["observation", "action", "return_to_go"]
    cat_keys = [f"{k}_cat" for k in keys]
    env.append_transform(UnsqueezeTransform(-2, in_keys=keys, out_keys=cat_keys))
    env.append_transform(CatFrames(steps, dim=-2, in_keys=cat_keys, padding="constant"))
    net, policy = _odt_policy(3, 1, steps, ctx)
    windows, rows = [], []
    net.register_forward_hook(lambda m, args, out: windows.append(tuple(args[0].shape)))
    ff = net.transformer.net.blocks.layers[0].linear1
    ff.register_forward_hook(lambda m, args, out: rows.append(tuple(args[0].shape)))
    env.set_seed(0)
    with torch.no_grad(), set_exploration_type(ExplorationType.MODE):
        td = env.rollout(3 * steps, policy, break_when_any_done=False)
    assert td.shape == (n, 3 * steps)
    assert windows == [(n, steps, 3)] * (3 * steps)
    # one pass per step over at most the shared old context once plus each env's last
    # ctx steps (3 tokens a step), where running every env's window would be n * 3T rows
    assert len(rows) == 3 * steps
    limit = 3 * (steps - ctx) + n * 3 * ctx
    assert all(r[0] <= limit < n * 3 * steps for r in rows), rows


def test_tanh_delta_safe_keeps_saturated_actions_inside_the_bounds():
    from torchrl_lite.modules import TanhDelta

    param = torch.tensor([[0.3, 50.0, -50.0]])
    high = torch.tensor([2.0, 2.0, 2.0])
    plain = TanhDelta(param, low=-high, high=high).mode
    safe = TanhDelta(param, low=-high, high=high, safe=True).mode
    assert plain[0, 1:].tolist() == [2.0, -2.0]  # the plain tanh reaches the bounds
    assert bool((safe.abs() < 2.0).all())  # the safe one stays strictly inside
    torch.testing.assert_close(safe, 2.0 * torch.tanh(param), atol=1e-5, rtol=0.0)


def test_dt_loss_accepts_the_device_keyword_of_current_scripts():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.objectives import DTLoss

    actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
    batch = TensorDict(observation=torch.randn(4, 5, 3), action_cat=torch.randn(4, 5, 2),
                       batch_size=[4, 5])  # fmt: skip
    losses = []
    for device in (None, "cpu"):
        loss = DTLoss(actor, loss_function="l2", device=device)
        loss.set_keys(action_target="action_cat")
        losses.append(loss(batch)["loss"])
    expected = (actor(batch.clone())["action"] - batch["action_cat"]).pow(2).mean()
    torch.testing.assert_close(losses[0], expected)
    torch.testing.assert_close(losses[1], expected)


def test_dt_actor_drops_out_like_gpt2_not_inside_the_mlp():
    """GPT-2 (TorchRL's DT backbone) applies dropout to each residual branch's output, not
    to the MLP's hidden units: in training, the second MLP layer reads exactly the
    activation of the first one's output."""
    from torchrl_lite.modules import OnlineDTActor

    torch.manual_seed(0)
    config = dict(CONFIG, n_layer=2, resid_pdrop=0.5, attn_pdrop=0.5)
    actor = OnlineDTActor(4, 2, config).train()
    seen = {}
    for i, layer in enumerate(actor.transformer.net.blocks.layers):
        layer.linear1.register_forward_hook(lambda m, a, out, i=i: seen.update({(i, 1): out}))
        layer.linear2.register_forward_hook(lambda m, a, out, i=i: seen.update({(i, 2): a[0]}))
    loc, _ = actor(torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1))
    for i in range(2):
        torch.testing.assert_close(seen[(i, 2)], torch.relu(seen[(i, 1)]))
    # dropout is still on elsewhere: two training passes differ, two eval passes agree
    x = torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1)
    assert not torch.allclose(actor(*x)[0], actor(*x)[0])
    actor.eval()
    torch.testing.assert_close(actor(*x)[0], actor(*x)[0])
