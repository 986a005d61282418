"""The fast rollout: random actions, stepped at the numpy level into buffers allocated once.

``EnvBase.rollout`` without a policy or a callback asks the env for a numpy stepper
(``EnvBase._numpy_stepper``). A stepper steps the env, every copy at once, with an action
tensor and writes the results into the numpy arrays it is given; it resets the chosen
copies the same way. ``GymWrapper`` (one gymnasium env or a vector env), ``SerialEnv``
over plain GymWrappers and ``ParallelEnv`` (its shared memory) offer one. A step then
costs the gymnasium calls and a few row copies, and the rollout builds one TensorDict at
the end, with the same keys, order, values, dtypes and shapes as the general loop
(``tests/envs/test_fast_rollout.py`` compares the two on every env that offers a stepper).

The stepper contract (all arrays ``[n, ...]``, ``n`` the number of copies, 1 for an
unbatched env)::

    step_keys, reset_keys      # "next" entries of a step, entries of a reset (_step's and
                               # _reset's key order); flags are done/terminated/truncated
    step_layout, reset_layout  # per key: (shape of the [n, ...] rows, numpy dtype)
    step(action, out)          # step every copy with action ([n, ...] tensor) into out
    reset(chosen, out)         # reset copies ``chosen`` (indices); write their rows of out
    step_reset(action, out, reset_out) -> done   # optional (batched steppers): step, reset
                               # the copies that are done, write their rows of reset_out
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data.tensor_specs import Binary, Bounded, Categorical, MultiCategorical, OneHot
from torchrl_lite.envs._step_checks import check_step_output

__all__ = ["fast_rollout"]

# specs whose ``rand((T,))`` draws the same values as T calls of ``rand()`` (checked for
# each in tests/envs/test_fast_rollout.py): their actions are drawn in one call
_BULK_RAND = (Bounded, Categorical, OneHot, Binary, MultiCategorical)
_FLAGS = (K.DONE, K.TERMINATED, K.TRUNCATED)


def fast_rollout(
    env, stepper, td0: TensorDictBase, max_steps: int, break_any: bool, break_all: bool
) -> TensorDictBase | None:
    """``env.rollout`` with random actions from the reset ``td0``, through ``stepper``.

    Returns None (nothing stepped) when ``td0`` or the action spec is not what the stepper
    handles; the caller then runs the general loop.
    """
    batched = bool(env.batch_size)
    n = env.batch_size.numel() if batched else 1
    action_spec = env.full_action_spec
    keys0 = list(td0.keys(True, True))
    if (
        list(action_spec.keys(True, True)) != [K.ACTION]
        or not all(isinstance(k, str) for k in keys0)
        or sorted(keys0) != sorted(stepper.reset_keys)
        or any(k not in stepper.step_keys for k in stepper.reset_keys)
        or not env.batch_locked
        or (batched and env.batch_size != (n,))
    ):
        return None
    spec = action_spec[K.ACTION]
    breaking = break_any or break_all
    bulk = not breaking and isinstance(spec, _BULK_RAND)
    actions = spec.rand((max_steps,)) if bulk else None  # [T, *batch, *action]

    def rows_of(buffers: list, t: int) -> list:
        """Row ``t`` of each buffer, as the stepper's ``[n, ...]`` arrays."""
        return [b[t] for b in buffers] if batched else [b[t : t + 1] for b in buffers]

    def buffers(layout: list, fill) -> list:  # [T, *batch, ...] (the unbatched: no n dim)
        return [
            fill((max_steps, *(shape if batched else shape[1:])), dtype) for shape, dtype in layout
        ]

    root = buffers(stepper.reset_layout, np.zeros)  # flags stay False: a root is never done
    nxt = buffers(stepper.step_layout, np.empty)
    for buf, key in zip(root, stepper.reset_keys):
        buf[0] = td0.get(key).numpy()
    carried = [  # (next buffer, root buffer): what step t hands to the root of step t + 1
        (nxt[stepper.step_keys.index(k)], b)
        for k, b in zip(stepper.reset_keys, root)
        if k not in _FLAGS
    ]
    done_buf = nxt[stepper.step_keys.index(K.DONE)]
    action_rows = [] if actions is None else None
    fused = None if breaking else getattr(stepper, "step_reset", None)
    steps = max_steps
    for t in range(max_steps):
        if actions is None:
            action_rows.append(spec.rand())
            action = action_rows[-1] if batched else action_rows[-1].unsqueeze(0)
        else:
            action = actions[t] if batched else actions[t : t + 1]
        out = rows_of(nxt, t)
        if fused is not None and t < max_steps - 1:  # non-breaking: step and reset at once
            done = fused(action, out, rows_of(root, t + 1))
            if t == 0:
                _check_first_step(env, stepper, out, batched)
            keep = ~done  # [n, 1]: the copies not reset carry their step's entries
            for src, dst in carried:
                np.copyto(dst[t + 1], src[t], where=keep.reshape(n, *[1] * (src.ndim - 2)))
            continue
        stepper.step(action, out)
        if t == 0:
            _check_first_step(env, stepper, out, batched)
        done = done_buf[t]
        any_done = bool(done.any())
        if (break_any and any_done) or (break_all and any_done and bool(done.all())):
            steps = t + 1
            break
        if t == max_steps - 1:
            break
        for src, dst in carried:
            dst[t + 1] = src[t]
        if any_done:
            stepper.reset(np.flatnonzero(done.reshape(n)), rows_of(root, t + 1))
    if actions is None:
        actions = torch.stack(action_rows)
    return _result(env, td0, stepper, root, nxt, actions, steps, batched)


def _check_first_step(env, stepper, out: list, batched: bool) -> None:
    """The first step's output against the specs (as ``EnvBase.step`` checks it)."""
    values = [torch.from_numpy(a if batched else a[0]) for a in out]
    next_td = _td.new(dict(zip(stepper.step_keys, values)), env.batch_size, env.device)
    check_step_output(env, next_td)


def _result(env, td0, stepper, root, nxt, actions, steps, batched) -> TensorDictBase:
    """The ``[*batch, T]`` TensorDict, keys in the order the general loop records them."""

    def leaf(array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array[:steps])
        return tensor.movedim(0, 1).contiguous() if batched else tensor

    batch_size = (*env.batch_size, steps)
    root_leaves = dict(zip(stepper.reset_keys, root))
    entries = {k: leaf(root_leaves[k]) for k in td0.keys()}
    entries[K.ACTION] = actions[:steps].movedim(0, 1).contiguous() if batched else actions[:steps]
    next_entries = {k: leaf(b) for k, b in zip(stepper.step_keys, nxt)}
    entries[K.NEXT] = _td.new(next_entries, torch.Size(batch_size), env.device)
    return _td.new(entries, torch.Size(batch_size), env.device)
