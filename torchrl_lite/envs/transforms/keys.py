"""Key transforms: ExcludeTransform, SelectTransform, RenameTransform."""

from __future__ import annotations

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms.transforms import Transform, _as_tuple, _norm_keys, require_keys

__all__ = ["ExcludeTransform", "SelectTransform", "RenameTransform"]


def _check_not_done(transform, keys, specs, what: str) -> None:
    done = {_as_tuple(k) for k in specs.done.keys(True, True)}
    for key in keys:
        if _as_tuple(key) in done:
            raise ValueError(
                f"{type(transform).__name__} cannot {what} the done flag {key!r}: the env needs it to end episodes."
            )


def _drop_specs(specs_composite, keys):
    for key in keys:
        if key in specs_composite:
            del specs_composite[key]
    return specs_composite


class ExcludeTransform(Transform):
    """Remove entries from what the env returns (and from its specs).

    Args:
        *excluded_keys: the entries to remove (not the done flags).
        inverse: remove them on the inverse path instead (what goes into the wrapped env,
            or into a replay buffer's storage); what the env returns, and ``forward``, keep
            them.

    Example:
        >>> td = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [])
        >>> list(ExcludeTransform("a")(td).keys())
        ['b']
        >>> sorted(ExcludeTransform("a", inverse=True).inv(td).keys())
        ['b']
    """

    def __init__(self, *excluded_keys, inverse: bool = False):
        if len(excluded_keys) == 1 and isinstance(excluded_keys[0], list):
            excluded_keys = excluded_keys[0]
        keys = _norm_keys(list(excluded_keys))
        if not keys:
            raise ValueError("ExcludeTransform needs at least one key to exclude.")
        super().__init__()
        self.excluded_keys = keys
        self.inverse = bool(inverse)

    def _drop(self, tensordict):
        for key in self.excluded_keys:
            tensordict.pop(key, None)
        return tensordict

    def _call(self, next_tensordict):
        return next_tensordict if self.inverse else self._drop(next_tensordict)

    def _inv_call(self, tensordict):
        return self._drop(tensordict) if self.inverse else tensordict

    def _has_inverse(self) -> bool:
        return self.inverse  # else the env skips the inverse path (and its copy) per step

    def forward(self, tensordict):
        return self._call(tensordict)

    def _attach(self, specs):
        if self.inverse:
            return  # the entries dropped on the way in are not among the env's outputs
        require_keys(self, self.excluded_keys, specs.output_keys(), "excluded_keys")
        _check_not_done(self, self.excluded_keys, specs, "exclude")

    def transform_observation_spec(self, observation_spec):
        if self.inverse:
            return observation_spec
        return _drop_specs(observation_spec, self.excluded_keys)

    def transform_reward_spec(self, reward_spec):
        if self.inverse:
            return reward_spec
        return _drop_specs(reward_spec, self.excluded_keys)

    def transform_state_spec(self, state_spec):
        if self.inverse:
            return state_spec
        return _drop_specs(state_spec, self.excluded_keys)

    def extra_repr(self):
        return f"excluded_keys={self.excluded_keys}, inverse={self.inverse}"


class SelectTransform(Transform):
    """Keep only the given entries (plus rewards and done flags) of what the env returns.

    Args:
        *selected_keys: the observation entries to keep (a key keeps its sub-entries).
        keep_rewards: keep the reward entries too.
        keep_dones: keep the done flags (required: the env needs them).

    Example:
        >>> td = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1), "done": torch.zeros(1, dtype=torch.bool)}, [])
        >>> sorted(SelectTransform("a")(td).keys())
        ['a', 'done']
    """

    def __init__(self, *selected_keys, keep_rewards: bool = True, keep_dones: bool = True):
        if len(selected_keys) == 1 and isinstance(selected_keys[0], list):
            selected_keys = selected_keys[0]
        if not keep_dones:
            raise ValueError(
                "SelectTransform(keep_dones=False) would remove the done flags the env needs to end episodes."
            )
        super().__init__()
        self.selected_keys = _norm_keys(list(selected_keys))
        self.keep_rewards, self.keep_dones = keep_rewards, keep_dones
        self._dropped: tuple = ()

    def _kept(self, key, extra=()) -> bool:
        key = _as_tuple(key)
        for sel in (*self.selected_keys, *extra):
            sel = _as_tuple(sel)
            if key[: len(sel)] == sel or sel[: len(key)] == key:
                return True
        return False

    def _attach(self, specs):
        require_keys(self, self.selected_keys, specs.output_keys(), "selected_keys")
        dropped = [k for k in specs.observation.keys(True, True) if not self._kept(k)]
        if not self.keep_rewards:
            dropped += [k for k in specs.reward.keys(True, True) if not self._kept(k)]
        self._dropped = tuple(dropped)

    def _call(self, next_tensordict):
        for key in self._dropped:
            next_tensordict.pop(key, None)
        return next_tensordict

    def forward(self, tensordict):
        extra = [K.DONE, K.TERMINATED, K.TRUNCATED] + ([K.REWARD] if self.keep_rewards else [])
        drop = [k for k in tensordict.keys(True, True) if not self._kept(k, extra)]
        return tensordict.exclude(*drop) if drop else tensordict

    def transform_observation_spec(self, observation_spec):
        return _drop_specs(observation_spec, self._dropped)

    def transform_reward_spec(self, reward_spec):
        return _drop_specs(reward_spec, self._dropped)

    def extra_repr(self):
        return f"selected_keys={self.selected_keys}, keep_rewards={self.keep_rewards}"


class RenameTransform(Transform):
    """Rename entries (``in_keys[i]`` becomes ``out_keys[i]``), and action entries back.

    Args:
        in_keys: entries as the env names them.
        out_keys: their new names.
        in_keys_inv: action entries as the env names them.
        out_keys_inv: the names the policy writes (renamed to ``in_keys_inv`` before the step).
        create_copy: keep the old entries too.

    Example:
        >>> td = TensorDict({"observation": torch.zeros(2)}, [])
        >>> list(RenameTransform(["observation"], ["obs"])(td).keys())
        ['obs']
    """

    def __init__(
        self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, create_copy: bool = False
    ):
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        if in_keys_inv is not None and out_keys_inv is None:
            raise ValueError(
                "RenameTransform: in_keys_inv needs out_keys_inv (the policy's names)."
            )
        self.create_copy = create_copy

    def _call(self, next_tensordict):
        for in_key, out_key in self._pairs:
            value = (
                next_tensordict.get(in_key, None)
                if self.create_copy
                else next_tensordict.pop(in_key, None)
            )
            if value is not None:
                next_tensordict.set(out_key, value)
        return next_tensordict

    def _has_inverse(self):
        return bool(self._inv_pairs)

    def _inv_call(self, tensordict):
        for in_key, out_key in self._inv_pairs:
            value = tensordict.pop(out_key, None)
            if value is not None:
                tensordict.set(in_key, value)
        return tensordict

    def _attach(self, specs):
        super()._attach(specs)
        if not self.create_copy:
            _check_not_done(self, self.in_keys, specs, "rename")

    def _map_specs(self, composite):
        for in_key, out_key in self._pairs:
            if in_key in composite:
                spec = composite[in_key] if self.create_copy else composite.pop(in_key)
                composite[out_key] = spec.clone()
        return composite

    def extra_repr(self):
        return super().extra_repr() + f", create_copy={self.create_copy}"
