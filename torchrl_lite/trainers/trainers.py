"""Trainer: the collect -> optimise -> log loop, with hooks at every stage.

One iteration per batch the collector yields::

    batch = batch_process hooks(batch)              # extend a buffer, GAE, normalise
    pre_steps_log hooks(batch)                      # log: training reward, frames
    if collected_frames > collector.init_random_frames:
        pre_optim_steps hooks()                     # start a new batch of minibatches
        for _ in range(optim_steps_per_batch):
            sub = process_optim_batch hooks(batch)  # sample a buffer, take a minibatch
            losses = loss_module(sub)
            post_loss hooks(sub)                    # update priorities
            losses = optimizer hooks(losses)        # backward, clip, step, zero_grad
            post_optim hooks()                      # target-network updates
            post_optim_log hooks(sub)               # log
    post_steps hooks()                              # UpdateWeights, exploration annealing
    post_steps_log hooks(batch)                     # log: Recorder evaluations
    log every log_interval frames; checkpoint every save_trainer_interval frames

A hook returning None leaves its input unchanged; ``batch_process``/``process_optim_batch``
hooks chain (each gets the previous one's output). Losses and logged values stay detached
tensors until a log interval ends, when they are read with one host sync.
"""

from __future__ import annotations

import copy
import random
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from torchrl_lite.trainers.checkpoint import (
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from torchrl_lite.trainers.hooks import OptimizerHook
from torchrl_lite.trainers.utils import (
    MetricAccumulator,
    load_object_state,
    module_state,
    object_state,
)

__all__ = ["Trainer"]

# destination -> what each op receives (documentation and register_op's error message)
DESTINATIONS = {
    "batch_process": "batch -> batch or None",
    "pre_optim_steps": "() -> None",
    "process_optim_batch": "batch -> sub_batch or None",
    "post_loss": "sub_batch -> None",
    "optimizer": "losses_td, clip_grad_norm, clip_norm, index -> losses_td or None",
    "post_optim": "() -> None",
    "post_optim_log": "sub_batch -> {name: value, 'log_pbar': bool} or None",
    "post_steps": "() -> None",
    "pre_steps_log": "batch -> {name: value, 'log_pbar': bool} or None",
    "post_steps_log": "batch -> {name: value, 'log_pbar': bool} or None",
}
_STATE_VERSION = 2  # 2: the collector's state holds its env state and carry
_STATE_KEYS = ("version", "trainer", "loss_module", "collector", "hooks", "owners", "rng")


class Trainer:
    """Run the training loop: collect, process, optimise, log and checkpoint, with hooks.

    Args:
        collector: an iterable of batches (a data collector).
        total_frames: stop once this many frames were collected.
        frame_skip: env frames per collected step (scales the frame count).
        optim_steps_per_batch: optimisation steps after each batch.
        loss_module: returns a TensorDict whose ``loss*`` entries are summed.
        optimizer: registered as an :class:`OptimizerHook` named ``"optimizer"`` (None:
            register your own optimizer hooks).
        logger: gets ``log_scalar(name, value, step)`` with python floats every
            ``log_interval`` frames.
        clip_grad_norm: clip the gradient norm (True) or each gradient value (False) to
            ``clip_norm``.
        clip_norm: the clipping threshold (None: no clipping).
        progress_bar: show a tqdm bar with frames, episode reward and losses.
        seed: seed the collector (``collector.set_seed``), torch, numpy and ``random``.
        save_trainer_interval: frames between two checkpoints.
        log_interval: frames between two logs (and progress-bar refreshes).
        save_trainer_file: the checkpoint folder (None: no checkpoints). Written
            atomically: an interrupted run leaves the last complete checkpoint.

    Example:
        >>> from tensordict import TensorDict
        >>> net = torch.nn.Linear(3, 1)
        >>> def loss_module(td):
        ...     return TensorDict(loss_mse=(net(td["obs"]) - td["y"]).pow(2).mean())
        >>> batches = [TensorDict(obs=torch.randn(8, 3), y=torch.zeros(8, 1), batch_size=[8])
        ...     for _ in range(4)]
        >>> trainer = Trainer(collector=batches, total_frames=32, optim_steps_per_batch=2,
        ...     loss_module=loss_module, optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        ...     progress_bar=False)
        >>> trainer.register_op("post_steps", lambda: None)
        >>> trainer.train()
        >>> trainer.collected_frames, trainer.optim_count
        (32, 8)
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        *,
        collector,
        total_frames: int,
        frame_skip: int = 1,
        optim_steps_per_batch: int,
        loss_module: Callable,
        optimizer: torch.optim.Optimizer | None = None,
        logger=None,
        clip_grad_norm: bool = True,
        clip_norm: float | None = None,
        progress_bar: bool = True,
        seed: int | None = None,
        save_trainer_interval: int = 10000,
        log_interval: int = 10000,
        save_trainer_file=None,
    ):
        for name, value, low in (
            ("total_frames", total_frames, 1),
            ("frame_skip", frame_skip, 1),
            ("optim_steps_per_batch", optim_steps_per_batch, 0),
            ("save_trainer_interval", save_trainer_interval, 1),
            ("log_interval", log_interval, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"Trainer: {name} must be an int >= {low}, got {value!r}.")
        if not hasattr(collector, "__iter__"):
            raise TypeError(f"Trainer: collector must be iterable, got {type(collector).__name__}.")
        if not callable(loss_module):
            raise TypeError(f"Trainer: loss_module must be callable, got {loss_module!r}.")
        if logger is not None and not hasattr(logger, "log_scalar"):
            raise TypeError(f"Trainer: logger must have log_scalar(), got {logger!r}.")
        self.collector = collector
        self.total_frames = total_frames
        self.frame_skip = frame_skip
        self.optim_steps_per_batch = optim_steps_per_batch
        self.loss_module = loss_module
        self.optimizer = optimizer
        self.logger = logger
        self.clip_grad_norm = bool(clip_grad_norm)
        self.clip_norm = clip_norm
        self.progress_bar = bool(progress_bar)
        self.save_trainer_interval = save_trainer_interval
        self.log_interval = log_interval
        self.save_trainer_file = None if save_trainer_file is None else Path(save_trainer_file)
        self.collected_frames = 0
        self.optim_count = 0
        self.batch_count = 0
        self._last_log = 0
        self._last_save = 0
        self.segment_seconds: list[float] = []  # wall time of each train() call, checkpointed
        self._segment_start: float | None = None
        self._stop_requested = False
        self._ops: dict[str, list] = {dest: [] for dest in DESTINATIONS}
        self._modules: dict[str, object] = {}
        self._owners: list = []  # objects behind bound-method ops, checkpointed too
        self._metrics = MetricAccumulator()  # values logged since the last log
        self._pbar = None
        self.seed = seed
        if seed is not None:
            self.set_seed(seed)
        if optimizer is not None:
            OptimizerHook(optimizer).register(self)

    # -- hooks -----------------------------------------------------------------------
    def register_op(self, dest: str, op: Callable, **kwargs) -> None:
        """Run ``op(..., **kwargs)`` at destination ``dest`` (see the module docstring).

        An op that is a bound method of an object with ``state_dict`` (e.g.
        ``exploration_module.step``), or with plain counters (``HardUpdate.step``), has
        that state checkpointed.

        Raises:
            ValueError: ``dest`` is not a destination (the message lists them).
        """
        if dest not in DESTINATIONS:
            valid = "\n".join(f"  {d}: {sig}" for d, sig in DESTINATIONS.items())
            raise ValueError(
                f"Trainer.register_op: unknown destination {dest!r}. Valid destinations "
                f"(what the op receives -> returns):\n{valid}"
            )
        if not callable(op):
            raise TypeError(f"Trainer.register_op({dest!r}): op must be callable, got {op!r}.")
        self._ops[dest].append((op, kwargs))
        owner = getattr(op, "__self__", None)
        if (
            owner is not None
            and not isinstance(owner, (type, ModuleType))
            and not self._known(owner)
        ):
            self._owners.append(owner)

    def register_module(self, module_name: str, module) -> None:
        """Checkpoint ``module`` (its ``state_dict``) under ``module_name``.

        Raises:
            ValueError: the name is taken.
        """
        if module_name in self._modules:
            raise ValueError(
                f"Trainer.register_module: {module_name!r} is already registered (by "
                f"{type(self._modules[module_name]).__name__}); pass another name, e.g. "
                f"hook.register(trainer, name='{module_name}_2')."
            )
        self._modules[module_name] = module
        self._owners = [o for o in self._owners if o is not module]

    def _known(self, obj) -> bool:
        fixed = (self.collector, self.loss_module, self.optimizer, self)
        return any(obj is o for o in (*fixed, *self._modules.values(), *self._owners))

    # -- the loop --------------------------------------------------------------------
    def train(self) -> None:
        """Train until ``total_frames`` frames were collected, then checkpoint.

        :meth:`request_stop` (e.g. from a Ctrl-C handler) ends it the same way after the
        batch in flight. A KeyboardInterrupt stops training at once; the checkpoint of the
        last completed ``save_trainer_interval`` is left intact (checkpoints are written
        atomically).
        """
        self._stop_requested = False
        if self.collected_frames >= self.total_frames:  # e.g. resumed from the last save
            return
        self._collector_frames = self._collector_count()
        self.segment_seconds.append(0.0)
        self._segment_start = time.perf_counter()
        self._open_pbar()
        try:
            for batch in self.collector:
                self._step_batch(batch)
                if self.collected_frames >= self.total_frames or self._stop_requested:
                    break
                self._maybe_save()
            self._flush_logs()
            if self.save_trainer_file is not None:
                self.save()
        finally:
            self._clock()
            self._segment_start = None
            self.shutdown()

    def request_stop(self) -> None:
        """Make ``train()`` end after the batch in flight (its updates done), logging and
        checkpointing as at the end of the budget. Safe to call from a signal handler."""
        self._stop_requested = True

    def _clock(self) -> None:
        """Bring the running segment's entry of ``segment_seconds`` up to now."""
        if self._segment_start is not None and self.segment_seconds:
            self.segment_seconds[-1] = time.perf_counter() - self._segment_start

    def shutdown(self) -> None:
        """Shut the collector down (its workers and envs) and close the progress bar.

        ``train()`` calls it when it ends; calling it again (as TorchRL's scripts do after
        ``train()``) does nothing more.
        """
        self._close_pbar()
        shutdown = getattr(self.collector, "shutdown", None)
        if callable(shutdown):
            shutdown()

    def _step_batch(self, batch) -> None:
        batch = self._chain("batch_process", batch)
        frames = self._frames_in(batch) * self.frame_skip
        self.collected_frames += frames
        self.batch_count += 1
        self._log_hooks("pre_steps_log", batch)
        if self.collected_frames > (getattr(self.collector, "init_random_frames", 0) or 0):
            self.optim_steps(batch)
        for op, kwargs in self._ops["post_steps"]:
            op(**kwargs)
        self._log_hooks("post_steps_log", batch)
        if self._pbar is not None:
            if self.collected_frames >= self.total_frames:  # e.g. a target reached early
                self._pbar.total = self.collected_frames
            self._pbar.update(frames)
        if self.collected_frames - self._last_log >= self.log_interval:
            self._flush_logs()

    def optim_steps(self, batch) -> None:
        """Run ``optim_steps_per_batch`` optimisation steps on ``batch``."""
        for op, kwargs in self._ops["pre_optim_steps"]:
            op(**kwargs)
        for _ in range(self.optim_steps_per_batch):
            self.optim_count += 1
            sub_batch = self._chain("process_optim_batch", batch)
            losses = self.loss_module(sub_batch)
            for op, kwargs in self._ops["post_loss"]:
                op(sub_batch, **kwargs)
            for i, (op, kwargs) in enumerate(self._ops["optimizer"]):
                out = op(losses, self.clip_grad_norm, self.clip_norm, i, **kwargs)
                if out is not None:
                    losses = out
            for op, kwargs in self._ops["post_optim"]:
                op(**kwargs)
            self._metrics.add_losses(losses)
            self._log_hooks("post_optim_log", sub_batch)

    def _chain(self, dest: str, batch):
        for op, kwargs in self._ops[dest]:
            out = op(batch, **kwargs)
            if out is not None:
                batch = out
        return batch

    def _collector_count(self) -> int | None:
        count = getattr(self.collector, "_frames", None)
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def _frames_in(self, batch) -> int:
        # the collector's own count when it keeps one: a post-processor may hold steps
        # back (MultiStep(across_batches=True)) or drop them; the frames were collected
        count, seen = self._collector_count(), getattr(self, "_collector_frames", None)
        if count is not None and seen is not None and count >= seen:
            self._collector_frames = count
            return count - seen
        if batch is None:  # the collector wrote into its own replay buffer
            return int(getattr(self.collector, "frames_per_batch", 0))
        mask = batch.get(("collector", "mask"), None)
        return int(mask.sum()) if mask is not None else batch.numel()

    # -- logging ---------------------------------------------------------------------
    def _log_hooks(self, dest: str, batch) -> None:
        for op, kwargs in self._ops[dest]:
            out = op(batch, **kwargs)
            if out:
                self._log(**out)

    def _log(self, log_pbar: bool = False, **values) -> None:
        """Accumulate values to log (tensors stay on device until the log interval ends)."""
        self._metrics.add(values, log_pbar)

    def _flush_logs(self) -> None:
        """Log the means since the last log (one host sync) and refresh the progress bar."""
        self._last_log = self.collected_frames
        if self.logger is None and self._pbar is None:
            self._metrics.clear()
            return
        means = self._metrics.read()
        if self.logger is not None:
            for key, value in means.items():
                self.logger.log_scalar(key, value, step=self.collected_frames)
        if self._pbar is not None and means:
            shown = {
                k: f"{v:.4g}"
                for k, v in means.items()
                if k in self._metrics.pbar_keys or k.startswith("loss")
            }
            self._pbar.set_postfix(shown, refresh=False)
            self._pbar.refresh()

    def _open_pbar(self) -> None:
        if not self.progress_bar:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            warnings.warn("tqdm is not installed: no progress bar (pip install tqdm).")
            return
        self._pbar = tqdm(
            total=self._planned_frames(),
            initial=self.collected_frames,
            unit="frames",
            dynamic_ncols=True,
        )

    def _planned_frames(self) -> int:
        """The frame count train() will end at: ``total_frames`` rounded up to the
        collector's whole batches (when it yields ``frames_per_batch`` frames each)."""
        step = getattr(self.collector, "frames_per_batch", None)
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            return self.total_frames
        step *= self.frame_skip
        left = max(self.total_frames - self.collected_frames, 0)
        return self.collected_frames + -(-left // step) * step

    def _close_pbar(self) -> None:
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None

    # -- seeding and checkpoints -----------------------------------------------------
    def set_seed(self, seed: int) -> None:
        """Seed the collector (when it has ``set_seed``), torch, numpy and ``random``."""
        set_seed = getattr(self.collector, "set_seed", None)
        if callable(set_seed):
            seed = set_seed(seed)
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)

    def _maybe_save(self) -> None:
        if (
            self.save_trainer_file is not None
            and self.collected_frames - self._last_save >= self.save_trainer_interval
        ):
            self.save()

    def state_dict(self) -> dict:
        """Everything a resumed run needs, except what hooks write with ``dumps``.

        Holds the loss module (networks, target networks, e.g. SAC's temperature), the
        collector's ``state_dict()`` (frame counters, its env's RNG/internal state, the
        running episode), every registered hook (the optimizer among them), the owners of
        bound-method ops, counters and RNG states.
        """
        collector_state = getattr(self.collector, "state_dict", None)
        self._clock()
        return {
            "version": _STATE_VERSION,
            "trainer": {
                "collected_frames": self.collected_frames,
                "optim_count": self.optim_count,
                "batch_count": self.batch_count,
                "last_log": self._last_log,
                "last_save": self._last_save,
                "metrics": self._metrics.state_dict(),
                "segment_seconds": list(self.segment_seconds),
            },
            "loss_module": module_state(self.loss_module),
            "collector": collector_state() if callable(collector_state) else None,
            "hooks": {
                name: m.state_dict()
                for name, m in self._modules.items()
                if not callable(getattr(m, "dumps", None))
            },
            "owners": [object_state(o) for o in self._owners],
            "rng": rng_state(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore :meth:`state_dict`'s output; on failure, the trainer is left as it was.

        Raises:
            ValueError: the state does not match this trainer's hooks or modules.
        """
        self._check_state(state_dict)
        backup = copy.deepcopy(self.state_dict())
        try:
            self._apply(state_dict)
        except Exception as err:
            self._apply(backup)
            raise ValueError(
                f"the checkpoint does not fit this trainer ({type(err).__name__}: {err}); "
                f"build the collector, loss, optimizer and hooks as when it was saved."
            ) from err

    def _check_state(self, state: dict) -> None:
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing or state.get("version") != _STATE_VERSION:
            raise ValueError(
                f"not a Trainer state of version {_STATE_VERSION} (version "
                f"{state.get('version')!r}, missing entries {missing})."
            )
        saved, mine = (
            set(state["hooks"]),
            {n for n, m in self._modules.items() if not callable(getattr(m, "dumps", None))},
        )
        if saved != mine:
            raise ValueError(
                f"the checkpoint's hooks {sorted(saved)} differ from this trainer's "
                f"{sorted(mine)}; register the same hooks (same names) before loading."
            )
        if len(state["owners"]) != len(self._owners):
            raise ValueError(
                f"the checkpoint has {len(state['owners'])} stateful bound-method ops, this "
                f"trainer {len(self._owners)}; register the same ops before loading."
            )

    def _apply(self, state: dict) -> None:
        if state["loss_module"] is not None:
            self.loss_module.load_state_dict(state["loss_module"])
        if state["collector"] is not None:
            self.collector.load_state_dict(state["collector"])
        for name, hook_state in state["hooks"].items():
            self._modules[name].load_state_dict(hook_state)
        for owner, owner_state in zip(self._owners, state["owners"]):
            load_object_state(owner, owner_state)
        t = state["trainer"]
        self.collected_frames, self.optim_count = t["collected_frames"], t["optim_count"]
        self.batch_count, self._last_log = t["batch_count"], t["last_log"]
        self._last_save = t["last_save"]
        self._metrics.load_state_dict(t["metrics"])
        self.segment_seconds = list(t.get("segment_seconds", []))  # older checkpoints: none
        set_rng_state(state["rng"])

    def save(self, path=None) -> Path:
        """Write a checkpoint folder atomically (default: ``save_trainer_file``).

        Hooks with ``dumps(folder)`` (the replay buffer) write their own sub-folder.
        Ctrl-C during the final swap is held until the new checkpoint is in place.
        """
        path = self._path(path)
        last_save, self._last_save = self._last_save, self.collected_frames
        dumpers = {
            name: m.dumps
            for name, m in self._modules.items()
            if callable(getattr(m, "dumps", None))
        }
        meta = {
            "collected_frames": self.collected_frames,
            "optim_count": self.optim_count,
            "batch_count": self.batch_count,
            "time": time.time(),
        }
        try:
            return save_checkpoint(path, self.state_dict(), dumpers, meta)
        except BaseException:
            self._last_save = last_save  # not saved: the next interval tries again
            raise

    def load(self, path=None) -> None:
        """Resume from a checkpoint folder written by :meth:`save`; writes nothing.

        Build the trainer as for the saved run (same collector, loss, optimizer and
        hooks), then call ``load``; ``train()`` then continues where the run stopped.

        Raises:
            FileNotFoundError: no checkpoint at ``path``.
            ValueError: a corrupt checkpoint, or one that does not fit this trainer.
        """
        path = self._path(path)
        state, folder = load_checkpoint(path)
        try:
            self._check_state(state)
        except ValueError as err:
            raise ValueError(f"cannot resume from {folder}: {err}") from err
        loaders = {n: m for n, m in self._modules.items() if callable(getattr(m, "loads", None))}
        for name in loaders:
            if not (folder / name).is_dir():
                raise ValueError(f"corrupt checkpoint at {folder}: {name}/ is missing.")
        backup = copy.deepcopy(self.state_dict())
        try:
            self.load_state_dict(state)
        except ValueError as err:
            raise ValueError(f"cannot resume from {folder}: {err}") from err
        try:
            for name, m in loaders.items():
                m.loads(folder / name)
        except Exception as err:
            self._apply(backup)
            raise ValueError(
                f"cannot resume from {folder}: {name}/ does not load ({type(err).__name__}: {err})."
            ) from err

    def _path(self, path) -> Path:
        path = self.save_trainer_file if path is None else Path(path)
        if path is None:
            raise ValueError("Trainer: no checkpoint path; pass one or set save_trainer_file.")
        return path

    def __repr__(self) -> str:
        hooks = {d: len(ops) for d, ops in self._ops.items() if ops}
        return (
            f"Trainer(collected_frames={self.collected_frames}/{self.total_frames}, "
            f"optim_steps_per_batch={self.optim_steps_per_batch}, hooks={hooks})"
        )


# TorchRL's scripts import the hooks from this module (torchrl.trainers.trainers); they live
# in hooks.py, log_hooks.py and minibatches.py, imported here on first use (no cycle)
_HOOK_MODULES = {
    "torchrl_lite.trainers.hooks": (
        "ClearCudaCache",
        "OptimizerHook",
        "ReplayBufferTrainer",
        "RewardNormalizer",
        "TrainerHookBase",
        "UpdateWeights",
    ),
    "torchrl_lite.trainers.log_hooks": (
        "CountFramesLog",
        "LogReward",
        "LogScalar",
        "LogValidationReward",
        "Recorder",
    ),
    "torchrl_lite.trainers.minibatches": ("BatchSubSampler", "ComputeAdvantage"),
}


def __getattr__(name: str):
    import importlib

    for module, names in _HOOK_MODULES.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
