"""TorchRL's ``AsyncCollector``: one collector in one worker process, collecting ahead."""

from __future__ import annotations

from torchrl_lite.collectors.multi import MultiaSyncDataCollector

__all__ = ["AsyncCollector"]


class AsyncCollector(MultiaSyncDataCollector):
    """A ``MultiaSyncDataCollector`` with a single worker: the env runs in another process
    and keeps collecting while this one trains on the previous batch.

    Args:
        create_env_fn: one zero-argument env constructor (or a one-element list).
        policy: as for ``SyncDataCollector``.
        **kwargs: as for ``MultiaSyncDataCollector`` (``frames_per_batch``, ...).

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> collector = AsyncCollector(PendulumEnv, None, frames_per_batch=10, total_frames=20)
        >>> [data.numel() for data in collector]
        [10, 10]
        >>> collector.shutdown()
    """

    def __init__(self, create_env_fn, policy=None, **kwargs):
        if isinstance(create_env_fn, (list, tuple)):
            if len(create_env_fn) != 1:
                raise ValueError(
                    f"AsyncCollector runs one env in one worker, got {len(create_env_fn)} env "
                    "constructors; use MultiaSyncDataCollector for several."
                )
            create_env_fn = create_env_fn[0]
        if kwargs.get("num_workers", 1) != 1:
            raise ValueError(
                f"AsyncCollector has one worker, got num_workers={kwargs['num_workers']}; use "
                "MultiaSyncDataCollector for several."
            )
        kwargs.pop("num_workers", None)
        super().__init__([create_env_fn], policy, **kwargs)
