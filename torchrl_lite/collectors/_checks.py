"""The collector's first-batch check of what the policy wrote against the env's action spec."""

from __future__ import annotations

from tensordict import TensorDictBase

from torchrl_lite._utils import missing_key_message
from torchrl_lite.collectors._args import index_action, to_one_hot
from torchrl_lite.envs.utils import action_entries, check_action_value

__all__ = ["check_first_actions"]


def check_first_actions(collector, td, before: set) -> None:
    """The first batch's check of the policy's output against the env's action spec:
    the action keys are written, with the spec's shape and bounds (categorical indices
    for a one-hot spec are converted, see ``index_action``); else a clear error."""
    owner = type(collector).__name__
    if not isinstance(td, TensorDictBase):
        raise TypeError(
            f"{owner}: the policy returned {type(td).__name__}; it must return the "
            "TensorDict it was given, with the action written in it."
        )
    written = [k for k in td.keys(True, True) if k not in before]
    out_keys = getattr(collector.policy, "out_keys", None)
    declared = f" (policy.out_keys={out_keys})" if out_keys is not None else ""
    for key, spec, value in action_entries(collector.env, td):
        if value is None:
            raise KeyError(
                f"{owner}: the policy did not write {key!r}, which the env's action spec "
                f"declares ({spec}). The policy wrote {written}{declared}. Make the "
                f"policy's out_keys include {key!r}. "
                + missing_key_message(key, td.keys(True, True))
            )
        problem = None
        if value.shape != spec.shape and index_action(owner, key, spec, value):
            collector._index_actions[key] = spec
            to_one_hot(td, {key: spec})
        elif collector.env.batch_locked and value.shape != spec.shape:
            problem = f"shape {list(value.shape)} differs from the spec's {list(spec.shape)}"
        else:
            try:
                check_action_value(collector.env, key, spec, value)  # a float overshoot warns
            except ValueError as err:
                problem = str(err)
        if problem is not None:
            raise ValueError(
                f"{owner}: the policy wrote {key!r} outside the env's action spec: "
                f"{problem}\n  spec: {spec}\n  policy output keys: {written}{declared}"
            )
