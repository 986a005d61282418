"""The ParallelEnv worker process: a plain ``SerialEnv`` loop driven by one-byte commands.

The worker speaks the workers' one protocol (``workers/channel.py``: a tag byte and an
optional pickled payload per message) with the tags below; a per-step command is one
byte each way and nothing is pickled per step:

* start: the worker builds its copies and replies ``OK [_EnvInfo, ...]``; the parent
  checks the specs and sends ``ATTACH`` with the worker's views of the shared-memory
  buffers (torch passes shared tensors as file descriptors); the worker replies ``OK``.
* ``STEP``: step with the actions in the shared input buffer, write the results into the
  shared step buffer, reply ``OK``.
* ``RESET``: reset the copies set in the shared ``"_reset"`` mask, write their first
  observations into the shared reset buffer, reply ``OK``.
* ``STEP_RESET``: ``STEP``, then copy the step's ``"done"`` into the ``"_reset"`` mask and
  ``RESET`` those copies (``ParallelEnv.step_and_maybe_reset``: one message, not two).
* ``SEED seed``: ``set_seed(seed)``, reply ``OK``.
* ``STEP_SOME [k, ...]`` and ``SEED_SOME [(k, seed), ...]``: step (or seed) only the
  worker's copies ``k`` (an indexed view of the env, ``env[1:]``).
* ``ATTR (name, call)``: per copy, read attribute ``name`` (``call`` None) or call it with
  ``call = (args, kwargs)``; reply ``OK [(kind, value), ...]`` (kind ``"method"`` with
  value None when reading a method).
* ``CLOSE``: close the copies, reply ``OK`` and exit.

Any exception becomes an ``ERROR`` reply. Factories, the parent check and stopping come
from ``torchrl_lite.workers``. The worker ignores SIGINT (the parent decides when to stop)
and exits when its pipe reaches EOF or its parent process goes away.
"""

from __future__ import annotations

import pickle
import signal

import torch

from torchrl_lite import _keys as K
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.batched.serial import SerialEnv
from torchrl_lite.workers.channel import OK, PipeChannel, Poller
from torchrl_lite.workers.errors import ErrorReply
from torchrl_lite.workers.process import CloudPickled, parent_alive, stop_processes

STEP, RESET, STEP_RESET, SEED, CLOSE, ATTR = b"s", b"r", b"x", b"e", b"c", b"a"
STEP_SOME, SEED_SOME, ATTACH = b"p", b"d", b"v"
_IDLE_S = 1.0  # how often an idle worker checks that its parent is alive


def worker_main(conn, factories: list, num_threads: int, parent_pid: int, inherited: list):
    """Entry point of a worker process (see the module docstring for the protocol)."""
    for other in inherited:  # parent ends of other workers' pipes, inherited through fork
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(num_threads)
    channel = PipeChannel(conn)
    envs = []
    try:
        try:
            for factory in factories:
                envs.append(factory.load()() if isinstance(factory, CloudPickled) else factory())
            channel.send(OK, [U.env_info(env) for env in envs])
            _attach, views = channel.recv()
            if isinstance(views, list):  # buffers per copy: copies of different specs
                loop = _CopiesLoop(envs, views)
            else:
                loop = _Loop(SerialEnv._from_envs(envs), views)
            channel.send(OK)
        except Exception as err:
            channel.send_error(err)
            return
        _serve(channel, loop, parent_pid)
    except (OSError, EOFError):  # the parent is gone
        return
    finally:
        for env in envs:
            try:
                if not env.is_closed:
                    env.close()
            except Exception:
                pass


class _Loop:
    """The worker's ``SerialEnv`` bound to its views of the shared buffers.

    When the copies are plain GymWrappers (``serial._group``), their gymnasium results
    are written straight into numpy views of the shared buffers; otherwise each copy's
    ``_step``/``_reset`` leaves are copied into its rows.
    """

    def __init__(self, serial, views: dict):
        k = len(serial._envs)
        self.serial, self.group = serial, serial._group
        if self.group is not None:
            self.action = views["input"][K.ACTION]
            self.step_out = [views["step"][key].numpy() for key in serial._step_keys]
            self.reset_out = [views["reset"][key].numpy() for key in serial._reset_keys]
            self.mask_np = views["mask"].numpy()
            self.done_np = views["step"][K.DONE].numpy()
        self.rows = U.rows([views["input"][key] for key in serial._input_keys], k)
        # the policy's ("next", state) entries, passed where flagged (see _with_next)
        self.next_flags = views.get("next_flags")
        if self.next_flags is not None and len(self.next_flags):
            self.next_rows = U.rows([views["next"][key] for key in serial._state_leaves], k)
        else:
            self.next_flags = None
        self.step_rows = U.rows([views["step"][key] for key in serial._step_keys], k)
        self.reset_rows = U.rows([views["reset"][key] for key in serial._reset_keys], k)
        self.mask, self.done = views["mask"], views["step"].get(K.DONE)

    def step_some(self, copies: list[int]) -> None:
        """Step only ``copies`` (positions among the worker's copies), one by one."""
        rows, out = [self.rows[k] for k in copies], [self.step_rows[k] for k in copies]
        rows, keys = self._with_next(rows, copies)
        self.serial._step_into(rows, out, copies=copies, keys=keys)

    def _with_next(self, rows: list, copies=None) -> tuple[list, list | None]:
        """``rows`` with the flagged ``("next", state)`` entries appended, and their keys
        (None: the input keys alone)."""
        if self.next_flags is None or not bool(self.next_flags.any()):
            return rows, None
        present = self.next_flags.tolist()
        serial = self.serial
        keys = serial._input_keys + [k for k, p in zip(serial._next_state_keys, present) if p]
        nxt = self.next_rows if copies is None else [self.next_rows[k] for k in copies]
        rows = [row + [v for v, p in zip(extra, present) if p] for row, extra in zip(rows, nxt)]
        return rows, keys

    def step(self) -> None:
        if self.group is not None:
            self.group.step(self.action, self.step_out)
        else:
            rows, keys = self._with_next(self.rows)
            self.serial._step_into(rows, self.step_rows, keys=keys)

    def reset(self) -> None:
        """Reset the copies set in the shared ``"_reset"`` mask."""
        if self.group is not None:
            self.group.reset(U.chosen(self.mask, len(self.serial._envs)), self.reset_out)
        else:
            self.serial._reset_into(self.mask, self.reset_rows)

    def step_reset(self) -> None:
        """Step, then reset the copies that are done (the mask is set to ``"done"``)."""
        self.step()
        if self.group is not None:  # numpy: a fraction of the cost of the torch calls
            self.mask_np[...] = self.done_np
            any_done = self.mask_np.any()
        else:
            self.mask.copy_(self.done)
            any_done = bool(self.mask.any())
        if any_done:
            self.reset()


class _CopiesLoop:
    """The worker loop of a ParallelEnv whose copies differ in specs (``lazy.py``):
    each copy has its own shared buffers (``[1, *env_batch, ...]``, from its own specs)
    and its own one-copy ``_Loop``; ``serial`` (all the worker's copies) seeds and closes."""

    def __init__(self, envs: list, views: list):
        self.serial = SerialEnv._from_envs(envs)
        self.loops = [_Loop(SerialEnv._from_envs([env]), v) for env, v in zip(envs, views)]

    def step(self) -> None:
        for loop in self.loops:
            loop.step()

    def reset(self) -> None:
        for loop in self.loops:
            loop.reset()

    def step_reset(self) -> None:
        for loop in self.loops:
            loop.step_reset()


def _serve(channel, loop: _Loop, parent_pid: int) -> None:
    poller = Poller([channel])
    while True:
        while not poller.ready(_IDLE_S):
            if not parent_alive(parent_pid):
                return
        command, payload = channel.recv()
        try:
            if command == STEP:
                loop.step()
            elif command == STEP_RESET:
                loop.step_reset()
            elif command == RESET:
                loop.reset()
            elif command == SEED:
                loop.serial.set_seed(payload)
            elif command == STEP_SOME:
                loop.step_some(payload)
            elif command == SEED_SOME:
                for k, seed in payload:
                    loop.serial._envs[k].set_seed(seed)
            elif command == ATTR:
                channel.send(OK, _attr(loop.serial._envs, payload))
                continue
            elif command == CLOSE:
                loop.serial.close()
                channel.send(OK)
                return
            else:
                raise ValueError(f"unknown command {command!r}")
        except Exception as err:
            channel.send_error(err)
            continue
        channel.send(OK)


def _attr(envs: list, request: tuple) -> list:
    """Per copy, ``(kind, value)`` of an attribute read or method call (see ``ATTR``); a
    failure (a missing attribute, a raising method, a value that does not pickle) is
    ``[("error", ErrorReply)]``: the copies stay usable."""
    name, call = request
    try:
        out = []
        for env in envs:
            value = getattr(env, name)
            if call is not None:
                out.append(("value", value(*call[0], **call[1])))
            elif callable(value):
                out.append(("method", None))
            else:
                out.append(("value", value))
        pickle.dumps(out)  # a value that does not pickle fails here, not in the reply
        return out
    except Exception as err:
        return [("error", ErrorReply.of(err))]


def stop_workers(procs: list, channels: list, grace: float) -> None:
    """Ask each worker to close, join them, terminate (then kill) the ones that linger."""
    stop_processes(procs, channels, CLOSE, grace)
