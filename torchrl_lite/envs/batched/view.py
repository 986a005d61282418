"""Views of a batched env over some of its copies: ``env[1:]``, ``env[0]``, ``env[idx]``.

As in TorchRL, indexing a ``SerialEnv`` or ``ParallelEnv`` gives a live view: stepping or
resetting the view steps or resets those copies of the parent (the same envs, the same
worker processes), not detached copies. An int keeps a batch dim of one. The parent owns
the copies: closing a view only closes the view, closing the parent makes its views
unusable; a view keeps its parent alive. The parent does the work through three hooks,
``_step_copies``, ``_reset_copies`` and ``_seed_copies`` (see ``serial.py``, ``parallel.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.envs.batched import utils as U
from torchrl_lite.envs.common import EnvBase


def normalize_index(item, n: int) -> list[int]:
    """The copy positions ``item`` selects among ``n``: an int, a slice, or a 1-D int
    array or tensor (negative positions count from the end); never empty."""
    if isinstance(item, (bool, np.bool_)):
        raise TypeError(
            f"a batched env is indexed by ints, slices or int arrays, got the bool {item!r}; "
            "turn a mask into positions with mask.nonzero()."
        )
    if isinstance(item, slice):
        positions = list(range(n))[item]
    else:
        index = torch.as_tensor(item)
        if index.dtype == torch.bool or index.dtype.is_floating_point or index.dim() > 1:
            raise TypeError(
                f"a batched env is indexed by ints, slices or 1-D int arrays, got {item!r} "
                f"(dtype {index.dtype}, shape {list(index.shape)}); turn a bool mask into "
                "positions with mask.nonzero()."
            )
        positions = index.reshape(-1).tolist()
        bad = [p for p in positions if not -n <= p < n]
        if bad:
            raise IndexError(f"copy index {bad[0]} is out of range for a batched env of {n} copies")
        positions = [p % n for p in positions]
    if not positions:
        raise IndexError(f"{item!r} selects no copy of a batched env of {n} copies")
    return positions


class BatchedEnvView(EnvBase):
    """Some copies of a ``SerialEnv``/``ParallelEnv`` as a batched env of their own.

    Made by indexing the parent (``env[1:]``), not built directly.

    Example:
        >>> from torchrl_lite.envs import GymEnv, SerialEnv
        >>> env = SerialEnv(3, lambda: GymEnv("Pendulum-v1"))
        >>> view = env[1:]
        >>> view.batch_size, view.rand_step()["next", "reward"].shape
        (torch.Size([2]), torch.Size([2, 1]))
        >>> env.close()
    """

    def __init__(self, parent, indices: list[int]):
        self._parent = parent
        self.indices = list(indices)
        self.num_workers = len(self.indices)
        super().__init__(
            device=parent.device,
            batch_size=(self.num_workers, *parent._env_batch),
            spec_check=parent.spec_check,
        )
        for name in U.SPEC_NAMES:
            spec = parent._single_specs[name]
            setattr(self, name, spec.expand(self.num_workers, *spec.shape).to(self.device))
        self._is_reset = parent._is_reset  # the copies are where the parent left them

    def _check_usable(self) -> None:
        if self.is_closed:
            raise RuntimeError(
                f"this view of copies {self.indices} is closed; index the parent env again "
                "(env[...]) for a new view."
            )
        if self._parent.is_closed:
            raise RuntimeError(
                f"the {type(self._parent).__name__} that this view of copies {self.indices} "
                "belongs to is closed; its views cannot be used."
            )

    def _check_open(self, what: str) -> None:
        self._check_usable()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_usable()
        return self._parent._step_copies(self.indices, tensordict)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._check_usable()
        mask = tensordict.get(K.RESET, None) if tensordict is not None else None
        return self._parent._reset_copies(self.indices, mask)

    def _set_seed(self, seed: int) -> None:
        self._check_usable()
        self._parent._seed_copies(self.indices, seed)

    def __getitem__(self, item) -> BatchedEnvView:
        chosen = normalize_index(item, self.num_workers)
        return BatchedEnvView(self._parent, [self.indices[i] for i in chosen])

    def close(self, *, raise_if_closed: bool = False) -> None:
        """Close the view (the parent's copies keep running)."""
        if self.is_closed and raise_if_closed:
            raise RuntimeError("this batched env view is already closed")
        self.is_closed = True

    def __repr__(self) -> str:
        return (
            f"BatchedEnvView(copies={self.indices} of {self._parent!r}, "
            f"batch_size={list(self.batch_size)})"
        )
