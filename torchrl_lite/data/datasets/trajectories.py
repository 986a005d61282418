"""Decision-transformer data: returns-to-go of a dataset, and windows of ``K`` steps.

:func:`returns_to_go` gives each step the (undiscounted by default) sum of the rewards
from it to its episode's end, divided by ``reward_scale``: the dataset side of
:class:`~torchrl_lite.envs.transforms.TargetReturn`. :class:`TrajectoryWindows` holds
whole trajectories and samples windows of ``context_length`` steps that end at a step
drawn uniformly (so every step is predicted as the last of a window), left-padded at an
episode's start, with the keys a DT reads (``observation``, ``action``,
``return_to_go``, ``timestep``, ``mask``). It is also the online decision transformer's
replay buffer: :meth:`TrajectoryWindows.extend` adds the policy's own trajectories and,
past ``capacity`` trajectories, drops the oldest (``evict="oldest"``) or those with the
lowest return (``evict="lowest_return"``); a dataset larger than ``capacity`` starts with
its highest-return trajectories (as in the online decision transformer paper).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._returns import reward2go

__all__ = ["returns_to_go", "TrajectoryWindows"]

RETURN_TO_GO = "return_to_go"
EVICT = ("oldest", "lowest_return")


def _need(data: TensorDictBase, key, owner: str, why: str):
    value = data.get(key, None)
    if value is None:
        present = sorted(str(k) for k in data.keys(True, True))
        raise KeyError(
            f"{owner}: the dataset has no {key!r} entry ({why}); it has {present}. Load a file "
            "with rewards and episode ends (a D4RL file's 'rewards' and 'terminals'/'timeouts')."
        )
    return value


def returns_to_go(
    reward: torch.Tensor, traj_ids: torch.Tensor, reward_scale: float = 1.0, gamma: float = 1.0
) -> torch.Tensor:
    """Return-to-go ``[N, 1]`` of flat transitions: ``G_t = (r_t + gamma * G_{t+1}) / ...``.

    ``G_t = sum_{u >= t in the same trajectory} gamma^(u - t) r_u / reward_scale``.

    Args:
        reward: ``[N, 1]`` (or ``[N]``) rewards, trajectories stored one after the other.
        traj_ids: ``[N]`` trajectory ids (runs of equal ids are trajectories).
        reward_scale: the return unit (returns are divided by it).
        gamma: discount (1: the decision transformer's undiscounted return).

    Example:
        >>> returns_to_go(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0, 0, 1, 1])).flatten().tolist()
        [3.0, 2.0, 7.0, 4.0]
    """
    if not reward_scale > 0:
        raise ValueError(f"returns_to_go: reward_scale must be > 0, got {reward_scale!r}.")
    reward = reward.reshape(-1, 1).float()  # [N, 1]
    ids = traj_ids.reshape(-1)
    ends = torch.ones_like(ids, dtype=torch.bool)
    ends[:-1] = ids[1:] != ids[:-1]  # the last step of each run of equal ids
    return reward2go(reward / reward_scale, ends.unsqueeze(-1), gamma)


class TrajectoryWindows:
    """Whole trajectories, sampled as windows ``[batch_size, context_length]`` for a DT.

    Each trajectory keeps its ``observation``, ``action``, ``return_to_go`` (from
    :func:`returns_to_go`), ``timestep`` (the step within the episode) and its reward.
    :meth:`sample` draws ``batch_size`` steps uniformly over all stored steps and returns
    the ``context_length`` steps ending at each (left-padded with zeros and ``mask``
    False before the episode's start). A trajectory cut by the end of a file starts at
    timestep 0 of the cut part.

    Args:
        data: flat transitions ``[N]`` with ``observation``, ``action``,
            ``("next", "reward")``, and trajectory ids at ``("collector", "traj_ids")``
            (what :class:`~torchrl_lite.data.datasets.D4RLExperienceReplay` stores).
        context_length: the window length ``K``.
        reward_scale: returns-to-go are divided by it.
        capacity: trajectories kept (None: all). A ``data`` with more keeps its
            ``capacity`` highest-return trajectories (in their order).
        evict: what :meth:`extend` drops past ``capacity``: ``"oldest"`` (first in, first
            out) or ``"lowest_return"`` (keeps the best trajectories seen; ties: the older
            leaves; a trajectory cut by a file's end counts with its part's return).

    Raises:
        KeyError: ``data`` lacks rewards or trajectory ids (episode ends); names the entry.
        ValueError: ``context_length`` exceeds every trajectory, or ``evict`` is unknown.

    Example:
        >>> data = TensorDict({"observation": torch.randn(6, 3), "action": torch.randn(6, 1),
        ...     ("next", "reward"): torch.ones(6, 1),
        ...     ("collector", "traj_ids"): torch.tensor([0, 0, 0, 1, 1, 1])}, batch_size=[6])
        >>> windows = TrajectoryWindows(data, context_length=2)
        >>> batch = windows.sample(4)
        >>> batch.shape, sorted(batch.keys())
        (torch.Size([4, 2]), ['action', 'mask', 'observation', 'return_to_go', 'timestep'])
    """

    def __init__(
        self,
        data: TensorDictBase,
        context_length: int,
        *,
        reward_scale: float = 1.0,
        capacity: int | None = None,
        evict: str = "oldest",
    ):
        if evict not in EVICT:
            raise ValueError(f"TrajectoryWindows: evict must be one of {EVICT}, got {evict!r}.")
        if (
            isinstance(context_length, bool)
            or not isinstance(context_length, int)
            or context_length < 1
        ):
            raise ValueError(
                f"TrajectoryWindows: context_length must be a positive int, got {context_length!r}."
            )
        if capacity is not None and capacity < 1:
            raise ValueError(f"TrajectoryWindows: capacity must be >= 1 or None, got {capacity!r}.")
        self.context_length, self.reward_scale, self.capacity = (
            context_length,
            reward_scale,
            capacity,
        )
        self.evict = evict
        self._trajs: list[TensorDict] = []
        self._returns: list[float] = []
        first = self._split(data)
        longest = max(t.shape[0] for t in first)
        if context_length > longest:
            raise ValueError(
                f"TrajectoryWindows: context_length={context_length} is longer than every "
                f"trajectory of the dataset (the longest has {longest} steps); use "
                f"context_length <= {longest}."
            )
        self._add(first, evict="lowest_return")

    # -- storing ----------------------------------------------------------------------
    def _split(self, data: TensorDictBase) -> list[TensorDict]:
        """Trajectories of flat transitions ``[N]``, each ``[L]`` with the DT's keys."""
        owner = "TrajectoryWindows"
        reward = _need(data, (K.NEXT, K.REWARD), owner, "the return-to-go sums the rewards")
        ids = _need(data, K.TRAJ_IDS, owner, "episode ends delimit the returns-to-go")
        ids = ids.reshape(-1)
        obs = _need(data, K.OBSERVATION, owner, "the DT reads observations")
        action = _need(data, K.ACTION, owner, "the DT predicts actions")
        rtg = returns_to_go(reward, ids, self.reward_scale)
        starts = torch.ones_like(ids, dtype=torch.bool)
        starts[1:] = ids[1:] != ids[:-1]
        bounds = starts.nonzero().flatten().tolist() + [ids.numel()]
        out = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            out.append(
                TensorDict(
                    {
                        K.OBSERVATION: torch.as_tensor(obs[lo:hi]).float(),
                        K.ACTION: torch.as_tensor(action[lo:hi]).float(),
                        RETURN_TO_GO: rtg[lo:hi],
                        "timestep": torch.arange(hi - lo),
                        K.REWARD: torch.as_tensor(reward[lo:hi]).reshape(-1, 1).float(),
                    },
                    batch_size=[hi - lo],
                )
            )
        return out

    def _add(self, trajs: list[TensorDict], evict: str) -> None:
        self._trajs.extend(trajs)
        self._returns.extend(float(t.get(K.REWARD).sum()) for t in trajs)
        extra = 0 if self.capacity is None else len(self._trajs) - self.capacity
        if extra > 0:
            if evict == "oldest":
                drop = set(range(extra))
            else:  # the lowest returns; among equal ones the oldest
                order = sorted(range(len(self._trajs)), key=lambda i: (self._returns[i], i))
                drop = set(order[:extra])
            keep = [i for i in range(len(self._trajs)) if i not in drop]
            self._trajs = [self._trajs[i] for i in keep]
            self._returns = [self._returns[i] for i in keep]
        self._flat = torch.cat([t.exclude(K.REWARD) for t in self._trajs])  # [N]
        lengths = torch.tensor([t.shape[0] for t in self._trajs])
        self._start_of = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)  # [N]

    def extend(self, data: TensorDictBase) -> int:
        """Add the trajectories of flat transitions ``data [N]`` (same keys as the
        constructor's); past ``capacity``, drop as ``evict`` says. Returns the trajectories
        added (some may be dropped at once under ``"lowest_return"``)."""
        trajs = self._split(data)
        self._add(trajs, self.evict)
        return len(trajs)

    def __len__(self) -> int:
        """Stored steps."""
        return self._flat.shape[0]

    @property
    def num_trajectories(self) -> int:
        return len(self._trajs)

    def returns(self) -> torch.Tensor:
        """Return of each stored trajectory ``[num_trajectories]`` (env units)."""
        return torch.stack([t.get(K.REWARD).sum() for t in self._trajs])

    def state_stats(self, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation ``[S]`` of the stored observations (flattened per
        step; the deviation floored at ``eps``), for :class:`DecisionTransformer`'s
        ``state_mean`` / ``state_std``."""
        obs = self._flat.get(K.OBSERVATION).reshape(len(self), -1)
        return obs.mean(0), obs.std(0).clamp_min(eps)

    # -- sampling ---------------------------------------------------------------------
    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> TensorDict:
        """Windows ``[batch_size, context_length]`` ending at uniformly drawn steps."""
        k = self.context_length
        ends = torch.randint(len(self), (batch_size,), generator=generator)  # [B]
        index = ends.unsqueeze(-1) - torch.arange(k - 1, -1, -1)  # [B, K]
        mask = index >= self._start_of[ends].unsqueeze(-1)  # [B, K]: inside the trajectory
        window = self._flat[index.clamp_min(0).reshape(-1)].reshape(batch_size, k)
        window = window.apply(
            lambda x: x * mask.reshape(*mask.shape, *[1] * (x.dim() - 2)).to(x.dtype)
        )
        window.set("mask", mask)
        return window
