"""TransformedEnv: an env whose outputs (and actions) go through a flat list of transforms.

``_step`` maps the policy's action through the inverse transforms (in reverse order),
calls the wrapped env's ``_step`` and passes the result through each transform's
``_step``; ``_reset`` resets the wrapped env and passes the result through each
transform's ``_reset``. Keys and specs are checked once, when the transform list changes;
a step does only tensor work. A transform none of whose keys the env has is skipped, as
in TorchRL (with a warning; ``check_env_specs`` raises on it); one with some of its keys
missing raises ``KeyError``. When the wrapped env has a numpy stepper and every transform a
numpy form, random rollouts and collector batches skip the per-step TensorDicts
(``envs/stepper/transformed.py``; the same values).
"""

from __future__ import annotations

import copy
import functools
import warnings

from tensordict import TensorDictBase

from torchrl_lite.envs._module_like import ModuleLike
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.stepper import NumpyStepper, keeps_hooks
from torchrl_lite.envs.stepper.transformed import TransformedStepper
from torchrl_lite.envs.transforms.transforms import (
    AbsentKeyError,
    Compose,
    EnvSpecs,
    Transform,
    _as_tuple,
    _bind,
)

__all__ = ["TransformedEnv"]


class TransformedEnv(EnvBase):
    """An env with transforms applied to what it returns and to the actions it receives.

    The transforms form one flat list (``env.transform``, a ``Compose``); add and remove
    them like list items with ``append_transform``, ``insert_transform`` and
    ``env.transform.pop(i)``. The specs of the transformed env are the transformed specs.
    The wrapped env's ``_step``/``_reset`` must return a TensorDict the transforms may
    modify (a new one each call).

    Args:
        env: the env to transform (any ``EnvBase``, including another ``TransformedEnv``).
        transform: a ``Transform`` or ``Compose`` (default: none yet).

    Example:
        >>> from torchrl_lite.envs import GymEnv, StepCounter, RewardScaling
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
        >>> env = env.append_transform(RewardScaling(loc=0.0, scale=0.1))  # returns the env
        >>> env.rollout(3, break_when_any_done=False)["next", "step_count"].flatten().tolist()
        [1, 2, 3]
    """

    def __init__(self, env: EnvBase, transform: Transform | None = None):
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv expects an EnvBase, got {type(env).__name__}: {env!r}")
        if transform is None:
            transform = Compose()
        elif not isinstance(transform, Transform):
            raise TypeError(
                f"TransformedEnv expects a Transform or Compose, got {type(transform).__name__}: {transform!r}"
            )
        elif not isinstance(transform, Compose):
            transform = Compose(transform)
        self.base_env = env
        super().__init__(device=env.device, batch_size=env.batch_size, spec_check=env.spec_check)
        self.batch_locked = env.batch_locked
        self._requires_reset = env._requires_reset
        self._compose = None
        self._building = None
        self._views: dict = {}
        self.transform = transform

    # -- the contract ----------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        base = self.base_env
        tensordict_in = tensordict
        for t in self._reset_pre:
            tensordict_in = t._reset_env_preprocess(tensordict_in)
        tensordict_reset = base._inner_reset(tensordict_in)
        for t in self._active:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._inv_transforms:
            tensordict_in = tensordict.copy()  # the caller keeps the policy's action
            for t in self._inv_transforms:
                tensordict_in = t._inv_call(tensordict_in)
        else:
            tensordict_in = tensordict
        next_tensordict = self.base_env._step(tensordict_in)
        for t in self._active:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _numpy_stepper(self) -> NumpyStepper | None:
        """The wrapped env's numpy stepper with the transforms' numpy forms on top, when
        every active transform has one (``envs/stepper/transformed.py``); else None."""
        if not keeps_hooks(self, TransformedEnv, ("_step", "_reset")):
            return None
        base = self.base_env._numpy_stepper()
        return None if base is None else TransformedStepper.build(self, base)

    def _set_seed(self, seed: int) -> None:
        self.base_env._set_seed(seed)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the wrapped env; returns what its ``set_seed`` returns."""
        return self.base_env.set_seed(seed, static_seed)

    def state_dict(self) -> dict:
        """The wrapped env's state and a copy of the transforms' ``state_dict`` (e.g.
        ``VecNorm``'s running statistics).

        Example:
            >>> from torchrl_lite.envs import PendulumEnv, StepCounter
            >>> env = TransformedEnv(PendulumEnv(seed=0), StepCounter())
            >>> state = env.state_dict()
            >>> state["kind"], state["base"]["kind"]
            ('transformed', 'generic')
            >>> env.load_state_dict(state)
        """
        return {
            "kind": "transformed",
            "base": self.base_env.state_dict(),
            "transform": copy.deepcopy(self.transform.state_dict()),  # a snapshot
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned, into an env built the same way."""
        self._check_state_kind(state_dict, "transformed")
        self.base_env.load_state_dict(state_dict["base"])
        self.transform.load_state_dict(state_dict["transform"])

    def train(self, mode: bool = True) -> TransformedEnv:
        """Set the training mode of the env, its base env and its transforms."""
        super().train(mode)
        self.base_env.train(mode)
        if self._compose is not None:
            self._compose.train(mode)
        return self

    # -- the transform list ----------------------------------------------------------
    @property
    def transform(self) -> Compose:
        """The transform list (a ``Compose``)."""
        return self._compose

    @transform.setter
    def transform(self, transform: Transform) -> None:
        if not isinstance(transform, Transform):
            raise TypeError(
                f"transform must be a Transform or Compose, got {type(transform).__name__}"
            )
        if not isinstance(transform, Compose):
            transform = Compose(transform)
        owner = transform.container
        if owner is not None and owner is not self:
            raise ValueError(
                "This Compose already belongs to another TransformedEnv; pass transform.clone()."
            )
        old = self._compose
        self._compose = transform
        try:
            self._set_transforms(list(transform.transforms))
        except Exception:
            self._compose = old
            raise
        _bind(transform, self)
        if old is not None and old is not transform:
            _bind(old, None)

    def append_transform(self, transform: Transform) -> TransformedEnv:
        """Add a transform at the end of the list (its keys are checked now); returns the env."""
        self._compose.append(transform)
        return self

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Insert a transform before position ``index`` (``-len <= index <= len``); returns
        the env, as TorchRL's does (``env = env.insert_transform(0, t)``)."""
        self._compose.insert(index, transform)
        return self

    def _set_transforms(self, transforms: list) -> None:
        """Validate ``transforms`` against the specs, then make them the env's list."""
        for t in transforms:
            owner = t.container
            if owner is not None and owner is not self:
                raise ValueError(
                    f"{type(t).__name__} already belongs to another TransformedEnv; pass {type(t).__name__}.clone()."
                )
        if len({id(t) for t in transforms}) != len(transforms):
            raise ValueError("The same transform object appears twice in the list; clone() it.")
        previous = list(self.__dict__["_transforms"]) if "_transforms" in self.__dict__ else None
        for t in transforms:
            if all(t is not u for u in previous or ()):
                t.to(self.device)  # buffers (loc, scale, ...) on the env's device
        try:
            chain = self._spec_chain(transforms)
        except Exception:
            if previous is not None:
                self._spec_chain(previous)  # attach the old list again (attach is idempotent)
            raise
        for t in previous or ():
            if all(t is not u for u in transforms):
                _bind(t, None)
        for t in transforms:
            _bind(t, self)
        self._compose._set_list(transforms)
        self._install(transforms, chain)

    def _spec_chain(self, transforms: list) -> list:
        """The specs before each transform and after the last (attaching each in turn)."""
        specs = EnvSpecs.from_env(self.base_env)
        chain = [specs]
        self._building = (transforms, chain)
        try:
            for t in transforms:
                t._absent = None
                try:
                    t._attach(specs)
                except AbsentKeyError as err:
                    # only a transform of entries (not a key selection such as
                    # SelectTransform) whose keys are all absent
                    if err.what not in ("in_keys", "in_keys_inv") or _uses_any_key(t, specs):
                        raise
                    # none of its keys is there: skipped, as in TorchRL (check_env_specs
                    # reports it); e.g. a pixels transform in a list shared by state envs
                    _skip(t, err)
                    chain.append(specs.clone())
                    continue
                specs = t._transform_specs(specs.clone())
                chain.append(specs)
        finally:
            self._building = None
        final = chain[-1]
        for t in transforms:
            if t._absent is not None:
                continue
            for key in t._root_keys_read():
                if key not in final.observation:
                    raise ValueError(
                        f"{type(t).__name__} reads {key!r} from each step's input, but the transformed env "
                        f"does not return it: a later transform removes or renames it. Move "
                        f"{type(t).__name__} after that transform (or keep the entry, e.g. del_keys=False)."
                    )
        return chain

    def _install(self, transforms: list, chain: list) -> None:
        self._transforms = tuple(transforms)
        self._active = tuple(t for t in transforms if t._absent is None)  # what steps run
        base_hook = Transform._reset_env_preprocess
        self._reset_pre = tuple(
            t for t in self._active if type(t)._reset_env_preprocess is not base_hook
        )
        self.batch_size = chain[-1].batch_size  # BatchSizeTransform may change it
        self._inv_transforms = tuple(t for t in reversed(self._active) if t._has_inverse())
        hooks = [t._post_step_mdp for t in self._active if _has_post_hook(t)]
        inner = self.base_env._post_step_mdp_hook()
        hooks = ([inner] if inner is not None else []) + hooks
        self._post_hook = None if not hooks else functools.partial(_run_hooks, tuple(hooks))
        self._chain = chain
        self._views = {}
        final = chain[-1]
        self.full_observation_spec = final.observation
        self.full_reward_spec = final.reward
        self.full_done_spec = final.done
        self.full_action_spec = final.action
        self.full_state_spec = final.state
        self._checked_action = self.spec_check == "never"

    def _post_step_mdp_hook(self):
        """The transforms' ``_post_step_mdp`` hooks (and the wrapped env's), or None."""
        return self._post_hook

    def _skipped_transforms(self) -> list:
        """``(transform, reason)`` for the transforms this env and the envs it wraps skip."""
        own = [(t, t._absent) for t in self._transforms if t._absent is not None]
        return own + self.base_env._skipped_transforms()

    def _refresh(self) -> None:
        """Recompute the specs (a transform's output specs changed)."""
        self._set_transforms(list(self._transforms))

    def _parent_of(self, transform: Transform) -> EnvBase:
        """The env before ``transform``: the base env plus the transforms before it."""
        if self._building is not None:
            transforms, chain = self._building
        else:
            transforms, chain = self._transforms, self._chain
        index = next((i for i, t in enumerate(transforms) if t is transform), None)
        if index is None or index >= len(chain):
            return None
        if self._building is not None:
            return _ParentEnv(self.base_env, transforms[:index], chain[index])
        view = self._views.get(index)
        if view is None:
            view = self._views[index] = _ParentEnv(self.base_env, transforms[:index], chain[index])
        return view

    # -- life cycle ------------------------------------------------------------------
    def close(self, *, raise_if_closed: bool = False) -> None:
        if not self.is_closed:
            self.base_env.close()
        super().close(raise_if_closed=raise_if_closed)

    def start(self) -> None:
        """Use the env again after ``close()``: the base env starts again (a batched env
        starts new workers); an error if it cannot."""
        start = getattr(self.base_env, "start", None)
        if start is None:
            raise RuntimeError(
                f"TransformedEnv.start: the base env {type(self.base_env).__name__} cannot "
                "start again after close(); build a new env."
            )
        start()
        self.is_closed = bool(self.base_env.is_closed)

    def _check_open(self, what: str) -> None:
        # over a batched env, which starts its copies again after close(), so does this env
        if self.is_closed and hasattr(self.base_env, "_restart"):
            self.base_env._check_open(what)
            self.is_closed = bool(self.base_env.is_closed)
        super()._check_open(what)

    def __getattr__(self, name: str):
        # attributes the wrapped env has and this one does not (env_name, render, ...)
        base = self.__dict__.get("base_env")
        if base is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(base, name)

    def __repr__(self) -> str:
        inner = repr(self._compose).replace("\n", "\n    ")
        return f"TransformedEnv(\n    env={self.base_env!r},\n    transform={inner})"


ModuleLike._transformed_env_class = TransformedEnv  # what EnvBase.append_transform builds


class _ParentEnv(TransformedEnv):
    """The view of a ``TransformedEnv`` that one transform has: base env + earlier transforms.

    It shares the transforms (and their state) with the env it comes from.
    """

    def __init__(self, base_env: EnvBase, transforms, specs: EnvSpecs):
        self.base_env = base_env
        EnvBase.__init__(
            self, device=base_env.device, batch_size=base_env.batch_size, spec_check="never"
        )
        self.batch_locked = base_env.batch_locked
        self._requires_reset = False
        self._compose = None
        self._building = None
        self._install(list(transforms), [specs])

    def _parent_of(self, transform):
        return None

    def __repr__(self) -> str:
        names = ", ".join(type(t).__name__ for t in self._transforms)
        return f"ParentEnv(env={self.base_env!r}, transforms=[{names}])"


def _uses_any_key(transform: Transform, specs: EnvSpecs) -> bool:
    """Whether any of the transform's in_keys / in_keys_inv is in ``specs``."""
    outputs = {_as_tuple(k) for k in specs.output_keys()}
    inputs = {_as_tuple(k) for k in specs.input_keys()}
    return any(_as_tuple(k) in outputs for k in transform.in_keys) or any(
        _as_tuple(k) in inputs for k in transform.in_keys_inv
    )


def _skip(transform: Transform, err: KeyError) -> None:
    reason = str(err.args[0]) if err.args else str(err)
    if transform.__dict__.get("_absent_warned") != reason:
        transform.__dict__["_absent_warned"] = reason
        warnings.warn(
            f"{reason} The transform is skipped (as TorchRL does); check_env_specs(env) "
            "raises on it.",
            stacklevel=5,
        )
    transform._absent = reason


def _has_post_hook(transform: Transform) -> bool:
    return type(transform)._post_step_mdp is not Transform._post_step_mdp


def _run_hooks(hooks: tuple, tensordict: TensorDictBase, root: TensorDictBase) -> None:
    for hook in hooks:
        hook(tensordict, root)
