"""``ParallelEnv``: ``n`` copies of an env in worker processes, as one batched env.

The copies are split into groups, one worker process per group; each worker runs a plain
``SerialEnv`` over its group (``worker.py``). Actions and results travel through
shared-memory buffers allocated once, after the workers report their specs; a one-byte
command per worker (the workers' one protocol, ``workers/channel.py``) says what to do
("step", "reset", "step then reset the done copies", "seed", "close") and the worker
replies when its results are in shared memory. Nothing is pickled per step.
"""

from __future__ import annotations

import inspect
import multiprocessing
import warnings
import weakref

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.batched import worker as W
from torchrl_lite.envs.batched.base import _BatchedEnv
from torchrl_lite.envs.batched.commands import _JOIN_S, _WorkerChannels, worker_attr
from torchrl_lite.envs.batched.lazy import LazyParallel
from torchrl_lite.envs.batched.serial import SerialEnv, _copies_mask
from torchrl_lite.envs.stepper.parallel import ParallelStepper
from torchrl_lite.workers.channel import Poller
from torchrl_lite.workers.process import CloudPickled, start_method, start_worker

__all__ = ["ParallelEnv"]


class ParallelEnv(_WorkerChannels, _BatchedEnv):
    """Run ``num_workers`` copies of an env in worker processes, as one batched env.

    Each worker process runs a ``SerialEnv`` over its group of copies; actions and results
    go through shared memory, and each call sends a one-byte command per worker. A worker
    that raises makes the call raise a ``RuntimeError`` with the worker's traceback; a
    worker that dies makes the call raise. Either way the other workers are shut down and
    the env is closed. Workers are daemon processes (they stop with this process), so an
    env inside one cannot start processes of its own (e.g. gymnasium's async vector env).

    Args:
        num_workers: number of copies (>= 1).
        create_env_fn: a zero-argument callable returning an env, or a list of
            ``num_workers`` of them. It runs in the workers; with ``"spawn"`` it is sent
            with cloudpickle, so lambdas work.
        create_env_kwargs: keyword arguments for ``create_env_fn`` (a dict, or a list of
            ``num_workers`` dicts).
        device: where the outputs go (default: the copies' device).
        num_sub_threads: torch threads in each worker.
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``. Default: ``"fork"``
            where the platform has it (Linux) and neither CUDA nor an OpenGL driver (a
            pixel env rendered here, e.g. by ``EnvCreator``) has started in this process,
            else ``"spawn"``. Pass ``"spawn"`` if ``create_env_fn`` is not fork-safe in
            another way (it uses state of this process that forking breaks).
        spec_check: see ``EnvBase``.
        num_processes: number of worker processes (default ``num_workers``: one copy per
            process); copies are split into contiguous groups, one group per process.
        pin_memory: return outputs in page-locked memory (with CUDA; else ignored).
        serial_for_single: with ``num_workers=1``, build a ``SerialEnv`` instead (no
            worker process), as in TorchRL.

    Attributes the env lacks are read from the copies in the workers, one value each
    (they must pickle); a method is called on each copy, returning the list of results.

    Copies whose specs differ are stacked lazily as in ``SerialEnv``, with buffers per copy.

    Example:
        >>> from torchrl_lite.envs import GymEnv, ParallelEnv
        >>> env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
        >>> env.rollout(5, break_when_any_done=False).batch_size
        torch.Size([2, 5])
        >>> tasks = ParallelEnv(2, [lambda: GymEnv("CartPole-v1"), lambda: GymEnv("Acrobot-v1")])
        >>> tasks.rollout(3)[1]["action"].shape  # CartPole: 2 actions, Acrobot: 3
        torch.Size([3, 3])
        >>> env.close(), tasks.close()
        (None, None)
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn,
        create_env_kwargs=None,
        device=None,
        num_sub_threads: int = 1,
        mp_start_method: str | None = None,
        spec_check: str = "first",
        num_processes: int | None = None,
        pin_memory: bool = False,
        serial_for_single: bool = False,
    ):
        self._procs: list = []
        self._channels: list = []
        self._finalizer = None
        self._fuse_reset = self._reset_ready = False
        if isinstance(num_sub_threads, bool) or not isinstance(num_sub_threads, int):
            raise TypeError(f"ParallelEnv: num_sub_threads must be an int, got {num_sub_threads!r}")
        if num_sub_threads < 1:
            raise ValueError(f"ParallelEnv: num_sub_threads must be >= 1, got {num_sub_threads}")
        if num_processes is not None and (
            isinstance(num_processes, bool) or not isinstance(num_processes, int)
        ):
            raise TypeError(f"ParallelEnv: num_processes must be an int, got {num_processes!r}")
        self.num_sub_threads = num_sub_threads
        self.mp_start_method = start_method(mp_start_method, "ParallelEnv")
        self._num_processes = num_processes
        super().__init__(
            num_workers, create_env_fn, create_env_kwargs, device, spec_check, pin_memory
        )

    def __new__(cls, *args, **kwargs):
        if (
            kwargs.get("serial_for_single")
            and (args[0] if args else kwargs.get("num_workers")) == 1
        ):
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs).arguments
            names = inspect.signature(SerialEnv.__init__).parameters
            return SerialEnv(**{k: v for k, v in bound.items() if k in names and k != "self"})
        return super().__new__(cls)

    def __getstate__(self) -> dict:
        """A closed ParallelEnv pickles without its stopped workers (the copy starts new ones
        at its first reset, as a collector worker's copy does); a running one is refused."""
        if not self.is_closed:
            raise TypeError(
                f"{type(self).__name__} is running: its worker processes cannot be pickled; "
                "close() it first (the copy restarts at its first reset) or pass a "
                "constructor, e.g. `lambda: ParallelEnv(...)`."
            )
        stopped = {"_procs": [], "_channels": [], "_finalizer": None, "_poller": None}
        factories = CloudPickled(self._factories)  # lambdas too, as a spawned worker gets them
        return {**self.__dict__, **stopped, "_factories": factories}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({**state, "_factories": state["_factories"].load()})

    def _reset_workers_state(self) -> None:
        self._procs, self._channels = [], []
        self._finalizer = None
        self._fuse_reset = self._reset_ready = False

    def _worker_attr(self, name: str):
        return worker_attr(self, name)

    # -- life cycle ----------------------------------------------------------------------
    def _start(self, factories: list) -> list[U.EnvInfo]:
        n = len(factories)
        procs = n if self._num_processes is None else self._num_processes
        if not 1 <= procs <= n:
            raise ValueError(
                f"ParallelEnv: num_processes must be between 1 and num_workers={n}, got {procs}"
            )
        # contiguous groups of copies, as even as possible: [lo, hi) per worker
        bounds = [round(w * n / procs) for w in range(procs + 1)]
        self._groups = [(bounds[w], bounds[w + 1]) for w in range(procs)]
        ctx = multiprocessing.get_context(self.mp_start_method)
        forked = self.mp_start_method == "fork"
        for lo, hi in self._groups:
            group = factories[lo:hi]
            if not forked:
                group = [CloudPickled(f) for f in group]
            proc, channel = start_worker(
                ctx,
                W.worker_main,
                (group, self.num_sub_threads),
                f"ParallelEnv-worker-{len(self._procs)}",
                self._channels,
                share_tensors=False,  # the views alone travel shared (_attach)
                daemon=True,
            )
            self._procs.append(proc)
            self._channels.append(channel)
            if self._finalizer is None:  # stops the workers if the env is dropped or at exit
                self._finalizer = weakref.finalize(
                    self, W.stop_workers, self._procs, self._channels, _JOIN_S
                )
        self._poller = Poller(self._channels)
        replies = self._wait(list(range(len(self._procs))), "start-up (building the envs)")
        return [info for w in range(len(self._procs)) for info in replies[w]]

    def _lazy_part(self) -> LazyParallel:
        return LazyParallel(self)

    def _connect(self) -> None:
        if self._lazy is not None:  # buffers per copy: the workers run a _CopiesLoop
            views = self._lazy.views()
            self._attach([views[lo:hi] for lo, hi in self._groups])
            return
        specs = list(self._single_specs.values())
        cpu = torch.device("cpu")
        self._in_buf = self._buffers(self._input_keys, specs, cpu)
        self._step_buf = self._buffers(self._step_keys, specs, cpu)
        self._reset_buf = self._buffers(self._reset_keys, specs, cpu)
        self._mask_buf = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        # the policy's ("next", state) entries, and which of them this step has
        self._next_buf = self._buffers(self._state_leaves, specs, cpu)
        self._next_flags = torch.zeros(len(self._state_leaves), dtype=torch.bool)
        for buf in (self._in_buf, self._step_buf, self._reset_buf, self._next_buf):
            for tensor in buf.values():
                tensor.share_memory_()
        self._mask_buf.share_memory_()
        self._next_flags.share_memory_()
        self._in_leaves = [self._in_buf[k] for k in self._input_keys]
        self._step_leaves = [self._step_buf[k] for k in self._step_keys]
        self._reset_leaves = [self._reset_buf[k] for k in self._reset_keys]
        views = [
            {
                "input": {k: v[lo:hi] for k, v in self._in_buf.items()},
                "step": {k: v[lo:hi] for k, v in self._step_buf.items()},
                "reset": {k: v[lo:hi] for k, v in self._reset_buf.items()},
                "mask": self._mask_buf[lo:hi],
                "next": {k: v[lo:hi] for k, v in self._next_buf.items()},
                "next_flags": self._next_flags,
            }
            for lo, hi in self._groups
        ]
        self._attach(views)

    def _attach(self, views: list) -> None:
        """Send each worker its views of the shared buffers and wait until all hold them."""
        for channel, view in zip(self._channels, views):
            # shared tensors travel as file descriptors
            channel.send(W.ATTACH, view, share_tensors=True)
        self._all = list(range(len(self._channels)))
        self._wait(self._all, "start-up (attaching shared memory)")

    def _shutdown(self, grace: float = _JOIN_S) -> None:
        # detach() returns None once the finalizer has run: the workers are stopped once
        if self._finalizer is not None and self._finalizer.detach() is not None:
            W.stop_workers(self._procs, self._channels, grace)

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the workers."""
        return [p.pid for p in self._procs]

    # -- EnvBase hooks -------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        if self._lazy is not None:
            return self._lazy.step(tensordict)
        for key, buf in zip(self._input_keys, self._in_leaves):
            buf.copy_(tensordict.get(key))
        self._write_next(tensordict)
        self._step_workers()
        values = [self._export(buf) for buf in self._step_leaves]
        return U.td_from_leaves(self._step_keys, values, self.batch_size, self.device)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        if self._lazy is not None:
            return self._lazy.reset(tensordict)
        self._reset_workers(tensordict.get(K.RESET, None) if tensordict is not None else None)
        values = [self._export(buf) for buf in self._reset_leaves]
        return U.td_from_leaves(self._reset_keys, values, self.batch_size, self.device)

    # -- the copies of an indexed view (see view.py) ------------------------------------
    def _step_copies(self, copies: list[int], tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        for key, buf in zip(self._input_keys, self._in_leaves):
            buf[copies] = tensordict.get(key).to(buf.device)
        self._write_next(tensordict, copies)
        self._command_copies(W.STEP_SOME, copies, lambda local: [k for k, _ in local], "step")
        values = [buf[copies].to(self.device) for buf in self._step_leaves]
        return U.td_from_leaves(
            self._step_keys, values, (len(copies), *self._env_batch), self.device
        )

    def _reset_copies(self, copies: list[int], mask: torch.Tensor | None) -> TensorDictBase:
        self._check_usable()
        self._reset_workers(_copies_mask(self, copies, mask))
        values = [buf[copies].to(self.device) for buf in self._reset_leaves]
        return U.td_from_leaves(
            self._reset_keys, values, (len(copies), *self._env_batch), self.device
        )

    def _seed_copies(self, copies: list[int], seed: int) -> None:
        self._check_usable()
        per_copy = max(1, self._env_batch.numel())
        seeds = {i: seed + j * per_copy for j, i in enumerate(copies)}
        self._command_copies(
            W.SEED_SOME, copies, lambda local: [(k, seeds[i]) for k, i in local], "set_seed"
        )

    def _write_next(self, tensordict: TensorDictBase, copies: list[int] | None = None) -> None:
        """Put the step input's ``("next", state)`` entries (``_next_inputs``) in the
        shared buffers (rows ``copies``, all when None) and flag which are present."""
        for j, value in enumerate(self._next_inputs(tensordict)):
            self._next_flags[j] = value is not None
            if value is not None:
                buf = self._next_buf[self._state_leaves[j]]
                if copies is None:
                    buf.copy_(value)
                else:
                    buf[copies] = value.to(buf.device)

    def _command_copies(self, command: bytes, copies: list[int], payload, what: str) -> None:
        """Send ``command`` with ``payload(local)`` to each worker holding some of
        ``copies``, ``local`` being ``[(position in the worker, copy)]``."""
        for w, (lo, hi) in enumerate(self._groups):
            local = [(i - lo, i) for i in copies if lo <= i < hi]
            if local:
                self._command(command, [w], what, payload(local))

    def _step_workers(self) -> None:
        """Step every worker on the shared inputs (inside ``step_and_maybe_reset``, each
        also resets its copies that are done)."""
        if self._fuse_reset:
            self._command(W.STEP_RESET, self._all, "step")
            self._reset_ready = True
        else:
            self._command(W.STEP, self._all, "step")

    def _reset_workers(self, mask: torch.Tensor | None) -> None:
        """Reset the copies in ``mask`` (None: all) into the shared buffers, sending a
        command only to the workers that hold one of them."""
        if self._reset_ready:  # the workers reset the copies that were done at the step
            self._reset_ready = False
            if mask is None or not torch.equal(mask.reshape(self._mask_buf.shape), self._mask_buf):
                raise RuntimeError(
                    "ParallelEnv: the reset after a fused step must use its done mask"
                )
        elif mask is None:
            self._mask_buf.fill_(True)
            self._command(W.RESET, self._all, "reset")
        else:
            self._mask_buf.copy_(mask.reshape(self._mask_buf.shape))
            per_copy = self._mask_buf.reshape(self.num_workers, -1).any(-1).tolist()
            workers = [w for w, (lo, hi) in enumerate(self._groups) if any(per_copy[lo:hi])]
            self._command(W.RESET, workers, "reset")

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple:
        """``EnvBase.step_and_maybe_reset``, where each worker resets its done copies right
        after their step: one message per worker instead of two when some are done."""
        if K.DONE not in self._step_keys:
            return super().step_and_maybe_reset(tensordict)
        self._fuse_reset = True
        try:
            return super().step_and_maybe_reset(tensordict)
        finally:
            self._fuse_reset = self._reset_ready = False

    def _numpy_stepper(self):
        """Steps through the shared buffers (``stepper/parallel.py``), or None (also for
        copies of different specs: stepped one by one)."""
        self._check_usable()
        if self._lazy is not None:
            return None
        return ParallelStepper.build(self, W.STEP, W.STEP_RESET)

    def _set_seed(self, seed: int) -> None:
        self._check_usable()
        per_copy = max(1, self._env_batch.numel())
        for w, (lo, _hi) in enumerate(self._groups):
            self._command(W.SEED, [w], "set_seed", seed + lo * per_copy)

    # -- state (checkpoints) -----------------------------------------------------------
    def state_dict(self) -> dict:
        """Nothing: the copies' RNG and internal states live in the worker processes.

        It warns so: a run resumed from it continues, but not bit-exact.
        """
        warnings.warn(
            "ParallelEnv: the sub-envs' RNG and internal states live in worker processes and "
            "are not saved; a resumed run continues, but not bit-exact.",
            stacklevel=2,
        )
        return {"kind": "none"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Accept what :meth:`state_dict` returned (nothing to restore)."""
        self._check_state_kind(state_dict, "none")
