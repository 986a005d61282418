"""Pieces of one collector step: what the policy wrote under ``"next"`` kept, and the
recorded step's observations dropped for ``compact_obs=True``."""

from __future__ import annotations

from tensordict import TensorDictBase

from torchrl_lite import _keys as K


def _merge_preset(next_td: TensorDictBase, preset: TensorDictBase) -> None:
    """Keep the ``("next", ...)`` entries the policy wrote (e.g. recurrent states) that
    the env's step result lacks."""
    for key, value in preset.items():
        if next_td.get(key, None) is None:
            next_td.set(key, value)


def _with_compact_obs(env):
    """The env's post-step_mdp hook followed by one that drops the observation and state
    entries from the recorded step's ``"next"`` (``compact_obs=True``)."""
    inner = env._post_step_mdp_hook()
    keys = [*env.full_observation_spec.keys(True, True), *env.full_state_spec.keys(True, True)]

    def hook(tensordict, root):
        if inner is not None:
            inner(tensordict, root)
        nxt = tensordict.get(K.NEXT)
        for key in keys:
            if nxt.get(key, None) is not None:
                nxt.pop(key)

    return hook
