"""The fast rollout: random actions, stepped through the env's ``NumpyStepper``.

``EnvBase.rollout`` without a policy or a callback asks the env for a numpy stepper
(``_numpy_stepper``; the contract is in ``envs/stepper/__init__.py``). The actions are
drawn at once where that draws the same values, each step costs the stepper's calls,
and the rollout builds one TensorDict at the end, with the same keys, order, values,
dtypes and shapes as the general loop, leaving the env in the same state
(``tests/envs/test_fast_rollout.py`` compares the two on every stepper).
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data.tensor_specs import Binary, Bounded, Categorical, MultiCategorical, OneHot
from torchrl_lite.envs._step_checks import check_step_output
from torchrl_lite.envs.stepper import NumpyStepper

__all__ = ["fast_rollout"]

# specs whose ``rand((T,))`` draws the same values as T calls of ``rand()`` (checked for
# each in tests/envs/test_fast_rollout.py): their actions are drawn in one call
_BULK_RAND = (Bounded, Categorical, OneHot, Binary, MultiCategorical)
_FLAGS = (K.DONE, K.TERMINATED, K.TRUNCATED)


def fast_rollout(  # noqa: C901 (the per-step loop kept in one frame: a call per step costs more than it reads)
    env,
    stepper: NumpyStepper,
    td0: TensorDictBase,
    max_steps: int,
    break_any: bool,
    break_all: bool,
) -> TensorDictBase | None:
    """``env.rollout`` with random actions from the reset ``td0``, through ``stepper``.

    Returns None (nothing stepped) when ``td0`` or the action spec is not what the stepper
    handles; the caller then runs the general loop.
    """
    batched = bool(env.batch_size)
    n = env.batch_size.numel() if batched else 1
    keys0 = list(td0.keys(True, True))
    if (
        list(env.full_action_spec.keys(True, True)) != [K.ACTION]
        or not all(isinstance(k, str) for k in keys0)
        or sorted(keys0) != sorted(stepper.reset_keys)
        or any(k not in stepper.step_keys for k in stepper.reset_keys)
        or not env.batch_locked
        or (batched and env.batch_size != (n,))
    ):
        return None
    spec = env.full_action_spec[K.ACTION]
    breaking = break_any or break_all
    T = max_steps
    root = [np.zeros((T, *shape), dtype) for shape, dtype in stepper.reset_layout]
    nxt = [np.empty((T, *shape), dtype) for shape, dtype in stepper.step_layout]
    for buf, key in zip(root, stepper.reset_keys):  # flags stay False: a root is never done
        buf[0] = td0.get(key).numpy().reshape(buf.shape[1:])
    stepper.bind(nxt, root)
    done = nxt[stepper.step_keys.index(K.DONE)].reshape(T, n)
    reset_at = np.zeros((T, n), dtype=bool)  # the copies reset before step t
    if not breaking and isinstance(spec, _BULK_RAND):
        actions = spec.rand((T,))  # [T, *batch, *action]: as T draws of rand()
        items, drawn = (
            stepper.prepare(actions.reshape(T, n, *spec.shape[len(env.batch_size) :])),
            None,
        )
    else:
        items, drawn = None, []
    fused = None if breaking else getattr(stepper, "step_reset_at", None)
    advance = getattr(stepper, "advance", None)  # transforms applied to rows at once
    steps = T
    for t in range(T):
        if items is None:
            drawn.append(spec.rand())
            item = stepper.prepare(
                drawn[-1].reshape(1, n, *drawn[-1].shape[len(env.batch_size) :])
            )[0]
        else:
            item = items[t]
        if fused is not None and t < T - 1:
            if fused(item, t):
                reset_at[t + 1] = done[t]
            if t == 0:
                _check_first_step(env, stepper, nxt, advance)
            continue
        any_done = stepper.step_at(item, t)
        if t == 0:
            _check_first_step(env, stepper, nxt, advance)
        if any_done:
            if break_any or (break_all and bool(done[t].all())):
                steps = t + 1
                break
            if t < T - 1:
                chosen = np.flatnonzero(done[t])
                stepper.reset_at(chosen, t + 1)
                reset_at[t + 1, chosen] = True
    if advance is not None:
        advance(steps)
    # the root of step t + 1 is the "next" of step t, for the copies not reset in between
    keep = ~reset_at[1:steps]
    for key, buf in zip(stepper.reset_keys, root):
        if key not in _FLAGS:
            src = nxt[stepper.step_keys.index(key)]
            where = keep.reshape(*keep.shape, *[1] * (buf.ndim - 2))
            np.copyto(buf[1:steps], src[: steps - 1], where=where)
    actions = actions if items is not None else torch.stack(drawn)
    return _result(env, td0, stepper, root, nxt, actions[:steps], steps, batched)


def _check_first_step(env, stepper, nxt: list, advance=None) -> None:
    """The first step's output against the specs (as ``EnvBase.step`` checks it)."""
    if advance is not None:
        advance(1)
    batched = bool(env.batch_size)
    values = [torch.from_numpy(b[0] if batched else b[0, 0]) for b in nxt]
    next_td = _td.new(dict(zip(stepper.step_keys, values)), env.batch_size, env.device)
    check_step_output(env, next_td)


def _result(env, td0, stepper, root, nxt, actions, steps, batched) -> TensorDictBase:
    """The ``[*batch, T]`` TensorDict, keys in the order the general loop records them."""

    def leaf(array: np.ndarray) -> torch.Tensor:
        if batched:  # [T, n, ...] -> [n, T, ...]
            return torch.from_numpy(array[:steps]).movedim(0, 1).contiguous()
        return torch.from_numpy(array[:steps, 0])

    batch_size = torch.Size((*env.batch_size, steps))
    root_leaves = dict(zip(stepper.reset_keys, root))
    entries = {k: leaf(root_leaves[k]) for k in td0.keys()}
    entries[K.ACTION] = actions.movedim(0, 1).contiguous() if batched else actions
    next_entries = {k: leaf(b) for k, b in zip(stepper.step_keys, nxt)}
    entries[K.NEXT] = _td.new(next_entries, batch_size, env.device)
    return _td.new(entries, batch_size, env.device)
