"""TorchRL's gym-backend switch: ``set_gym_backend`` and ``gym_backend``.

torchrl_lite wraps gymnasium only (gym is unmaintained since 2022), so the switch exists
for scripts written for TorchRL: ``"gymnasium"`` (or the module itself) selects it,
``"gym"`` is accepted as a request for the same API and also selects gymnasium, and any
other name is refused with the choices. It works as TorchRL's does: a context manager,
a decorator, or ``set_gym_backend(name).set()`` for the rest of the process.
"""

from __future__ import annotations

import functools
import importlib

_ACCEPTED = ("gymnasium", "gym")
_current = "gymnasium"


def _backend_name(backend) -> str:
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", None)
    if name not in _ACCEPTED:
        raise ValueError(
            f"set_gym_backend({backend!r}): torchrl_lite runs gymnasium environments only; "
            f"pass one of {list(_ACCEPTED)} ('gym' selects gymnasium's API)."
        )
    return "gymnasium"


class set_gym_backend:
    """Select the gym library for ``GymEnv``: a context manager, decorator or ``.set()``.

    Args:
        backend: ``"gymnasium"``, ``"gym"`` (served by gymnasium) or the module.

    Example:
        >>> with set_gym_backend("gymnasium"):
        ...     gym_backend().__name__
        'gymnasium'
    """

    def __init__(self, backend):
        self.backend = _backend_name(backend)
        self._previous = []

    def set(self) -> None:
        """Make the backend current for the rest of the process."""
        global _current
        _current = self.backend

    def __enter__(self):
        self._previous.append(_current)
        self.set()
        return self

    def __exit__(self, *exc) -> None:
        global _current
        _current = self._previous.pop()

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with set_gym_backend(self.backend):
                return fn(*args, **kwargs)

        return run


def gym_backend(submodule: str | None = None):
    """The current gym module (or ``gym_backend("spaces")``: one of its submodules)."""
    name = _current if submodule is None else f"{_current}.{submodule}"
    return importlib.import_module(name)
