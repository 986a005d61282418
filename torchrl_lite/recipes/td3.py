"""TD3 (twin delayed DDPG) for continuous actions: config, then builders.

Paper: Fujimoto et al. 2018, https://arxiv.org/abs/1802.09477. A deterministic tanh actor
explores with clipped Gaussian noise (off under ``ExplorationType.DETERMINISTIC``, as in
evaluation); two critics give clipped double-Q targets with target-policy smoothing; the
actor and the target networks move once per ``policy_delay`` critic updates (the actor
has its own Adam optimizer, stepped only then). The defaults solve Pendulum-v1 (mean
return >= -200) in about 4k frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.modules import (
    MLP,
    AdditiveGaussianModule,
    ProbabilisticActor,
    SafeSequential,
    TanhDelta,
    ValueOperator,
)
from torchrl_lite.objectives import SoftUpdate, TD3Loss
from torchrl_lite.objectives.ensemble import Ensemble
from torchrl_lite.recipes.common import check_action_kind, make_env, whole_batches
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import OptimizerHook, ReplayBufferTrainer, Trainer

ALGO = "td3"
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
    """TD3 settings; the defaults are for Pendulum-v1."""

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
    """Critic gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    lr: float = 2e-3
    """Adam learning rate (actor and critics)."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.05
    """Soft target-update rate, applied at each delayed update (Pendulum learns fastest
    with quickly moving targets)."""
    policy_delay: int = 2
    """Critic updates per actor and target-network update."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to collected actions, as a fraction of the action
    half-range (``(high - low) / 2``); none in evaluation."""
    policy_noise: float = 0.2
    """Std of the target-policy smoothing noise, as a fraction of the half-range."""
    noise_clip: float = 0.5
    """Clip of the smoothing noise, as a fraction of the half-range."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU) of the actor and the critics."""
    compile_update: bool = False
    """Run the loss (forward and backward) through ``torch.compile``. On one CPU thread it
    is slower (``benchmarks/bench_train_speed.py --compile``); meant for GPUs."""


def make_train_env(cfg: Config):
    env = make_env(cfg.env, seed=cfg.seed)
    check_action_kind(env, ACTIONS, "TD3")
    return env


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


def make_actor_qvalue(cfg: Config, env):
    """A deterministic actor ``low + (high - low) * (tanh(net(s)) + 1) / 2`` and a critic."""
    obs_dim = env.observation_spec["observation"].shape[-1]
    spec = env.action_spec
    act_dim = spec.shape[-1]
    net = MLP(obs_dim, act_dim, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU)
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["param"]),
        in_keys=["param"],
        distribution_class=TanhDelta,
        distribution_kwargs={"low": spec.low, "high": spec.high},
        spec=spec,
    )
    qnet = MLP(obs_dim + act_dim, 1, num_cells=cfg.hidden, depth=2, activation_class=nn.ReLU)
    qvalue = ValueOperator(qnet, in_keys=["observation", "action"])
    return actor, qvalue


def half_range(spec) -> float:
    """The mean half-width of the action box, the unit of the noise settings."""
    return float((spec.high - spec.low).mean() / 2)


def make_exploration_policy(cfg: Config, actor, spec):
    """The actor followed by clipped Gaussian noise (active only while exploring)."""
    sigma = cfg.exploration_noise * half_range(spec)
    noise = AdditiveGaussianModule(spec, sigma_init=sigma, sigma_end=sigma)
    return SafeSequential(actor, noise)


class DelayedTD3Loss(TD3Loss):
    """``TD3Loss`` that leaves ``"loss_actor"`` out while ``actor_step`` is False.

    The actor's optimizer steps once per ``policy_delay`` critic updates; on the other
    steps its loss (an actor and a Q-ensemble pass) would be computed for nothing, so it
    is skipped there, as in the TD3 authors' code and SB3. ``make_trainer`` sets
    ``actor_step`` before each update.
    """

    actor_step: bool = True

    def _actor_terms(self, td, out: dict) -> None:
        if not self.actor_step:
            return
        ensemble = self.qvalue_network
        if not isinstance(ensemble, Ensemble):
            return super()._actor_terms(td, out)
        # only the first Q-network enters the actor's loss: the other copy is not run
        action = self._action_of(self.actor_network, td)  # [*B, *action_shape]
        first = ensemble(self._q_input(td, action, None), params=ensemble.params[:1].detach())
        out["loss_actor"] = -self._read(first, "state_action_value", "the Q-network")[0].mean()


def make_loss(cfg: Config, actor, qvalue, spec):
    scale = half_range(spec)
    return DelayedTD3Loss(
        actor,
        qvalue,
        action_spec=spec,
        num_qvalue_nets=2,
        policy_noise=cfg.policy_noise * scale,
        noise_clip=cfg.noise_clip * scale,
        loss_function="l2",
        gamma=cfg.gamma,
    )


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    if cfg.policy_delay < 1:
        raise ValueError(f"TD3: policy_delay must be >= 1, got {cfg.policy_delay}.")
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, qvalue = make_actor_qvalue(cfg, env)
    loss = make_loss(cfg, actor, qvalue, env.action_spec)
    if cfg.compile_update:  # an instance attribute: the state_dict keeps its names
        loss.forward = torch.compile(loss.forward)
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
        optimizer=None,  # two optimizers, registered below
        logger=logger,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=1_000,
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(cfg.buffer_size))
    ReplayBufferTrainer(buffer, batch_size=cfg.batch_size).register(trainer)

    # Delayed policy updates: the actor and the targets move every policy_delay-th step.
    # One backward pass for both losses (their graphs share no parameters: the actor's
    # loss reads detached Q-network weights, the critic's the target actor), before the
    # critic's optimizer changes the weights in place; a compiled loss has one joint
    # graph, which a second backward pass could not go through again.
    actor_optim = OptimizerHook(
        torch.optim.Adam(loss.actor_network.parameters(), lr=cfg.lr, fused=True),
        loss_components=["loss_actor"],
    )
    critic_optim = OptimizerHook(
        torch.optim.Adam(loss.qvalue_network.parameters(), lr=cfg.lr, fused=True),
        loss_components=["loss_qvalue"],
    )
    target_update = SoftUpdate(loss, tau=cfg.tau)

    def update(losses, clip_grad_norm, clip_norm, index):
        actor_turn = trainer.optim_count % cfg.policy_delay == 0
        total = critic_optim.loss(losses)
        if actor_turn:
            total = total + actor_optim.loss(losses)
        total.backward()
        if actor_turn:
            actor_optim.step(losses, clip_grad_norm, clip_norm, index)
        critic_optim.step(losses, clip_grad_norm, clip_norm, index + 1)

    def delayed_target_update():
        if trainer.optim_count % cfg.policy_delay == 0:
            target_update.step()

    def schedule_actor(batch):  # before the loss: does the actor step this time?
        loss.actor_step = trainer.optim_count % cfg.policy_delay == 0

    trainer.register_op("process_optim_batch", schedule_actor)
    trainer.register_op("optimizer", update)
    trainer.register_module("actor_optimizer", actor_optim)
    trainer.register_module("critic_optimizer", critic_optim)
    trainer.register_op("post_optim", delayed_target_update)
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
