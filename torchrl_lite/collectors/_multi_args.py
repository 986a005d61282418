"""The multiprocess collectors' arguments: one env factory per worker (never a live env
that runs processes of its own) and per-worker options."""

from __future__ import annotations

import functools
import warnings

from torchrl_lite.collectors._args import check_int
from torchrl_lite.envs.common import EnvBase


def _factories(owner: str, create_env_fn, num_workers, create_env_kwargs) -> list:
    """One zero-argument env factory per worker."""
    fns = list(create_env_fn) if isinstance(create_env_fn, (list, tuple)) else None
    if fns is None:
        if num_workers is None:
            raise ValueError(
                f"{owner}: pass a list of env constructors, or one constructor and num_workers."
            )
        fns = [create_env_fn] * check_int("num_workers", num_workers, 1, owner)
    elif num_workers is not None and num_workers != len(fns):
        raise ValueError(
            f"{owner}: num_workers={num_workers} but create_env_fn lists {len(fns)} constructors."
        )
    if not fns:
        raise ValueError(f"{owner}: create_env_fn is an empty list; give at least one constructor.")
    for i, fn in enumerate(fns):
        if isinstance(fn, EnvBase):
            if all(fn is not other for other in fns[:i]):  # once per instance
                _check_shippable(owner, fn)
        elif not callable(fn):
            raise TypeError(
                f"{owner}: create_env_fn must hold envs or zero-argument callables returning "
                f"envs, got {fn!r} ({type(fn).__name__})."
            )
    instances = [fn for fn in fns if isinstance(fn, EnvBase)]
    if len({id(fn) for fn in instances}) < len(instances):
        warnings.warn(
            f"{owner}: the same env instance is given to several workers; each worker runs "
            "its own copy, and the copies start from the same RNG state (identical data) "
            "until you call collector.set_seed(seed).",
            stacklevel=3,
        )
    kwargs = _per_worker(owner, "create_env_kwargs", create_env_kwargs, len(fns))
    factories = []
    for fn, kw in zip(fns, kwargs):
        if isinstance(fn, EnvBase):
            if kw:
                raise ValueError(
                    f"{owner}: create_env_kwargs needs constructors, not env instances"
                )
            fn = functools.partial(_given_env, fn)  # each worker gets its copy of it
        factories.append(functools.partial(fn, **kw) if kw else fn)
    return factories


def _given_env(env: EnvBase) -> EnvBase:
    return env


def _check_shippable(owner: str, env: EnvBase) -> None:
    """An env instance goes to a worker as a copy (forked or pickled): not one that is
    closed. An env over a batched env whose workers run is closed first (``start()``
    reopens it): each collector worker starts its copy, as with TorchRL's batched envs,
    which start their workers lazily."""
    if env.is_closed:
        raise ValueError(f"{owner}: the env {env!r} is closed")
    inner = env
    while inner is not None:
        running = hasattr(type(inner), "worker_pids") and inner.worker_pids
        if running and hasattr(inner, "_restart"):
            env.close()
            return
        if running:
            raise TypeError(
                f"{owner}: {type(inner).__name__} instances run worker processes and cannot be "
                "copied into a collector worker; pass a constructor, e.g. "
                "`lambda: ParallelEnv(...)`."
            )
        inner = getattr(inner, "base_env", None)


def _per_worker(owner: str, name: str, value, n: int) -> list:
    """``value`` for each of ``n`` workers: a list of ``n`` values, or one for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} lists {len(value)} values for {n} workers.")
        return list(value)
    return [value] * n
