"""TorchRL's profiling helpers: the ``timeit`` registry and ``compile_with_warmup``.

TorchRL's example scripts import both from ``torchrl._utils``; ours re-exports them
there. ``timeit`` keeps one class-level registry, ``name -> [mean seconds per call,
total seconds, calls]``, filled by the context manager or the decorator and read with
``todict``/``print``; ``erase``/``reset`` zero it.
"""

from __future__ import annotations

import functools
import logging
import time

logger = logging.getLogger("torchrl_lite")


class timeit:
    """Time a block or a function under ``name``; the totals are kept per name.

    Args:
        name: the registry entry the elapsed time is added to.

    Example:
        >>> with timeit("step"):
        ...     _ = sum(range(10))
        >>> timeit.todict(percall=False)["step"] >= 0.0
        True
        >>> timeit.erase()
    """

    _REG: dict[str, list] = {}
    _MARKS: dict[str, float] = {}
    _printevery_count = 0

    def __init__(self, name: str):
        self.name = name
        self.t0 = None

    def __call__(self, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return timed

    def start(self) -> timeit:
        """Start without a ``with`` block; returns self (``timeit("x").start()``)."""
        self.t0 = time.perf_counter()
        return self

    __enter__ = start

    def elapsed(self) -> float:
        """Seconds since the timer started."""
        if self.t0 is None:
            raise RuntimeError(f"timeit({self.name!r}) was never started: use it in `with`")
        return time.perf_counter() - self.t0

    def __exit__(self, *exc) -> None:
        self._record(self.name, self.elapsed())

    @classmethod
    def _record(cls, name: str, seconds: float) -> None:
        entry = cls._REG.setdefault(name, [0.0, 0.0, 0])
        entry[1] += seconds
        entry[2] += 1
        entry[0] = entry[1] / entry[2]

    @classmethod
    def mark_start(cls, name: str) -> None:
        """Open a named interval closed later by ``mark_end(name)``."""
        cls._MARKS[name] = time.perf_counter()

    @classmethod
    def mark_end(cls, name: str) -> None:
        """Close the interval ``mark_start(name)`` opened and record it."""
        if name not in cls._MARKS:
            raise KeyError(f"timeit.mark_end({name!r}) without a mark_start({name!r})")
        cls._record(name, time.perf_counter() - cls._MARKS.pop(name))

    @classmethod
    def todict(cls, percall: bool = True, prefix: str | None = None) -> dict[str, float]:
        """``{name: seconds per call}`` (or total seconds), keys as ``prefix/name``."""
        col = 0 if percall else 1
        return {(f"{prefix}/{k}" if prefix else k): v[col] for k, v in cls._REG.items()}

    @classmethod
    def print(cls, prefix: str | None = None) -> str:
        """Log one line per timer (mean and total since the last reset); returns them."""
        lines = []
        for name in sorted(cls._REG):
            mean, total, _ = cls._REG[name]
            line = (
                f"{name} took {mean * 1000:4.4f} msec (total = {total:4.4f} sec since last reset)."
            )
            lines.append(f"{prefix} -- {line}" if prefix else line)
            logger.info(lines[-1])
        return "\n".join(lines)

    @classmethod
    def printevery(
        cls, num_prints: int, total_count: int, *, prefix: str | None = None, erase: bool = False
    ) -> None:
        """Call once per iteration: prints ``num_prints`` times over ``total_count`` calls."""
        interval = max(1, int(total_count) // max(1, int(num_prints)))
        if cls._printevery_count % interval == 0:
            cls.print(prefix=prefix)
            if erase:
                cls.erase()
        cls._printevery_count += 1

    @classmethod
    def erase(cls) -> None:
        """Zero every timer (the names stay)."""
        for name in cls._REG:
            cls._REG[name] = [0.0, 0.0, 0]

    reset = erase


def compile_with_warmup(*args, warmup: int = 1, **kwargs):
    """``torch.compile(model, **kwargs)`` after ``warmup`` eager calls.

    The first ``warmup`` calls run ``model`` as it is (buffers and lazy modules settle),
    later ones the compiled version. Without a model, returns a decorator.

    Example:
        >>> import torch
        >>> f = compile_with_warmup(torch.nn.Linear(2, 1), warmup=10)
        >>> f(torch.zeros(1, 2)).shape
        torch.Size([1, 1])
    """
    model = args[0] if args else kwargs.pop("model", None)
    if model is None:
        return lambda m: compile_with_warmup(m, warmup=warmup, **kwargs)
    calls = 0
    current = model

    @functools.wraps(model)
    def run(*a, **kw):
        nonlocal calls, current
        if calls == warmup:
            import torch

            current = torch.compile(model, **kwargs)
        calls += 1
        return current(*a, **kw)

    return run
