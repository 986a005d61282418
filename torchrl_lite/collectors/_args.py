"""Argument checks shared by the collectors (the env, the policy, counts)."""

from __future__ import annotations

import warnings

import torch
from tensordict.nn import TensorDictModuleBase
from torch import nn

from torchrl_lite._utils import did_you_mean
from torchrl_lite.envs.common import EnvBase


def check_int(name: str, value, low: int, owner: str) -> int:
    """``value`` if it is an int ``>= low``; else TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{owner}: {name} must be >= {low}, got {value}")
    return value


def build_env(create_env_fn, kwargs, owner: str) -> EnvBase:
    """The env: ``create_env_fn`` itself, or what it returns when called with ``kwargs``."""
    if isinstance(create_env_fn, EnvBase):
        if kwargs:
            raise ValueError(f"{owner}: create_env_kwargs needs create_env_fn to be a callable")
        env = create_env_fn
    elif callable(create_env_fn):
        env = create_env_fn(**(kwargs or {}))
        if not isinstance(env, EnvBase):
            raise TypeError(
                f"{owner}: create_env_fn must return an EnvBase (e.g. GymEnv), got "
                f"{type(env).__name__}"
            )
    else:
        raise TypeError(
            f"{owner}: create_env_fn must be an env or a callable returning one, got "
            f"{create_env_fn!r}"
        )
    if env.is_closed and hasattr(env, "start"):
        env.start()  # TorchRL's collectors reuse an env a previous collector closed
    if env.is_closed:
        raise ValueError(f"{owner}: the env is closed")
    return env


def check_policy(policy, owner: str):
    """``policy`` if a collector can call it on a TensorDict (or None); else TypeError."""
    if policy is None:
        return None
    if isinstance(policy, nn.Module) and not isinstance(policy, TensorDictModuleBase):
        raise TypeError(
            f"{owner}: the policy is a {type(policy).__name__}, an nn.Module that does not "
            "read TensorDicts. Wrap it, e.g. TensorDictModule(net, in_keys=['observation'], "
            "out_keys=['action'])."
        )
    if not callable(policy):
        raise TypeError(
            f"{owner}: policy must be callable (TensorDict -> TensorDict), got {policy!r}"
        )
    return policy


def param_device(policy) -> torch.device | None:
    """Where the policy's first parameter (or buffer) lives; None without any."""
    if isinstance(policy, nn.Module):
        for tensor in (*policy.parameters(), *policy.buffers()):
            return tensor.device
    return None


def check_policy_inputs(policy, provided: set, owner: str) -> None:
    """Raise a ``KeyError`` naming the policy's ``in_keys`` that nothing provides (the env's
    observation, state and done specs, or the collector's hidden states): once, at
    construction, instead of tensordict's message deep in the first step."""
    in_keys = getattr(policy, "in_keys", None)
    if not isinstance(in_keys, list | tuple):
        return
    missing = [key for key in in_keys if key not in provided]
    if missing:
        available = sorted(provided, key=str)
        raise KeyError(
            f"{owner}: the policy reads {missing} (policy.in_keys={list(in_keys)}), which the "
            f"env does not provide; the env gives {available}."
            + did_you_mean(missing[0], available)
            + " Build the policy with in_keys from these, or add a transform that writes them."
        )


def index_action(owner: str, key, spec, value) -> bool:
    """Whether ``value`` is a categorical index where ``spec`` is one-hot: integer, with the
    spec's shape minus its last dim. The collector then converts such actions to one-hot
    (with this one warning) instead of refusing them; TorchRL takes them unchecked and
    reads every index as action 0."""
    from torchrl_lite.data.tensor_specs import OneHot

    if not isinstance(spec, OneHot) or value.is_floating_point() or value.dtype == torch.bool:
        return False
    if tuple(value.shape) != tuple(spec.shape[:-1]):
        return False
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= spec.shape[-1]):
        return False  # not indices of this spec: the shape error stands
    warnings.warn(
        f"{owner}: the policy wrote {key!r} as categorical indices (shape {list(value.shape)}) "
        f"for a one-hot action spec of shape {list(spec.shape)}; they are converted to "
        "one-hot. Write one-hot actions, or build the env with categorical_action_encoding=True.",
        stacklevel=4,
    )
    return True


def to_one_hot(td, index_keys: dict) -> None:
    """Replace the categorical actions of ``index_keys`` (``{key: spec}``) by one-hot, in place."""
    for key, spec in index_keys.items():
        value = td.get(key)
        td.set(key, torch.nn.functional.one_hot(value.long(), spec.shape[-1]).to(spec.dtype))
