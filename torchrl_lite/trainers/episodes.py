"""Episode-return bookkeeping and periodic evaluation of a training run.

:class:`EpisodeLog` keeps the returns of finished training episodes and notices when their
running mean reaches a target; :class:`EpisodeReturns` feeds it from a ``Trainer``'s
batches, :class:`EvaluationReturns` from evaluation rollouts (offline recipes, whose
learning signal they are). :class:`PeriodicEvaluation` plays the deterministic policy every so many frames
(:func:`play_deterministic`), the policy a user deploys rather than the exploring one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.collectors.utils import finished_returns
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.trainers.hooks import TrainerHookBase
from torchrl_lite.trainers.log_hooks import Recorder

__all__ = [
    "EpisodeLog",
    "EpisodeReturns",
    "EvaluationReturns",
    "PeriodicEvaluation",
    "episode_returns",
    "finished_returns",
    "flat_episode_returns",
    "play_deterministic",
]


class EpisodeLog:
    """``(frames, return)`` of finished episodes, their running mean and the frame count at
    which that mean first reached ``target`` (with at least ``window`` episodes).

    The one place a training run keeps its episode returns: the Trainer path's
    :class:`EpisodeReturns` hook and the Scheme path's driver both add to one.

    Args:
        window: episodes in the running mean.
        target: the mean return that solves the task (None: none).

    Example:
        >>> log = EpisodeLog(window=2, target=1.0)
        >>> log.add(10, [0.5, 2.0]), log.running_mean(), log.solved_at
        (True, 1.25, 10)
    """

    def __init__(self, window: int = 10, target: float | None = None):
        self.window = window
        self.target = target
        self.history: list[tuple[int, float]] = []
        self.solved_at: int | None = None

    def running_mean(self) -> float:
        """The mean of the last ``window`` returns (``-inf`` before the first episode)."""
        last = [r for _, r in self.history[-self.window :]]
        return sum(last) / len(last) if last else -math.inf

    def add(self, frames: int, returns) -> bool:
        """Record ``returns`` of episodes that ended by ``frames``; True when the running
        mean reaches ``target`` for the first time."""
        self.history += [(frames, value) for value in returns]
        if (
            self.target is None
            or self.solved_at is not None
            or len(self.history) < self.window
            or self.running_mean() < self.target
        ):
            return False
        self.solved_at = frames
        return True


def episode_returns(rollout) -> list[float]:
    """Returns of the episodes that finished inside a ``[*batch, T]`` rollout, summed from
    its rewards (for envs without ``RewardSum``, e.g. ``torchrl-lite demo``'s)."""
    reward = rollout.get((K.NEXT, K.REWARD)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    done = rollout.get((K.NEXT, K.DONE)).reshape(-1, rollout.batch_size[-1])  # [B, T]
    returns = []
    for r_row, d_row in zip(reward.tolist(), done.tolist()):
        total = 0.0
        for r, d in zip(r_row, d_row):
            total += r
            if d:
                returns.append(total)
                total = 0.0
    return returns


def flat_episode_returns(reward: torch.Tensor, done: torch.Tensor, cut: torch.Tensor) -> list:
    """Returns ``[E]`` of the episodes that end (``done``) in flat steps ``[N]``; ``cut``
    ends an unfinished one, which is left out."""
    ends = done | cut
    episode = torch.cumsum(ends.long(), 0) - ends.long()  # [N]
    sums = torch.zeros(int(episode[-1]) + 1).index_add_(0, episode, reward.float())
    return sums[done[ends]].tolist()


class EpisodeReturns(EpisodeLog, TrainerHookBase):
    """Track the returns of finished training episodes; stop at a target mean.

    Reads each batch's :func:`finished_returns`, keeps ``(frames, return)`` per episode,
    logs ``"episode_return"`` (the mean of the last ``window`` episodes) at each batch, and
    ends training once that mean reaches ``target`` (with at least ``window`` episodes).

    Args:
        window: episodes in the running mean.
        target: stop when the running mean reaches it (None: never stop).
        on_episode: optional callback ``(frames, return)`` for each finished episode.
    """

    def __init__(self, window: int = 10, target: float | None = None, on_episode=None):
        super().__init__(window, target)
        self.on_episode: Callable | None = on_episode
        self._trainer = None

    def __call__(self, batch):
        returns = finished_returns(batch)
        frames = self._trainer.collected_frames if self._trainer is not None else 0
        solved = self.add(frames, returns)
        if self.on_episode is not None:
            for value in returns:
                self.on_episode(frames, value)
        if solved and self._trainer is not None:
            self._trainer.total_frames = frames  # finish after this batch's updates
        if self.history:
            return {"episode_return": torch.tensor(self.running_mean()), "log_pbar": True}
        return None

    def state_dict(self) -> dict:
        return {"history": list(self.history), "solved_at": self.solved_at}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]
        self.solved_at = state["solved_at"]

    def register(self, trainer, name: str = "episode_returns") -> None:
        self._trainer = trainer
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name, self)


class EvaluationReturns(EpisodeLog, TrainerHookBase):
    """Evaluate the policy every ``interval`` gradient steps; track returns; stop at a target.

    The offline counterpart of :class:`EpisodeReturns`, with
    the same attributes (``history``, ``running_mean()``, ``solved_at``, ``window``,
    ``target``). After the first step, every ``interval`` steps and at the last step, a
    :class:`~torchrl_lite.trainers.Recorder` rolls the deterministic policy out for
    ``steps`` steps of ``env`` (a batched env runs several episodes at once) and
    ``(gradient steps, mean return of the episodes)`` is appended to ``history``; it logs
    ``"eval_return"`` (the mean of the last ``window`` evaluations) and the Recorder's
    ``"r_evaluation"``. Training ends once that mean reaches ``target``.

    Args:
        env: the evaluation env, e.g. ``make_env("Pendulum-v1", num_envs=10)``.
        policy: the policy to evaluate.
        interval: gradient steps between two evaluations.
        steps: steps of each evaluation rollout (one episode: 200 for Pendulum-v1).
        window: evaluations in the running mean.
        target: stop when the running mean reaches it (None: never stop).

    Example:
        >>> from torchrl_lite.envs.make import make_env
        >>> hook = EvaluationReturns(make_env("Pendulum-v1", num_envs=2), policy=None,
        ...     interval=100, steps=200)
        >>> out = hook()
        >>> hook.history[0][1] < -100, sorted(out)
        (True, ['eval_return', 'log_pbar', 'r_evaluation'])
    """

    def __init__(
        self,
        env: EnvBase,
        policy,
        *,
        interval: int,
        steps: int,
        window: int = 1,
        target: float | None = None,
    ):
        for name, value in (("interval", interval), ("steps", steps), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"EvaluationReturns: {name} must be a positive int, got {value!r}."
                )
        self.recorder = Recorder(
            record_interval=1, record_frames=steps, policy_exploration=policy, environment=env
        )
        super().__init__(window, target)
        self.interval = interval
        self._trainer = None

    def __call__(self, batch=None) -> dict | None:
        trainer = self._trainer
        step = trainer.collected_frames if trainer is not None else len(self.history)
        final = trainer is not None and step >= trainer.total_frames
        if self.history and step % self.interval and not final:
            return None
        record = self.recorder()  # one host sync per evaluation
        if self.add(step, [float(record["total_r_evaluation"])]) and trainer is not None:
            trainer.total_frames = step
        mean = self.running_mean()
        return {"eval_return": mean, "r_evaluation": record["r_evaluation"], "log_pbar": True}

    def state_dict(self) -> dict:
        return {
            "history": list(self.history),
            "solved_at": self.solved_at,
            "recorder": self.recorder.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]
        self.solved_at = state["solved_at"]
        self.recorder.load_state_dict(state["recorder"])

    def register(self, trainer, name: str = "evaluation") -> None:
        self._trainer = trainer
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)


def play_deterministic(env: EnvBase, policy, episodes: int, max_steps: int) -> list:
    """``episodes`` rollouts of ``policy``'s deterministic actions, each to its end or ``max_steps``.

    Runs under ``ExplorationType.DETERMINISTIC`` and ``torch.no_grad()``; the episodes are
    played one after the other in ``env``.
    """
    from torchrl_lite.envs import ExplorationType, set_exploration_type

    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        return [env.rollout(max_steps, policy, break_when_any_done=True) for _ in range(episodes)]


class PeriodicEvaluation(TrainerHookBase):
    """Evaluate the deterministic policy every ``interval`` collected frames.

    Each evaluation plays ``episodes`` episodes of ``env`` one after the other, each to its
    end (or ``max_steps`` steps), under ``ExplorationType.DETERMINISTIC`` (the greedy
    action of a Q-network, the mode of a stochastic actor) and ``torch.no_grad()``, and
    appends ``(frames, mean return, std)`` to ``history``; it logs ``"eval_return"``. It runs
    at the first batch past each multiple of ``interval`` and after the last batch; its
    history is checkpointed. The training episodes (:class:`EpisodeReturns`) act with
    exploration; this is the policy a user deploys (SB3's ``EvalCallback``).

    Args:
        env: the evaluation env (not the collector's), e.g. ``recipe.make_eval_env(cfg)``.
        policy: the policy to evaluate.
        interval: collected frames between two evaluations.
        episodes: episodes per evaluation.
        max_steps: the longest episode.

    Example:
        >>> from torchrl_lite.envs.make import make_env
        >>> env = make_env("Pendulum-v1", seed=0)
        >>> zero = lambda td: td.set("action", torch.zeros(1))
        >>> evaluation = PeriodicEvaluation(env, zero, interval=1_000, episodes=2)
        >>> out = evaluation()  # without a trainer: evaluate now
        >>> len(evaluation.history), out["eval_return"] < -100
        (1, True)
    """

    def __init__(self, env: EnvBase, policy, *, interval: int, episodes: int = 5,
                 max_steps: int = 10_000):  # fmt: skip
        for name, value in (
            ("interval", interval),
            ("episodes", episodes),
            ("max_steps", max_steps),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PeriodicEvaluation: {name} must be an int >= 1, got {value!r}.")
        self.env, self.policy = env, policy
        self.interval, self.episodes, self.max_steps = interval, episodes, max_steps
        self.history: list[tuple[int, float, float]] = []
        self._trainer = None

    def evaluate(self) -> list[float]:
        """The returns of ``episodes`` deterministic episodes."""
        policy = self.policy
        was_training = isinstance(policy, nn.Module) and policy.training
        if was_training:
            policy.eval()
        try:
            rollouts = play_deterministic(self.env, policy, self.episodes, self.max_steps)
        finally:
            if was_training:
                policy.train()
        return [float(rollout.get((K.NEXT, K.REWARD)).sum()) for rollout in rollouts]

    def __call__(self, batch=None) -> dict | None:
        trainer = self._trainer
        if trainer is not None:
            frames = trainer.collected_frames
            last = self.history[-1][0] if self.history else 0
            final = frames >= trainer.total_frames
            if frames // self.interval <= last // self.interval and not final:
                return None
            if self.history and frames == last:  # already evaluated at this frame count
                return None
        else:
            frames = len(self.history)
        returns = self.evaluate()
        mean, std = statistics.fmean(returns), statistics.pstdev(returns)
        self.history.append((frames, mean, std))
        return {"eval_return": mean, "log_pbar": True}

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]

    def register(self, trainer, name: str = "periodic_evaluation") -> None:
        self._trainer = trainer
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)
