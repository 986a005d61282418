"""The one error reply: a worker's exception described so that it pickles, and rebuilt in
the parent with the worker's traceback in its message.

Every worker (a ParallelEnv worker, a multiprocess collector's worker, a Ray or channel
collection worker) answers a failed command with an :class:`ErrorReply`; the parent
turns it into an exception with :func:`remote_error` (or its own message, reading the
reply's ``type``, ``message`` and ``traceback``).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

__all__ = ["ErrorReply", "RemoteError", "RemoteKeyError", "error_info", "remote_error"]


@dataclass(frozen=True)
class ErrorReply:
    """A worker's exception: its type name, message and formatted traceback.

    Read as attributes or as ``reply["type"]`` (the keys of the dict it replaced).

    Example:
        >>> reply = ErrorReply.of(ValueError("bad seed"))
        >>> reply.type, reply["message"]
        ('ValueError', 'bad seed')
    """

    type: str
    message: str
    traceback: str

    @classmethod
    def of(cls, err: BaseException) -> ErrorReply:
        """The reply for ``err`` (a KeyError's message unquoted)."""
        message = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
        return cls(type(err).__name__, message, "".join(traceback.format_exception(err)))

    def __getitem__(self, key: str) -> str:
        if key not in ("type", "message", "traceback"):
            raise KeyError(f"ErrorReply has type, message and traceback, not {key!r}")
        return getattr(self, key)


def error_info(err: BaseException) -> ErrorReply:
    """The :class:`ErrorReply` of ``err`` (the name callers have used)."""
    return ErrorReply.of(err)


class RemoteError(RuntimeError):
    """An exception raised inside a worker's command; ``info`` is its :class:`ErrorReply`."""

    def __init__(self, info: ErrorReply):
        super().__init__(f"{info['type']}: {info['message']}")
        self.info = info


class RemoteKeyError(KeyError):
    """A worker's KeyError, printed as its message (KeyError would print it quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# exception types rebuilt as themselves in the parent (their constructor takes a message)
_REBUILT = {
    cls.__name__: cls
    for cls in (ValueError, TypeError, RuntimeError, NotImplementedError, IndexError)
}
_REBUILT["KeyError"] = RemoteKeyError


def remote_error(info, where: str, what: str) -> Exception:
    """The exception to raise in the parent for a worker's :class:`ErrorReply`.

    Common built-in types (ValueError, TypeError, KeyError, ...) keep their type so that
    bad input reported by a worker reads as it would in one process; others become
    ``RuntimeError``. The message names the worker and holds its traceback.
    """
    cls = _REBUILT.get(info["type"], RuntimeError)
    return cls(
        f"{where} raised {info['type']}: {info['message']} (during {what}). The other "
        f"workers were shut down.\n\nWorker traceback:\n{info['traceback']}"
    )
