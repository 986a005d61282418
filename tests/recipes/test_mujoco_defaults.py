"""The recipes' MuJoCo settings: PPO's observation/reward normalization, SAC's critic loss."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.agent.normalization import ReturnNormalizer, RunningNorm
from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.ppo import NormalizationHooks, _observation_norm
from torchrl_lite.recipes.ranges import STRUCTURAL

# MuJoCo writes MUJOCO_LOG.TXT into the working folder: a temporary one here
pytestmark = pytest.mark.usefixtures("mujoco_log_in_tmp")

SMALL_PPO = dict(frames=96, frames_per_batch=32, mini_batch_size=16, epochs=1, hidden=16)


def _norm_of(trainer) -> RunningNorm:
    norms = [m for m in trainer.loss_module.modules() if isinstance(m, RunningNorm)]
    assert len(norms) == 1  # one module, shared by the actor and the critic
    return norms[0]


def test_ppo_mujoco_defaults_are_the_papers_with_normalization():
    ppo = get_recipe("ppo")
    cfg = config_for(ppo, "HalfCheetah-v5")
    assert (cfg.frames_per_batch, cfg.epochs, cfg.mini_batch_size, cfg.lr) == (2048, 10, 64, 3e-4)
    assert (cfg.gamma, cfg.lmbda, cfg.clip_epsilon, cfg.num_envs) == (0.99, 0.95, 0.2, 1)
    assert cfg.normalize_obs and cfg.normalize_reward and not cfg.recompute_advantage
    assert cfg.squash and cfg.ortho_init and cfg.lr_decay  # init and lr as baselines, CleanRL
    classic = config_for(ppo, "Pendulum-v1")  # classic control keeps its settings
    assert not classic.normalize_obs and not classic.normalize_reward
    assert classic.recompute_advantage and classic.gamma == 0.9
    assert classic.squash and not classic.ortho_init and not classic.lr_decay
    assert "normalize_obs" in STRUCTURAL  # the checkpoint's networks hold the statistics
    assert "squash" in STRUCTURAL  # another policy for the same weights


def test_ppo_unsquashed_gaussian_steps_the_env_clipped_and_scores_the_raw_sample():
    ppo = get_recipe("ppo")
    cfg = config_for(ppo, "Hopper-v5", **SMALL_PPO, init_log_std=1.0, squash=False)  # wide
    trainer, policy = ppo.make_trainer(cfg, progress_bar=False)
    assert trainer.loss_module.tensor_keys.action == "raw_action"
    with set_exploration_type(ExplorationType.RANDOM):  # as the collector samples
        td = trainer.collector.env.rollout(64, policy)
    raw, action = td["raw_action"], td["action"]
    assert (raw.abs() > 1).any()  # Hopper's bounds are [-1, 1]
    torch.testing.assert_close(action, raw.clamp(-1.0, 1.0))
    loc, scale = td["loc"], td["scale"]
    want = torch.distributions.Normal(loc, scale).log_prob(raw).sum(-1)
    torch.testing.assert_close(td["sample_log_prob"], want)


def test_ppo_orthogonal_init_gains():
    ppo = get_recipe("ppo")
    trainer, _ = ppo.make_trainer(config_for(ppo, "Hopper-v5", **SMALL_PPO), progress_bar=False)
    loss = trainer.loss_module
    for net, head_gain in ((loss.actor_network, 0.01), (loss.critic_network, 1.0)):
        layers = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
        assert len(layers) == 3
        for layer, gain in zip(layers, (2**0.5, 2**0.5, head_gain)):
            w = layer.weight.detach()
            rows, cols = w.shape  # orthogonal: the shorter side's vectors are orthonormal
            gram = w @ w.T if rows <= cols else w.T @ w
            torch.testing.assert_close(gram, gain**2 * torch.eye(min(rows, cols)))
            assert not layer.bias.any()


def test_ppo_lr_decays_linearly_by_batch_and_a_resumed_run_continues(tmp_path):
    ppo = get_recipe("ppo")
    cfg = config_for(ppo, "InvertedPendulum-v5", **SMALL_PPO)  # 3 batches of 32
    assert cfg.lr_decay
    trainer, _ = ppo.make_trainer(cfg, progress_bar=False, checkpoint=tmp_path / "ckpt")
    seen = []
    trainer.register_op("process_optim_batch", lambda b: seen.append(
        trainer.optimizer.param_groups[0]["lr"]))  # fmt: skip
    trainer.train()
    assert seen == pytest.approx([cfg.lr * f for f in (1, 1, 2 / 3, 2 / 3, 1 / 3, 1 / 3)])
    longer = config_for(ppo, "InvertedPendulum-v5", **{**SMALL_PPO, "frames": 128})
    resumed, _ = ppo.make_trainer(longer, progress_bar=False)
    resumed.load(tmp_path / "ckpt")  # at 96 frames: the 4th of 4 batches
    seen.clear()
    resumed.register_op("process_optim_batch", lambda b: seen.append(
        resumed.optimizer.param_groups[0]["lr"]))  # fmt: skip
    resumed.train()
    assert seen == pytest.approx([cfg.lr * 1 / 4] * 2)


def test_sac_mujoco_critic_regresses_the_squared_error():
    sac = get_recipe("sac")
    assert config_for(sac, "HalfCheetah-v5").loss_function == "l2"
    assert config_for(sac, "dm_control/cheetah-run").loss_function == "smooth_l1"
    assert config_for(sac, "Pendulum-v1").loss_function == "smooth_l1"
    trainer, _ = sac.make_trainer(
        config_for(sac, "InvertedPendulum-v5", frames=8, init_random_frames=4, hidden=8),
        progress_bar=False,
    )
    assert trainer.loss_module.loss_function == "l2"


def test_ppo_observation_statistics_take_in_each_batch_after_its_updates():
    ppo = get_recipe("ppo")
    cfg = config_for(ppo, "InvertedPendulum-v5", **SMALL_PPO)
    trainer, policy = ppo.make_trainer(cfg, progress_bar=False)
    norm = _norm_of(trainer)
    assert norm in list(policy.modules())
    seen, counts_in_updates = [], []
    trainer.register_op("batch_process", lambda b: seen.append(b["observation"].clone()))
    trainer.register_op("process_optim_batch", lambda b: counts_in_updates.append(int(norm.count)))
    trainer.train()
    observations = torch.cat([o.reshape(-1, o.shape[-1]) for o in seen])  # [N, obs_dim]
    assert int(norm.count) == observations.shape[0] == 96
    torch.testing.assert_close(norm.mean, observations.mean(0))
    torch.testing.assert_close(norm.var, observations.var(0, unbiased=False))
    # the updates of batch k use the statistics of batches 0..k-1 (as its collection did)
    assert counts_in_updates == [0, 0, 32, 32, 64, 64]


def test_ppo_reward_normalization_scales_a_copy_by_the_discounted_return_std():
    reward = torch.tensor([1.0, 2.0, -1.0, 0.5, 3.0]).reshape(1, 5, 1)  # [B, T, 1]
    done = torch.tensor([False, True, False, False, False]).reshape(1, 5, 1)
    batch = TensorDict(
        {"observation": torch.zeros(1, 5, 2), "next": {"reward": reward.clone(), "done": done}},
        [1, 5],
    )
    hooks = NormalizationHooks(None, ReturnNormalizer(gamma=0.5))
    out = hooks.process(batch)
    returns, ret = [], 0.0  # a plain loop over time
    for r, d in zip(reward.flatten().tolist(), done.flatten().tolist()):
        ret = ret * 0.5 + r
        returns.append(ret)
        ret = 0.0 if d else ret
    std = torch.tensor(returns, dtype=torch.float64).var(unbiased=False).sqrt()
    torch.testing.assert_close(out["next", "reward"], (reward / std).float())
    torch.testing.assert_close(batch["next", "reward"], reward)  # the collector's is untouched
    assert hooks.state_dict()["returns"]["count"] == 5


def test_ppo_normalization_state_survives_a_checkpoint(tmp_path):
    ppo = get_recipe("ppo")
    cfg = config_for(ppo, "InvertedPendulum-v5", **SMALL_PPO)
    trainer, _ = ppo.make_trainer(cfg, progress_bar=False, checkpoint=tmp_path / "ckpt")
    trainer.train()
    saved_returns = trainer._modules["normalization"].returns.state_dict()
    resumed, _ = ppo.make_trainer(cfg, progress_bar=False)
    resumed.load(tmp_path / "ckpt")
    assert resumed._modules["normalization"].returns.state_dict() == saved_returns
    for name in ("count", "mean", "var"):
        torch.testing.assert_close(
            getattr(_norm_of(resumed), name), getattr(_norm_of(trainer), name)
        )


def test_ppo_normalize_obs_refuses_image_observations():
    cfg = get_recipe("ppo").Config(normalize_obs=True, pixels=True, env="CartPole-v1")
    with pytest.raises(ValueError, match="normalize_obs=true standardises a state vector.*"
                       "'pixels_stack'.*Drop normalize_obs=true"):  # fmt: skip
        _observation_norm(cfg, None, "pixels_stack")


def test_td3_computes_the_actor_loss_only_on_the_actor_steps():
    td3 = get_recipe("td3")
    cfg = config_for(td3, "Pendulum-v1", frames=40, init_random_frames=20, hidden=8,
                     batch_size=16, policy_delay=3)  # fmt: skip
    trainer, _ = td3.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    forward, computed = loss.forward, []

    def recording(td):
        out = forward(td)
        computed.append("loss_actor" in out.keys())
        return out

    loss.forward = recording
    trainer.train()
    assert trainer.optim_count == 20
    assert computed == [(i + 1) % 3 == 0 for i in range(20)]  # the actor's optimizer steps
    actor_adam = trainer.state_dict()["hooks"]["actor_optimizer"]["optimizer"]["state"]
    assert all(int(state["step"]) == 6 for state in actor_adam.values())


def test_td3_one_backward_pass_gives_each_network_its_own_loss_gradient():
    td3 = get_recipe("td3")
    cfg = config_for(td3, "Pendulum-v1", frames=8, init_random_frames=4, hidden=8)
    trainer, _ = td3.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    batch = trainer.collector.env.rollout(16).reshape(-1)  # [16]
    loss.actor_step = True
    grads = []
    for separate in (True, False):
        torch.manual_seed(3)  # the target policy's noise
        out = loss(batch.clone())
        if separate:  # a plain reference: each loss on its own
            out["loss_actor"].backward(inputs=list(loss.actor_network.parameters()))
            out["loss_qvalue"].backward(inputs=list(loss.qvalue_network.parameters()))
        else:
            (out["loss_actor"] + out["loss_qvalue"]).backward()
        grads.append([p.grad.clone() for p in loss.parameters() if p.grad is not None])
        loss.zero_grad(set_to_none=True)
    assert len(grads[0]) == len(grads[1]) > 0
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


@pytest.mark.slow
def test_td3_compiled_update_trains():
    td3 = get_recipe("td3")
    cfg = config_for(td3, "Pendulum-v1", frames=24, init_random_frames=16, hidden=8,
                     batch_size=8, compile_update=True)  # fmt: skip
    trainer, _ = td3.make_trainer(cfg, progress_bar=False)
    before = [p.detach().clone() for p in trainer.loss_module.actor_network.parameters()]
    trainer.train()  # a second backward through the compiled graph raised here
    assert trainer.optim_count >= 8  # both turns: with and without the actor's step
    after = list(trainer.loss_module.actor_network.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))


def test_td3_actor_loss_reads_the_first_q_network_only():
    from torchrl_lite.objectives import TD3Loss

    td3 = get_recipe("td3")
    cfg = config_for(td3, "Pendulum-v1", frames=8, init_random_frames=4, hidden=8)
    trainer, _ = td3.make_trainer(cfg, progress_bar=False)
    loss = trainer.loss_module
    batch = trainer.collector.env.rollout(16).reshape(-1)  # [16]
    got, want = {}, {}
    loss._actor_terms(batch, got)
    TD3Loss._actor_terms(loss, batch, want)  # the library's: every Q-network, then [0]
    torch.testing.assert_close(got["loss_actor"], want["loss_actor"])
    got["loss_actor"].backward()
    assert all(p.grad is None for p in loss.qvalue_network.parameters())  # detached
    assert all(p.grad is not None for p in loss.actor_network.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_compile_update_gives_the_eager_losses_and_gradients(algo):
    import torch._dynamo
    import torch._inductor.config

    recipe = get_recipe(algo)
    small = dict(hidden=8, init_random_frames=4, frames=8)
    eager, _ = recipe.make_trainer(config_for(recipe, "Pendulum-v1", **small), progress_bar=False)
    compiled, _ = recipe.make_trainer(
        config_for(recipe, "Pendulum-v1", compile_update=True, **small), progress_bar=False
    )
    assert compiled.loss_module.state_dict().keys() == eager.loss_module.state_dict().keys()
    batch = eager.collector.env.rollout(16).reshape(-1)  # [16]
    torch._dynamo.reset()
    results = []
    with torch._inductor.config.patch(fallback_random=True):  # eager's random numbers
        for trainer in (eager, compiled):
            torch.manual_seed(1)
            losses = trainer.loss_module(batch.clone())
            sum(v for k, v in losses.items() if k.startswith("loss_")).backward()
            grads = [p.grad.clone() for p in trainer.loss_module.parameters()]
            results.append((losses, grads))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # it was compiled
    (want, want_grads), (got, got_grads) = results
    for key in (k for k in want.keys() if k.startswith("loss_")):
        torch.testing.assert_close(got[key], want[key], rtol=1e-4, atol=1e-5)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
