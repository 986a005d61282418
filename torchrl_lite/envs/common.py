"""EnvBase: the environment contract every env, wrapper and batched env follows.

A new environment subclasses ``EnvBase``, sets its specs in ``__init__`` and implements
three hooks:

* ``_reset(tensordict) -> TensorDict`` — the first observation (done flags optional);
  ``tensordict`` may carry ``"_reset"`` (a ``[*batch, 1]`` bool mask) for partial resets.
* ``_step(tensordict) -> TensorDict`` — reads ``"action"`` and returns the step's result:
  observations, ``"reward"``, ``"done"``, ``"terminated"``, ``"truncated"``. It must return
  new tensors (never modify the ones it returned earlier in place). A ``_step`` that
  writes only ``"done"`` gets ``terminated = done`` and ``truncated = False`` (one that
  writes only ``"terminated"``, ``done = terminated | truncated``), as in TorchRL.
* ``_set_seed(seed: int) -> None``.

An env may also offer a fourth, optional hook for speed:

* ``_numpy_stepper() -> NumpyStepper | None`` — an object that steps the env at the
  numpy level into buffers allocated once (the ``NumpyStepper`` protocol in
  ``envs/stepper``); random rollouts and collector batches then skip the per-step
  TensorDicts. It must give the values ``_step``/``_reset`` give; None (the default)
  keeps the general loop.

Everything else (``reset``, ``step``, ``step_and_maybe_reset``, ``rollout``, spec checks,
``state_dict``/``load_state_dict`` for checkpoints) is shared.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite._utils import check_device, missing_key_message
from torchrl_lite.data.tensor_specs import Categorical, Composite, TensorSpec, Unbounded, _size
from torchrl_lite.envs._action_bounds import (
    action_entries,
    check_action_value,
    check_batch_bounds,
    check_step_bounds,
)
from torchrl_lite.envs._module_like import ModuleLike, SpecSamples, _device_cast_policy
from torchrl_lite.envs._rollout import StepRecorder, merge_partial, set_next, update_in_place
from torchrl_lite.envs._step_checks import (
    _StepProbe,
    check_reset_input,
    check_rollout_args,
    check_step_output,
)
from torchrl_lite.envs.stepper import NumpyStepper
from torchrl_lite.envs.stepper.rollout import fast_rollout
from torchrl_lite.envs.utils import step_mdp

__all__ = ["EnvBase"]

# the "kind" of each env state_dict: EnvBase, TransformedEnv, SerialEnv, ParallelEnv, GymWrapper
_STATE_KINDS = ("generic", "transformed", "serial", "none", "gym")
_SPEC_CHECKS = ("first", "always", "never", "strict")
_CHECK_ONCE = ("first", "strict")  # spec_check values that check the first step only


class EnvBase(ModuleLike, SpecSamples):
    """Base class of environments that read and write TensorDicts.

    Args:
        device: where the env's tensors live (default CPU).
        batch_size: leading dims of every tensor the env produces (``[]`` for one env).
        spec_check: ``"first"`` (default) validates the action against ``action_spec`` on
            the first ``step`` and the first step of each rollout; ``"always"`` on every
            step; ``"never"`` skips the check. A float action beyond a ``Bounded`` spec
            warns once (and is passed on: the env may clip it), also when it happens on
            a later step of a rollout or collector batch; ``"strict"`` (checks as
            ``"first"``) raises instead. Wrong shapes, dtypes and discrete values raise.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> env = PendulumEnv()
        >>> env.rollout(3).batch_size
        torch.Size([3])
    """

    batch_locked = True  # False: the env accepts any leading batch in step/reset
    _requires_reset = True
    _bounds_per_batch = False  # True inside a rollout, which checks the action bounds at its end

    # -- the contract ----------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _reset")

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _step")

    def _set_seed(self, seed: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _set_seed")

    # -- construction and specs ------------------------------------------------------
    def __init__(self, *, device=None, batch_size=None, spec_check: str = "first"):
        if spec_check not in _SPEC_CHECKS:
            raise ValueError(f"spec_check must be one of {list(_SPEC_CHECKS)}, got {spec_check!r}")
        self.device = check_device(device, type(self).__name__)
        self.batch_size = _size(batch_size)
        self.spec_check = spec_check
        self._checked_action = spec_check == "never"
        self._is_reset = False
        self.is_closed = False
        self.full_observation_spec = Composite(shape=self.batch_size, device=self.device)
        self.full_state_spec = Composite(shape=self.batch_size, device=self.device)
        self.full_action_spec = Composite(shape=self.batch_size, device=self.device)
        self.full_reward_spec = Composite(
            reward=Unbounded(self.batch_size + (1,), device=self.device), shape=self.batch_size
        )
        self.full_done_spec = self._default_done_spec()
        # the first _step call goes through a probe that fills the done flags a _step
        # leaves out (see _StepProbe); after it, _step is the class's own (or a filler)
        self._step = _StepProbe(self)

    def _default_done_spec(self) -> Composite:
        flag = Categorical(2, self.batch_size + (1,), device=self.device, dtype=torch.bool)
        return Composite(
            {key: flag.clone() for key in K.DONE_KEYS}, shape=self.batch_size, device=self.device
        )

    def _with_batch(self, spec):
        """Prepend the env's batch dims to a spec that does not have them yet.

        A leaf spec whose shape already starts with the batch dims is taken as batched:
        when that is ambiguous (``OneHot(2)`` in an env of batch ``[2]``), set the spec
        already expanded.
        """
        if spec is None or spec.shape[: len(self.batch_size)] == self.batch_size:
            return spec.to(self.device) if spec is not None else None
        return spec.expand(*self.batch_size, *spec.shape).to(self.device)

    @property
    def observation_spec(self) -> Composite:
        return self.full_observation_spec

    @observation_spec.setter
    def observation_spec(self, spec: Composite) -> None:
        if not isinstance(spec, Composite):
            raise TypeError(f"observation_spec must be a Composite, got {type(spec).__name__}")
        self.full_observation_spec = self._with_batch(spec)

    @property
    def state_spec(self) -> Composite:
        return self.full_state_spec

    @state_spec.setter
    def state_spec(self, spec: Composite) -> None:
        self.full_state_spec = self._with_batch(spec)

    @property
    def action_key(self):
        return self.full_action_spec.keys(True, True)[0]

    @property
    def action_spec(self) -> TensorSpec:
        """The spec of ``"action"`` (a leaf spec, with the env's batch dims)."""
        return self.full_action_spec[self.action_key]

    @action_spec.setter
    def action_spec(self, spec: TensorSpec | Composite) -> None:
        if isinstance(spec, Composite):
            self.full_action_spec = self._with_batch(spec)
        else:
            self.full_action_spec = Composite(
                {K.ACTION: self._with_batch(spec)}, shape=self.batch_size, device=self.device
            )

    @property
    def reward_key(self):
        return self.full_reward_spec.keys(True, True)[0]

    @property
    def reward_spec(self) -> TensorSpec:
        return self.full_reward_spec[self.reward_key]

    @reward_spec.setter
    def reward_spec(self, spec: TensorSpec) -> None:
        self.full_reward_spec = Composite(
            {K.REWARD: self._with_batch(spec)}, shape=self.batch_size, device=self.device
        )

    @property
    def done_spec(self) -> Composite:
        """The specs of ``"done"``, ``"terminated"`` and ``"truncated"``."""
        return self.full_done_spec

    @done_spec.setter
    def done_spec(self, spec: Composite) -> None:
        self.full_done_spec = self._with_batch(spec)

    # -- training mode (TorchRL's envs are nn.Modules: env.train() / env.eval()) -------
    training = True

    def train(self, mode: bool = True) -> EnvBase:
        """Set the training mode (stateful transforms, e.g. ``RNDTransform``, update their
        statistics only in training mode); returns the env."""
        self.training = bool(mode)
        return self

    def eval(self) -> EnvBase:
        """``train(False)``."""
        return self.train(False)

    @property
    def done_keys(self) -> list:
        return self.full_done_spec.keys(True, True)

    @property
    def input_spec(self) -> Composite:
        """What ``step`` reads: the action and any state entries."""
        spec = self.full_state_spec.clone()
        return spec.update(self.full_action_spec)

    @property
    def output_spec(self) -> Composite:
        """What ``step`` writes under ``"next"``: observations, reward and done flags."""
        spec = self.full_observation_spec.clone()
        return spec.update(self.full_reward_spec).update(self.full_done_spec)

    @property
    def specs(self) -> Composite:
        """All specs in TorchRL's nesting: ``specs["input_spec", "full_action_spec", "action"]``,
        ``specs["output_spec", "full_observation_spec", ...]`` (clones; batch = the env's)."""
        batch = self.batch_size
        return Composite(
            input_spec=Composite(
                full_action_spec=self.full_action_spec.clone(),
                full_state_spec=self.full_state_spec.clone(),
                shape=batch,
            ),
            output_spec=Composite(
                full_observation_spec=self.full_observation_spec.clone(),
                full_reward_spec=self.full_reward_spec.clone(),
                full_done_spec=self.full_done_spec.clone(),
                shape=batch,
            ),
            shape=batch,
        )

    # -- seeding ---------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the env and return the next unused seed (for the next env or worker)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            if (
                isinstance(seed, torch.Tensor)
                and seed.numel() == 1
                and not seed.dtype.is_floating_point
            ):
                seed = int(seed)
            else:
                raise TypeError(f"set_seed expects an int, got {seed!r} ({type(seed).__name__})")
        self._set_seed(seed)
        return seed if static_seed else seed + max(1, self.batch_size.numel())

    # -- state (checkpoints) -----------------------------------------------------------
    def state_dict(self) -> dict:
        """A snapshot of what continuing this env exactly needs (RNG and internal state).

        The base class saves the env's ``torch.Generator`` attributes (e.g.
        ``PendulumEnv.rng``); wrappers, batched envs and gymnasium envs add their own
        parts. The ``"kind"`` entry says which env class wrote it.

        Example:
            >>> from torchrl_lite.envs import PendulumEnv
            >>> env = PendulumEnv(seed=0)
            >>> state = env.state_dict()
            >>> first = env.reset()["th"]
            >>> env.load_state_dict(state)
            >>> bool(env.reset()["th"] == first)
            True
        """
        generators = {
            k: v.get_state() for k, v in vars(self).items() if isinstance(v, torch.Generator)
        }
        return {"kind": "generic", "generators": generators}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned, into an env built the same way."""
        self._check_state_kind(state_dict, "generic")
        for name, gen_state in state_dict["generators"].items():
            generator = getattr(self, name, None)
            if not isinstance(generator, torch.Generator):
                raise ValueError(
                    f"the checkpoint has a generator {name!r} that {type(self).__name__} lacks; "
                    f"build the env as it was built when saved."
                )
            generator.set_state(gen_state)

    def _check_state_kind(self, state_dict: dict, kind: str) -> None:
        """Raise ValueError unless ``state_dict`` is an env state of ``kind``."""
        got = state_dict.get("kind") if isinstance(state_dict, dict) else None
        if got == kind:
            return
        if got not in _STATE_KINDS:
            raise ValueError(
                f"unknown env state kind {got!r} in the checkpoint; expected an env's "
                f"state_dict() (kind one of {list(_STATE_KINDS)})."
            )
        raise ValueError(
            f"{type(self).__name__} expects an env state of kind {kind!r}, got one of kind "
            f"{got!r}; build the env as it was built when saved."
        )

    # -- reset / step ------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self.is_closed:
            raise RuntimeError(f"Cannot {what} {type(self).__name__}: the env is closed.")

    def reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        """Reset the env and return a TensorDict with the first observation and done flags.

        If ``tensordict`` holds ``"_reset"`` (bool, ``[*batch, 1]``), only those sub-envs
        are reset and the other entries keep their values from ``tensordict``. A given
        ``tensordict`` is updated in place with the reset's entries (its ``"_reset"``
        removed) and returned, as in TorchRL.
        """
        self._check_open("reset")
        if tensordict is not None and self.batch_locked:
            check_reset_input(self, tensordict)
        if kwargs:
            tensordict = (
                TensorDict(kwargs, batch_size=self.batch_size)
                if tensordict is None
                else tensordict.update(kwargs)
            )
        reset_mask = _get(tensordict, K.RESET) if tensordict is not None else None
        out = self._inner_reset(tensordict)
        if reset_mask is not None and not bool(reset_mask.all()):
            out = merge_partial(tensordict, out, reset_mask)
        if tensordict is not None:
            out = update_in_place(tensordict, out)
        return out

    def _inner_reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        """``_reset`` with the bookkeeping of ``reset`` (the done flags it left out, the
        env marked as reset), without the merge of a partial reset into ``tensordict``.

        What a wrapper or a batched env calls on the env it holds: the merge happens once,
        in the outer env's ``reset``.
        """
        out = self._reset(tensordict)
        self._fill_done(out)
        self._is_reset = True
        return out

    def _fill_done(self, td: TensorDictBase) -> None:
        """Add the done flags a ``_reset`` left out (all False)."""
        store = _td.store(td)
        for key in self.done_keys:
            if store is not None and isinstance(key, str):  # a dict lookup: this runs per reset
                if key not in store:
                    flag = torch.zeros((*td.batch_size, 1), dtype=torch.bool, device=td.device)
                    store[key] = flag
            elif td.get(key, None) is None:
                td.set(key, torch.zeros((*td.batch_size, 1), dtype=torch.bool, device=td.device))

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply ``tensordict["action"]``; write the results under ``"next"``; return it."""
        if self._requires_reset and not self._is_reset:
            self._check_open("step")
            raise RuntimeError(f"Call reset() before step() on {type(self).__name__}.")
        checking = not self._checked_action
        if checking:
            self._check_action(tensordict)
        elif self.spec_check != "never" and not self._bounds_per_batch:
            check_step_bounds(self, tensordict)  # later steps: float actions against bounds
        next_td = self._step(tensordict)
        if checking:  # the first step's output against the specs (see _step_checks.py)
            check_step_output(self, next_td)
        set_next(tensordict, next_td)
        return tensordict

    @classmethod
    def _batch_group(cls, envs: list, input_keys: list, step_keys: list, reset_keys: list):
        """A faster way to step ``envs`` (copies of this class) as one batch, or None.

        ``SerialEnv`` (and so each ``ParallelEnv`` worker) asks the class of its copies.
        The object returned (a ``NumpyGroup``, ``envs/stepper``) steps every copy with
        ``step(action) -> arrays`` and resets the chosen ones with ``reset(chosen) ->
        arrays`` (numpy arrays in ``step_keys`` / ``reset_keys`` order, batch first); the
        default (None) steps each copy through ``_step``. ``GymWrapper`` offers one that
        calls gymnasium directly.
        """
        return None

    def _post_step_mdp_hook(self):
        """A callable ``(step_td, next_root) -> None`` that every stepping loop runs after
        ``step_mdp`` and before recording the step, or None (the default). TransformedEnv
        returns its transforms' ``_post_step_mdp`` (``NextObservationDelta``)."""
        return None

    def _numpy_stepper(self) -> NumpyStepper | None:
        """An object that steps this env at the numpy level, or None (the default).

        ``rollout`` with random actions and ``SyncDataCollector`` use it to skip the
        per-step TensorDicts; ``envs/stepper/__init__.py`` states the contract.
        ``GymWrapper``, ``SerialEnv`` over plain GymWrappers, ``ParallelEnv`` and a
        ``TransformedEnv`` over one of them (transforms with a numpy form) offer one.
        """
        return None

    def _check_action(self, tensordict: TensorDictBase) -> None:
        self._check_open("step")
        for key, spec, value in action_entries(self, tensordict):  # copy by copy if they differ
            if value is None:
                raise KeyError(
                    f"step() needs {key!r} in its input. "
                    + missing_key_message(key, tensordict.keys(True, True))
                )
            if self.batch_locked and spec.shape[: len(self.batch_size)] == self.batch_size:
                if value.shape != spec.shape:
                    raise ValueError(
                        f"Action {key!r} has shape {list(value.shape)}, expected {list(spec.shape)} from {spec}."
                    )
            check_action_value(self, key, spec, value)
        self._checked_action = self.spec_check in _CHECK_ONCE

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Step, then return ``(tensordict_with_next, root_for_next_step)``.

        The root for the next step is ``step_mdp`` of the result, with the sub-envs that
        are done reset (only those, for batched envs).
        """
        tensordict = self.step(tensordict)
        root = step_mdp(tensordict)
        hook = self._post_step_mdp_hook()
        if hook is not None:
            hook(tensordict, root)
        done = _get(root, K.DONE)
        if done is None:
            raise KeyError(missing_key_message(K.DONE, root.keys(True, True)))
        if bool(done.any() if self.batch_size else done):
            if self.batch_size:
                _set(root, K.RESET, done.clone())
            root = self.reset(root)
        return tensordict, root

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a random action (from ``action_spec.rand()``) into ``tensordict``."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size, device=self.device)
        cache = self.__dict__.get("_action_items")
        if cache is None or cache[0] is not self.full_action_spec:
            cache = self._action_items = (
                self.full_action_spec,
                self.full_action_spec.items(True, True),
            )
        extra = (
            None
            if self.batch_locked
            else tensordict.batch_size[: tensordict.ndim - len(self.batch_size)]
        )
        # a plain TensorDict on the spec's device takes the drawn leaf without the checks
        # of ``set`` (``rand`` gives the right shape and device): this runs every step
        store = _td.store(tensordict)
        if store is not None and tensordict.device not in (None, self.device):
            store = None
        for key, spec in cache[1]:
            if store is not None and isinstance(key, str):
                store[key] = spec.rand(extra)
            else:
                tensordict.set(key, spec.rand(extra))
        return tensordict

    # -- rollout ---------------------------------------------------------------------
    def rollout(  # noqa: C901 (one branch per option of TorchRL's rollout())
        self,
        max_steps: int,
        policy=None,
        callback=None,
        auto_reset: bool = True,
        break_when_any_done: bool = True,
        break_when_all_done: bool = False,
        return_contiguous: bool = True,
        tensordict: TensorDictBase | None = None,
        auto_cast_to_device: bool = False,
    ) -> TensorDictBase:
        """Run up to ``max_steps`` steps and return a ``[*batch, T]`` TensorDict.

        Args:
            max_steps: number of steps (>= 1).
            policy: a callable TensorDict -> TensorDict writing ``"action"``; random actions
                from ``action_spec`` when None.
            callback: called as ``callback(env, tensordict)`` after each step.
            auto_reset: reset before the first step (else ``tensordict`` is the start).
            break_when_any_done: stop at the first step where any sub-env is done;
                otherwise done sub-envs are reset and the rollout goes on.
            break_when_all_done: stop when every sub-env is done.
            return_contiguous: return contiguous tensors (always true here).
            tensordict: the initial TensorDict (required when ``auto_reset=False``).
            auto_cast_to_device: move each step's TensorDict to the policy's device (that
                of its first parameter) before calling it, and its output back to the env's.
        """
        check_rollout_args(max_steps, policy, callback)
        if auto_cast_to_device and policy is not None:
            policy = _device_cast_policy(policy, self.device)
        self._check_open("roll out")
        if auto_reset:
            td = self.reset(tensordict)
        elif tensordict is None:
            raise ValueError("rollout(auto_reset=False) needs the initial tensordict")
        else:
            td = tensordict
        self._checked_action = self.spec_check == "never"
        if policy is None and callback is None and auto_reset and self.spec_check != "always":
            stepper = self._numpy_stepper()
            out = (
                None
                if stepper is None
                else fast_rollout(
                    self, stepper, td, max_steps, break_when_any_done, break_when_all_done
                )
            )
            if out is not None:
                self._checked_action = self.spec_check in _CHECK_ONCE or self._checked_action
                return out
        recorder = StepRecorder(max_steps)
        batch_dims = len(td.batch_size)
        hook = self._post_step_mdp_hook()
        # without a break condition or a callback (which must see the env before the
        # reset), each step but the last goes through step_and_maybe_reset: the same
        # step, step_mdp and reset of the done sub-envs, which ParallelEnv does in one
        # message per worker (step() checks the env was reset: keep the direct path for
        # a rollout from a given tensordict of an env never reset)
        fused = (
            not (break_when_any_done or break_when_all_done)
            and callback is None
            and (self._is_reset or not self._requires_reset)
        )
        for t in range(max_steps):
            td = self.rand_action(td) if policy is None else policy(td)
            if fused and t < max_steps - 1:
                self._bounds_per_batch = True  # checked on the whole rollout below
                try:
                    td_step, td = self.step_and_maybe_reset(td)
                finally:
                    self._bounds_per_batch = False
                recorder.record(td_step)
                continue
            checking = not self._checked_action
            if checking:
                self._check_action(td)
            next_td = self._step(td)  # reset was checked above: skip step()'s checks
            if checking:
                check_step_output(self, next_td)
            set_next(td, next_td)
            root = None
            if hook is not None:  # it may drop entries from the recorded step
                root = step_mdp(td)
                hook(td, root)
            recorder.record(td)
            if callback is not None:
                callback(self, td)
            done = _td.get(next_td, K.DONE)
            if batch_dims == 0:
                any_done = all_done = bool(done)
            else:
                any_done = bool(done.any())
                all_done = any_done and bool(done.all())
            if (break_when_any_done and any_done) or (break_when_all_done and all_done):
                break
            if t == max_steps - 1:
                break
            td = step_mdp(td) if root is None else root
            if any_done:
                if batch_dims:
                    td.set(K.RESET, done.clone())
                td = self.reset(td)
        out = recorder.result(td.batch_size, td.device)
        check_batch_bounds(self, out, time_dim=batch_dims)  # an overshoot on any step
        return out

    # -- life cycle ------------------------------------------------------------------
    def close(self, *, raise_if_closed: bool = False) -> None:
        """Release the env. Closing it again does nothing, or raises ``RuntimeError`` with
        ``raise_if_closed=True`` (TorchRL's default)."""
        if self.is_closed and raise_if_closed:
            raise RuntimeError(f"{type(self).__name__} is already closed")
        self.is_closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={list(self.batch_size)}, device={self.device})"


_get = _td.get
_set = _td.set
