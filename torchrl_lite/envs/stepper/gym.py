"""GymWrapper at the numpy level: ``GymGroup`` (single envs stepped as one batch: one
GymWrapper's stepper, a SerialEnv's and each ParallelEnv worker's fast path) and
``VectorStepper`` (a gymnasium vector env). ``GymWrapper`` decides which envs qualify and
builds them (``_batch_group``, ``_numpy_stepper``); see ``envs/stepper/__init__.py`` for
the stepper contract.
"""

from __future__ import annotations

import operator

import numpy as np
import torch

from torchrl_lite import _keys as K

__all__ = ["GymGroup", "VectorStepper"]


class GymGroup:
    """Several single GymWrappers stepped and reset as one batch, at the numpy level.

    A ``SerialEnv`` (and so each ``ParallelEnv`` worker) uses it when every copy is a plain
    ``GymWrapper`` on CPU whose observation is one array: the gymnasium env of each copy is
    called directly and its results are written into one numpy array per key, instead of
    building a TensorDict per copy and stacking them key by key (that costs about twice
    the gymnasium step itself for CartPole). The results are the same values, dtypes and
    shapes as stacking the copies' ``_step``/``_reset`` outputs.

    Keys are the batched env's ``step_keys`` (observation, reward, done flags) and
    ``reset_keys`` (observation, done flags); ``build`` returns None for anything else.
    """

    @classmethod
    def build(cls, envs: list, to_gym, input_keys: list, step_keys: list, reset_keys: list):
        """A group of ``envs`` (plain single GymWrappers on CPU, checked by the caller) whose
        batched actions ``to_gym`` turns into per-copy gymnasium actions; None when their
        keys are not one observation array, the reward and the done flags."""
        obs = envs[0]._single_obs
        if input_keys != [K.ACTION] or obs is None or not obs.same_dtype or obs.one_hot:
            return None
        flags = [K.DONE, K.TERMINATED, K.TRUNCATED]
        if set(step_keys) != {K.OBSERVATION, K.REWARD, *flags}:
            return None
        if set(reset_keys) != {K.OBSERVATION, *flags}:
            return None
        return cls(envs, to_gym, step_keys, reset_keys)

    def __init__(self, envs: list, to_gym, step_keys: list, reset_keys: list):
        n, first = len(envs), envs[0]
        self.envs = envs
        self.step_keys, self.reset_keys = step_keys, reset_keys
        self._to_gym = to_gym  # [n, ...] tensor -> per copy, iterated
        # (obs, reward, terminated, truncated, ...) of one copy; gymnasium's own step when
        # there is no frame skip (one Python call less per copy)
        self._steps = [env._env.step if env.frame_skip == 1 else env._gym_step for env in envs]
        obs_spec = first.observation_spec[K.OBSERVATION]
        obs_dtype = torch.empty(0, dtype=obs_spec.dtype).numpy().dtype
        layout = {  # shape and numpy dtype of each key
            K.OBSERVATION: ((n, *obs_spec.shape), obs_dtype),
            K.REWARD: ((n, 1), np.float32),
            **{key: ((n, 1), np.bool_) for key in (K.DONE, K.TERMINATED, K.TRUNCATED)},
        }
        self.step_layout = self._step_layout = [layout[k] for k in step_keys]
        self.reset_layout = [layout[k] for k in reset_keys]
        self._step_pick = operator.itemgetter(
            *(step_keys.index(k) for k in (K.OBSERVATION, K.REWARD, K.TERMINATED, K.TRUNCATED))
        )
        self._done_pos = step_keys.index(K.DONE)
        self._reset_obs_pos = reset_keys.index(K.OBSERVATION)
        self._reset_flag_pos = [reset_keys.index(k) for k in (K.DONE, K.TERMINATED, K.TRUNCATED)]
        # the last reset of each copy (what a copy that is not reset reports)
        self._last_reset = [np.zeros(*layout[k]) for k in reset_keys]
        self._checked = False  # observation shapes, checked at the first step

    def step(self, action: torch.Tensor, out: list[np.ndarray] | None = None) -> list:
        """Step copy ``i`` with ``action[i]``; the results (``[n, ...]`` arrays in
        ``step_keys`` order) are written into ``out`` (new arrays when None)."""
        results = [step(a) for step, a in zip(self._steps, self._to_gym(action))]
        if out is None:
            out = [np.empty(shape, dtype) for shape, dtype in self._step_layout]
        obs, reward, term, trunc = self._step_pick(out)
        observations, reward[:, 0], term[:, 0], trunc[:, 0], *_infos = zip(*results)
        if not self._checked:  # once: numpy would broadcast a wrong shape without a word
            self._check_shapes(observations, obs.shape[1:])
        for i, value in enumerate(observations):
            obs[i] = value
        np.logical_or(term, trunc, out=out[self._done_pos])
        return out

    # -- the NumpyStepper ----------------------------------------------------------------
    def bind(self, nxt: list, root: list) -> None:
        """Step and reset into these ``[T, n, ...]`` buffers (step/reset keys order)."""
        obs, reward, term, trunc = self._step_pick(nxt)
        self._b_obs, self._b_reward = obs, reward[..., 0]
        self._b_term, self._b_trunc = term[..., 0], trunc[..., 0]
        self._b_done = nxt[self._done_pos][..., 0]
        self._b_root_obs = root[self._reset_obs_pos]

    def prepare(self, actions: torch.Tensor):
        """``[T, n, ...]`` actions -> per step, per copy, what gymnasium's step takes."""
        return self._to_gym(actions)

    def step_at(self, actions, t: int) -> bool:
        """Step copy ``i`` with ``actions[i]`` into row ``t``; True if any copy is done."""
        if len(self._steps) == 1:  # one env (a GymWrapper's own rollout): no zip, no rows
            obs, reward, term, trunc, *_ = self._steps[0](actions[0])
            if not self._checked:
                self._check_shapes([obs], self._b_obs.shape[2:])
            self._b_obs[t, 0] = obs
            self._b_reward[t, 0] = reward
            self._b_term[t, 0] = term
            self._b_trunc[t, 0] = trunc
            done = self._b_done[t, 0] = term or trunc
            return bool(done)
        results = [step(a) for step, a in zip(self._steps, actions)]
        observations, self._b_reward[t], self._b_term[t], self._b_trunc[t], *_ = zip(*results)
        if not self._checked:
            self._check_shapes(observations, self._b_obs.shape[2:])
        rows = self._b_obs[t]
        for i, value in enumerate(observations):
            rows[i] = value
        return bool(np.logical_or(self._b_term[t], self._b_trunc[t], out=self._b_done[t]).any())

    def reset_at(self, chosen, t: int) -> None:
        """Reset the copies in ``chosen`` into the root row ``t``."""
        last = self._last_reset[self._reset_obs_pos]
        for i in chosen:
            last[i] = self._b_root_obs[t, i] = self.envs[i]._gym_reset()
            self.envs[i]._is_reset = True

    def _check_shapes(self, observations, shape: tuple) -> None:
        for i, value in enumerate(observations):
            if np.shape(value) != shape:
                raise ValueError(
                    f"Env copy {i} ({self.envs[i]!r}) returned an observation of shape "
                    f"{list(np.shape(value))}; its observation spec has shape {list(shape)}."
                )
        self._checked = True

    def reset(self, chosen, out: list[np.ndarray] | None = None) -> list:
        """Reset the copies in ``chosen``; write their rows (``reset_keys`` order) into
        ``out``, or return new ``[n, ...]`` arrays holding the last reset of every copy."""
        last, pos = self._last_reset, self._reset_obs_pos
        for i in chosen:
            last[pos][i] = self.envs[i]._gym_reset()
            self.envs[i]._is_reset = True
            for j in self._reset_flag_pos:
                last[j][i] = False
        if out is None:
            return [a.copy() for a in last]
        for array, row in zip(out, last):
            array[chosen] = row[chosen]
        return out


class VectorStepper:
    """A GymWrapper of a gymnasium vector env, stepped and reset at the numpy level (a
    ``NumpyStepper``): the same calls as its ``_step``/``_reset``, results written into
    the ``[T, num_envs, ...]`` buffers."""

    @classmethod
    def build(cls, env, step_keys: list, reset_keys: list):
        """The stepper of ``env`` (a plain vector GymWrapper on CPU, checked by the caller),
        or None when its observation is not one array of the spec's dtype."""
        obs = env._single_obs
        if obs is None or not obs.same_dtype or obs.one_hot:
            return None
        return cls(env, step_keys, reset_keys)

    def __init__(self, env, step_keys: list, reset_keys: list):
        n = env.num_envs
        self.env, self.step_keys, self.reset_keys = env, step_keys, reset_keys
        obs_spec = env.observation_spec[K.OBSERVATION]
        obs_dtype = torch.empty(0, dtype=obs_spec.dtype).numpy().dtype
        layout = {
            K.OBSERVATION: (tuple(obs_spec.shape), obs_dtype),
            K.REWARD: ((n, 1), np.float32),
            **{key: ((n, 1), np.bool_) for key in (K.DONE, K.TERMINATED, K.TRUNCATED)},
        }
        self.step_layout = [layout[k] for k in step_keys]
        self.reset_layout = [layout[k] for k in reset_keys]

    def bind(self, nxt: list, root: list) -> None:
        at = {k: b for k, b in zip(self.step_keys, nxt)}
        self._obs, self._reward = at[K.OBSERVATION], at[K.REWARD][..., 0]
        self._term, self._trunc = at[K.TERMINATED][..., 0], at[K.TRUNCATED][..., 0]
        self._done = at[K.DONE][..., 0]
        self._root_obs = root[self.reset_keys.index(K.OBSERVATION)]
        self._checked = False

    def prepare(self, actions: torch.Tensor):
        return self.env._action.action_to_gym(actions)  # [T, num_envs, ...]

    def step_at(self, action, t: int) -> bool:
        obs, reward, term, trunc = self.env._gym_step(action)
        if not self._checked:  # numpy would broadcast a wrong shape without a word
            if np.shape(obs) != self._obs.shape[1:]:
                raise ValueError(
                    f"{self.env!r} returned observations of shape {list(np.shape(obs))}; "
                    f"its observation spec has shape {list(self._obs.shape[1:])}."
                )
            self._checked = True
        self._obs[t] = obs
        self._reward[t] = reward
        self._term[t] = term
        self._trunc[t] = trunc
        return bool(np.logical_or(self._term[t], self._trunc[t], out=self._done[t]).any())

    def reset_at(self, chosen, t: int) -> None:
        mask = np.zeros(self.env.num_envs, dtype=bool)
        mask[chosen] = True
        obs = self.env._gym_reset({"reset_mask": mask})
        self._root_obs[t, chosen] = np.asarray(obs)[chosen]
