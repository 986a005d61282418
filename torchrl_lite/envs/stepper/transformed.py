"""TransformedEnv's ``NumpyStepper``: the wrapped env's stepper, then each transform's form.

A ``TransformedEnv`` whose wrapped env offers a numpy stepper offers one too when every
active transform has a ``NumpyForm`` (``Transform._numpy_form``: ``ObservationNorm``,
``RewardScaling``, ``RewardClipping``, ``RewardSum``, ``StepCounter``, ``InitTracker``,
``DTypeCastTransform``/``DoubleToFloat`` on observations; not inherited by subclasses,
see ``numpy_form``). The wrapped env's stepper writes its
raw results into the buffers, then each form rewrites or adds its entries: a deferred
form over whole ranges of rows (``advance``), in transform order; a per-step form inside
``step_at``. The fast rollout advances once after the first step (its checks) and once
at the end; a collector batch advances each step (its policy reads the transformed root
of the next step). A per-step form may not read or write an entry a deferred form writes
(its rows would not be transformed yet); the env then takes the general loop.
"""

from __future__ import annotations

import numpy as np
import torch

from torchrl_lite import _keys as K
from torchrl_lite.envs.stepper import NumpyStepper, numpy_form

__all__ = ["TransformedStepper"]


class TransformedStepper:
    """The numpy stepper of a ``TransformedEnv`` (see the module docstring)."""

    @classmethod
    def build(cls, env, base: NumpyStepper):
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
            form = numpy_form(t)
            if form is None:
                return None
            if not _cast_buffers(form, forms, step_layout, reset_layout):
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
        # nothing to do per step: the base stepper's own calls (no extra Python frame)
        self.step_at = self._step_at if self._per_step else base.step_at
        fused = getattr(base, "step_reset_at", None)
        if fused is not None and not self._per_step:
            self._base_fused = fused
            self.step_reset_at = self._step_reset_at

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


def _cast_buffers(form, earlier: list, step_layout: dict, reset_layout: dict) -> bool:
    """For a cast in place (``forms.Cast``): give its entries buffers of the new dtype.
    False when an ``earlier`` form reads or writes one (it would see the cast values)."""
    for key, dtype in getattr(form, "casts", {}).items():
        if key not in step_layout or any(key in {*f.reads, *f.writes} for f in earlier):
            return False
        step_layout[key] = (step_layout[key][0], dtype)
        if key in reset_layout:
            reset_layout[key] = (reset_layout[key][0], dtype)
    return True
