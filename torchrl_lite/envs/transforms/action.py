"""Action transforms: ActionScaling."""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Bounded
from torchrl_lite.envs.transforms.transforms import Transform, require_keys, td_get, td_set

__all__ = ["ActionScaling"]


class ActionScaling(Transform):
    """Let the policy act in ``[-1, 1]``: its action is mapped to the env's bounds.

    ``a_env = low + (a + 1) / 2 * (high - low)``; the action spec of the transformed env
    is ``Bounded(-1, 1)``. The env's action spec must be ``Bounded``.

    Args:
        in_keys_inv: the action entries (default: ``["action"]``).
        out_keys_inv: the policy's names for them (default: the same).

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), ActionScaling())
        >>> env.action_spec.low.item(), env.action_spec.high.item()
        (-1.0, 1.0)
    """

    def __init__(self, in_keys_inv=None, out_keys_inv=None):
        super().__init__(
            in_keys_inv=[K.ACTION] if in_keys_inv is None else in_keys_inv,
            out_keys_inv=out_keys_inv,
        )
        self._loc: dict = {}
        self._scale: dict = {}
        self._plan: tuple = ()

    def _attach(self, specs):
        require_keys(self, self.in_keys_inv, specs.action.keys(True, True), "in_keys_inv")
        for key in self.in_keys_inv:
            spec = specs.action[key]
            if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
                raise TypeError(
                    f"ActionScaling needs a floating-point Bounded action spec for {key!r}, got {spec}"
                )
            self._loc[key] = (spec.high + spec.low) / 2
            self._scale[key] = (spec.high - spec.low) / 2
        self._make_plan()

    def _inv_call(self, tensordict):
        for in_key, out_key, loc, scale in self._plan:
            value = td_get(tensordict, out_key)
            if value is not None:
                td_set(tensordict, in_key, torch.addcmul(loc, value, scale))
        return tensordict

    def _inv_transform_leaf_spec(self, spec):
        return Bounded(-1.0, 1.0, spec.shape, device=spec.device, dtype=spec.dtype)

    def inv(self, tensordict):
        if not self._loc:
            raise RuntimeError(
                "ActionScaling reads the bounds from the env's action spec: use it inside a TransformedEnv."
            )
        return super().inv(tensordict)

    def _on_apply(self, fn):
        # .to(device) moves the bounds too (they come from the specs, not from buffers)
        self._loc = {k: fn(v) for k, v in self._loc.items()}
        self._scale = {k: fn(v) for k, v in self._scale.items()}
        self._make_plan()

    def _make_plan(self) -> None:
        self._plan = tuple(
            (i, o, self._loc[i], self._scale[i]) for i, o in self._inv_pairs if i in self._loc
        )
