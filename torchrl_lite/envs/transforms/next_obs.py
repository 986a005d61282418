"""Storing ``("next", obs)`` once instead of twice: two ways to rebuild it at sampling.

Within a trajectory, a step's ``("next", "observation")`` is the next step's
``"observation"``, so a rollout holds every observation twice. Two remedies, as in
TorchRL:

* :class:`NextStateReconstructor` (a replay-buffer transform): the stored data lack
  ``("next", k)``; at sampling it is copied from the next row of the sample when that row
  continues the same trajectory, and is ``fill_value`` (NaN) where it does not
  (trajectory ends, slice boundaries).
* :class:`NextObservationDelta` (an env transform and a replay-buffer transform): the env
  side stores ``next_obs - obs`` in a small dtype under ``("next", "delta", k)`` and
  drops ``("next", k)`` from the recorded step (the next step still gets the full
  observation); the buffer side rebuilds ``("next", k) = obs + delta``, boundary steps
  included, up to the delta dtype's precision.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase

from torchrl_lite.envs.transforms.transforms import Transform, _as_tuple, _norm_keys

__all__ = ["NextStateReconstructor", "NextObservationDelta"]

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)


class NextStateReconstructor(Transform):
    """Rebuild ``("next", k)`` of a flat ``[B]`` sample from its next row.

    Row ``i`` gets ``data[k][i + 1]`` when row ``i + 1`` is the next step of the same
    trajectory: same ``traj_key`` id, ``done_key`` not set at row ``i`` (and, with
    ``step_count_key``, a step count one higher); otherwise ``fill_value``.

    Args:
        keys: the root entries whose ``("next", k)`` to rebuild (default ``observation``).
        traj_key: the trajectory id entry (``None``: the sample is one trajectory).
        done_key: the entry marking the last step of a trajectory (``None``: not used).
        step_count_key: a step counter to check too (default ``None``).
        fill_value: what rows without a next step get (NaN; integer entries need an int).
        strict: raise when a marker entry is missing from the sample (else skip that check).

    Example:
        >>> td = TensorDict({"observation": torch.arange(4.0).unsqueeze(-1),
        ...     ("next", "done"): torch.tensor([[False], [True], [False], [False]]),
        ...     ("collector", "traj_ids"): torch.tensor([0, 0, 1, 1])}, [4])
        >>> NextStateReconstructor()(td)["next", "observation"].flatten().tolist()
        [1.0, nan, 3.0, nan]
    """

    def __init__(
        self,
        keys=("observation",),
        *,
        traj_key=("collector", "traj_ids"),
        done_key=("next", "done"),
        step_count_key=None,
        fill_value: float = float("nan"),
        strict: bool = True,
    ):
        super().__init__()
        self.keys = _norm_keys(list(keys) if not isinstance(keys, str) else [keys])
        self.traj_key, self.done_key, self.step_count_key = traj_key, done_key, step_count_key
        self.fill_value, self.strict = fill_value, strict

    def _marker(self, tensordict: TensorDictBase, key, what: str, n: int):
        """The ``[n]`` marker ``key`` of the sample (trailing dims: the first value), or
        None when it is absent and ``strict=False``."""
        value = tensordict.get(key, None)
        if value is None:
            if not self.strict:
                return None
            raise KeyError(
                f"NextStateReconstructor: the sample has no {what} {key!r}; pass "
                f"{what.replace(' ', '_')}=None to skip that check, or strict=False. Sample "
                f"keys: {list(tensordict.keys(True, True))}"
            )
        return value.reshape(n, -1)[:, 0]

    def _has_next(self, tensordict: TensorDictBase, n: int) -> torch.Tensor:
        """``[n]`` bool: row ``i + 1`` is the next step of row ``i``'s trajectory."""
        valid = torch.zeros(n, dtype=torch.bool, device=tensordict.device)
        valid[:-1] = True
        if self.traj_key is not None:
            traj = self._marker(tensordict, self.traj_key, "traj key", n)
            if traj is not None:
                valid[:-1] &= traj[1:] == traj[:-1]
        if self.done_key is not None:
            done = self._marker(tensordict, self.done_key, "done key", n)
            if done is not None:
                valid[:-1] &= ~done[:-1].bool()
        if self.step_count_key is not None:
            count = self._marker(tensordict, self.step_count_key, "step count key", n)
            if count is not None:
                valid[:-1] &= count[1:] == count[:-1] + 1
        return valid

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims != 1:
            raise ValueError(
                "NextStateReconstructor needs a flat [B] sample (rows in time order), got "
                f"batch size {list(tensordict.batch_size)}; reshape(-1) it first."
            )
        n = tensordict.batch_size[0]
        if n == 0:
            return tensordict
        valid = self._has_next(tensordict, n)  # [n]
        for key in self.keys:
            value = tensordict.get(key)
            nan = isinstance(self.fill_value, float) and math.isnan(self.fill_value)
            if nan and not value.is_floating_point():
                raise TypeError(
                    f"NextStateReconstructor: {key!r} is {value.dtype}, which cannot hold NaN; "
                    "pass an integer fill_value."
                )
            shifted = torch.roll(value, -1, dims=0)  # row i holds row i + 1
            mask = valid.reshape(n, *([1] * (value.dim() - 1)))  # [n, 1, ...]
            filled = torch.where(mask, shifted, value.new_full((), self.fill_value))
            tensordict.set(("next", *_as_tuple(key)), filled)
        return tensordict


class NextObservationDelta(Transform):
    """Keep ``("next", k)`` as a low-precision difference ``next_obs - obs``.

    In an env (``TransformedEnv(env, NextObservationDelta())``): each step also writes
    ``("next", "delta", k) = (next_obs - obs).to(delta_dtype)``, and the step as recorded
    (rollouts, collector batches) loses ``("next", k)``; the next step's input still has
    the full observation. On a replay buffer (``transform=NextObservationDelta(in_keys=
    [...])``): a sample gets ``("next", k) = obs + delta`` back (in the root's dtype, or
    ``restore_dtype``), and the delta entry is dropped (``drop_delta``). The round trip
    is lossy: it keeps ``delta_dtype``'s precision of the difference.

    It must wrap a batched env, not sit inside its copies (the recorded step is the
    outer env's).

    Args:
        in_keys: the observation entries (default: every floating entry of the env's
            observation spec; required on a replay buffer).
        delta_dtype: the floating dtype of the stored differences (default float16).
        restore_dtype: the dtype of the rebuilt entry, or ``"root"`` (that of ``k``).
        drop_delta: remove the delta entry from the rebuilt sample.
        excluded_dtypes: dtypes left out when ``in_keys`` is inferred.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta())
        >>> roll = env.rollout(3)
        >>> roll["next", "delta", "observation"].dtype, ("next", "observation") in roll.keys(True)
        (torch.float16, False)
        >>> rebuilt = NextObservationDelta(in_keys=["observation"])(roll.reshape(-1))
        >>> bool((rebuilt["next", "observation"][:-1] - roll["observation"][1:]).abs().max() < 1e-2)
        True
    """

    def __init__(
        self,
        in_keys=None,
        *,
        delta_dtype: torch.dtype = torch.float16,
        restore_dtype="root",
        drop_delta: bool = True,
        excluded_dtypes: tuple = _INT_DTYPES,
    ):
        if not isinstance(delta_dtype, torch.dtype) or not delta_dtype.is_floating_point:
            raise ValueError(f"delta_dtype must be a floating torch dtype, got {delta_dtype!r}")
        if restore_dtype != "root" and not (
            isinstance(restore_dtype, torch.dtype) and restore_dtype.is_floating_point
        ):
            raise ValueError(
                f"restore_dtype must be a floating torch dtype or 'root', got {restore_dtype!r}"
            )
        super().__init__(in_keys=in_keys)
        self._infer_keys = in_keys is None
        self.delta_dtype, self.restore_dtype = delta_dtype, restore_dtype
        self.drop_delta, self.excluded_dtypes = drop_delta, tuple(excluded_dtypes)

    def _attach(self, specs):
        if self._infer_keys:  # every floating observation entry
            self._in_keys = _norm_keys(
                [
                    key
                    for key, spec in specs.observation.items(True, True)
                    if spec.dtype.is_floating_point and spec.dtype not in self.excluded_dtypes
                ]
            )
            self._update_pairs()
        super()._attach(specs)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.in_keys:
            obs, next_obs = tensordict.get(key, None), next_tensordict.get(key, None)
            if obs is not None and next_obs is not None:
                # subtract at full precision, cast once (no cancellation in the small dtype)
                delta = (next_obs - obs).to(self.delta_dtype)
                next_tensordict.set(("delta", *_as_tuple(key)), delta)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        return tensordict_reset

    def _post_step_mdp(self, tensordict: TensorDictBase, root: TensorDictBase) -> None:
        nxt = tensordict.get("next")
        for key in self.in_keys:
            key = _as_tuple(key)
            if nxt.get(("delta", *key), None) is not None:
                nxt.pop(key)  # the recorded step keeps the delta only
            if root.get(("delta", *key), None) is not None:
                root.pop(("delta", *key))  # the next step's input: the full entry only
        delta = root.get("delta", None)
        if isinstance(delta, TensorDictBase) and delta.is_empty():
            root.pop("delta")

    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.in_keys:
            raise ValueError(
                "NextObservationDelta on a replay buffer needs in_keys (the observation "
                "entries to rebuild), e.g. NextObservationDelta(in_keys=['observation'])."
            )
        for key in self.in_keys:
            key = _as_tuple(key)
            obs, delta = tensordict.get(key, None), tensordict.get(("next", "delta", *key), None)
            if obs is None or delta is None:
                continue
            dtype = obs.dtype if self.restore_dtype == "root" else self.restore_dtype
            tensordict.set(("next", *key), obs.to(dtype) + delta.to(dtype))
            if self.drop_delta:
                tensordict.pop(("next", "delta", *key))
        if self.drop_delta:
            delta = tensordict.get(("next", "delta"), None)
            if isinstance(delta, TensorDictBase) and delta.is_empty():
                tensordict.pop(("next", "delta"))
        return tensordict
