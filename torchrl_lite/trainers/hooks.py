"""The hook contract, and ready hooks: optimizer, replay buffer, rewards, weights.

The hook contract
-----------------
A hook is a callable registered at one of the trainer's destinations with
``trainer.register_op(dest, op, **kwargs)`` (see :class:`~torchrl_lite.trainers.Trainer`
for what each destination receives and returns). A hook *object* subclasses
:class:`TrainerHookBase`:

* ``register(trainer, name=...)`` registers its ops and itself
  (``trainer.register_module(name, self)``), so that its state is checkpointed;
* ``state_dict()`` / ``load_state_dict(state)`` carry what a resumed run needs;
* optionally ``dumps(folder)`` / ``loads(folder)`` for large state saved as files
  (the replay buffer) instead of inside ``state.pt``.

Log hooks (``pre_steps_log``, ``post_steps_log``, ``post_optim_log``; see
:mod:`~torchrl_lite.trainers.log_hooks`) return ``{name: value, "log_pbar": bool}`` or
None. Leave values as tensors: the trainer reads them with one host sync per log
interval, never per step.

Wiring, PPO-style (on-policy; see :mod:`~torchrl_lite.trainers.minibatches`)::

    ShuffledMiniBatches(64, advantage_module=GAE(...)).register(trainer)  # epochs of minibatches

Wiring, SAC/DQN-style (off-policy)::

    ReplayBufferTrainer(buffer, batch_size=256).register(trainer)
    trainer.register_op("post_optim", SoftUpdate(loss, tau=0.005).step)
"""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import load_optimizer_state, missing_key_message, optimizer_settings
from torchrl_lite.data.replay_buffers import PrioritizedSampler

__all__ = [
    "TrainerHookBase",
    "OptimizerHook",
    "ReplayBufferTrainer",
    "RewardNormalizer",
    "UpdateWeights",
    "ClearCudaCache",
]

_MASK = ("collector", "mask")


class TrainerHookBase:
    """Base of hook objects: ``register`` their ops, and carry state across checkpoints.

    Example:
        >>> class CountBatches(TrainerHookBase):
        ...     def __init__(self):
        ...         self.count = 0
        ...     def __call__(self, batch):
        ...         self.count += 1
        ...     def state_dict(self):
        ...         return {"count": self.count}
        ...     def load_state_dict(self, state_dict):
        ...         self.count = state_dict["count"]
        ...     def register(self, trainer, name="count_batches"):
        ...         trainer.register_op("batch_process", self)
        ...         trainer.register_module(name, self)
    """

    def state_dict(self) -> dict:
        """What a resumed run needs (nothing by default)."""
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore :meth:`state_dict`'s output."""

    def register(self, trainer, name: str) -> None:
        """Register this hook's ops on ``trainer`` and the hook itself under ``name``."""
        raise NotImplementedError


def _get(batch: TensorDictBase, key, owner: str) -> torch.Tensor:
    value = batch.get(key, None)
    if value is None:
        raise KeyError(f"{owner}: " + missing_key_message(key, batch.keys(True, True)))
    return value


def _check_positive(owner: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}.")
    return value


# -- optimisation ---------------------------------------------------------------------
class OptimizerHook(TrainerHookBase):
    """Backward the sum of the ``loss_*`` entries, clip gradients, step and zero them.

    The trainer registers one for its ``optimizer`` argument; register more for several
    optimizers (e.g. one per loss component), each under its own name.

    Args:
        optimizer: a ``torch.optim.Optimizer``.
        loss_components: the entries summed (default: every key starting with ``"loss"``).
        clip_per_group: clip each parameter group's gradient norm on its own (Dreamer
            clips its world model, actor and value model separately, so the model's large
            reconstruction gradients do not shrink the others'); the norms are written as
            ``grad_norm_<index>_<name>``, ``name`` the group's ``"name"`` entry or its
            position. False: one norm over all parameters.

    Example:
        >>> from tensordict import TensorDict
        >>> w = torch.nn.Parameter(torch.ones(2))
        >>> hook = OptimizerHook(torch.optim.SGD([w], lr=0.5))
        >>> out = hook(TensorDict(loss_a=(w ** 2).sum()), clip_grad_norm=True, clip_norm=None)
        >>> w.data
        tensor([0., 0.])
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, loss_components=None, clip_per_group=False
    ):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"OptimizerHook needs a torch.optim.Optimizer, got {type(optimizer).__name__}."
            )
        self.optimizer = optimizer
        self.loss_components = None if loss_components is None else list(loss_components)
        self.clip_per_group = bool(clip_per_group)
        # the settings as built (from the config), which win on resume: load_state_dict
        self._settings = optimizer_settings(optimizer)

    def __call__(self, losses_td, clip_grad_norm=True, clip_norm=None, index: int = 0):
        """Step on ``losses_td``; with clipping, writes ``grad_norm_<index>`` (detached)."""
        self.loss(losses_td).backward()
        return self.step(losses_td, clip_grad_norm, clip_norm, index)

    def loss(self, losses_td) -> torch.Tensor:
        """The sum of the entries this hook optimises (``loss_components``)."""
        if self.loss_components is None:
            terms = [v for k, v in losses_td.items() if isinstance(k, str) and k.startswith("loss")]
        else:
            terms = [_get(losses_td, k, "OptimizerHook") for k in self.loss_components]
        if not terms:
            raise KeyError(
                f"OptimizerHook: the loss returned no 'loss*' entries to optimise; got "
                f"{list(losses_td.keys())}."
            )
        return terms[0] if len(terms) == 1 else torch.stack(terms).sum()

    def step(self, losses_td, clip_grad_norm=True, clip_norm=None, index: int = 0):
        """Clip, step and zero the gradients already computed (``__call__`` without the
        backward: for several hooks whose losses went through one backward pass)."""
        if clip_norm is not None:
            groups = self.optimizer.param_groups
            if self.clip_per_group and clip_grad_norm:
                for i, group in enumerate(groups):
                    norm = torch.nn.utils.clip_grad_norm_(group["params"], clip_norm)
                    losses_td.set(f"grad_norm_{index}_{group.get('name', i)}", norm.detach())
            else:
                params = [p for group in groups for p in group["params"]]
                if clip_grad_norm:
                    norm = torch.nn.utils.clip_grad_norm_(params, clip_norm)
                    losses_td.set(f"grad_norm_{index}", norm.detach())
                else:
                    torch.nn.utils.clip_grad_value_(params, clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return losses_td

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "settings": self._settings}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the optimizer; settings it was built with differently win (a resumed
        run's ``lr=...``): see :func:`~torchrl_lite._utils.load_optimizer_state`."""
        load_optimizer_state(
            self.optimizer, state_dict["optimizer"], self._settings, state_dict.get("settings")
        )

    def register(self, trainer, name: str = "optimizer") -> None:
        trainer.register_op("optimizer", self)
        trainer.register_module(name, self)


# -- data for the optimisation steps --------------------------------------------------
class ReplayBufferTrainer(TrainerHookBase):
    """Extend a replay buffer with each batch; sample it at each optimisation step.

    Registers ``extend`` (batch_process), ``sample`` (process_optim_batch) and
    ``update_priority`` (post_loss: with a prioritized sampler, the loss's ``"td_error"``
    becomes the sampled items' priority). Checkpoints dump the buffer (contents, write
    cursor, sampler state) through its ``dumps``/``loads``.

    Args:
        replay_buffer: a ``TensorDictReplayBuffer`` (or prioritized one).
        batch_size: items per sample (default: the buffer's ``batch_size``).
        memmap: require the buffer's storage to be memory-mapped (``LazyMemmapStorage``).
        device: where samples go (default: where the storage keeps them).
        flatten_tensordicts: store a ``[*B, T]`` batch as ``B * T`` single steps (only
            the valid ones when the batch has a ``("collector", "mask")``).
        max_dims: with ``flatten_tensordicts=False``, pad each batch dimension ``d`` to
            ``max_dims[d]`` (-1: keep) so that batches of varied lengths stack.
        save_buffer: include the buffer in checkpoints.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
        >>> hook = ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100)), 4)
        >>> hook.extend(TensorDict(obs=torch.randn(2, 5, 3), batch_size=[2, 5]))
        >>> hook.sample(None)["obs"].shape
        torch.Size([4, 3])
    """

    def __init__(
        self,
        replay_buffer,
        batch_size: int | None = None,
        memmap: bool = False,
        device=None,
        flatten_tensordicts: bool = True,
        max_dims=None,
        save_buffer: bool = True,
    ):
        if not hasattr(replay_buffer, "extend") or not hasattr(replay_buffer, "sample"):
            raise TypeError(
                f"ReplayBufferTrainer needs a replay buffer, got {type(replay_buffer).__name__}."
            )
        storage = getattr(replay_buffer, "storage", None)
        if memmap and "Memmap" not in type(storage).__name__:
            raise ValueError(
                f"ReplayBufferTrainer(memmap=True) needs a memory-mapped storage; the buffer "
                f"has {type(storage).__name__}. Build it with LazyMemmapStorage(max_size)."
            )
        if batch_size is None and getattr(replay_buffer, "batch_size", None) is None:
            raise ValueError(
                "ReplayBufferTrainer: give batch_size, or build the buffer with batch_size=..."
            )
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.device = None if device is None else torch.device(device)
        self.flatten_tensordicts = bool(flatten_tensordicts)
        self.max_dims = None if max_dims is None else list(max_dims)
        self.save_buffer = bool(save_buffer)

    def extend(self, batch: TensorDictBase) -> None:
        """Write ``batch`` into the buffer (flattened or padded as configured)."""
        if self.flatten_tensordicts:
            mask = batch.get(_MASK, None)
            batch = batch[mask] if mask is not None else batch.reshape(-1)
        elif self.max_dims is not None:
            from tensordict import pad

            pads = []
            for d, size in enumerate(batch.batch_size):
                limit = self.max_dims[d] if d < len(self.max_dims) else -1
                pads += [0, 0 if limit == -1 else limit - size]
            batch = pad(batch, pads)
        self.replay_buffer.extend(batch)

    def sample(self, batch: TensorDictBase | None = None) -> TensorDictBase:
        """A sample of the buffer (``batch``, the collected one, is not used)."""
        sample = self.replay_buffer.sample(batch_size=self.batch_size)
        return sample if self.device is None else sample.to(self.device, non_blocking=True)

    def update_priority(self, batch: TensorDictBase) -> None:
        """With a prioritized sampler, set the sampled items' priority from the batch."""
        if isinstance(getattr(self.replay_buffer, "sampler", None), PrioritizedSampler):
            self.replay_buffer.update_tensordict_priority(batch)

    def state_dict(self) -> dict:
        """The buffer's state (``Trainer.save`` uses :meth:`dumps` instead)."""
        return {"replay_buffer": self.replay_buffer.state_dict()} if self.save_buffer else {}

    def load_state_dict(self, state_dict: dict) -> None:
        if "replay_buffer" in state_dict:
            self.replay_buffer.load_state_dict(state_dict["replay_buffer"])

    def dumps(self, folder) -> None:
        """Write the buffer under ``folder`` (used by ``Trainer.save``; empty without
        ``save_buffer``)."""
        if self.save_buffer:
            self.replay_buffer.dumps(folder)
        else:
            Path(folder).mkdir(parents=True, exist_ok=True)

    def loads(self, folder) -> None:
        """Read the buffer written by :meth:`dumps` (used by ``Trainer.load``)."""
        if self.save_buffer:
            self.replay_buffer.loads(folder)

    def register(self, trainer, name: str = "replay_buffer") -> None:
        trainer.register_op("batch_process", self.extend)
        trainer.register_op("process_optim_batch", self.sample)
        trainer.register_op("post_loss", self.update_priority)
        trainer.register_module(name, self)


class RewardNormalizer(TrainerHookBase):
    """Standardise rewards with running statistics (exponentially decayed) of collected ones.

    ``update_reward_stats`` (batch_process) accumulates decayed sums of the collected
    rewards; ``normalize_reward`` (process_optim_batch; register after the hook that
    samples, e.g. ``ReplayBufferTrainer``) returns the sub-batch with
    ``scale * (r - mean) / std`` in place of its reward (the stored data are untouched).

    Args:
        decay: weight of the past statistics at each update.
        scale: multiplies the standardised reward.
        eps: floor of the variance (default: the dtype's machine epsilon).
        log_pbar: kept for TorchRL compatibility (nothing is logged).
        reward_key: the reward entry (default ``("next", "reward")``).

    Example:
        >>> from tensordict import TensorDict
        >>> norm = RewardNormalizer()
        >>> batch = TensorDict(next=TensorDict(reward=torch.tensor([[1.0], [3.0]]),
        ...     batch_size=[2]), batch_size=[2])
        >>> norm.update_reward_stats(batch)
        >>> norm.normalize_reward(batch)["next", "reward"].flatten()
        tensor([-0.7071,  0.7071])
    """

    def __init__(
        self,
        decay: float = 0.999,
        scale: float = 1.0,
        eps: float | None = None,
        log_pbar: bool = False,
        reward_key=None,
    ):
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"RewardNormalizer: decay must lie in [0, 1], got {decay}.")
        self.decay, self.scale = float(decay), float(scale)
        self.eps = eps
        self.log_pbar = bool(log_pbar)
        self.reward_key = (K.NEXT, K.REWARD) if reward_key is None else reward_key
        self._stats: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def update_reward_stats(self, batch: TensorDictBase) -> None:
        """Fold the batch's rewards into the running sums, mean and std."""
        reward = _get(batch, self.reward_key, "RewardNormalizer").detach()
        s = self._stats
        zero = reward.new_zeros(())
        total = s["sum"] = self.decay * s.get("sum", zero) + reward.sum()
        ssq = s["ssq"] = self.decay * s.get("ssq", zero) + reward.pow(2).sum()
        count = s["count"] = self.decay * s.get("count", zero) + reward.numel()
        s["mean"] = total / count
        var = (ssq - total.pow(2) / count) / (count - 1).clamp_min(1e-8)
        eps = torch.finfo(reward.dtype).eps if self.eps is None else self.eps
        s["std"] = var.clamp_min(eps).sqrt()

    def normalize_reward(self, batch: TensorDictBase) -> TensorDictBase:
        """``batch`` (a shallow copy) with its reward standardised."""
        if "mean" not in self._stats:
            raise RuntimeError(
                "RewardNormalizer.normalize_reward ran before any update_reward_stats; "
                "register the hook with normalizer.register(trainer)."
            )
        batch = batch.copy()
        reward = _get(batch, self.reward_key, "RewardNormalizer")
        mean = self._stats["mean"].to(reward.device)
        std = self._stats["std"].to(reward.device)
        batch.set(self.reward_key, (reward - mean) / std * self.scale)
        return batch

    def state_dict(self) -> dict:
        return {"stats": dict(self._stats)}

    def load_state_dict(self, state_dict: dict) -> None:
        self._stats = dict(state_dict["stats"])

    def register(self, trainer, name: str = "reward_normalizer") -> None:
        trainer.register_op("batch_process", self.update_reward_stats)
        trainer.register_op("process_optim_batch", self.normalize_reward)
        trainer.register_module(name, self)


# -- bookkeeping ----------------------------------------------------------------------
class UpdateWeights(TrainerHookBase):
    """Push the trained weights to the collector's policy every few batches.

    Needed when the collector acts with a copy of the policy (another device, worker
    processes); it calls ``collector.update_policy_weights_()``.

    Args:
        collector: the data collector.
        update_weights_interval: batches between two updates.

    Example:
        >>> class Collector:
        ...     updates = 0
        ...     def update_policy_weights_(self):
        ...         self.updates += 1
        >>> hook = UpdateWeights(Collector(), update_weights_interval=2)
        >>> for _ in range(4):
        ...     hook()
        >>> hook.collector.updates
        2
    """

    def __init__(self, collector, update_weights_interval: int):
        if not hasattr(collector, "update_policy_weights_"):
            raise TypeError(
                f"UpdateWeights needs a collector with update_policy_weights_(), got "
                f"{type(collector).__name__}."
            )
        self.collector = collector
        self.update_weights_interval = _check_positive(
            "UpdateWeights", "update_weights_interval", update_weights_interval
        )
        self.counter = 0

    def __call__(self) -> None:
        self.counter += 1
        if self.counter % self.update_weights_interval == 0:
            self.collector.update_policy_weights_()

    def state_dict(self) -> dict:
        return {"counter": self.counter}

    def load_state_dict(self, state_dict: dict) -> None:
        self.counter = int(state_dict["counter"])

    def register(self, trainer, name: str = "update_weights") -> None:
        trainer.register_op("post_steps", self)
        trainer.register_module(name, self)


class ClearCudaCache(TrainerHookBase):
    """Release cached CUDA memory every ``interval`` optimisation steps (no-op on CPU).

    Args:
        interval: optimisation steps between two ``torch.cuda.empty_cache()`` calls.

    Example:
        >>> hook = ClearCudaCache(interval=10)
        >>> hook()
    """

    def __init__(self, interval: int):
        self.interval = _check_positive("ClearCudaCache", "interval", interval)
        self.count = 0

    def __call__(self, *args, **kwargs) -> None:
        self.count += 1
        if self.count % self.interval == 0 and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def state_dict(self) -> dict:
        return {"count": self.count}

    def load_state_dict(self, state_dict: dict) -> None:
        self.count = int(state_dict["count"])

    def register(self, trainer, name: str = "clear_cuda_cache") -> None:
        trainer.register_op("post_optim", self)
        trainer.register_module(name, self)
