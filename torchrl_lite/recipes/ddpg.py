"""DDPG (deep deterministic policy gradient) for continuous actions: config, then builders.

Paper: Lillicrap et al. 2015, https://arxiv.org/abs/1509.02971. A deterministic tanh actor
explores with clipped Gaussian noise (off under ``ExplorationType.DETERMINISTIC``, as in
evaluation; Gaussian noise does as well as the paper's Ornstein-Uhlenbeck process); one
critic, and target copies of both networks moved by Polyak averaging. The defaults solve
Pendulum-v1 (mean return >= -200) in about 4k frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.modules import (
    AdditiveGaussianModule,
    SafeSequential,
)
from torchrl_lite.objectives import DDPGLoss, SoftUpdate
from torchrl_lite.recipes.common import check_action_kind, make_env, whole_batches
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.recipes.td3 import make_actor_qvalue  # the same networks
from torchrl_lite.trainers import ReplayBufferTrainer, Trainer

ALGO = "ddpg"
ACTIONS = "continuous"
TARGETS = {"Pendulum-v1": -200.0}
# physics tasks (gymnasium MuJoCo, dm_control): the paper's settings, 1M frames
_LOCOMOTION = dict(
    frames=1_000_000,
    init_random_frames=25_000,
    buffer_size=1_000_000,
    lr=3e-4,
    tau=0.005,
    hidden=256,
)
ENV_DEFAULTS = {"mujoco": _LOCOMOTION, "dm_control": _LOCOMOTION}


@dataclass(frozen=True)
class Config:
    """DDPG settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 20_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    init_random_frames: int = 1000
    """Frames of uniform random actions before learning starts."""
    frames_per_batch: int = 10
    """Frames collected between two rounds of updates."""
    utd_ratio: float = 1.0
    """Gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    lr: float = 2e-3
    """Adam learning rate (actor and critic)."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.05
    """Soft target-update rate (Pendulum learns fastest with quickly moving targets)."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to collected actions, as a fraction of the action
    half-range (``(high - low) / 2``); none in evaluation."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU) of the actor and the critic."""


def make_train_env(cfg: Config):
    env = make_env(cfg.env, seed=cfg.seed)
    check_action_kind(env, ACTIONS, "DDPG")
    return env


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


def make_exploration_policy(cfg: Config, actor, spec):
    """The actor followed by clipped Gaussian noise (active only while exploring)."""
    sigma = cfg.exploration_noise * float((spec.high - spec.low).mean() / 2)
    noise = AdditiveGaussianModule(spec, sigma_init=sigma, sigma_end=sigma)
    return SafeSequential(actor, noise)


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, value = make_actor_qvalue(cfg, env)
    loss = DDPGLoss(
        actor, value, loss_function="l2", delay_actor=True, delay_value=True, gamma=cfg.gamma
    )
    collector = SyncDataCollector(
        env,
        make_exploration_policy(cfg, actor, env.action_spec),
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
        init_random_frames=cfg.init_random_frames,
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=max(1, round(cfg.utd_ratio * cfg.frames_per_batch)),
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=cfg.lr, fused=True),
        logger=logger,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=1_000,
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(cfg.buffer_size))
    ReplayBufferTrainer(buffer, batch_size=cfg.batch_size).register(trainer)
    trainer.register_op("post_optim", SoftUpdate(loss, tau=cfg.tau).step)
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
