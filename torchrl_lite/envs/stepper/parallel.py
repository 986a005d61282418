"""ParallelEnv's ``NumpyStepper`` (the contract is in ``envs/stepper/__init__.py``).

The workers already step and reset into shared memory; the stepper writes the action
into the shared input buffer, sends one command per worker and copies the shared result
rows into the caller's buffers, without building a TensorDict per step. ``ParallelEnv``
builds it with its worker commands, so this module imports nothing of the batched envs.
"""

from __future__ import annotations

import numpy as np
import torch

from torchrl_lite import _keys as K

__all__ = ["ParallelStepper"]


class ParallelStepper:
    """Steps a ``ParallelEnv`` through its shared buffers (built by ``build``)."""

    @classmethod
    def build(cls, env, step: bytes, step_reset: bytes):
        """A stepper for ``env`` sending the worker commands ``step`` and ``step_reset``,
        or None where the general loop is needed (inputs other than ``"action"``, nested
        keys, outputs moved to another device or pinned)."""
        keys = env._step_keys + env._reset_keys
        if env._input_keys != [K.ACTION] or not all(isinstance(k, str) for k in keys):
            return None
        if K.DONE not in env._step_keys or env.device.type != "cpu" or env.pin_memory:
            return None
        return cls(env, step, step_reset)

    def __init__(self, env, step: bytes, step_reset: bytes):
        self.env = env
        self._step_command, self._step_reset_command = step, step_reset
        self.step_keys, self.reset_keys = list(env._step_keys), list(env._reset_keys)
        self._action = env._in_leaves[0]
        self._step = [b.numpy() for b in env._step_leaves]
        self._reset = [b.numpy() for b in env._reset_leaves]
        self._done = self._step[self.step_keys.index(K.DONE)]
        self.step_layout = [(a.shape, a.dtype) for a in self._step]
        self.reset_layout = [(a.shape, a.dtype) for a in self._reset]

    def bind(self, nxt: list, root: list) -> None:
        self._nxt, self._root = nxt, root

    def prepare(self, actions: torch.Tensor) -> torch.Tensor:
        return actions  # [T, n, ...]: row t goes into the shared input buffer

    def _send(self, command: bytes, action: torch.Tensor, t: int) -> bool:
        env = self.env
        env._check_usable()
        self._action.copy_(action)
        env._command(command, env._all, "step")
        for dst, src in zip(self._nxt, self._step):
            dst[t] = src
        return bool(self._done.any())

    def step_at(self, action: torch.Tensor, t: int) -> bool:
        return self._send(self._step_command, action, t)

    def step_reset_at(self, action: torch.Tensor, t: int) -> bool:
        """Step, and have each worker reset its copies that are done (one message per
        worker); their reset rows go into the root row ``t + 1``."""
        if not self._send(self._step_reset_command, action, t):
            return False
        chosen = np.flatnonzero(self._done)
        for dst, src in zip(self._root, self._reset):
            dst[t + 1, chosen] = src[chosen]
        return True

    def reset_at(self, chosen, t: int) -> None:
        env = self.env
        env._check_usable()
        mask = torch.zeros(env._mask_buf.numel(), dtype=torch.bool)
        mask[torch.as_tensor(chosen)] = True
        env._reset_workers(mask)
        for dst, src in zip(self._root, self._reset):
            dst[t, chosen] = src[chosen]
