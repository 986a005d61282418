"""A collector batch stepped at the numpy level (the collector's side of the fast rollout).

After its first batch (which runs the general loop and its checks), ``SyncDataCollector``
collects through the env's numpy stepper (``EnvBase._numpy_stepper``, see
``envs/stepper/``) when the env has one and the batch needs nothing the stepper
skips (no recurrent states, ``is_init`` tracking, trajectory truncation or device moves).
Each step builds one TensorDict for the policy, from views of the observation buffers;
the env writes its results into ``[T, n, ...]`` numpy buffers, and the batch is put
together once at the end, with the same keys, order, values and carried state as the
general loop (``tests/collectors/test_fast_batch.py`` compares the two).
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td

__all__ = ["fast_batch"]

_FLAGS = (K.DONE, K.TERMINATED, K.TRUNCATED)


def fast_batch(collector, stepper, policy_call) -> TensorDictBase | None:  # noqa: C901 (the per-step loop kept in one frame: a call per step costs more than it reads)
    """One batch of ``collector`` through ``stepper``, or None (nothing stepped) where the
    layout of the previous batch is not one the stepper covers."""
    env, rec = collector.env, collector._recorder
    td = collector._td
    entries = _td.entries(td)
    keys = getattr(rec, "keys", None)
    if entries is None or keys is None or env.device.type != "cpu":
        return None
    root_keys = [k for k in keys if isinstance(k, str)]
    next_keys = [k[1] for k in keys if isinstance(k, tuple) and len(k) == 2 and k[0] == K.NEXT]
    step_keys, reset_keys = stepper.step_keys, stepper.reset_keys
    if (
        len(root_keys) + len(next_keys) != len(keys)
        or sorted(next_keys) != sorted(step_keys)
        or any(k not in root_keys or k not in entries or k not in step_keys for k in reset_keys)
        or K.ACTION not in root_keys
        or list(env.full_action_spec.keys(True, True)) != [K.ACTION]
    ):
        return None
    batched = bool(env.batch_size)
    n = env.batch_size.numel() if batched else 1
    T = collector._steps
    root = [np.zeros((T + 1, *shape), dtype) for shape, dtype in stepper.reset_layout]
    nxt = [np.empty((T, *shape), dtype) for shape, dtype in stepper.step_layout]
    for buf, key in zip(root, reset_keys):
        buf[0] = entries[key].numpy().reshape(buf.shape[1:])
    stepper.bind(nxt, root)
    advance = getattr(stepper, "advance", None)  # a TransformedEnv's transforms
    # per root key, its row at each step as a tensor view (one C call per key)
    rows = {
        k: torch.from_numpy(b if batched else b[:, 0]).unbind(0) for k, b in zip(reset_keys, root)
    }
    carried = [  # (next buffer, root buffer): what step t hands to the root of step t + 1
        (nxt[step_keys.index(k)], b) for k, b in zip(reset_keys, root) if k not in _FLAGS
    ]
    done = nxt[step_keys.index(K.DONE)].reshape(T, n)
    extra = {k: v for k, v in entries.items() if k not in reset_keys and k not in _SKIP}
    # the first step's input in the order of the carried root, as the general loop has it
    # (the order of the policy's outputs in it is the order of the batch's keys)
    order = [k for k in entries if k in rows or k in extra]
    outputs = columns = column_list = action_pos = carried_outputs = root_order = None
    ids = []
    batch_size, device = env.batch_size, env.device
    action_shape = (1, n, *env.full_action_spec[K.ACTION].shape[len(batch_size) :])
    direct = None
    for t in range(T):
        if direct is not None:  # the policy's module on views of the root rows
            values = direct(t)
            for column, value in zip(column_list, values):
                column.append(value)
        else:
            if t == 0:
                inputs = {k: rows[k][0] if k in rows else extra[k] for k in order}
            else:
                inputs = {k: rows[k][t] for k in reset_keys}
                inputs.update(extra)
            out = _td.entries(policy_call(_td.new(inputs, batch_size, device)))
            if out is None:
                raise TypeError(
                    "the policy returned something other than the TensorDict it was given"
                )
            if outputs is None:  # the root keys, in order (what the general loop records)
                root_order = [k for k in out if k != K.NEXT]
                outputs = [k for k in root_order if k not in reset_keys]
                carried_outputs = [k for k in outputs if k != K.ACTION]  # into the next root
                columns = {k: [] for k in outputs}
                column_list = list(columns.values())
                action_pos = outputs.index(K.ACTION)
                direct = _direct(policy_call, outputs, rows, out)
            values = []
            for k in outputs:
                value = out.get(k)
                if value is None:
                    raise KeyError(
                        f"Collector: entry {k!r}, present at the first step of the batch, is "
                        "missing at a later step; an env or policy must write the same "
                        "entries at every step."
                    )
                columns[k].append(value)
                values.append(value)
        ids.append(collector._traj_ids)
        action = stepper.prepare(values[action_pos].reshape(action_shape))[0]
        any_done = stepper.step_at(action, t)
        if advance is not None:
            advance(t + 1)
        for src, dst in carried:
            dst[t + 1] = src[t]
        extra = {k: v for k, v in zip(outputs, values) if k != K.ACTION} if carried_outputs else {}
        if any_done and collector.reset_when_done:
            chosen = np.flatnonzero(done[t])
            stepper.reset_at(chosen, t + 1)
            mask = torch.from_numpy(done[t].copy()).reshape(batch_size) if batched else None
            collector._new_trajectories(mask)
    # the batch, set key by key in the recorder's order (as the general loop's result)
    nd = len(batch_size)
    storing = collector.storing_device
    batch = TensorDict(batch_size=(*batch_size, T), device=storing)
    leaves = {k: _rows(b[:T], batched) for k, b in zip(reset_keys, root)}
    leaves.update({k: torch.stack(columns[k]) for k in outputs})
    nexts = {k: _rows(b, batched) for k, b in zip(step_keys, nxt)}
    for key in [*root_order, *((K.NEXT, k) for k in step_keys)]:
        leaf = nexts[key[1]] if isinstance(key, tuple) else leaves[key]
        batch.set(key, _time_to(leaf, nd, storing))
    batch.set(K.TRAJ_IDS, _time_to(torch.stack(ids), nd, storing))
    # the root of the next batch: the last step's "next" (or reset) entries and the
    # policy's outputs but the action, in the order the general loop carries them
    last = {k: _rows(b[T : T + 1], batched)[0].clone() for k, b in zip(reset_keys, root)}
    carry = {k: last[k] for k in step_keys if k in last}
    carry.update(extra)
    collector._td = _td.new(carry, batch_size, device)
    return batch


def _direct(policy_call, outputs: list, rows: dict, out: dict):
    """``t -> the policy's outputs`` (in ``outputs`` order) from the root rows of step
    ``t``, without a TensorDict: for a policy that ``_td.module_caller`` calls directly,
    whose inputs are all root rows and whose outputs are exactly ``outputs`` (plain
    tensors at the first step); None otherwise."""
    spec = getattr(policy_call, "direct", None)
    if spec is None:
        return None
    inner, in_keys, out_keys, normalize = spec
    if sorted(out_keys) != sorted(outputs) or any(k not in rows for k in in_keys):
        return None
    if any(type(out.get(k)) is not torch.Tensor for k in outputs):
        return None
    in_rows = [rows[k] for k in in_keys]
    single = len(outputs) == 1
    pick = None if out_keys == outputs else [out_keys.index(k) for k in outputs]

    def call(t: int) -> tuple:
        result = inner(*[r[t] for r in in_rows])
        if single and type(result) is torch.Tensor:
            return (result,)
        values = normalize(result)
        return values if pick is None else tuple(values[i] for i in pick)

    return call


_SKIP = frozenset({K.NEXT, K.RESET, K.ACTION, K.REWARD})


def _rows(array: np.ndarray, batched: bool) -> torch.Tensor:
    """A ``[T, n, ...]`` buffer as a tensor, ``[T, ...]`` for an unbatched env."""
    return torch.from_numpy(array if batched else array[:, 0])


def _time_to(leaf: torch.Tensor, nd: int, device) -> torch.Tensor:
    """``[T, *batch, ...]`` -> a new ``[*batch, T, ...]`` tensor on ``device``."""
    if nd:
        leaf = leaf.movedim(0, nd)
    if device is not None and leaf.device != device:
        leaf = leaf.to(device)
    return leaf.contiguous()
