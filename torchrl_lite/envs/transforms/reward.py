"""Reward transforms: RewardScaling, RewardClipping, RewardSum."""

from __future__ import annotations

import numpy as np
import torch

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Bounded, Unbounded
from torchrl_lite.envs.stepper.forms import Elementwise, episodes
from torchrl_lite.envs.transforms._utils import check_affine
from torchrl_lite.envs.transforms.transforms import (
    Transform,
    _norm_keys,
    require_keys,
    td_get,
    td_set,
)

__all__ = ["RewardScaling", "RewardClipping", "RewardSum"]


class RewardScaling(Transform):
    """Affine reward transform: ``r * scale + loc``, or ``(r - loc) / scale`` if ``standard_normal``.

    Args:
        loc: location (number or tensor).
        scale: scale (number or tensor).
        in_keys: reward entries (default ``["reward"]``).
        out_keys: where to write them (default: in place).
        standard_normal: ``(r - loc) / scale`` instead of ``r * scale + loc``.
        eps: lower bound of ``scale`` when dividing.

    Example:
        >>> RewardScaling(loc=1.0, scale=2.0)(TensorDict({"reward": torch.tensor([3.0])}, []))["reward"]
        tensor([7.])
    """

    def __init__(
        self,
        loc,
        scale,
        in_keys=None,
        out_keys=None,
        standard_normal: bool = False,
        eps: float = 1e-4,
    ):
        super().__init__(in_keys=[K.REWARD] if in_keys is None else in_keys, out_keys=out_keys)
        self.standard_normal = standard_normal
        self.eps = eps
        dtype = torch.get_default_dtype()
        self.register_buffer("loc", torch.as_tensor(loc, dtype=dtype))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=dtype))
        check_affine("RewardScaling", self.loc, self.scale, standard_normal)
        self._on_apply(None)

    def _on_apply(self, fn):
        # r * _a + _b as one addcmul, with plain attributes (no buffer lookup per step)
        loc, scale = self._buffers["loc"], self._buffers["scale"]
        if self.standard_normal:
            self._a = 1.0 / scale.clamp_min(self.eps)
            self._b = -loc * self._a
        else:
            self._a, self._b = scale.clone(), loc.clone()

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._on_apply(None)

    def _apply_transform(self, x):
        return torch.addcmul(self._b, x, self._a)

    def _numpy_form(self):
        return Elementwise(self)

    def extra_repr(self):
        return (
            f"loc={self.loc.tolist()}, scale={self.scale.tolist()}, standard_normal={self.standard_normal}, "
            + super().extra_repr()
        )


class RewardClipping(Transform):
    """Clip rewards to ``[clamp_min, clamp_max]``.

    Args:
        clamp_min: lower bound (None: none).
        clamp_max: upper bound (None: none).
        in_keys: reward entries (default ``["reward"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> RewardClipping(-1.0, 1.0)(TensorDict({"reward": torch.tensor([-3.0, 0.5])}, [2]))["reward"]
        tensor([-1.0000,  0.5000])
    """

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys=None,
        out_keys=None,
    ):
        super().__init__(in_keys=[K.REWARD] if in_keys is None else in_keys, out_keys=out_keys)
        if clamp_min is None and clamp_max is None:
            raise ValueError("RewardClipping needs clamp_min, clamp_max or both.")
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"RewardClipping: clamp_min {clamp_min} > clamp_max {clamp_max}")
        self.clamp_min, self.clamp_max = clamp_min, clamp_max

    def _apply_transform(self, x):
        return x.clamp(self.clamp_min, self.clamp_max)

    def _numpy_form(self):
        return Elementwise(self)

    def _transform_leaf_spec(self, spec):
        if (
            self.clamp_min is not None
            and self.clamp_max is not None
            and spec.dtype.is_floating_point
        ):
            return Bounded(
                self.clamp_min, self.clamp_max, spec.shape, device=spec.device, dtype=spec.dtype
            )
        return super()._transform_leaf_spec(spec)

    def extra_repr(self):
        return f"clamp_min={self.clamp_min}, clamp_max={self.clamp_max}, " + super().extra_repr()


class RewardSum(Transform):
    """Track the return of the current episode in ``"episode_reward"``.

    It is 0 after a reset (only for the sub-envs being reset) and adds each step's reward.
    The entry is an observation of the transformed env.

    Args:
        in_keys: reward entries (default ``["reward"]``).
        out_keys: the sums (default ``["episode_reward"]``).

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), RewardSum())
        >>> env.rollout(3, break_when_any_done=False)["next", "episode_reward"].flatten().tolist()
        [1.0, 2.0, 3.0]
    """

    def __init__(self, in_keys=None, out_keys=None):
        in_keys = [K.REWARD] if in_keys is None else _norm_keys(in_keys)
        if out_keys is None:
            out_keys = (
                ["episode_reward"] if in_keys == [K.REWARD] else [_episode_key(k) for k in in_keys]
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._zero_specs: dict = {}

    def _attach(self, specs):
        require_keys(self, self.in_keys, specs.reward.keys(True, True))
        self._zero_specs = {out: specs.reward[inp] for inp, out in self._pairs}

    def _root_keys_read(self):
        return self.out_keys

    def _reset(self, tensordict, tensordict_reset):
        for _, out_key in self._pairs:
            spec = self._zero_specs.get(out_key)
            if spec is None:
                raise RuntimeError("RewardSum only runs inside a TransformedEnv.")
            tensordict_reset.set(out_key, spec.zero())
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for in_key, out_key in self._pairs:
            previous = td_get(tensordict, out_key)
            if previous is None:
                raise KeyError(
                    f"RewardSum: the step input has no {out_key!r}: pass the TensorDict returned by reset() (or step_mdp of the last step). "
                    + missing_key_message(out_key, tensordict.keys(True, True))
                )
            td_set(next_tensordict, out_key, torch.add(previous, td_get(next_tensordict, in_key)))
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError(
            "RewardSum only runs inside a TransformedEnv (it needs the previous step's sum)."
        )

    def _numpy_form(self):
        return _RunningSum(self)

    def transform_observation_spec(self, observation_spec):
        for out_key, spec in self._zero_specs.items():
            observation_spec[out_key] = Unbounded(spec.shape, device=spec.device, dtype=spec.dtype)
        return observation_spec

    def transform_state_spec(self, state_spec):
        # step() reads the running sum: as state, batched envs pass it to their sub-envs
        return self.transform_observation_spec(state_spec)

    def transform_reward_spec(self, reward_spec):
        return reward_spec


class _RunningSum:
    """``RewardSum``'s ``NumpyForm``: the running sum of each reward, restarted at 0 by a
    reset; one ``np.add.accumulate`` per episode stretch."""

    per_step = False

    def __init__(self, transform: RewardSum):
        self.pairs = list(transform._pairs)
        self.reads = [i for i, _ in self.pairs] + [o for _, o in self.pairs]
        self.writes = [o for _, o in self.pairs]

    def bind(self, stepper) -> None:
        self.stepper = stepper
        self.bufs = [(stepper.nxt[i], stepper.nxt[o], stepper.root[o]) for i, o in self.pairs]

    def reset(self, chosen, t: int) -> None:
        for _, _, root in self.bufs:
            root[t, chosen] = 0

    def advance(self, t0: int, t1: int) -> None:
        for reward, out, root in self.bufs:
            for i, a, b, start in episodes(self.stepper, t0, t1, out, root):
                # one float add per step from the sum before step a, as torch.add does
                segment = reward[a:b, i].copy()
                segment[0] = start + segment[0]
                np.add.accumulate(segment, axis=0, out=out[a:b, i])


def _episode_key(key):
    if isinstance(key, tuple):
        return (*key[:-1], f"episode_{key[-1]}")
    return f"episode_{key}"
