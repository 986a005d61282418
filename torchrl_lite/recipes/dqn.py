"""DQN (double DQN, Huber loss, hard target copies) for discrete actions: config, builders.

Papers: Mnih et al. 2015, https://www.nature.com/articles/nature14236; van Hasselt et al.
2016, https://arxiv.org/abs/1509.06461. The defaults solve CartPole-v1 (mean return of
the last 10 training episodes, epsilon-greedy, >= 475) in about 50-70k frames.

``pixels=true`` learns from rendered frames (a ConvNet encoder before the MLP) with
``PIXEL_DEFAULTS``, which put the schedule on the scale of a 500k-frame pixel run: target
copies every 1,000 updates, epsilon annealed over 50k frames after 10k random frames, 50k
transitions, 3-step returns (``n_step=3``, Rainbow's; a ``MultiStep`` post-processor, the
target bootstrapped with ``gamma ** 3``), the rate dropped to 2.5e-5 once the training mean
reaches 300 (``lr_drop_at``) and a LayerNorm on each hidden layer of the Q-network
(``layer_norm``). The state schedule (copies every 64 updates, epsilon 0.01 after 16k
frames) never learns from pixels; with these settings the target is reached in ~120k
frames (the runs: ``docs/notes/pixels.md`` and ``docs/notes/recipe-runs.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictSequential
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.modules import EGreedyModule, QValueActor
from torchrl_lite.objectives import DQNLoss, HardUpdate
from torchrl_lite.recipes.common import (
    EpisodeReturns,
    check_action_kind,
    make_env,
    n_step_postproc,
    observation_network,
    whole_batches,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import ReplayBufferTrainer, Trainer

ALGO = "dqn"
ACTIONS = "discrete"
TARGETS = {"CartPole-v1": 475.0}
ENV_DEFAULTS: dict = {}
# applied when an override turns `pixels` on (not `frames`/`seed`: --frames/--seed win).
# A transition holds two uint8 [4, 64, 64] stacks (32 KiB): 50k of them are 1.6 GiB.
# Nature DQN's batch of 32, a smaller Adam step for the convolutions, and the target copy
# and exploration schedules scaled to a 500k-frame run (Nature: 2.5k updates, 2% of frames).
# A drop of the rate at a training mean of 300 steadies the swinging late phase where a
# rate decaying over the whole budget slowed the middle (docs/notes/pixels.md).
PIXEL_DEFAULTS = dict(
    buffer_size=50_000, batch_size=32, lr=1e-4, target_update_interval=1000,
    eps_frames=50_000, init_random_frames=10_000, n_step=3, lr_drop_at=300.0, layer_norm=True,
)  # fmt: skip


@dataclass(frozen=True)
class Config:
    """DQN settings; the defaults are for CartPole-v1."""

    env: str = "CartPole-v1"
    """Gymnasium id with a discrete action space."""
    frames: int = 100_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    num_envs: int = 8
    """Copies of the env stepped together (gymnasium vector API; 0: one plain env)."""
    init_random_frames: int = 1024
    """Frames of uniform random actions before learning starts."""
    frames_per_batch: int = 256
    """Frames collected between two rounds of updates."""
    optim_steps_per_batch: int = 64
    """Gradient steps after each batch (one step per 4 frames)."""
    batch_size: int = 128
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    lr: float = 5e-4
    """Adam learning rate; 1e-3 learns as fast but some seeds then stall near 100."""
    lr_end: float | None = None
    """Learning rate at the end of the frame budget, reached by a linear decay from ``lr``
    over ``frames`` (None: ``lr`` throughout)."""
    lr_drop_at: float | None = None
    """When the mean of the last 10 training returns first reaches this, the learning rate
    becomes ``lr_drop_to`` for the rest of the run (None: never)."""
    lr_drop_to: float = 2.5e-5
    """The learning rate after ``lr_drop_at`` is reached."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip."""
    gamma: float = 0.99
    """Discount."""
    target_update_interval: int = 64
    """Gradient steps between two copies of the Q-network into its target (here: one
    copy per batch; copying more often made CartPole collapse)."""
    eps_init: float = 1.0
    """Initial probability of a random action."""
    eps_end: float = 0.01
    """Final probability of a random action (training episodes, hence the target, use it)."""
    eps_frames: int = 16_000
    """Frames over which the random-action probability is annealed."""
    hidden: int = 256
    """Units per hidden layer (two layers, ReLU); 128 learns less reliably."""
    layer_norm: bool = False
    """A ``LayerNorm`` on each hidden layer of the Q-network, before its ReLU."""
    pixels: bool = False
    """Learn from rendered images instead of the state (4 stacked 64x64 grayscale frames)."""
    n_step: int = 1
    """Rewards summed per target: 1 is one-step TD (DQN); ``n > 1`` adds
    ``MultiStep(gamma, n - 1, across_batches=True)`` to the collector (Rainbow uses 3)."""


def make_train_env(cfg: Config):
    if cfg.lr_end is not None and cfg.lr_drop_at is not None:
        raise ValueError(
            "dqn: lr_end (a decay over the budget) and lr_drop_at (a drop once the returns "
            "reach a level) both set the learning rate; set one of them (lr_drop_at=none "
            "turns the drop off; pixels=true sets lr_drop_at=300)."
        )
    env = make_env(cfg.env, num_envs=cfg.num_envs, seed=cfg.seed, pixels=cfg.pixels)
    check_action_kind(env, ACTIONS, "DQN")
    return env


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, pixels=cfg.pixels, **kwargs)


def make_qvalue_actor(cfg: Config, env):
    """The greedy policy: a network writes ``"action_value"``, then the arg-max action."""
    n_actions = env.action_spec.shape[-1]
    net, key = observation_network(
        env, n_actions, cfg.hidden, 2, nn.ReLU, pixels=cfg.pixels, layer_norm=cfg.layer_norm
    )
    return QValueActor(net, in_keys=[key], spec=env.action_spec)


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor = make_qvalue_actor(cfg, env)
    loss = DQNLoss(
        actor, loss_function="smooth_l1", delay_value=True, double_dqn=True, gamma=cfg.gamma
    )
    optimizer = torch.optim.Adam(loss.parameters(), lr=cfg.lr, fused=True)  # fused: faster
    explore = EGreedyModule(
        env.action_spec,
        eps_init=cfg.eps_init,
        eps_end=cfg.eps_end,
        annealing_num_steps=cfg.eps_frames,
    )
    collector = SyncDataCollector(
        env,
        TensorDictSequential(actor, explore),  # the collector explores; `actor` is greedy
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
        init_random_frames=cfg.init_random_frames,
        postproc=n_step_postproc(cfg.n_step, cfg.gamma),
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=cfg.optim_steps_per_batch,
        loss_module=loss,
        optimizer=optimizer,
        logger=logger,
        clip_norm=cfg.max_grad_norm,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=20_000,
        log_interval=2_048,
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(cfg.buffer_size))
    ReplayBufferTrainer(buffer, batch_size=cfg.batch_size).register(trainer)
    target_update = HardUpdate(loss, value_network_update_interval=cfg.target_update_interval)
    trainer.register_op("post_optim", target_update.step)
    trainer.register_op("post_steps", explore.step, frames=cfg.frames_per_batch)
    if cfg.lr_end is not None:
        trainer.register_op("post_steps", linear_lr(trainer, optimizer, cfg.lr, cfg.lr_end))
    if cfg.lr_drop_at is not None:
        LearningRateDrop(optimizer, cfg.lr_drop_at, cfg.lr_drop_to).register(trainer)
    return trainer, actor


def linear_lr(trainer: Trainer, optimizer: torch.optim.Optimizer, start: float, end: float):
    """A ``post_steps`` op: the learning rate from ``start`` to ``end``, linear in the
    frames ``trainer`` has collected out of its ``total_frames`` (then ``end``).

    Stateless (it reads the trainer's frame count), so a resumed run continues the decay.

    Example:
        >>> w = torch.nn.Parameter(torch.zeros(1))
        >>> optimizer = torch.optim.Adam([w], lr=1e-4)
        >>> from types import SimpleNamespace
        >>> trainer = SimpleNamespace(collected_frames=0, total_frames=100)  # a Trainer's
        >>> step = linear_lr(trainer, optimizer, 1e-4, 2e-5)
        >>> trainer.collected_frames = 25; step(); round(optimizer.param_groups[0]["lr"], 8)
        8e-05
        >>> trainer.collected_frames = 200; step(); optimizer.param_groups[0]["lr"]
        2e-05
    """

    def step() -> None:
        progress = min(1.0, trainer.collected_frames / trainer.total_frames)
        for group in optimizer.param_groups:
            group["lr"] = start * (1 - progress) + end * progress

    return step


class LearningRateDrop(EpisodeReturns):
    """Lower the learning rate once the policy is good: when the mean of the last
    ``window`` training returns first reaches ``at``, every parameter group's rate becomes
    ``lr`` for the rest of training.

    A ``pre_steps_log`` hook, like :class:`~torchrl_lite.recipes.common.EpisodeReturns`
    (whose tracking it reuses); it logs ``"lr"``. Its state (the returns so far, the frame
    of the drop) is checkpointed; the optimizer's own state keeps the lowered rate.

    Example:
        >>> from tensordict import TensorDict
        >>> w = torch.nn.Parameter(torch.zeros(1))
        >>> optimizer = torch.optim.Adam([w], lr=1e-4)
        >>> drop = LearningRateDrop(optimizer, at=300.0, lr=2e-5, window=2)
        >>> def batch(ret):  # one finished episode with return `ret`
        ...     return TensorDict({"next": {"done": torch.ones(1, 1, dtype=torch.bool),
        ...                                 "episode_reward": torch.full((1, 1), ret)}}, [1])
        >>> _ = drop(batch(200.0)); _ = drop(batch(350.0)); optimizer.param_groups[0]["lr"]
        0.0001
        >>> _ = drop(batch(300.0)); optimizer.param_groups[0]["lr"], drop.dropped_at
        (2e-05, 0)
    """

    def __init__(self, optimizer: torch.optim.Optimizer, at: float, lr: float, window=10):
        super().__init__(window=window)
        self.optimizer, self.at, self.lr = optimizer, at, lr
        self.dropped_at: int | None = None

    def __call__(self, batch):
        super().__call__(batch)
        if (
            self.dropped_at is None
            and len(self.history) >= self.window
            and self.running_mean() >= self.at
        ):
            self.dropped_at = self.history[-1][0]
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr
        return {"lr": torch.tensor(self.optimizer.param_groups[0]["lr"])}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "dropped_at": self.dropped_at}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.dropped_at = state["dropped_at"]

    def register(self, trainer, name: str = "lr_drop") -> None:
        super().register(trainer, name)


RECIPE = Recipe(
    name=ALGO,
    Config=Config,
    module=__name__,
    make_trainer=make_trainer,
    make_eval_env=make_eval_env,
    actions=ACTIONS,
    targets=TARGETS,
    env_defaults=ENV_DEFAULTS,
    pixel_defaults=PIXEL_DEFAULTS,
)
