"""The numpy stepper: an env stepped at the numpy level, into buffers allocated once.

``EnvBase.rollout`` without a policy or callback (``stepper/rollout.py``) and
``SyncDataCollector``'s later batches (``collectors/_fast_batch.py``) ask the env for a
stepper through its optional hook ``_numpy_stepper() -> NumpyStepper | None`` (listed with
``_reset``/``_step``/``_set_seed`` in ``envs/common.py``). A stepper steps every copy of
the env at once and writes the results into numpy buffers; a step then costs the
simulator's calls and a few element writes instead of a TensorDict or two. The results
must be those of the general loop: the same keys, order, values, dtypes and shapes, and
the env left in the same state (``tests/envs/test_fast_rollout.py`` checks each stepper).

The implementations, each offered by its env's ``_numpy_stepper``:

* ``gym.py``: ``GymGroup`` (one plain ``GymWrapper``, or a ``SerialEnv`` of them: a
  ``NumpyGroup``, which ``GymWrapper._batch_group`` offers) and ``VectorStepper`` (a
  gymnasium vector env);
* ``parallel.py``: ``ParallelStepper`` (a ``ParallelEnv``'s shared memory);
* ``transformed.py``: ``TransformedStepper`` (a ``TransformedEnv``: the wrapped env's
  stepper, then each transform's ``NumpyForm``, which ``Transform._numpy_form`` returns).

A stepper stands in for the hooks it replaces: an env class whose subclass overrides one
of them takes the general loop (``keeps_hooks``). A transform's form is not inherited
either: a subclass may change what a step does (``numpy_form``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

__all__ = ["NumpyForm", "NumpyGroup", "NumpyStepper", "keeps_hooks", "numpy_form"]


@runtime_checkable
class NumpyStepper(Protocol):
    """Steps an env's ``n`` copies (1 for an unbatched env) into ``[T, n, ...]`` buffers.

    The caller allocates one buffer per key from the layouts, calls ``bind`` once, then
    ``step_at``/``reset_at`` row by row. Two optional methods, looked up with
    ``getattr``: ``advance(t1)`` finishes the ``"next"`` rows before ``t1`` (work a
    stepper defers to apply to many rows at once); it is called before those rows are
    read. ``step_reset_at(action_t, t) -> bool`` steps, then resets the copies that are
    done into root row ``t + 1`` (one round trip where a step is a message).

    Attributes:
        step_keys: the ``"next"`` entries of a step, in ``_step``'s key order
            (observations, reward, done flags).
        reset_keys: the entries of a reset, in ``_reset``'s key order.
        step_layout: per step key, ``(shape of an [n, ...] row, numpy dtype)``.
        reset_layout: per reset key, the same.
    """

    step_keys: list
    reset_keys: list
    step_layout: list[tuple[tuple[int, ...], np.dtype]]
    reset_layout: list[tuple[tuple[int, ...], np.dtype]]

    def bind(self, next_bufs: list[np.ndarray], root_bufs: list[np.ndarray]) -> None:
        """Step into ``next_bufs`` and reset into ``root_bufs`` (``[T, n, ...]`` each, in
        ``step_keys`` / ``reset_keys`` order) from now on."""

    def prepare(self, actions: torch.Tensor):
        """``[T, n, ...]`` actions -> a sequence whose item ``t`` is what ``step_at``
        takes for row ``t``."""

    def step_at(self, action_t, t: int) -> bool:
        """Step every copy into the ``"next"`` row ``t``; True if any copy is done."""

    def reset_at(self, chosen, t: int) -> None:
        """Reset the copies ``chosen`` (indices) into the root row ``t``."""


@runtime_checkable
class NumpyGroup(NumpyStepper, Protocol):
    """Copies of one env class stepped as one batch: what ``EnvBase._batch_group`` returns.

    ``SerialEnv`` (and so each ``ParallelEnv`` worker) asks the class of its copies for a
    group and steps them through it, returning new ``[n, ...]`` arrays per call; it is
    also the ``SerialEnv``'s ``NumpyStepper``, so it has both sets of methods.
    """

    def step(self, action: torch.Tensor, out: list[np.ndarray] | None = None) -> list:
        """Step copy ``i`` with ``action[i]``; the ``[n, ...]`` results in ``step_keys``
        order, written into ``out`` (new arrays when None)."""

    def reset(self, chosen, out: list[np.ndarray] | None = None) -> list:
        """Reset the copies ``chosen``; the last reset of every copy (``reset_keys``
        order), or the chosen rows written into ``out``."""


@runtime_checkable
class NumpyForm(Protocol):
    """A transform at the numpy level, as ``Transform._numpy_form`` returns it.

    ``TransformedStepper`` runs its wrapped env's stepper, which writes the raw results,
    then each form, in transform order, which rewrites or adds its entries. A *deferred*
    form (``per_step`` False) defines ``advance(t0, t1)``, which transforms the
    ``"next"`` rows ``[t0, t1)`` at once; a *per-step* form defines ``step(t)``, which
    transforms row ``t`` inside each step (one whose result ends episodes). Both rewrite
    the root rows of the copies a reset restarts (``reset``). The values must be those
    of the transform's own ``_step``/``_reset``.

    Attributes:
        per_step: whether ``step`` runs at each step (else ``advance`` over row ranges).
        reads: the entries the form reads (each must be in the buffers).
        writes: the entries it writes (new keys get buffers from the transformed specs).
    """

    per_step: bool
    reads: list
    writes: list

    def bind(self, stepper) -> None:
        """Take the buffers from ``stepper``: ``stepper.nxt`` and ``stepper.root`` (key ->
        ``[T, n, ...]`` array), ``stepper.resets`` (``[T, n]`` bool: copies reset before
        row ``t``) and ``stepper.n``."""

    def reset(self, chosen, t: int) -> None:
        """Rewrite the root row ``t`` of the copies ``chosen``, just reset."""


def keeps_hooks(env, owner: type, hooks: tuple[str, ...]) -> bool:
    """Whether ``env`` is an ``owner`` whose class still runs ``owner``'s own ``hooks``.

    A stepper stands in for the hooks it replaces (``GymGroup`` calls gymnasium where
    ``GymWrapper._step`` would); a subclass that overrides one of them has changed what a
    step does, so it takes the general loop unless it offers a stepper of its own.
    """
    cls = type(env)
    return isinstance(env, owner) and all(getattr(cls, h) is getattr(owner, h) for h in hooks)


def numpy_form(transform) -> NumpyForm | None:
    """``transform._numpy_form()`` where the transform's own class defines it, else None.

    A subclass may change what a step does, so it does not inherit its parent's form: it
    names one in its class body (``_numpy_form = StepCounter._numpy_form``) to keep it.
    """
    if "_numpy_form" not in vars(type(transform)):
        return None
    return transform._numpy_form()
