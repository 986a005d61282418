# -- logging ---------------------------------------------------------------------------
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
        self.logname = logname if logname is not None else (
            "_".join(key) if isinstance(key, tuple) else key
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
