"""``TanhModule``: squash a deterministic policy's output into a box with ``tanh``."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase

from torchrl_lite.data.tensor_specs import Composite

__all__ = ["TanhModule"]


def _bound(value, default: float, spec, name: str) -> torch.Tensor:
    from_spec = None if spec is None else getattr(spec, name, None)
    if value is None:
        value = default if from_spec is None else from_spec
    elif from_spec is not None and bool((torch.as_tensor(value) != from_spec).any()):
        raise ValueError(
            f"TanhModule: {name}={value!r} does not match the spec's {name} {from_spec!r}; "
            f"pass only one of them."
        )
    return torch.as_tensor(value, dtype=torch.get_default_dtype()).clone()


class TanhModule(TensorDictModuleBase):
    """Map each ``in_key`` through ``low + (high - low) * (tanh(x) + 1) / 2`` to ``out_key``.

    The bounds come from ``low``/``high`` or from a ``Bounded`` spec (one spec for all
    out_keys, or a ``Composite`` keyed by them); without either the output is
    ``tanh(x)`` in ``[-1, 1]``.

    Args:
        in_keys: the unbounded entries read.
        out_keys: the entries written (default: ``in_keys``).
        spec: the output spec (a ``Bounded``, or a ``Composite`` of them).
        low: the lower bound (number or tensor), default the spec's or -1.
        high: the upper bound, default the spec's or 1.
        clamp: keep ``tanh(x)`` one float resolution inside ``(-1, 1)``.

    Example:
        >>> m = TanhModule(in_keys=["param"], out_keys=["action"], low=-2.0, high=2.0)
        >>> m(TensorDict({"param": torch.tensor([0.0, 100.0])}, []))["action"]
        tensor([0., 2.])
    """

    def __init__(self, in_keys, out_keys=None, *, spec=None, low=None, high=None, clamp=False):
        super().__init__()
        in_keys = [in_keys] if isinstance(in_keys, str) else list(in_keys)
        out_keys = (
            list(in_keys)
            if out_keys is None
            else ([out_keys] if isinstance(out_keys, str) else list(out_keys))
        )
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"TanhModule: in_keys {in_keys} and out_keys {out_keys} must have the same length."
            )
        self.in_keys, self.out_keys = in_keys, out_keys
        if not isinstance(spec, Composite):
            spec = Composite({key: spec for key in out_keys}) if spec is not None else None
        self.spec = spec
        self.clamp = clamp
        self._bounds = []
        for i, key in enumerate(out_keys):
            leaf = None if spec is None or key not in spec.keys(True) else spec[key]
            low_i = _bound(low, -1.0, leaf, "low")
            high_i = _bound(high, 1.0, leaf, "high")
            if bool((high_i < low_i).any()):
                raise ValueError(f"TanhModule: high {high_i} < low {low_i} for {key!r}.")
            self.register_buffer(f"_low_{i}", low_i)
            self.register_buffer(f"_high_{i}", high_i)
            trivial = bool((low_i == -1).all()) and bool((high_i == 1).all())
            self._bounds.append(not trivial)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for i, (in_key, out_key) in enumerate(zip(self.in_keys, self.out_keys)):
            y = torch.tanh(tensordict.get(in_key))
            if self.clamp:
                eps = torch.finfo(y.dtype).resolution
                y = y.clamp(-1 + eps, 1 - eps)
            if self._bounds[i]:
                low, high = getattr(self, f"_low_{i}"), getattr(self, f"_high_{i}")
                y = low + (high - low) * (y + 1) / 2
            tensordict.set(out_key, y)
        return tensordict
