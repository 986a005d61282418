"""What the offline recipes (CQL, IQL, TD3+BC) share: a dataset file, the trainer's data
source, and evaluation episodes as the learning signal.

Offline training reads a D4RL-layout HDF5 file (``observations``, ``actions``,
``rewards``, ``terminals``, ``timeouts``, ``next_observations``) through
:class:`~torchrl_lite.data.datasets.D4RLExperienceReplay`; :func:`collect_dataset` writes
one from rollouts of any policy, so no download is needed. The :class:`Trainer` runs one
gradient step per item of :class:`OfflineBatches`, so its frame counters are gradient
steps; there are no training episodes, so :class:`EvaluationReturns` runs the policy in
the env every few steps and tracks those returns instead (the CLI registers it where
online recipes get ``EpisodeReturns``).

Example:
    >>> import tempfile
    >>> from torchrl_lite.recipes.common import make_env
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "pendulum-random.hdf5"
    >>> info = collect_dataset(make_env("Pendulum-v1"), None, frames=400, path=path, seed=0)
    >>> info["transitions"], info["episodes"]
    (400, 2)
    >>> data = load_dataset(path, batch_size=32)
    >>> data.sample()["next", "reward"].shape
    torch.Size([32, 1])
    >>> folder.cleanup()
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import require
from torchrl_lite.data.datasets import D4RLExperienceReplay
from torchrl_lite.envs import EnvBase, ExplorationType, set_exploration_type
from torchrl_lite.recipes.common import make_env
from torchrl_lite.trainers.episodes import EvaluationReturns, flat_episode_returns

__all__ = [
    "EvaluationReturns",
    "OfflineBatches",
    "OfflineConfig",
    "check_dataset_fits",
    "collect_dataset",
    "dataset_episode_returns",
    "load_dataset",
    "make_eval_env",
    "make_evaluation",
]

HOW_TO_MAKE = (
    "Make one with torchrl_lite.recipes.offline.collect_dataset(env, policy, frames, path), "
    "e.g. from a partly trained `torchrl-lite train sac` run's policy with noise=0.1."
)


# -- what every offline recipe's config and evaluation share ------------------------------
@dataclass(frozen=True)
class OfflineConfig:
    """Settings every offline recipe has; a recipe's ``Config`` adds its own after these."""

    env: str = "Pendulum-v1"
    """The env the dataset came from: networks are shaped on it and evaluated in it."""
    dataset: str = ""
    """Path of the D4RL-layout ``.hdf5`` file to learn from."""
    frames: int = 20_000
    """Gradient steps (offline, the trainer counts one frame per step)."""
    seed: int = 0
    """Seeds torch and the evaluation env."""
    target: float | None = None
    """Stop once the evaluation return reaches this (None: the recipe's, if any)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    lr: float = 3e-4
    """Adam learning rate (every network, and CQL's SAC temperature)."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.005
    """Soft target-update rate of the target networks."""
    eval_interval: int = 1_000
    """Gradient steps between two evaluations."""
    eval_episodes: int = 10
    """Episodes per evaluation (run side by side)."""
    eval_steps: int = 200
    """Steps of each evaluation episode (Pendulum-v1's episode length)."""


def make_eval_env(cfg: OfflineConfig, **kwargs) -> EnvBase:
    """The env the policy is evaluated (and shaped) on."""
    return make_env(cfg.env, seed=cfg.seed + 10_000, **kwargs)


def make_evaluation(cfg: OfflineConfig, policy, target: float | None = None):
    """The learning signal: :class:`EvaluationReturns` every ``eval_interval`` steps."""
    env = make_env(cfg.env, num_envs=cfg.eval_episodes, seed=cfg.seed + 20_000)
    return EvaluationReturns(
        env, policy, interval=cfg.eval_interval, steps=cfg.eval_steps, target=target
    )


# -- making a dataset file ----------------------------------------------------------------
def collect_dataset(
    env: EnvBase,
    policy,
    frames: int,
    path,
    seed: int = 0,
    *,
    noise: float = 0.0,
) -> dict:
    """Roll out ``policy`` in ``env`` and write the transitions as a D4RL-layout HDF5 file.

    The policy acts under ``ExplorationType.RANDOM`` (a stochastic actor samples), plus
    Gaussian noise of standard deviation ``noise`` times the action's half-range, clipped
    into the action spec. Done episodes are reset and the rollout goes on; the file gets
    ``observations [N, *obs]``, ``actions [N, *act]``, ``rewards [N]``, ``terminals [N]``
    (the env's ``terminated``), ``timeouts [N]`` (truncated, or cut by the end of the
    collection) and ``next_observations [N, *obs]`` (floating point as float32), with the
    env copies of a batched env written one after the other. Torch's global RNG is left as it was.

    Args:
        env: a recipe env (e.g. ``make_env("Pendulum-v1")``), single or batched ``[B]``.
        policy: a TensorDict module writing ``"action"``; None: uniform random actions.
        frames: transitions to write (``ceil(frames / B)`` steps of each copy, trimmed).
        path: the ``.hdf5`` file to write (its folder is created).
        seed: seeds the env and the policy's sampling.
        noise: exploration noise, as a fraction of the action half-range (0: none).

    Returns:
        ``{"path", "transitions", "episodes", "mean_return"}``: the file, its size, and
        the count and mean return of the episodes that ended inside it.
    """
    path = Path(path)
    if path.suffix != ".hdf5":
        raise ValueError(f"collect_dataset writes a D4RL .hdf5 file; got {path}: add .hdf5.")
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"collect_dataset: frames must be a positive int, got {frames!r}.")
    if not noise >= 0:
        raise ValueError(f"collect_dataset: noise must be >= 0, got {noise!r}.")
    h5py = require("h5py", "utils")
    copies = max(1, env.batch_size.numel())
    actor = policy if policy is None or noise == 0 else _Noisy(policy, env.action_spec, noise)
    with torch.random.fork_rng(), torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        torch.manual_seed(seed)
        env.set_seed(seed)
        rollout = env.rollout(-(-frames // copies), actor, break_when_any_done=False)
    rows = rollout.reshape(-1, rollout.shape[-1])  # [copies, T]
    terminated = rows.get((K.NEXT, K.TERMINATED)).reshape(rows.shape)  # [copies, T]
    done = rows.get((K.NEXT, K.DONE)).reshape(rows.shape)
    cut = torch.zeros_like(done)
    cut[:, -1] = True  # each copy's last step ends its episode early
    flat = rows.reshape(-1)[:frames]  # [N]: copy 0's steps, then copy 1's, ...
    terminated, done, cut = (x.reshape(-1)[:frames] for x in (terminated, done, cut))
    cut[-1] = True
    timeouts = (done | cut) & ~terminated
    returns = flat_episode_returns(flat.get((K.NEXT, K.REWARD)).reshape(-1), done, cut & ~done)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as file:
        for name, value in (
            ("observations", flat.get(K.OBSERVATION)),
            ("actions", flat.get(K.ACTION)),
            ("rewards", flat.get((K.NEXT, K.REWARD)).reshape(-1)),
            ("next_observations", flat.get((K.NEXT, K.OBSERVATION))),
        ):
            value = value.float() if value.is_floating_point() else value
            file.create_dataset(name, data=value.numpy())
        file.create_dataset("terminals", data=terminated.numpy())
        file.create_dataset("timeouts", data=timeouts.numpy())
        file.attrs.update({"seed": seed, "noise": noise, "writer": "torchrl_lite"})
    return {
        "path": path,
        "transitions": flat.numel(),
        "episodes": len(returns),
        "mean_return": sum(returns) / len(returns) if returns else math.nan,
    }


class _Noisy(torch.nn.Module):
    """``policy`` then Gaussian noise (``noise`` x half-range), clipped into ``spec``."""

    def __init__(self, policy, spec, noise: float):
        super().__init__()
        self.policy, self.spec = policy, spec
        self.scale = noise * (spec.high - spec.low) / 2

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        td = self.policy(td)
        action = td.get(K.ACTION)
        return td.set(K.ACTION, self.spec.project(action + self.scale * torch.randn_like(action)))


# -- reading it ----------------------------------------------------------------------------
def dataset_episode_returns(path) -> list:
    """Returns ``[E]`` of the episodes that end inside the dataset file at ``path`` (one cut
    by the file's end is left out), in env units and file order."""
    data = load_dataset(path, 1).data
    done = data.get((K.NEXT, K.DONE)).reshape(-1)
    cut = torch.zeros_like(done)
    cut[-1] = not bool(done[-1])
    return flat_episode_returns(data.get((K.NEXT, K.REWARD)).reshape(-1), done, cut)


def load_dataset(path, batch_size: int, sampler=None) -> D4RLExperienceReplay:
    """The D4RL-layout file at ``path`` as a replay buffer of transitions ``[N]``.

    The first load converts the file into memory-mapped files next to it (see
    :class:`~torchrl_lite.data.datasets.D4RLExperienceReplay`).

    Args:
        path: the ``.hdf5`` file (its folder is the dataset's ``root``, its stem the id).
        batch_size: transitions per ``sample()``.
        sampler: default ``RandomSampler`` (uniform, with replacement).

    Raises:
        ValueError: no path given, or not a ``.hdf5`` file.
        FileNotFoundError: the file is missing (the message says how to make one).
    """
    if not str(path):
        raise ValueError(
            f"Offline recipes train on a dataset file: pass dataset=FILE.hdf5. {HOW_TO_MAKE}"
        )
    path = Path(path).expanduser()
    if path.suffix != ".hdf5":
        raise ValueError(f"dataset must be a D4RL-layout .hdf5 file, got {str(path)!r}.")
    if not path.is_file():
        raise FileNotFoundError(f"No dataset file at {path.resolve()}. {HOW_TO_MAKE}")
    return D4RLExperienceReplay(path.stem, batch_size=batch_size, sampler=sampler, root=path.parent)


def check_dataset_fits(dataset: D4RLExperienceReplay, env: EnvBase) -> None:
    """Raise ValueError when the dataset's observations or actions do not fit ``env``."""
    for key, spec in (
        (K.OBSERVATION, env.observation_spec[K.OBSERVATION]),
        (K.ACTION, env.action_spec),
    ):
        stored = tuple(dataset.data.get(key).shape[1:])
        wanted = tuple(spec.shape[len(env.batch_size) :])
        if stored != wanted:
            raise ValueError(
                f"The dataset {dataset.dataset_id!r} holds {key} of shape {stored}, but the env "
                f"has {wanted}: it was collected in another env. Pass the env it came from."
            )


# -- the trainer's data source -------------------------------------------------------------
class OfflineBatches:
    """The offline Trainer's ``collector``: one gradient step per item, on dataset samples.

    Iterating yields ``None`` (``total_steps`` times, or forever), and the Trainer counts
    ``frames_per_batch = 1`` frame for each: its frame counters (``total_frames``,
    ``log_interval``, checkpoints, the progress bar) count gradient steps. :meth:`register`
    puts :meth:`sample` on ``process_optim_batch``, so each optimisation step draws a
    fresh minibatch ``[batch_size]`` from the dataset. ``state_dict`` holds the step count;
    the dataset itself is read-only and reloaded from its file.

    Args:
        dataset: a replay buffer of transitions (e.g. ``load_dataset(path, 256)``).
        batch_size: transitions per minibatch (default: the dataset's).
        total_steps: items to yield (None: until the Trainer stops).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
        >>> data = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        >>> _ = data.extend(TensorDict(observation=torch.randn(10, 3), batch_size=[10]))
        >>> batches = OfflineBatches(data, batch_size=4, total_steps=3)
        >>> len(list(batches)), batches.sample()["observation"].shape
        (3, torch.Size([4, 3]))
    """

    frames_per_batch = 1
    init_random_frames = 0

    def __init__(self, dataset, batch_size: int | None = None, total_steps: int | None = None):
        if not hasattr(dataset, "sample"):
            raise TypeError(f"OfflineBatches needs a replay buffer, got {type(dataset).__name__}.")
        if batch_size is None and getattr(dataset, "batch_size", None) is None:
            raise ValueError("OfflineBatches: give batch_size, or load the dataset with one.")
        self.dataset = dataset
        self.batch_size = batch_size
        self.total_steps = total_steps
        self.steps = 0

    def __iter__(self):
        while self.total_steps is None or self.steps < self.total_steps:
            self.steps += 1
            yield None

    def sample(self, batch=None) -> TensorDictBase:
        """A minibatch of the dataset (``batch``, the yielded None, is not used)."""
        return self.dataset.sample(batch_size=self.batch_size)

    def register(self, trainer) -> None:
        """Sample a minibatch at each of ``trainer``'s optimisation steps."""
        trainer.register_op("process_optim_batch", self.sample)

    def state_dict(self) -> dict:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = int(state["steps"])
