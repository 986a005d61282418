"""Reward2GoTransform: the (discounted) reward-to-go of stored trajectories.

``G[t] = r[t] + gamma * (1 - done[t]) * G[t + 1]`` along the time dim of a batch of
trajectories ``[*B, T]``: the return a decision transformer is conditioned on. It needs
whole episodes, so it is an inverse transform of stored data (``transform.inv(data)``,
or a replay buffer's write path), never a step transform: attached to an env it raises.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._returns import reward2go
from torchrl_lite.envs.transforms.transforms import Transform, td_get, td_set

__all__ = ["Reward2GoTransform"]


class Reward2GoTransform(Transform):
    """Write the reward-to-go of trajectories ``[*B, T]`` (inverse transform only).

    Args:
        gamma: the discount (1: the undiscounted return of the decision transformer).
        in_keys: reward entries ``[*B, T, 1]`` (default ``[("next", "reward")]``); those
            missing from a batch are skipped, but at least one must be there.
        out_keys: where each reward-to-go goes (default: over the rewards).
        done_key: the episode-end flag, read under ``"next"``; every trajectory of the
            batch must end inside it (else the reward-to-go is unknown).

    Example:
        >>> from tensordict import TensorDict
        >>> r2g = Reward2GoTransform(gamma=1.0, out_keys=["return_to_go"])
        >>> data = TensorDict({"next": {"reward": torch.ones(1, 3, 1),
        ...     "done": torch.tensor([[[False], [False], [True]]])}}, [1, 3])
        >>> r2g.inv(data)["return_to_go"].flatten().tolist()
        [3.0, 2.0, 1.0]
    """

    def __init__(self, gamma=1.0, in_keys=None, out_keys=None, done_key=K.DONE):
        in_keys = [(K.NEXT, K.REWARD)] if in_keys is None else list(in_keys)
        out_keys = list(in_keys) if out_keys is None else list(out_keys)
        if len(out_keys) != len(in_keys):
            raise ValueError(
                f"Reward2GoTransform: {len(in_keys)} in_keys but {len(out_keys)} out_keys; "
                "give one out key per reward entry."
            )
        super().__init__(in_keys=in_keys, in_keys_inv=in_keys, out_keys_inv=out_keys)
        self.done_key = done_key
        self.register_buffer("gamma", torch.as_tensor(gamma, dtype=torch.get_default_dtype()))

    def _attach(self, specs) -> None:
        raise ValueError(
            "Reward2GoTransform needs whole episodes, so it cannot run inside an env: apply "
            "it to stored trajectories (transform.inv(data)) or a replay buffer instead."
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Sampled data already carry the reward-to-go: nothing to do."""
        return tensordict

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write the reward-to-go of every present ``in_key`` (in place) and return the data."""
        done = tensordict.get((K.NEXT, self.done_key), None)
        if done is None:
            raise KeyError(
                f"Reward2GoTransform: the data have no {(K.NEXT, self.done_key)!r} entry; the "
                "episode ends delimit the reward-to-go (set done_key=...)."
            )
        if not bool(done.any(-2).all()):
            raise RuntimeError(
                "Reward2GoTransform: some trajectories of the batch never end (no done flag "
                "along the time dim), so their reward-to-go is unknown; store whole episodes "
                "(e.g. frames_per_batch longer than an episode)."
            )
        found = False
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            reward = td_get(tensordict, in_key)
            if reward is None:
                continue
            found = True
            gamma = float(self.gamma) if self.gamma.dim() == 0 else self.gamma
            td_set(tensordict, out_key, reward2go(reward, done.reshape(reward.shape), gamma))
        if not found:
            raise KeyError(
                f"Reward2GoTransform: none of the reward entries {self.in_keys_inv} is in the "
                f"data (it has {sorted(str(k) for k in tensordict.keys(True, True))})."
            )
        return tensordict
