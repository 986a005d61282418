"""CQL (conservative Q-learning, CQL(H) on SAC) on a dataset file, for continuous actions.

Paper: Kumar et al. 2020, https://arxiv.org/abs/2006.04779. Offline: the agent learns
from ``dataset`` (a D4RL-layout ``.hdf5`` file; make one with
:func:`~torchrl_lite.recipes.offline.collect_dataset`) and never acts while training;
``env`` only evaluates it. ``frames`` counts gradient steps. On a 40k-transition
"medium" Pendulum-v1 dataset (a half-trained SAC policy plus noise, mean return -517),
the defaults end at -217 (mean of 3 seeds, 50 evaluation episodes each) in about 5 minutes.

Example:
    >>> cfg = Config(dataset="pendulum-medium.hdf5")
    >>> # trainer, policy = make_trainer(cfg)
    >>> # make_evaluation(cfg, policy).register(trainer)  # evaluation returns
    >>> # trainer.train()
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import CQLLoss, SoftUpdate
from torchrl_lite.recipes.common import check_action_kind
from torchrl_lite.recipes.offline import (
    OfflineBatches,
    OfflineConfig,
    check_dataset_fits,
    load_dataset,
    make_eval_env,
    make_evaluation,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import OptimizerHook, Trainer

ALGO = "cql"
ACTIONS = "continuous"
OFFLINE = True
# the terms each step optimises (CQLLoss also returns loss_actor_bc, for TorchRL's scripts)
LOSS_TERMS = ("loss_actor", "loss_qvalue", "loss_alpha", "loss_cql")
TARGETS: dict = {}
ENV_DEFAULTS = {"mujoco": dict(eval_steps=1000), "dm_control": dict(eval_steps=1000)}


@dataclass(frozen=True)
class Config(OfflineConfig):
    """CQL settings; the defaults are for Pendulum-v1."""

    min_q_weight: float = 10.0
    """Weight of the conservative penalty (soft-max of Q over actions minus Q of the data);
    Pendulum's returns are in the hundreds, so it is larger than the paper's 5."""
    num_random: int = 4
    """Sampled actions of each kind (uniform, policy at s, policy at s') per state (the
    paper's 10 costs 2.5x the time per step on a CPU)."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU)."""


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
    qvalue = ValueOperator(qnet, in_keys=["observation", "action"])  # MLP joins the inputs
    return actor, qvalue


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; register :func:`make_evaluation` too."""
    torch.manual_seed(cfg.seed)
    env = make_eval_env(cfg)
    check_action_kind(env, ACTIONS, "CQL")
    dataset = load_dataset(cfg.dataset, cfg.batch_size)
    check_dataset_fits(dataset, env)
    actor, qvalue = make_actor_qvalue(cfg, env)
    loss = CQLLoss(
        actor,
        qvalue,
        action_spec=env.action_spec,
        num_qvalue_nets=2,
        min_q_weight=cfg.min_q_weight,
        num_random=cfg.num_random,
        loss_function="l2",
        gamma=cfg.gamma,
    )
    env.close()
    batches = OfflineBatches(dataset, total_steps=cfg.frames)
    trainer = Trainer(
        collector=batches,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        logger=logger,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=cfg.eval_interval,
    )
    optimizer = torch.optim.Adam(loss.parameters(), lr=cfg.lr)
    OptimizerHook(optimizer, loss_components=LOSS_TERMS).register(trainer)
    batches.register(trainer)
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
    offline=True,
    make_evaluation=make_evaluation,
)
