"""SAC from pixels (DrQ), Dreamer and Atari recipes; pixels on an env that cannot render."""

import dataclasses
import json

import gymnasium
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.cli import main
from torchrl_lite.envs import RandomShift, check_env_specs
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import PIXELS_STACK, apply_overrides, make_env


class _NoRender(gymnasium.Env):
    metadata = {"render_modes": ["human"]}
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,))
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,))

    def __init__(self, render_mode=None):
        self.render_mode = render_mode


gymnasium.register("NoRenderTest-v0", entry_point=_NoRender)


def test_pixels_on_an_env_that_cannot_render_names_the_env_and_render_mode():
    msg = "render_mode='rgb_array'.*'NoRenderTest-v0' offers render modes \\['human'\\]"
    with pytest.raises(ValueError, match=msg):
        make_env("NoRenderTest-v0", pixels=True)
    recipe = get_recipe("dqn")
    with pytest.raises(ValueError, match="'NoRenderTest-v0'"):
        recipe.make_train_env(config_for(recipe, "NoRenderTest-v0", pixels=True))


def test_dreamer_on_a_non_pixel_env_is_a_clear_error():
    recipe = get_recipe("dreamer")
    with pytest.raises(ValueError, match="render_mode='rgb_array'.*'NoRenderTest-v0'"):
        recipe.make_train_env(config_for(recipe, "NoRenderTest-v0"))


class _ImageObs(_NoRender):
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (4, 4))


gymnasium.register("ImageObsTest-v0", entry_point=_ImageObs)


def test_dreamer_state_mode_needs_a_flat_observation_vector():
    recipe = get_recipe("dreamer")
    with pytest.raises(
        ValueError, match="pixels=false needs a flat float 'observation'.*'ImageObsTest-v0'"
    ):
        recipe.make_train_env(config_for(recipe, "ImageObsTest-v0", pixels=False))


@pytest.mark.dm_control
def test_dreamer_state_mode_observes_the_state_vector_and_trains(tmp_path, capsys):
    pytest.importorskip("dm_control")
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, pixels=False, seed=3, action_repeat=4)
    env = recipe.make_train_env(cfg)
    assert (
        env.observation_spec["observation"].shape == (5,)
        and PIXELS_STACK not in env.observation_spec
    )
    raw = make_env("dm_control/cartpole-swingup", seed=3, frame_skip=4)  # the same state
    torch.testing.assert_close(env.reset()["observation"], raw.reset()["observation"])
    encoder, decoder, *_ = recipe.make_world_model(config_for(recipe, pixels=False, hidden=8), env)
    assert encoder(torch.zeros(2, 5)).shape == (2, 8) and decoder(torch.zeros(2, 130)).shape == (
        2,
        5,
    )
    tiny = [f"{k}={v}" for k, v in DREAMER_TINY.items()]
    out = tmp_path / "dreamer-state"
    args = ["train", "dreamer", "--frames", "32", "--out", str(out), "--quiet", "--logger", "none"]
    assert main([*args, *tiny, "pixels=false"]) == 0
    assert json.loads((out / "config.json").read_text())["config"]["pixels"] is False
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "1"]) == 0
    assert "over 1 episodes" in capsys.readouterr().out


def test_atari_env_is_preprocessed_the_standard_way():
    pytest.importorskip("ale_py")
    env = make_env("ALE/Pong-v5", num_envs=2, seed=0)
    spec = env.observation_spec[PIXELS_STACK]
    assert spec.shape == (2, 4, 84, 84) and spec.dtype == torch.uint8
    check_env_specs(env)
    td = env.rollout(40, break_when_any_done=False)
    assert td["next", "reward"].abs().max() <= 1  # clipped for learning
    assert (td["next", PIXELS_STACK][:, :-1] == td[PIXELS_STACK][:, 1:]).all()
    env.close()


def _drq_loss(seed=0):
    recipe = get_recipe("sac")
    cfg = config_for(recipe, "dm_control/cartpole-swingup", pixels=True, hidden=16, feature_dim=8)

    class _Env:  # what the builders read: a [4, 64, 64] stack and a 1-d action
        from torchrl_lite.data import Bounded, Composite, Unbounded

        observation_spec = Composite(
            {PIXELS_STACK: Unbounded((4, 64, 64), dtype=torch.uint8)}, shape=()
        )
        action_spec = Bounded(-1.0, 1.0, (1,))

    torch.manual_seed(seed)
    encoder = recipe.make_encoder(cfg, _Env())
    conv_out = encoder.out_features((4, 64, 64))
    actor, qvalue = recipe.make_actor_qvalue(
        cfg, _Env(), recipe.FEATURES, conv_out, cfg.feature_dim
    )
    from torchrl_lite.objectives import DrQLoss, SACLoss

    sac = SACLoss(actor, qvalue, action_spec=_Env.action_spec, gamma=0.99)
    return DrQLoss(encoder, sac, pixels_key=PIXELS_STACK, feature_key=recipe.FEATURES), encoder


def _pixel_batch(n=16):
    g = torch.Generator().manual_seed(0)
    px = lambda: torch.randint(0, 256, (n, 4, 64, 64), generator=g, dtype=torch.uint8)  # noqa: E731
    flag = torch.zeros(n, 1, dtype=torch.bool)
    return TensorDict(
        {PIXELS_STACK: px(), "action": torch.rand(n, 1, generator=g) * 2 - 1,
         "next": {PIXELS_STACK: px(), "reward": torch.rand(n, 1, generator=g), "done": flag, "terminated": flag}},
        batch_size=[n],
    )  # fmt: skip


def _tiny_sac_pixels(frames: int, **overrides: str):
    """The sac recipe on cartpole-swingup from pixels, with small networks."""
    recipe = get_recipe("sac")
    cfg = apply_overrides(
        config_for(recipe, "dm_control/cartpole-swingup", frames=frames),
        {"pixels": "true", "hidden": "16", "feature_dim": "8", **overrides},
    )
    return recipe, cfg


def replay_buffer_of(trainer):
    """The replay buffer a trainer samples from (its ReplayBufferTrainer hook's)."""
    return next(op.__self__ for op, _ in trainer._ops["process_optim_batch"]).replay_buffer


def test_drq_encoder_is_trained_by_the_critic_only_and_matches_sac_on_its_features():
    loss, encoder = _drq_loss()
    batch = _pixel_batch()
    torch.manual_seed(1)
    out = loss(batch)
    enc_params = list(encoder.parameters())
    actor_grads = torch.autograd.grad(
        out["loss_actor"] + out["loss_alpha"], enc_params, retain_graph=True, allow_unused=True
    )
    assert all(g is None or g.abs().sum() == 0 for g in actor_grads)
    critic_grads = torch.autograd.grad(out["loss_qvalue"], enc_params, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in critic_grads)
    # the same numbers as SACLoss on the features (online encoder now, target encoder next)
    with torch.no_grad():
        feats = TensorDict(
            {"features": encoder(batch[PIXELS_STACK]), "action": batch["action"],
             "next": {"features": loss.target_encoder(batch["next", PIXELS_STACK]),
                      **{k: batch["next", k] for k in ("reward", "done", "terminated")}}},
            batch_size=[16],
        )  # fmt: skip
        torch.manual_seed(1)
        ref = loss.sac_loss(feats.clone())  # one pass: DrQLoss computes each term once
    for key in ("loss_qvalue", "loss_actor", "loss_alpha", "entropy", "td_error"):
        torch.testing.assert_close(out[key], ref[key])


def test_drq_critic_loss_goes_down_on_a_fixed_batch():
    loss, _ = _drq_loss()
    batch = _pixel_batch(8)
    opt = torch.optim.Adam(loss.parameters(), lr=1e-3)
    values = []
    for _ in range(60):  # the heads read 5408 conv features: slower than a 50-d input
        out = loss(batch.clone())
        values.append(out["loss_qvalue"].item())
        opt.zero_grad()
        (out["loss_qvalue"] + out["loss_actor"] + out["loss_alpha"]).backward()
        opt.step()
    assert sum(values[-5:]) < 0.5 * sum(values[:5])


@pytest.mark.dm_control
def test_sac_pixel_policy_shares_the_encoder_and_the_buffer_shifts_uint8_samples():
    pytest.importorskip("dm_control")
    recipe, cfg = _tiny_sac_pixels(16, init_random_frames="16")
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    assert cfg.action_repeat == 8 and PIXELS_STACK in policy.in_keys
    encoder = trainer.loss_module.encoder
    assert any(p is q for p in encoder.parameters() for q in policy.parameters())  # one encoder
    trainer.train()  # random frames only: fills the buffer
    buffer = replay_buffer_of(trainer)
    stored = buffer.storage.get(torch.arange(8))
    assert stored[PIXELS_STACK].dtype == torch.uint8
    assert "features" not in stored.keys()  # the policy's conv features are not stored
    shift = buffer.transform
    assert isinstance(shift, RandomShift) and shift.pad == cfg.pad
    assert buffer.sample(64)[PIXELS_STACK].dtype == torch.uint8
    trainer.collector.shutdown() if hasattr(trainer.collector, "shutdown") else None


@pytest.mark.slow
@pytest.mark.dm_control
def test_sac_pixels_cli_trains_and_resumes(tmp_path):
    pytest.importorskip("dm_control")
    tiny = ["hidden=16", "feature_dim=8", "batch_size=4", "init_random_frames=16"]
    out = tmp_path / "sac"
    args = ["train", "sac", "--env", "dm_control/cartpole-swingup", "--frames", "24"]
    assert (
        main([*args, "--out", str(out), "--quiet", "--logger", "none", "pixels=true", *tiny]) == 0
    )
    assert main(["train", "--resume", str(out), "frames=32", "--quiet", "--logger", "none"]) == 0
    assert json.loads((out / "summary.json").read_text())["frames"] == 32


@pytest.mark.slow
@pytest.mark.dm_control
def test_dreamer_trains_a_few_batches_from_pixels_and_evaluates(tmp_path, capsys):
    pytest.importorskip("dm_control")
    tiny = ["init_random_frames=24", "frames_per_batch=24", "optim_steps_per_batch=2",
            "batch_size=2", "slice_len=8", "depth=2", "belief_dim=8", "hidden=8", "horizon=3",
            "action_repeat=8"]  # fmt: skip
    out = tmp_path / "dreamer"
    args = ["train", "dreamer", "--frames", "48", "--out", str(out), "--quiet", "--logger", "none"]
    assert main([*args, *tiny]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "1"]) == 0
    assert "over 1 episodes" in capsys.readouterr().out


# a Dreamer small enough for a test: one random batch of 16 agent steps, then one more
DREAMER_TINY = dict(init_random_frames=16, frames_per_batch=16, batch_size=2, slice_len=8,
                    depth=2, belief_dim=8, hidden=8, horizon=3, action_repeat=8)  # fmt: skip


@pytest.mark.dm_control
def test_dreamer_defaults_to_50_updates_per_batch_of_250_agent_steps():
    pytest.importorskip("dm_control")
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe)
    assert (cfg.optim_steps_per_batch, cfg.frames_per_batch, cfg.action_repeat) == (50, 250, 4)
    tiny = {k: v for k, v in DREAMER_TINY.items() if k != "frames_per_batch"}
    trainer, _ = recipe.make_trainer(config_for(recipe, **tiny), progress_bar=False)
    assert trainer.optim_steps_per_batch == 50


@pytest.mark.dm_control
def test_dreamer_clips_model_actor_and_value_gradients_each_on_its_own():
    pytest.importorskip("dm_control")
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, **DREAMER_TINY, optim_steps_per_batch=0, frames=16)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()  # fills the buffer
    hook = trainer._modules["optimizer"]
    groups = {g["name"]: g["params"] for g in hook.optimizer.param_groups}
    assert sorted(groups) == ["actor", "model", "value"] and hook.clip_per_group
    sample = trainer._modules["replay_buffer"].replay_buffer.sample(16)
    torch.manual_seed(0)
    out = trainer.loss_module(sample.clone())
    sum(v for k, v in out.items() if k.startswith("loss")).backward()
    by_hand = {
        name: torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        for name, params in groups.items()
    }  # each part's own gradient norm, before any clipping
    hook.optimizer.zero_grad()
    torch.manual_seed(0)
    out = hook(trainer.loss_module(sample.clone()), True, 1e-3)  # clips every part
    for name in groups:
        assert out[f"grad_norm_0_{name}"].item() == pytest.approx(by_hand[name].item(), rel=1e-5)
    assert by_hand["model"] > 10 * by_hand["actor"]  # one joint norm would shrink the actor's


@pytest.mark.dm_control
def test_dreamer_reward_scale_reaches_the_world_model_loss():
    pytest.importorskip("dm_control")  # the loss's weighting: tests/objectives/test_dreamer.py
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe, **DREAMER_TINY, frames=16, reward_scale=30.0)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    model_loss = trainer.loss_module.model_loss
    assert (model_loss.reward_scale, model_loss.reco_scale, model_loss.kl_scale) == (30.0, 1.0, 1.0)
    # by default 30 from pixels (the reconstruction sums ~12k pixel errors), 1 from the state
    assert recipe.reward_scale(config_for(recipe)) == 30.0
    assert recipe.reward_scale(config_for(recipe, pixels=False)) == 1.0
    assert recipe.reward_scale(config_for(recipe, pixels=False, reward_scale=5.0)) == 5.0


@pytest.mark.dm_control
@pytest.mark.parametrize("interval", [3, 2])
def test_dreamer_slow_value_model_is_copied_every_interval_updates(interval):
    pytest.importorskip("dm_control")
    recipe = get_recipe("dreamer")
    cfg = config_for(
        recipe, **DREAMER_TINY, optim_steps_per_batch=3, frames=32, slow_value_interval=interval
    )
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    actor_loss = trainer.loss_module.actor_loss
    start = [p.detach().clone() for p in actor_loss.value_model.parameters()]
    trainer.train()  # one batch of 3 updates: copies after update 3 (interval 3) or 2
    online = list(actor_loss.value_model.parameters())
    slow = list(actor_loss.target_value_model.buffers())
    assert all(not torch.equal(p, s) for p, s in zip(online, start))  # the value model moved
    same = all(torch.equal(p, b) for p, b in zip(online, slow))
    assert same == (interval == 3)


def test_ppo_acts_with_a_categorical_policy_on_discrete_actions():
    recipe = get_recipe("ppo")
    cfg = config_for(recipe, "CartPole-v1", frames=64, frames_per_batch=32, num_envs=2)
    cfg = apply_overrides(cfg, {"mini_batch_size": "16", "epochs": "1", "hidden": "8"})
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()
    env = recipe.make_train_env(cfg)
    td = policy(env.reset())
    assert td["action"].sum(-1).eq(1).all() and "logits" in td.keys()
    assert td["sample_log_prob"].shape == (2,)
    env.close()


@pytest.mark.dm_control
def test_sac_pixels_default_to_two_updates_per_agent_step():
    pytest.importorskip("dm_control")
    recipe, cfg = _tiny_sac_pixels(16)
    assert (cfg.utd_ratio, cfg.frames_per_batch, cfg.layer_norm) == (2.0, 2, True)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    assert trainer.optim_steps_per_batch == 4  # 2 updates for each of the batch's 2 agent steps
    trainer.collector.shutdown()
    assert _tiny_sac_pixels(16, utd_ratio="1")[1].utd_ratio == 1.0  # an override wins
    assert config_for(recipe).utd_ratio == 1.0  # from the state: one update per step


@pytest.mark.dm_control
def test_sac_pixel_options_reach_the_loss_encoder_and_env():
    pytest.importorskip("dm_control")
    recipe, cfg = _tiny_sac_pixels(16, loss_function="l1", conv_strides="2,1,1", grayscale="false")
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    assert loss.sac_loss.loss_function == "l1"
    convs = [m for m in loss.encoder.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.stride[0] for c in convs] == [2, 1, 1] and convs[0].in_channels == 12
    env = recipe.make_train_env(cfg)
    td = env.reset()
    assert td[PIXELS_STACK].shape == (12, 64, 64)  # 4 RGB frames
    env.close()


@pytest.mark.dm_control
def test_sac_pixels_k_m_copies_move_the_shift_from_the_buffer_into_the_loss():
    pytest.importorskip("dm_control")
    recipe, cfg = _tiny_sac_pixels(
        16, target_augs="2", q_augs="2", pad="3", init_random_frames="8", batch_size="4"
    )
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    assert (loss.num_target_augs, loss.num_q_augs, loss.augment.__self__.pad) == (2, 2, 3)
    assert replay_buffer_of(trainer).transform is None  # unshifted samples reach the loss
    trainer.train()  # 8 agent steps of updates: the loss runs on real samples
    assert trainer.collected_frames == 16
    trainer.collector.shutdown() if hasattr(trainer.collector, "shutdown") else None


def test_sac_pixel_conv_strides_must_be_three_positive_ints():
    recipe = get_recipe("sac")
    cfg = config_for(recipe, "dm_control/cartpole-swingup", pixels=True, conv_strides=(2, 1))

    class _Env:
        from torchrl_lite.data import Composite, Unbounded

        observation_spec = Composite(
            {PIXELS_STACK: Unbounded((4, 64, 64), dtype=torch.uint8)}, shape=()
        )

    with pytest.raises(ValueError, match=r"conv_strides must be three ints >= 1.*\(2, 1\)"):
        recipe.make_encoder(cfg, _Env())


def test_orthogonal_init_matches_drq_on_layers_and_each_ensemble_copy():
    recipe = get_recipe("sac")
    loss, encoder = _drq_loss()
    recipe.orthogonal_init_(loss)
    convs = [m for m in encoder.modules() if isinstance(m, torch.nn.Conv2d)]
    for conv in convs:  # delta-orthogonal: only the centre tap, orthogonal with ReLU gain
        w = conv.weight
        off = w.clone()
        off[:, :, 1, 1] = 0
        assert off.abs().sum() == 0 and conv.bias.abs().sum() == 0
        c = w[:, :, 1, 1]  # [out, in]
        small = c.T @ c if c.shape[0] >= c.shape[1] else c @ c.T
        torch.testing.assert_close(small, 2.0 * torch.eye(small.shape[0]), atol=1e-4, rtol=0)
    ens = loss.sac_loss.qvalue_network.params
    w = ens.get(("module", "net", "0", "weight"))  # [2, hidden, in]
    b = ens.get(("module", "net", "0", "bias"))
    for i in range(2):  # [16, 9]: orthonormal columns
        torch.testing.assert_close(w[i].T @ w[i], torch.eye(w.shape[2]), atol=1e-4, rtol=0)
    assert b.abs().sum() == 0 and not torch.equal(w[0], w[1])
    ln = ens.get(("module", "head", "1", "weight"))  # LayerNorm: untouched
    assert torch.equal(ln, torch.ones_like(ln))


@pytest.mark.dm_control
def test_sac_pixels_orthogonal_init_starts_targets_equal_to_online():
    pytest.importorskip("dm_control")
    recipe = get_recipe("sac")
    cfg = config_for(
        recipe, "dm_control/cartpole-swingup", pixels=True, hidden=16, feature_dim=8,
        init="orthogonal",
    )  # fmt: skip
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    for online, target in loss.target_pairs():
        for a, b in zip(online.parameters(), target.buffers()):
            assert torch.equal(a, b)
    conv = next(m for m in loss.encoder.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight[:, :, 0].abs().sum() == 0  # delta-orthogonal, not PyTorch's default
    with pytest.raises(ValueError, match="init must be 'default' or 'orthogonal', got 'xavier'"):
        recipe.make_trainer(dataclasses.replace(cfg, init="xavier"), progress_bar=False)


def test_dreamer_actor_mean_is_bounded_and_std_starts_at_init_std():
    from torchrl_lite.recipes.dreamer import DreamerActorParams

    params = DreamerActorParams(mean_scale=5.0, init_std=5.0, min_std=1e-4)
    raw = torch.tensor([[-1e4, 0.0], [0.3, -1e4], [1e4, 1e4]])  # [B, 2A], A = 1
    loc, scale = params(raw)
    # written out: loc = 5 tanh(m / 5), scale = softplus(s + softplus^-1(5)) + 1e-4
    expected_loc = 5.0 * torch.tanh(raw[:, :1] / 5.0)
    expected_scale = (
        torch.nn.functional.softplus(raw[:, 1:] + torch.log(torch.expm1(torch.tensor(5.0)))) + 1e-4
    )
    torch.testing.assert_close(loc, expected_loc)
    torch.testing.assert_close(scale, expected_scale)
    assert float(loc.abs().max()) <= 5.0 and float(scale.min()) == pytest.approx(1e-4)
    assert float(scale[0]) == pytest.approx(5.0 + 1e-4)
    # the gradient reaches a mean that has run far out (tanh(10) would pass ~8e-9)
    raw = torch.tensor([[-10.0, 0.0]], requires_grad=True)
    params(raw)[0].sum().backward()
    assert float(raw.grad[0, 0]) > 0.05
    with pytest.raises(ValueError, match="mean_scale and init_std must be > 0"):
        DreamerActorParams(mean_scale=0.0)


def test_dreamer_trunc_normal_actor_is_dreamerv2s_and_keeps_the_gradient_at_a_bound():
    from torchrl_lite.data import Bounded
    from torchrl_lite.modules import TruncatedNormal
    from torchrl_lite.recipes.dreamer import TruncNormalActorParams

    raw = torch.tensor([[-3.0, -20.0], [0.4, 0.0], [8.0, 20.0]])  # [B, 2A], A = 1
    loc, scale = TruncNormalActorParams()(raw)
    # written out: loc = tanh(m), scale = 2 sigmoid(s / 2) + 0.1
    torch.testing.assert_close(loc, torch.tanh(raw[:, :1]))
    torch.testing.assert_close(scale, 2 / (1 + torch.exp(-raw[:, 1:] / 2)) + 0.1)
    recipe = get_recipe("dreamer")

    class _Env:
        action_spec = Bounded(-1.0, 1.0, (1,))

    cfg = config_for(recipe, actor_dist="trunc_normal", state_dim=3, belief_dim=4, hidden=8)
    actor, _ = recipe.make_actor_value(cfg, _Env())
    td = actor(TensorDict(state=torch.randn(64, 3), belief=torch.randn(64, 4), batch_size=[64]))
    assert isinstance(actor.get_dist(td), TruncatedNormal)
    assert td["action"].abs().max() <= 1.0 and td["sample_log_prob"].shape == (64,)
    # a mean near the bound still moves the samples: d E[a] / d raw_mean is far from 0,
    # where a tanh-squashed sample at pre-tanh mean 4.9 passes ~2e-4
    raw_mean = torch.tensor([[2.5]], requires_grad=True)
    dist = TruncatedNormal(torch.tanh(raw_mean).expand(4096, 1), torch.full((4096, 1), 0.2))
    torch.manual_seed(0)
    dist.rsample().mean().backward()
    assert float(raw_mean.grad) > 0.005
    with pytest.raises(ValueError, match="actor_dist must be 'tanh_normal' or 'trunc_normal'"):
        recipe.make_actor_value(config_for(recipe, actor_dist="normal"), _Env())


@pytest.mark.dm_control
def test_sac_pixels_n_step_stores_complete_windows_and_rejects_a_bad_n():
    pytest.importorskip("dm_control")
    from torchrl_lite.data import MultiStep

    recipe, cfg = _tiny_sac_pixels(20, init_random_frames="20", n_step="3")
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    post = trainer.collector.postproc
    assert isinstance(post, MultiStep) and post.n_steps == 2 and post.across_batches
    trainer.train()  # random frames only: fills the buffer
    buffer = replay_buffer_of(trainer)
    stored = buffer.storage.get(torch.arange(len(buffer)))
    assert len(buffer) == 18  # the last two steps wait for the next batch
    assert (stored["steps_to_next_obs"] == 3).all()  # no episode ends in 20 agent steps
    # the bootstrap stack is the one three agent steps later
    assert torch.equal(stored["next", PIXELS_STACK][:-3], stored[PIXELS_STACK][3:])
    torch.testing.assert_close(
        stored["next", "reward"][0],
        sum(0.99**i * stored["next", "original_reward"][i] for i in range(3)),
    )
    with pytest.raises(ValueError, match="n_step must be an int >= 1, got 0"):
        recipe.make_trainer(dataclasses.replace(cfg, n_step=0), progress_bar=False)


@pytest.mark.parametrize("head_dim", [None, 3])
def test_sac_layer_norm_q_network_matches_a_hand_written_forward(head_dim):
    """``layer_norm=true`` normalizes each hidden layer of the Q-networks over its units
    before the ReLU (the textbook formula), from the state and behind a feature head;
    the actor keeps its plain MLP."""
    from torchrl_lite.data import Bounded, Composite, Unbounded

    recipe = get_recipe("sac")
    cfg = dataclasses.replace(recipe.Config(), hidden=8, layer_norm=True)

    class _Env:
        observation_spec = Composite({"observation": Unbounded((5,))}, shape=())
        action_spec = Bounded(-1.0, 1.0, (2,))

    actor, qvalue = recipe.make_actor_qvalue(cfg, _Env(), "observation", 5, head_dim)
    actor_norms = [m for m in actor.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(actor_norms) == (0 if head_dim is None else 1)  # only a feature head's
    norms = [m for m in qvalue.modules() if isinstance(m, torch.nn.LayerNorm)]
    linears = [m for m in qvalue.module.net.modules() if isinstance(m, torch.nn.Linear)]
    assert len(norms) == (2 if head_dim is None else 3) and len(linears) == 3
    hidden_norms = norms[-2:]  # a feature head's own LayerNorm comes first
    for norm in hidden_norms:
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    obs, action = torch.randn(4, 5), torch.rand(4, 2) * 2 - 1
    features = obs if head_dim is None else qvalue.module.head(obs)
    x = torch.cat([features, action], -1)
    for linear, norm in zip(linears[:2], hidden_norms, strict=True):
        x = x @ linear.weight.T + linear.bias
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        x = ((x - mean) / (var + 1e-5).sqrt() * norm.weight + norm.bias).clamp_min(0)
    expected = x @ linears[2].weight.T + linears[2].bias
    td = TensorDict({"observation": obs, "action": action}, [4])
    torch.testing.assert_close(qvalue(td)["state_action_value"], expected)
