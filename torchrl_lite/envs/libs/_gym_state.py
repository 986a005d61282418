"""The state of a gymnasium env, for ``GymWrapper.state_dict``: pickled whole when it can be.

Classic-control and MuJoCo envs without an open renderer pickle whole (physics, time
limit, ``np_random``); a sync vector env pickles copy by copy (its env factories are
closures); anything else (an open renderer, an async vector env whose copies live in other
processes) keeps only its ``np_random`` state, with a warning: a resumed run continues,
but not bit-exact. Loading gives the env the saved state in place (same object), so bound
methods held elsewhere (``GymGroup`` keeps ``env.step``) stay valid.
"""

from __future__ import annotations

import contextlib
import pickle
import warnings

import numpy as np


def gym_env_state(genv) -> dict:
    """A snapshot of the gymnasium env ``genv`` (see the module docstring)."""
    with contextlib.suppress(Exception):
        return {"pickle": pickle.dumps(genv)}
    base = getattr(genv, "unwrapped", genv)
    subs = getattr(base, "envs", None)
    if subs is not None:  # a sync vector env: its env factories are closures
        with contextlib.suppress(Exception):
            return {
                "vector": pickle.dumps(_picklable_attrs(base, skip=("envs", "env_fns"))),
                "envs": [pickle.dumps(e) for e in subs],
            }
    rng = getattr(base, "np_random", None)
    warnings.warn(
        f"{type(base).__name__} cannot be pickled (an open renderer, or an async vector env): "
        f"only its np_random state is saved, so a resumed run is not bit-exact.",
        stacklevel=3,  # the caller of GymWrapper.state_dict
    )
    if isinstance(rng, np.random.Generator):
        return {"np_random": rng.bit_generator.state}
    return {}


def load_gym_env_state(genv, state: dict) -> None:
    """Give ``genv`` the state :func:`gym_env_state` returned (``genv`` built the same way)."""
    if "pickle" in state:
        _transplant(genv, pickle.loads(state["pickle"]))
    elif "vector" in state:
        base = getattr(genv, "unwrapped", genv)
        if len(base.envs) != len(state["envs"]):
            raise ValueError(
                f"the checkpoint holds {len(state['envs'])} vectorised gymnasium envs, this "
                f"env has {len(base.envs)}; build the env as it was built when saved."
            )
        for key, value in pickle.loads(state["vector"]).items():
            setattr(base, key, value)
        for sub, blob in zip(base.envs, state["envs"]):
            _transplant(sub, pickle.loads(blob))
    elif "np_random" in state:
        genv.unwrapped.np_random.bit_generator.state = state["np_random"]


def _picklable_attrs(obj, skip: tuple) -> dict:
    out = {}
    for key, value in vars(obj).items():
        if key in skip:
            continue
        with contextlib.suppress(Exception):
            pickle.dumps(value)
            out[key] = value
    return out


def _transplant(obj, fresh) -> None:
    """Give ``obj`` the whole state of ``fresh`` (same class), keeping ``obj``'s identity."""
    if type(obj) is not type(fresh):
        raise ValueError(
            f"the checkpoint's gymnasium env is a {type(fresh).__name__}, this env is a "
            f"{type(obj).__name__}; build the env as it was built when saved."
        )
    obj.__dict__.clear()
    obj.__dict__.update(fresh.__dict__)
