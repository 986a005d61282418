"""Running observation and reward normalization (used by the PPO recipe and the agent's
on-policy components).

* :class:`RunningNorm`: an ``nn.Module`` that standardises observations with running mean
  and variance kept in buffers. It sits inside the actor's networks
  (``OnPolicyActor(normalize_obs=True)``), so its statistics travel with the weights to
  the collection workers, are saved by ``Learner.save_model()`` / checkpoints and are
  used by every evaluation that loads the actor. Its ``forward`` never changes the
  statistics: the gradient worker calls ``update`` once per round (after the round's
  gradient steps, with that round's observations), so a round is collected and trained
  with the same statistics.
* :class:`ReturnNormalizer`: divides rewards by the running standard deviation of the
  discounted return (as SB3's ``VecNormalize(norm_reward=True)``), applied by the
  on-policy storages before the advantage estimates (``GAEBuffer(normalize_reward=True)``);
  its statistics are part of the storage's state (checkpoints). Returns are accumulated
  within each collected batch (from 0 at its first step and after each episode end).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ReturnNormalizer", "RunningNorm"]


def _merge_moments(count, mean, var, batch: torch.Tensor):
    """Running ``(count, mean, var)`` merged with the rows of ``batch`` ``[N, *shape]``."""
    n = batch.shape[0]
    b_mean = batch.mean(0)
    b_var = batch.var(0, unbiased=False)
    total = count + n
    delta = b_mean - mean
    new_mean = mean + delta * (n / total)
    m2 = var * count + b_var * n + delta.pow(2) * (count * n / total)
    return total, new_mean, m2 / total


class RunningNorm(nn.Module):
    """``clamp((x - mean) / sqrt(var + eps), -clip, clip)`` with running statistics.

    Args:
        shape: the shape of one observation.
        clip: bound of the normalised values (SB3's ``clip_obs``: 10).
        eps: added to the variance.

    Example:
        >>> norm = RunningNorm((2,))
        >>> norm.update(torch.tensor([[1.0, 10.0], [3.0, 30.0]]))
        >>> norm.mean.tolist(), norm(torch.tensor([[3.0, 30.0]])).round().tolist()
        ([2.0, 20.0], [[1.0, 1.0]])
    """

    def __init__(self, shape, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        shape = tuple(int(s) for s in shape)
        self.clip, self.eps = float(clip), float(eps)
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge observations ``[*B, *shape]`` into the statistics."""
        x = x.detach().float().reshape(-1, *self.mean.shape).to(self.mean.device)
        if x.shape[0] == 0:
            return
        count, mean, var = _merge_moments(float(self.count), self.mean, self.var, x)
        self.count.fill_(count)
        self.mean.copy_(mean)
        self.var.copy_(var)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = (x.float() - self.mean) / torch.sqrt(self.var + self.eps)
        return out.clamp(-self.clip, self.clip)


class ReturnNormalizer:
    """Scales rewards by ``1 / sqrt(var(discounted return) + eps)``, clipped to ``+-clip``.

    Args:
        gamma: the discount of the returns (the algorithm's).
        clip: bound of the scaled rewards (SB3's ``clip_reward``: 10).
        eps: added to the variance.

    Example:
        >>> norm = ReturnNormalizer(gamma=0.5)
        >>> scaled = norm.normalize(torch.ones(1, 4), torch.zeros(1, 4, dtype=torch.bool))
        >>> norm.count, round(norm.var, 4)  # returns 1, 1.5, 1.75, 1.875
        (4, 0.1123)
    """

    def __init__(self, gamma: float = 0.99, clip: float = 10.0, eps: float = 1e-8):
        self.gamma, self.clip, self.eps = float(gamma), float(clip), float(eps)
        self.count, self.mean, self.var = 0, 0.0, 1.0

    @torch.no_grad()
    def normalize(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Update the statistics with the discounted returns of ``reward`` ``[B, T]``
        (time last; ``done`` ends an episode after that step) and return the scaled
        rewards."""
        reward = reward.float()
        done = done.reshape(reward.shape).bool()
        ret = torch.zeros(reward.shape[:-1], dtype=torch.float64)
        returns = torch.empty(reward.shape, dtype=torch.float64)
        for t in range(reward.shape[-1]):
            ret = ret * self.gamma + reward[..., t].double()
            returns[..., t] = ret
            ret = torch.where(done[..., t], torch.zeros_like(ret), ret)
        count, mean, var = _merge_moments(
            self.count, torch.tensor(self.mean, dtype=torch.float64),
            torch.tensor(self.var, dtype=torch.float64), returns.reshape(-1),
        )  # fmt: skip
        self.count, self.mean, self.var = int(count), float(mean), float(var)
        return (reward / (self.var + self.eps) ** 0.5).clamp(-self.clip, self.clip)

    def state_dict(self) -> dict:
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state_dict(self, state: dict) -> None:
        self.count, self.mean, self.var = int(state["count"]), state["mean"], state["var"]
