"""One Ray session for every ``ray``-marked test (2 CPUs, no dashboard, small store)."""

import os

import pytest

from tests.scheme import doubles

RAY_ARGS = dict(
    address="local", num_cpus=2, include_dashboard=False, object_store_memory=200 * 1024**2
)


def init_session_ray():
    """Start the suite's Ray session (the cluster test stops it and calls this again)."""
    import cloudpickle
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    cloudpickle.register_pickle_by_value(doubles)  # the workers need not import tests/
    if not ray.is_initialized():
        start_ray(ray, **RAY_ARGS)
    return ray


def start_ray(ray, attempts: int = 3, **kwargs) -> None:
    """``ray.init(**kwargs)``, tried again when Ray's node misses its fixed 30 s start-up
    limit (it does on a 2-core machine busy with other work)."""
    for attempt in range(attempts):
        try:
            ray.init(**kwargs)
            return
        except Exception as err:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(err) or attempt + 1 == attempts:
                raise
            ray.shutdown()


@pytest.fixture(scope="session")
def ray_session():
    pytest.importorskip("ray", reason="the distributed tests need ray")
    ray = init_session_ray()
    yield ray
    ray.shutdown()
