"""Seed 000's on-policy storages: ``GAEBuffer`` (alias ``OnPolicyGAEBuffer``) and
``VanillaOnPolicyBuffer``, over the library's value estimators (``GAE``, ``TD1Estimator``).

A round of the Scheme: ``insert`` each collector batch ``[B, T]`` (one per collection
worker), ``before_gradients()`` (advantages and value targets, no gradients), then
``generate_batches(num_mini_batch, mini_batch_size, num_epochs)`` yields shuffled flat
minibatches (advantages recomputed with the latest critic at each epoch after the first
when ``recompute_each_epoch``, as the PPO recipe's ``ShuffledMiniBatches``), then
``after_gradients()`` empties the storage.

Normalization: with ``normalize_reward=True`` the rewards of each inserted batch are
divided by the running std of the discounted return (``ReturnNormalizer``, its statistics
in ``state_dict()``); with an actor built with ``normalize_obs=True``,
``after_gradients()`` merges the round's observations into the actor's ``RunningNorm``
statistics (so the next round collects and trains with the updated ones).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.agent._factory import Factory, check_int
from torchrl_lite.agent.normalization import ReturnNormalizer
from torchrl_lite.objectives.value import GAE, TD1Estimator
from torchrl_lite.recipes import ppo as ppo_recipe

__all__ = ["GAEBuffer", "OnPolicyGAEBuffer", "VanillaOnPolicyBuffer"]


class _OnPolicyBuffer:
    on_policy = True

    def __init__(self, device, actor, algo, size: int, recompute_each_epoch: bool,
                 normalize_reward: bool = False):  # fmt: skip
        check_int(type(self).__name__, "size", size)
        self.reward_normalizer = ReturnNormalizer(algo.gamma) if normalize_reward else None
        self.device = torch.device(device)
        self.size = size
        self.steps_per_collection = size
        self.recompute_each_epoch = bool(recompute_each_epoch)
        self.actor, self.algo = actor, algo
        self.estimator = self._make_estimator(actor, algo)
        self._batches: list[TensorDictBase] = []
        self._data: TensorDictBase | None = None

    def _make_estimator(self, actor, algo):
        raise NotImplementedError(f"{type(self).__name__} must define _make_estimator")

    def __len__(self) -> int:
        return sum(b.numel() for b in self._batches)

    def insert(self, batch: TensorDictBase) -> None:
        """Add a collector batch ``[B, T]`` (time last)."""
        if batch.batch_dims < 1:
            raise ValueError(
                f"{type(self).__name__}.insert: expected a collector batch [B, T] or [T], got "
                f"batch_size {list(batch.batch_size)}."
            )
        batch = batch.to(self.device)
        if self.reward_normalizer is not None:
            self.reward_normalizer.gamma = self.algo.gamma
            batch = batch.clone(False)
            reward = batch.get((K.NEXT, K.REWARD))
            done = batch.get((K.NEXT, K.DONE))
            scaled = self.reward_normalizer.normalize(
                reward.reshape(batch.shape), done.reshape(batch.shape)
            )
            batch.set((K.NEXT, K.REWARD), scaled.reshape(reward.shape).to(reward.dtype))
        self._batches.append(batch)
        self._data = None

    def _estimate(self) -> TensorDictBase:
        self.estimator.gamma = self.algo.gamma  # update_algorithm_parameter("gamma", ...)
        with torch.no_grad():
            flat = [self.estimator(b).reshape(-1) for b in self._batches]  # each [B * T]
        return torch.cat(flat) if len(flat) > 1 else flat[0]

    def before_gradients(self) -> None:
        """Advantages and value targets of everything inserted (the current critic)."""
        if not self._batches:
            raise RuntimeError(f"{type(self).__name__}.before_gradients: nothing was inserted.")
        self._data = self._estimate()

    def generate_batches(self, num_mini_batch=None, mini_batch_size=None, num_epochs=1):
        """``num_epochs`` passes of shuffled minibatches: ``num_mini_batch`` of them per
        pass, or as many of ``mini_batch_size`` as fit (the remainder is dropped)."""
        if self._data is None:
            self.before_gradients()
        n = self._data.numel()
        size = mini_batch_size if mini_batch_size is not None else n // max(1, num_mini_batch)
        size = max(1, min(int(size), n))
        for epoch in range(int(num_epochs)):
            if epoch > 0 and self.recompute_each_epoch:
                self._data = self._estimate()
            perm = torch.randperm(n, device=self._data.device)
            for start in range(0, n - size + 1, size):
                yield self._data[perm[start : start + size]]

    def after_gradients(self) -> None:
        """Empty the storage; first, an actor with ``normalize_obs`` merges the round's
        observations into its statistics."""
        update = getattr(self.actor, "update_normalizers", None)
        if update is not None and self._batches and getattr(self.actor, "normalize_obs", False):
            update(
                torch.cat(
                    [
                        b.get(K.OBSERVATION).reshape(
                            -1, *b.get(K.OBSERVATION).shape[b.batch_dims :]
                        )
                        for b in self._batches
                    ]
                )
            )
        self._batches.clear()
        self._data = None

    def state_dict(self) -> dict:
        """The reward statistics (the data are emptied every round: nothing else)."""
        if self.reward_normalizer is None:
            return {}
        return {"reward_normalizer": self.reward_normalizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if self.reward_normalizer is not None and "reward_normalizer" in state:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])

    @classmethod
    def _factory(cls, **kwargs):
        return Factory(cls, kwargs)


class GAEBuffer(_OnPolicyBuffer):
    """Rollouts with generalized advantage estimates (``GAE``, gamma from the algorithm).

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OnPolicyActor
        >>> from torchrl_lite.agent.algos import PPO
        >>> actor = OnPolicyActor.create_factory(gymnasium.spaces.Box(-1, 1, (3,)),
        ...     gymnasium.spaces.Box(-1, 1, (1,)))("cpu")
        >>> storage = GAEBuffer.create_factory(size=1000, gae_lambda=0.95)(
        ...     "cpu", actor, PPO.create_factory()("cpu", actor))
        >>> storage.steps_per_collection
        1000
    """

    def __init__(self, device, actor, algo, size: int = 2048, gae_lambda: float = ppo_recipe.Config().lmbda,
                 recompute_each_epoch: bool = True, normalize_advantage: bool = False,
                 normalize_reward: bool = False):  # fmt: skip
        self.gae_lambda = float(gae_lambda)
        self.normalize_advantage = bool(normalize_advantage)
        super().__init__(device, actor, algo, size, recompute_each_epoch, normalize_reward)

    def _make_estimator(self, actor, algo):
        return GAE(gamma=algo.gamma, lmbda=self.gae_lambda, value_network=actor.value,
                   average_gae=self.normalize_advantage)  # fmt: skip

    @classmethod
    def create_factory(cls, size: int = 2048, gae_lambda: float = ppo_recipe.Config().lmbda,
                       recompute_each_epoch: bool = True, normalize_advantage: bool = False,
                       normalize_reward: bool = False):  # fmt: skip
        """``storage_factory(device, actor, algo) -> GAEBuffer``; ``size``: env steps per env
        a collection worker gathers per round; ``normalize_advantage``: standardise the
        advantages over the round (A2C's recipe; PPO's loss does it per minibatch);
        ``normalize_reward``: rewards over the running std of the discounted return."""
        extra = {"normalize_reward": True} if normalize_reward else {}
        return cls._factory(size=size, gae_lambda=gae_lambda,
                            recompute_each_epoch=recompute_each_epoch,
                            normalize_advantage=normalize_advantage, **extra)  # fmt: skip


OnPolicyGAEBuffer = GAEBuffer


class VanillaOnPolicyBuffer(_OnPolicyBuffer):
    """Rollouts with discounted returns bootstrapped at the end (``TD1Estimator``) and
    advantage ``return - V(s)``.

    Example:
        >>> factory = VanillaOnPolicyBuffer.create_factory(size=5)
        >>> factory.kwargs
        {'size': 5}
    """

    def __init__(self, device, actor, algo, size: int = 2048):
        super().__init__(device, actor, algo, size, recompute_each_epoch=False)

    def _make_estimator(self, actor, algo):
        return TD1Estimator(gamma=algo.gamma, value_network=actor.value)

    @classmethod
    def create_factory(cls, size: int = 2048):
        """``storage_factory(device, actor, algo) -> VanillaOnPolicyBuffer``."""
        return cls._factory(size=size)
