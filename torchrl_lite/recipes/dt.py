"""Decision Transformer on a dataset file: return-conditioned behaviour cloning.

Paper: Chen et al. 2021, https://arxiv.org/abs/2106.01345. Offline: the transformer
learns to predict the dataset's actions from windows of ``context_length`` steps of
(return-to-go, observation, action) read from ``dataset`` (a D4RL-layout ``.hdf5`` file;
make one with ``torchrl-lite dataset RUN OUT.hdf5`` or
:func:`~torchrl_lite.recipes.offline.collect_dataset`). ``frames`` counts gradient steps.
At evaluation the policy is conditioned on ``target_return``: the env's
:class:`~torchrl_lite.envs.transforms.TargetReturn` lowers it by each reward received, and
:class:`~torchrl_lite.envs.transforms.DTContext` keeps the window the model reads; a
higher target asks for a better episode.

On Pendulum-v1 datasets the evaluation return rises with the target it is conditioned on
(the runs: ``docs/notes/decision-transformer.md``, ``docs/notes/recipe-runs.md``).

Example:
    >>> cfg = Config(dataset="pendulum-medium.hdf5")  # target: the file's best episode
    >>> # trainer, policy = make_trainer(cfg)
    >>> # make_evaluation(cfg, policy).register(trainer)  # evaluation returns
    >>> # trainer.train()
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from torchrl_lite.data.datasets import TrajectoryWindows
from torchrl_lite.envs import Compose, DTContext, TargetReturn, TransformedEnv
from torchrl_lite.modules.models.decision_transformer import (
    BoundedDTActor,
    DecisionTransformer,
    DTInferenceWrapper,
)
from torchrl_lite.objectives import DTLoss
from torchrl_lite.recipes.common import check_action_kind, make_env
from torchrl_lite.recipes.offline import (
    EvaluationReturns,
    OfflineBatches,
    OfflineConfig,
    check_dataset_fits,
    dataset_episode_returns,
    load_dataset,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import Trainer

ALGO = "dt"
ACTIONS = "continuous"
OFFLINE = True
TARGETS: dict = {}
ENV_DEFAULTS = {
    "mujoco": dict(eval_steps=1000, reward_scale=1000.0, target_return=3600.0, max_timestep=1000),
    "dm_control": dict(
        eval_steps=1000, reward_scale=1000.0, target_return=800.0, max_timestep=1000
    ),
}


@dataclass(frozen=True)
class Config(OfflineConfig):
    """Decision-transformer settings; the defaults are for Pendulum-v1."""

    frames: int = 10_000
    """Gradient steps (175-209 s on one core of the benchmark machine at the defaults)."""
    batch_size: int = 32
    """Windows per gradient step."""
    lr: float = 1e-3
    """AdamW learning rate (after the warm-up)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup_steps: int = 200
    """Linear learning-rate warm-up, in gradient steps."""
    lr_schedule: str = "cosine"
    """After the warm-up: ``"cosine"`` (decay to 0 at ``frames``) or ``"constant"``. At a
    constant 1e-3 with batches of 32 the last weights are a noisy draw around the fit;
    on the Pendulum files (3 seeds) cosine over 10000 steps puts the DT above both
    datasets' means at the best target, constant over 3000 did not
    (``benchmarks/results/dt.md``)."""
    grad_clip: float = 0.25
    """Gradient-norm clip."""
    context_length: int = 10
    """Steps per window ``K`` (``3K`` tokens)."""
    hidden: int = 32
    """Embedding width."""
    n_layer: int = 2
    """Transformer blocks."""
    n_head: int = 1
    """Attention heads."""
    dropout: float = 0.1
    """Dropout while training (none when acting)."""
    max_timestep: int = 1
    """Episode timesteps with their own embedding (1: none, the model is not told the
    step). Pendulum-v1's dynamics and good policies do not depend on the step, and
    per-step embeddings learned from a few hundred episodes hurt there; the paper's 1000
    is the MuJoCo / dm_control default."""
    normalize_states: bool = True
    """Normalize observations by the dataset's mean and standard deviation (kept in the
    model, so acting uses the same statistics)."""
    reward_scale: float = 400.0
    """Returns-to-go are divided by it (a Pendulum-v1 return is -1700 to -120, so about
    -4 to 0). The return token is a linear embedding followed by LayerNorm, which
    saturates for large inputs: at 100 (returns-to-go down to -17) the model could no
    longer tell a return of -15 from one of -7."""
    target_return: float | None = None
    """The return the policy is conditioned on at evaluation (env units); None: the
    dataset's best episode return (:func:`best_episode_return`), the target the Pendulum
    benchmark's figures are for."""


@functools.lru_cache(maxsize=8)
def best_episode_return(path: str) -> float:
    """The highest return of an episode that ends inside the dataset file at ``path`` (the
    whole file's if none ends there), in env units."""
    returns = dataset_episode_returns(path)
    return max(returns) if returns else float(load_dataset(path, 1).data["next", "reward"].sum())


def target_of(cfg: Config) -> float:
    """``cfg.target_return``, or the dataset's best episode return when it is None."""
    if cfg.target_return is not None:
        return float(cfg.target_return)
    return best_episode_return(str(cfg.dataset))


def make_eval_env(cfg: Config, num_envs: int | None = None, seed_offset: int = 10_000, **kwargs):
    """The env the policy acts in: the recipe env plus TargetReturn (conditioned on
    :func:`target_of`) and DTContext."""
    env = make_env(cfg.env, num_envs=num_envs, seed=cfg.seed + seed_offset, **kwargs)
    return TransformedEnv(
        env,
        Compose(TargetReturn(target_of(cfg), cfg.reward_scale), DTContext(cfg.context_length)),
    )


def make_evaluation(cfg: Config, policy, target: float | None = None) -> EvaluationReturns:
    """The learning signal: :class:`EvaluationReturns` every ``eval_interval`` steps."""
    env = make_eval_env(cfg, num_envs=cfg.eval_episodes, seed_offset=20_000)
    return EvaluationReturns(
        env, policy, interval=cfg.eval_interval, steps=cfg.eval_steps, target=target
    )


def make_model(cfg: Config, env, windows: TrajectoryWindows | None = None) -> DecisionTransformer:
    """The network, shaped on ``env``; with ``cfg.normalize_states`` it normalizes
    observations by ``windows``' statistics (needed then)."""
    batch = len(env.batch_size)
    mean = std = None
    if cfg.normalize_states:
        if windows is None:
            raise ValueError(
                "make_model: normalize_states=True needs the dataset's windows for the "
                "observation statistics; pass windows=load_windows(cfg, env)."
            )
        mean, std = windows.state_stats()
    return DecisionTransformer(
        env.observation_spec["observation"].shape[batch:].numel(),
        env.action_spec.shape[batch:].numel(),
        cfg.context_length,
        hidden=cfg.hidden,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        max_timestep=cfg.max_timestep,
        dropout=cfg.dropout,
        state_mean=mean,
        state_std=std,
    )


def load_windows(
    cfg: Config, env, capacity: int | None = None, evict: str = "oldest"
) -> TrajectoryWindows:
    """The dataset file as windows of ``context_length`` steps (checked against ``env``;
    ``capacity`` and ``evict`` as in :class:`TrajectoryWindows`)."""
    dataset = load_dataset(cfg.dataset, cfg.batch_size)
    check_dataset_fits(dataset, env)
    return TrajectoryWindows(
        dataset.data,
        cfg.context_length,
        reward_scale=cfg.reward_scale,
        capacity=capacity,
        evict=evict,
    )


LR_SCHEDULES = ("cosine", "constant")


def lr_factor(step: int, warmup: int, total: int, schedule: str) -> float:
    """The learning-rate multiplier after ``step`` gradient steps: linear warm-up over
    ``warmup`` steps, then ``1`` (``"constant"``) or a half cosine from 1 at ``warmup`` to
    0 at ``total`` (``"cosine"``).

    Example:
        >>> [round(lr_factor(s, 2, 6, "cosine"), 2) for s in range(7)]
        [0.5, 1.0, 1.0, 0.85, 0.5, 0.15, 0.0]
    """
    warmup = max(1, warmup)
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(cfg: Config, params, trainer: Trainer):
    """AdamW with a linear warm-up, then ``cfg.lr_schedule``, stepped by ``trainer`` (its
    scheduler on post_optim)."""
    if cfg.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule={cfg.lr_schedule!r} is not one of {list(LR_SCHEDULES)}.")
    optim = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = _Schedule(torch.optim.lr_scheduler.LambdaLR(
        optim, lambda step: lr_factor(step, cfg.warmup_steps, cfg.frames, cfg.lr_schedule)
    ))  # fmt: skip
    trainer.register_op("post_optim", schedule.step)
    trainer.register_module("lr_schedule", schedule)
    return optim


class _Schedule:
    """Steps and checkpoints ``schedule``; a resumed run keeps this config's base rate.

    ``LRScheduler.load_state_dict`` restores the saved run's base rates, which would undo a
    changed ``lr=...`` at the next step (``OptimizerHook`` applies it to the optimizer).
    """

    def __init__(self, schedule: torch.optim.lr_scheduler.LRScheduler):
        self.schedule, self.base_lrs = schedule, list(schedule.base_lrs)

    def step(self) -> None:
        self.schedule.step()

    def state_dict(self) -> dict:
        return self.schedule.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.schedule.load_state_dict(state)
        self.schedule.base_lrs = list(self.base_lrs)


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; register :func:`make_evaluation` too."""
    torch.manual_seed(cfg.seed)
    env = make_eval_env(cfg)
    check_action_kind(env, ACTIONS, "DT")
    windows = load_windows(cfg, env)
    actor = BoundedDTActor(make_model(cfg, env, windows), env.action_spec)
    env.close()
    loss = DTLoss(actor, loss_function="l2")
    batches = OfflineBatches(windows, batch_size=cfg.batch_size, total_steps=cfg.frames)
    trainer = Trainer(
        collector=batches,
        total_frames=cfg.frames,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=None,  # registered below, with its schedule
        logger=logger,
        progress_bar=progress_bar,
        clip_norm=cfg.grad_clip,
        save_trainer_file=checkpoint,
        save_trainer_interval=5_000,
        log_interval=cfg.eval_interval,
    )
    batches.register(trainer)
    _register_optimizer(trainer, make_optimizer(cfg, loss.parameters(), trainer))
    return trainer, DTInferenceWrapper(actor)


def _register_optimizer(trainer: Trainer, optim) -> None:
    from torchrl_lite.trainers import OptimizerHook

    OptimizerHook(optim).register(trainer, name="optimizer")


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
