"""Tiny training setups shared by the trainer tests (not a test module).

Each builder makes everything from scratch (env, networks, loss, optimizer, collector,
buffer, trainer and hooks) from a seed, so that a test can build a run twice, e.g. to
resume one from a checkpoint. ``losses`` records every loss TensorDict the loss module
returns (a forward hook), detached.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import GymEnv, PendulumEnv, RewardSum, StepCounter, TransformedEnv
from torchrl_lite.modules import (
    MLP,
    EGreedyModule,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)
from torchrl_lite.objectives import ClipPPOLoss, DQNLoss, HardUpdate, SACLoss, SoftUpdate
from torchrl_lite.objectives.value import GAE
from torchrl_lite.trainers import (
    LogReward,
    ReplayBufferTrainer,
    RewardNormalizer,
    ShuffledMiniBatches,
    Trainer,
)

FPB = 16  # frames per batch


@dataclass
class Run:
    trainer: Trainer
    loss: nn.Module
    collector: SyncDataCollector
    losses: list = field(default_factory=list)


def _recording(loss: nn.Module, run_losses: list) -> None:
    loss.register_forward_hook(lambda m, i, out: run_losses.append(out.detach().clone()))


def tanh_actor(obs: int, act: int, spec=None):
    net = nn.Sequential(MLP(obs, 2 * act, num_cells=16, depth=1), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
        spec=spec,
    )


def sac_run(batches: int, path=None, seed: int = 0, **trainer_kwargs) -> Run:
    """SAC on gymnasium's Pendulum-v1 with a replay buffer and soft target updates."""
    torch.manual_seed(seed)
    env = GymEnv("Pendulum-v1")
    env.set_seed(seed)
    actor = tanh_actor(3, 1, env.action_spec)
    qvalue = ValueOperator(MLP(4, 1, num_cells=16, depth=1), in_keys=["observation", "action"])
    loss = SACLoss(actor, qvalue, gamma=0.9)
    collector = SyncDataCollector(
        env, actor, frames_per_batch=FPB, total_frames=-1, init_random_frames=FPB
    )
    kwargs = dict(progress_bar=False, save_trainer_file=path, save_trainer_interval=10**9)
    kwargs.update(trainer_kwargs)
    trainer = Trainer(
        collector=collector,
        total_frames=batches * FPB,
        optim_steps_per_batch=2,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2),
        **kwargs,
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(500))
    ReplayBufferTrainer(buffer, batch_size=8).register(trainer)
    RewardNormalizer(decay=0.9).register(trainer)
    trainer.register_op("post_optim", SoftUpdate(loss, tau=0.1).step)
    run = Run(trainer, loss, collector)
    _recording(loss, run.losses)
    return run


def dqn_run(batches: int, path=None, seed: int = 0, **trainer_kwargs) -> Run:
    """DQN on CartPole-v1: e-greedy annealed per batch, hard target updates."""
    torch.manual_seed(seed)
    env = TransformedEnv(GymEnv("CartPole-v1"), RewardSum())
    env.set_seed(seed)
    qnet = QValueActor(MLP(4, 2, num_cells=16, depth=1), spec=env.action_spec)
    explore = EGreedyModule(env.action_spec, eps_init=1.0, eps_end=0.05, annealing_num_steps=64)
    policy = _seq(qnet, explore)
    loss = DQNLoss(qnet, gamma=0.9, delay_value=True)
    collector = SyncDataCollector(env, policy, frames_per_batch=FPB, total_frames=-1)
    kwargs = dict(progress_bar=False, save_trainer_file=path, save_trainer_interval=10**9)
    kwargs.update(trainer_kwargs)
    trainer = Trainer(
        collector=collector,
        total_frames=batches * FPB,
        optim_steps_per_batch=2,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2),
        clip_norm=1.0,
        **kwargs,
    )
    ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(500)), 8).register(trainer)
    LogReward(log_pbar=True).register(trainer)
    trainer.register_op("post_optim", HardUpdate(loss, value_network_update_interval=3).step)
    trainer.register_op("post_steps", explore.step, frames=FPB)
    run = Run(trainer, loss, collector)
    _recording(loss, run.losses)
    return run


def ppo_run(batches: int, path=None, seed: int = 0, **trainer_kwargs) -> Run:
    """PPO on the pure-torch PendulumEnv: GAE per epoch, 2 epochs of 4 minibatches."""
    torch.manual_seed(seed)
    env = TransformedEnv(PendulumEnv(seed=seed), StepCounter(max_steps=20))
    actor = tanh_actor(3, 1, env.action_spec)
    critic = ValueOperator(MLP(3, 1, num_cells=16, depth=1), in_keys=["observation"])
    loss = ClipPPOLoss(actor, critic)
    gae = GAE(gamma=0.9, lmbda=0.9, value_network=critic)
    collector = SyncDataCollector(env, actor, frames_per_batch=FPB, total_frames=-1)
    kwargs = dict(progress_bar=False, save_trainer_file=path, save_trainer_interval=10**9)
    kwargs.update(trainer_kwargs)
    trainer = Trainer(
        collector=collector,
        total_frames=batches * FPB,
        optim_steps_per_batch=2 * (FPB // 4),
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2),
        clip_norm=0.5,
        **kwargs,
    )
    ShuffledMiniBatches(4, advantage_module=gae).register(trainer)
    run = Run(trainer, loss, collector)
    _recording(loss, run.losses)
    return run


def _seq(*modules):
    from torchrl_lite.modules import SafeSequential

    return SafeSequential(*modules)
