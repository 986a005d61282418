"""TransformedEnv's numpy stepper: the wrapped env's stepper, plus each transform's numpy form.

A ``TransformedEnv`` whose wrapped env offers a numpy stepper (``envs/_fast_rollout.py``)
offers one too when every active transform has a numpy form here (``ObservationNorm``,
``RewardScaling``, ``RewardClipping``, ``RewardSum``, ``StepCounter``, ``InitTracker``,
exact classes only: a subclass may change what a step does). The wrapped env's stepper
writes its raw results into the buffers, then each form rewrites or adds its entries:

- a *deferred* form transforms whole ranges of rows at once (``advance(t0, t1)``), in
  transform order: one torch call per range for an elementwise transform, one
  ``np.add.accumulate`` per episode for ``RewardSum``. The fast rollout advances once
  after the first step (its checks) and once at the end; a collector batch advances each
  step (its policy reads the transformed root of the next step).
- a *per-step* form runs inside ``step_at`` (``StepCounter`` with ``max_steps``: its
  count ends episodes).

Both also rewrite the root rows of the copies a reset restarts (``reset(chosen, t)``).
The values are those of the transforms' own ``_step``/``_reset`` (the same torch
functions, applied to more rows at once; ``tests/envs/test_fast_rollout.py`` compares the
two loops). A per-step form may not read or write an entry a deferred form writes (its
rows would not be transformed yet); the env then takes the general loop.
"""

from __future__ import annotations

import numpy as np
import torch

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms.episode import InitTracker, StepCounter
from torchrl_lite.envs.transforms.observation import ObservationNorm
from torchrl_lite.envs.transforms.reward import RewardClipping, RewardScaling, RewardSum

__all__ = ["TransformedStepper"]


class TransformedStepper:
    """The numpy stepper of a ``TransformedEnv`` (see the module docstring)."""

    @classmethod
    def build(cls, env, base):
        """The stepper of ``env`` over its wrapped env's stepper ``base``, or None."""
        if env._inv_transforms or env._reset_pre:
            return None
        base_action = env.base_env.full_action_spec
        if list(base_action.keys(True, True)) != [K.ACTION] or (
            env.full_action_spec[K.ACTION] != base_action[K.ACTION]
        ):
            return None
        n = env.batch_size.numel() if env.batch_size else 1
        if env.batch_size != env.base_env.batch_size:
            return None
        step_layout = dict(zip(base.step_keys, base.step_layout))
        reset_layout = dict(zip(base.reset_keys, base.reset_layout))
        step_keys, reset_keys = list(base.step_keys), list(base.reset_keys)
        final = {
            **dict(env.full_observation_spec.items(True, True)),
            **dict(env.full_reward_spec.items(True, True)),
            **dict(env.full_done_spec.items(True, True)),
        }
        nd = len(env.batch_size)
        forms = []
        for t in env._active:
            make = _FORMS.get(type(t))
            form = None if make is None else make(t)
            if form is None:
                return None
            for key in form.writes:
                spec = final.get(key)
                if not isinstance(key, str) or spec is None:
                    return None
                layout = ((n, *spec.shape[nd:]), torch.empty(0, dtype=spec.dtype).numpy().dtype)
                if key in step_layout:
                    if step_layout[key] != layout:  # a dtype or shape change in place
                        return None
                else:
                    step_keys.append(key)
                    step_layout[key] = layout
                if key in env.full_observation_spec.keys(True, True) and key not in reset_keys:
                    reset_keys.append(key)
                    reset_layout[key] = layout
            if any(k not in step_layout for k in form.reads):
                return None
            forms.append(form)
        deferred_writes = {k for f in forms if not f.per_step for k in f.writes}
        if any(deferred_writes & {*f.reads, *f.writes} for f in forms if f.per_step) or not all(
            k in step_layout for k in reset_keys
        ):
            return None
        layouts = ([step_layout[k] for k in step_keys], [reset_layout[k] for k in reset_keys])
        return cls(base, forms, n, (step_keys, reset_keys), layouts)

    def __init__(self, base, forms: list, n: int, keys: tuple, layouts: tuple):
        self.base, self.n = base, n
        self.step_keys, self.reset_keys = keys
        self.step_layout, self.reset_layout = layouts
        self._per_step = [f for f in forms if f.per_step]
        self._deferred = [f for f in forms if not f.per_step]
        self._forms = forms
        self.prepare = base.prepare
        self._base_advance = getattr(base, "advance", None)  # a TransformedEnv inside

    def bind(self, nxt: list, root: list) -> None:
        """Bind the base stepper to its keys' buffers and each form to its entries."""
        self.nxt = dict(zip(self.step_keys, nxt))
        self.root = dict(zip(self.reset_keys, root))
        base = self.base
        base.bind([self.nxt[k] for k in base.step_keys], [self.root[k] for k in base.reset_keys])
        self.done = self.nxt[K.DONE].reshape(len(nxt[0]), self.n)
        self.resets = np.zeros((len(root[0]), self.n), dtype=bool)  # copies reset before t
        self._upto = 0
        for form in self._forms:
            form.bind(self)
        # nothing to do per step: the base stepper's own calls (no extra Python frame)
        self.step_at = self._step_at if self._per_step else base.step_at
        fused = getattr(base, "step_reset_at", None)
        if fused is not None and not self._per_step:
            self._base_fused = fused
            self.step_reset_at = self._step_reset_at

    def _step_at(self, action, t: int) -> bool:
        self.base.step_at(action, t)
        for form in self._per_step:
            form.step(t)
        return bool(self.done[t].any())

    def _step_reset_at(self, action, t: int) -> bool:
        if not self._base_fused(action, t):
            return False
        self._restarted(np.flatnonzero(self.done[t]), t + 1)
        return True

    def reset_at(self, chosen, t: int) -> None:
        """Reset the copies ``chosen`` into root row ``t`` (base stepper, then forms)."""
        self.base.reset_at(chosen, t)
        self._restarted(chosen, t)

    def _restarted(self, chosen, t: int) -> None:
        self.resets[t, chosen] = True
        for form in self._forms:
            form.reset(chosen, t)

    def advance(self, t1: int) -> None:
        """Apply the deferred forms to the ``"next"`` rows up to ``t1`` (exclusive)."""
        if self._base_advance is not None:
            self._base_advance(t1)
        t0 = self._upto
        if t1 > t0:
            for form in self._deferred:
                form.advance(t0, t1)
            self._upto = t1


class _Elementwise:
    """A transform whose step and reset apply ``_apply_transform`` to each (in, out) pair."""

    per_step = False

    def __init__(self, transform):
        self.fn = transform._apply_transform
        self.pairs = list(transform._pairs)
        self.reads = [i for i, _ in self.pairs]
        self.writes = [o for _, o in self.pairs]

    def bind(self, st) -> None:
        self.bufs = [(st.nxt[i], st.nxt[o]) for i, o in self.pairs]
        self.roots = [(st.root[i], st.root[o]) for i, o in self.pairs if i in st.root]

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return self.fn(torch.from_numpy(x)).numpy()

    def reset(self, chosen, t: int) -> None:
        for src, dst in self.roots:
            dst[t, chosen] = self._apply(src[t, chosen])

    def advance(self, t0: int, t1: int) -> None:
        for src, dst in self.bufs:
            dst[t0:t1] = self._apply(src[t0:t1])


def _elementwise(transform):
    # an ObservationNorm without loc/scale yet: the general loop raises its error
    if isinstance(transform, ObservationNorm) and transform._a is None:
        return None
    return _Elementwise(transform)


class _Sum:
    """``RewardSum``: the running sum of each reward, restarted at 0 by a reset."""

    per_step = False

    def __init__(self, transform):
        self.pairs = list(transform._pairs)
        self.reads = [i for i, _ in self.pairs] + [o for _, o in self.pairs]
        self.writes = [o for _, o in self.pairs]

    def bind(self, st) -> None:
        self.st = st
        self.bufs = [(st.nxt[i], st.nxt[o], st.root[o]) for i, o in self.pairs]

    def reset(self, chosen, t: int) -> None:
        for _, _, root in self.bufs:
            root[t, chosen] = 0

    def advance(self, t0: int, t1: int) -> None:
        for reward, out, root in self.bufs:
            for i, a, b, start in _episodes(self.st, t0, t1, out, root):
                # one float add per step from the sum before step a, as torch.add does
                segment = reward[a:b, i].copy()
                segment[0] = start + segment[0]
                np.add.accumulate(segment, axis=0, out=out[a:b, i])


def _episodes(st, t0: int, t1: int, out: np.ndarray, root: np.ndarray):
    """``(copy, a, b, value before step a)`` for each stretch of rows ``[a, b)`` of
    ``[t0, t1)`` without a reset inside: the value is the root's after a reset (and in
    the first row), else the previous step's ``out``."""
    resets = st.resets
    for i in range(st.n):
        starts = [t0, *(np.flatnonzero(resets[t0 + 1 : t1, i]) + t0 + 1).tolist()]
        for a, b in zip(starts, [*starts[1:], t1]):
            yield i, a, b, (root[a, i] if a == 0 or resets[a, i] else out[a - 1, i])


class _Count:
    """``StepCounter``: +1 per step from the root's count, 0 after a reset. Deferred
    without ``max_steps``; with it, per step: reaching it sets the truncation flag (and
    ``"done"``), which ends the episode."""

    def __init__(self, transform):
        self.key, self.trunc_key = transform.step_count_key, transform.truncated_key
        self.max_steps, self.update_done = transform.max_steps, transform.update_done
        self.per_step = self.max_steps is not None
        self.reads = [self.key]
        self.writes = [self.key]
        if self.per_step:
            self.writes += [self.trunc_key, *([K.DONE] if self.update_done else [])]

    def bind(self, st) -> None:
        self.st = st
        self.out, self.root = st.nxt[self.key], st.root[self.key]
        if self.per_step:
            self.count = self.root[0].copy()  # the count before the next step
            self.trunc, self.done = st.nxt[self.trunc_key], st.nxt[K.DONE]

    def advance(self, t0: int, t1: int) -> None:
        for i, a, b, start in _episodes(self.st, t0, t1, self.out, self.root):
            steps = np.arange(1, b - a + 1, dtype=self.out.dtype)
            np.add(start, steps.reshape(-1, *[1] * (self.out.ndim - 2)), out=self.out[a:b, i])

    def step(self, t: int) -> None:
        row = self.out[t]
        np.add(self.count, 1, out=row)
        self.count = row
        hit = row >= self.max_steps
        np.logical_or(self.trunc[t], hit, out=self.trunc[t])
        if self.update_done:
            np.logical_or(self.done[t], hit, out=self.done[t])

    def reset(self, chosen, t: int) -> None:
        if self.per_step:
            self.count = self.count.copy()  # it may be a view of a "next" row
            self.count[chosen] = 0
        self.root[t, chosen] = 0


class _Init:
    """``InitTracker``: True in the root a reset writes, False in every step's output."""

    per_step = False

    def __init__(self, transform):
        self.key = transform.init_key
        self.reads = []
        self.writes = [self.key]

    def bind(self, st) -> None:
        self.out, self.root = st.nxt[self.key], st.root[self.key]

    def reset(self, chosen, t: int) -> None:
        self.root[t, chosen] = True

    def advance(self, t0: int, t1: int) -> None:
        self.out[t0:t1] = False


_FORMS = {
    ObservationNorm: _elementwise,
    RewardScaling: _elementwise,
    RewardClipping: _elementwise,
    RewardSum: _Sum,
    StepCounter: _Count,
    InitTracker: _Init,
}
