"""RNDTransform: random network distillation's intrinsic reward (Burda et al. 2018,
https://arxiv.org/abs/1810.12894), written at each step beside the env's reward.

A frozen random *target* network and a trained *predictor* embed the next observation;
the intrinsic reward is their mean squared difference, high on states the predictor has
seldom seen. The predictor is trained by :class:`~torchrl_lite.objectives.rnd.RNDLoss`.
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.transforms.episode import _env_only
from torchrl_lite.envs.transforms.transforms import Transform, td_get, td_set

__all__ = ["RNDTransform", "RunningMeanStd"]


class RunningMeanStd(nn.Module):
    """Running mean and variance of a stream of batches (Chan et al.'s parallel update).

    Args:
        shape: the feature shape tracked (leading dims of each batch are samples).
        epsilon: the initial pseudo-count.

    Example:
        >>> rms = RunningMeanStd(shape=(2,))
        >>> rms.update(torch.tensor([[0.0, 2.0], [2.0, 2.0]]))
        >>> rms.mean.round(decimals=3)  # the prior count epsilon weighs the zero start
        tensor([1., 2.])
    """

    def __init__(self, shape: tuple = (), epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.tensor(float(epsilon)))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.float().reshape(-1, *self.mean.shape)  # [n, *shape]
        n = x.shape[0]
        mean = x.mean(0)
        var = x.var(0, unbiased=False) if n > 1 else torch.zeros_like(mean)
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta.pow(2) * self.count * n / total
        self.mean += delta * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.var.clamp_min(1e-8).sqrt()


class RNDTransform(Transform):
    """Write ``"intrinsic_reward"`` ``[*B, 1]``: the predictor's error on the next observation.

    Steps: optionally normalize the observation with running statistics (clipped to
    ``obs_clip``), embed it with both networks, take the mean squared difference, and
    optionally divide it by its running std (clipped to ``reward_clip``). Statistics are
    updated only while the transform is in training mode (``env.train()``).

    Args:
        target_network: the frozen random network (its parameters are set to not require grad).
        predictor_network: the trained network, same output size.
        in_keys: the observation entry (default ``["observation"]``).
        out_keys: the reward entry written (default ``["intrinsic_reward"]``).
        normalize_obs: normalize observations with running statistics.
        normalize_reward: divide the reward by its running std.
        obs_clip: clip of the normalized observation.
        reward_clip: clip of the normalized reward.

    Example:
        >>> t = RNDTransform(torch.nn.Linear(3, 4), torch.nn.Linear(3, 4))  # doctest: +SKIP
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), t)  # doctest: +SKIP
        >>> env.rollout(5)["next", "intrinsic_reward"].shape  # doctest: +SKIP
        torch.Size([5, 1])
    """

    def __init__(
        self,
        target_network: nn.Module,
        predictor_network: nn.Module,
        in_keys=None,
        out_keys=None,
        *,
        normalize_obs: bool = True,
        normalize_reward: bool = True,
        obs_clip: float = 5.0,
        reward_clip: float = 5.0,
    ):
        in_keys = [K.OBSERVATION] if in_keys is None else in_keys
        out_keys = ["intrinsic_reward"] if out_keys is None else out_keys
        if len(in_keys) != 1 or len(out_keys) != 1:
            raise ValueError(
                f"RNDTransform reads one observation and writes one reward, got in_keys="
                f"{in_keys} and out_keys={out_keys}."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.target_network = target_network.requires_grad_(False)
        self.predictor_network = predictor_network
        self.normalize_obs, self.normalize_reward = normalize_obs, normalize_reward
        self.obs_clip, self.reward_clip = float(obs_clip), float(reward_clip)
        self.obs_rms: RunningMeanStd | None = None
        self.reward_rms = RunningMeanStd(()) if normalize_reward else None

    def _attach(self, specs):
        super()._attach(specs)
        self._reward_shape = specs.reward[next(iter(specs.reward.keys(True, True)))].shape
        if self.normalize_obs and self.obs_rms is None:
            shape = specs.observation[self.in_keys[0]].shape[len(specs.batch_size) :]
            self.obs_rms = RunningMeanStd(tuple(shape[-1:]))

    def intrinsic_reward(self, obs: torch.Tensor, update: bool = False) -> torch.Tensor:
        """``[*B, 1]`` intrinsic reward of observations ``[*B, D]``."""
        obs = obs.float()
        if self.obs_rms is not None:
            if update:
                self.obs_rms.update(obs)
            obs = self.obs_rms.normalize(obs).clamp(-self.obs_clip, self.obs_clip)
        with torch.no_grad():
            error = (self.predictor_network(obs) - self.target_network(obs)).pow(2)
        reward = error.mean(-1, keepdim=True)
        if self.reward_rms is not None:
            if update:
                self.reward_rms.update(reward)
            reward = (reward / self.reward_rms.var.clamp_min(1e-8).sqrt()).clamp(
                -self.reward_clip, self.reward_clip
            )
        return reward

    def _step(self, tensordict, next_tensordict):
        obs = td_get(next_tensordict, self.in_keys[0])
        td_set(next_tensordict, self.out_keys[0], self.intrinsic_reward(obs, self.training))
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        return tensordict_reset  # a reward belongs to steps only

    forward = _env_only("RNDTransform")

    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        reward_spec[self.out_keys[0]] = Unbounded(
            self._reward_shape, device=reward_spec.device, dtype=torch.float32
        )
        return reward_spec
