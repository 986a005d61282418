"""``_BatchedEnv``: what ``SerialEnv`` and ``ParallelEnv`` share (see ``serial.py``,
``parallel.py``)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import unravel_key

from torchrl_lite import _keys as K
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.batched.view import BatchedEnvView, normalize_index
from torchrl_lite.envs.common import EnvBase

_RESTARTS = ("reset", "roll out", "seed")  # the calls that start a closed batched env again


class _BatchedEnv(EnvBase):
    """Argument checks, specs and key layout shared by ``SerialEnv`` and ``ParallelEnv``.

    A subclass implements ``_start(factories) -> list[U.EnvInfo]`` (build the copies),
    ``_connect()`` (allocate buffers once the specs are known), ``_shutdown()``,
    ``_worker_attr(name, call)`` (an attribute of every copy, see ``__getattr__``) and
    ``_lazy_part()`` (its ``lazy.LazySerial``/``LazyParallel``), plus the three
    ``EnvBase`` hooks.

    Copies whose specs differ (multi-task) are found once, at construction: the env then
    holds its lazy part in ``_lazy`` (``lazy.py``), which its specs, buffers, steps and
    resets go through; ``_lazy`` is None for equal copies.

    As in TorchRL: an attribute the batched env lacks is looked up on the copies (a list,
    one value per copy; a method becomes a function calling it on every copy and
    returning the list of results), and an env closed with ``close()`` starts again
    (new copies from the same factories) at the next ``reset``, ``rollout``, ``set_seed``
    or ``start``.
    """

    def __init__(
        self, num_workers, create_env_fn, create_env_kwargs, device, spec_check, pin_memory=False
    ):
        cls_name = type(self).__name__
        factories = U.as_factories(cls_name, num_workers, create_env_fn, create_env_kwargs)
        self.num_workers = num_workers
        self.is_closed = False
        self._factories = factories
        # TorchRL's flag: one factory for every copy (a list of distinct ones is multi-task)
        self._single_task = callable(create_env_fn) or len({id(f) for f in create_env_fn}) == 1
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        self._lazy = None
        try:
            infos = self._start(factories)
            U.check_batch_sizes(cls_name, infos)
            if U.specs_differ(infos):  # copies of different specs: lazy stacks (lazy.py)
                self._lazy = self._lazy_part()
            info = self._info = infos[0]
            super().__init__(
                device=device if device is not None else info.device,
                batch_size=(num_workers, *info.batch_size),
                spec_check=spec_check,
            )
            self._set_specs(infos)
            self._connect()
        except BaseException:
            self._shutdown()
            raise

    def _lazy_part(self):
        raise NotImplementedError

    def _set_specs(self, infos: list[U.EnvInfo]) -> None:
        if self._lazy is not None:
            self._lazy.set_specs(infos)
            return
        n, info = self.num_workers, infos[0]
        self._env_batch = info.batch_size
        self._env_device = info.device
        self._env_name = info.name
        for name in U.SPEC_NAMES:
            spec = info.specs[name]
            setattr(self, name, spec.expand(n, *spec.shape).to(self.device))
        self._single_specs = info.specs
        obs, state = info.specs["full_observation_spec"], info.specs["full_state_spec"]
        done = info.specs["full_done_spec"]
        # what step reads, what step writes, what reset writes
        self._input_keys = U.leaf_keys(state, info.specs["full_action_spec"])
        self._step_keys = U.leaf_keys(obs, info.specs["full_reward_spec"], done)
        self._reset_keys = U.leaf_keys(obs, done, state)
        self._state_keys = set(state.keys(True, True))
        # what the policy may have written as the next state (see _next_inputs)
        self._state_leaves = U.leaf_keys(state)
        self._next_state_keys = [unravel_key((K.NEXT, k)) for k in self._state_leaves]

    def _next_inputs(self, tensordict: TensorDictBase) -> list:
        """Per state key of the copies, the step input's ``("next", key)`` (what the
        policy wrote as the next state, e.g. a recurrent policy's hidden state) or None.

        As in TorchRL, the copies receive these with the action and the state: a
        ``TensorDictPrimer`` inside each copy then carries the policy's next state, as
        one outside the batched env would. Empty when the copies have no state.
        """
        if not self._state_leaves:
            return []
        nxt = tensordict.get(K.NEXT, None)
        if nxt is None:
            return [None] * len(self._state_leaves)
        return [nxt.get(key, None) for key in self._state_leaves]

    def _buffers(self, keys: list, specs: list, device) -> dict:
        """Zero tensors ``[n, *env_batch, ...]`` for ``keys`` (looked up in ``specs``)."""
        out = {}
        for key in keys:
            spec = next(s[key] for s in specs if key in s)
            out[key] = spec.zero((self.num_workers,)).to(device)
        return out

    def _check_usable(self) -> None:
        if self.is_closed:
            reason = getattr(self, "_failure", None)
            extra = f" It was shut down after a failure: {reason}" if reason else ""
            raise RuntimeError(
                f"{type(self).__name__} is closed; create a new one to keep going.{extra}"
            )

    def _export(self, tensor: torch.Tensor) -> torch.Tensor:
        """A copy of a buffer on ``self.device`` (never the buffer itself); in page-locked
        memory with ``pin_memory=True`` (and CUDA present)."""
        if self.pin_memory and self.device.type == "cpu":
            return torch.empty_like(tensor, pin_memory=True).copy_(tensor)
        return tensor.to(self.device, copy=True)

    # -- TorchRL's conveniences: restart after close(), attributes of the copies ---------
    def start(self) -> None:
        """Start the copies again after ``close()`` (no-op while they run); ``reset``,
        ``rollout`` and ``set_seed`` do it too."""
        self._check_open("reset")

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        self._check_open("seed")
        return super().set_seed(seed, static_seed)

    def _check_open(self, what: str) -> None:
        if self.is_closed and what in _RESTARTS and getattr(self, "_failure", None) is None:
            self._restart()
        super()._check_open(what)

    def _restart(self) -> None:
        """Start new copies from the same factories (after ``close()``); the specs must be
        the same as before."""
        self._reset_workers_state()
        try:
            infos = self._start(self._factories)
            self._check_restart_specs(infos)
            self._connect()
        except BaseException:
            self._shutdown()
            raise
        self.is_closed, self._is_reset = False, False
        self._checked_action = self.spec_check == "never"

    def _check_restart_specs(self, infos: list[U.EnvInfo]) -> None:
        if self._lazy is not None:
            self._lazy.check_restart_specs(infos)
        else:
            U.check_same_specs(type(self).__name__, [self._info, *infos])

    # -- EnvBase's methods, copy by copy when the copies' specs differ ------------------
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        if self._lazy is not None:
            return self._lazy.rand_action(tensordict)
        return super().rand_action(tensordict)

    def _check_action(self, tensordict: TensorDictBase) -> None:
        if self._lazy is not None:
            self._lazy.check_action(tensordict)
        else:
            super()._check_action(tensordict)

    def fake_tensordict(self) -> TensorDictBase:
        if self._lazy is not None:
            return self._lazy.fake_tensordict()
        return super().fake_tensordict()

    def _reset_workers_state(self) -> None:
        """Forget the closed copies (subclasses reset their containers)."""

    def __getattr__(self, name: str):
        # only attributes the batched env itself lacks get here
        if name.startswith("_") or "_factories" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if self.is_closed:
            raise AttributeError(
                f"{type(self).__name__} is closed: cannot read {name!r} from its copies"
            )
        return self._worker_attr(name)

    def __getitem__(self, item):
        """A live view of some copies (``env[1:]``, ``env[0]``, ``env[np.array([0, 2])]``):
        see ``view.py``."""
        self._check_usable()
        if self._lazy is not None:
            raise NotImplementedError(
                f"{type(self).__name__}: copies of different specs (multi-task) cannot be "
                "indexed; build a batched env over the copies you need instead."
            )
        return BatchedEnvView(self, normalize_index(item, self.num_workers))

    def close(self, *, raise_if_closed: bool = False) -> None:
        """Close every copy (``ParallelEnv``: and join the worker processes); its indexed
        views become unusable. Closing a closed env does nothing, or raises
        ``RuntimeError`` with ``raise_if_closed=True`` (TorchRL's default)."""
        if not self.is_closed:
            self._shutdown()
        super().close(raise_if_closed=raise_if_closed)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"env={getattr(self, '_env_name', None)}, "
            f"batch_size={list(self.batch_size)}, device={self.device})"
        )
