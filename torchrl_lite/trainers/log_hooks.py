"""Logging and evaluation hooks: scalars of each batch, frame counts, evaluation episodes.

Each returns ``{name: value, "log_pbar": bool}`` (or None) from a log destination
(``pre_steps_log``, ``post_steps_log``); tensor values stay on their device until the
trainer reads them all with one host sync per log interval.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
from torchrl_lite.trainers.hooks import _MASK, TrainerHookBase, _check_positive, _get

__all__ = ["LogScalar", "LogReward", "CountFramesLog", "Recorder", "LogValidationReward"]

_EPISODE_REWARD = (K.NEXT, "episode_reward")


def _reduce(value: torch.Tensor, mask: torch.Tensor | None, reduction: str) -> torch.Tensor:
    """Reduce ``value`` over the valid steps (``mask``, broadcast), with no host sync."""
    value = value.detach().float()
    if mask is None:
        return getattr(value, reduction)() if reduction != "mean" else value.mean()
    mask = mask.reshape(*mask.shape, *[1] * (value.dim() - mask.dim())).expand_as(value)
    if reduction == "mean":
        return (value * mask).sum() / mask.sum()
    if reduction == "sum":
        return (value * mask).sum()
    fill = float("-inf") if reduction == "max" else float("inf")
    return getattr(value.masked_fill(~mask, fill), reduction)()


class LogScalar(TrainerHookBase):
    """Log a reduction of an entry of each collected batch (e.g. the reward).

    Args:
        key: the entry (default ``("next", "reward")``).
        logname: the logged name (default: the key's parts joined by ``"_"``).
        log_pbar: also show it on the progress bar.
        reduction: ``"mean"``, ``"sum"``, ``"max"`` or ``"min"`` (over valid steps).

    Example:
        >>> from tensordict import TensorDict
        >>> batch = TensorDict(next=TensorDict(reward=torch.ones(4, 1), batch_size=[4]),
        ...     batch_size=[4])
        >>> LogScalar(reduction="sum")(batch)
        {'next_reward': tensor(4.), 'log_pbar': False}
    """

    _REDUCTIONS = ("mean", "sum", "max", "min")

    def __init__(self, key=(K.NEXT, K.REWARD), logname=None, log_pbar=False, reduction="mean"):
        if reduction not in self._REDUCTIONS:
            raise ValueError(
                f"LogScalar: reduction must be one of {self._REDUCTIONS}, got {reduction!r}."
            )
        self.key = key
        self.logname = (
            logname if logname is not None else ("_".join(key) if isinstance(key, tuple) else key)
        )
        self.log_pbar = bool(log_pbar)
        self.reduction = reduction

    def __call__(self, batch: TensorDictBase) -> dict | None:
        if batch is None:
            return None
        value = _get(batch, self.key, type(self).__name__)
        return {
            self.logname: _reduce(value, batch.get(_MASK, None), self.reduction),
            "log_pbar": self.log_pbar,
        }

    def register(self, trainer, name: str | None = None) -> None:
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name or f"log_{self.logname}", self)


class LogReward(LogScalar):
    """Log the mean training reward and, with a ``RewardSum`` transform, episode returns.

    Logs ``logname`` (mean of ``reward_key`` over the batch) and, when the batch holds
    ``("next", "episode_reward")``, ``"episode_reward"``: the mean return of the episodes
    that ended in the batch (NaN, hence not logged, when none did).

    Args:
        logname: the name of the mean reward.
        log_pbar: also show both on the progress bar.
        reward_key: the reward entry (default ``("next", "reward")``).

    Example:
        >>> from tensordict import TensorDict
        >>> batch = TensorDict(next=TensorDict(reward=torch.ones(4, 1),
        ...     episode_reward=torch.arange(4.0).unsqueeze(-1),
        ...     done=torch.tensor([[False], [True], [False], [True]]), batch_size=[4]),
        ...     batch_size=[4])
        >>> LogReward()(batch)["episode_reward"]
        tensor(2.)
    """

    def __init__(self, logname="r_training", log_pbar=False, reward_key=None):
        super().__init__(
            key=(K.NEXT, K.REWARD) if reward_key is None else reward_key,
            logname=logname,
            log_pbar=log_pbar,
        )

    def __call__(self, batch: TensorDictBase) -> dict | None:
        out = super().__call__(batch)
        if out is None:
            return None
        returns = batch.get(_EPISODE_REWARD, None)
        if returns is not None:
            done = _get(batch, (K.NEXT, K.DONE), type(self).__name__)
            mask = batch.get(_MASK, None)
            if mask is not None:
                done = done & mask.reshape(*mask.shape, *[1] * (done.dim() - mask.dim()))
            out["episode_reward"] = _reduce(returns, done, "mean")  # NaN if no episode ended
        return out


class CountFramesLog(TrainerHookBase):
    """Log the number of frames collected so far, as ``"n_frames"``.

    Args:
        frame_skip: env frames per collected step.
        log_pbar: also show it on the progress bar.

    Example:
        >>> from tensordict import TensorDict
        >>> CountFramesLog(frame_skip=2)(TensorDict(batch_size=[3, 4]))
        {'n_frames': 24, 'log_pbar': False}
    """

    def __init__(self, frame_skip: int = 1, log_pbar: bool = False):
        self.frame_skip = _check_positive("CountFramesLog", "frame_skip", frame_skip)
        self.log_pbar = bool(log_pbar)
        self.frame_count = 0

    def __call__(self, batch: TensorDictBase) -> dict:
        mask = batch.get(_MASK, None)
        frames = int(mask.sum()) if mask is not None else batch.numel()
        self.frame_count += frames * self.frame_skip
        return {"n_frames": self.frame_count, "log_pbar": self.log_pbar}

    def state_dict(self) -> dict:
        return {"frame_count": self.frame_count}

    def load_state_dict(self, state_dict: dict) -> None:
        self.frame_count = int(state_dict["frame_count"])

    def register(self, trainer, name: str = "count_frames_log") -> None:
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name, self)


class Recorder(TrainerHookBase):
    """Run evaluation episodes every ``record_interval`` batches and log their return.

    The rollout runs ``record_frames`` steps of ``environment`` (resetting done sub-envs)
    under ``set_exploration_type(exploration_type)`` and ``torch.no_grad()``, with the
    policy in eval mode. It logs ``out_keys[key]`` (default ``"r_evaluation"`` for the
    reward: mean reward per frame) and ``"total_" + out_keys[key]`` (the mean return of the
    episodes that ended, or of the whole rollout if none did) for the reward, and the mean
    of any other ``log_keys``; the values are 0-dim float tensors, as in TorchRL (the
    trainer's logger receives python floats). ``LogValidationReward`` is TorchRL's newer
    name of this class. Transforms of the env with a ``dump`` method (a
    ``VideoRecorder``) are dumped after each evaluation.

    Args:
        record_interval: batches between two evaluations (the first batch evaluates).
        record_frames: steps of each evaluation rollout.
        frame_skip: env frames per step (the per-frame reward divides by it).
        policy_exploration: the policy to evaluate.
        environment: the evaluation env (keep it separate from the collector's).
        exploration_type: ``ExplorationType.DETERMINISTIC`` (the default) evaluates the
            mode of the policy, without exploration noise.
        log_keys: the entries to log (default ``[("next", "reward")]``).
        out_keys: ``{key: logged name}`` (default ``{("next", "reward"): "r_evaluation"}``).
        suffix: passed to the video recorder's ``dump``.
        log_pbar: also show the values on the progress bar.
        recorder: an alias of ``environment`` (TorchRL's older name).

    Example:
        >>> from torchrl_lite.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=10))
        >>> rec = Recorder(record_interval=1, record_frames=20, environment=env,
        ...     policy_exploration=lambda td: td.set("action", torch.zeros(1)))
        >>> out = rec()
        >>> sorted(out), out["total_r_evaluation"].item() < 0
        (['log_pbar', 'r_evaluation', 'total_r_evaluation'], True)
    """

    def __init__(
        self,
        *,
        record_interval: int,
        record_frames: int,
        frame_skip: int = 1,
        policy_exploration,
        environment=None,
        exploration_type: ExplorationType = ExplorationType.DETERMINISTIC,
        log_keys=None,
        out_keys=None,
        suffix: str | None = None,
        log_pbar: bool = False,
        recorder=None,
    ):
        environment = recorder if environment is None else environment
        if environment is None or not hasattr(environment, "rollout"):
            raise TypeError(
                f"Recorder needs an environment with rollout(), got {type(environment).__name__}."
            )
        self.record_interval = _check_positive("Recorder", "record_interval", record_interval)
        self.record_frames = _check_positive("Recorder", "record_frames", record_frames)
        self.frame_skip = _check_positive("Recorder", "frame_skip", frame_skip)
        self.policy_exploration = policy_exploration
        self.environment = environment
        self.exploration_type = exploration_type
        self.log_keys = [(K.NEXT, K.REWARD)] if log_keys is None else list(log_keys)
        names = {(K.NEXT, K.REWARD): "r_evaluation"}
        names.update(out_keys or {})
        self.out_keys = {
            k: names.get(k, "_".join(k) if isinstance(k, tuple) else k) for k in self.log_keys
        }
        self.suffix = suffix
        self.log_pbar = bool(log_pbar)
        self._count = 0

    def __call__(self, batch: TensorDictBase | None = None) -> dict | None:
        out = None
        if self._count % self.record_interval == 0:
            rollout = self._rollout()
            out = {}
            for key in self.log_keys:
                value = _get(rollout, key, "Recorder").float()
                name = self.out_keys[key]
                if key == (K.NEXT, K.REWARD):
                    done = _get(rollout, (K.NEXT, K.DONE), "Recorder")
                    out[name] = value.mean() / self.frame_skip
                    out["total_" + name] = torch.tensor(_mean_return(value, done))
                else:
                    out[name] = value.mean()
            out["log_pbar"] = self.log_pbar
            self._dump_videos()
        self._count += 1
        return out

    def _rollout(self) -> TensorDictBase:
        policy = self.policy_exploration
        was_training = isinstance(policy, torch.nn.Module) and policy.training
        if was_training:
            policy.eval()
        try:
            with set_exploration_type(self.exploration_type), torch.no_grad():
                return self.environment.rollout(
                    self.record_frames, policy=policy, auto_reset=True, break_when_any_done=False
                )
        finally:
            if was_training:
                policy.train()

    def _dump_videos(self) -> None:
        dump = getattr(getattr(self.environment, "transform", None), "dump", None)
        if callable(dump):  # a Compose dumps each of its transforms (VideoRecorder writes)
            dump(suffix=self.suffix)

    def state_dict(self) -> dict:
        return {"count": self._count, "env": self.environment.state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        self.environment.load_state_dict(state_dict["env"])
        self._count = int(state_dict["count"])

    def register(self, trainer, name: str = "recorder") -> None:
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)


LogValidationReward = Recorder  # TorchRL's current name (v0.6+)


def _mean_return(reward: torch.Tensor, done: torch.Tensor) -> float:
    """Mean return of the episodes that end in a ``[*B, T, 1]`` rollout (else of the rows)."""
    steps = reward.shape[-2]
    rewards = reward.reshape(-1, steps).tolist()  # [N, T]
    dones = done.reshape(-1, steps).tolist()
    complete, partial = [], []
    for r_row, d_row in zip(rewards, dones):
        acc = 0.0
        for r, d in zip(r_row, d_row):
            acc += r
            if d:
                complete.append(acc)
                acc = 0.0
        if not d_row[-1]:
            partial.append(acc)
    returns = complete or partial
    return sum(returns) / len(returns)
