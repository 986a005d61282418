"""How a ``ParallelEnv`` talks to its worker processes: one command per worker, the
replies awaited while checking that the workers are alive, and a worker's failure
turned into an error with its traceback after every worker is shut down."""

from __future__ import annotations

import pickle

from torchrl_lite._mp import death_message
from torchrl_lite.envs import _batched_worker as W

_POLL_S = 0.2  # how often a parent waiting on a worker checks that the worker is alive
_JOIN_S = 3.0  # how long close() waits for workers to exit before terminating them
_FAIL_GRACE_S = 1.0  # the same after a worker failed (the others may be mid-step)


class _WorkerChannels:
    """``ParallelEnv``'s side of the pipes (``_channels``, ``_procs``, ``_groups``)."""

    def _command(self, command: bytes, workers: list[int], what: str) -> dict:
        """Send ``command`` to ``workers`` and wait for their replies (see ``_wait``)."""
        sent = []
        try:
            for w in workers:
                try:
                    self._channels[w].send(command)
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
            poller = W.Poller([self._channels[w] for w in workers])
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
            message = self._channels[w].recv()
        except (EOFError, OSError):
            self._fail(self._death_message(w, what))
        if not message:
            return None
        tag, payload = message[:1], pickle.loads(message[1:])
        if tag == W.ERROR:
            self._fail(self._error_message(w, what, payload))
        return payload

    def _drain(self, pending: list[int]) -> None:
        """After an interrupt: read the replies still due; shut down if that fails or if
        a worker failed."""
        try:
            for w in pending:
                if not W.Poller([self._channels[w]]).ready(_JOIN_S):
                    raise TimeoutError(f"{self._where(w)} did not reply")
                if self._channels[w].recv()[:1] == W.ERROR:
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

    def _error_message(self, w: int, what: str, error: dict) -> str:
        return (
            f"{self._where(w)} raised {error['type']}: {error['message']} during {what}. "
            f"The other workers were shut down.\n\nWorker traceback:\n{error['traceback']}"
        )
