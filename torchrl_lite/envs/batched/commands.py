"""How a ``ParallelEnv`` talks to its worker processes (the parent's side of
``worker.py``): one command per worker, the replies awaited while checking that the
workers are alive, and a worker's failure turned into an error with its traceback after
every worker is shut down; ``worker_attr`` reads attributes of the copies (``ATTR``).
"""

from __future__ import annotations

from torchrl_lite.envs.batched.worker import ATTR
from torchrl_lite.workers.channel import ERROR, Poller
from torchrl_lite.workers.process import death_message

_POLL_S = 0.2  # how often a parent waiting on a worker checks that the worker is alive
_JOIN_S = 3.0  # how long close() waits for workers to exit before terminating them
_FAIL_GRACE_S = 1.0  # the same after a worker failed (the others may be mid-step)


class _WorkerChannels:
    """``ParallelEnv``'s side of the pipes (``_channels``, ``_procs``, ``_groups``)."""

    def _command(self, command: bytes, workers: list[int], what: str, *payload) -> dict:
        """Send ``command`` (with ``payload`` if given) to ``workers`` and wait for their
        replies (see ``_wait``)."""
        sent = []
        try:
            for w in workers:
                try:
                    self._channels[w].send(command, *payload)
                except OSError:
                    self._fail(self._death_message(w, what))
                sent.append(w)
        except KeyboardInterrupt:
            self._drain(sent)
            raise
        return self._wait(workers, what)

    def _wait(self, workers: list[int], what: str) -> dict:
        """Wait for one reply from each of ``workers``; return ``{worker: payload}``.

        Raises RuntimeError (after shutting every worker down) as soon as a worker replies
        with an error or dies (one that dies without closing its pipe end is noticed
        within ``_POLL_S`` seconds). After a KeyboardInterrupt the replies still due are
        read, so the env stays usable.
        """
        if len(workers) == len(self._channels):
            poller, workers = self._poller, range(len(self._channels))
        else:
            poller = Poller([self._channels[w] for w in workers])
        pending = set(range(len(workers)))  # indices into ``workers``
        replies, reading = {}, False
        try:
            while pending:
                ready = poller.ready(_POLL_S)
                if not ready:
                    for j in pending:
                        if not self._procs[workers[j]].is_alive():
                            self._fail(self._death_message(workers[j], what))
                for j in ready:
                    if j not in pending:  # readable with nothing due: it died after replying
                        self._fail(self._death_message(workers[j], what))
                    reading = True
                    replies[workers[j]] = self._read_reply(workers[j], what)
                    reading = False
                    pending.discard(j)
        except KeyboardInterrupt:
            if reading:  # a message was cut in the middle: the pipe cannot be trusted
                self._failure = "interrupted while reading a worker's reply"
                self.close()
            else:
                self._drain([workers[j] for j in pending])
            raise
        return replies

    def _read_reply(self, w: int, what: str):
        try:
            tag, payload = self._channels[w].recv()
        except (EOFError, OSError):
            self._fail(self._death_message(w, what))
        if tag == ERROR:
            self._fail(self._error_message(w, what, payload))
        return payload

    def _drain(self, pending: list[int]) -> None:
        """After an interrupt: read the replies still due; shut down if that fails or if
        a worker failed."""
        try:
            for w in pending:
                if not Poller([self._channels[w]]).ready(_JOIN_S):
                    raise TimeoutError(f"{self._where(w)} did not reply")
                if self._channels[w].recv()[0] == ERROR:
                    raise RuntimeError(f"{self._where(w)} failed")
        except BaseException as err:
            self._failure = f"interrupted while waiting for the workers ({err!r})"
            self.close()

    def _fail(self, message: str):
        """Shut every worker down, mark the env closed and raise ``message``."""
        self._failure = message.split("\n", 1)[0]
        self._shutdown(grace=_FAIL_GRACE_S)
        self.close()
        raise RuntimeError(message)

    def _where(self, w: int) -> str:
        lo, hi = self._groups[w]
        copies = f"copy {lo}" if hi - lo == 1 else f"copies {lo}..{hi - 1}"
        return f"ParallelEnv worker {w} (pid {self._procs[w].pid}, {copies})"

    def _death_message(self, w: int, what: str) -> str:
        message = death_message(self._procs[w], self._where(w), what)
        return f"{message} Create a new ParallelEnv to continue."

    def _error_message(self, w: int, what: str, error) -> str:
        return (
            f"{self._where(w)} raised {error['type']}: {error['message']} during {what}. "
            f"The other workers were shut down.\n\nWorker traceback:\n{error['traceback']}"
        )


def worker_attr(env, name: str):
    """Attribute ``name`` of every copy of a ParallelEnv ``env``: a list of values, or a
    function calling the method on every copy (returning the list of results)."""
    replies = _attr_replies(env, (name, None), f"reading {name!r}")
    if all(kind == "method" for kind, _ in replies):

        def call(*args, **kwargs) -> list:
            return [v for _, v in _attr_replies(env, (name, (args, kwargs)), f"{name}()")]

        return call
    return [value for _, value in replies]


def _attr_replies(env, request: tuple, what: str) -> list:
    """``(kind, value)`` per copy, in order; a failure in a worker raises here (an
    AttributeError as such) and leaves the workers running."""
    replies = env._command(ATTR, env._all, what, request)
    out = [item for w in env._all for item in replies[w]]
    for kind, value in out:
        if kind == "error":
            error = AttributeError if value["type"] == "AttributeError" else RuntimeError
            raise error(
                f"ParallelEnv: {what} on the copies raised {value['type']}: "
                f"{value['message']}\n\nWorker traceback:\n{value['traceback']}"
            )
    return out
