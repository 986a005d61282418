"""Env helpers apart from the contract: TorchRL's ``nn.Module``-like ``numel``/``apply``,
``rand_step``/``fake_tensordict``, and two spec/policy helpers.

``EnvBase`` inherits ``ModuleLike`` and ``SpecSamples``; the helpers live apart so that ``envs/common.py``
keeps to the env contract.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Composite, TensorSpec


class ModuleLike:
    """What TorchRL's envs inherit from ``nn.Module`` and its scripts call on an env."""

    def numel(self) -> int:
        """The number of sub-envs: ``batch_size.numel()`` (1 for an unbatched env)."""
        return self.batch_size.numel()

    def apply(self, fn):
        """Call ``fn`` once on every module the env holds (transforms, sub-envs, networks
        and their children), then on the env; returns the env.

        TorchRL's scripts call ``env.apply(dump_video)`` to reach a ``VideoRecorder``
        transform wherever it sits.
        """
        for item in self._held_modules([]):
            fn(item)
        return self

    _transformed_env_class = None  # TransformedEnv (set where it is defined)

    def append_transform(self, transform):
        """A ``TransformedEnv`` of this env and ``transform`` (TorchRL's
        ``env = env.append_transform(t)``; a ``TransformedEnv`` appends to its own list)."""
        return ModuleLike._transformed_env_class(self, transform)

    def _held_modules(self, seen: list) -> list:
        """The modules and envs held by this env, children first, each once (by id)."""
        if any(x is self for x in seen):
            return []
        seen.append(self)
        out = []
        for value in list(vars(self).values()):
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, ModuleLike):
                    out += item._held_modules(seen)
                elif isinstance(item, torch.nn.Module):
                    for module in reversed(list(item.modules())):
                        if not any(x is module for x in seen):
                            seen.append(module)
                            out.append(module)
        return out + [self]


class SpecSamples:
    """Specs of one sub-env, and steps and TensorDicts drawn from the env's specs."""

    @property
    def action_spec_unbatched(self) -> TensorSpec:
        """``action_spec`` without the env's batch dims (the spec of one sub-env's action)."""
        return _unbatched(self.action_spec, self.batch_size)

    @property
    def full_action_spec_unbatched(self) -> Composite:
        """``full_action_spec`` without the env's batch dims."""
        return _unbatched(self.full_action_spec, self.batch_size)

    @property
    def observation_spec_unbatched(self) -> Composite:
        """``observation_spec`` without the env's batch dims."""
        return _unbatched(self.full_observation_spec, self.batch_size)

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """One step with a random action."""
        if tensordict is None:
            needs_state = (
                not self._requires_reset or not self._is_reset
            )  # stateless envs read their state from the reset output
            tensordict = (
                self.reset()
                if needs_state
                else TensorDict(batch_size=self.batch_size, device=self.device)
            )
        return self.step(self.rand_action(tensordict))

    def _skipped_transforms(self) -> list:
        """``(transform, reason)`` for each transform the env skips because none of its
        keys is there (``check_env_specs`` raises on them): a ``TransformedEnv`` lists its
        own and its wrapped env's; any other env has none."""
        return []

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled TensorDict with every key a step reads and writes."""
        root = self.full_observation_spec.zero()
        root.update(self.full_state_spec.zero())
        root.update(self.full_done_spec.zero())
        root.update(self.full_action_spec.zero())
        nxt = self.full_observation_spec.zero()
        nxt.update(self.full_reward_spec.zero())
        nxt.update(self.full_done_spec.zero())
        root.set(K.NEXT, nxt)
        return root


def _unbatched(spec, batch_size: torch.Size):
    """The spec of one sub-env: the spec without its leading ``batch_size`` dims."""
    nb = len(batch_size)
    if isinstance(spec, Composite):
        out = Composite(shape=spec.shape[nb:], device=spec.device)
        for key in spec.keys():
            entry = spec[key]
            out[key] = None if entry is None else _unbatched(entry, batch_size)
        return out
    params = {
        k: v[(0,) * nb] if isinstance(v, torch.Tensor) and v.shape == spec.shape else v
        for k, v in spec._params().items()
    }
    return type(spec)(**params, shape=spec.shape[nb:], device=spec.device, dtype=spec.dtype)


def _device_cast_policy(policy, env_device):
    """``policy`` called on its own device (its first parameter's), the result moved back
    to ``env_device``; ``policy`` itself when the devices agree or it has no parameters."""
    params = policy.parameters() if hasattr(policy, "parameters") else iter(())
    first = next(iter(params), None)
    if first is None or env_device is None or first.device == torch.device(env_device):
        return policy
    device = first.device
    return lambda td: policy(td.to(device)).to(env_device)
