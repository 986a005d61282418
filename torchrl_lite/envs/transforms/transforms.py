"""Transform and Compose: the contract every env transform follows.

A transform reads ``in_keys`` and writes ``out_keys`` of what an env produces (the reset
output and each step's ``"next"`` entries); it may also change the action on its way into
the env, reading ``out_keys_inv`` (the policy's names) and writing ``in_keys_inv`` (the
env's names). A new transform is a small subclass that overrides what it needs:

* ``_apply_transform(x)`` — the maths on one tensor, applied to each in_key -> out_key.
* ``_inv_apply_transform(x)`` — the same for actions (out_keys_inv -> in_keys_inv).
* ``transform_observation_spec(spec)`` and ``transform_reward_spec``,
  ``transform_done_spec``, ``transform_action_spec``, ``transform_state_spec`` — the
  specs after this transform; the default maps each in_key's spec through
  ``_apply_transform`` (bounds included).
* ``_call(next_td)``, ``_step(td, next_td)``, ``_reset(td, td_reset)``, ``_inv_call(td)``
  — for transforms with state or that read several entries at once.
* ``_attach(specs)`` — called with the parent env's specs when the transform joins a
  ``TransformedEnv``: resolve default keys and read bounds or shapes once, so that each
  step does only tensor work. It must give the same result when called again.
* ``_numpy_form()`` (optional) — the same transform at the numpy level, so that random
  rollouts and collector batches of a ``TransformedEnv`` skip the per-step TensorDicts
  (``envs/stepper``); not inherited by subclasses.
"""

from __future__ import annotations

import copy
import functools
import weakref

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Composite, TensorSpec
from torchrl_lite.envs.transforms._utils import (  # noqa: F401  (re-exported for transforms)
    AbsentKeyError,
    EnvSpecs,
    _as_tuple,
    _norm_key,
    _norm_keys,
    _reset_mask,
    map_leaf_spec,
    require_keys,
    td_get,
    td_set,
)

__all__ = ["Transform", "Compose", "EnvSpecs", "FunctionTransform"]


class Transform(nn.Module):
    """Base class of env transforms; also applicable to a stored TensorDict (``forward``).

    Args:
        in_keys: entries read after ``reset`` and ``step`` (and by ``forward``).
        out_keys: entries written; default: ``in_keys`` (transform in place).
        in_keys_inv: action entries as the wrapped env names them (written by ``_inv_call``).
        out_keys_inv: the same entries as the policy names them (read); default: ``in_keys_inv``.

    Example:
        >>> class Double(Transform):
        ...     def _apply_transform(self, x):
        ...         return x * 2
        >>> Double(in_keys=["observation"])(TensorDict({"observation": torch.ones(2)}, []))["observation"]
        tensor([2., 2.])
    """

    # why the env skips this transform (none of its keys is in the env's specs), or None
    _absent: str | None = None

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__()
        self._env_ref = None
        self._in_keys = _norm_keys(in_keys)
        self._out_keys = None if out_keys is None else _norm_keys(out_keys)
        self._in_keys_inv = _norm_keys(in_keys_inv)
        self._out_keys_inv = None if out_keys_inv is None else _norm_keys(out_keys_inv)
        self._update_pairs()

    # -- the contract ----------------------------------------------------------------
    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        """The transform of one tensor (in_key -> out_key); identity by default."""
        return x

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse transform of one action tensor (out_key_inv -> in_key_inv)."""
        return x

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transform a step's ``"next"`` entries or a reset output (missing keys skipped)."""
        for in_key, out_key in self._pairs:
            value = td_get(next_tensordict, in_key)
            if value is not None:
                td_set(next_tensordict, out_key, self._apply_transform(value))
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Map the policy's entries (out_keys_inv) to the env's (in_keys_inv) before a step."""
        for in_key, out_key in self._inv_pairs:
            value = td_get(tensordict, out_key)
            if value is not None:
                td_set(tensordict, in_key, self._inv_apply_transform(value))
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """After a step: ``tensordict`` is the step's input, ``next_tensordict`` its output."""
        return self._call(next_tensordict)

    def _numpy_form(self):
        """This transform as a ``NumpyForm`` (``envs/stepper/__init__.py``), or None (the
        default: a ``TransformedEnv`` holding it steps through the general loop).

        A form computes what ``_step``/``_reset`` do, on ``[T, n, ...]`` numpy buffers
        (``tests/envs/test_fast_rollout.py`` compares the two). Only the class that
        defines it offers it: a subclass may change what a step does, so it names the
        form again (``_numpy_form = Parent._numpy_form``) to keep it.
        """
        return None

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Before the wrapped env resets: the TensorDict its ``_reset`` gets (e.g. one of
        another batch size, ``BatchSizeTransform``); identity by default."""
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        """After a reset: ``tensordict`` is reset's input (may hold ``"_reset"``) or None."""
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._map_specs(observation_spec)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._map_specs(reward_spec)

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        return self._map_specs(done_spec)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._map_inv_specs(action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._map_inv_specs(state_spec)

    def _has_inverse(self) -> bool:
        """Whether ``_inv_call`` does anything (else the env skips it, and a copy, per step)."""
        return bool(self._inv_pairs) or type(self)._inv_call is not Transform._inv_call

    def _root_keys_read(self) -> list:
        """Entries ``_step`` reads from the step's input (the previous output, e.g. a count).

        The transformed env must keep returning them (it checks this once); declare them
        in the state spec too, so that batched envs pass them to their sub-envs.
        """
        return []

    def _post_step_mdp(self, tensordict: TensorDictBase, root: TensorDictBase) -> None:
        """After each ``step_mdp``: ``tensordict`` is the step as recorded (with ``"next"``),
        ``root`` the next step's input. A transform that overrides it (e.g.
        ``NextObservationDelta``) can only run outside batched envs."""

    def _shared_state(self) -> TensorDictBase | None:
        """State that copies of this transform in other processes may share (``EnvCreator``
        puts it in shared memory): a TensorDict updated in place, or None."""
        return None

    def _use_shared_state(self, state: TensorDictBase) -> None:
        """Use ``state`` (what another copy's ``_shared_state`` returned) as this one's."""
        raise TypeError(f"{type(self).__name__} has no state to share")

    def _attach(self, specs: EnvSpecs) -> None:
        """Check the keys against the parent env's specs (and resolve defaults in subclasses)."""
        require_keys(self, self.in_keys, specs.output_keys())
        require_keys(self, self.in_keys_inv, specs.input_keys(), "in_keys_inv")

    # -- keys ------------------------------------------------------------------------
    @property
    def in_keys(self) -> list:
        return self._in_keys

    @in_keys.setter
    def in_keys(self, keys) -> None:
        self._in_keys = _norm_keys(keys)
        self._update_pairs()

    @property
    def out_keys(self) -> list:
        return self._out_keys if self._out_keys is not None else list(self._in_keys)

    @out_keys.setter
    def out_keys(self, keys) -> None:
        self._out_keys = None if keys is None else _norm_keys(keys)
        self._update_pairs()

    @property
    def in_keys_inv(self) -> list:
        return self._in_keys_inv

    @in_keys_inv.setter
    def in_keys_inv(self, keys) -> None:
        self._in_keys_inv = _norm_keys(keys)
        self._update_pairs()

    @property
    def out_keys_inv(self) -> list:
        return self._out_keys_inv if self._out_keys_inv is not None else list(self._in_keys_inv)

    @out_keys_inv.setter
    def out_keys_inv(self, keys) -> None:
        self._out_keys_inv = None if keys is None else _norm_keys(keys)
        self._update_pairs()

    def _update_pairs(self) -> None:
        out_keys, out_keys_inv = self.out_keys, self.out_keys_inv
        if len(out_keys) != len(self._in_keys):
            raise ValueError(
                f"{type(self).__name__}: out_keys {out_keys} must have one entry per in_key {self._in_keys}"
            )
        if len(out_keys_inv) != len(self._in_keys_inv):
            raise ValueError(
                f"{type(self).__name__}: out_keys_inv {out_keys_inv} must have one entry per in_key_inv {self._in_keys_inv}"
            )
        self._pairs = tuple(zip(self._in_keys, out_keys))
        self._inv_pairs = tuple(zip(self._in_keys_inv, out_keys_inv))

    # -- specs -----------------------------------------------------------------------
    def _transform_leaf_spec(self, spec: TensorSpec) -> TensorSpec:
        """The spec of an out_key given its in_key's spec."""
        return map_leaf_spec(spec, self._apply_transform)

    def _inv_transform_leaf_spec(self, spec: TensorSpec) -> TensorSpec:
        """The spec the policy sees for an action entry given the env's spec of it."""
        return spec.clone()

    def _map_specs(self, composite: Composite) -> Composite:
        for in_key, out_key in self._pairs:
            if in_key in composite:
                composite[out_key] = self._transform_leaf_spec(composite[in_key])
        return composite

    def _map_inv_specs(self, composite: Composite) -> Composite:
        for in_key, out_key in self._inv_pairs:
            if in_key in composite:
                spec = self._inv_transform_leaf_spec(composite[in_key])
                if out_key != in_key:
                    del composite[in_key]
                composite[out_key] = spec
        return composite

    def _transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        """Apply the five spec hooks (in place on ``specs``)."""
        specs.observation = self.transform_observation_spec(specs.observation)
        specs.reward = self.transform_reward_spec(specs.reward)
        specs.done = self.transform_done_spec(specs.done)
        specs.action = self.transform_action_spec(specs.action)
        specs.state = self.transform_state_spec(specs.state)
        return specs

    # -- outside an env --------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the transform to a standalone TensorDict (a stored batch, a sample)."""
        self._check_present(tensordict, self._pairs)
        return self._call(tensordict)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the inverse (action) transform to a shallow copy of ``tensordict``."""
        self._check_present(tensordict, [(o, i) for i, o in self._inv_pairs])
        return self._inv_call(tensordict.copy())

    def _check_present(self, tensordict: TensorDictBase, pairs) -> None:
        for in_key, _ in pairs:
            if tensordict.get(in_key, None) is None:
                raise KeyError(
                    f"{type(self).__name__}: "
                    + missing_key_message(in_key, tensordict.keys(True, True))
                )

    # -- the env it belongs to ---------------------------------------------------------
    @property
    def container(self):
        """The ``TransformedEnv`` holding this transform, or None."""
        return self._env_ref() if self._env_ref is not None else None

    @property
    def parent(self):
        """The env as this transform sees it: the base env plus the transforms before it."""
        env = self.container
        return None if env is None else env._parent_of(self)

    def _specs_changed(self) -> None:
        """Tell the env that this transform's output specs changed (e.g. after init_stats)."""
        env = self.container
        if env is not None:
            env._refresh()

    def _on_apply(self, fn) -> None:
        """Update plain-attribute tensor caches after ``to(device)``/``double()``/... .

        The per-step path reads tensors from plain attributes, not buffers (an
        ``nn.Module`` buffer lookup costs ~0.5 us); subclasses refresh them here.
        """

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        self._on_apply(fn)
        return self

    def dump(self, **kwargs) -> None:
        """Write out what the transform collected (e.g. ``VideoRecorder``); a no-op here."""

    def clone(self) -> Transform:
        """A deep copy that belongs to no env."""
        out = copy.deepcopy(self)
        for module in out.modules():
            if isinstance(module, Transform):
                module._env_ref = None
        return out

    def __getstate__(self):
        state = super().__getstate__().copy()
        state["_env_ref"] = None
        return state

    def extra_repr(self) -> str:
        text = f"in_keys={self.in_keys}, out_keys={self.out_keys}"
        if self.in_keys_inv:
            text += f", in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv}"
        return text


def _apply_to_composite(function):
    """Decorate a spec hook written for one leaf spec so that it maps each in_key's spec.

    TorchRL's idiom for custom transforms: ``transform_observation_spec(self, spec)``
    written for a leaf spec, decorated with ``@_apply_to_composite``, is called with the
    spec of each ``in_key`` (a clone) and its result is set at the matching ``out_key``;
    given a leaf spec directly, it is called on it.

    Example:
        >>> from torchrl_lite.data import Composite, Unbounded
        >>> class Twice(Transform):
        ...     def _apply_transform(self, x):
        ...         return torch.cat([x, x], -1)
        ...     @_apply_to_composite
        ...     def transform_observation_spec(self, spec):
        ...         return Unbounded((*spec.shape[:-1], 2 * spec.shape[-1]))
        >>> spec = Composite(observation=Unbounded((3,)))
        >>> Twice(in_keys=["observation"]).transform_observation_spec(spec)["observation"].shape
        torch.Size([6])
    """

    @functools.wraps(function)
    def apply(self, spec):
        if not isinstance(spec, Composite):
            return function(self, spec)
        present = {_as_tuple(k) for k in spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if _as_tuple(in_key) in present:
                spec[out_key] = function(self, spec[in_key].clone())
        return spec

    return apply


def _bind(transform: Transform, env) -> None:
    transform._env_ref = None if env is None else weakref.ref(env)


class Compose(Transform):
    """A flat list of transforms applied in order (inverse transforms in reverse order).

    Nested Composes are flattened. Inside a ``TransformedEnv`` the list is the env's
    transform list: ``append``, ``insert`` and ``pop`` update the env's specs.

    Args:
        *transforms: the transforms, in the order they apply to observations.

    Example:
        >>> from torchrl_lite.envs import RewardScaling, RewardClipping
        >>> t = Compose(RewardScaling(loc=0.0, scale=2.0), RewardClipping(-1.0, 1.0))
        >>> t(TensorDict({"reward": torch.tensor([0.3, 0.8])}, [2]))["reward"]
        tensor([0.6000, 1.0000])
    """

    def __init__(self, *transforms: Transform):
        super().__init__()
        self.transforms = nn.ModuleList(_flatten(transforms))

    def _call(self, next_tensordict):
        for t in self.transforms:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def forward(self, tensordict):
        for t in self.transforms:
            tensordict = t(tensordict)
        return tensordict

    def inv(self, tensordict):
        tensordict = tensordict.copy()
        for t in reversed(self.transforms):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def _inv_call(self, tensordict):
        for t in reversed(self.transforms):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def _step(self, tensordict, next_tensordict):
        for t in self.transforms:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        for t in self.transforms:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _attach(self, specs):
        pass  # each transform attaches in _transform_specs, with the specs before it

    def _transform_specs(self, specs):
        for t in self.transforms:
            t._attach(specs)
            specs = t._transform_specs(specs)
        return specs

    def transform_observation_spec(self, observation_spec):
        for t in self.transforms:
            observation_spec = t.transform_observation_spec(observation_spec)
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        for t in self.transforms:
            reward_spec = t.transform_reward_spec(reward_spec)
        return reward_spec

    def transform_done_spec(self, done_spec):
        for t in self.transforms:
            done_spec = t.transform_done_spec(done_spec)
        return done_spec

    def transform_action_spec(self, action_spec):
        for t in self.transforms:
            action_spec = t.transform_action_spec(action_spec)
        return action_spec

    def transform_state_spec(self, state_spec):
        for t in self.transforms:
            state_spec = t.transform_state_spec(state_spec)
        return state_spec

    def dump(self, **kwargs) -> None:
        for t in self.transforms:
            t.dump(**kwargs)

    # -- list interface ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.transforms)

    def __iter__(self):
        return iter(self.transforms)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Compose(*list(self.transforms)[index])
        return self.transforms[index]

    def append(self, transform: Transform) -> None:
        """Add a transform at the end (its keys are checked against the env's specs)."""
        self._commit(list(self.transforms) + [_check_transform(transform, "append")])

    def insert(self, index: int, transform: Transform) -> None:
        """Insert a transform before position ``index`` (``-len <= index <= len``)."""
        transform = _check_transform(transform, "insert")
        n = len(self.transforms)
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"insert expects an int index, got {index!r}")
        if not -n <= index <= n:
            raise IndexError(
                f"Cannot insert at index {index}: the transform list has length {n} (valid indices: {-n} to {n})."
            )
        transforms = list(self.transforms)
        transforms.insert(index, transform)
        self._commit(transforms)

    def pop(self, index: int = -1) -> Transform:
        """Remove and return the transform at ``index`` (the last one by default)."""
        transforms = list(self.transforms)
        if not transforms:
            raise IndexError("pop from an empty Compose")
        try:
            out = transforms.pop(index)
        except IndexError:
            raise IndexError(
                f"Cannot pop index {index}: the transform list has length {len(self.transforms)}."
            ) from None
        self._commit(transforms)
        return out

    def _commit(self, transforms: list) -> None:
        env = self.container
        if env is not None:
            env._set_transforms(transforms)  # validates, then calls _set_list
        else:
            self._set_list(transforms)

    def _set_list(self, transforms: list) -> None:
        self.transforms = nn.ModuleList(transforms)

    def __repr__(self) -> str:
        inner = ",\n".join("    " + repr(t).replace("\n", "\n    ") for t in self.transforms)
        return f"Compose(\n{inner})" if inner else "Compose()"


class FunctionTransform(Transform):
    """A plain function ``TensorDict -> TensorDict`` used as a transform.

    TorchRL's ``Compose(...)``, ``append_transform`` and ``insert_transform`` take any
    callable (e.g. a replay buffer's ``Compose(functools.partial(move, device=...))``);
    it is wrapped in this class. The function gets each reset output, each
    step's ``"next"`` entries and what ``forward`` is given (a stored batch, a sample);
    what it returns replaces them (``None``: the same TensorDict, changed in place).
    It declares no keys, so the specs are unchanged, and actions pass through.

    Args:
        fn: the function.

    Example:
        >>> double = FunctionTransform(lambda td: td.set("x", td["x"] * 2))
        >>> double(TensorDict(x=torch.ones(2), batch_size=[2]))["x"]
        tensor([2., 2.])
    """

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"FunctionTransform expects a callable, got {type(fn).__name__}")
        super().__init__(in_keys=[], out_keys=[])
        self.fn = fn

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        out = self.fn(next_tensordict)
        return next_tensordict if out is None else out

    def extra_repr(self) -> str:
        return f"fn={self.fn!r}"


def _as_transform(transform):
    """A Transform as given; another callable wrapped as a :class:`FunctionTransform`."""
    if not isinstance(transform, Transform) and callable(transform):
        return FunctionTransform(transform)
    return transform


def _check_transform(transform, what: str) -> Transform:
    transform = _as_transform(transform)  # a plain callable too, as in TorchRL
    if not isinstance(transform, Transform):
        raise TypeError(
            f"{what} expects a Transform, got {type(transform).__name__}: {transform!r}"
        )
    return transform


def _flatten(transforms) -> list:
    out = []
    for t in map(_as_transform, transforms):
        if isinstance(t, Compose):
            out.extend(t.transforms)
        elif isinstance(t, Transform):
            out.append(t)
        else:
            raise TypeError(
                f"Compose expects Transforms or callables, got {type(t).__name__}: {t!r}"
            )
    return out


# TorchRL's scripts import every transform from this module
# (``torchrl.envs.transforms.transforms``); they live in sibling files, and the package
# (``envs/transforms/__init__.py``) adds their names here once it has imported them all
