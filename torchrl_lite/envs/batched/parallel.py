"""Batched environments: ``SerialEnv`` (one process) and ``ParallelEnv`` (worker processes).

Both run ``n`` copies of the env that ``create_env_fn`` builds and expose them as one env of
batch size ``[n, *env.batch_size]`` whose specs are the single env's specs expanded to it.

* ``SerialEnv`` steps its copies one after the other and stacks their results leaf by leaf
  (copies that are plain GymWrappers are stepped at the numpy level instead, see
  ``libs._gym_steppers.GymGroup``: one array per key for the whole batch).
* ``ParallelEnv`` splits the copies into groups, one worker process per group; each worker
  runs a plain ``SerialEnv`` over its group (see ``_batched_worker``). Actions and results
  travel through shared-memory buffers allocated once, after the workers report their
  specs; a one-byte command per worker on a ``multiprocessing`` pipe says what to do
  ("step", "reset", "step then reset the done copies", "seed", "close") and the worker
  replies when its results are in shared memory. Nothing is pickled per step.

Seeds: ``set_seed(seed)`` gives copy ``i`` the seed ``seed + i * env.batch_size.numel()``,
so ``SerialEnv``, ``ParallelEnv`` and the copies run on their own give the same rollouts.
Copies whose specs differ (multi-task) are run by the lazy variants in ``_batched_lazy.py``.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import os
import pickle
import warnings
import weakref

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite._mp import start_method
from torchrl_lite.envs import _batched_utils as U
from torchrl_lite.envs import _batched_worker as W
from torchrl_lite.envs._batched_attr import worker_attr
from torchrl_lite.envs._batched_base import _BatchedEnv
from torchrl_lite.envs._parallel_channels import _JOIN_S, _WorkerChannels
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.stepper.parallel import ParallelStepper

__all__ = ["SerialEnv", "ParallelEnv"]


class SerialEnv(_BatchedEnv):
    """Run ``num_workers`` copies of an env one after the other, as one batched env.

    Args:
        num_workers: number of copies (>= 1).
        create_env_fn: a zero-argument callable returning an env, or a list of
            ``num_workers`` of them.
        create_env_kwargs: keyword arguments for ``create_env_fn`` (a dict, or a list of
            ``num_workers`` dicts).
        device: where the outputs go (default: the copies' device).
        spec_check: see ``EnvBase``.
        pin_memory: return outputs in page-locked memory (with CUDA; else ignored).
        serial_for_single: accepted for symmetry with ``ParallelEnv`` (no effect).

    Attributes the env lacks are read from the copies, one value each
    (``env.spec`` -> ``[copy0.spec, copy1.spec]``); a method is called on each.

    Copies whose specs differ (multi-task) are stacked lazily, as in TorchRL: data are
    ``LazyStackedTensorDict`` (``td[i]``: copy ``i``'s), specs the copies' specs stacked
    (``env.observation_spec[i]``: copy ``i``'s); same batch size and dtypes required.

    Example:
        >>> from torchrl_lite.envs import GymEnv, SerialEnv
        >>> env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
        >>> env.rollout(5, break_when_any_done=False).batch_size
        torch.Size([2, 5])
        >>> env.close()
        >>> makers = [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("MountainCarContinuous-v0")]
        >>> tasks = SerialEnv(2, makers)  # observations of 3 and 2 entries
        >>> td = tasks.rollout(3)  # a LazyStackedTensorDict
        >>> td[0]["observation"].shape, tasks.observation_spec[1]["observation"].shape
        (torch.Size([3, 3]), torch.Size([2]))
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn,
        create_env_kwargs=None,
        device=None,
        spec_check: str = "first",
        pin_memory: bool = False,
        serial_for_single: bool = False,
    ):
        self._envs: list[EnvBase] = []
        super().__init__(
            num_workers, create_env_fn, create_env_kwargs, device, spec_check, pin_memory
        )

    @classmethod
    def _from_envs(cls, envs: list[EnvBase]) -> SerialEnv:
        """A SerialEnv over envs already built and checked (used by ParallelEnv workers)."""
        return cls(len(envs), [functools.partial(_given, env) for env in envs])

    def _start(self, factories: list) -> list[U.EnvInfo]:
        infos = []
        for factory in factories:
            env = factory()
            infos.append(U.env_info(env))  # raises TypeError for a non-env
            self._envs.append(env)
        return infos

    def _connect(self) -> None:
        # the leaves of each copy's last reset: a partial reset stacks them with the new ones
        state = self._single_specs["full_state_spec"]
        self._state_zeros = {k: state[k].zero().to(self._env_device) for k in self._state_keys}
        zeros = self._buffers(self._reset_keys, list(self._single_specs.values()), self._env_device)
        self._last_reset = [[zeros[k][i] for k in self._reset_keys] for i in range(len(self._envs))]
        self._flat = all(isinstance(k, str) for k in self._step_keys + self._reset_keys)
        self._flat_inputs = all(isinstance(k, str) for k in self._input_keys)
        self._move_outputs = self._env_device != self.device
        # every copy a plain GymWrapper: step and reset them at the numpy level
        self._group = type(self._envs[0])._batch_group(
            self._envs, self._input_keys, self._step_keys, self._reset_keys
        )

    def _shutdown(self) -> None:
        for env in self._envs:
            if not env.is_closed:
                env.close()

    def _reset_workers_state(self) -> None:
        self._envs = []

    def _worker_attr(self, name: str):
        values = [getattr(env, name) for env in self._envs]
        if all(callable(v) for v in values):
            return functools.partial(_call_each, values)
        return values

    # -- the serial loop (also what each ParallelEnv worker runs) ----------------------
    def _step_into(self, rows: list, out_rows: list | None = None, copies=None) -> list | None:
        """Step copy ``i`` with ``rows[i]`` (its ``_input_keys`` leaves).

        Returns the results' ``_step_keys`` leaves stacked to ``[n, *env_batch, ...]``, or,
        with ``out_rows``, copies copy ``i``'s leaves into ``out_rows[i]`` (views of shared
        memory in a ParallelEnv worker) and returns None. With ``copies`` (positions),
        only those copies step, ``rows[j]`` and ``out_rows[j]`` being copy ``copies[j]``'s.
        """
        keys, results, device = self._input_keys, [], self._env_device
        move = bool(rows and rows[0]) and rows[0][0].device != device
        chosen = range(len(self._envs)) if copies is None else copies
        for j, (i, values) in enumerate(zip(chosen, rows)):
            env = self._envs[i]
            if move:
                values = [v.to(device) for v in values]
            if self._flat_inputs:
                sub = _td.new(dict(zip(keys, values)), env.batch_size, device)
            else:
                sub = U.td_from_leaves(keys, values, env.batch_size, device)
            values = self._collect(i, env._step(sub), self._step_keys)
            if out_rows is None:
                results.append(values)
            else:
                U.copy_row(out_rows[j], values)
        return U.stack(results) if out_rows is None else None

    def _reset_into(self, mask: torch.Tensor | None, out_rows: list | None = None) -> list | None:
        """Reset the copies selected by ``mask`` (``[n, *env_batch, 1]`` bool; None: all).

        Returns the ``_reset_keys`` leaves stacked to ``[n, *env_batch, ...]`` (copies not
        reset give their last reset values), or copies the reset copies' leaves into their
        ``out_rows`` and returns None.
        """
        for i in U.chosen(mask, len(self._envs)):
            env, sub = self._envs[i], None
            if env.batch_size and mask is not None and not bool(mask[i].all()):
                sub_mask = mask[i].to(env.device)
                sub = TensorDict({K.RESET: sub_mask}, batch_size=env.batch_size, device=env.device)
            # the reset hook, as TransformedEnv calls it (EnvBase.reset's merge of a partial
            # reset happens once, on the batched env)
            result = env._inner_reset(sub)
            values = self._collect(i, result, self._reset_keys)
            self._last_reset[i] = values
            if out_rows is not None:
                U.copy_row(out_rows[i], values)
        return U.stack(self._last_reset) if out_rows is None else None

    def _collect(self, i: int, result: TensorDictBase, keys: list) -> list[torch.Tensor]:
        """The leaves ``keys`` of copy ``i``'s ``result`` (a declared state entry that a
        reset leaves out gets its spec's zero; any other missing key raises KeyError)."""
        values = U.leaves(result, keys, self._flat)
        for j, value in enumerate(values):
            if value is None:
                key = keys[j]
                if key not in self._state_keys:
                    raise KeyError(
                        f"Env copy {i} ({self._env_name}) returned no {key!r}, which its specs "
                        f"declare. Returned keys: {list(result.keys(True, True))}."
                    )
                values[j] = self._state_zeros[key]
        return values

    # -- the copies of an indexed view (see _batched_view.py) ---------------------------
    def _step_copies(self, copies: list[int], tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        inputs = [tensordict.get(key) for key in self._input_keys]
        values = self._step_into(U.rows(inputs, len(copies)), copies=copies)
        return self._copies_td(self._step_keys, values, len(copies))

    def _reset_copies(self, copies: list[int], mask: torch.Tensor | None) -> TensorDictBase:
        self._check_usable()
        values = self._reset_into(_copies_mask(self, copies, mask))
        return self._copies_td(self._reset_keys, [v[copies] for v in values], len(copies))

    def _seed_copies(self, copies: list[int], seed: int) -> None:
        self._check_usable()
        for i in copies:
            seed = self._envs[i].set_seed(seed)

    def _copies_td(self, keys: list, values: list, n: int) -> TensorDictBase:
        values = [v.to(self.device) for v in values] if self._move_outputs else values
        return U.td_from_leaves(keys, values, (n, *self._env_batch), self.device, self._flat)

    # -- EnvBase hooks -----------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        if self._group is not None:
            arrays = self._group.step(tensordict.get(K.ACTION))
            values = [torch.from_numpy(array) for array in arrays]
        else:
            inputs = [tensordict.get(key) for key in self._input_keys]
            values = self._step_into(U.rows(inputs, self.num_workers))
        if self._move_outputs:
            values = [v.to(self.device) for v in values]
        return U.td_from_leaves(self._step_keys, values, self.batch_size, self.device, self._flat)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        mask = tensordict.get(K.RESET, None) if tensordict is not None else None
        if self._group is not None:
            arrays = self._group.reset(U.chosen(mask, len(self._envs)))
            values = [torch.from_numpy(array) for array in arrays]
        else:
            values = self._reset_into(mask)
        if self._move_outputs:
            values = [v.to(self.device) for v in values]
        return U.td_from_leaves(self._reset_keys, values, self.batch_size, self.device, self._flat)

    def _numpy_stepper(self):
        """The copies' numpy-level group (every copy a plain GymWrapper, outputs on the
        copies' device); None otherwise."""
        self._check_usable()
        return None if self._move_outputs else self._group

    def _set_seed(self, seed: int) -> None:
        self._check_usable()
        for env in self._envs:
            seed = env.set_seed(seed)

    # -- state (checkpoints) -----------------------------------------------------------
    def state_dict(self) -> dict:
        """The state of each copy (its ``state_dict()``), in order.

        Example:
            >>> from torchrl_lite.envs import PendulumEnv, SerialEnv
            >>> env = SerialEnv(2, PendulumEnv)
            >>> state = env.state_dict()
            >>> state["kind"], len(state["envs"])
            ('serial', 2)
            >>> env.load_state_dict(state)
            >>> env.close()
        """
        return {"kind": "serial", "envs": [env.state_dict() for env in self._envs]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned, into an env built the same way."""
        self._check_state_kind(state_dict, "serial")
        if len(self._envs) != len(state_dict["envs"]):
            raise ValueError(
                f"the checkpoint holds {len(state_dict['envs'])} SerialEnv copies, this env has "
                f"{len(self._envs)}; build the env as it was built when saved."
            )
        for env, env_state in zip(self._envs, state_dict["envs"]):
            env.load_state_dict(env_state)


def _given(env: EnvBase) -> EnvBase:
    return env


def _copies_mask(env, copies: list[int], mask: torch.Tensor | None) -> torch.Tensor:
    """The ``[n, *env_batch, 1]`` reset mask of ``env`` that resets ``copies`` (where
    ``mask``, the view's ``[len(copies), *env_batch, 1]`` mask, is set; all of them when
    None) and no other copy."""
    full = torch.zeros((*env.batch_size, 1), dtype=torch.bool)
    full[copies] = True if mask is None else mask.to("cpu", torch.bool).reshape(full[copies].shape)
    return full


def _call_each(methods: list, *args, **kwargs) -> list:
    return [method(*args, **kwargs) for method in methods]


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
            where the platform has it (Linux) and CUDA is not initialised in this process,
            else ``"spawn"``. Pass ``"spawn"`` if ``create_env_fn`` is not fork-safe (it
            uses state of this process that forking breaks, e.g. an OpenGL context).
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
        self._conns: list = []
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

    def _reset_workers_state(self) -> None:
        self._procs, self._conns, self._channels = [], [], []
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
                group = [W.CloudPickled(f) for f in group]
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            # a forked worker inherits the parent ends of the earlier workers' pipes: it
            # closes them, so that a worker sees EOF as soon as the parent goes away.
            inherited = list(self._conns) if forked else []
            proc = ctx.Process(
                target=W.worker_main,
                args=(child_conn, group, self.num_sub_threads, os.getpid(), inherited),
                name=f"ParallelEnv-worker-{len(self._procs)}",
                daemon=True,
            )
            proc.start()
            child_conn.close()
            self._procs.append(proc)
            self._conns.append(parent_conn)
            if self._finalizer is None:  # stops the workers if the env is dropped or at exit
                self._finalizer = weakref.finalize(
                    self, W.stop_workers, self._procs, self._conns, _JOIN_S
                )
        self._channels = [W.Channel(conn) for conn in self._conns]
        self._poller = W.Poller(self._channels)
        replies = self._wait(list(range(len(self._procs))), "start-up (building the envs)")
        return [info for w in range(len(self._procs)) for info in replies[w]]

    def _connect(self) -> None:
        specs = list(self._single_specs.values())
        cpu = torch.device("cpu")
        self._in_buf = self._buffers(self._input_keys, specs, cpu)
        self._step_buf = self._buffers(self._step_keys, specs, cpu)
        self._reset_buf = self._buffers(self._reset_keys, specs, cpu)
        self._mask_buf = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        for buf in (self._in_buf, self._step_buf, self._reset_buf):
            for tensor in buf.values():
                tensor.share_memory_()
        self._mask_buf.share_memory_()
        self._in_leaves = [self._in_buf[k] for k in self._input_keys]
        self._step_leaves = [self._step_buf[k] for k in self._step_keys]
        self._reset_leaves = [self._reset_buf[k] for k in self._reset_keys]
        for w, (lo, hi) in enumerate(self._groups):
            views = {
                "input": {k: v[lo:hi] for k, v in self._in_buf.items()},
                "step": {k: v[lo:hi] for k, v in self._step_buf.items()},
                "reset": {k: v[lo:hi] for k, v in self._reset_buf.items()},
                "mask": self._mask_buf[lo:hi],
            }
            self._conns[w].send(views)  # shared tensors travel as file descriptors
        self._all = list(range(len(self._conns)))
        self._wait(self._all, "start-up (attaching shared memory)")

    def _shutdown(self, grace: float = _JOIN_S) -> None:
        # detach() returns None once the finalizer has run: the workers are stopped once
        if self._finalizer is not None and self._finalizer.detach() is not None:
            W.stop_workers(self._procs, self._conns, grace)

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the workers."""
        return [p.pid for p in self._procs]

    # -- EnvBase hooks -------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        for key, buf in zip(self._input_keys, self._in_leaves):
            buf.copy_(tensordict.get(key))
        self._step_workers()
        values = [self._export(buf) for buf in self._step_leaves]
        return U.td_from_leaves(self._step_keys, values, self.batch_size, self.device)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        self._reset_workers(tensordict.get(K.RESET, None) if tensordict is not None else None)
        values = [self._export(buf) for buf in self._reset_leaves]
        return U.td_from_leaves(self._reset_keys, values, self.batch_size, self.device)

    # -- the copies of an indexed view (see _batched_view.py) ---------------------------
    def _step_copies(self, copies: list[int], tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        for key, buf in zip(self._input_keys, self._in_leaves):
            buf[copies] = tensordict.get(key).to(buf.device)
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

    def _command_copies(self, command: bytes, copies: list[int], payload, what: str) -> None:
        """Send ``command + pickle(payload(local))`` to each worker holding some of
        ``copies``, ``local`` being ``[(position in the worker, copy)]``."""
        for w, (lo, hi) in enumerate(self._groups):
            local = [(i - lo, i) for i in copies if lo <= i < hi]
            if local:
                self._command(command + pickle.dumps(payload(local)), [w], what)

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
        """Steps through the shared buffers (``stepper/parallel.py``), or None."""
        self._check_usable()
        return ParallelStepper.build(self, W.STEP, W.STEP_RESET)

    def _set_seed(self, seed: int) -> None:
        self._check_usable()
        per_copy = max(1, self._env_batch.numel())
        for w, (lo, _hi) in enumerate(self._groups):
            self._command(W.SEED + pickle.dumps(seed + lo * per_copy), [w], "set_seed")

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
