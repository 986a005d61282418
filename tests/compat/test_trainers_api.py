"""Seed-era TorchRL trainer code, import changed: ``trainer.train(); trainer.shutdown()``,
``Recorder`` (and its current name ``LogValidationReward``) returning tensors.

The reference for the recorded values is a plain reset/step loop over the same env.
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import PendulumEnv, TransformedEnv, step_mdp
from torchrl_lite.envs.transforms import StepCounter
from torchrl_lite.modules import MLP, Actor, ValueOperator
from torchrl_lite.objectives import DDPGLoss
from torchrl_lite.trainers import LogValidationReward, Recorder, Trainer

STEPS = 10  # episode length of the evaluation env


def _eval_env(seed=3):
    return TransformedEnv(PendulumEnv(seed=seed), StepCounter(max_steps=STEPS))


def _zero_policy(td):
    return td.set("action", torch.zeros(*td.batch_size, 1))


def _plain_loop(env, frames):
    """Rewards and episode returns of ``frames`` steps with a zero action, resetting at done."""
    rewards, returns, acc = [], [], 0.0
    td = env.reset()
    for _ in range(frames):
        td = env.step(_zero_policy(td))
        r = float(td["next", "reward"])
        rewards.append(r)
        acc += r
        if bool(td["next", "done"]):
            returns.append(acc)
            acc = 0.0
            td = env.reset()
        else:
            td = step_mdp(td)
    return rewards, returns


class _ListLogger:
    def __init__(self):
        self.calls = []

    def log_scalar(self, name, value, step=None):
        self.calls.append((name, value, step))


def test_recorder_returns_tensors_matching_a_plain_loop():
    rec = Recorder(
        record_interval=1,
        record_frames=2 * STEPS,
        policy_exploration=_zero_policy,
        environment=_eval_env(),
    )
    out = rec()
    assert isinstance(out["r_evaluation"], torch.Tensor) and out["r_evaluation"].dim() == 0
    assert isinstance(out["total_r_evaluation"], torch.Tensor)
    rewards, returns = _plain_loop(_eval_env(), 2 * STEPS)
    assert len(returns) == 2
    assert abs(out["r_evaluation"].item() - sum(rewards) / len(rewards)) < 1e-4
    assert abs(out["total_r_evaluation"].item() - sum(returns) / len(returns)) < 1e-3


def test_log_validation_reward_is_recorder():
    assert LogValidationReward is Recorder
    rec = LogValidationReward(
        record_interval=1,
        record_frames=STEPS,
        policy_exploration=_zero_policy,
        environment=_eval_env(),
    )
    assert isinstance(rec()["r_evaluation"], torch.Tensor)


def test_trainer_script_train_then_shutdown():
    """TorchRL's trainer scripts end with ``trainer.train()`` then ``trainer.shutdown()``."""
    torch.manual_seed(0)
    env = PendulumEnv(seed=0)
    actor = Actor(MLP(3, 1, num_cells=[16]), spec=env.action_spec)
    qnet = ValueOperator(MLP(4, 1, num_cells=[16]), in_keys=["observation", "action"])
    loss = DDPGLoss(actor, qnet)
    collector = SyncDataCollector(env, actor, frames_per_batch=16, total_frames=32)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    logger = _ListLogger()
    trainer = Trainer(
        collector=collector,
        total_frames=32,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=optimizer,
        logger=logger,
        progress_bar=False,
        log_interval=16,
    )
    Recorder(
        record_interval=1, record_frames=STEPS, policy_exploration=actor, environment=_eval_env()
    ).register(trainer)
    before = [p.detach().clone() for p in actor.parameters()]
    trainer.train()
    trainer.shutdown()  # a second shutdown (train() ended with one) is harmless
    trainer.shutdown()
    assert collector.closed and env.is_closed
    assert trainer.collected_frames == 32
    assert not all(torch.equal(a, b) for a, b in zip(before, actor.parameters()))
    logged = {name: value for name, value, _ in logger.calls}
    assert isinstance(logged["r_evaluation"], float)  # the logger gets python floats
    assert "total_r_evaluation" in logged


def test_trainer_shutdown_before_train_closes_the_collector():
    env = PendulumEnv(seed=0)
    collector = SyncDataCollector(env, None, frames_per_batch=4, total_frames=8)
    trainer = Trainer(
        collector=collector,
        total_frames=8,
        optim_steps_per_batch=0,
        loss_module=nn.Identity(),
        progress_bar=False,
    )
    trainer.shutdown()
    assert collector.closed and env.is_closed
