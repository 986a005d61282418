"""Seed 000's replay storages over ``TensorDictReplayBuffer``: ``ReplayBuffer``,
``NStepReplayBuffer`` (n-step returns) and ``PERBuffer`` (prioritized replay).

A round of the Scheme: ``insert`` each collector batch ``[B, T]`` (flattened into
transitions), then ``generate_batches(num_mini_batch, mini_batch_size, num_epochs)``
yields ``num_mini_batch * num_epochs`` uniformly (or priority-) sampled minibatches, none
while the buffer holds fewer than ``max(algo.start_steps, mini_batch_size)``
transitions. ``steps_per_collection`` is ``algo.update_every``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.agent._factory import Factory, check_int
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.data.replay_buffers.replay_buffers import TensorDictPrioritizedReplayBuffer
from torchrl_lite.recipes import sac as sac_recipe

__all__ = ["NStepReplayBuffer", "PERBuffer", "ReplayBuffer"]

_SIZE = sac_recipe.Config().buffer_size
_STEPS = "steps_to_next_obs"  # read by the losses' TD(0) estimator


class ReplayBuffer:
    """Uniform replay of the last ``size`` transitions (seed 000's ``ReplayBuffer``).

    An adapter that keeps the seed's name inside ``agent/`` only: it holds the library's
    own :class:`torchrl_lite.data.TensorDictReplayBuffer`, which is what ``ReplayBuffer``
    means everywhere else in the package.

    Example:
        >>> ReplayBuffer.create_factory(size=1000).kwargs
        {'size': 1000}
    """

    on_policy = False

    def __init__(self, device, actor, algo, size: int = _SIZE):
        check_int(type(self).__name__, "size", size)
        self.device = torch.device(device)
        self.size = size
        self.actor, self.algo = actor, algo
        self.steps_per_collection = int(getattr(algo, "update_every", 1) or 1)
        self.buffer = self._make_buffer(size)

    def _make_buffer(self, size: int):
        return TensorDictReplayBuffer(storage=LazyTensorStorage(size, device=self.device))

    def __len__(self) -> int:
        return len(self.buffer)

    def _transitions(self, batch: TensorDictBase) -> TensorDictBase:
        return batch.reshape(-1)

    def insert(self, batch: TensorDictBase) -> None:
        """Add a collector batch ``[B, T]`` (or flat transitions ``[N]``)."""
        flat = self._transitions(batch.to(self.device))
        if flat.numel():
            self.buffer.extend(flat)

    def before_gradients(self) -> None:
        pass

    def ready(self, mini_batch_size: int) -> bool:
        """Enough transitions to learn from: ``max(start_steps, mini_batch_size)``."""
        return len(self) >= max(int(getattr(self.algo, "start_steps", 0)), int(mini_batch_size))

    def generate_batches(self, num_mini_batch=1, mini_batch_size=None, num_epochs=1):
        """``num_mini_batch * num_epochs`` sampled minibatches of ``mini_batch_size``."""
        size = int(mini_batch_size or self.algo.mini_batch_size)
        if not self.ready(size):
            return
        for _ in range(int(num_mini_batch) * int(num_epochs)):
            batch = self.buffer.sample(size)
            yield batch
            self._after_update(batch)

    def _after_update(self, batch: TensorDictBase) -> None:
        pass

    def after_gradients(self) -> None:
        pass

    def state_dict(self) -> dict:
        """The buffer's contents (for full checkpoints)."""
        return {"buffer": self.buffer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.buffer.load_state_dict(state["buffer"])

    @classmethod
    def create_factory(cls, size: int = _SIZE, **kwargs):
        """``storage_factory(device, actor, algo) -> storage``."""
        return Factory(cls, {"size": size, **kwargs})


class NStepReplayBuffer(ReplayBuffer):
    """Replay of n-step transitions: ``("next", "reward")`` is ``sum_i gamma^i r_{t+i}``
    over the ``k <= n_step`` steps of the window, ``"next"`` the state after its last step,
    and ``"steps_to_next_obs"`` is ``k``; the algorithm's TD(0) target bootstraps with
    ``gamma ** k`` (as with :class:`~torchrl_lite.data.MultiStep` on the single-machine path).

    Every step starts a window. One that an episode end (termination or time limit) or the
    end of the collected batch cuts short has ``k < n_step``: a termination does not
    bootstrap, the others bootstrap from the last state they reach.

    Example:
        >>> NStepReplayBuffer.create_factory(size=1000, n_step=3).kwargs
        {'size': 1000, 'n_step': 3}
    """

    def __init__(self, device, actor, algo, size: int = _SIZE, n_step: int = 3):
        check_int("NStepReplayBuffer", "n_step", n_step)
        super().__init__(device, actor, algo, size)
        self.n_step = n_step
        if hasattr(algo, "use_n_step_returns"):
            algo.use_n_step_returns(n_step)

    def _transitions(self, batch: TensorDictBase) -> TensorDictBase:
        if batch.batch_dims == 1:
            batch = batch.unsqueeze(0)  # [1, T]
        batch = batch.reshape(-1, batch.shape[-1])  # [B, T]
        nxt = batch.get(K.NEXT)
        reward = nxt.get(K.REWARD)  # [B, T, 1]
        done = nxt.get(K.DONE).squeeze(-1)  # [B, T]
        B, T = done.shape
        t = torch.arange(T, device=done.device)
        gamma = float(self.algo.gamma)
        ret = torch.zeros_like(reward)
        alive = torch.ones(B, T, dtype=torch.bool, device=done.device)
        length = torch.zeros(B, T, dtype=torch.long, device=done.device)
        last = t.expand(B, T).clone()  # [B, T] index of each window's last step
        for i in range(self.n_step):
            idx = (t + i).clamp(max=T - 1)
            inside = alive & (t + i < T)  # [B, T]
            ret = ret + inside.unsqueeze(-1) * gamma**i * reward[:, idx]
            length = length + inside
            last = torch.where(inside, idx.expand(B, T), last)
            alive = inside & ~done[:, idx]
        rows = torch.arange(B, device=done.device).unsqueeze(-1).expand(B, T)
        out = batch.clone(False)
        out.set(K.NEXT, nxt[rows, last])
        out.set((K.NEXT, K.REWARD), ret)
        out.set(_STEPS, length.unsqueeze(-1))  # [B, T, 1]: the TD target's gamma ** k
        return out.reshape(-1)

    def load_state_dict(self, state: dict) -> None:
        data = state["buffer"]["storage"].get("data")
        if isinstance(data, TensorDictBase) and _STEPS not in data.keys():
            # saved before windows carried their length: every stored window was either
            # n_step long or ended by a termination (whose target does not bootstrap)
            data = data.clone(False)
            data.set(_STEPS, torch.full((*data.shape, 1), self.n_step, dtype=torch.long))
            storage = dict(state["buffer"]["storage"], data=data)
            state = dict(state, buffer=dict(state["buffer"], storage=storage))
        super().load_state_dict(state)


class PERBuffer(ReplayBuffer):
    """Prioritized replay (https://arxiv.org/abs/1511.05952): sampled with probability
    ``p_i^alpha``, importance weights ``"_weight"`` with exponent ``beta``, priorities
    updated from the loss's ``"td_error"`` after each update.

    Example:
        >>> PERBuffer.create_factory(size=1000, alpha=0.6, beta=0.4).kwargs
        {'size': 1000, 'alpha': 0.6, 'beta': 0.4}
    """

    def __init__(self, device, actor, algo, size: int = _SIZE, alpha: float = 0.6,
                 beta: float = 0.4, epsilon: float = 1e-6):  # fmt: skip
        self.alpha, self.beta, self.epsilon = float(alpha), float(beta), float(epsilon)
        super().__init__(device, actor, algo, size)

    def _make_buffer(self, size: int):
        return TensorDictPrioritizedReplayBuffer(
            alpha=self.alpha, beta=self.beta, eps=self.epsilon,
            storage=LazyTensorStorage(size, device=self.device),
        )  # fmt: skip

    def _after_update(self, batch: TensorDictBase) -> None:
        if "td_error" not in batch.keys():
            raise KeyError(
                f"PERBuffer: the algorithm's loss did not write 'td_error' into the minibatch "
                f"(keys: {sorted(batch.keys())}); use a loss that does (DQN, SAC, TD3, DDPG)."
            )
        self.buffer.update_tensordict_priority(batch)
