"""A2C (advantage actor-critic, synchronous) for continuous actions: config, builders.

Paper: Mnih et al. 2016, https://arxiv.org/abs/1602.01783. One gradient step per
collected batch of short rollouts from several envs, with GAE advantages.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import RewardScaling, TransformedEnv
from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import A2CLoss
from torchrl_lite.objectives.value import GAE
from torchrl_lite.recipes.common import check_action_kind, make_env, mlp, whole_batches
from torchrl_lite.trainers import ComputeAdvantage, Trainer

ALGO = "a2c"
ACTIONS = "continuous"
TARGETS: dict = {}
ENV_DEFAULTS: dict = {}


@dataclass(frozen=True)
class Config:
    """A2C settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 200_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    num_envs: int = 16
    """Copies of the env stepped together (gymnasium vector API)."""
    frames_per_batch: int = 256
    """Frames per gradient step (``num_envs`` rollouts of ``frames_per_batch / num_envs``)."""
    reward_scale: float = 0.1
    """Rewards are multiplied by this for learning (reported returns stay unscaled)."""
    lr: float = 1e-3
    """Adam learning rate (actor and critic)."""
    gamma: float = 0.9
    """Discount; Pendulum's short credit horizon learns much faster with 0.9."""
    lmbda: float = 0.95
    """GAE lambda."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""
    critic_coef: float = 0.5
    """Value-loss weight."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the (state-independent) action noise."""
    hidden: int = 64
    """Units per hidden layer (two layers, tanh)."""


def make_train_env(cfg: Config):
    env = make_env(cfg.env, num_envs=cfg.num_envs, seed=cfg.seed)
    check_action_kind(env, ACTIONS, "A2C")
    return TransformedEnv(env, RewardScaling(loc=0.0, scale=cfg.reward_scale))


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


def make_actor_critic(cfg: Config, env):
    obs_dim = env.observation_spec["observation"].shape[-1]
    spec = env.action_spec
    act_dim = spec.shape[-1]
    low, high = spec.low.reshape(-1, act_dim)[0], spec.high.reshape(-1, act_dim)[0]
    net = nn.Sequential(
        mlp(obs_dim, act_dim, cfg.hidden, 2),
        AddStateIndependentNormalScale(act_dim, init_value=cfg.init_log_std),
    )
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": low, "high": high},
    )
    critic = ValueOperator(mlp(obs_dim, 1, cfg.hidden, 2), in_keys=["observation"])
    return actor, critic


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, critic = make_actor_critic(cfg, env)
    loss = A2CLoss(
        actor,
        critic,
        entropy_bonus=cfg.entropy_coef > 0,
        entropy_coef=cfg.entropy_coef,
        critic_coef=cfg.critic_coef,
        loss_critic_type="l2",
    )
    collector = SyncDataCollector(
        env,
        actor,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=cfg.lr),
        logger=logger,
        clip_norm=cfg.max_grad_norm,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=20_000,
        log_interval=2_000,
    )
    gae = GAE(gamma=cfg.gamma, lmbda=cfg.lmbda, value_network=critic, average_gae=True)
    ComputeAdvantage(gae).register(trainer)
    return trainer, actor
