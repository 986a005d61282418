"""VecNorm: normalise observations with running (exponentially decayed) mean and std."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.transforms.transforms import Compose, Transform, _as_tuple, _norm_keys

__all__ = ["VecNorm"]


def _stat_key(key, name: str) -> tuple:
    key = _as_tuple(key)
    return (*key[:-1], f"{key[-1]}_{name}")


class VecNorm(Transform):
    """Normalise entries by a running mean and std, updated with every value seen.

    With decayed sums ``S = decay * S + sum(x)``, ``Q = decay * Q + sum(x**2)``,
    ``n = decay * n + count``: ``y = (x - S/n) / sqrt(max(Q/n - (S/n)**2, eps))``. The
    statistics live in a TensorDict; pass the same shared-memory one (see
    ``build_td_for_shared_vecnorm``) to the VecNorm of each worker process to share them.
    ``state_dict``/``load_state_dict`` save and restore them.

    Args:
        in_keys: entries to normalise (default ``["observation"]``).
        out_keys: where to write them (default: in place).
        shared_td: the statistics TensorDict to use (default: a new one).
        lock: a lock (e.g. ``multiprocessing.Lock()``) held while updating shared stats.
        decay: decay of the running sums (1.0: plain averages).
        eps: lower bound of the variance.

    Example:
        >>> t = VecNorm(in_keys=["observation"], decay=1.0)
        >>> _ = t(TensorDict({"observation": torch.tensor([[0.0], [2.0]])}, [2]))
        >>> t(TensorDict({"observation": torch.tensor([[1.0]])}, [1]))["observation"]
        tensor([[0.]])
    """

    def __init__(
        self,
        in_keys=None,
        out_keys=None,
        shared_td: TensorDict | None = None,
        lock=None,
        decay: float = 0.9999,
        eps: float = 1e-4,
    ):
        super().__init__(in_keys=[K.OBSERVATION] if in_keys is None else in_keys, out_keys=out_keys)
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay!r}")
        self.decay, self.eps, self.lock = decay, eps, lock
        self._td = shared_td
        self.frozen = False
        if shared_td is not None:
            for key in self.in_keys:
                for name in ("sum", "ssq", "count"):
                    if shared_td.get(_stat_key(key, name), None) is None:
                        raise KeyError(
                            f"VecNorm: shared_td has no {_stat_key(key, name)!r}; build it with VecNorm.build_td_for_shared_vecnorm(env, keys)."
                        )

    # -- statistics ------------------------------------------------------------------
    @staticmethod
    def _new_stats(shapes: dict, dtype=torch.float32, device=None) -> TensorDict:
        data = {}
        for key, shape in shapes.items():
            data[_stat_key(key, "sum")] = torch.zeros(shape, dtype=dtype, device=device)
            data[_stat_key(key, "ssq")] = torch.zeros(shape, dtype=dtype, device=device)
            data[_stat_key(key, "count")] = torch.zeros((), dtype=dtype, device=device)
        td = TensorDict({}, batch_size=[], device=device)
        for k, v in data.items():
            td.set(k, v)
        return td

    @classmethod
    def build_td_for_shared_vecnorm(cls, env, keys=None) -> TensorDict:
        """A shared-memory statistics TensorDict for ``keys`` (default ``["observation"]``) of ``env``."""
        keys = [K.OBSERVATION] if keys is None else _norm_keys(keys)
        nb = len(env.batch_size)
        shapes = {k: env.full_observation_spec[k].shape[nb:] for k in keys}
        return cls._new_stats(shapes, device=env.device).share_memory_()

    def _attach(self, specs):
        super()._attach(specs)
        nb = len(specs.batch_size)
        shapes = {k: specs.find(k)[1].shape[nb:] for k in self.in_keys}
        if self._td is None:
            self._td = self._new_stats(shapes, device=specs.device)
        for key, shape in shapes.items():
            have = self._td.get(_stat_key(key, "sum")).shape
            if have != shape:
                raise ValueError(
                    f"VecNorm: the statistics of {key!r} have shape {list(have)}, the env's entry has {list(shape)}"
                )

    def _update(self, key, x: torch.Tensor, batch_dims: int) -> None:
        td = self._td
        s, q, n = (
            td.get(_stat_key(key, "sum")),
            td.get(_stat_key(key, "ssq")),
            td.get(_stat_key(key, "count")),
        )
        x = x.to(s.dtype)
        dims = tuple(range(x.dim() - s.dim()))
        if dims:
            count = math.prod(x.shape[: len(dims)])
            xs, xq = x.sum(dims), x.pow(2).sum(dims)
        else:
            count, xs, xq = 1, x, x.pow(2)
        if self.lock is not None:
            self.lock.acquire()
        try:
            s.mul_(self.decay).add_(xs)
            q.mul_(self.decay).add_(xq)
            n.mul_(self.decay).add_(count)
        finally:
            if self.lock is not None:
                self.lock.release()

    def _loc_scale(self, key) -> tuple[torch.Tensor, torch.Tensor]:
        td = self._td
        s, q, n = (
            td.get(_stat_key(key, "sum")),
            td.get(_stat_key(key, "ssq")),
            td.get(_stat_key(key, "count")),
        )
        n = n.clamp_min(self.eps)
        mean = s / n
        std = (q / n - mean.pow(2)).clamp_min(self.eps).sqrt()
        return mean, std

    def _call(self, next_tensordict):
        for in_key, out_key in self._pairs:
            x = next_tensordict.get(in_key, None)
            if x is None:
                continue
            if self._td is None:  # outside an env: shapes from the first batch
                self._td = self._new_stats(
                    {
                        k: next_tensordict.get(k).shape[next_tensordict.batch_dims :]
                        for k in self.in_keys
                    },
                    device=x.device,
                )
            if not self.frozen:
                self._update(in_key, x, next_tensordict.batch_dims)
            mean, std = self._loc_scale(in_key)
            next_tensordict.set(out_key, (x - mean) / std)
        return next_tensordict

    def freeze(self) -> VecNorm:
        """Stop updating the statistics (evaluation)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNorm:
        self.frozen = False
        return self

    def to_observation_norm(self) -> Transform:
        """An ``ObservationNorm`` (a ``Compose`` of them for several keys) with the current stats."""
        from torchrl_lite.envs.transforms.observation import ObservationNorm

        if self._td is None:
            raise RuntimeError("VecNorm has no statistics yet.")
        norms = []
        for in_key, out_key in self._pairs:
            mean, std = self._loc_scale(in_key)
            norms.append(
                ObservationNorm(
                    loc=mean.clone(),
                    scale=std.clone(),
                    in_keys=[in_key],
                    out_keys=[out_key],
                    standard_normal=True,
                    eps=self.eps,
                )
            )
        return norms[0] if len(norms) == 1 else Compose(*norms)

    @property
    def loc(self):
        return None if self._td is None else {k: self._loc_scale(k)[0] for k in self.in_keys}

    @property
    def scale(self):
        return None if self._td is None else {k: self._loc_scale(k)[1] for k in self.in_keys}

    def _transform_leaf_spec(self, spec):
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.float32
        return Unbounded(spec.shape, device=spec.device, dtype=dtype)

    def _shared_state(self):
        return self._td

    def _use_shared_state(self, state) -> None:
        for key in self._td.keys(True, True) if self._td is not None else ():
            if state.get(key, None) is None or state.get(key).shape != self._td.get(key).shape:
                raise ValueError(f"VecNorm: the shared statistics do not match this env at {key!r}")
        self._td = state

    # -- saving --------------------------------------------------------------------------
    def get_extra_state(self):
        return {
            "stats": None if self._td is None else self._td.clone().to_dict(),
            "frozen": self.frozen,
        }

    def set_extra_state(self, state) -> None:
        stats = state.get("stats")
        self.frozen = state.get("frozen", False)
        if stats is None:
            return
        loaded = TensorDict(stats, batch_size=[])
        if self._td is None:
            self._td = loaded
        else:
            self._td.update_(loaded)  # in place: a shared TensorDict stays shared

    def _on_apply(self, fn):
        if self._td is not None and not self._td.is_shared():
            self._td = self._td.apply(fn)

    def extra_repr(self):
        return f"decay={self.decay}, eps={self.eps}, frozen={self.frozen}, " + super().extra_repr()
