"""Online Decision Transformer: offline pre-training on a dataset file, then fine-tuning on
the policy's own trajectories.

Paper: Zheng et al. 2022, https://arxiv.org/abs/2202.05607. The actor is a decision
transformer with a TanhNormal head, trained with
:class:`~torchrl_lite.objectives.OnlineDTLoss` (log-likelihood of the buffer's actions
plus an entropy bonus whose temperature keeps the entropy near ``-action_dim``). For
``pretrain_steps`` gradient steps it learns from ``dataset`` alone; then every
``online_interval`` steps :class:`OnlineRefresh` plays ``online_episodes`` episodes
with the sampled policy conditioned on ``online_target`` and puts them in the buffer,
which keeps ``buffer_trajectories`` trajectories: it starts with the dataset's best
ones, and a full buffer drops those with the lowest return (``buffer_evict``; or the
oldest, as in the paper). The target actions are clamped ``action_margin`` inside the
action bounds for the TanhNormal log-likelihood. ``frames`` counts gradient steps; the env frames
collected are ``OnlineRefresh.env_frames``.

The online phase helps where sampled episodes can displace the buffer's worst
trajectories (a "medium-replay" file), and barely where the dataset's best trajectories
already match the policy (a "medium" file); the runs: ``docs/notes/recipe-runs.md``.

Example:
    >>> cfg = Config(dataset="pendulum-medium.hdf5")
    >>> # trainer, policy = make_trainer(cfg)
    >>> # make_evaluation(cfg, policy).register(trainer)
    >>> # trainer.train()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from tensordict import TensorDict

from torchrl_lite import _keys as K
from torchrl_lite.envs import ExplorationType, set_exploration_type
from torchrl_lite.modules.models.decision_transformer import DTInferenceWrapper, online_dt_actor
from torchrl_lite.objectives import OnlineDTLoss
from torchrl_lite.recipes import dt
from torchrl_lite.recipes.common import check_action_kind
from torchrl_lite.recipes.dt import make_eval_env, make_evaluation, make_model  # noqa: F401
from torchrl_lite.recipes.offline import OfflineBatches
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import Trainer
from torchrl_lite.trainers.hooks import TrainerHookBase

ALGO = "odt"
ACTIONS = "continuous"
OFFLINE = True  # the CLI's learning signal is evaluation episodes, its frames gradient steps
TARGETS: dict = {}
ENV_DEFAULTS = dt.ENV_DEFAULTS


@dataclass(frozen=True)
class Config(dt.Config):
    """Online-DT settings (the DT's, plus these); the defaults are for Pendulum-v1."""

    frames: int = 4_000
    """Gradient steps in all (offline pre-training included)."""
    pretrain_steps: int = 2_000
    """Gradient steps on the dataset alone, before the first online episodes."""
    lr_schedule: str = "constant"
    """``"constant"`` after the warm-up: the online phase keeps learning at ``lr``."""
    online_interval: int = 200
    """Gradient steps between two online collections."""
    online_episodes: int = 10
    """Episodes per collection (played side by side)."""
    online_target: float = -400.0
    """The return the exploring policy is conditioned on (env units): for Pendulum-v1
    medium, a little above the dataset's best episode (-430)."""
    target_return: float = -400.0
    """The return the policy is conditioned on at evaluation (env units)."""
    buffer_trajectories: int = 200
    """Trajectories kept in the buffer (a larger dataset starts with its best ones)."""
    buffer_evict: str = "lowest_return"
    """Which trajectories leave a full buffer: ``"lowest_return"`` (the buffer keeps the
    best trajectories seen) or ``"oldest"`` (first in, first out, as in the paper)."""
    action_margin: float = 0.01
    """The buffer's actions are clamped this fraction of the half-range inside the bounds
    for the log-likelihood (see :class:`~torchrl_lite.objectives.OnlineDTLoss`). Datasets
    of clipped exploration noise hold many actions on the bounds, whose ``atanh`` would
    widen the TanhNormal and spoil the sampled episodes."""
    alpha_init: float = 0.1
    """Initial entropy temperature."""
    dropout: float = 0.0
    """Dropout while training."""


def whole_episodes(data: TensorDict) -> TensorDict:
    """Flat transitions ``[N]`` with trajectory ids from a rollout ``[B, T]``."""
    done = data.get((K.NEXT, K.DONE)).reshape(data.shape)  # [B, T]
    starts = torch.zeros_like(done)
    starts[:, 1:] = done[:, :-1]
    ids = torch.cumsum(starts.reshape(-1) | _row_starts(data.shape), 0)  # [B * T]
    return TensorDict(
        {
            K.OBSERVATION: data.get(K.OBSERVATION).reshape(-1, *data.get(K.OBSERVATION).shape[2:]),
            K.ACTION: data.get(K.ACTION).reshape(-1, *data.get(K.ACTION).shape[2:]),
            (K.NEXT, K.REWARD): data.get((K.NEXT, K.REWARD)).reshape(-1, 1),
            K.TRAJ_IDS: ids,
        },
        batch_size=[data.numel()],
    )


def _row_starts(shape) -> torch.Tensor:
    flags = torch.zeros(shape, dtype=torch.bool)
    flags[:, 0] = True
    return flags.reshape(-1)


class OnlineRefresh(TrainerHookBase):
    """Every ``interval`` gradient steps after ``start``: play episodes, add them to the buffer.

    The policy samples (``ExplorationType.RANDOM``) in ``env`` (a batched env with
    :class:`~torchrl_lite.envs.transforms.TargetReturn` and ``DTContext``) for ``steps``
    steps; the trajectories go to ``windows`` via :meth:`TrajectoryWindows.extend`.
    ``env_frames`` counts the env steps taken and ``returns`` the mean return of each
    collection.

    Args:
        windows: the buffer (a :class:`~torchrl_lite.data.datasets.TrajectoryWindows`).
        env: the collection env.
        policy: a :class:`DTInferenceWrapper` of the stochastic actor.
        start: gradient steps before the first collection.
        interval: gradient steps between collections.
        steps: steps per collection (one episode of each env copy).

    Example:
        >>> # OnlineRefresh(windows, env, policy, start=3000, interval=300, steps=200).register(trainer)
    """

    def __init__(self, windows, env, policy, *, start: int, interval: int, steps: int):
        if interval < 1 or steps < 1 or start < 0:
            raise ValueError(
                f"OnlineRefresh: interval and steps must be >= 1 and start >= 0, got "
                f"{interval}, {steps}, {start}."
            )
        self.windows, self.env, self.policy = windows, env, policy
        self.start, self.interval, self.steps = start, interval, steps
        self.env_frames = 0
        self.returns: list[tuple[int, float]] = []
        self._trainer = None

    def __call__(self) -> None:
        step = self._trainer.optim_count if self._trainer is not None else self.start
        if step < self.start or (step - self.start) % self.interval:
            return
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            rollout = self.env.rollout(self.steps, self.policy, break_when_any_done=False)
        data = whole_episodes(rollout.reshape(-1, rollout.shape[-1]))
        self.windows.extend(data)
        self.env_frames += data.numel()
        episodes = rollout.numel() // rollout.shape[-1]  # one per env copy
        self.returns.append((step, float(data.get((K.NEXT, K.REWARD)).sum()) / episodes))

    def register(self, trainer, name: str = "online_refresh") -> None:
        self._trainer = trainer
        trainer.register_op("post_optim", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict:
        return {"env_frames": self.env_frames, "returns": list(self.returns)}

    def load_state_dict(self, state: dict) -> None:
        self.env_frames = int(state["env_frames"])
        self.returns = [tuple(r) for r in state["returns"]]


def online_refresh_of(trainer: Trainer) -> OnlineRefresh:
    """The :class:`OnlineRefresh` hook of an ODT trainer (its ``env_frames``, ``returns``)."""
    return trainer._modules["online_refresh"]


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; register :func:`make_evaluation` too."""
    if cfg.pretrain_steps > cfg.frames:
        raise ValueError(
            f"ODT: pretrain_steps={cfg.pretrain_steps} exceeds frames={cfg.frames}: no online "
            "phase would run; raise frames or lower pretrain_steps."
        )
    torch.manual_seed(cfg.seed)
    env = make_eval_env(cfg)
    check_action_kind(env, ACTIONS, "ODT")
    windows = dt.load_windows(cfg, env, capacity=cfg.buffer_trajectories, evict=cfg.buffer_evict)
    actor = online_dt_actor(make_model(cfg, env, windows), env.action_spec)
    loss = OnlineDTLoss(
        actor,
        alpha_init=cfg.alpha_init,
        action_spec=env.action_spec,
        action_margin=cfg.action_margin,
    )
    env.close()
    batches = OfflineBatches(windows, batch_size=cfg.batch_size, total_steps=cfg.frames)
    trainer = Trainer(
        collector=batches,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=None,
        logger=logger,
        progress_bar=progress_bar,
        clip_norm=cfg.grad_clip,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=cfg.eval_interval,
    )
    batches.register(trainer)
    dt._register_optimizer(trainer, dt.make_optimizer(cfg, loss.parameters(), trainer))
    policy = DTInferenceWrapper(actor)
    online = dataclasses.replace(cfg, target_return=cfg.online_target)
    OnlineRefresh(
        windows,
        make_eval_env(online, num_envs=cfg.online_episodes, seed_offset=30_000),
        policy,
        start=cfg.pretrain_steps,
        interval=cfg.online_interval,
        steps=cfg.eval_steps,
    ).register(trainer)
    return trainer, policy


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
