"""What collectors read from a policy module: its weights and its recurrent hidden states.

``policy_weights`` gives the parameters and buffers as a TensorDict
(``TensorDict.from_module``); ``copy_weights`` checks new weights against that structure
(naming every missing, unexpected or mismatched entry) before copying anything.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn


def policy_weights(policy) -> TensorDictBase | None:
    """The policy's parameters and buffers (detached, sharing storage), or None."""
    if not isinstance(policy, nn.Module):
        return None
    if any(isinstance(p, nn.parameter.UninitializedParameter) for p in policy.parameters()):
        raise ValueError(
            "The policy has uninitialised (lazy) parameters; run it once on an env's "
            "reset() output before giving it to a collector."
        )
    return TensorDict.from_module(policy).data


def has_lazy_params(policy) -> bool:
    """True if ``policy`` is a module with uninitialised (lazy) parameters or buffers."""
    if not isinstance(policy, nn.Module):
        return False
    tensors = (*policy.parameters(), *policy.buffers())
    return any(isinstance(t, nn.parameter.UninitializedTensorMixin) for t in tensors)


def materialize_lazy(policy, env) -> None:
    """Run ``policy`` once (without gradients) on ``env.reset()``, so that its lazy layers
    (``nn.LazyLinear``, ...) get their shapes, as TorchRL's collectors do at construction."""
    with torch.no_grad():
        policy(env.reset())
    if has_lazy_params(policy):
        raise ValueError(
            f"The policy still has uninitialised (lazy) parameters after a call on the env's "
            f"reset() output (keys {sorted(map(str, env.observation_spec.keys(True, True)))}); "
            "check that its in_keys reach every lazy layer."
        )


def flat_weights(weights, owner: str) -> dict:
    """``{"dotted.name": tensor}`` from a TensorDict, a module or a ``state_dict``."""
    if isinstance(weights, nn.Module):
        weights = TensorDict.from_module(weights).data
    if isinstance(weights, TensorDictBase):
        return dict(weights.flatten_keys(".").items())
    if isinstance(weights, Mapping):
        bad = [k for k, v in weights.items() if not isinstance(v, torch.Tensor)]
        if bad:
            raise TypeError(f"{owner}.update_policy_weights_: entries {bad} are not tensors.")
        return {str(k): v for k, v in weights.items()}
    raise TypeError(
        f"{owner}.update_policy_weights_ expects a TensorDict (TensorDict.from_module(policy)), "
        f"a state_dict or a module, got {type(weights).__name__}."
    )


def copy_weights(target: TensorDictBase, weights, owner: str) -> None:
    """Check that ``weights`` has ``target``'s structure, then copy them into ``target``.

    Raises ValueError naming the missing, unexpected or mismatched entries (and copies
    nothing) when the structures differ.
    """
    given = flat_weights(weights, owner)
    expected = dict(target.flatten_keys(".").items())
    missing = [k for k in expected if k not in given]
    unexpected = [k for k in given if k not in expected]
    wrong = [
        f"{k}: expected {list(v.shape)} {v.dtype}, got {list(given[k].shape)} {given[k].dtype}"
        for k, v in expected.items()
        if k in given and (given[k].shape != v.shape or not _castable(given[k].dtype, v.dtype))
    ]
    if missing or unexpected or wrong:
        raise ValueError(
            f"{owner}.update_policy_weights_: the weights do not match the policy's structure "
            f"(missing: {missing}; unexpected: {unexpected}; mismatched: {wrong}). Pass "
            "TensorDict.from_module(policy) or policy.state_dict() of the same architecture."
        )
    with torch.no_grad():
        for k, v in expected.items():
            v.copy_(given[k])


def _castable(src: torch.dtype, dst: torch.dtype) -> bool:
    return src == dst or (src.is_floating_point and dst.is_floating_point)


def recurrent_specs(policy) -> dict:
    """``{hidden_key: spec of one env}`` of the recurrent modules inside ``policy``."""
    specs = {}
    if isinstance(policy, nn.Module):
        for module in policy.modules():
            make = getattr(module, "make_tensordict_primer", None)
            if make is not None:
                specs.update(make().primers)
    return specs


def register_policy_transforms(env, policy):
    """``env`` with the transforms ``policy``'s recurrent modules need, when missing.

    Appends ``InitTracker`` (``"is_init"``) and a ``TensorDictPrimer`` of the hidden
    states the env's specs do not already hold; a ``TransformedEnv`` is extended in place,
    another env is wrapped. Checking the specs makes it idempotent.
    """
    from torchrl_lite.envs.transforms import InitTracker, TensorDictPrimer, TransformedEnv

    specs = recurrent_specs(policy)
    reads_init = "is_init" in list(getattr(policy, "in_keys", ()) or ())
    if not specs and not reads_init:
        return env
    have = set(env.observation_spec.keys(True, True)) | set(env.state_spec.keys(True, True))
    missing = {key: spec for key, spec in specs.items() if key not in have}
    transforms = [] if "is_init" in have else [InitTracker()]
    if missing:
        transforms.append(TensorDictPrimer(missing))
    if not transforms:
        return env
    if not isinstance(env, TransformedEnv):
        env = TransformedEnv(env)
    for transform in transforms:
        env.append_transform(transform)
    return env
