"""Batch-shape transforms: ``BatchSizeTransform`` (an env's batch size) and
``RandomCropTensorDict`` (random sub-sequences of stored trajectories)."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite.data.tensor_specs import _size
from torchrl_lite.envs._module_like import _unbatched
from torchrl_lite.envs.transforms.transforms import Transform

__all__ = ["BatchSizeTransform", "RandomCropTensorDict"]


class BatchSizeTransform(Transform):
    """Give an env another batch size.

    Two uses, as in TorchRL:

    * ``batch_size=[n, ...]`` on an env that accepts any batch (``batch_locked=False``,
      e.g. the stateless ``PendulumEnv``): every reset asks the env for that batch (a
      reset without a TensorDict gets one of that batch size), so a rollout or a
      collector runs ``n`` envs at once. The specs are the env's, expanded to it.
    * ``reshape_fn`` (with the resulting ``batch_size``): outputs are reshaped by
      ``reshape_fn`` (e.g. ``lambda td: td.squeeze(0)``) and actions back to the env's
      batch before each step.

    Args:
        batch_size: the new batch size (default with ``reshape_fn``: what it gives).
        reshape_fn: a TensorDict -> TensorDict reshape of the env's outputs (optional).
            Called on a TensorDict (e.g. inside a ``TensorDictSequential`` policy), the
            transform applies it.
        reset_func: called as ``reset_func(tensordict)`` instead of the default (a
            TensorDict of the new batch size) to build the reset's input when the reset
            gets none (optional).
        env_kwarg: accepted for TorchRL compatibility; passing the batch size to
            ``_reset`` as a keyword is not supported (``True`` raises).

    Example:
        >>> from torchrl_lite.envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[4]))
        >>> env.rollout(3).batch_size
        torch.Size([4, 3])
    """

    def __init__(self, *, batch_size=None, reshape_fn=None, reset_func=None, env_kwarg=False):
        super().__init__()
        if batch_size is None and reshape_fn is None:
            raise TypeError(
                "BatchSizeTransform needs batch_size (the env's new batch size) or reshape_fn"
            )
        if env_kwarg:
            raise ValueError(
                "BatchSizeTransform(env_kwarg=True) is not supported: the env's reset reads "
                "its batch size from the reset TensorDict here."
            )
        if reshape_fn is not None and not callable(reshape_fn):
            raise TypeError(f"BatchSizeTransform: reshape_fn must be callable, got {reshape_fn!r}")
        self.batch_size = None if batch_size is None else _size(batch_size)  # None: reshape_fn's
        self.reshape_fn, self.reset_func = reshape_fn, reset_func
        self._parent_batch = None
        self._device = None
        self._checked = False

    def _attach(self, specs):
        if self.reshape_fn is not None:
            out = self.reshape_fn(TensorDict(batch_size=specs.batch_size))
            if self.batch_size is None:
                self.batch_size = out.batch_size
            if out.batch_size != self.batch_size:
                raise ValueError(
                    f"BatchSizeTransform: reshape_fn turns batch {list(specs.batch_size)} into "
                    f"{list(out.batch_size)}, but batch_size={list(self.batch_size)}"
                )
        self._parent_batch, self._device = specs.batch_size, specs.device

    def _check_env(self) -> None:
        """Once, at the first reset: a new batch size needs an env that takes any batch."""
        env = self.container
        base = None if env is None else env.base_env
        if self.reshape_fn is None and getattr(base, "batch_locked", False):
            raise ValueError(
                f"BatchSizeTransform(batch_size=...) needs an env that accepts any batch "
                f"(batch_locked=False, e.g. PendulumEnv), got {base!r}; for a batched env, "
                "pass reshape_fn (e.g. lambda td: td.squeeze(0))."
            )
        self._checked = True

    def _transform_specs(self, specs):
        for name in ("observation", "reward", "done", "action", "state"):
            composite = _unbatched(getattr(specs, name), specs.batch_size)
            setattr(specs, name, composite.expand(*self.batch_size))
        specs.batch_size = self.batch_size
        return specs

    def _reset_env_preprocess(self, tensordict):
        if not self._checked:
            self._check_env()
        if tensordict is None:
            if self.reset_func is not None:
                return self.reset_func(tensordict)
            if self.reshape_fn is None:
                return TensorDict(batch_size=self.batch_size, device=self._device)
            return None
        if self.reshape_fn is not None:
            return tensordict.reshape(self._parent_batch)
        return tensordict

    def _call(self, next_tensordict):
        if self.reshape_fn is not None:
            return self.reshape_fn(next_tensordict)
        return next_tensordict

    def _inv_call(self, tensordict):
        if self.reshape_fn is not None:
            return tensordict.reshape(self._parent_batch)
        return tensordict

    def _has_inverse(self) -> bool:
        return self.reshape_fn is not None

    def extra_repr(self) -> str:
        size = None if self.batch_size is None else list(self.batch_size)
        return f"batch_size={size}, reshape_fn={self.reshape_fn}"


class RandomCropTensorDict(Transform):
    """Crop a random sub-sequence of ``sub_seq_len`` steps from each trajectory of a batch.

    For replay buffers of whole trajectories (``rb.append_transform(...)``): a sample of
    shape ``[B, T]`` becomes ``[B, sub_seq_len]``, each row starting at its own uniform
    offset. With ``mask_key`` (e.g. ``("collector", "mask")`` of ``split_trajectories``),
    each row's start is drawn inside its valid (True) steps.

    Args:
        sub_seq_len: length of the crops.
        sample_dim: the time dim of the batch (default ``-1``). A negative dim counts from
            the end and suits samples of any batch rank; a non-negative one is absolute.
        mask_key: the bool entry marking the valid steps of each row (optional).

    Example:
        >>> td = TensorDict({"t": torch.arange(10).expand(3, 10)}, [3, 10])
        >>> out = RandomCropTensorDict(4)(td)
        >>> out.batch_size, bool((out["t"].diff(dim=-1) == 1).all())
        (torch.Size([3, 4]), True)
    """

    def __init__(self, sub_seq_len: int, sample_dim: int = -1, mask_key=None):
        super().__init__()
        if isinstance(sub_seq_len, bool) or not isinstance(sub_seq_len, int) or sub_seq_len < 1:
            raise ValueError(
                f"RandomCropTensorDict: sub_seq_len must be an int >= 1, got {sub_seq_len!r}"
            )
        if isinstance(sample_dim, bool) or not isinstance(sample_dim, int):
            raise ValueError(f"RandomCropTensorDict: sample_dim must be an int, got {sample_dim!r}")
        self.sub_seq_len, self.sample_dim, self.mask_key = sub_seq_len, sample_dim, mask_key

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        ndim = tensordict.batch_dims
        dim = self.sample_dim if self.sample_dim >= 0 else ndim + self.sample_dim
        if not 0 <= dim < ndim:
            raise ValueError(
                f"RandomCropTensorDict: sample_dim={self.sample_dim} is out of range for a "
                f"batch of size {list(tensordict.batch_size)}"
            )
        td = tensordict if dim == tensordict.batch_dims - 1 else tensordict.transpose(dim, -1)
        lead, steps = td.batch_size[:-1], td.batch_size[-1]
        flat = td.reshape(-1, steps)  # [N, T]
        n, length = flat.batch_size[0], self.sub_seq_len
        if self.mask_key is not None:
            mask = flat.get(self.mask_key, None)
            if mask is None:
                raise KeyError(f"RandomCropTensorDict: no mask entry {self.mask_key!r}")
            valid = mask.reshape(n, steps).sum(-1)  # [N] valid steps (from the start)
        else:
            valid = torch.full((n,), steps, dtype=torch.long)
        if bool((valid < length).any()):
            raise ValueError(
                f"RandomCropTensorDict: rows have {valid.min().item()} valid steps, fewer than "
                f"sub_seq_len={length}; use shorter crops or longer trajectories."
            )
        start = (torch.rand(n) * (valid - length + 1).to(torch.float)).floor().long()  # [N]
        cols = start.unsqueeze(-1) + torch.arange(length)  # [N, L]
        rows = torch.arange(n).unsqueeze(-1).expand(n, length)  # [N, L]
        out = flat[rows, cols].reshape(*lead, length)
        return out if dim == tensordict.batch_dims - 1 else out.transpose(dim, -1)

    def _call(self, next_tensordict):
        return self.forward(next_tensordict)

    def _attach(self, specs) -> None:
        raise TypeError(
            "RandomCropTensorDict transforms stored trajectories (a replay buffer's samples), "
            "not an env; use rb.append_transform(RandomCropTensorDict(...))."
        )

    def extra_repr(self) -> str:
        return f"sub_seq_len={self.sub_seq_len}, sample_dim={self.sample_dim}, mask_key={self.mask_key}"
