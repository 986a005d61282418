"""Value-estimator modules: read a batch, call a function of ``functional``, write keys.

The contract: a subclass implements ``_compute(value, next_value, reward, done,
terminated) -> (advantage, value_target)`` on ``[*batch, T, 1]`` tensors (``value`` may be
None when only the target is asked for, and then ``advantage`` is None). Everything else
(reading keys, calling the value network on the root and ``"next"`` observations, shapes,
``set_keys``, ``differentiable``, ``shifted``) lives in :class:`ValueEstimatorBase`.

A batch is a TensorDict whose last batch dim is time: ``[T]`` or ``[*B, T]``. Reads
``"state_value"`` and ``("next", "state_value")`` (computed by ``value_network`` unless it
is None), ``("next", "reward")``, ``("next", "done")`` and ``("next", "terminated")`` (the
latter defaults to ``done`` when absent: every end is then a termination). Writes
``"advantage"`` and ``"value_target"`` (and the values it computed).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.objectives._input_checks import first_call, warn_if_not_trajectory
from torchrl_lite.objectives._tensor_keys import TensorKeysMixin
from torchrl_lite.objectives.value.functional import (
    generalized_advantage_estimate,
    td0_return_estimate,
    td1_return_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_return_estimate,
)

__all__ = [
    "ValueEstimatorBase",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "GAE",
]


@dataclass
class _AcceptedKeys:
    """Keys an estimator reads and writes; change them with ``set_keys``.

    ``reward``, ``done`` and ``terminated`` are read under ``"next"``; ``value`` is read
    (or written) both at the root and under ``"next"``.
    """

    advantage: str | tuple = K.ADVANTAGE
    value_target: str | tuple = K.VALUE_TARGET
    value: str | tuple = K.STATE_VALUE
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED
    steps_to_next_obs: str | tuple = "steps_to_next_obs"
    """Read at the root by :class:`TD0Estimator` only (written by ``MultiStep``)."""


def _next(key) -> tuple:
    return (K.NEXT, *key) if isinstance(key, tuple) else (K.NEXT, key)


def _check_factor(cls: str, name: str, value, low_open: bool):
    """Construction-time bound check of a number (tensors are checked per call)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{cls}: {name} must be a number or a tensor, got {value!r}")
    if (value <= 0 if low_open else value < 0) or value > 1:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{cls}: {name} must lie in {interval}, got {value}.")
    return float(value)


def _standardise(x: torch.Tensor, eps: float) -> torch.Tensor:
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / x.std().clamp_min(eps)


class ValueEstimatorBase(TensorKeysMixin, nn.Module):
    """Base class of value estimators: key handling and value-network calls.

    Args:
        value_network: a TensorDict module reading ``in_keys`` and writing the ``value``
            key (``"state_value"``), or None to read values already in the batch.
        shifted: compute the values of the root and ``"next"`` observations in one call of
            the value network, over the time-shifted sequence of observations (the true
            final observation of each episode is inserted after its last step).
        differentiable: let gradients flow from the outputs into the value network;
            otherwise everything is computed under ``torch.no_grad()``.
        skip_existing: reuse values already in the batch instead of recomputing them.
        average_rewards: standardise the rewards (zero mean, unit std) before use.
        device: accepted for TorchRL's signature (the maths runs where the batch is).
        value_chunk_size: call the value network on at most this many steps at a time
            (caps its peak activation memory; the same values).
        num_chunks: or split each call into this many chunks (``num_chunk``: alias).

    A ``("next", obs)`` entry that is NaN (``NextStateReconstructor`` at a trajectory end)
    is fed to the value network as the step's own observation, a finite placeholder: at
    a terminated step its value is masked by ``(1 - terminated)``, at a truncated one it
    stands in for the missing bootstrap. With ``shifted=True`` every step's next value
    is exact here (no budget), so the ``"shifted_valid"`` entry written is all True.
    """

    # -- the contract ----------------------------------------------------------------
    _multi_step = True  # returns over several steps need the batch's time order

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        """``(advantage, value_target)`` from ``[*batch, T, 1]`` tensors; ``gamma`` is this
        batch's discount (:meth:`_discount`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _compute")

    def _discount(self, steps):
        """The discount of a batch whose ``"steps_to_next_obs"`` is ``steps`` (or None).

        Returns over several steps chain consecutive transitions; n-step windows
        (:class:`~torchrl_lite.data.MultiStep`) overlap, so chaining them would count
        rewards more than once: refused. :class:`TD0Estimator` bootstraps each window.
        """
        if steps is not None and bool((steps != 1).any()):  # one host sync, n-step only
            name = type(self).__name__
            raise ValueError(
                f"{name}: the batch holds n-step transitions ('steps_to_next_obs' up to "
                f"{int(steps.max())}, from MultiStep); {name} chains consecutive "
                f"transitions, which would count the overlapping windows' rewards more "
                f"than once. Use TD0Estimator (it bootstraps each window with gamma ** k), "
                f"or collect without MultiStep."
            )
        return self.gamma

    _target_needs_value = False  # True when the target depends on V(s) (GAE)

    # -- construction ----------------------------------------------------------------
    def __init__(
        self,
        *,
        value_network: nn.Module | None,
        shifted: bool = False,
        differentiable: bool = False,
        skip_existing: bool = False,
        average_rewards: bool = False,
        device=None,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
    ):
        super().__init__()
        if num_chunk is not None and num_chunks is not None and num_chunk != num_chunks:
            raise ValueError(
                f"num_chunk={num_chunk} and num_chunks={num_chunks} differ; pass one of them."
            )
        num_chunks = num_chunks if num_chunks is not None else num_chunk
        for name, n in (("value_chunk_size", value_chunk_size), ("num_chunks", num_chunks)):
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                raise ValueError(f"{type(self).__name__}: {name} must be an int >= 1, got {n!r}")
        if value_chunk_size is not None and num_chunks is not None:
            raise ValueError(
                f"{type(self).__name__}: pass value_chunk_size or num_chunks, not both."
            )
        self.value_chunk_size, self.num_chunks = value_chunk_size, num_chunks
        # TorchRL's scripts pass the device of its constant buffers; ours keeps none (the
        # constants follow the batch), so it is only checked
        self.device = None if device is None else torch.device(device)
        if value_network is not None and not hasattr(value_network, "in_keys"):
            raise TypeError(
                f"{type(self).__name__}: value_network must be a TensorDict module with "
                f"in_keys (e.g. TensorDictModule(net, in_keys=['observation'], "
                f"out_keys=['state_value'])), got {type(value_network).__name__}."
            )
        self.value_network = value_network
        self.shifted = shifted
        self.differentiable = differentiable
        self.skip_existing = skip_existing
        self.average_rewards = average_rewards
        self.tensor_keys = _AcceptedKeys()

    @property
    def in_keys(self) -> list:
        keys = self.tensor_keys
        net_keys = list(self.value_network.in_keys) if self.value_network is not None else []
        return [
            *net_keys,
            *(_next(k) for k in net_keys),
            _next(keys.reward),
            _next(keys.done),
            _next(keys.terminated),
        ]

    @property
    def out_keys(self) -> list:
        return [self.tensor_keys.advantage, self.tensor_keys.value_target]

    # -- public calls ----------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write ``"advantage"`` and ``"value_target"`` into ``tensordict``; return it."""
        advantage, target = self._estimate(tensordict, need_value=True)
        tensordict.set(self.tensor_keys.advantage, advantage)
        tensordict.set(self.tensor_keys.value_target, target)
        if self.shifted and self.value_network is not None:
            valid = torch.ones(tensordict.batch_size, dtype=torch.bool, device=advantage.device)
            tensordict.set("shifted_valid", valid)  # [*B, T]: no step dropped (see above)
        return tensordict

    def value_estimate(
        self, tensordict: TensorDictBase, next_value: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The value target ``[*batch, T, 1]`` (``next_value`` overrides V(s') if given)."""
        _, target = self._estimate(
            tensordict, need_value=self._target_needs_value, next_value=next_value
        )
        return target

    # -- wiring ----------------------------------------------------------------------
    def _estimate(self, td: TensorDictBase, need_value: bool, next_value=None):
        if td.batch_dims < 1:
            raise ValueError(
                f"{type(self).__name__} needs a batch whose last dim is time ([T] or "
                f"[*B, T]), got batch_size {list(td.batch_size)}."
            )
        keys = self.tensor_keys
        reward = self._get(td, _next(keys.reward), "reward")
        done = self._get(td, _next(keys.done), "done")
        terminated = td.get(_next(keys.terminated), None)
        for name, tensor in (("reward", reward), ("done", done), ("terminated", terminated)):
            if tensor is not None and tensor.shape != (*td.batch_size, 1):
                raise ValueError(
                    f"{type(self).__name__}: {_next(getattr(keys, name))!r} has shape "
                    f"{list(tensor.shape)} but the batch is {list(td.batch_size)}; expected "
                    f"{[*td.batch_size, 1]} (time is the last batch dim)."
                )
        # done flags stored as 0/1 numbers (not bool) read as bool, in every estimator
        if done.dtype != torch.bool:
            done = done != 0
        if terminated is not None and terminated.dtype != torch.bool:
            terminated = terminated != 0
        steps = td.get(keys.steps_to_next_obs, None)
        if steps is not None and steps.shape != (*td.batch_size, 1):
            raise ValueError(
                f"{type(self).__name__}: {keys.steps_to_next_obs!r} has shape "
                f"{list(steps.shape)} but the batch is {list(td.batch_size)}; expected "
                f"{[*td.batch_size, 1]}."
            )
        gamma = self._discount(steps)  # a local: one estimator may serve several threads
        if isinstance(gamma, torch.Tensor):
            gamma = gamma.to(device=reward.device, dtype=reward.dtype)
        if self._multi_step and first_call(self, "trajectory"):  # once: shuffled is no trajectory
            warn_if_not_trajectory(type(self).__name__, td, done)
        with torch.set_grad_enabled(self.differentiable and torch.is_grad_enabled()):
            value, next_value = self._values(td, need_value, next_value)
            if self.average_rewards:
                reward = _standardise(reward, 1e-5)
            return self._compute(gamma, value, next_value, reward, done, terminated)

    def _get(self, td: TensorDictBase, key, field: str, hint: str | None = None):
        value = td.get(key, None)
        if value is None:
            name = type(self).__name__
            hint = hint or (
                f"{name} reads it as its {field!r} key; if your data stores it under "
                f"another name, call {name}(...).set_keys({field}=<your key>)."
            )
            available = td.keys(include_nested=True, leaves_only=True)
            raise KeyError(f"{missing_key_message(key, available)} {hint}")
        return value

    def _values(self, td: TensorDictBase, need_value: bool, next_value):
        """``(V(s), V(s'))`` as ``[*batch, T, 1]``; computed ones are written into ``td``."""
        value_key = self.tensor_keys.value
        net = self.value_network
        existing = (
            self.skip_existing and value_key in td.keys(True) and _next(value_key) in td.keys(True)
        )
        if net is None or existing:
            value = self._read_values(td, value_key, root=True) if need_value else None
            if next_value is None:
                next_value = self._read_values(td, _next(value_key), root=False)
            return value, next_value
        self._check_net_inputs(td)
        if next_value is not None:  # given by the caller: only V(s) may be needed
            value = self._call_net(td) if need_value else None
        else:
            if self.shifted:
                value, next_value = self._shifted_values(td)
            else:
                value = self._call_net(td) if need_value else None
                next_value = self._call_net(self._next_inputs(td))
            td.set(_next(value_key), next_value)
        if value is not None:
            td.set(value_key, value)
        return value, next_value

    def _read_values(self, td, key, root: bool):
        field = "value"
        where = "the root" if root else "the 'next' entry"
        hint = (
            f"{type(self).__name__} has no value_network, so it reads values from {where} "
            f"of the batch; pass value_network=... or store the values, or rename the key "
            f"with set_keys({field}=<your key>)."
        )
        return self._get(td, key, field, hint if self.value_network is None else None)

    def _check_net_inputs(self, td: TensorDictBase) -> None:
        present = td.keys(include_nested=True)
        for key in self.value_network.in_keys:
            for full in (key, _next(key)):
                if full not in present:
                    raise KeyError(
                        f"{missing_key_message(full, td.keys(True, True))} "
                        f"{type(self).__name__} feeds it to its value network (in_keys="
                        f"{list(self.value_network.in_keys)}), at the root and under 'next'."
                    )

    def _next_inputs(self, td: TensorDictBase) -> TensorDictBase:
        """The value network's ``"next"`` inputs, a NaN entry replaced by the root's."""
        nxt = td.get(K.NEXT).select(*self.value_network.in_keys)
        for key in self.value_network.in_keys:
            x = nxt.get(key)
            if x.is_floating_point():
                nan = torch.isnan(x)
                if bool(nan.any()):  # one host sync per key and batch
                    nxt.set(key, torch.where(nan, td.get(key), x))
        return nxt

    def _call_net(self, td: TensorDictBase) -> torch.Tensor:
        td = td.select(*self.value_network.in_keys)
        if self.value_chunk_size is None and self.num_chunks is None:
            return self._net_value(td)
        flat = td.reshape(-1)  # [N]
        n = flat.batch_size[0]
        if self.num_chunks is not None:
            chunks = flat.split(max(1, -(-n // self.num_chunks)))
        else:
            chunks = flat.split(self.value_chunk_size)
        value = torch.cat([self._net_value(chunk) for chunk in chunks], 0)  # [N, 1]
        return value.reshape(*td.batch_size, *value.shape[1:])

    def _net_value(self, td: TensorDictBase) -> torch.Tensor:
        out = self.value_network(td)
        value = out.get(self.tensor_keys.value, None)
        if value is None:
            raise KeyError(
                f"{type(self).__name__}: the value network did not write "
                f"{self.tensor_keys.value!r} (it wrote {list(out.keys(True, True))}); set "
                f"the key it writes with set_keys(value=<its out key>)."
            )
        return value

    def _shifted_values(self, td: TensorDictBase):
        """One value-network call over ``[s_0, ..., s_{T-1}]`` with, after every episode
        end (and the batch's last step), that step's true next observation inserted."""
        in_keys = self.value_network.in_keys
        keys = self.tensor_keys
        done = td.get(_next(keys.done)).bool()
        terminated = td.get(_next(keys.terminated), None)
        if terminated is not None:
            done = done | terminated.bool()
        done = done.clone()
        done[..., -1, :] = True
        done = done.reshape(-1)  # [N], N = prod(batch)
        n = done.numel()
        # position of root step i in the interleaved sequence: i + number of ends before it
        ends_before = done.long().cumsum(0) - done.long()  # [N]
        pos = torch.arange(n, device=done.device) + ends_before  # [N]
        n_ends = int(done.sum())  # one host sync per batch
        source = torch.empty(n + n_ends, dtype=torch.long, device=done.device)  # [M]
        source[pos] = torch.arange(n, device=done.device)
        source[pos[done] + 1] = n + torch.arange(n_ends, device=done.device)
        root = td.select(*in_keys).reshape(-1)  # [N]
        last = self._next_inputs(td).reshape(-1)[done]  # [n_ends]
        values = self._call_net(torch.cat([root, last], 0)[source])  # [M, 1]
        shape = (*td.batch_size, 1)
        return values[pos].reshape(shape), values[pos + 1].reshape(shape)


class TD0Estimator(ValueEstimatorBase):
    """One-step TD target ``r + gamma * (1 - terminated) * V(s')``; advantage = target - V(s).

    When the batch has a ``"steps_to_next_obs"`` entry ``k`` (``[*B, T, 1]``, written by
    :class:`~torchrl_lite.data.MultiStep`: ``r`` is then a sum of ``k`` discounted rewards
    and ``s'`` the state ``k`` steps later), the bootstrap is discounted by ``gamma ** k``,
    as TorchRL's estimators do: the exact n-step target.

    Args:
        gamma: discount in [0, 1] (0: the reward alone, for bandits; a number or a tensor
            broadcastable to ``[*B, T, 1]``).
        value_network: TensorDict module writing ``"state_value"``, or None.
        shifted, differentiable, skip_existing, average_rewards: see
            :class:`ValueEstimatorBase`.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> critic = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> batch = TensorDict({"observation": torch.randn(4, 3), "next": {
        ...     "observation": torch.randn(4, 3), "reward": torch.randn(4, 1),
        ...     "done": torch.zeros(4, 1, dtype=torch.bool),
        ...     "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> TD0Estimator(gamma=0.99, value_network=critic)(batch)["advantage"].shape
        torch.Size([4, 1])
    """

    _multi_step = False  # one-step targets: any batch of transitions will do

    def __init__(self, *, gamma, value_network, **kwargs):
        super().__init__(value_network=value_network, **kwargs)
        # gamma = 0 is allowed: the target is then the reward alone (contextual bandits)
        self.gamma = _check_factor(type(self).__name__, "gamma", gamma, low_open=False)

    def _discount(self, steps):
        return self.gamma if steps is None else self.gamma ** steps.to(torch.float32)

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        if isinstance(gamma, float) and gamma == 0.0:  # no bootstrap: the reward alone
            target = reward.clone()
        else:
            target = td0_return_estimate(gamma, next_value, reward, terminated, done=done)
        return (None if value is None else target - value), target


class TD1Estimator(ValueEstimatorBase):
    """Discounted return to the episode end, bootstrapped there unless terminated.

    Args:
        gamma: discount in (0, 1] (a number, or a tensor broadcastable to ``[*B, T, 1]``).
        value_network: TensorDict module writing ``"state_value"``, or None.
        vectorized: use the loop-free functions (default) or the plain loops.
        shifted, differentiable, skip_existing, average_rewards: see
            :class:`ValueEstimatorBase`.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> critic = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> batch = TensorDict({"observation": torch.randn(4, 3), "next": {
        ...     "observation": torch.randn(4, 3), "reward": torch.randn(4, 1),
        ...     "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> TD1Estimator(gamma=0.99, value_network=critic).value_estimate(batch).shape
        torch.Size([4, 1])
    """

    def __init__(self, *, gamma, value_network, vectorized: bool = True, **kwargs):
        super().__init__(value_network=value_network, **kwargs)
        self.gamma = _check_factor(type(self).__name__, "gamma", gamma, low_open=True)
        self.vectorized = vectorized

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        fn = vec_td1_return_estimate if self.vectorized else td1_return_estimate
        target = fn(gamma, next_value, reward, done, terminated)
        return (None if value is None else target - value), target


class TDLambdaEstimator(ValueEstimatorBase):
    """TD(lambda) return as the target; advantage = target - V(s).

    Args:
        gamma: discount in (0, 1] (a number, or a tensor broadcastable to ``[*B, T, 1]``).
        lmbda: lambda in [0, 1] (a number, or a tensor broadcastable to ``[*B, T, 1]``).
        value_network: TensorDict module writing ``"state_value"``, or None.
        vectorized: use the loop-free functions (default) or the plain loops.
        shifted, differentiable, skip_existing, average_rewards: see
            :class:`ValueEstimatorBase`.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> critic = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> batch = TensorDict({"observation": torch.randn(2, 5, 3), "next": {
        ...     "observation": torch.randn(2, 5, 3), "reward": torch.randn(2, 5, 1),
        ...     "done": torch.zeros(2, 5, 1, dtype=torch.bool)}}, [2, 5])
        >>> TDLambdaEstimator(gamma=0.99, lmbda=0.95, value_network=critic)(batch)[
        ...     "value_target"].shape
        torch.Size([2, 5, 1])
    """

    def __init__(self, *, gamma, lmbda, value_network, vectorized: bool = True, **kwargs):
        super().__init__(value_network=value_network, **kwargs)
        self.gamma = _check_factor(type(self).__name__, "gamma", gamma, low_open=True)
        self.lmbda = _check_factor(type(self).__name__, "lmbda", lmbda, low_open=False)
        self.vectorized = vectorized

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        fn = vec_td_lambda_return_estimate if self.vectorized else td_lambda_return_estimate
        target = fn(gamma, self.lmbda, next_value, reward, done, terminated)
        return (None if value is None else target - value), target


class GAE(ValueEstimatorBase):
    """Generalized advantage estimate (https://arxiv.org/abs/1506.02438).

    Writes the advantage and ``value_target = advantage + V(s)`` (computed before any
    standardisation of the advantage).

    Args:
        gamma: discount in (0, 1] (a number, or a tensor broadcastable to ``[*B, T, 1]``).
        lmbda: lambda in [0, 1] (a number, or a tensor broadcastable to ``[*B, T, 1]``).
        value_network: TensorDict module writing ``"state_value"``, or None.
        average_gae: standardise the advantage over the batch (zero mean, unit std).
        vectorized: use the loop-free function (default) or the plain loop.
        shifted, differentiable, skip_existing, average_rewards: see
            :class:`ValueEstimatorBase`.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> critic = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> batch = TensorDict({"observation": torch.randn(2, 5, 3), "next": {
        ...     "observation": torch.randn(2, 5, 3), "reward": torch.randn(2, 5, 1),
        ...     "done": torch.zeros(2, 5, 1, dtype=torch.bool),
        ...     "terminated": torch.zeros(2, 5, 1, dtype=torch.bool)}}, [2, 5])
        >>> adv_fn = GAE(value_network=critic, average_gae=True, gamma=0.99, lmbda=0.95)
        >>> adv_fn(batch)["advantage"].shape
        torch.Size([2, 5, 1])
    """

    _target_needs_value = True

    def __init__(
        self,
        *,
        gamma,
        lmbda,
        value_network,
        average_gae: bool = False,
        vectorized: bool = True,
        **kwargs,
    ):
        super().__init__(value_network=value_network, **kwargs)
        self.gamma = _check_factor(type(self).__name__, "gamma", gamma, low_open=True)
        self.lmbda = _check_factor(type(self).__name__, "lmbda", lmbda, low_open=False)
        self.average_gae = average_gae
        self.vectorized = vectorized

    def _compute(self, gamma, value, next_value, reward, done, terminated):
        fn = (
            vec_generalized_advantage_estimate
            if self.vectorized
            else generalized_advantage_estimate
        )
        advantage, target = fn(gamma, self.lmbda, value, next_value, reward, done, terminated)
        if self.average_gae:
            advantage = _standardise(advantage, 1e-4)
        return advantage, target
