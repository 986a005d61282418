"""DeepMind Control Suite environments as TensorDict envs: ``DMControlEnv``, ``DMControlWrapper``.

Dict observations become named entries at the root (cartpole: ``"position"``,
``"velocity"``) with float64 specs as dm_control declares them; the action spec is
``Bounded`` from the env's ``action_spec``; a last step with ``discount == 0`` is
``terminated``, a last step with ``discount > 0`` (the time limit) is ``truncated``.
dm_control and MuJoCo are imported only when an env is built.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite._utils import did_you_mean, require
from torchrl_lite.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.utils import classproperty

__all__ = ["DMControlEnv", "DMControlWrapper"]

DEFAULT_RENDER_KWARGS = {"height": 240, "width": 320, "camera_id": 0}


_GL_HINT = (
    "On a headless machine set MUJOCO_GL=egl (Debian packages libegl1, libopengl0, "
    "libgl1-mesa-dri) or MUJOCO_GL=osmesa (libosmesa6) before dm_control is imported."
)


def _suite():
    require("dm_control", "dm_control")
    try:
        with warnings.catch_warnings():
            # without a display dm_control probes GLFW first, which warns once per process
            # that DISPLAY is missing, then uses another backend: noise a user cannot act on
            warnings.filterwarnings("ignore", message=r".*DISPLAY environment variable")
            from dm_control import suite
    except ImportError as err:  # dm_control picks its GL backend at import time
        backend = os.environ.get("MUJOCO_GL")
        reason = str(err).rstrip(".")
        raise ImportError(
            f"dm_control is installed but its import failed with MUJOCO_GL={backend!r}: {reason}. {_GL_HINT}"
        ) from err
    return suite


def _torch_dtype(np_dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype


def _spec_shape(shape) -> tuple:
    return tuple(shape) if len(shape) else (1,)  # scalar observations become [1]


def array_spec_to_spec(array_spec, device=None):
    """The spec of a ``dm_env.specs`` array: ``Bounded`` if bounded, else ``Unbounded``.

    The dtype is kept (float64 stays float64); scalars get shape ``[1]``; uint8 arrays
    (images) are ``Bounded(0, 255)``.
    """
    shape = _spec_shape(array_spec.shape)
    dtype = _torch_dtype(array_spec.dtype)
    if hasattr(array_spec, "minimum") and hasattr(array_spec, "maximum"):
        low = np.broadcast_to(array_spec.minimum, array_spec.shape).reshape(shape)
        high = np.broadcast_to(array_spec.maximum, array_spec.shape).reshape(shape)
        if np.isfinite(low).all() and np.isfinite(high).all():
            return Bounded(torch.tensor(low), torch.tensor(high), shape, device=device, dtype=dtype)
    if dtype == torch.uint8:
        return Bounded(0, 255, shape, device=device, dtype=dtype)
    return Unbounded(shape, device=device, dtype=dtype)


def _base_env(env):
    """The innermost environment (``dm_control`` wrappers keep theirs in ``_env``)."""
    while not hasattr(env, "task") and hasattr(env, "_env"):
        env = env._env
    return env


class DMControlWrapper(EnvBase):
    """Wrap an existing dm_control environment (e.g. from ``suite.load``) as a TensorDict env.

    Args:
        env: a ``dm_env.Environment``, usually a ``dm_control.rl.control.Environment``.
        from_pixels: add ``"pixels"`` (uint8 ``[H, W, 3]``) from ``physics.render``.
        pixels_only: with ``from_pixels``, drop the state observations.
        frame_skip: repeat each action this many times, summing rewards; stops early at
            the last step of an episode.
        render_kwargs: ``height``, ``width``, ``camera_id`` for ``physics.render``
            (default 240, 320, 0).
        device, spec_check: see ``EnvBase``.

    Example:
        >>> from dm_control import suite
        >>> env = DMControlWrapper(suite.load("cartpole", "balance"))
        >>> env.set_seed(0)
        1
        >>> sorted(env.reset().keys())
        ['done', 'position', 'terminated', 'truncated', 'velocity']
    """

    def __init__(
        self,
        env,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        render_kwargs: dict | None = None,
        device=None,
        spec_check: str = "first",
    ):
        require("dm_control", "dm_control")
        import dm_env

        if not isinstance(env, dm_env.Environment):
            raise TypeError(
                f"DMControlWrapper expects a dm_env.Environment (e.g. dm_control.suite.load(...)), got {type(env).__name__}"
            )
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"frame_skip must be an int >= 1, got {frame_skip!r}")
        super().__init__(device=device, spec_check=spec_check)
        self._env = env
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only and from_pixels
        self.frame_skip = frame_skip
        unknown = set(render_kwargs or {}) - set(DEFAULT_RENDER_KWARGS)
        if unknown:
            raise ValueError(
                f"Unknown render_kwargs {sorted(unknown)}; expected some of {sorted(DEFAULT_RENDER_KWARGS)}"
            )
        self.render_kwargs = {**DEFAULT_RENDER_KWARGS, **(render_kwargs or {})}
        self._episode_over = False
        self._build_specs()

    @property
    def env(self):
        """The wrapped dm_control environment."""
        return self._env

    def _build_specs(self) -> None:
        self.action_spec = array_spec_to_spec(self._env.action_spec(), self.device)
        self._action_shape = tuple(self._env.action_spec().shape)
        self.reward_spec = Unbounded((1,), device=self.device, dtype=torch.float32)
        obs_spec = self._env.observation_spec()
        if not isinstance(obs_spec, dict):
            obs_spec = {K.OBSERVATION: obs_spec}
        self._obs_keys: dict[str, tuple] = {}  # dm_control name -> (numpy dtype, spec shape)
        observation = Composite(shape=(), device=self.device)
        if not self.pixels_only:
            for key, array_spec in obs_spec.items():
                if self.from_pixels and key == K.PIXELS:
                    raise ValueError(
                        f"The env already observes {K.PIXELS!r}: wrap it with from_pixels=False."
                    )
                spec = array_spec_to_spec(array_spec, self.device)
                observation[key] = spec
                self._obs_keys[key] = (np.dtype(array_spec.dtype), spec.shape)
        if self.from_pixels:
            frame = self._render()
            observation[K.PIXELS] = Bounded(
                0, 255, frame.shape, device=self.device, dtype=torch.uint8
            )
        self.observation_spec = observation

    def _render(self) -> np.ndarray:
        physics = getattr(_base_env(self._env), "physics", None)
        if physics is None:
            raise ValueError(
                f"from_pixels=True needs an env with a MuJoCo `physics`; {type(self._env).__name__} has none."
            )
        try:
            frame = physics.render(**self.render_kwargs)
        except Exception as err:  # GL backends fail with several error types
            raise RuntimeError(
                f"MuJoCo rendering failed ({type(err).__name__}: {err}). {_GL_HINT}"
            ) from err
        return np.ascontiguousarray(frame)  # render returns a flipped (negative-stride) view

    def render(self) -> np.ndarray:
        """The current frame as a uint8 numpy array ``[H, W, 3]``."""
        return self._render()

    # -- the three hooks -------------------------------------------------------------
    def _set_seed(self, seed: int) -> None:
        base = _base_env(self._env)
        task = getattr(base, "task", None)
        if task is None or not hasattr(task, "_random"):
            raise RuntimeError(
                f"Cannot seed {type(self._env).__name__}: it has no dm_control task with a random state."
            )
        task._random = np.random.RandomState(seed)  # read by the next reset's initialize_episode

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        timestep = self._env.reset()
        self._episode_over = False
        return self._observation_td(timestep.observation, {})

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._episode_over:
            raise RuntimeError(
                f"The episode of {type(self).__name__} has ended (done=True); call reset() before step()."
            )
        action = tensordict.get(K.ACTION).detach().cpu().numpy().reshape(self._action_shape)
        reward = 0.0
        for _ in range(self.frame_skip):
            timestep = self._env.step(action)
            if timestep.reward is not None:  # None on a first step
                reward += float(timestep.reward)
            if timestep.last():
                break
        last = timestep.last()
        terminated = last and timestep.discount == 0
        truncated = last and not terminated
        self._episode_over = last
        term, trunc, done = torch.tensor([[terminated], [truncated], [last]]).unbind(0)
        entries = {
            K.REWARD: torch.tensor([reward], dtype=torch.float32),
            K.DONE: done,
            K.TERMINATED: term,
            K.TRUNCATED: trunc,
        }
        return self._observation_td(timestep.observation, entries)

    def _observation_td(self, observation, entries: dict) -> TensorDictBase:
        if not isinstance(observation, dict):
            observation = {K.OBSERVATION: observation}
        for key, (dtype, shape) in self._obs_keys.items():
            # copy: a task may hand back views of the physics buffers, which the next step overwrites
            array = np.array(observation[key], dtype=dtype, copy=True)
            entries[key] = torch.from_numpy(array).reshape(shape)
        if self.from_pixels:
            entries[K.PIXELS] = torch.from_numpy(self._render())
        if self.device.type != "cpu":
            return TensorDict(entries, batch_size=self.batch_size, device=self.device)
        return _td.new(entries, self.batch_size, self.device)

    def close(self, *, raise_if_closed: bool = False) -> None:
        if not self.is_closed:
            self._env.close()
        super().close(raise_if_closed=raise_if_closed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={type(self._env).__name__}, from_pixels={self.from_pixels}, device={self.device})"


class DMControlEnv(DMControlWrapper):
    """A dm_control suite task made by name: ``DMControlEnv("cartpole", "swingup")``.

    Args:
        env_name: the suite domain, e.g. ``"cartpole"``.
        task_name: the task of that domain, e.g. ``"swingup"``.
        from_pixels, pixels_only, frame_skip, render_kwargs, device, spec_check: see
            ``DMControlWrapper``.
        **task_kwargs: passed to the task as ``suite.load(..., task_kwargs=...)``, e.g.
            ``time_limit=1.0`` or ``random=0``.

    Example:
        >>> env = DMControlEnv("cartpole", "swingup", time_limit=0.05)
        >>> env.set_seed(0)
        1
        >>> td = env.rollout(100)
        >>> td.batch_size, td["position"].dtype, bool(td["next", "truncated"][-1])
        (torch.Size([5]), torch.float64, True)
    """

    @classproperty
    def available_envs(cls) -> list[tuple[str, list[str]]]:
        """``(domain, [task, ...])`` for every dm_control suite domain."""
        return list(_suite_tasks(_suite()).items())

    def __init__(
        self,
        env_name: str,
        task_name: str,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        render_kwargs: dict | None = None,
        device=None,
        spec_check: str = "first",
        **task_kwargs,
    ):
        suite = _suite()
        _check_task(suite, env_name, task_name)
        self.env_name, self.task_name = env_name, task_name
        env = suite.load(env_name, task_name, task_kwargs=task_kwargs or None)
        super().__init__(
            env,
            from_pixels=from_pixels,
            pixels_only=pixels_only,
            frame_skip=frame_skip,
            render_kwargs=render_kwargs,
            device=device,
            spec_check=spec_check,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env_name={self.env_name!r}, task_name={self.task_name!r}, from_pixels={self.from_pixels}, device={self.device})"


def _suite_tasks(suite) -> dict[str, list[str]]:
    tasks: dict[str, list[str]] = {}
    for domain, task in suite.ALL_TASKS:
        tasks.setdefault(domain, []).append(task)
    return tasks


def _check_task(suite, env_name, task_name) -> None:
    """Raise ValueError naming the domain/task, the valid ones and the closest match."""
    tasks = _suite_tasks(suite)
    if not isinstance(env_name, str) or env_name not in tasks:
        hint = did_you_mean(str(env_name), list(tasks))
        raise ValueError(
            f"Unknown dm_control domain {env_name!r}.{hint} Valid domains: {sorted(tasks)}."
        )
    if not isinstance(task_name, str) or task_name not in tasks[env_name]:
        hint = did_you_mean(str(task_name), tasks[env_name])
        raise ValueError(
            f"Unknown task {task_name!r} for dm_control domain {env_name!r}.{hint} Valid tasks: {sorted(tasks[env_name])}."
        )
