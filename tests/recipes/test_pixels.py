"""Pixel recipes: the frame-stack env, against hand-preprocessed gymnasium renders, and
PPO/DQN training, checkpoints and eval (with a video) from pixels."""

import json

import gymnasium
import pytest
import torch
import torch.nn.functional as F

from torchrl_lite.cli import main
from torchrl_lite.envs import check_env_specs
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import (
    PIXEL_FRAMES,
    PIXEL_SIZE,
    PIXELS_STACK,
    apply_overrides,
    make_env,
)

STACK_SHAPE = (PIXEL_FRAMES, PIXEL_SIZE, PIXEL_SIZE)  # [4, 64, 64]
TINY = {"frames_per_batch": "32", "hidden": "16", "num_envs": "2"}
TINY_ALGO = {
    "ppo": {"mini_batch_size": "16", "epochs": "1"},
    "dqn": {"init_random_frames": "32", "batch_size": "8", "optim_steps_per_batch": "2"},
}


def _reference_frame(rgb) -> torch.Tensor:
    """A gymnasium render [H, W, 3] uint8 -> [1, 64, 64] uint8, with torch directly."""
    x = torch.from_numpy(rgb).permute(2, 0, 1).float()  # [3, H, W]
    gray = (x * torch.tensor([0.2989, 0.587, 0.114]).reshape(3, 1, 1)).sum(0, keepdim=True)
    gray = gray.round()  # [1, H, W]
    small = F.interpolate(gray[None], size=(PIXEL_SIZE, PIXEL_SIZE), mode="area")[0]
    return small.round().to(torch.uint8)  # [1, 64, 64]


@pytest.mark.parametrize("num_envs", [0, 2])
def test_pixel_env_observes_a_uint8_frame_stack(num_envs):
    env = make_env("CartPole-v1", num_envs=num_envs, seed=0, pixels=True)
    spec = env.observation_spec[PIXELS_STACK]
    batch = (num_envs,) if num_envs else ()
    assert spec.shape == (*batch, *STACK_SHAPE) and spec.dtype == torch.uint8
    assert "observation" not in env.observation_spec and "pixels" not in env.observation_spec
    check_env_specs(env)
    rollout = env.rollout(5)
    assert rollout[PIXELS_STACK].shape == (*batch, 5, *STACK_SHAPE)
    env.close()


def test_pixel_stack_matches_hand_preprocessed_gymnasium_renders():
    actions = [0, 1, 1, 0, 1, 0, 0, 1]
    raw = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    raw.reset(seed=0)
    frames = [_reference_frame(raw.render())]
    for a in actions:
        raw.step(a)
        frames.append(_reference_frame(raw.render()))
    raw.close()

    env = make_env("CartPole-v1", seed=0, pixels=True)
    steps = iter(actions)
    policy = lambda td: td.set("action", F.one_hot(torch.tensor(next(steps)), 2))  # noqa: E731
    rollout = env.rollout(len(actions), policy, break_when_any_done=False)
    env.close()
    padded = [frames[0]] * (PIXEL_FRAMES - 1) + frames  # the first frame repeats at reset
    for t in range(len(actions) + 1):
        expected = torch.cat(padded[t : t + PIXEL_FRAMES]).int()  # [4, 64, 64], oldest first
        got = rollout[PIXELS_STACK][t] if t < len(actions) else rollout["next", PIXELS_STACK][-1]
        assert (got.int() - expected).abs().max() <= 1, t  # two uint8 roundings apart
    assert (rollout["next", PIXELS_STACK][:-1] == rollout[PIXELS_STACK][1:]).all()


def test_pixels_override_brings_the_pixel_defaults_and_explicit_values_win():
    recipe = get_recipe("dqn")
    cfg = apply_overrides(config_for(recipe, "CartPole-v1", frames=500), {"pixels": "true"})
    assert cfg.pixels and cfg.frames == 500
    assert {k: getattr(cfg, k) for k in recipe.PIXEL_DEFAULTS} == recipe.PIXEL_DEFAULTS
    cfg = apply_overrides(config_for(recipe), {"pixels": "true", "batch_size": "64"})
    assert cfg.batch_size == 64 and cfg.buffer_size == recipe.PIXEL_DEFAULTS["buffer_size"]
    assert apply_overrides(config_for(recipe), {"batch_size": "64"}).buffer_size == 100_000


@pytest.mark.parametrize("layer_norm", [False, True])
def test_dqn_layer_norm_q_network_matches_a_hand_written_forward(layer_norm):
    """``layer_norm`` (on with ``pixels=true``) normalizes each hidden layer of the Q-head
    over its units before the ReLU; checked against the textbook formula."""
    recipe = get_recipe("dqn")
    cfg = apply_overrides(config_for(recipe, "CartPole-v1"), {"hidden": "16"})
    cfg = apply_overrides(cfg, {"pixels": "true"} if layer_norm else {})
    assert cfg.layer_norm is layer_norm
    env = recipe.make_train_env(apply_overrides(cfg, {"num_envs": "0"}))
    actor = recipe.make_qvalue_actor(cfg, env)
    net = actor[0].module
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    norms = [m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(linears) == 3 and len(norms) == (2 if layer_norm else 0)
    for norm in norms:  # move the affine parameters off their (1, 0) start
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    obs = torch.randint(0, 256, (5, *(STACK_SHAPE if layer_norm else (4,))))
    obs = obs.to(torch.uint8) if layer_norm else obs.float()
    x = net[0](obs) if layer_norm else obs  # the conv features (pixels) or the state
    for i, linear in enumerate(linears[:2]):
        x = x @ linear.weight.T + linear.bias
        if layer_norm:
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            x = (x - mean) / (var + 1e-5).sqrt() * norms[i].weight + norms[i].bias
        x = x.clamp_min(0)
    expected = x @ linears[2].weight.T + linears[2].bias
    torch.testing.assert_close(net(obs), expected)


def _train_tiny(algo, env_id, **extra):
    recipe = get_recipe(algo)
    cfg = apply_overrides(
        config_for(recipe, env_id, frames=64),
        {"pixels": "true", **TINY, **TINY_ALGO[algo], **extra},
    )
    if algo == "dqn":
        cfg = apply_overrides(cfg, {"buffer_size": "256"})
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    losses = []
    trainer.loss_module.register_forward_hook(lambda module, args, out: losses.append(out))
    trainer.train()
    assert trainer.collected_frames == 64 and losses
    for out in losses:
        for key, value in out.items():
            if key.startswith("loss"):
                assert value.isfinite().all(), key
    assert all(p.isfinite().all() for p in trainer.loss_module.parameters())
    return trainer, policy


@pytest.mark.parametrize(("algo", "env_id"), [("ppo", "Pendulum-v1"), ("dqn", "CartPole-v1")])
def test_recipe_trains_a_few_batches_from_pixels(algo, env_id):
    trainer, policy = _train_tiny(algo, env_id)
    assert PIXELS_STACK in policy.in_keys and "observation" not in policy.in_keys


def test_ppo_pixel_actor_and_critic_have_their_own_encoders():
    recipe = get_recipe("ppo")
    cfg = apply_overrides(config_for(recipe), {"pixels": "true", "num_envs": "0"})
    env = recipe.make_train_env(cfg)
    actor, critic = recipe.make_actor_critic(cfg, env)
    actor_ids = {id(p) for p in actor.parameters()}
    assert actor_ids.isdisjoint(id(p) for p in critic.parameters())
    loss = recipe.make_loss(cfg, actor, critic)
    params = list(loss.parameters())
    assert len(params) == len({id(p) for p in params})  # each parameter once in the optimizer
    env.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "ALE/Pong-v5"])
def test_ppo_shared_encoder_is_one_trunk_trained_by_both_losses(env_id):
    recipe = get_recipe("ppo")
    cfg = apply_overrides(
        config_for(recipe, env_id, num_envs=2, hidden=32),
        {"pixels": "true", "shared_encoder": "true"},
    )
    env = recipe.make_train_env(cfg)
    actor, critic = recipe.make_actor_critic(cfg, env)
    trunk = {id(p) for p in actor.module[0].module[0].parameters()}
    assert trunk == {id(p) for p in critic.module[0].parameters()}  # the same tensors
    loss = recipe.make_loss(cfg, actor, critic)
    params = list(loss.parameters())
    assert len(params) == len({id(p) for p in params})  # each parameter once in the optimizer
    policy_head, value_head = actor.module[0].module[1], critic.module[1]
    n = policy_head.weight.shape[0]  # orthogonal rows, gain 0.01 (SB3 / CleanRL)
    w = policy_head.weight
    torch.testing.assert_close(w @ w.T, 1e-4 * torch.eye(n), atol=1e-7, rtol=0)
    batch = env.rollout(6, actor, break_when_any_done=False)
    batch = recipe.GAE(gamma=0.99, lmbda=0.95, value_network=critic)(batch).reshape(-1)
    out = loss(batch)
    trunk_params = list(actor.module[0].module[0].parameters())
    for term, head, other in (
        ("loss_objective", policy_head, value_head),
        ("loss_critic", value_head, policy_head),
    ):
        wanted = [*trunk_params, head.weight, other.weight]
        grads = torch.autograd.grad(out[term], wanted, retain_graph=True, allow_unused=True)
        assert all(g is not None and g.abs().sum() > 0 for g in grads[:-1]), term
        assert grads[-1] is None or grads[-1].abs().sum() == 0, term  # not the other head
    env.close()


@pytest.mark.parametrize("setting", ["pad=8", "feature_dim=32", "conv_strides=2,1,1",
                                     "grayscale=false"])  # fmt: skip
def test_sac_pixel_settings_without_pixels_are_refused(setting):
    recipe = get_recipe("sac")
    name, _, value = setting.partition("=")
    cfg = apply_overrides(config_for(recipe), {name: value})
    with pytest.raises(ValueError, match=rf"sac: {name}=.* needs pixels=true \(Pendulum-v1"):
        recipe.make_trainer(cfg, progress_bar=False)


def test_ppo_shared_encoder_bad_inputs_are_clear_errors():
    recipe = get_recipe("ppo")
    env = make_env("Pendulum-v1", seed=0)
    with pytest.raises(ValueError, match="needs pixels=true"):
        recipe.make_actor_critic(config_for(recipe, shared_encoder=True), env)
    env.close()
    cfg = apply_overrides(
        config_for(recipe), {"pixels": "true", "shared_encoder": "true", "use_sde": "true"}
    )
    env = make_env("Pendulum-v1", seed=0, pixels=True)
    with pytest.raises(ValueError, match="does not support use_sde"):
        recipe.make_actor_critic(cfg, env)
    env.close()


def test_ppo_trains_a_few_batches_with_a_shared_pixel_encoder():
    _train_tiny("ppo", "Pendulum-v1", shared_encoder="true")


@pytest.mark.dm_control
def test_ppo_trains_a_few_batches_from_dm_control_pixels():
    pytest.importorskip("dm_control")
    _train_tiny("ppo", "dm_control/cartpole-swingup")


def test_pixel_trainer_checkpoint_round_trip(tmp_path):
    trainer, policy = _train_tiny("dqn", "CartPole-v1")
    trainer.save(tmp_path / "checkpoint")
    recipe = get_recipe("dqn")
    cfg = apply_overrides(
        config_for(recipe, "CartPole-v1", frames=64),
        {"pixels": "true", **TINY, **TINY_ALGO["dqn"], "buffer_size": "256", "seed": "1"},
    )
    fresh, fresh_policy = recipe.make_trainer(cfg, progress_bar=False)
    fresh.load(tmp_path / "checkpoint")
    assert fresh.collected_frames == trainer.collected_frames
    saved, loaded = trainer.loss_module.state_dict(), fresh.loss_module.state_dict()
    assert saved.keys() == loaded.keys()
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)


def _cli_pixel_run(out) -> None:
    tiny = [f"{k}={v}" for k, v in {**TINY, **TINY_ALGO["dqn"], "buffer_size": "256"}.items()]
    args = ["train", "dqn", "--env", "CartPole-v1", "--frames", "64", "--out", str(out)]
    assert main([*args, "--quiet", "--logger", "none", "pixels=true", *tiny]) == 0


def test_cli_pixel_run_trains_and_evaluates_with_a_video(tmp_path, capsys):
    out = tmp_path / "dqn"
    _cli_pixel_run(out)
    saved = json.loads((out / "config.json").read_text())["config"]
    assert saved["pixels"] is True and saved["lr"] == get_recipe("dqn").PIXEL_DEFAULTS["lr"]
    capsys.readouterr()
    video = tmp_path / "eval.mp4"
    assert main(["eval", str(out), "--episodes", "1", "--video", str(video)]) == 0
    assert "over 1 episodes" in capsys.readouterr().out
    assert video.stat().st_size > 0


def test_cli_pixel_run_resumes(tmp_path):
    out = tmp_path / "dqn"
    _cli_pixel_run(out)
    assert main(["train", "--resume", str(out), "frames=128", "--quiet", "--logger", "none"]) == 0
    assert json.loads((out / "summary.json").read_text())["frames"] == 128


def test_vectorized_pixel_frames_are_each_sub_envs_own_render_across_resets():
    actions = torch.randint(0, 2, (30, 2), generator=torch.Generator().manual_seed(0))
    env = make_env("CartPole-v1", num_envs=2, seed=0, pixels=True)
    steps = iter(range(30))
    policy = lambda td: td.set("action", F.one_hot(actions[next(steps)], 2))  # noqa: E731
    rollout = env.rollout(30, policy, break_when_any_done=False)
    env.close()
    for i in range(2):  # sub-env i is seeded seed + i; compare up to its first episode end
        raw = gymnasium.make("CartPole-v1", render_mode="rgb_array")
        raw.reset(seed=i)
        for t in range(30):
            _, _, terminated, truncated, _ = raw.step(int(actions[t, i]))
            got = rollout["next", PIXELS_STACK][i, t, -1].int()
            assert (got - _reference_frame(raw.render())[0].int()).abs().max() <= 1, (i, t)
            if terminated or truncated:
                break
        raw.close()
