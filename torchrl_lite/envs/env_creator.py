"""EnvCreator: an env factory whose envs share state (e.g. VecNorm statistics).

``EnvCreator(make_env)`` builds one env at once, moves the state its transforms can share
(``Transform._shared_state``: ``VecNorm``'s running statistics) to shared memory, and
makes every env it builds afterwards use those same tensors. Handed to ``ParallelEnv`` or
a multiprocess collector, its envs in the worker processes update one set of statistics,
as TorchRL's ``EnvCreator`` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from tensordict import TensorDict, TensorDictBase

from torchrl_lite.envs.common import EnvBase

__all__ = ["EnvCreator", "env_creator"]


class EnvCreator:
    """A zero-argument env factory whose envs share their transforms' state.

    Args:
        create_env_fn: a callable returning an env (often a ``TransformedEnv`` with a
            ``VecNorm``).
        create_env_kwargs: keyword arguments for it.
        share_memory: move the shared state to shared memory (default ``True``; needed
            for worker processes to see each other's updates).

    The sharing holds across worker processes started with ``"fork"`` (the default on
    Linux); a ``"spawn"`` worker receives a pickled copy, so ``EnvCreator`` warns when
    pickled. ``state_dict()`` gives the shared state under TorchRL's names (a module
    state dict of the env's transforms: ``"_extra_state"`` for a lone transform,
    ``"transforms.<i>._extra_state"`` for several), each a dict of the live tensors
    (``["observation_count"]``) whose ``["td"]`` is the shared TensorDict itself (TorchRL
    0.4's layout); writing into them changes what every env uses. ``load_state_dict``
    copies values into them.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv, VecNorm
        >>> make = EnvCreator(lambda: TransformedEnv(GymEnv("Pendulum-v1"), VecNorm()))
        >>> a, b = make(), make()
        >>> _ = a.rollout(5)
        >>> a.transform[0]._td is b.transform[0]._td  # one set of statistics
        True
    """

    def __init__(self, create_env_fn, create_env_kwargs: dict | None = None, share_memory=True):
        if not callable(create_env_fn):
            raise TypeError(f"EnvCreator needs a callable returning an env, got {create_env_fn!r}")
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(create_env_kwargs or {})
        env = self._build(self.create_env_kwargs)
        self._states = {}  # transform position ("transforms.<i>") -> shared TensorDict
        transforms = list(_transforms(env))
        self._public = {}  # TorchRL's state_dict name -> transform position
        for name, transform in transforms:
            state = transform._shared_state()
            if state is not None:
                self._states[name] = state.share_memory_() if share_memory else state
                public = "_extra_state" if len(transforms) == 1 else f"{name}._extra_state"
                self._public[public] = name
        self.meta_data = {
            "batch_size": env.batch_size,
            "device": env.device,
            "specs": {
                "observation": env.full_observation_spec.clone(),
                "action": env.full_action_spec.clone(),
                "reward": env.full_reward_spec.clone(),
                "done": env.full_done_spec.clone(),
            },
        }
        env.close()

    def _build(self, kwargs: dict) -> EnvBase:
        env = self.create_env_fn(**kwargs)
        if not isinstance(env, EnvBase):
            raise TypeError(
                f"EnvCreator: create_env_fn must return an EnvBase, got {type(env).__name__}"
            )
        return env

    def __call__(self, **kwargs) -> EnvBase:
        env = self._build({**self.create_env_kwargs, **kwargs})
        found = dict(_transforms(env))
        for name, state in self._states.items():
            transform = found.get(name)
            if transform is None or transform._shared_state() is None:
                raise ValueError(
                    f"EnvCreator: the env built now has no shareable transform at {name!r} "
                    "(the first one had); create_env_fn must build the same env every time."
                )
            transform._use_shared_state(state)
        return env

    def state_dict(self) -> dict:
        """The shared state under TorchRL's names: live tensors (see the class docstring)."""
        return {public: _LiveState(self._states[name]) for public, name in self._public.items()}

    def load_state_dict(self, state_dict: dict) -> None:
        """Copy ``state_dict`` (from :meth:`state_dict`) into the shared tensors, in place."""
        unknown = sorted(set(state_dict) - set(self._public))
        if unknown:
            raise KeyError(
                f"EnvCreator.load_state_dict: unknown entries {unknown}; this creator holds "
                f"{sorted(self._public)}"
            )
        for public, value in state_dict.items():
            self._states[self._public[public]].update_(_as_td(value))

    def __getstate__(self):
        # forked workers get this object without pickling; a pickled copy (a "spawn"
        # worker) holds copies of the statistics, which no longer follow the others
        if self._states:
            warnings.warn(
                "EnvCreator is being pickled: envs built from the copy get their own copy of "
                "the shared state (e.g. VecNorm statistics), not the shared memory. Start the "
                "workers with mp_start_method='fork' to share it.",
                stacklevel=2,
            )
        return self.__dict__

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, shared={sorted(self._states)})"


class _LiveState(dict):
    """A transform's shared tensors by key (live, not copies); ``["td"]`` is the shared
    TensorDict they belong to, as TorchRL 0.4's ``EnvCreator.state_dict`` gave it."""

    def __init__(self, td: TensorDictBase):
        super().__init__(td.items(True, True))
        self.td = td

    def __missing__(self, key):
        if key == "td":
            return self.td
        raise KeyError(f"{key!r}: this shared state holds {list(self)} (and 'td', all of them)")


def _as_td(value) -> TensorDictBase:
    """A saved shared state as a TensorDict: a TensorDict, a dict of tensors, or TorchRL
    0.4's ``{"td": TensorDict, "lock": ...}``."""
    if isinstance(value, _LiveState):
        return value.td
    if isinstance(value, TensorDictBase):
        return value
    if isinstance(value, Mapping):
        if "td" in value:
            return _as_td(value["td"])
        return TensorDict(dict(value), batch_size=[])
    raise TypeError(
        f"EnvCreator.load_state_dict: a shared state is a dict or TensorDict of tensors, got "
        f"{type(value).__name__}"
    )


def _transforms(env: EnvBase):
    """``(name, transform)`` for the transforms of ``env`` and of the envs it wraps."""
    depth = 0
    while hasattr(env, "base_env") and hasattr(env, "transform"):
        for i, transform in enumerate(env.transform.transforms):
            yield f"{'base.' * depth}transforms.{i}", transform
        env, depth = env.base_env, depth + 1


def env_creator(fun) -> EnvCreator:
    """``EnvCreator(fun)``: TorchRL's function form (``from torchrl.envs import env_creator``).

    Example:
        >>> from torchrl_lite.envs import GymEnv
        >>> make = env_creator(lambda: GymEnv("Pendulum-v1"))
        >>> type(make).__name__
        'EnvCreator'
    """
    return EnvCreator(fun)
