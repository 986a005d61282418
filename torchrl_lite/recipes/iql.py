"""IQL (implicit Q-learning) on a dataset file, for continuous actions: config, builders.

Paper: Kostrikov et al. 2021, https://arxiv.org/abs/2110.06169. Offline: the agent
learns from ``dataset`` (a D4RL-layout ``.hdf5`` file; make one with
:func:`~torchrl_lite.recipes.offline.collect_dataset`) and never acts while training;
``env`` only evaluates it. ``frames`` counts gradient steps. On a 40k-transition
"medium" Pendulum-v1 dataset (a half-trained SAC policy plus noise, mean return -517),
the defaults end at -268 (mean of 3 seeds, 50 evaluation episodes each) in about a minute.

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

from torchrl_lite.modules import MLP, IndependentNormal, ProbabilisticActor, ValueOperator
from torchrl_lite.objectives import IQLLoss, SoftUpdate
from torchrl_lite.recipes.common import check_action_kind, mlp
from torchrl_lite.recipes.offline import (
    OfflineBatches,
    OfflineConfig,
    check_dataset_fits,
    load_dataset,
    make_eval_env,
    make_evaluation,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import Trainer

ALGO = "iql"
ACTIONS = "continuous"
OFFLINE = True
TARGETS: dict = {}
ENV_DEFAULTS = {"mujoco": dict(eval_steps=1000), "dm_control": dict(eval_steps=1000)}


@dataclass(frozen=True)
class Config(OfflineConfig):
    """IQL settings; the defaults are for Pendulum-v1."""

    expectile: float = 0.7
    """Expectile of V's regression on Q (0.5: the mean; higher: closer to the max)."""
    temperature: float = 1.0
    """Inverse temperature of the actor's advantage weights ``exp(temperature * A)``."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU)."""


def make_networks(cfg: Config, env):
    """A Gaussian actor whose mean is squashed into the (symmetric) action bounds, so that
    dataset actions at the bounds keep a finite likelihood; Q-networks and V."""
    obs_dim = env.observation_spec["observation"].shape[-1]
    spec = env.action_spec
    act_dim = spec.shape[-1]
    if not torch.equal(spec.low, -spec.high):
        raise ValueError(f"IQL's actor needs symmetric action bounds, got {spec.low}..{spec.high}.")
    net = nn.Sequential(mlp(obs_dim, 2 * act_dim, cfg.hidden, 2, nn.ReLU), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=IndependentNormal,
        distribution_kwargs={"tanh_loc": True, "upscale": spec.high},
        spec=spec,
        safe=True,  # samples are clipped into the bounds
    )
    qnet = MLP(obs_dim + act_dim, 1, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU)
    qvalue = ValueOperator(qnet, in_keys=["observation", "action"])  # MLP joins the inputs
    vnet = MLP(obs_dim, 1, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU)
    value = ValueOperator(vnet, in_keys=["observation"])
    return actor, qvalue, value


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; register :func:`make_evaluation` too."""
    torch.manual_seed(cfg.seed)
    env = make_eval_env(cfg)
    check_action_kind(env, ACTIONS, "IQL")
    dataset = load_dataset(cfg.dataset, cfg.batch_size)
    check_dataset_fits(dataset, env)
    actor, qvalue, value = make_networks(cfg, env)
    env.close()
    loss = IQLLoss(
        actor,
        qvalue,
        value,
        num_qvalue_nets=2,
        expectile=cfg.expectile,
        temperature=cfg.temperature,
        gamma=cfg.gamma,
    )
    batches = OfflineBatches(dataset, total_steps=cfg.frames)
    trainer = Trainer(
        collector=batches,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=cfg.lr),
        logger=logger,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=cfg.eval_interval,
    )
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
