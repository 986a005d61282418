"""A2C (advantage actor-critic, synchronous) for continuous actions: config, builders.

Paper: Mnih et al. 2016, https://arxiv.org/abs/1602.01783. One gradient step per
collected batch of short rollouts from several envs, with GAE advantages.

What makes it learn Pendulum-v1: many small updates (8 envs x 4 steps per batch), a
truncated-Normal policy (a tanh-squashed Normal saturates at the bounds and stops
exploring), observations standardised with statistics of a random rollout (a module of
the networks, so checkpoints and evaluation need nothing else) and a learning rate that
decays linearly to zero over ``frames``. The defaults (400k frames, under a minute on one
CPU thread) reach the target -200 in about 100-120k frames (``docs/notes/recipe-runs.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import RewardScaling, TransformedEnv
from torchrl_lite.modules import ProbabilisticActor, TruncatedNormal, ValueOperator
from torchrl_lite.objectives import A2CLoss
from torchrl_lite.objectives.value import GAE
from torchrl_lite.recipes.common import check_action_kind, make_env, mlp, whole_batches
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import ComputeAdvantage, Trainer

ALGO = "a2c"
ACTIONS = "continuous"
TARGETS = {"Pendulum-v1": -200.0}
# physics tasks: rewards of order 1 per step and long horizons
_LOCOMOTION = dict(frames=1_000_000, reward_scale=1.0, gamma=0.99, lmbda=0.95)
ENV_DEFAULTS = {"mujoco": _LOCOMOTION, "dm_control": _LOCOMOTION}


@dataclass(frozen=True)
class Config:
    """A2C settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 400_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    num_envs: int = 8
    """Copies of the env stepped together (gymnasium vector API)."""
    frames_per_batch: int = 32
    """Frames per gradient step (``num_envs`` rollouts of ``frames_per_batch / num_envs``)."""
    reward_scale: float = 0.1
    """Rewards are multiplied by this for learning (reported returns stay unscaled)."""
    lr: float = 7e-4
    """Adam learning rate (actor and critic) at the start."""
    lr_decay: bool = True
    """Decay the learning rate linearly to zero over ``frames``."""
    gamma: float = 0.9
    """Discount; Pendulum's short credit horizon learns much faster with 0.9."""
    lmbda: float = 0.9
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
    obs_norm_steps: int = 200
    """Steps of a random rollout (per env) whose statistics standardise observations (0: off)."""


def make_train_env(cfg: Config):
    env = make_env(cfg.env, num_envs=cfg.num_envs, seed=cfg.seed)
    check_action_kind(env, ACTIONS, "A2C")
    return TransformedEnv(env, RewardScaling(loc=0.0, scale=cfg.reward_scale))


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


class StandardizeObservation(nn.Module):
    """``(obs - loc) / scale`` with fixed buffers: saved and loaded with the networks."""

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("loc", loc.clone())
        self.register_buffer("scale", scale.clone())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.loc) / self.scale


def observation_stats(env, steps: int):
    """Mean and std (floored) of the observations of a ``steps``-step random rollout."""
    dim = env.observation_spec["observation"].shape[-1]
    if steps <= 0:
        return torch.zeros(dim), torch.ones(dim)
    with torch.no_grad():
        obs = env.rollout(steps, break_when_any_done=False)["observation"]
    obs = obs.reshape(-1, dim).float()
    return obs.mean(0), obs.std(0).clamp_min(1e-3)


def make_actor_critic(cfg: Config, env):
    obs_dim = env.observation_spec["observation"].shape[-1]
    loc, scale = observation_stats(env, cfg.obs_norm_steps)
    spec = env.action_spec
    act_dim = spec.shape[-1]
    low, high = spec.low.reshape(-1, act_dim)[0], spec.high.reshape(-1, act_dim)[0]
    net = nn.Sequential(
        StandardizeObservation(loc, scale),
        mlp(obs_dim, act_dim, cfg.hidden, 2),
        AddStateIndependentNormalScale(act_dim, init_value=cfg.init_log_std),
    )
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TruncatedNormal,  # mean squashed into ±upscale, then truncated
        distribution_kwargs={
            "low": low,
            "high": high,
            "tanh_loc": True,
            "upscale": torch.maximum(low.abs(), high.abs()),
        },
    )
    critic = ValueOperator(
        nn.Sequential(StandardizeObservation(loc, scale), mlp(obs_dim, 1, cfg.hidden, 2)),
        in_keys=["observation"],
    )
    return actor, critic


def make_loss(cfg: Config, actor, critic) -> A2CLoss:
    """The A2C loss: an entropy bonus and an L2 value loss weighted by ``critic_coef``."""
    return A2CLoss(
        actor,
        critic,
        entropy_bonus=cfg.entropy_coef > 0,
        entropy_coef=cfg.entropy_coef,
        critic_coef=cfg.critic_coef,
        loss_critic_type="l2",
    )


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, critic = make_actor_critic(cfg, env)
    loss = make_loss(cfg, actor, critic)
    collector = SyncDataCollector(
        env,
        actor,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
    )
    optimizer = torch.optim.Adam(loss.parameters(), lr=cfg.lr)
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=optimizer,
        logger=logger,
        clip_norm=cfg.max_grad_norm,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=20_000,
        log_interval=2_000,
    )
    gae = GAE(gamma=cfg.gamma, lmbda=cfg.lmbda, value_network=critic, average_gae=True)
    ComputeAdvantage(gae).register(trainer)
    if cfg.lr_decay:

        def decay_lr():  # a function of the frame counter: a resumed run decays alike
            for group in optimizer.param_groups:
                group["lr"] = cfg.lr * max(0.0, 1.0 - trainer.collected_frames / cfg.frames)

        trainer.register_op("pre_optim_steps", decay_lr)
    return trainer, actor


RECIPE = Recipe(
    name=ALGO,
    Config=Config,
    module=__name__,
    make_trainer=make_trainer,
    make_eval_env=make_eval_env,
    actions=ACTIONS,
    targets=TARGETS,
    env_defaults=ENV_DEFAULTS,
)
