"""Return conditioning for decision transformers in an env: TargetReturn and DTContext.

- :class:`TargetReturn` writes ``"return_to_go"``: the target return (divided by
  ``scale``) after a reset, then decremented by each reward received (divided by
  ``scale`` too), ``R_{t+1} = R_t - r_t / scale``. It matches the return-to-go of the
  dataset side, :func:`~torchrl_lite.data.datasets.trajectories.returns_to_go`.
- :class:`DTContext` keeps the window of the last ``K`` steps a DT reads, under
  ``"context"``: observations, returns-to-go, the actions taken before the current step
  (the current step's slot is zero), the episode timestep and a mask (False on the
  left padding of an episode's first ``K - 1`` steps).

Both keep their state in the TensorDict (declared in the state spec), so batched envs and
checkpoints carry it like any observation.
"""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.transforms.transforms import (
    Transform,
    _as_tuple,
    _norm_key,
    _reset_mask,
    require_keys,
)

__all__ = ["TargetReturn", "DTContext"]


def _previous(transform, tensordict, key):
    value = tensordict.get(key, None)
    if value is None:
        raise KeyError(
            f"{type(transform).__name__}: the step input has no {key!r}: pass the TensorDict "
            "returned by reset() (or step_mdp of the last step). "
            + missing_key_message(key, tensordict.keys(True, True))
        )
    return value


def _merge_partial(tensordict, fresh, key, batch_size):
    """After a partial reset: ``fresh`` where ``"_reset"`` is set, the old value elsewhere."""
    mask = _reset_mask(tensordict, batch_size)
    old = None if tensordict is None else tensordict.get(key, None)
    if mask is None or old is None or old.shape != fresh.shape:
        return fresh
    return torch.where(mask.reshape(*mask.shape, *([1] * (fresh.dim() - mask.dim()))), fresh, old)


class TargetReturn(Transform):
    """The return still to collect: ``target_return / scale``, less ``reward / scale`` per step.

    Args:
        target_return: the return to condition on, in the env's reward units.
        scale: the return-to-go unit (the same as the dataset's ``reward_scale``).
        in_keys: the reward entry (default ``["reward"]``).
        out_keys: the return-to-go entry (default ``["return_to_go"]``).
        mode: ``"reduce"`` (each reward is taken off) or ``"constant"`` (the target stays).

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), TargetReturn(10.0, scale=2.0))
        >>> env.rollout(3, break_when_any_done=False)["next", "return_to_go"].flatten().tolist()
        [4.5, 4.0, 3.5]
    """

    def __init__(
        self,
        target_return: float,
        scale: float = 1.0,
        in_keys=None,
        out_keys=None,
        mode: str = "reduce",
    ):
        if mode not in ("reduce", "constant"):
            raise ValueError(f"TargetReturn: mode must be 'reduce' or 'constant', got {mode!r}.")
        self.mode = mode
        if not scale > 0:
            raise ValueError(f"TargetReturn: scale must be > 0, got {scale!r}.")
        super().__init__(
            in_keys=[K.REWARD] if in_keys is None else in_keys,
            out_keys=["return_to_go"] if out_keys is None else out_keys,
        )
        if len(self.in_keys) != 1 or len(self.out_keys) != 1:
            raise ValueError("TargetReturn reads one reward entry and writes one return-to-go.")
        self.target_return, self.scale = float(target_return), float(scale)
        self._spec = None

    def _attach(self, specs):
        require_keys(self, self.in_keys, specs.reward.keys(True, True))
        reward = specs.reward[self.in_keys[0]]
        self._spec = Unbounded(reward.shape, device=reward.device, dtype=reward.dtype)

    def _root_keys_read(self):
        return self.out_keys

    def _reset(self, tensordict, tensordict_reset):
        if self._spec is None:
            raise RuntimeError("TargetReturn only runs inside a TransformedEnv.")
        fresh = torch.full_like(self._spec.zero(), self.target_return / self.scale)
        tensordict_reset.set(
            self.out_keys[0],
            _merge_partial(tensordict, fresh, self.out_keys[0], tensordict_reset.batch_size),
        )
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        previous = _previous(self, tensordict, self.out_keys[0])
        reward = next_tensordict.get(self.in_keys[0])
        if self.mode == "constant":
            next_tensordict.set(self.out_keys[0], previous.clone())
            return next_tensordict
        next_tensordict.set(self.out_keys[0], previous - reward.to(previous.dtype) / self.scale)
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError(
            "TargetReturn runs inside a TransformedEnv; for a dataset use "
            "torchrl_lite.data.datasets.trajectories.returns_to_go."
        )

    def transform_observation_spec(self, observation_spec):
        if self._spec is not None:
            observation_spec[self.out_keys[0]] = self._spec.clone()
        return observation_spec

    def transform_state_spec(self, state_spec):
        return self.transform_observation_spec(state_spec)

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def extra_repr(self):
        return f"target_return={self.target_return}, scale={self.scale}"


class DTContext(Transform):
    """The window of the last ``context_length`` steps a decision transformer reads.

    Writes ``(out_key, k)`` for ``k`` in ``in_keys`` (``[*B, K, *shape]``), plus
    ``(out_key, "action")`` (the actions before the current step; its last slot is
    zero), ``(out_key, "timestep")`` (``[*B, K]``, the step within the episode) and
    ``(out_key, "mask")`` (``[*B, K]``, False on padding). A reset starts a window of one
    real step; each step drops the oldest slot.

    Args:
        context_length: the window length ``K``.
        in_keys: the per-step entries kept (default ``["observation", "return_to_go"]``;
            put :class:`TargetReturn` before this transform).
        action_key: the action entry (default ``"action"``).
        out_key: the window entry (default ``"context"``).

    Example:
        >>> from torchrl_lite.envs import Compose, GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(TargetReturn(-200.0),
        ...                      DTContext(4)))
        >>> td = env.rollout(2)
        >>> td["next", "context", "observation"].shape, td["next", "context", "mask"][-1].tolist()
        (torch.Size([2, 4, 3]), [False, True, True, True])
    """

    def __init__(self, context_length: int, in_keys=None, action_key=K.ACTION, out_key="context"):
        if (
            isinstance(context_length, bool)
            or not isinstance(context_length, int)
            or context_length < 1
        ):
            raise ValueError(
                f"DTContext: context_length must be a positive int, got {context_length!r}."
            )
        in_keys = [K.OBSERVATION, "return_to_go"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=[(out_key, *_as_tuple(k)) for k in in_keys])
        self.context_length = context_length
        self.action_key, self.out_key = _norm_key(action_key), _norm_key(out_key)
        self._specs: dict = {}

    def _key(self, name):
        return (*_as_tuple(self.out_key), name)

    def _attach(self, specs):
        require_keys(self, self.in_keys, specs.observation.keys(True, True))
        batch = tuple(specs.batch_size)
        k = self.context_length
        self._specs = {}
        for in_key, out_key in self._pairs:
            leaf = specs.observation[in_key]
            shape = (*batch, k, *leaf.shape[len(batch) :])
            self._specs[out_key] = Unbounded(shape, device=leaf.device, dtype=leaf.dtype)
        action = specs.action[self.action_key]
        shape = (*batch, k, *action.shape[len(batch) :])
        self._specs[self._key(K.ACTION)] = Unbounded(
            shape, device=action.device, dtype=action.dtype
        )
        self._specs[self._key("timestep")] = Unbounded((*batch, k), dtype=torch.long)
        self._specs[self._key("mask")] = Unbounded((*batch, k), dtype=torch.bool)

    def _root_keys_read(self):
        return list(self._specs)

    def _reset(self, tensordict, tensordict_reset):
        if not self._specs:
            raise RuntimeError("DTContext only runs inside a TransformedEnv.")
        for key, spec in self._specs.items():
            fresh = spec.zero()
            if key == self._key("mask"):
                fresh[..., -1] = True
            for in_key, out_key in self._pairs:
                if key == out_key:  # the first real step goes in the last slot
                    dim = tensordict_reset.batch_dims
                    fresh.select(dim, -1).copy_(tensordict_reset.get(in_key))
            tensordict_reset.set(
                key, _merge_partial(tensordict, fresh, key, tensordict_reset.batch_size)
            )
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        dim, k = tensordict.batch_dims, self.context_length  # the window dim
        for in_key, out_key in self._pairs:  # drop the oldest step, append the new one
            old = _previous(self, tensordict, out_key)  # [*B, K, *shape]
            new = next_tensordict.get(in_key).unsqueeze(dim).to(old.dtype)  # [*B, 1, *shape]
            next_tensordict.set(out_key, torch.cat([old.narrow(dim, 1, k - 1), new], dim))
        key = self._key(K.ACTION)
        old = _previous(self, tensordict, key)  # [*B, K, *A]: its last slot is this step's
        action = tensordict.get(self.action_key).to(old.dtype).unsqueeze(dim)
        if k > 1:  # the action joins the window; the new step's slot is zero
            parts = [old.narrow(dim, 1, k - 2), action, torch.zeros_like(action)]
            next_tensordict.set(key, torch.cat(parts, dim))
        else:
            next_tensordict.set(key, torch.zeros_like(old))
        for name in ("timestep", "mask"):
            key = self._key(name)
            old = _previous(self, tensordict, key)  # [*B, K]
            new = old[..., -1:] + 1 if name == "timestep" else torch.ones_like(old[..., -1:])
            next_tensordict.set(key, torch.cat([old[..., 1:], new], -1))
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError(
            "DTContext runs inside a TransformedEnv; for a dataset use "
            "torchrl_lite.data.datasets.TrajectoryWindows."
        )

    def transform_observation_spec(self, observation_spec):
        for key, spec in self._specs.items():
            observation_spec[key] = spec.clone()
        return observation_spec

    def transform_state_spec(self, state_spec):
        return self.transform_observation_spec(state_spec)

    def extra_repr(self):
        return f"context_length={self.context_length}, out_key={self.out_key!r}"
