"""Batched envs over copies whose specs differ (multi-task): outputs are lazy stacks.

``SerialEnv``/``ParallelEnv`` over copies of equal specs stack their results leaf by leaf
(``serial.py``, ``parallel.py``). When the copies' specs differ (other observation
shapes or bounds, a key only some copies have), ``_BatchedEnv.__init__`` gives the env,
once, the lazy part defined here (``LazySerial`` or ``LazyParallel``, held as
``env._lazy``) and the env hands it its specs, buffers, steps and resets, as TorchRL
does:

* every TensorDict in and out (``reset``, ``step``'s ``"next"``, ``rand_action``,
  ``rollout``, ``fake_tensordict``) is a ``LazyStackedTensorDict`` along dim 0, whose
  TensorDict ``i`` (``td[i]``) holds copy ``i``'s entries, exactly as the copy alone
  would produce them (with the same seed: ``set_seed`` gives copy ``i`` the seed
  ``seed + i * env_batch.numel()``, as for equal copies);
* the specs are the copies' specs stacked (``data/_spec_stack.py``): ``env.observation_spec[i]``
  is copy ``i``'s; keys every copy has are entries of the stacked spec;
* a ``"_reset"`` mask resets the chosen copies only (the others keep their entries);
* ``ParallelEnv`` gives each copy its own shared-memory buffers, allocated from its own
  specs (the worker steps each copy through a one-copy loop, ``_CopiesLoop``): nothing
  is pickled per step there either.

Copies must have the same batch size, and leaf specs at a shared key must be of one
class and dtype (``TypeError`` naming the key otherwise, e.g. a discrete action in one
copy and a continuous one in another). The equal-specs path pays one ``env._lazy is
None`` test per call for this.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data._spec_stack import StackedComposite, copies_of, stack_specs
from torchrl_lite.envs._action_bounds import check_action_value
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.common import _CHECK_ONCE

__all__ = ["LazyParallel", "LazySerial", "is_lazy_env"]


def is_lazy_env(env) -> bool:
    """True if ``env`` (or the env it wraps) has copies of different specs: its data are
    ``LazyStackedTensorDict`` along dim 0."""
    return any(isinstance(getattr(env, name), StackedComposite) for name in U.SPEC_NAMES)


def _layout(specs: dict) -> SimpleNamespace:
    """A copy's keys, as ``_BatchedEnv._set_specs`` lays them out for equal copies."""
    obs, state = specs["full_observation_spec"], specs["full_state_spec"]
    done = specs["full_done_spec"]
    out = SimpleNamespace(
        input=U.leaf_keys(state, specs["full_action_spec"]),
        step=U.leaf_keys(obs, specs["full_reward_spec"], done),
        reset=U.leaf_keys(obs, done, state),
        state=set(state.keys(True, True)),
    )
    out.flat = all(isinstance(k, str) for k in out.input + out.step + out.reset)
    return out


def _spec_of(specs: dict, key):
    return next(s[key] for s in specs.values() if key in s)


def _common(lists: list) -> list:
    return [k for k in lists[0] if all(k in other for other in lists[1:])]


class _LazyCopies:
    """What ``LazySerial`` and ``LazyParallel`` share: specs and actions per copy.

    ``env`` is the batched env it serves; the attributes that the env's own methods read
    (specs, key lists, ``_env_batch``, ...) are set on the env, the copies' layouts here.
    """

    def __init__(self, env):
        self.env = env

    def set_specs(self, infos: list) -> None:
        env, first = self.env, infos[0]
        self.infos = infos
        env._env_batch, env._env_device = first.batch_size, first.device
        names = list(dict.fromkeys(info.name for info in infos))
        env._env_name = f"[{', '.join(names)}]"
        for name in U.SPEC_NAMES:
            try:
                spec = stack_specs([info.specs[name] for info in infos])
            except (TypeError, ValueError) as err:
                raise type(err)(
                    f"{type(env).__name__}: the copies' {name} cannot be stacked: {err}"
                ) from None
            setattr(env, name, spec.to(env.device))
        self.copy_keys = [_layout(info.specs) for info in infos]
        # the keys every copy has (ParallelEnv.step_and_maybe_reset looks for "done")
        env._input_keys = _common([c.input for c in self.copy_keys])
        env._step_keys = _common([c.step for c in self.copy_keys])
        env._reset_keys = _common([c.reset for c in self.copy_keys])

    def check_restart_specs(self, infos: list) -> None:
        for i, (old, new) in enumerate(zip(self.infos, infos)):
            for name in U.SPEC_NAMES:
                if old.specs[name] != new.specs[name]:
                    raise ValueError(
                        f"{type(self.env).__name__}: after close(), env copy {i} came back "
                        f"with another {name} ({new.specs[name]!r}, was "
                        f"{old.specs[name]!r}); its factory must build the same env each time."
                    )

    def _empty(self) -> LazyStackedTensorDict:
        env = self.env
        rows = [
            TensorDict({}, batch_size=env._env_batch, device=env.device)
            for _ in range(env.num_workers)
        ]
        return LazyStackedTensorDict(*rows, stack_dim=0)

    def _action_items(self) -> list:
        """Per copy, ``(key, spec)`` of its action leaves (cached per action spec)."""
        spec = self.env.full_action_spec
        cache = getattr(self, "_copy_action_items", None)
        if cache is None or cache[0] is not spec:
            items = [
                [(k, s) for k, s in row.items(True, True) if s is not None]
                for row in spec.unbind(0)
            ]
            cache = self._copy_action_items = (spec, items)
        return cache[1]

    # -- EnvBase's methods, copy by copy (EnvBase.reset merges lazy stacks copy by copy) ---
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """A random action per copy, from its own action spec, written into its row."""
        env = self.env
        if tensordict is None:
            tensordict = self._empty()
        if not isinstance(tensordict, LazyStackedTensorDict):
            if isinstance(env.full_action_spec, StackedComposite):
                raise TypeError(
                    f"{type(env).__name__}: the copies' action specs differ, so actions go "
                    "in a LazyStackedTensorDict (the one reset() or step_mdp returns), got "
                    f"a {type(tensordict).__name__}."
                )
            return tensordict.update(env.full_action_spec.rand())
        rows = copies_of(tensordict, env.num_workers)
        for row, items in zip(rows, self._action_items()):
            for key, spec in items:
                row.set(key, spec.rand())
        return tensordict

    def check_action(self, tensordict: TensorDictBase) -> None:
        env = self.env
        env._check_open("step")
        rows = copies_of(tensordict, env.num_workers)
        for i, (row, items) in enumerate(zip(rows, self._action_items())):
            for key, spec in items:
                value = row.get(key, None)
                if value is None:
                    raise KeyError(
                        f"step() needs {key!r} in copy {i}'s input. "
                        + missing_key_message(key, row.keys(True, True))
                    )
                if value.shape != spec.shape:
                    raise ValueError(
                        f"Action {key!r} of copy {i} has shape {list(value.shape)}, expected "
                        f"{list(spec.shape)} from {spec}."
                    )
                check_action_value(env, key, spec, value)
        env._checked_action = env.spec_check in _CHECK_ONCE

    def fake_tensordict(self) -> TensorDictBase:
        """Per copy, a zero-filled TensorDict with every key its step reads and writes."""
        env, rows = self.env, []
        for i in range(env.num_workers):
            obs, state, action, reward, done = (getattr(env, n)[i] for n in U.SPEC_NAMES)
            root = obs.zero()
            for spec in (state, done, action):
                root.update(spec.zero())
            nxt = obs.zero()
            nxt.update(reward.zero())
            nxt.update(done.zero())
            root.set(K.NEXT, nxt)
            rows.append(root)
        return LazyStackedTensorDict(*rows, stack_dim=0)


class LazySerial(_LazyCopies):
    """The lazy part of a ``SerialEnv`` whose copies' specs differ: each copy stepped on
    its own."""

    def connect(self) -> None:
        env = self.env
        env._group = None
        self.move_outputs = env._env_device != env.device
        self.state_zeros, self.last_reset = [], []
        for info, keys in zip(self.infos, self.copy_keys):
            state = info.specs["full_state_spec"]
            self.state_zeros.append({k: state[k].zero() for k in keys.state})
            zeros = [_spec_of(info.specs, k).zero().to(env.device) for k in keys.reset]
            self.last_reset.append(U.td_from_leaves(keys.reset, zeros, env._env_batch, env.device))

    def _collected(self, i: int, result: TensorDictBase, keys: list) -> TensorDictBase:
        """Copy ``i``'s ``keys`` from its ``result`` (a declared state entry it leaves out
        gets its spec's zero; any other missing key raises KeyError), on ``env.device``."""
        env, flat = self.env, self.copy_keys[i].flat
        values = U.leaves(result, keys, flat)
        for j, value in enumerate(values):
            if value is None:
                if keys[j] not in self.copy_keys[i].state:
                    raise KeyError(
                        f"Env copy {i} ({self.infos[i].name}) returned no {keys[j]!r}, which "
                        f"its specs declare. Returned keys: {list(result.keys(True, True))}."
                    )
                values[j] = self.state_zeros[i][keys[j]]
        if self.move_outputs:
            values = [v.to(env.device) for v in values]
        return U.td_from_leaves(keys, values, env._env_batch, env.device, flat)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        env, outs = self.env, []
        rows = copies_of(tensordict, env.num_workers)
        for i, (copy, row, keys) in enumerate(zip(env._envs, rows, self.copy_keys)):
            values = U.leaves(row, keys.input, keys.flat)  # what step reads, as for equal copies
            if any(v is None for v in values):  # the env raises what is missing
                sub = row.select(*keys.input, strict=False).to(copy.device)
            else:
                values = [v.to(copy.device) for v in values]
                sub = U.td_from_leaves(keys.input, values, copy.batch_size, copy.device, keys.flat)
            outs.append(self._collected(i, copy._step(sub), keys.step))
        return LazyStackedTensorDict(*outs, stack_dim=0)

    def reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        env = self.env
        mask = tensordict.get(K.RESET, None) if tensordict is not None else None
        chosen = set(U.chosen(mask, len(env._envs)))
        outs = []
        for i, (copy, keys) in enumerate(zip(env._envs, self.copy_keys)):
            if i not in chosen:  # its last reset, as for equal copies
                outs.append(self.last_reset[i].clone())
                continue
            sub = None
            if copy.batch_size and mask is not None and not bool(mask[i].all()):
                sub_mask = mask[i].to(copy.device)
                sub = TensorDict(
                    {K.RESET: sub_mask}, batch_size=copy.batch_size, device=copy.device
                )
            self.last_reset[i] = self._collected(i, copy._inner_reset(sub), keys.reset)
            outs.append(self.last_reset[i].copy())
        return LazyStackedTensorDict(*outs, stack_dim=0)


class LazyParallel(_LazyCopies):
    """The lazy part of a ``ParallelEnv`` whose copies' specs differ: shared buffers per
    copy."""

    def views(self) -> list[dict]:
        """Allocate the shared buffers; per copy, the views its worker steps through."""
        env, cpu = self.env, torch.device("cpu")
        env._mask_buf = torch.zeros((*env.batch_size, 1), dtype=torch.bool).share_memory_()
        self.in_rows, self.step_rows, self.reset_rows, views = [], [], [], []
        for i, (info, keys) in enumerate(zip(self.infos, self.copy_keys)):
            view = {"mask": env._mask_buf[i : i + 1]}
            for part, part_keys, rows in (
                ("input", keys.input, self.in_rows),
                ("step", keys.step, self.step_rows),
                ("reset", keys.reset, self.reset_rows),
            ):
                # [1, *env_batch, ...]: the worker runs a one-copy loop on them
                bufs = {k: _spec_of(info.specs, k).zero((1,)).to(cpu) for k in part_keys}
                for tensor in bufs.values():
                    tensor.share_memory_()
                view[part] = bufs
                rows.append((part_keys, [bufs[k][0] for k in part_keys]))
            views.append(view)
        return views

    def _outputs(self, rows: list) -> LazyStackedTensorDict:
        env = self.env
        tds = [
            U.td_from_leaves(keys, [env._export(b) for b in bufs], env._env_batch, env.device)
            for keys, bufs in rows
        ]
        return LazyStackedTensorDict(*tds, stack_dim=0)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        env = self.env
        for row, (keys, bufs) in zip(copies_of(tensordict, env.num_workers), self.in_rows):
            for key, buf in zip(keys, bufs):
                buf.copy_(row.get(key))
        env._step_workers()
        return self._outputs(self.step_rows)

    def reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        env = self.env
        env._reset_workers(tensordict.get(K.RESET, None) if tensordict is not None else None)
        return self._outputs(self.reset_rows)
