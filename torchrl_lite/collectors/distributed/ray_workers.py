"""WorkerGroup: N Ray actors of one class, started, watched, restarted and stopped together.

The fault handling shared by ``RayCollector`` and the Scheme's collection and gradient
workers lives here:

* ``start()`` builds every actor and waits for each to answer ``ping``; an error while a
  worker builds its components (e.g. an env factory that raises) is raised at once, with
  the worker's traceback: restarting would fail the same way.
* A worker that dies later (SIGKILL, an exception in a call, its node lost) is replaced by
  a new actor (``args_for(index, restarts)``: the caller decides seeds); the new one joins
  once it answers ``ping``, and the caller sends it the current weights with its next call.
  Meanwhile ``gather``/``first`` return the healthy workers' results. Past ``max_restarts``
  restarts of one worker, every worker is stopped and a ``RuntimeError`` names the worker
  and holds its last traceback.
* Nothing answering within ``timeout`` seconds stops every worker and raises
  ``TimeoutError`` naming the silent ones: never a silent hang.
* ``channel="auto"``: a worker whose class has ``open_channel`` (``RolloutWorker``) and
  that runs on the driver's Ray node gets a shared-memory channel (``channel.py``) once it
  answers ``ping``, and ``call(i, "collect", ...)`` goes through it instead of a Ray call;
  workers on other nodes, and every other method, use Ray calls. ``wait``/``gather``/
  ``first`` take both kinds of call. A channel that closes (the worker died) fails the
  call, and the worker is restarted as above with a new channel.
* ``check_resources`` (``ray_session.py``) compares what the groups request with
  ``ray.cluster_resources()`` before any actor starts, so an over-subscribed cluster fails
  with the option to change; a started group registers there with its ``owner``, so that
  a later one short of CPUs names the live object holding them.
* ``shutdown()`` (also the finaliser's) kills the actors only while a Ray session runs
  (``running_ray``): it never starts one, never waits and never raises. A group that is
  no longer referenced shuts down by itself.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable

from torchrl_lite.collectors.distributed.channel import (
    ChannelCall,
    CollectChannel,
    channel_supported,
    check_channel,
    wait_calls,
)
from torchrl_lite.collectors.distributed.ray_session import (
    ray_resources,
    register,
    running_ray,
    unregister,
)
from torchrl_lite.collectors.distributed.transport import packed_message
from torchrl_lite.workers.errors import ErrorReply, remote_error

__all__ = ["WorkerGroup"]

_LAST_LINE = re.compile(r"^(\w+(?:\.\w+)*): (.*)$")


def _error_info(err: BaseException) -> ErrorReply:
    """The :class:`ErrorReply` of a Ray error: the worker's own exception (a task's
    ``cause``; for a failed ``__init__``, the last line of Ray's traceback text)."""
    info = getattr(err, "info", None)  # a channel's RemoteError: the worker's own
    if isinstance(info, ErrorReply):
        return info
    text = str(err)
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        message = str(cause.args[0]) if isinstance(cause, KeyError) and cause.args else str(cause)
        return ErrorReply(type(cause).__name__, message, text)
    if getattr(err, "actor_init_failed", False):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        match = _LAST_LINE.match(lines[-1].strip()) if lines else None
        if match:
            name = match.group(1).rsplit(".", 1)[-1]
            return ErrorReply(name, match.group(2), text)
    return ErrorReply(type(err).__name__, text.split("\n")[0], text)


class WorkerGroup:
    """Ray actors of class ``cls``, one per index, with restarts and timeouts.

    Args:
        name: how the workers are named in messages (``"collection worker"``).
        cls: the worker class (wrapped with ``ray.remote`` here).
        args_for: ``args_for(index, restarts) -> (args, kwargs)`` for the constructor.
        count: number of workers.
        resources: actor options (``{"num_cpus": 1}``; ``num_gpus``, ``memory``,
            ``resources``), see ``ray.remote``; or a list of them, one per worker.
        max_restarts: restarts allowed per worker before the group gives up.
        timeout: seconds a call may take before ``TimeoutError``.
        on_event: ``on_event(message)`` for each death and restart (e.g. the Learner's log).
        max_concurrency: actor threads (2 lets ``preempt`` reach a running ``collect``).
        suffix: appended to each worker's label (``" of gradient worker 1"``).
        restart_option: the user's name of ``max_restarts`` (for the error message).
        start_timeout: seconds the workers may take to start (import torch, build envs).
        channel: ``"auto"`` (a shared-memory channel to each worker on the driver's node
            whose class has ``open_channel``) or ``"ray"`` (Ray calls only).
        owner: who holds the workers and how to close it, for the message of a later
            group short of resources (``"a RayCollector ... built at x.py:3 (close it
            with collector.shutdown())"``).

    Example (needs a running Ray):
        >>> group = WorkerGroup("worker", object, lambda i, r: ((), {}), count=1,
        ...     resources={"num_cpus": 1})
        >>> group.count
        1
    """

    def __init__(  # noqa: PLR0913 (internal: every keyword has a default its callers override by name)
        self,
        name: str,
        cls,
        args_for: Callable,
        count: int,
        resources: dict,
        max_restarts: int = 3,
        timeout: float = 300.0,
        on_event: Callable | None = None,
        max_concurrency: int = 1,
        suffix: str = "",
        restart_option: str = "max_restarts",
        start_timeout: float = 600.0,
        channel: str = "ray",
        owner: str = "",
    ):
        self.owner = owner or f"a WorkerGroup of {count} {name}s"
        self.channel = check_channel("channel", channel)
        self.channels: list[CollectChannel | None] = [None] * count
        self._channel_weights = (None, None)  # (weights message, its Packed form)
        self.start_timeout = float(start_timeout)
        self.suffix, self.restart_option = suffix, restart_option
        self.name, self.cls, self.args_for, self.count = name, cls, args_for, count
        per_worker = resources if isinstance(resources, (list, tuple)) else [resources] * count
        if len(per_worker) != count:
            raise ValueError(
                f"{len(per_worker)} resource dicts for {count} {name}s: give one each."
            )
        self.per_worker = [dict(r) for r in per_worker]
        self.resources = self.per_worker if isinstance(resources, (list, tuple)) else per_worker[0]
        self.max_restarts, self.timeout = int(max_restarts), float(timeout)
        self.on_event = on_event or (lambda message: None)
        self.max_concurrency = max_concurrency
        self.actors: list = [None] * count
        self.ready_flags = [False] * count
        self.restarts = [0] * count
        self.last_traceback: list[str | None] = [None] * count
        self._starting: dict = {}  # ping ref -> index
        self._remote = None
        self._held: dict[int, tuple] = {}  # index -> (weights version, restarts) it holds

    # -- life cycle ---------------------------------------------------------------------
    def label(self, index: int) -> str:
        return f"{self.name} {index}{self.suffix}"

    def _new_actor(self, index: int):
        import ray

        if self._remote is None:
            self._remote = ray.remote(self.cls)
        args, kwargs = self.args_for(index, self.restarts[index])
        options = {k: v for k, v in self.per_worker[index].items() if v is not None}
        options.update(max_restarts=0, max_concurrency=self.max_concurrency)
        actor = self._remote.options(**options).remote(*args, **kwargs)
        self.actors[index] = actor
        self.ready_flags[index] = False
        self._starting[actor.ping.remote()] = index

    def start(self) -> None:
        """Start every worker and wait for all to answer (errors raised with tracebacks)."""
        import ray

        held: dict[str, float] = {}
        for resources in self.per_worker:
            for key, value in ray_resources("resources", resources).items():
                held[key] = held.get(key, 0) + value
        register(self, self.owner, held)
        for index in range(self.count):
            self._new_actor(index)
        refs = list(self._starting)
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=self.start_timeout)
        if pending:
            silent = [self.label(self._starting[r]) for r in pending]
            self.shutdown()
            raise TimeoutError(
                f"{', '.join(silent)} did not start within {self.start_timeout:g}s (the "
                f"cluster may lack the resources {self.resources} per worker, or building the "
                f"components hangs). Raise the timeout or check `ray status`."
            )
        for ref in done:
            index = self._starting.pop(ref)
            try:
                ray.get(ref)
            except Exception as err:
                self.shutdown()
                raise remote_error(
                    _error_info(err), self.label(index), "start-up (building its components)"
                ) from None
        self._open_channels(range(self.count))
        for index in range(self.count):
            self.ready_flags[index] = True

    def _open_channels(self, indices) -> None:
        """A channel to each of ``indices`` that runs on the driver's node (``"auto"``)."""
        import ray

        indices = list(indices)
        if self.channel != "auto" or not hasattr(self.cls, "open_channel") or not indices:
            return
        if not channel_supported():
            return
        node = ray.get_runtime_context().get_node_id()
        refs = {i: self.actors[i].open_channel.remote(node) for i in indices}
        for index, ref in refs.items():
            try:
                opened = ray.get(ref, timeout=self.start_timeout)
                if opened is not None:
                    self.channels[index] = CollectChannel(*opened, label=self.label(index))
            except Exception as err:  # Ray calls still work: use them
                self.on_event(
                    f"{self.label(index)}: no shared-memory channel ({type(err).__name__}: "
                    f"{err}); using Ray calls"
                )

    def _close_channel(self, index: int) -> None:
        if self.channels[index] is not None:
            self.channels[index].close()
            self.channels[index] = None

    def ready(self) -> list[int]:
        """Indices of the workers that answer now (restarted ones join once they do)."""
        self._poll_starting(0.0)
        return [i for i in range(self.count) if self.ready_flags[i]]

    def wait_ready(self, timeout: float | None = None) -> list[int]:
        """``ready()``, waiting (up to ``timeout``) for at least one worker to be ready."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while not self.ready():
            left = deadline - time.monotonic()
            if left <= 0:
                self.shutdown()
                raise TimeoutError(
                    f"no {self.name} answered within {self.start_timeout:g}s (restarted workers "
                    f"could not start: is a node lost or the cluster full?)."
                )
            self._poll_starting(min(left, 1.0))
        return self.ready()

    def _poll_starting(self, timeout: float) -> None:
        import ray

        if not self._starting:
            return
        refs = list(self._starting)
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for ref in done:
            index = self._starting.pop(ref)
            try:
                ray.get(ref)
            except Exception as err:
                self.fail(index, err)
                continue
            self._open_channels([index])
            self.ready_flags[index] = True
            self.on_event(f"{self.label(index)} restarted and rejoined")

    def fail(self, index: int, err: BaseException) -> None:
        """Record ``err`` for worker ``index``; restart it, or raise past the restart cap."""
        import ray

        info = _error_info(err)
        self.last_traceback[index] = info["traceback"]
        self.ready_flags[index] = False
        self._close_channel(index)
        try:
            ray.kill(self.actors[index], no_restart=True)
        except Exception:  # already gone
            pass
        if self.restarts[index] >= self.max_restarts:
            self.shutdown()
            raise RuntimeError(
                f"{self.label(index)} failed {self.restarts[index] + 1} times, past the "
                f"restart cap {self.restart_option}={self.max_restarts}; the other workers were shut "
                f"down. Its last error: {info['type']}: {info['message']}\n\nWorker "
                f"traceback:\n{info['traceback']}"
            )
        self.restarts[index] += 1
        self.on_event(
            f"{self.label(index)} failed ({info['type']}: {info['message']}); restart "
            f"{self.restarts[index]}/{self.max_restarts}"
        )
        self._new_actor(index)

    def shutdown(self) -> None:
        """Kill every actor (idempotent). Safe in a finaliser: only while a Ray session runs
        (after ``ray.shutdown()`` the actors are gone with it), without waiting, never
        raising."""
        for index in range(self.count):
            with contextlib.suppress(Exception):
                self._close_channel(index)
        ray = running_ray()
        for index, actor in enumerate(self.actors):
            if actor is not None and ray is not None:
                with contextlib.suppress(Exception):  # already gone
                    ray.kill(actor, no_restart=True)
            self.actors[index] = None
        self.ready_flags = [False] * self.count
        self._starting.clear()
        unregister(self)

    def __del__(self):
        with contextlib.suppress(BaseException):
            self.shutdown()

    @property
    def alive(self) -> int:
        return sum(self.ready_flags)

    # -- weights ------------------------------------------------------------------------
    def needs_weights(self, index: int, version) -> bool:
        """True if worker ``index`` does not hold weights ``version`` yet, which it then
        holds (the caller sends them with its next call); a restarted worker holds none."""
        held = (version, self.restarts[index])
        if self._held.get(index) == held:
            return False
        self._held[index] = held
        return True

    def forget_weights(self) -> None:
        """Every worker needs the weights again (e.g. after their states were reloaded)."""
        self._held.clear()

    # -- calls --------------------------------------------------------------------------
    def call(self, index: int, method: str, *args, **kwargs):
        """Submit ``worker.method(*args)``: a ``ChannelCall`` for ``collect`` on a worker
        with a channel, else the ObjectRef of a Ray call."""
        channel = self.channels[index]
        if channel is not None and method == "collect":
            args = list(args)
            if args and args[0] is not None:
                args[0] = self._packed_weights(args[0])
            return channel.submit(*args, **kwargs)
        return getattr(self.actors[index], method).remote(*args, **kwargs)

    def _packed_weights(self, message):
        """The ``Packed`` weights of a ``transport.weights_message`` (made once per message:
        every channel of this version reuses it), or the message if they are not packed."""
        held, packed = self._channel_weights
        if held is not message:
            packed = packed_message(message)
            packed = message if packed is None else packed
            self._channel_weights = (message, packed)
        return packed

    def wait(self, calls: list, num_returns: int | None = None, timeout: float | None = None):
        """``(done, pending)`` once ``num_returns`` (default: all) of ``calls`` (ObjectRefs
        and ``ChannelCall``s) have answered or ``timeout`` seconds passed; in the
        order of ``calls``."""
        import ray

        num = len(calls) if num_returns is None else num_returns
        channel_calls = [c for c in calls if type(c) is ChannelCall]
        if not channel_calls:
            return ray.wait(list(calls), num_returns=num, timeout=timeout)
        refs = [c for c in calls if type(c) is not ChannelCall]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ready = {c for c in channel_calls if c.ready()}
            if refs:
                ready.update(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
            left = None if deadline is None else deadline - time.monotonic()
            if len(ready) >= num or (left is not None and left <= 0):
                break
            waiting = [c for c in channel_calls if c not in ready]
            waiting_refs = [r for r in refs if r not in ready]
            if not waiting:  # only Ray calls left
                ray.wait(waiting_refs, num_returns=num - len(ready), timeout=left)
            elif not waiting_refs:
                wait_calls(waiting, left)
            else:  # both kinds: poll each in turn (workers on other nodes)
                step = 0.001 if left is None else min(left, 0.001)
                wait_calls(waiting, step)
                ray.wait(waiting_refs, num_returns=1, timeout=step)
        return [c for c in calls if c in ready], [c for c in calls if c not in ready]

    @staticmethod
    def _get(call):
        if type(call) is ChannelCall:
            return call.result()
        import ray

        return ray.get(call)

    def gather(self, refs: dict, timeout: float | None = None) -> dict:
        """``{index: call}`` -> ``{index: result}`` of the workers that succeeded; failed
        ones are restarted (see the module docstring)."""
        if not refs:
            return {}
        timeout = self.timeout if timeout is None else timeout
        by_ref = {call: index for index, call in refs.items()}
        done, pending = self.wait(list(by_ref), timeout=timeout)
        if pending:
            self._timed_out([by_ref[c] for c in pending], timeout)
        out = {}
        for call in done:
            index = by_ref[call]
            try:
                out[index] = self._get(call)
            except Exception as err:
                self.fail(index, err)
        return dict(sorted(out.items()))

    def first(self, refs: dict, timeout: float | None = None):
        """Wait for the first of ``{call: index}`` to finish: ``(index, result)``, or
        ``(index, None)`` if that worker failed (it is then restarting). Removes the call."""
        timeout = self.timeout if timeout is None else timeout
        done, _ = self.wait(list(refs), num_returns=1, timeout=timeout)
        if not done:
            self._timed_out(list(refs.values()), timeout)
        call = done[0]
        index = refs.pop(call)
        try:
            return index, self._get(call)
        except Exception as err:
            self.fail(index, err)
            return index, None

    def _timed_out(self, indices: list[int], timeout: float) -> None:
        self.shutdown()
        names = ", ".join(self.label(i) for i in indices)
        raise TimeoutError(
            f"{names} did not answer within timeout={timeout:g}s (a hung env or policy?); "
            f"every worker was shut down. Raise worker_timeout if a batch legitimately takes "
            f"longer."
        )
