"""Env factories of seed 000 (PyTorchRL's names): one seeded env per (worker, env) index.

``VecEnv.create_factory`` (``torchrl_lite.agent.env``) calls an env factory once per env
copy with ``index_grad_worker``, ``index_col_worker``, ``index_env`` and the run's base
``seed``; the factory seeds its env with :func:`env_seed` of those four numbers, so that
every copy in every worker gets its own reproducible seed. The gymnasium factories return
plain ``gymnasium.Env`` objects (any ``gymnasium.Wrapper`` can be added on top); the
dm_control ones return a torchrl_lite ``EnvBase`` with one float32 ``"observation"``.

A seeded gymnasium env uses its seed at its first ``reset()`` without a seed (gymnasium
seeds at reset, not at construction), so ``env.reset()`` on a fresh factory env equals
``gymnasium.make(id).reset(seed=env_seed(...))``.
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np

__all__ = [
    "dmc_test_env_factory",
    "dmc_train_env_factory",
    "RebuildOnUnpickle",
    "SeedOnFirstReset",
    "env_seed",
    "gym_test_env_factory",
    "gym_train_env_factory",
    "pybullet_test_env_factory",
    "pybullet_train_env_factory",
]

TEST_SEED_OFFSET = 10_000
"""Test envs draw their seeds from ``seed + TEST_SEED_OFFSET`` (never a training seed)."""


def env_seed(seed: int, index_grad_worker: int = 0, index_col_worker: int = 0, index_env: int = 0):
    """The seed of env ``index_env`` of collection worker ``index_col_worker`` of gradient
    worker ``index_grad_worker`` in a run seeded with ``seed``.

    A hash of the four numbers (``numpy.random.SeedSequence``), so copies never share a
    seed however many envs and workers there are, and a run is reproducible from ``seed``.

    Example:
        >>> env_seed(0) == env_seed(0, 0, 0, 0), env_seed(0, 0, 0, 1) == env_seed(0, 0, 1, 0)
        (True, False)
    """
    for name, value in (
        ("seed", seed),
        ("index_grad_worker", index_grad_worker),
        ("index_col_worker", index_col_worker),
        ("index_env", index_env),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"env_seed: {name} must be an int >= 0, got {value!r}.")
    entropy = [int(seed), int(index_grad_worker), int(index_col_worker), int(index_env)]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


class SeedOnFirstReset(gymnasium.Wrapper):
    """Applies a seed chosen at construction at the env's first ``reset()`` without a seed
    (and to its action space now), as ``env.seed(seed)`` did in gym < 0.26.

    Example:
        >>> env = SeedOnFirstReset(gymnasium.make("Pendulum-v1"), 7)
        >>> raw = gymnasium.make("Pendulum-v1")
        >>> bool((env.reset()[0] == raw.reset(seed=7)[0]).all())
        True
    """

    def __init__(self, env, seed: int):
        super().__init__(env)
        self.first_seed = int(seed)
        self._pending = True
        env.action_space.seed(self.first_seed)

    def reset(self, *, seed=None, options=None):
        if self._pending and seed is None:
            seed = self.first_seed
        self._pending = False
        return self.env.reset(seed=seed, options=options)


def gym_train_env_factory(
    env_id: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **make_kwargs,
):
    """A gymnasium env ``gymnasium.make(env_id, **make_kwargs)``, seeded for its index.

    Args:
        env_id: a registered gymnasium id (unknown ids raise ValueError with close matches).
        index_col_worker: the collection worker holding the copy.
        index_grad_worker: the gradient worker above that collection worker.
        index_env: the copy's index among its worker's envs.
        seed: the run's base seed (see :func:`env_seed`).
        **make_kwargs: passed to ``gymnasium.make`` (e.g. ``render_mode``).

    Example:
        >>> env = gym_train_env_factory("Pendulum-v1", index_env=1, seed=3)
        >>> import gymnasium
        >>> raw = gymnasium.make("Pendulum-v1")
        >>> bool((env.reset()[0] == raw.reset(seed=env_seed(3, 0, 0, 1))[0]).all())
        True
    """
    from torchrl_lite.envs.libs._gym_checks import _check_env_id

    _check_env_id(env_id)
    env = gymnasium.make(env_id, **make_kwargs)
    return SeedOnFirstReset(env, env_seed(seed, index_grad_worker, index_col_worker, index_env))


def gym_test_env_factory(
    env_id: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **make_kwargs,
):
    """Like :func:`gym_train_env_factory`, with seeds from ``seed + TEST_SEED_OFFSET``."""
    return gym_train_env_factory(
        env_id, index_col_worker, index_grad_worker, index_env, seed + TEST_SEED_OFFSET,
        **make_kwargs,
    )  # fmt: skip


class RebuildOnUnpickle(gymnasium.Wrapper):
    """An env whose state does not survive pickling (a PyBullet env's unpickled copy has no
    physics-server connection): pickling keeps how to build it and its ``np_random`` state;
    the unpickled copy is built afresh, and its first ``step`` ends the interrupted episode
    (a reset, reward 0, ``truncated=True``), after which it runs on with the saved RNG.
    Checkpoints of such envs (``GymWrapper.state_dict``) therefore resume, not bit-exact.

    Args:
        env: the env, as ``build()`` returns it.
        build: a picklable zero-argument callable that builds the env again.

    Example:
        >>> import functools, pickle
        >>> build = functools.partial(gymnasium.make, "Pendulum-v1")
        >>> env = RebuildOnUnpickle(build(), build)
        >>> _ = env.reset(seed=0)
        >>> copy = pickle.loads(pickle.dumps(env))
        >>> copy.step(env.action_space.sample())[3]  # truncated: the episode was cut
        True
    """

    def __init__(self, env, build):
        super().__init__(env)
        self.build = build
        self._interrupted = False
        self._rng_state = None

    def __reduce_ex__(self, protocol):
        rng = getattr(self.env.unwrapped, "_np_random", None)
        state = rng.bit_generator.state if rng is not None else None
        return (_rebuilt, (self.build, state))

    def step(self, action):
        if self._interrupted:
            self._interrupted = False
            obs, info = self.env.reset()
            if self._rng_state is not None:
                self.env.unwrapped.np_random.bit_generator.state = self._rng_state
            return obs, 0.0, False, True, info
        return self.env.step(action)


def _rebuilt(build, rng_state):
    env = RebuildOnUnpickle(build(), build)
    env._interrupted, env._rng_state = True, rng_state
    return env


def _register_pybullet() -> None:
    from torchrl_lite._utils import require

    require("pybullet_envs_gymnasium", "pybullet")
    import pybullet_envs_gymnasium  # noqa: F401  (registers the *BulletEnv-v0 ids)


def pybullet_train_env_factory(
    env_id: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **make_kwargs,
):
    """A PyBullet env (``pybullet-envs-gymnasium``, e.g. ``"HalfCheetahBulletEnv-v0"``),
    seeded for its index; see :func:`gym_train_env_factory` for the arguments.

    Example:
        >>> env = pybullet_train_env_factory("HalfCheetahBulletEnv-v0")
        >>> obs, info = env.reset()
        >>> obs.shape, env.action_space.shape
        ((26,), (6,))
        >>> env.close()
    """
    _register_pybullet()
    env = gym_train_env_factory(
        env_id, index_col_worker, index_grad_worker, index_env, seed, **make_kwargs
    )
    build = functools.partial(gym_train_env_factory, env_id, index_col_worker,
                              index_grad_worker, index_env, seed, **make_kwargs)  # fmt: skip
    return RebuildOnUnpickle(env, build)  # its unpickled copy would have no physics server


def pybullet_test_env_factory(
    env_id: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **make_kwargs,
):
    """Like :func:`pybullet_train_env_factory`, with seeds from ``seed + TEST_SEED_OFFSET``
    (pass ``render_mode="human"`` to watch it in PyBullet's window)."""
    return pybullet_train_env_factory(
        env_id, index_col_worker, index_grad_worker, index_env, seed + TEST_SEED_OFFSET,
        **make_kwargs,
    )  # fmt: skip


def dmc_train_env_factory(
    domain_name: str,
    task_name: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **env_kwargs,
):
    """A dm_control task as a torchrl_lite env with one float32 ``"observation"`` (the
    recipes' dm_control env), seeded for its index.

    Args:
        domain_name: the suite's domain, e.g. ``"cartpole"``.
        task_name: the domain's task, e.g. ``"swingup"``.
        index_col_worker: the collection worker holding the copy (see :func:`env_seed`).
        index_grad_worker: the gradient worker above that collection worker.
        index_env: the copy's index among its worker's envs.
        seed: the run's base seed.
        **env_kwargs: passed to ``DMControlEnv`` (e.g. ``from_pixels``).
    """
    from torchrl_lite.envs.make import DM_CONTROL_PREFIX, make_env

    return make_env(
        f"{DM_CONTROL_PREFIX}{domain_name}-{task_name}",
        seed=env_seed(seed, index_grad_worker, index_col_worker, index_env),
        **env_kwargs,
    )


def dmc_test_env_factory(
    domain_name: str,
    task_name: str,
    index_col_worker: int = 0,
    index_grad_worker: int = 0,
    index_env: int = 0,
    seed: int = 0,
    **env_kwargs,
):
    """Like :func:`dmc_train_env_factory`, with seeds from ``seed + TEST_SEED_OFFSET``."""
    return dmc_train_env_factory(
        domain_name, task_name, index_col_worker, index_grad_worker, index_env,
        seed + TEST_SEED_OFFSET, **env_kwargs,
    )  # fmt: skip
