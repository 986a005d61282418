"""On-policy batching hooks: advantages on each batch, epochs of shuffled minibatches,
random sub-batches and sub-trajectories of the collected batch.

PPO's inner loop, for example::

    ShuffledMiniBatches(64, advantage_module=GAE(...)).register(trainer)
    # with optim_steps_per_batch = num_epochs * (frames_per_batch // 64)
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite.trainers.hooks import TrainerHookBase, _check_positive

__all__ = ["ShuffledMiniBatches", "ComputeAdvantage", "BatchSubSampler"]


class ShuffledMiniBatches(TrainerHookBase):
    """Epochs of shuffled minibatches of each collected batch (PPO's inner loop).

    Each optimisation step returns the next ``mini_batch_size`` steps of a random
    permutation of the flattened batch; when the permutation runs out, a new epoch starts
    (the last incomplete minibatch is dropped). With ``advantage_module`` (e.g. ``GAE``),
    the advantage and value target are computed on the whole ``[*B, T]`` batch, without
    gradients, at the start of each epoch (with the latest critic). Set the trainer's
    ``optim_steps_per_batch = num_epochs * (frames_per_batch // mini_batch_size)``.

    Args:
        mini_batch_size: steps per minibatch.
        advantage_module: a value estimator module writing ``"advantage"`` and
            ``"value_target"``, or None (the batch already holds them).
        recompute_each_epoch: recompute the advantage at every epoch (else once per batch).

    Example:
        >>> from tensordict import TensorDict
        >>> sampler = ShuffledMiniBatches(4)
        >>> batch = TensorDict(obs=torch.randn(2, 5, 3), batch_size=[2, 5])
        >>> sampler.new_batch()
        >>> [sampler(batch).shape for _ in range(3)]  # 10 steps: 2 minibatches per epoch
        [torch.Size([4]), torch.Size([4]), torch.Size([4])]
    """

    def __init__(self, mini_batch_size: int, advantage_module=None, recompute_each_epoch=True):
        self.mini_batch_size = _check_positive(
            "ShuffledMiniBatches", "mini_batch_size", mini_batch_size
        )
        self.advantage_module = advantage_module
        self.recompute_each_epoch = bool(recompute_each_epoch)
        self._fresh = True
        self._flat = None
        self._perm = None
        self._pos = 0

    def new_batch(self) -> None:
        """Start over with the next batch (registered at ``pre_optim_steps``)."""
        self._fresh = True

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        mb = self.mini_batch_size
        if self._fresh or self._pos + mb > self._perm.numel():
            if self._fresh or (self.advantage_module is not None and self.recompute_each_epoch):
                self._flat = self._prepare(batch)
            n = self._flat.numel()
            if n < mb:
                raise ValueError(
                    f"ShuffledMiniBatches: the batch holds {n} steps, fewer than "
                    f"mini_batch_size={mb}; lower mini_batch_size or raise frames_per_batch."
                )
            self._perm = torch.randperm(n, device=self._flat.device)
            self._pos, self._fresh = 0, False
        index = self._perm[self._pos : self._pos + mb]
        self._pos += mb
        return self._flat[index]

    def _prepare(self, batch: TensorDictBase) -> TensorDictBase:
        batch = batch.copy()  # new entries must not land in the collector's TensorDict
        if self.advantage_module is not None:
            with torch.no_grad():
                out = self.advantage_module(batch)
            batch = batch if out is None else out
        return batch.reshape(-1)

    def register(self, trainer, name: str = "minibatches") -> None:
        trainer.register_op("pre_optim_steps", self.new_batch)
        trainer.register_op("process_optim_batch", self)
        trainer.register_module(name, self)


class ComputeAdvantage(TrainerHookBase):
    """Run a value estimator (e.g. ``GAE``) on each collected batch, without gradients.

    For on-policy losses trained on whole batches (A2C, one step per batch); for epochs of
    minibatches use :class:`ShuffledMiniBatches` with ``advantage_module``.

    Args:
        advantage_module: a value estimator writing ``"advantage"``/``"value_target"``.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.objectives.value import GAE
        >>> from torchrl_lite.modules import ValueOperator
        >>> gae = GAE(gamma=0.99, lmbda=0.95, value_network=ValueOperator(
        ...     torch.nn.Linear(3, 1), in_keys=["observation"]))
        >>> batch = TensorDict(observation=torch.randn(5, 3), next=TensorDict(
        ...     observation=torch.randn(5, 3), reward=torch.randn(5, 1),
        ...     done=torch.zeros(5, 1, dtype=torch.bool),
        ...     terminated=torch.zeros(5, 1, dtype=torch.bool), batch_size=[5]), batch_size=[5])
        >>> ComputeAdvantage(gae)(batch)["advantage"].shape
        torch.Size([5, 1])
    """

    def __init__(self, advantage_module):
        self.advantage_module = advantage_module

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        batch = batch.copy()
        with torch.no_grad():
            out = self.advantage_module(batch)
        return batch if out is None else out

    def register(self, trainer, name: str = "compute_advantage") -> None:
        trainer.register_op("batch_process", self)
        trainer.register_module(name, self)


class BatchSubSampler(TrainerHookBase):
    """Sample a random sub-batch of the collected batch at each optimisation step.

    With ``sub_traj_len == 0``, ``batch_size`` single steps drawn without replacement from
    the flattened batch; otherwise ``batch_size // sub_traj_len`` windows of
    ``sub_traj_len`` consecutive steps (batch ``[n, sub_traj_len]``) from a ``[*B, T]``
    batch.

    Args:
        batch_size: steps per sub-batch.
        sub_traj_len: length of the windows (0: single steps).

    Example:
        >>> from tensordict import TensorDict
        >>> batch = TensorDict(obs=torch.randn(4, 10, 3), batch_size=[4, 10])
        >>> BatchSubSampler(8)(batch).shape, BatchSubSampler(8, sub_traj_len=4)(batch).shape
        (torch.Size([8]), torch.Size([2, 4]))
    """

    def __init__(self, batch_size: int, sub_traj_len: int = 0):
        self.batch_size = _check_positive("BatchSubSampler", "batch_size", batch_size)
        if isinstance(sub_traj_len, bool) or not isinstance(sub_traj_len, int) or sub_traj_len < 0:
            raise ValueError(
                f"BatchSubSampler: sub_traj_len must be an int >= 0, got {sub_traj_len!r}."
            )
        self.sub_traj_len = sub_traj_len

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        if self.sub_traj_len == 0:
            flat = batch.reshape(-1)
            if flat.numel() < self.batch_size:
                raise ValueError(
                    f"BatchSubSampler: the batch holds {flat.numel()} steps, fewer than "
                    f"batch_size={self.batch_size}."
                )
            return flat[torch.randperm(flat.numel(), device=flat.device)[: self.batch_size]]
        length = self.sub_traj_len
        rows = batch.reshape(-1, batch.batch_size[-1]) if batch.batch_dims > 1 else batch[None]
        steps = rows.batch_size[1]
        if steps < length:
            raise ValueError(
                f"BatchSubSampler: trajectories have {steps} steps, fewer than "
                f"sub_traj_len={length}."
            )
        count = max(1, self.batch_size // length)
        row = torch.randint(rows.batch_size[0], (count, 1), device=rows.device)
        start = torch.randint(steps - length + 1, (count, 1), device=rows.device)
        return rows[row, start + torch.arange(length, device=rows.device)]  # [count, length]

    def register(self, trainer, name: str = "batch_subsampler") -> None:
        trainer.register_op("process_optim_batch", self)
        trainer.register_module(name, self)
