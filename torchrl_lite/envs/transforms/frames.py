"""Transforms over the last frames of an episode: CatFrames, TimeMaxPool.

Inside an env they keep the last frames of each sub-env and restart them on reset (only
the sub-envs being reset). On a stored ``[*B, T]`` batch, ``forward`` computes the same
result from the time dim, finding episode starts from ``"is_init"`` and
``("next", "done")`` (a step follows a done step: a new episode).
"""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms.transforms import Transform, _as_tuple, _reset_mask, map_leaf_spec

__all__ = ["CatFrames", "TimeMaxPool"]


def episode_starts(tensordict) -> torch.Tensor:
    """``[*B, T]`` long: the time index where the episode of each step began."""
    batch = tensordict.batch_size
    first = torch.zeros(batch, dtype=torch.bool, device=tensordict.device)
    first[..., 0] = True
    is_init = tensordict.get(K.IS_INIT, None)
    if is_init is not None:
        first |= is_init.reshape(batch).to(first.device)
    done = tensordict.get((K.NEXT, K.DONE), None)
    if done is not None:
        first[..., 1:] |= done.reshape(batch)[..., :-1].to(first.device)
    index = torch.arange(batch[-1], device=first.device).expand(batch)
    return torch.where(first, index, torch.zeros_like(index)).cummax(-1).values


def time_windows(
    frames: torch.Tensor, starts: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The last ``n`` frames of each step within its episode, oldest first.

    Args:
        frames: ``[*B, T, *F]``.
        starts: ``[*B, T]`` episode start of each step (from ``episode_starts``).
        n: window length.

    Returns:
        ``[*B, T, n, *F]`` windows, padded with the episode's first frame, and the
        ``[*B, T, n]`` bool mask of padded slots.
    """
    batch = starts.shape
    steps = batch[-1]
    feat = frames.shape[len(batch) :]
    flat = frames.reshape(-1, steps, *feat)  # [M, T, *F]
    flat_starts = starts.reshape(-1, steps)  # [M, T]
    t = torch.arange(steps, device=frames.device)
    wanted = t[:, None] + torch.arange(-(n - 1), 1, device=frames.device)[None]  # [T, n]
    padded = wanted[None] < flat_starts[..., None]  # [M, T, n]
    index = torch.maximum(wanted[None], flat_starts[..., None])  # [M, T, n]
    rows = torch.arange(flat.shape[0], device=frames.device)[:, None, None]
    windows = flat[rows, index]  # [M, T, n, *F]
    return windows.reshape(*batch, n, *feat), padded.reshape(*batch, n)


class CatFrames(Transform):
    """Concatenate the last ``N`` frames along ``dim``, restarting at each episode.

    At a reset the stack is the first frame repeated (``padding="same"``) or
    ``padding_value`` frames then the first frame (``"constant"``). On a stored
    ``[*B, T]`` batch ``forward`` stacks along time with the same padding and also fills
    ``("next", out_key)`` when ``("next", in_key)`` is present.

    Args:
        N: number of frames.
        dim: the dim to concatenate along (negative, e.g. ``-3`` for ``[C, H, W]``).
        in_keys: the frame entries (default ``["pixels"]``).
        out_keys: where to write the stacks (default: in place).
        padding: ``"same"`` or ``"constant"``.
        padding_value: the value of padded frames with ``padding="constant"``.

    Example:
        >>> t = CatFrames(N=2, dim=-1, in_keys=["observation"])
        >>> td = TensorDict({"observation": torch.tensor([[1.0], [2.0], [3.0]]),
        ...     ("next", "done"): torch.tensor([[False], [True], [False]])}, [3])
        >>> t(td)["observation"]
        tensor([[1., 1.],
                [1., 2.],
                [3., 3.]])
    """

    def __init__(
        self,
        N: int,
        dim: int,
        in_keys=None,
        out_keys=None,
        padding: str = "same",
        padding_value: float = 0.0,
    ):
        super().__init__(in_keys=[K.PIXELS] if in_keys is None else in_keys, out_keys=out_keys)
        if isinstance(N, bool) or not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames: N must be an int >= 1, got {N!r}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim >= 0:
            raise ValueError(
                f"CatFrames: dim must be a negative int (counted from the last dim), got {dim!r}"
            )
        if padding not in ("same", "constant"):
            raise ValueError(f"CatFrames: padding must be 'same' or 'constant', got {padding!r}")
        self.N, self.dim, self.padding, self.padding_value = N, dim, padding, padding_value
        self._stacks: dict = {}

    # -- inside an env -----------------------------------------------------------------
    def _first_stack(self, frame: torch.Tensor) -> torch.Tensor:
        if self.padding == "same":
            return torch.cat([frame] * self.N, self.dim)
        pad = torch.full_like(frame, self.padding_value)
        return torch.cat([pad] * (self.N - 1) + [frame], self.dim)

    def _reset(self, tensordict, tensordict_reset):
        mask = _reset_mask(tensordict, tensordict_reset.batch_size)
        for in_key, out_key in self._pairs:
            frame = tensordict_reset.get(in_key, None)
            if frame is None:
                continue
            stack = self._first_stack(frame)
            old = self._stacks.get(out_key)
            if mask is not None and old is not None and old.shape == stack.shape:
                stack = torch.where(
                    mask.reshape(*mask.shape, *([1] * (stack.dim() - mask.dim()))), stack, old
                )
            self._stacks[out_key] = stack
            tensordict_reset.set(out_key, stack)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        dim = self.dim
        for in_key, out_key in self._pairs:
            frame = next_tensordict.get(in_key)
            old = self._stacks.get(out_key)
            if old is None:
                raise RuntimeError("CatFrames: the env must be reset before it steps.")
            size = frame.shape[dim]
            stack = torch.cat([old.narrow(dim, size, old.shape[dim] - size), frame], dim)
            self._stacks[out_key] = stack
            next_tensordict.set(out_key, stack)
        return next_tensordict

    def get_extra_state(self) -> dict:
        """The running frame stacks: a checkpointed env continues with the same stacks."""
        return {key: stack.clone() for key, stack in self._stacks.items()}

    def set_extra_state(self, state: dict) -> None:
        self._stacks = {key: stack.clone() for key, stack in state.items()}

    # -- on a stored batch ---------------------------------------------------------------
    def forward(self, tensordict):
        if tensordict.batch_dims < 1:
            raise ValueError(
                "CatFrames.forward needs a time dim: a TensorDict of batch size [..., T]."
            )
        self._check_present(tensordict, self._pairs)
        starts = episode_starts(tensordict)
        derived = {(K.NEXT, *_as_tuple(k)) for k in self.in_keys}
        for in_key, out_key in self._pairs:
            if _as_tuple(in_key) in derived:
                continue  # filled from the root entry below
            stack = self._stack_batch(tensordict.get(in_key), starts)
            next_frames = tensordict.get((K.NEXT, *_as_tuple(in_key)), None)
            tensordict.set(out_key, stack)
            if next_frames is not None:
                size = next_frames.shape[self.dim]
                rest = stack.narrow(self.dim, size, stack.shape[self.dim] - size)
                tensordict.set(
                    (K.NEXT, *_as_tuple(out_key)), torch.cat([rest, next_frames], self.dim)
                )
        return tensordict

    _call = forward

    def _stack_batch(self, frames: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        windows, padded = time_windows(frames, starts, self.N)  # [*B, T, N, *F]
        nf = frames.dim() - starts.dim()
        if self.padding == "constant":
            fill = torch.as_tensor(self.padding_value, dtype=windows.dtype, device=windows.device)
            windows = torch.where(padded.reshape(*padded.shape, *([1] * nf)), fill, windows)
        axis = starts.dim()  # the N axis
        windows = windows.movedim(axis, axis + nf + self.dim)
        return windows.flatten(axis + nf + self.dim, axis + nf + self.dim + 1)

    # -- specs -------------------------------------------------------------------------
    def _transform_leaf_spec(self, spec):
        out = map_leaf_spec(spec, lambda x: torch.cat([x] * self.N, self.dim))
        if self.padding == "constant" and hasattr(out, "low"):
            value = torch.as_tensor(self.padding_value, dtype=out.dtype)
            out = type(out)(
                out.low.clamp(max=value),
                out.high.clamp(min=value),
                out.shape,
                device=out.device,
                dtype=out.dtype,
            )
        return out

    def _attach(self, specs):
        super()._attach(specs)
        for key in self.in_keys:
            shape = specs.find(key)[1].shape[len(specs.batch_size) :]
            if -self.dim > len(shape):
                raise ValueError(
                    f"CatFrames: dim {self.dim} is out of range for {key!r} of shape {list(shape)}"
                )

    def extra_repr(self):
        return f"N={self.N}, dim={self.dim}, padding={self.padding!r}, " + super().extra_repr()


class TimeMaxPool(Transform):
    """The elementwise max of the last ``T`` observations of the episode.

    At a reset the window holds only the first observation (so the output is that
    observation); on a stored ``[*B, T]`` batch ``forward`` computes the same from the
    time dim.

    Args:
        in_keys: entries to pool (default ``["observation"]``).
        out_keys: where to write them (default: in place).
        T: the window length.

    Example:
        >>> t = TimeMaxPool(in_keys=["observation"], T=2)
        >>> td = TensorDict({"observation": torch.tensor([[1.0], [3.0], [2.0]])}, [3])
        >>> t(td)["observation"].flatten().tolist()
        [1.0, 3.0, 3.0]
    """

    def __init__(self, in_keys=None, out_keys=None, T: int = 1):
        super().__init__(in_keys=[K.OBSERVATION] if in_keys is None else in_keys, out_keys=out_keys)
        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise ValueError(f"TimeMaxPool: T must be an int >= 1, got {T!r}")
        self.T = T
        self._windows: dict = {}

    def _reset(self, tensordict, tensordict_reset):
        mask = _reset_mask(tensordict, tensordict_reset.batch_size)
        for in_key, out_key in self._pairs:
            frame = tensordict_reset.get(in_key, None)
            if frame is None:
                continue
            window = frame.unsqueeze(0).expand(self.T, *frame.shape)  # [T, *B, *F]
            old = self._windows.get(out_key)
            if mask is not None and old is not None and old.shape == window.shape:
                window = torch.where(
                    mask.reshape(1, *mask.shape, *([1] * (frame.dim() - mask.dim()))), window, old
                )
            self._windows[out_key] = window
            tensordict_reset.set(out_key, window.amax(0))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for in_key, out_key in self._pairs:
            frame = next_tensordict.get(in_key)
            old = self._windows.get(out_key)
            if old is None:
                raise RuntimeError("TimeMaxPool: the env must be reset before it steps.")
            window = torch.cat([old[1:], frame.unsqueeze(0)], 0)
            self._windows[out_key] = window
            next_tensordict.set(out_key, window.amax(0))
        return next_tensordict

    def get_extra_state(self) -> dict:
        """The running windows: a checkpointed env continues with the same windows."""
        return {key: window.clone() for key, window in self._windows.items()}

    def set_extra_state(self, state: dict) -> None:
        self._windows = {key: window.clone() for key, window in state.items()}

    def forward(self, tensordict):
        if tensordict.batch_dims < 1:
            raise ValueError(
                "TimeMaxPool.forward needs a time dim: a TensorDict of batch size [..., T]."
            )
        self._check_present(tensordict, self._pairs)
        starts = episode_starts(tensordict)
        for in_key, out_key in self._pairs:
            windows, _ = time_windows(tensordict.get(in_key), starts, self.T)
            tensordict.set(out_key, windows.amax(starts.dim()))
        return tensordict

    _call = forward

    def _transform_leaf_spec(self, spec):
        return spec.clone()

    def extra_repr(self):
        return f"T={self.T}, " + super().extra_repr()
