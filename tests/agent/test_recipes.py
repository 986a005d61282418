"""factories_from_recipe: the Scheme's factories build what `torchrl-lite train ALGO` builds."""

import dataclasses
import pickle

import pytest
import torch

from torchrl_lite.agent import factories_from_recipe
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import apply_overrides

KEYS = {
    "algo_factory",
    "actor_factory",
    "storage_factory",
    "train_envs_factory",
    "test_envs_factory",
}


@pytest.mark.parametrize("name, algo, storage", [
    ("ppo", "PPO", "GAEBuffer"), ("a2c", "A2C", "GAEBuffer"), ("sac", "SAC", "ReplayBuffer"),
    ("td3", "TD3", "ReplayBuffer"), ("ddpg", "DDPG", "ReplayBuffer"), ("dqn", "DDQN", "ReplayBuffer"),
])  # fmt: skip
def test_factories_build_the_recipe_components(name, algo, storage):
    cfg = config_for(get_recipe(name))
    factories = factories_from_recipe(name, cfg)
    assert set(factories) == KEYS
    factories = pickle.loads(pickle.dumps(factories))  # the Scheme ships them to workers
    envs = factories["train_envs_factory"]("cpu", 0)
    actor = factories["actor_factory"]("cpu")
    algorithm = factories["algo_factory"]("cpu", actor)
    buffer = factories["storage_factory"]("cpu", actor, algorithm)
    assert (type(algorithm).__name__, type(buffer).__name__) == (algo, storage)
    num_envs = max(1, getattr(cfg, "num_envs", 1))
    assert envs.batch_size == torch.Size([num_envs])
    assert buffer.steps_per_collection * num_envs == cfg.frames_per_batch
    assert algorithm.gamma == cfg.gamma
    test_env = factories["test_envs_factory"]("cpu", 0)
    assert test_env.batch_size == torch.Size([1])
    envs.close()
    test_env.close()


def test_ppo_factories_match_the_recipe():
    recipe = get_recipe("ppo")
    cfg = config_for(recipe)
    factories = factories_from_recipe("ppo", cfg)
    torch.manual_seed(0)
    actor = factories["actor_factory"]("cpu")
    torch.manual_seed(0)
    policy, value = recipe.make_actor_critic(cfg, recipe.make_train_env(cfg))
    ours = list(actor.policy.parameters()) + list(actor.value.parameters())
    theirs = list(policy.parameters()) + list(value.parameters())
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    algo = factories["algo_factory"]("cpu", actor)
    reference = recipe.make_loss(cfg, policy, value)
    assert algo.loss_module.clip_epsilon == reference.clip_epsilon
    assert algo.loss_module.critic_coef == reference.critic_coef
    assert algo.loss_module.normalize_advantage == reference.normalize_advantage
    assert algo.optimizers["optimizer"].param_groups[0]["lr"] == cfg.lr
    assert (algo.num_epochs, algo.mini_batch_size) == (cfg.epochs, cfg.mini_batch_size)


def test_a2c_envs_scale_the_learning_reward_only():
    cfg = config_for(get_recipe("a2c"))
    envs = factories_from_recipe("a2c", cfg)["train_envs_factory"]("cpu", 0)
    rollout = envs.rollout(3)
    reward, returns = rollout["next", "reward"][0, :, 0], rollout["next", "episode_reward"][0, :, 0]
    torch.testing.assert_close(returns, torch.cumsum(reward, 0) / cfg.reward_scale)
    envs.close()


def test_unknown_or_unsupported_recipe():
    with pytest.raises(ValueError, match="'ppoo' has no Scheme path. Did you mean 'ppo'"):
        factories_from_recipe("ppoo", None)
    with pytest.raises(ValueError, match="'cql' has no Scheme path"):
        factories_from_recipe("cql", None)
    cfg = dataclasses.replace(config_for(get_recipe("dqn")), pixels=True)
    with pytest.raises(ValueError, match="pixels=true is not available on the Scheme path"):
        factories_from_recipe("dqn", cfg)
    sac = get_recipe("sac")  # with its pixel defaults (action_repeat=8, ...): pixels named
    cfg = apply_overrides(config_for(sac, "dm_control/cartpole-swingup"), {"pixels": "true"})
    with pytest.raises(ValueError, match="pixels=true is not available on the Scheme path"):
        factories_from_recipe("sac", cfg)


@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_n_step_recipes_replay_n_step_windows_on_the_scheme_path(name):
    cfg = config_for(get_recipe(name), n_step=3, gamma=0.9)
    factories = factories_from_recipe(name, cfg)
    actor = factories["actor_factory"]("cpu")
    algorithm = factories["algo_factory"]("cpu", actor)
    buffer = factories["storage_factory"]("cpu", actor, algorithm)
    assert (type(buffer).__name__, buffer.n_step, algorithm.n_step) == ("NStepReplayBuffer", 3, 3)
    estimator = algorithm.loss_module.value_estimator  # gamma ** k from each window's length
    assert estimator.gamma == pytest.approx(0.9)
    one_step = factories_from_recipe(name, config_for(get_recipe(name)))["storage_factory"]
    assert one_step.cls.__name__ == "ReplayBuffer"


def test_scheme_factories_carry_the_recipes_options():
    sac = factories_from_recipe("sac", config_for(get_recipe("sac"), alpha_init=0.2))
    actor = sac["actor_factory"]("cpu")
    alpha = sac["algo_factory"]("cpu", actor).loss_module.log_alpha.exp()
    torch.testing.assert_close(alpha, torch.tensor(0.2))
    recipe = get_recipe("ppo")
    cfg = config_for(recipe, use_sde=True, sde_sample_freq=8, init_log_std=-1.0,
                     recompute_advantage=False)  # fmt: skip
    ppo = factories_from_recipe("ppo", cfg)
    torch.manual_seed(0)
    actor = ppo["actor_factory"]("cpu")
    torch.manual_seed(0)
    policy, _ = recipe.make_actor_critic(cfg, recipe.make_train_env(cfg))
    ours = dict(actor.policy.named_parameters())
    theirs = dict(policy.named_parameters())
    assert [p.shape for p in ours.values()] == [p.shape for p in theirs.values()]
    assert any(torch.all(p == -1.0) for p in ours.values())  # gSDE's log-sigma at init_log_std
    buffer = ppo["storage_factory"]("cpu", actor, ppo["algo_factory"]("cpu", actor))
    assert buffer.recompute_each_epoch is False


@pytest.mark.parametrize("name, setting, match", [
    ("sac", {"loss_function": "l2"}, r"loss_function='l2' \(the critic's loss\) is not available"),
    ("sac", {"init": "orthogonal"}, r"init='orthogonal' \(the weight initialisation\)"),
    ("sac", {"action_repeat": 2}, r"action_repeat=2 \(repeated actions\)"),
    ("dqn", {"lr_end": 1e-5}, r"lr_end=1e-05 \(a learning-rate decay\)"),
    ("dqn", {"lr_drop_at": 300.0}, r"lr_drop_at=300.0 \(a learning-rate drop\) is not available "
                                   r"on the Scheme path; .* or leave lr_drop_at at None"),
])  # fmt: skip
def test_settings_the_scheme_path_lacks_are_refused(name, setting, match):
    cfg = config_for(get_recipe(name), **setting)
    with pytest.raises(ValueError, match=match):
        factories_from_recipe(name, cfg)


def test_frames_per_batch_not_a_multiple_of_num_envs_rounds_up_as_the_collector():
    from torchrl_lite.collectors import SyncDataCollector

    recipe = get_recipe("ppo")
    cfg = config_for(recipe, frames_per_batch=100, num_envs=8)
    with pytest.warns(UserWarning, match="frames_per_batch=100 is not divisible by num_envs=8"):
        factories = factories_from_recipe("ppo", cfg)
    env = recipe.make_train_env(cfg)
    with pytest.warns(UserWarning, match="not divisible"):
        collector = SyncDataCollector(env, None, frames_per_batch=100, total_frames=200)
    assert factories["storage_factory"].kwargs["size"] * 8 == collector.frames_per_batch == 104
    collector.shutdown()
