"""The Ray session as the workers see it: starting it, what it has free, who holds what.

* ``require_ray()`` imports Ray and starts a session if none runs (constructors only);
  ``running_ray()`` is the finalisers' form: the module if a session runs, else None. It
  never imports Ray nor starts a session (Ray's public calls start one by themselves
  when none runs, which from an object finaliser at interpreter exit blocks for good).
* Every ``WorkerGroup`` that holds actors is registered here with its owner's
  description (``register``/``unregister``), so that ``check_resources`` can say which
  object of this process holds the CPUs a new one needs. Before failing it runs
  ``gc.collect()``: an owner that is no longer reachable but kept alive by a reference
  cycle then frees its workers. ``ResourcesHeldError.holders`` lists the live owners.

Example:
    >>> check_resources([])  # nothing requested: nothing to check (Ray not imported)
"""

from __future__ import annotations

import gc
import os
import sys
import time
import weakref

__all__ = [
    "ResourcesHeldError",
    "check_resources",
    "holders",
    "ray_resources",
    "register",
    "require_ray",
    "running_ray",
    "unregister",
    "user_site",
]

_RESOURCE_OPTIONS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # group -> (owner, {res: n})


def require_ray(init_config: dict | None = None):
    """``import ray``, started with ``ray.init(**init_config)`` (default: no dashboard) if no
    session runs yet, or an ImportError saying how to install it."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - ray is an optional extra
        raise ImportError(
            "remote workers need Ray: pip install 'torchrl-lite[ray]' (or use one collection "
            "and one gradient worker, which run in this process without Ray)."
        ) from err
    if not ray.is_initialized():
        ray.init(**(init_config if init_config is not None else {"include_dashboard": False}))
    return ray


def running_ray():
    """The ``ray`` module if it is imported and a session runs, else None: what finalisers
    use (it neither imports Ray nor starts a session)."""
    ray = sys.modules.get("ray")
    try:
        return ray if ray is not None and ray.is_initialized() else None
    except Exception:  # interpreter shutdown: Ray's modules half torn down
        return None


def user_site() -> str:
    """``file:line`` of the innermost caller outside this package (where the user built
    the object), for messages that name it."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def ray_resources(option: str, resources: dict) -> dict:
    """Ray's resource names (``{"CPU": 1}``) for an actor option dict (``{"num_cpus": 1}``).

    Example:
        >>> ray_resources("remote_configs", {"num_cpus": 2, "resources": {"pool": 1}})
        {'CPU': 2, 'pool': 1}
        >>> ray_resources("remote_configs", {"num_cpus": 1, "num_gpus": None})  # TorchRL's
        {'CPU': 1}
    """
    if not isinstance(resources, dict):
        raise TypeError(f"{option} must be a dict like {{'num_cpus': 1}}, got {resources!r}.")
    out = {}
    for key, value in resources.items():
        if key == "resources":
            if not isinstance(value, dict):
                raise TypeError(f"{option}['resources'] must be a dict, got {value!r}.")
            out.update(value)
        elif key in _RESOURCE_OPTIONS:
            if value is None:  # TorchRL's default remote config has num_gpus=None
                continue
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{option}[{key!r}] must be a number >= 0, got {value!r}.")
            out[_RESOURCE_OPTIONS[key]] = value
        else:
            raise ValueError(
                f"{option} has an unknown entry {key!r}; valid: "
                f"{sorted([*_RESOURCE_OPTIONS, 'resources'])}."
            )
    return out


# -- who holds what in this process ---------------------------------------------------
def register(group, owner: str, resources: dict) -> None:
    """Record that ``group`` (weakly referenced) holds ``resources`` (Ray names, all its
    workers together) for ``owner`` (a description naming the object and how to close it)."""
    _LIVE[group] = (owner, dict(resources))


def unregister(group) -> None:
    try:
        _LIVE.pop(group, None)
    except Exception:  # interpreter shutdown
        pass


def holders(name: str) -> list[tuple[str, float]]:
    """``[(owner, amount)]`` of the live groups of this process holding resource ``name``."""
    out: dict[str, float] = {}
    for owner, held in list(_LIVE.values()):
        amount = held.get(name, 0)
        if amount:
            out[owner] = out.get(owner, 0) + amount
    return list(out.items())


class ResourcesHeldError(ValueError):
    """The cluster has the resources, but others hold them now; ``holders`` names the
    live objects of this process among them (``[(owner, amount)]``)."""

    def __init__(self, message: str, holders: list):
        super().__init__(message)
        self.holders = holders


def _short(ray, need: dict) -> list:
    free = ray.available_resources()
    return [(n, v, free.get(n, 0.0)) for n, v in need.items() if v > free.get(n, 0.0) + 1e-9]


def _wait_free(ray, need: dict, wait_s: float) -> list:
    """What is still short after up to ``wait_s`` seconds; at once when live holders of
    this process explain the shortfall (nothing will free it by waiting)."""
    deadline = time.monotonic() + float(wait_s)
    while True:
        short = _short(ray, need)
        if not short or time.monotonic() >= deadline:
            return short
        held = {n: sum(amount for _, amount in holders(n)) for n, _, _ in short}
        if all(value <= have + held[n] + 1e-9 for n, value, have in short):
            return short
        time.sleep(0.2)


def check_resources(requests: list[tuple[str, int, dict]], wait_s: float = 5.0) -> None:
    """Raise ValueError if ``[(option, n_workers, resources), ...]`` exceed the cluster's
    total, or ``ResourcesHeldError`` if more than is free now is needed. Before that,
    ``gc.collect()`` frees unreachable owners kept alive by reference cycles, and Ray is
    given up to ``wait_s`` seconds to report freed resources (it reports those of actors
    killed just before with a short delay), unless live objects of this process hold
    what is missing."""
    if not requests:
        return
    ray = require_ray()
    total = ray.cluster_resources()
    need: dict[str, float] = {}
    who: dict[str, list[str]] = {}
    for option, count, resources in requests:
        for name, value in ray_resources(option, resources).items():
            need[name] = need.get(name, 0) + count * value
            who.setdefault(name, []).append(f"{option}={resources} x {count} workers")
    less = {name: f"{who[name][0].split('=')[0]}={{'num_cpus': 0.5}}" for name in need}
    for name, value in need.items():
        have = total.get(name, 0)
        if value > have:
            raise ValueError(
                f"the workers request {value:g} {name} in all ({'; '.join(who[name])}) but the "
                f"Ray cluster has {have:g} (ray.cluster_resources()). Lower the worker counts, "
                f"request less per worker (e.g. {less[name]}), or start Ray with more "
                f"(ray.init(num_cpus=...), or add nodes)."
            )
    if not _short(ray, need):
        return
    gc.collect()  # owners that are unreachable but in a reference cycle free their workers
    short = _wait_free(ray, need, wait_s)
    if not short:
        return
    name, value, have = short[0]
    live = holders(name)
    head = (
        f"the workers request {value:g} {name} in all ({'; '.join(who[name])}) but only "
        f"{have:g} of the Ray cluster's {total.get(name, 0):g} {name} are free "
        f"(ray.available_resources())"
    )
    if live:
        held = "; ".join(f"{owner} holds {amount:g} {name}" for owner, amount in live)
        raise ResourcesHeldError(
            f"{head}: still running in this process: {held}. Close it first, or drop every "
            f"reference to it (del) so that it is freed; or request less per worker (e.g. "
            f"{less[name]}), or start Ray with more.",
            live,
        )
    raise ResourcesHeldError(
        f"{head}: other actors hold the rest (another process's Scheme or collector in this "
        f"Ray cluster?). Shut those down first, request less per worker (e.g. {less[name]}), "
        f"or start Ray with more.",
        [],
    )
