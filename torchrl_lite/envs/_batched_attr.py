"""The parent's side of the ``ATTR`` worker command: ``ParallelEnv.__getattr__``.

An attribute a ``ParallelEnv`` lacks is read from its copies in the worker processes
(see ``_batched_worker._attr`` for the worker's side): values come back pickled, one per
copy; a method becomes a function that calls it on every copy.
"""

from __future__ import annotations

import pickle

from torchrl_lite.envs._batched_worker import ATTR


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
    replies = env._command(ATTR + pickle.dumps(request), env._all, what)
    out = [item for w in env._all for item in replies[w]]
    for kind, value in out:
        if kind == "error":
            error = AttributeError if value["type"] == "AttributeError" else RuntimeError
            raise error(
                f"ParallelEnv: {what} on the copies raised {value['type']}: "
                f"{value['message']}\n\nWorker traceback:\n{value['traceback']}"
            )
    return out
