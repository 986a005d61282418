"""Collector builders of TorchRL's ``torchrl.trainers.helpers``: ``n`` collectors' worth of
env constructors, grouped ``num_env_per_collector`` to a worker (a ``ParallelEnv`` when
more than one), run by a multiprocess collector."""

from __future__ import annotations

from collections.abc import Callable

from torchrl_lite.collectors import MultiaSyncDataCollector, MultiSyncDataCollector

__all__ = ["sync_async_collector", "sync_sync_collector"]


def _group_env_fns(env_fns, env_kwargs, num_env_per_collector, num_collectors, owner):
    """``(per-worker constructors, per-worker kwargs)`` from one constructor or a list."""
    if isinstance(env_fns, (list, tuple)):
        num_env = len(env_fns)
        if num_env_per_collector is None and num_collectors is None:
            raise ValueError(f"{owner}: pass num_env_per_collector or num_collectors.")
        if num_env_per_collector is None:
            num_env_per_collector = -(num_env // -num_collectors)
        if num_collectors is None:
            num_collectors = -(num_env // -num_env_per_collector)
        if num_env_per_collector * num_collectors < num_env:
            raise ValueError(
                f"{owner}: num_env_per_collector * num_collectors = "
                f"{num_env_per_collector * num_collectors} is less than the {num_env} env "
                "constructors given."
            )
        env_fns = list(env_fns)
    else:
        if num_env_per_collector is None or num_collectors is None:
            raise ValueError(
                f"{owner}: with a single env constructor, pass both num_env_per_collector and "
                f"num_collectors (got {num_env_per_collector} and {num_collectors})."
            )
        num_env = num_env_per_collector * num_collectors
        env_fns = [env_fns] * num_env
    if not isinstance(env_kwargs, (list, tuple)):
        env_kwargs = [dict(env_kwargs or {}) for _ in range(num_env)]
    groups = [
        (env_fns[i : i + num_env_per_collector], env_kwargs[i : i + num_env_per_collector])
        for i in range(0, num_env, num_env_per_collector)
    ]
    if num_env_per_collector == 1:
        return [fns[0] for fns, _ in groups], [kws[0] for _, kws in groups]
    from torchrl_lite.envs import ParallelEnv

    def parallel(fns, kws):
        return lambda: ParallelEnv(len(fns), fns, create_env_kwargs=kws)

    return [parallel(fns, kws) for fns, kws in groups], None


def _make(cls, env_fns, env_kwargs, policy, num_env_per_collector, num_collectors, **kwargs):
    fns, kws = _group_env_fns(
        env_fns, env_kwargs, num_env_per_collector, num_collectors, cls.__name__
    )
    return cls(fns, policy, create_env_kwargs=kws, **kwargs)


def sync_async_collector(
    env_fns: Callable | list,
    env_kwargs: dict | list | None,
    policy=None,
    num_env_per_collector: int | None = None,
    num_collectors: int | None = None,
    **kwargs,
) -> MultiaSyncDataCollector:
    """A ``MultiaSyncDataCollector`` over ``num_collectors`` workers, each stepping
    ``num_env_per_collector`` envs; ``kwargs`` go to the collector (``frames_per_batch``,
    ``total_frames``, ``postproc``, ``device``, ...).

    Example:
        >>> c = sync_async_collector(lambda: GymEnv("Pendulum-v1"), {}, None,
        ...     num_env_per_collector=1, num_collectors=2, frames_per_batch=10,
        ...     total_frames=20)  # doctest: +SKIP
    """
    return _make(
        MultiaSyncDataCollector, env_fns, env_kwargs, policy, num_env_per_collector,
        num_collectors, **kwargs,
    )  # fmt: skip


def sync_sync_collector(
    env_fns: Callable | list,
    env_kwargs: dict | list | None,
    policy=None,
    num_env_per_collector: int | None = None,
    num_collectors: int | None = None,
    **kwargs,
) -> MultiSyncDataCollector:
    """Like :func:`sync_async_collector`, with a ``MultiSyncDataCollector`` (each batch
    gathers all workers' frames)."""
    return _make(
        MultiSyncDataCollector, env_fns, env_kwargs, policy, num_env_per_collector,
        num_collectors, **kwargs,
    )  # fmt: skip
