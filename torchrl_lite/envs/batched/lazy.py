"""Batched envs over copies whose specs differ (multi-task): outputs are lazy stacks.

``SerialEnv``/``ParallelEnv`` over copies of equal specs stack their results leaf by leaf
(``batched_envs.py``). When the copies' specs differ (other observation shapes or bounds,
a key only some copies have), ``_BatchedEnv.__init__`` turns the env into the lazy
variant of its class defined here, as TorchRL does:

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
copy and a continuous one in another). The equal-specs classes are not touched: their
per-step code has no branch for this.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data._spec_stack import StackedComposite, copies_of, stack_specs
from torchrl_lite.envs import _batched_utils as U
from torchrl_lite.envs._action_bounds import check_action_value
from torchrl_lite.envs.batched_envs import ParallelEnv, SerialEnv
from torchrl_lite.envs.common import _CHECK_ONCE

__all__ = ["lazy_class", "is_lazy_env"]


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


class _LazyBatched:
    """What the lazy ``SerialEnv`` and ``ParallelEnv`` share: specs and actions per copy."""

    def _numpy_stepper(self):
        """None: copies of different specs are stepped one by one (no numpy batch)."""
        return None

    def _set_specs(self, infos: list) -> None:
        first = infos[0]
        self._infos = infos
        self._env_batch, self._env_device = first.batch_size, first.device
        names = list(dict.fromkeys(info.name for info in infos))
        self._env_name = f"[{', '.join(names)}]"
        for name in U.SPEC_NAMES:
            try:
                spec = stack_specs([info.specs[name] for info in infos])
            except (TypeError, ValueError) as err:
                raise type(err)(
                    f"{type(self).__name__}: the copies' {name} cannot be stacked: {err}"
                ) from None
            setattr(self, name, spec.to(self.device))
        self._copy_keys = [_layout(info.specs) for info in infos]
        # the keys every copy has (ParallelEnv.step_and_maybe_reset looks for "done")
        self._input_keys = _common([c.input for c in self._copy_keys])
        self._step_keys = _common([c.step for c in self._copy_keys])
        self._reset_keys = _common([c.reset for c in self._copy_keys])

    def _check_restart_specs(self, infos: list) -> None:
        for i, (old, new) in enumerate(zip(self._infos, infos)):
            for name in U.SPEC_NAMES:
                if old.specs[name] != new.specs[name]:
                    raise ValueError(
                        f"{type(self).__name__}: after close(), env copy {i} came back with "
                        f"another {name} ({new.specs[name]!r}, was {old.specs[name]!r}); its "
                        "factory must build the same env each time."
                    )

    def _empty(self) -> LazyStackedTensorDict:
        rows = [
            TensorDict({}, batch_size=self._env_batch, device=self.device)
            for _ in range(self.num_workers)
        ]
        return LazyStackedTensorDict(*rows, stack_dim=0)

    def _action_items(self) -> list:
        """Per copy, ``(key, spec)`` of its action leaves (cached per action spec)."""
        spec = self.full_action_spec
        cache = self.__dict__.get("_copy_action_items")
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
        if tensordict is None:
            tensordict = self._empty()
        if not isinstance(tensordict, LazyStackedTensorDict):
            if isinstance(self.full_action_spec, StackedComposite):
                raise TypeError(
                    f"{type(self).__name__}: the copies' action specs differ, so actions go "
                    "in a LazyStackedTensorDict (the one reset() or step_mdp returns), got "
                    f"a {type(tensordict).__name__}."
                )
            return tensordict.update(self.full_action_spec.rand())
        rows = copies_of(tensordict, self.num_workers)
        for row, items in zip(rows, self._action_items()):
            for key, spec in items:
                row.set(key, spec.rand())
        return tensordict

    def _check_action(self, tensordict: TensorDictBase) -> None:
        self._check_open("step")
        rows = copies_of(tensordict, self.num_workers)
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
                check_action_value(self, key, spec, value)
        self._checked_action = self.spec_check in _CHECK_ONCE

    def fake_tensordict(self) -> TensorDictBase:
        """Per copy, a zero-filled TensorDict with every key its step reads and writes."""
        rows = []
        for i in range(self.num_workers):
            obs, state, action, reward, done = (getattr(self, n)[i] for n in U.SPEC_NAMES)
            root = obs.zero()
            for spec in (state, done, action):
                root.update(spec.zero())
            nxt = obs.zero()
            nxt.update(reward.zero())
            nxt.update(done.zero())
            root.set(K.NEXT, nxt)
            rows.append(root)
        return LazyStackedTensorDict(*rows, stack_dim=0)


class _LazySerial(_LazyBatched):
    """``SerialEnv`` over copies of different specs: each copy stepped on its own."""

    def _connect(self) -> None:
        self._group = None
        self._move_outputs = self._env_device != self.device
        self._state_zeros, self._last_reset = [], []
        for info, keys in zip(self._infos, self._copy_keys):
            state = info.specs["full_state_spec"]
            self._state_zeros.append({k: state[k].zero() for k in keys.state})
            zeros = [_spec_of(info.specs, k).zero().to(self.device) for k in keys.reset]
            self._last_reset.append(
                U.td_from_leaves(keys.reset, zeros, self._env_batch, self.device)
            )

    def _collected(self, i: int, result: TensorDictBase, keys: list) -> TensorDictBase:
        """Copy ``i``'s ``keys`` from its ``result`` (a declared state entry it leaves out
        gets its spec's zero; any other missing key raises KeyError), on ``self.device``."""
        flat = self._copy_keys[i].flat
        values = U.leaves(result, keys, flat)
        for j, value in enumerate(values):
            if value is None:
                if keys[j] not in self._copy_keys[i].state:
                    raise KeyError(
                        f"Env copy {i} ({self._infos[i].name}) returned no {keys[j]!r}, which "
                        f"its specs declare. Returned keys: {list(result.keys(True, True))}."
                    )
                values[j] = self._state_zeros[i][keys[j]]
        if self._move_outputs:
            values = [v.to(self.device) for v in values]
        return U.td_from_leaves(keys, values, self._env_batch, self.device, flat)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        outs = []
        rows = copies_of(tensordict, self.num_workers)
        for i, (env, row, keys) in enumerate(zip(self._envs, rows, self._copy_keys)):
            values = U.leaves(row, keys.input, keys.flat)  # what step reads, as for equal copies
            if any(v is None for v in values):  # the env raises what is missing
                sub = row.select(*keys.input, strict=False).to(env.device)
            else:
                values = [v.to(env.device) for v in values]
                sub = U.td_from_leaves(keys.input, values, env.batch_size, env.device, keys.flat)
            outs.append(self._collected(i, env._step(sub), keys.step))
        return LazyStackedTensorDict(*outs, stack_dim=0)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        mask = tensordict.get(K.RESET, None) if tensordict is not None else None
        chosen = set(U.chosen(mask, len(self._envs)))
        outs = []
        for i, (env, keys) in enumerate(zip(self._envs, self._copy_keys)):
            if i not in chosen:  # its last reset, as for equal copies
                outs.append(self._last_reset[i].clone())
                continue
            sub = None
            if env.batch_size and mask is not None and not bool(mask[i].all()):
                sub_mask = mask[i].to(env.device)
                sub = TensorDict({K.RESET: sub_mask}, batch_size=env.batch_size, device=env.device)
            self._last_reset[i] = self._collected(i, env._inner_reset(sub), keys.reset)
            outs.append(self._last_reset[i].copy())
        return LazyStackedTensorDict(*outs, stack_dim=0)


class _LazyParallel(_LazyBatched):
    """``ParallelEnv`` over copies of different specs: shared buffers per copy."""

    def _connect(self) -> None:
        cpu = torch.device("cpu")
        self._mask_buf = torch.zeros((*self.batch_size, 1), dtype=torch.bool).share_memory_()
        self._in_rows, self._step_rows, self._reset_rows, views = [], [], [], []
        for i, (info, keys) in enumerate(zip(self._infos, self._copy_keys)):
            view = {"mask": self._mask_buf[i : i + 1]}
            for part, part_keys, rows in (
                ("input", keys.input, self._in_rows),
                ("step", keys.step, self._step_rows),
                ("reset", keys.reset, self._reset_rows),
            ):
                # [1, *env_batch, ...]: the worker runs a one-copy loop on them
                bufs = {k: _spec_of(info.specs, k).zero((1,)).to(cpu) for k in part_keys}
                for tensor in bufs.values():
                    tensor.share_memory_()
                view[part] = bufs
                rows.append((part_keys, [bufs[k][0] for k in part_keys]))
            views.append(view)
        for w, (lo, hi) in enumerate(self._groups):
            self._conns[w].send(views[lo:hi])  # a list: the worker runs a _CopiesLoop
        self._all = list(range(len(self._conns)))
        self._wait(self._all, "start-up (attaching shared memory)")

    def _outputs(self, rows: list) -> LazyStackedTensorDict:
        tds = [
            U.td_from_leaves(keys, [self._export(b) for b in bufs], self._env_batch, self.device)
            for keys, bufs in rows
        ]
        return LazyStackedTensorDict(*tds, stack_dim=0)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        for row, (keys, bufs) in zip(copies_of(tensordict, self.num_workers), self._in_rows):
            for key, buf in zip(keys, bufs):
                buf.copy_(row.get(key))
        self._step_workers()
        return self._outputs(self._step_rows)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        self._reset_workers(tensordict.get(K.RESET, None) if tensordict is not None else None)
        return self._outputs(self._reset_rows)


class LazySerialEnv(_LazySerial, SerialEnv):
    """A ``SerialEnv`` whose copies' specs differ (built by ``SerialEnv`` itself)."""


class LazyParallelEnv(_LazyParallel, ParallelEnv):
    """A ``ParallelEnv`` whose copies' specs differ (built by ``ParallelEnv`` itself)."""


# messages and reprs name the class the user built
LazySerialEnv.__name__, LazyParallelEnv.__name__ = "SerialEnv", "ParallelEnv"
_CLASSES: dict = {SerialEnv: LazySerialEnv, ParallelEnv: LazyParallelEnv}


def lazy_class(cls: type) -> type:
    """The lazy variant of a batched env class (a user subclass gets its own)."""
    if issubclass(cls, _LazyBatched):
        return cls
    if cls not in _CLASSES:
        mixin = _LazyParallel if issubclass(cls, ParallelEnv) else _LazySerial
        _CLASSES[cls] = type(cls.__name__, (mixin, cls), {"__module__": cls.__module__})
    return _CLASSES[cls]
