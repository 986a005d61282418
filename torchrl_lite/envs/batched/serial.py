"""``SerialEnv``: ``n`` copies of an env stepped one after the other in this process.

The copies run as one env of batch size ``[n, *env.batch_size]`` whose specs are the
single env's specs expanded to it; results are stacked leaf by leaf (copies that are plain
GymWrappers are stepped at the numpy level instead, see ``stepper/gym.py``: one array per
key for the whole batch). Each ``ParallelEnv`` worker runs this same loop over its group
of copies (``worker.py``).

Seeds: ``set_seed(seed)`` gives copy ``i`` the seed ``seed + i * env.batch_size.numel()``,
so ``SerialEnv``, ``ParallelEnv`` and the copies run on their own give the same rollouts.
Copies whose specs differ (multi-task) go through the lazy part in ``lazy.py``.
"""

from __future__ import annotations

import functools

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.batched.base import _BatchedEnv
from torchrl_lite.envs.batched.lazy import LazySerial
from torchrl_lite.envs.common import EnvBase

__all__ = ["SerialEnv"]


class SerialEnv(_BatchedEnv):
    """Run ``num_workers`` copies of an env one after the other, as one batched env.

    Args:
        num_workers: number of copies (>= 1).
        create_env_fn: a zero-argument callable returning an env, or a list of
            ``num_workers`` of them.
        create_env_kwargs: keyword arguments for ``create_env_fn`` (a dict, or a list of
            ``num_workers`` dicts).
        device: where the outputs go (default: the copies' device).
        spec_check: see ``EnvBase``.
        pin_memory: return outputs in page-locked memory (with CUDA; else ignored).
        serial_for_single: accepted for symmetry with ``ParallelEnv`` (no effect).

    Attributes the env lacks are read from the copies, one value each
    (``env.spec`` -> ``[copy0.spec, copy1.spec]``); a method is called on each.

    Copies whose specs differ (multi-task) are stacked lazily, as in TorchRL: data are
    ``LazyStackedTensorDict`` (``td[i]``: copy ``i``'s), specs the copies' specs stacked
    (``env.observation_spec[i]``: copy ``i``'s); same batch size and dtypes required.

    Example:
        >>> from torchrl_lite.envs import GymEnv, SerialEnv
        >>> env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
        >>> env.rollout(5, break_when_any_done=False).batch_size
        torch.Size([2, 5])
        >>> env.close()
        >>> makers = [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("MountainCarContinuous-v0")]
        >>> tasks = SerialEnv(2, makers)  # observations of 3 and 2 entries
        >>> td = tasks.rollout(3)  # a LazyStackedTensorDict
        >>> td[0]["observation"].shape, tasks.observation_spec[1]["observation"].shape
        (torch.Size([3, 3]), torch.Size([2]))
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn,
        create_env_kwargs=None,
        device=None,
        spec_check: str = "first",
        pin_memory: bool = False,
        serial_for_single: bool = False,
    ):
        self._envs: list[EnvBase] = []
        super().__init__(
            num_workers, create_env_fn, create_env_kwargs, device, spec_check, pin_memory
        )

    @classmethod
    def _from_envs(cls, envs: list[EnvBase]) -> SerialEnv:
        """A SerialEnv over envs already built and checked (used by ParallelEnv workers)."""
        return cls(len(envs), [functools.partial(_given, env) for env in envs])

    def _start(self, factories: list) -> list[U.EnvInfo]:
        infos = []
        for factory in factories:
            env = factory()
            infos.append(U.env_info(env))  # raises TypeError for a non-env
            self._envs.append(env)
        return infos

    def _lazy_part(self) -> LazySerial:
        return LazySerial(self)

    def _connect(self) -> None:
        if self._lazy is not None:
            self._lazy.connect()
            return
        # the leaves of each copy's last reset: a partial reset stacks them with the new ones
        state = self._single_specs["full_state_spec"]
        self._state_zeros = {k: state[k].zero().to(self._env_device) for k in self._state_keys}
        zeros = self._buffers(self._reset_keys, list(self._single_specs.values()), self._env_device)
        self._last_reset = [[zeros[k][i] for k in self._reset_keys] for i in range(len(self._envs))]
        self._flat = all(isinstance(k, str) for k in self._step_keys + self._reset_keys)
        self._flat_inputs = all(isinstance(k, str) for k in self._input_keys)
        self._move_outputs = self._env_device != self.device
        # every copy a plain GymWrapper: step and reset them at the numpy level
        self._group = type(self._envs[0])._batch_group(
            self._envs, self._input_keys, self._step_keys, self._reset_keys
        )

    def _shutdown(self) -> None:
        for env in self._envs:
            if not env.is_closed:
                env.close()

    def _reset_workers_state(self) -> None:
        self._envs = []

    def _worker_attr(self, name: str):
        values = [getattr(env, name) for env in self._envs]
        if all(callable(v) for v in values):
            return functools.partial(_call_each, values)
        return values

    # -- the serial loop (also what each ParallelEnv worker runs) ----------------------
    def _step_into(
        self, rows: list, out_rows: list | None = None, copies=None, keys: list | None = None
    ) -> list | None:
        """Step copy ``i`` with ``rows[i]`` (its ``keys`` leaves: ``_input_keys``, then
        the ``("next", state)`` entries the policy wrote, see ``_with_next``).

        Returns the results' ``_step_keys`` leaves stacked to ``[n, *env_batch, ...]``, or,
        with ``out_rows``, copies copy ``i``'s leaves into ``out_rows[i]`` (views of shared
        memory in a ParallelEnv worker) and returns None. With ``copies`` (positions),
        only those copies step, ``rows[j]`` and ``out_rows[j]`` being copy ``copies[j]``'s.
        """
        keys = self._input_keys if keys is None else keys
        flat_inputs = self._flat_inputs and len(keys) == len(self._input_keys)
        results, device = [], self._env_device
        move = bool(rows and rows[0]) and rows[0][0].device != device
        chosen = range(len(self._envs)) if copies is None else copies
        for j, (i, values) in enumerate(zip(chosen, rows)):
            env = self._envs[i]
            if move:
                values = [v.to(device) for v in values]
            if flat_inputs:
                sub = _td.new(dict(zip(keys, values)), env.batch_size, device)
            else:
                sub = U.td_from_leaves(keys, values, env.batch_size, device)
            values = self._collect(i, env._step(sub), self._step_keys)
            if out_rows is None:
                results.append(values)
            else:
                U.copy_row(out_rows[j], values)
        return U.stack(results) if out_rows is None else None

    def _reset_into(self, mask: torch.Tensor | None, out_rows: list | None = None) -> list | None:
        """Reset the copies selected by ``mask`` (``[n, *env_batch, 1]`` bool; None: all).

        Returns the ``_reset_keys`` leaves stacked to ``[n, *env_batch, ...]`` (copies not
        reset give their last reset values), or copies the reset copies' leaves into their
        ``out_rows`` and returns None.
        """
        for i in U.chosen(mask, len(self._envs)):
            env, sub = self._envs[i], None
            if env.batch_size and mask is not None and not bool(mask[i].all()):
                sub_mask = mask[i].to(env.device)
                sub = TensorDict({K.RESET: sub_mask}, batch_size=env.batch_size, device=env.device)
            # the reset hook, as TransformedEnv calls it (EnvBase.reset's merge of a partial
            # reset happens once, on the batched env)
            result = env._inner_reset(sub)
            values = self._collect(i, result, self._reset_keys)
            self._last_reset[i] = values
            if out_rows is not None:
                U.copy_row(out_rows[i], values)
        return U.stack(self._last_reset) if out_rows is None else None

    def _collect(self, i: int, result: TensorDictBase, keys: list) -> list[torch.Tensor]:
        """The leaves ``keys`` of copy ``i``'s ``result`` (a declared state entry that a
        reset leaves out gets its spec's zero; any other missing key raises KeyError)."""
        values = U.leaves(result, keys, self._flat)
        for j, value in enumerate(values):
            if value is None:
                key = keys[j]
                if key not in self._state_keys:
                    raise KeyError(
                        f"Env copy {i} ({self._env_name}) returned no {key!r}, which its specs "
                        f"declare. Returned keys: {list(result.keys(True, True))}."
                    )
                values[j] = self._state_zeros[key]
        return values

    # -- the copies of an indexed view (see view.py) ------------------------------------
    def _step_copies(self, copies: list[int], tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        keys, inputs = self._with_next(tensordict)
        values = self._step_into(U.rows(inputs, len(copies)), copies=copies, keys=keys)
        return self._copies_td(self._step_keys, values, len(copies))

    def _with_next(self, tensordict: TensorDictBase) -> tuple[list, list]:
        """The keys and ``[n, ...]`` values the copies step with: ``_input_keys``, then
        the ``("next", state)`` entries present in ``tensordict`` (``_next_inputs``)."""
        keys = self._input_keys
        inputs = [tensordict.get(key) for key in keys]
        nxt = self._next_inputs(tensordict)
        if any(v is not None for v in nxt):
            present = [(k, v) for k, v in zip(self._next_state_keys, nxt) if v is not None]
            keys = keys + [k for k, _ in present]
            inputs = inputs + [v for _, v in present]
        return keys, inputs

    def _reset_copies(self, copies: list[int], mask: torch.Tensor | None) -> TensorDictBase:
        self._check_usable()
        values = self._reset_into(_copies_mask(self, copies, mask))
        return self._copies_td(self._reset_keys, [v[copies] for v in values], len(copies))

    def _seed_copies(self, copies: list[int], seed: int) -> None:
        self._check_usable()
        for i in copies:
            seed = self._envs[i].set_seed(seed)

    def _copies_td(self, keys: list, values: list, n: int) -> TensorDictBase:
        values = [v.to(self.device) for v in values] if self._move_outputs else values
        return U.td_from_leaves(keys, values, (n, *self._env_batch), self.device, self._flat)

    # -- EnvBase hooks -----------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        if self._lazy is not None:
            return self._lazy.step(tensordict)
        if self._group is not None:
            arrays = self._group.step(tensordict.get(K.ACTION))
            values = [torch.from_numpy(array) for array in arrays]
        else:
            keys, inputs = self._with_next(tensordict)
            values = self._step_into(U.rows(inputs, self.num_workers), keys=keys)
        if self._move_outputs:
            values = [v.to(self.device) for v in values]
        return U.td_from_leaves(self._step_keys, values, self.batch_size, self.device, self._flat)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        if self._lazy is not None:
            return self._lazy.reset(tensordict)
        mask = tensordict.get(K.RESET, None) if tensordict is not None else None
        if self._group is not None:
            arrays = self._group.reset(U.chosen(mask, len(self._envs)))
            values = [torch.from_numpy(array) for array in arrays]
        else:
            values = self._reset_into(mask)
        if self._move_outputs:
            values = [v.to(self.device) for v in values]
        return U.td_from_leaves(self._reset_keys, values, self.batch_size, self.device, self._flat)

    def _numpy_stepper(self):
        """The copies' numpy-level group (every copy a plain GymWrapper, outputs on the
        copies' device); None otherwise (and for copies of different specs: stepped
        one by one)."""
        self._check_usable()
        if self._lazy is not None or self._move_outputs:
            return None
        return self._group

    def _set_seed(self, seed: int) -> None:
        self._check_usable()
        for env in self._envs:
            seed = env.set_seed(seed)

    # -- state (checkpoints) -----------------------------------------------------------
    def state_dict(self) -> dict:
        """The state of each copy (its ``state_dict()``), in order.

        Example:
            >>> from torchrl_lite.envs import PendulumEnv, SerialEnv
            >>> env = SerialEnv(2, PendulumEnv)
            >>> state = env.state_dict()
            >>> state["kind"], len(state["envs"])
            ('serial', 2)
            >>> env.load_state_dict(state)
            >>> env.close()
        """
        return {"kind": "serial", "envs": [env.state_dict() for env in self._envs]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned, into an env built the same way."""
        self._check_state_kind(state_dict, "serial")
        if len(self._envs) != len(state_dict["envs"]):
            raise ValueError(
                f"the checkpoint holds {len(state_dict['envs'])} SerialEnv copies, this env has "
                f"{len(self._envs)}; build the env as it was built when saved."
            )
        for env, env_state in zip(self._envs, state_dict["envs"]):
            env.load_state_dict(env_state)


def _given(env: EnvBase) -> EnvBase:
    return env


def _copies_mask(env, copies: list[int], mask: torch.Tensor | None) -> torch.Tensor:
    """The ``[n, *env_batch, 1]`` reset mask of ``env`` that resets ``copies`` (where
    ``mask``, the view's ``[len(copies), *env_batch, 1]`` mask, is set; all of them when
    None) and no other copy."""
    full = torch.zeros((*env.batch_size, 1), dtype=torch.bool)
    full[copies] = True if mask is None else mask.to("cpu", torch.bool).reshape(full[copies].shape)
    return full


def _call_each(methods: list, *args, **kwargs) -> list:
    return [method(*args, **kwargs) for method in methods]
