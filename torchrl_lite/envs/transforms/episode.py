"""Episode transforms: StepCounter, InitTracker, NoopResetEnv, FrameSkipTransform.

They only run inside a ``TransformedEnv``: they count steps, mark the first step, or
step the parent env themselves.
"""

from __future__ import annotations

import numpy as np
import torch

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Bounded, Categorical, Unbounded
from torchrl_lite.envs.stepper.forms import episodes
from torchrl_lite.envs.transforms.transforms import (
    Transform,
    _norm_key,
    _reset_mask,
    td_get,
    td_set,
)
from torchrl_lite.envs.utils import step_mdp

__all__ = ["StepCounter", "InitTracker", "NoopResetEnv", "FrameSkipTransform"]

_MAX_NOOP_TRIALS = 10


def _env_only(name: str):
    def forward(self, tensordict):
        raise NotImplementedError(f"{name} only runs inside a TransformedEnv.")

    return forward


class StepCounter(Transform):
    """Count the steps of the episode in ``"step_count"``; end it at ``max_steps``.

    ``step_count`` is 0 after a reset and +1 each step; when it reaches ``max_steps``,
    ``"truncated"`` and ``"done"`` are set.

    Args:
        max_steps: truncate episodes at this many steps (None: never).
        truncated_key: the truncation flag to set.
        step_count_key: where the count goes.
        update_done: also set ``"done"`` when truncating.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=2))
        >>> env.rollout(10)["next", "truncated"].flatten().tolist()
        [False, True]
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key=K.TRUNCATED,
        step_count_key="step_count",
        update_done: bool = True,
    ):
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
        ):
            raise ValueError(
                f"StepCounter: max_steps must be None or an int >= 1, got {max_steps!r}"
            )
        self.step_count_key = _norm_key(step_count_key)
        super().__init__(in_keys=[], out_keys=[])
        self.max_steps = max_steps
        self.truncated_key = _norm_key(truncated_key)
        self.update_done = update_done
        self._shape = None
        self._one = torch.ones((), dtype=torch.int64)  # plain attributes: no buffer lookup per step
        self._max = torch.tensor(max_steps if max_steps is not None else 0, dtype=torch.int64)

    def _attach(self, specs):
        self._shape = (*specs.batch_size, 1)
        self._device = specs.device
        self._one, self._max = self._one.to(specs.device), self._max.to(specs.device)

    def _on_apply(self, fn):
        self._one, self._max = fn(self._one), fn(self._max)

    def _root_keys_read(self):
        return [self.step_count_key]

    def _reset(self, tensordict, tensordict_reset):
        if self._shape is None:
            raise RuntimeError("StepCounter only runs inside a TransformedEnv.")
        tensordict_reset.set(
            self.step_count_key, torch.zeros(self._shape, dtype=torch.int64, device=self._device)
        )
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        count = td_get(tensordict, self.step_count_key)
        if count is None:
            raise KeyError(
                f"StepCounter: the step input has no {self.step_count_key!r}: pass the TensorDict returned by reset() (or step_mdp of the last step). "
                + missing_key_message(self.step_count_key, tensordict.keys(True, True))
            )
        count = torch.add(count, self._one)
        td_set(next_tensordict, self.step_count_key, count)
        if self.max_steps is not None:
            hit = torch.ge(count, self._max)
            td_set(
                next_tensordict,
                self.truncated_key,
                torch.logical_or(td_get(next_tensordict, self.truncated_key), hit),
            )
            if self.update_done:
                td_set(
                    next_tensordict, K.DONE, torch.logical_or(td_get(next_tensordict, K.DONE), hit)
                )
        return next_tensordict

    forward = _env_only("StepCounter")

    def _numpy_form(self):
        return _CountForm(self)

    def _count_spec(self, composite):
        shape, device = composite.shape + (1,), composite.device
        if self.max_steps is None:
            return Unbounded(shape, device=device, dtype=torch.int64)
        return Bounded(0, self.max_steps, shape, device=device, dtype=torch.int64)

    def transform_observation_spec(self, observation_spec):
        observation_spec[self.step_count_key] = self._count_spec(observation_spec)
        return observation_spec

    def transform_state_spec(self, state_spec):
        # step() reads the count: as state, batched envs pass it to their sub-envs
        state_spec[self.step_count_key] = self._count_spec(state_spec)
        return state_spec

    def transform_done_spec(self, done_spec):
        if self.max_steps is not None and self.truncated_key not in done_spec:
            done_spec[self.truncated_key] = Categorical(
                2, done_spec.shape + (1,), device=done_spec.device, dtype=torch.bool
            )
        return done_spec

    def extra_repr(self):
        return f"max_steps={self.max_steps}, step_count_key={self.step_count_key!r}"


class _CountForm:
    """``StepCounter``'s ``NumpyForm``: +1 per step from the root's count, 0 after a reset.
    Deferred without ``max_steps``; with it, per step: reaching it sets the truncation
    flag (and ``"done"``), which ends the episode."""

    def __init__(self, transform: StepCounter):
        self.key, self.trunc_key = transform.step_count_key, transform.truncated_key
        self.max_steps, self.update_done = transform.max_steps, transform.update_done
        self.per_step = self.max_steps is not None
        self.reads = [self.key]
        self.writes = [self.key]
        if self.per_step:
            self.writes += [self.trunc_key, *([K.DONE] if self.update_done else [])]

    def bind(self, stepper) -> None:
        self.stepper = stepper
        self.out, self.root = stepper.nxt[self.key], stepper.root[self.key]
        if self.per_step:
            self.count = self.root[0].copy()  # the count before the next step
            self.trunc, self.done = stepper.nxt[self.trunc_key], stepper.nxt[K.DONE]

    def advance(self, t0: int, t1: int) -> None:
        for i, a, b, start in episodes(self.stepper, t0, t1, self.out, self.root):
            steps = np.arange(1, b - a + 1, dtype=self.out.dtype)
            np.add(start, steps.reshape(-1, *[1] * (self.out.ndim - 2)), out=self.out[a:b, i])

    def step(self, t: int) -> None:
        row = self.out[t]
        np.add(self.count, 1, out=row)
        self.count = row
        hit = row >= self.max_steps
        np.logical_or(self.trunc[t], hit, out=self.trunc[t])
        if self.update_done:
            np.logical_or(self.done[t], hit, out=self.done[t])

    def reset(self, chosen, t: int) -> None:
        if self.per_step:
            self.count = self.count.copy()  # it may be a view of a "next" row
            self.count[chosen] = 0
        self.root[t, chosen] = 0


class InitTracker(Transform):
    """Write ``"is_init"``: True in a reset's output, False after each step.

    Args:
        init_key: the entry to write.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
        >>> env.rollout(2)["is_init"].flatten().tolist()
        [True, False]
    """

    def __init__(self, init_key=K.IS_INIT):
        self.init_key = _norm_key(init_key)
        super().__init__(in_keys=[], out_keys=[])
        self._shape = None

    def _attach(self, specs):
        self._shape = (*specs.batch_size, 1)
        self._device = specs.device

    def _reset(self, tensordict, tensordict_reset):
        if self._shape is None:
            raise RuntimeError("InitTracker only runs inside a TransformedEnv.")
        tensordict_reset.set(
            self.init_key, torch.ones(self._shape, dtype=torch.bool, device=self._device)
        )
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        td_set(
            next_tensordict,
            self.init_key,
            torch.zeros(self._shape, dtype=torch.bool, device=self._device),
        )
        return next_tensordict

    forward = _env_only("InitTracker")

    def _numpy_form(self):
        return _InitForm(self)

    def transform_observation_spec(self, observation_spec):
        shape = observation_spec.shape + (1,)
        observation_spec[self.init_key] = Categorical(
            2, shape, device=observation_spec.device, dtype=torch.bool
        )
        return observation_spec

    def extra_repr(self):
        return f"init_key={self.init_key!r}"


class _InitForm:
    """``InitTracker``'s ``NumpyForm``: True in the root a reset writes, False in every
    step's output."""

    per_step = False

    def __init__(self, transform: InitTracker):
        self.key = transform.init_key
        self.reads = []
        self.writes = [self.key]

    def bind(self, stepper) -> None:
        self.out, self.root = stepper.nxt[self.key], stepper.root[self.key]

    def reset(self, chosen, t: int) -> None:
        self.root[t, chosen] = True

    def advance(self, t0: int, t1: int) -> None:
        self.out[t0:t1] = False


class NoopResetEnv(Transform):
    """After each reset, take a random number of random-action steps (Atari's no-op starts).

    The steps go through the parent env (the base env and the transforms before this
    one); if an episode ends during them, the env is reset and they start again. On a
    batched env it needs full resets (all sub-envs at once).

    Args:
        noops: the number of steps is drawn in ``[0, noops)`` (or is ``noops``).
        random: draw the number of steps; otherwise always ``noops``.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), NoopResetEnv(noops=3, random=False))
        >>> env.reset()["observation"].shape
        torch.Size([3])
    """

    def __init__(self, noops: int = 30, random: bool = True):
        if (
            isinstance(noops, bool)
            or not isinstance(noops, int)
            or noops < 0
            or (random and noops < 1)
        ):
            raise ValueError(
                f"NoopResetEnv: noops must be an int >= 1 (>= 0 with random=False), got {noops!r}"
            )
        super().__init__()
        self.noops, self.random = noops, random

    def _reset(self, tensordict, tensordict_reset):
        parent = self.parent
        if parent is None:
            raise RuntimeError("NoopResetEnv only runs inside a TransformedEnv.")
        mask = _reset_mask(tensordict, parent.batch_size)
        if mask is not None and not bool(mask.all()):
            raise ValueError(
                "NoopResetEnv cannot reset only some sub-envs of a batched env (its steps would move the others). "
                "Put it inside each worker env instead: ParallelEnv(n, lambda: TransformedEnv(make_env(), NoopResetEnv()))."
            )
        noops = int(torch.randint(self.noops, ())) if self.random else self.noops
        for _ in range(_MAX_NOOP_TRIALS):
            td = tensordict_reset
            for _ in range(noops):
                td = parent.rand_action(td.copy())
                td.set(K.NEXT, parent._step(td))
                td = step_mdp(td, exclude_done=False)
                if bool(td.get(K.DONE).any()):
                    tensordict_reset = parent._reset(None)
                    break
            else:
                return td
        raise RuntimeError(
            f"NoopResetEnv: the env ended during the no-op steps {_MAX_NOOP_TRIALS} times in a row; use fewer noops."
        )

    forward = _env_only("NoopResetEnv")

    def extra_repr(self):
        return f"noops={self.noops}, random={self.random}"


class FrameSkipTransform(Transform):
    """Repeat each action ``frame_skip`` times, summing the rewards; stop early when done.

    The repeats go through the parent env (the base env and the transforms before this
    one), so put action transforms (``ActionScaling``, ...) before it in the list.

    Args:
        frame_skip: how many env steps each action lasts.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), FrameSkipTransform(2))
        >>> env.rollout(1)["next", "reward"].item()
        2.0
    """

    def __init__(self, frame_skip: int = 1):
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(
                f"FrameSkipTransform: frame_skip must be an int >= 1, got {frame_skip!r}"
            )
        super().__init__()
        self.frame_skip = frame_skip
        self._reward_keys: list = []

    def _attach(self, specs):
        self._reward_keys = list(specs.reward.keys(True, True))

    def _step(self, tensordict, next_tensordict):
        if self.frame_skip == 1:
            return next_tensordict
        parent = self.parent
        if parent is None:
            raise RuntimeError("FrameSkipTransform only runs inside a TransformedEnv.")
        rewards = [next_tensordict.get(k) for k in self._reward_keys]
        for _ in range(self.frame_skip - 1):
            if bool(next_tensordict.get(K.DONE).any()):
                break
            next_tensordict = parent._step(tensordict)
            rewards = [r + next_tensordict.get(k) for r, k in zip(rewards, self._reward_keys)]
        for key, reward in zip(self._reward_keys, rewards):
            next_tensordict.set(key, reward)
        return next_tensordict

    forward = _env_only("FrameSkipTransform")

    def extra_repr(self):
        return f"frame_skip={self.frame_skip}"
