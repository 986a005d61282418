"""Small deterministic envs for the transform tests (hand-computable outputs)."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl_lite.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl_lite.envs.common import EnvBase

H, W = 6, 8


class CountingEnv(EnvBase):
    """``observation`` = the step count of the episode (float, ``[*B, 1]``), reward 1.

    Sub-env ``i`` is done (terminated) when its count reaches ``max_count[i]``. With
    ``pixels=True`` it also returns uint8 ``[*B, 6, 8, 3]`` frames whose values are
    ``(count + arange(144)) % 256``. Actions are ``Bounded(-2, 2, (1,))``; the
    actions received by ``_step`` are recorded in ``self.actions``.
    """

    def __init__(
        self,
        batch_size=(),
        max_count=5,
        pixels: bool = False,
        obs_dtype=torch.float32,
        action_dtype=torch.float32,
    ):
        super().__init__(batch_size=batch_size)
        b = tuple(self.batch_size)
        self.max_count = torch.as_tensor(max_count).expand(*b, 1).clone()
        self.pixels = pixels
        self.obs_dtype = obs_dtype
        obs = Composite(observation=Unbounded((*b, 1), dtype=obs_dtype), shape=b)
        if pixels:
            obs["pixels"] = Bounded(0, 255, (*b, H, W, 3), dtype=torch.uint8)
        self.observation_spec = obs
        self.action_spec = Bounded(-2.0, 2.0, (*b, 1), dtype=action_dtype)
        self.count = torch.zeros(*b, 1, dtype=torch.int64)
        self.actions: list = []
        self.resets = 0

    def _obs(self) -> dict:
        out = {"observation": self.count.to(self.obs_dtype)}
        if self.pixels:
            base = torch.arange(H * W * 3).reshape(H, W, 3)
            out["pixels"] = ((self.count.reshape(*self.batch_size, 1, 1, 1) + base) % 256).to(
                torch.uint8
            )
        return out

    def _reset(self, tensordict):
        self.resets += 1
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self.count = torch.zeros_like(self.count)
        else:
            self.count = torch.where(mask, torch.zeros_like(self.count), self.count)
        return TensorDict(self._obs(), batch_size=self.batch_size)

    def _step(self, tensordict):
        self.actions.append(tensordict.get("action").clone())
        self.count = self.count + 1
        done = self.count >= self.max_count
        out = self._obs()
        out.update(
            reward=torch.ones(*self.batch_size, 1),
            done=done,
            terminated=done.clone(),
            truncated=torch.zeros_like(done),
        )
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        self.seed = seed
