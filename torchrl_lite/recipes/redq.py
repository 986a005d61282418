"""REDQ (randomized ensembled double Q-learning) for continuous actions: config, builders.

Paper: Chen et al. 2021, https://arxiv.org/abs/2101.05982. SAC with an ensemble of ``N``
critics, a target that minimises over ``M`` of them drawn at random, and several updates
per collected frame (the update-to-data ratio). The defaults solve Pendulum-v1 (mean
return >= -200) in about 3.5k frames, the fewest of the recipes, but each frame costs
``utd_ratio`` updates of ``num_qvalue_nets`` critics (about a minute on one CPU core).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import REDQLoss, SoftUpdate
from torchrl_lite.recipes.common import check_action_kind, make_env, whole_batches
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import ReplayBufferTrainer, Trainer

ALGO = "redq"
ACTIONS = "continuous"
TARGETS = {"Pendulum-v1": -200.0}
# physics tasks (gymnasium MuJoCo, dm_control): the paper's settings (UTD 20), 300k frames
_LOCOMOTION = dict(
    frames=300_000,
    init_random_frames=5_000,
    buffer_size=1_000_000,
    lr=3e-4,
    tau=0.005,
    hidden=256,
    utd_ratio=20.0,
    batch_size=256,
)
ENV_DEFAULTS = {"mujoco": _LOCOMOTION, "dm_control": _LOCOMOTION}


@dataclass(frozen=True)
class Config:
    """REDQ settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 20_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    init_random_frames: int = 500
    """Frames of uniform random actions before learning starts."""
    frames_per_batch: int = 10
    """Frames collected between two rounds of updates."""
    utd_ratio: float = 5.0
    """Gradient steps per collected frame (the paper's G)."""
    num_qvalue_nets: int = 10
    """Critics in the ensemble (the paper's N)."""
    sub_sample_len: int = 2
    """Critics drawn at random for each target (the paper's M)."""
    batch_size: int = 128
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    lr: float = 1e-3
    """Adam learning rate (actor, critics and temperature)."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.005
    """Soft target-update rate."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU) of the actor and the critics."""


def make_train_env(cfg: Config):
    env = make_env(cfg.env, seed=cfg.seed)
    check_action_kind(env, ACTIONS, "REDQ")
    return env


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


def make_actor_qvalue(cfg: Config, env):
    obs_dim = env.observation_spec["observation"].shape[-1]
    spec = env.action_spec
    act_dim = spec.shape[-1]
    net = nn.Sequential(
        MLP(obs_dim, 2 * act_dim, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU),
        NormalParamExtractor(),
    )
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": spec.low, "high": spec.high},
        spec=spec,
    )
    qnet = MLP(obs_dim + act_dim, 1, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU)
    qvalue = ValueOperator(qnet, in_keys=["observation", "action"])
    return actor, qvalue


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, qvalue = make_actor_qvalue(cfg, env)
    loss = REDQLoss(
        actor,
        qvalue,
        num_qvalue_nets=cfg.num_qvalue_nets,
        sub_sample_len=cfg.sub_sample_len,
        loss_function="l2",
        gamma=cfg.gamma,
        action_spec=env.action_spec,
    )
    collector = SyncDataCollector(
        env,
        actor,
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
