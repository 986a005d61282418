"""Seed 000's ``VecEnv``: ``vec_env_size`` copies of an env factory's env, as one batched env.

``VecEnv.create_factory(env_fn, env_kwargs, vec_env_size, log_dir)`` returns
``(envs_factory, action_space, obs_space)``; each worker calls
``envs_factory(device, initial_seed, index_col_worker, index_grad_worker)`` and gets a
torchrl_lite env with ``batch_size == [vec_env_size]``:

- gymnasium envs run in a gymnasium vector env (``"sync"``: one process, ``"async"``: one
  subprocess per copy) wrapped by ``GymWrapper``; float64 observations become float32;
- torchrl_lite envs (e.g. the dm_control factories') run in a ``SerialEnv``;
- a ``RewardSum`` transform reports each finished episode's return in
  ``("next", "episode_reward")``.

Copy ``k`` is ``env_fn(**env_kwargs, index_col_worker=..., index_grad_worker=...,
index_env=k, seed=initial_seed)``; a factory that takes no index arguments gets
``seed=env_seed(initial_seed, grad, col, k)`` instead (one that takes no ``seed`` either
is seeded with that number at its first reset), so all copies differ and a run is
reproducible from ``initial_seed``. With ``log_dir``, each gymnasium copy writes its
episodes (return ``r``, length ``l``, seconds since start ``t``) to
``log_dir/{name}_g{grad}_c{col}_e{k}.monitor.csv`` (the gym ``Monitor`` / SB3 format).
"""

from __future__ import annotations

import inspect
import json
import os
import time

import gymnasium
import torch

from torchrl_lite.agent._factory import check_int
from torchrl_lite.envs import (
    Compose,
    DoubleToFloat,
    EnvBase,
    GymWrapper,
    RewardSum,
    SerialEnv,
    TransformedEnv,
)
from torchrl_lite.envs.factories import SeedOnFirstReset, env_seed

__all__ = ["EpisodeLogger", "VecEnv"]

_INDEX_ARGS = ("index_col_worker", "index_grad_worker", "index_env")
_MODES = ("sync", "async")


class EpisodeLogger(gymnasium.Wrapper):
    """Append each finished episode of a gymnasium env to a CSV file: ``r,l,t``.

    The file starts with a ``#{json}`` line (start time, env id) and the header ``r,l,t``
    (return, length, seconds since the logger was made), as gym's ``Monitor`` wrote; an
    existing file (a resumed run) is appended to.

    Args:
        env: the gymnasium env.
        path: the CSV file (its folder is created).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "e0.monitor.csv")
        >>> env = EpisodeLogger(gymnasium.make("CartPole-v1"), path)
        >>> _ = env.reset(seed=0)
        >>> while not any(env.step(0)[2:4]): pass
        >>> open(path).read().splitlines()[1:2]
        ['r,l,t']
    """

    def __init__(self, env, path: str):
        super().__init__(env)
        self.path = str(path)
        self.t_start = time.time()
        self._return, self._length = 0.0, 0
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        env_id = getattr(getattr(env, "spec", None), "id", None)
        if not (os.path.isfile(self.path) and os.path.getsize(self.path)):  # else: resumed
            with open(self.path, "w") as f:
                f.write("#" + json.dumps({"t_start": self.t_start, "env_id": env_id}) + "\n")
                f.write("r,l,t\n")

    def reset(self, **kwargs):
        self._return, self._length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            seconds = round(time.time() - self.t_start, 6)
            with open(self.path, "a") as f:
                f.write(f"{self._return:.6g},{self._length},{seconds}\n")
            info = {**info, "episode": {"r": self._return, "l": self._length, "t": seconds}}
        return obs, reward, terminated, truncated, info


def _takes(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature: pass everything
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class _EnvsFactory:
    """``(device, initial_seed, index_col_worker, index_grad_worker) -> EnvBase``; a plain
    picklable object (the Scheme sends it to its workers)."""

    def __init__(self, env_fn, env_kwargs: dict, vec_env_size: int, log_dir, name, mode):
        self.env_fn = env_fn
        self.env_kwargs = dict(env_kwargs)
        self.vec_env_size = vec_env_size
        self.log_dir = log_dir
        self.name = name
        self.vectorization_mode = mode

    def make_one(self, initial_seed: int, col: int, grad: int, k: int):
        """Copy ``k``: the env factory's env, seeded for its index (and logged)."""
        seed = env_seed(initial_seed, grad, col, k)
        kwargs = dict(self.env_kwargs)
        if all(_takes(self.env_fn, a) for a in _INDEX_ARGS):
            kwargs.update(index_col_worker=col, index_grad_worker=grad, index_env=k)
            kwargs["seed"] = initial_seed
        elif _takes(self.env_fn, "seed"):
            kwargs["seed"] = seed
        env = self.env_fn(**kwargs)
        if isinstance(env, gymnasium.Env):
            if not _takes(self.env_fn, "seed"):
                env = SeedOnFirstReset(env, seed)
            if self.log_dir is not None:
                path = os.path.join(self.log_dir, f"{self.name}_g{grad}_c{col}_e{k}.monitor.csv")
                env = EpisodeLogger(env, path)
        return env

    def __call__(self, device=None, initial_seed: int = 0, index_col_worker: int = 0,
                 index_grad_worker: int = 0) -> EnvBase:  # fmt: skip
        device = torch.device(device) if device is not None else torch.device("cpu")
        first = self.make_one(initial_seed, index_col_worker, index_grad_worker, 0)
        if isinstance(first, EnvBase):
            return self._serial(first, device, initial_seed, index_col_worker, index_grad_worker)
        if not isinstance(first, gymnasium.Env):
            raise TypeError(
                f"VecEnv: env_fn returned a {type(first).__name__}; expected a gymnasium.Env "
                f"or a torchrl_lite EnvBase."
            )
        fns = [_Built(first)] + [
            _Copy(self, initial_seed, index_col_worker, index_grad_worker, k)
            for k in range(1, self.vec_env_size)
        ]
        disabled = gymnasium.vector.AutoresetMode.DISABLED
        if self.vectorization_mode == "async" and self.vec_env_size > 1:
            first.close()
            fns[0] = _Copy(self, initial_seed, index_col_worker, index_grad_worker, 0)
            vec = gymnasium.vector.AsyncVectorEnv(fns, autoreset_mode=disabled)
        else:
            vec = gymnasium.vector.SyncVectorEnv(fns, autoreset_mode=disabled)
        base = GymWrapper(vec, device=device)
        floats64 = any(s.dtype == torch.float64 for s in base.observation_spec.values(True, True))
        transform = Compose(DoubleToFloat(), RewardSum()) if floats64 else RewardSum()
        return TransformedEnv(base, transform)

    def _serial(self, first, device, initial_seed, col, grad) -> EnvBase:
        copies = [first] + [
            self.make_one(initial_seed, col, grad, k) for k in range(1, self.vec_env_size)
        ]
        env = SerialEnv(self.vec_env_size, [_Built(c) for c in copies], device=device)
        if "episode_reward" in env.observation_spec.keys(True, True):
            return env
        return TransformedEnv(env, RewardSum())


class _Copy:
    """Zero-argument maker of copy ``k`` (picklable, for gymnasium's async vector env)."""

    def __init__(self, factory: _EnvsFactory, initial_seed: int, col: int, grad: int, k: int):
        self.args = (factory, initial_seed, col, grad, k)

    def __call__(self):
        factory, initial_seed, col, grad, k = self.args
        return factory.make_one(initial_seed, col, grad, k)


class _Built:
    def __init__(self, env):
        self.env = env

    def __call__(self):
        return self.env


def _spaces(env):
    """``(action_space, obs_space)`` of one gymnasium env, or of a torchrl_lite env's specs."""
    if isinstance(env, gymnasium.Env):
        return env.action_space, env.observation_space
    return _spec_to_space(env.action_spec), _spec_to_space(env.observation_spec["observation"])


def _spec_to_space(spec):
    import numpy as np

    low = getattr(spec, "low", None)
    if low is None:
        return gymnasium.spaces.Box(-np.inf, np.inf, tuple(spec.shape), np.float32)
    return gymnasium.spaces.Box(
        low.cpu().numpy(), spec.high.cpu().numpy(), tuple(spec.shape), np.float32
    )


class VecEnv:
    """Seed 000's vectorized env: use :meth:`create_factory` (see the module docstring).

    Example:
        >>> from torchrl_lite.envs import gym_train_env_factory
        >>> make_envs, action_space, obs_space = VecEnv.create_factory(
        ...     env_fn=gym_train_env_factory, env_kwargs={"env_id": "Pendulum-v1"},
        ...     vec_env_size=2)
        >>> envs = make_envs("cpu", 0)
        >>> envs.rollout(3)["next", "episode_reward"].shape, obs_space.shape
        (torch.Size([2, 3, 1]), (3,))
    """

    @classmethod
    def create_factory(
        cls,
        env_fn,
        env_kwargs: dict | None = None,
        vec_env_size: int = 1,
        log_dir: str | None = None,
        name: str = "train",
        vectorization_mode: str = "sync",
    ):
        """``(envs_factory, action_space, obs_space)``; the spaces are those of one copy.

        Args:
            env_fn: an env factory (e.g. ``pybullet_train_env_factory``) returning a
                gymnasium env or a torchrl_lite env.
            env_kwargs: keyword arguments for ``env_fn`` (e.g. ``{"env_id": ...}``).
            vec_env_size: copies stepped together (>= 1).
            log_dir: folder for per-env episode logs (None: no logs).
            name: prefix of the log files (``"train"``, ``"test"``).
            vectorization_mode: ``"sync"`` (one process) or ``"async"`` (a subprocess per
                gymnasium copy).
        """
        if not callable(env_fn):
            raise TypeError(f"VecEnv: env_fn must be callable, got {env_fn!r}.")
        if env_kwargs is not None and not isinstance(env_kwargs, dict):
            raise TypeError(f"VecEnv: env_kwargs must be a dict, got {env_kwargs!r}.")
        check_int("VecEnv", "vec_env_size", vec_env_size)
        if vectorization_mode not in _MODES:
            raise ValueError(
                f"VecEnv: unknown vectorization_mode {vectorization_mode!r}; use one of {_MODES}."
            )
        env_kwargs = dict(env_kwargs or {})
        probe = _EnvsFactory(env_fn, env_kwargs, 1, None, name, "sync").make_one(0, 0, 0, 0)
        try:
            action_space, obs_space = _spaces(probe)
        finally:
            probe.close()
        factory = _EnvsFactory(env_fn, env_kwargs, vec_env_size, log_dir, name, vectorization_mode)
        return factory, action_space, obs_space
