"""Checks that what a worker needs can be sent to it."""

from __future__ import annotations

__all__ = ["check_picklable"]


def check_picklable(named: dict) -> None:
    """TypeError naming the first of ``named`` (name -> object) that cloudpickle cannot
    serialise, so that a factory fails here rather than inside a Ray worker.

    Example:
        >>> import threading
        >>> check_picklable({"env_factory": threading.Lock()})
        Traceback (most recent call last):
        ...
        TypeError: env_factory cannot be pickled, so it cannot be sent to a Ray worker (TypeError: cannot pickle '_thread.lock' object). Build live objects (envs, locks, open files) inside the factory instead of capturing them.
    """
    import cloudpickle

    for name, obj in named.items():
        try:
            cloudpickle.dumps(obj)
        except Exception as err:
            raise TypeError(
                f"{name} cannot be pickled, so it cannot be sent to a Ray worker "
                f"({type(err).__name__}: {err}). Build live objects (envs, locks, open "
                f"files) inside the factory instead of capturing them."
            ) from err
