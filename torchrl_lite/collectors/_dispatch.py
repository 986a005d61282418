"""TorchRL's ``Collector(..., backend=..., num_collectors=..., sync=...)`` construction.

Current TorchRL builds every collector through ``Collector``: ``backend="direct"`` (the
default) collects in this process, ``"process"`` runs one collector per worker process
(``sync=True``: :class:`MultiSyncDataCollector`, else :class:`MultiaSyncDataCollector`),
``"ray"`` runs them as Ray actors. :class:`BackendDispatch` is the metaclass that reads
those keywords when ``SyncDataCollector`` (also ``Collector``) is called and builds the
chosen class; the other keywords pass through unchanged. The backends other than
``"direct"`` register their builders here (``register_backend``: ``multi.py`` and
``distributed/ray_collector.py``, both imported by the ``collectors`` package), so this
module imports none of them.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

__all__ = ["BACKENDS", "BackendDispatch", "register_backend"]

BACKENDS = ("direct", "process", "ray")
_UNSUPPORTED = {
    "rpc": "torch.distributed.rpc",
    "distributed": "torch.distributed",
    "submitit": "submitit",
}
_BUILDERS: dict = {}  # backend -> build(*args, sync=..., **kwargs)


def register_backend(backend: str, build) -> None:
    """Make ``Collector(..., backend=backend)`` call ``build(*args, sync=sync, **kwargs)``."""
    if backend not in BACKENDS or backend == "direct":
        raise ValueError(f"register_backend: {backend!r} is not one of {list(BACKENDS[1:])}")
    _BUILDERS[backend] = build


class BackendDispatch(type):
    """Metaclass: ``Collector(..., backend=...)`` returns the collector of that backend."""

    @property
    def __signature__(cls):
        sig = inspect.signature(cls.__init__)
        params = list(sig.parameters.values())[1:]
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
            for name in ("backend", "backend_options", "num_collectors", "sync")
        ]
        kinds = [p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD]
        return sig.replace(parameters=kinds + extra)

    def __call__(
        cls, *args, backend=None, backend_options=None, num_collectors=None, sync=None, **kwargs
    ):
        owner = cls.__name__
        if num_collectors is not None and (
            isinstance(num_collectors, bool)
            or not isinstance(num_collectors, int)
            or num_collectors < 1
        ):
            raise ValueError(f"{owner}: num_collectors must be an int >= 1, got {num_collectors!r}")
        if sync is not None and not isinstance(sync, bool):
            raise TypeError(f"{owner}: sync must be True, False or None, got {sync!r}")
        if backend is None:
            backend = "process" if num_collectors is not None else "direct"
        if backend in _UNSUPPORTED:
            raise ValueError(
                f"{owner}: backend={backend!r} ({_UNSUPPORTED[backend]}) is not available in "
                f"torchrl_lite; use one of {list(BACKENDS)}."
            )
        if backend not in BACKENDS:
            raise ValueError(
                f"{owner}: unknown backend {backend!r}; expected one of {list(BACKENDS)}."
            )
        options = dict(backend_options or {})
        clash = sorted(set(options) & set(kwargs))
        if clash:
            raise ValueError(
                f"{owner}: backend_options repeat the collector arguments {clash}; pass each once."
            )
        if backend == "direct":
            if num_collectors not in (None, 1) or sync is not None or options:
                raise ValueError(
                    f"{owner}: backend='direct' collects in this process with one env; "
                    "num_collectors, sync and backend_options need backend='process' or 'ray'."
                )
            args, kwargs = _one_env(args, kwargs, owner)
            return super().__call__(*args, **kwargs)
        kwargs.update(options)
        args, kwargs = _env_list(args, kwargs, num_collectors, owner)
        return _BUILDERS[backend](*args, sync=sync, **kwargs)


def _split_env(args, kwargs):
    if args:
        return args[0], True
    return kwargs.get("create_env_fn"), False


def _put_env(args, kwargs, env, positional):
    if positional:
        return (env, *args[1:]), kwargs
    return args, {**kwargs, "create_env_fn": env}


def _is_list(value) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _one_env(args, kwargs, owner):
    """``backend='direct'`` accepts a one-element list of constructors, as TorchRL does."""
    env, positional = _split_env(args, kwargs)
    if not _is_list(env):
        return args, kwargs
    if len(env) != 1:
        raise ValueError(
            f"{owner}: backend='direct' runs one env, got a list of {len(env)} constructors; "
            "use backend='process' (one worker each) or pass one constructor."
        )
    return _put_env(args, kwargs, env[0], positional)


def _env_list(args, kwargs, num_collectors, owner):
    """One env constructor per worker: a list as given, or one repeated ``num_collectors``."""
    env, positional = _split_env(args, kwargs)
    if env is None:
        return args, kwargs
    if _is_list(env):
        env = list(env)
        if num_collectors is not None and num_collectors != len(env):
            raise ValueError(
                f"{owner}: num_collectors={num_collectors} but {len(env)} env constructors were "
                "given; pass one constructor per collector or drop num_collectors."
            )
    else:
        env = [env] * (num_collectors or 1)
    return _put_env(args, kwargs, env, positional)
