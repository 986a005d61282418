"""Actions against the env's action spec: what raises, what warns (once per env).

A wrong shape or dtype, or a discrete action out of its range, raises ``ValueError``. A
float action beyond a ``Bounded`` spec's bounds (a Gaussian policy overshooting, for an
env that clips, as gymnasium's Pendulum does) warns once per env, naming the key, the
spec and the value, and is passed on unchanged; with ``spec_check="strict"`` it raises.

The full per-step check runs on the first step only (``spec_check="first"``); after it,
``step()`` compares each float-bounded action with its bounds (``check_step_bounds``: one
vectorized comparison and one ``.any()`` per key, nothing once the env warned), and the
batch-level check (``check_batch_bounds``, one comparison per key over a whole rollout or
collector batch) covers the loops that do not go through ``step()``.
"""

from __future__ import annotations

import warnings

import torch

from torchrl_lite import _td
from torchrl_lite.data._spec_stack import StackedComposite, copies_of
from torchrl_lite.data.tensor_specs import Bounded, TensorSpec


class ActionBoundsWarning(UserWarning):
    """A float action went beyond its ``Bounded`` spec (passed on; the env may clip it)."""


def _float_bounded(spec: TensorSpec) -> bool:
    return isinstance(spec, Bounded) and spec.dtype.is_floating_point


def only_overshoots(spec: TensorSpec, value: torch.Tensor) -> bool:
    """True if ``value`` fails ``spec`` only by being beyond a float ``Bounded`` range."""
    if not _float_bounded(spec) or not isinstance(value, torch.Tensor):
        return False
    if value.dtype != spec.dtype:
        return False
    try:
        return spec.is_in(spec.project(value))
    except (ValueError, RuntimeError):  # an incompatible shape
        return False


def overshoot_message(env, key, spec: TensorSpec, value: torch.Tensor) -> str:
    low, high = float(value.min()), float(value.max())
    return (
        f"{type(env).__name__}: action {key!r} has values beyond its spec's bounds "
        f"(min {low:.4g}, max {high:.4g}; spec {spec}). It is passed to the env as is "
        f"(gymnasium envs such as Pendulum clip it); this warning is shown once per env. "
        f'Bound the policy (e.g. TanhNormal) or use spec_check="strict" to raise instead.'
    )


def check_action_value(env, key, spec: TensorSpec, value: torch.Tensor) -> None:
    """``spec.assert_is_in(value)``, except that a float overshoot warns (see module)."""
    if spec.is_in(value):
        return
    if getattr(env, "spec_check", None) != "strict" and only_overshoots(spec, value):
        warn_overshoot(env, key, spec, value)
        return
    spec.assert_is_in(value, key=key)


def warn_overshoot(env, key, spec: TensorSpec, value: torch.Tensor) -> None:
    """Warn once per env and key (the env remembers it in ``_overshoot_warned``)."""
    warned = env.__dict__.setdefault("_overshoot_warned", set())
    if key in warned:
        return
    warned.add(key)
    warnings.warn(overshoot_message(env, key, spec, value), ActionBoundsWarning, stacklevel=4)


_FEW = 32  # up to this many action values, compared in python (cheaper than a kernel)


def step_bounds(env) -> list:
    """``(key, spec, low, high)`` of each float ``Bounded`` action leaf, cached per action
    spec; ``low``/``high`` are python floats when the bounds are the same everywhere (an
    env whose copies have different specs gets none: its batches are checked)."""
    spec = env.full_action_spec
    cache = env.__dict__.get("_step_bounds")
    if cache is not None and cache[0] is spec:
        return cache[1]
    bounds = []
    if not isinstance(spec, StackedComposite):
        for key, leaf in spec.items(True, True):
            if _float_bounded(leaf):
                low, high = leaf.low, leaf.high
                if not env.batch_locked:  # any leading batch: the widest bounds
                    low, high = low.min(), high.max()
                if bool((low == low.min()).all() and (high == high.max()).all()):
                    low, high = float(low.min()), float(high.max())
                bounds.append((key, leaf, low, high))
    env._step_bounds = (spec, bounds)
    return bounds


def check_step_bounds(env, tensordict) -> None:
    """After the first step: warn once (raise with ``spec_check="strict"``) when a float
    action is beyond its ``Bounded`` spec (or NaN). A few values on CPU are compared in
    python, more with one ``aminmax``; nothing once the env warned."""
    strict = env.spec_check == "strict"
    warned = env.__dict__.get("_overshoot_warned", ())
    for key, spec, low, high in step_bounds(env):
        if key in warned and not strict:
            continue
        value = _td.get_path(tensordict, key)
        if value is None or not value.is_floating_point() or not value.numel():
            continue
        if value.is_cpu and low.__class__ is float:  # no kernel for a few values (~0.5 us)
            if value.numel() <= _FEW:
                flat = value.tolist() if value.dim() == 1 else value.reshape(-1).tolist()
                beyond = not all(low <= x <= high for x in flat)  # NaN: beyond too
            else:
                least, most = torch.aminmax(value)
                beyond = not (low <= least.item() and most.item() <= high)
        else:
            beyond = bool(torch.logical_or(value < low, value > high).any())  # one sync
        if beyond:
            if strict:
                raise ValueError(
                    f"{type(env).__name__}: action {key!r} has values beyond its spec's bounds "
                    f"(min {float(value.min()):.4g}, max {float(value.max()):.4g}; spec "
                    f'{spec}), and spec_check="strict". Bound the policy (e.g. TanhNormal) '
                    "or leave spec_check at its default to warn instead."
                )
            warn_overshoot(env, key, spec, value)


def check_batch_bounds(env, batch, time_dim: int) -> None:
    """After a rollout or a collector batch: notice a float action beyond its bounds on
    any step. ``batch`` has the steps along ``time_dim`` (``[*env_batch, T]``); warns once
    per env and key, or raises ``ValueError`` with ``spec_check="strict"``.

    Costs one comparison per float-bounded action key, and nothing once the env warned.
    """
    if env.spec_check == "never":
        return
    strict = env.spec_check == "strict"
    warned = env.__dict__.get("_overshoot_warned", ())
    spec = env.full_action_spec
    if isinstance(spec, StackedComposite):  # copies of different specs: each its own
        pairs = zip(spec.specs, copies_of(batch, len(spec.specs)))
        checks = [(s, row, time_dim - 1) for s, row in pairs]
    else:
        checks = [(spec, batch, time_dim)]
    for specs, data, dim in checks:
        _check_bounds(env, specs, data, dim, strict, warned)


def _check_bounds(env, specs, batch, time_dim: int, strict: bool, warned) -> None:
    for key, spec in specs.items(True, True):
        if not _float_bounded(spec) or (key in warned and not strict):
            continue
        value = batch.get(key, None)
        if value is None or value.dtype != spec.dtype:
            continue
        value = value.movedim(time_dim, 0)  # [T, *batch, *feature]
        low, high = spec.low, spec.high
        if value.shape[value.dim() - low.dim() :] != low.shape:  # a batch-unlocked env
            low, high = low.min(), high.max()
        if bool(((value < low) | (value > high)).any()):
            if strict:
                raise ValueError(
                    f"{type(env).__name__}: action {key!r} has values beyond its spec's "
                    f"bounds (min {float(value.min()):.4g}, max {float(value.max()):.4g}; "
                    f'spec {spec}), and spec_check="strict". Bound the policy (e.g. '
                    "TanhNormal) or leave spec_check at its default to warn instead."
                )
            warn_overshoot(env, key, spec, value)


def action_entries(env, td) -> list:
    """``(key, spec, value)`` for each action leaf of ``env`` in ``td`` (value None when
    absent); copy by copy, each with its own spec, for copies of different specs."""
    spec = env.full_action_spec
    if not isinstance(spec, StackedComposite):
        return [(key, s, td.get(key, None)) for key, s in spec.items(True, True)]
    rows = copies_of(td, len(spec.specs))
    return [
        (key, s, row.get(key, None))
        for copy, row in zip(spec.specs, rows)
        for key, s in copy.items(True, True)
    ]
