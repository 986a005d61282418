"""Trainer helpers: means of logged values kept on device, and checkpointable state of
arbitrary objects."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase

__all__ = ["MetricAccumulator"]


class MetricAccumulator:
    """Means of the values logged since the last :meth:`read`, with no host sync until then.

    ``add_losses`` sums the scalar float entries of each loss TensorDict (one
    ``_foreach_add_`` per step); ``add`` sums other values (tensors stay on their device).
    NaN values are left out of the means, so a value that is undefined at some steps
    (e.g. the return when no episode ended) is averaged over the steps that define it.
    ``read`` returns python floats with one host sync and starts over.

    Example:
        >>> from tensordict import TensorDict
        >>> acc = MetricAccumulator()
        >>> acc.add_losses(TensorDict(loss_a=torch.tensor(1.0)))
        >>> acc.add_losses(TensorDict(loss_a=torch.tensor(3.0)))
        >>> acc.add({"reward": torch.tensor(float("nan"))})
        >>> acc.read()
        {'loss_a': 2.0}
    """

    def __init__(self):
        self.sums: dict[str, torch.Tensor | float] = {}
        self.counts: dict[str, torch.Tensor | float] = {}
        self.pbar_keys: set[str] = set()
        self._loss_keys: list[str] | None = None
        self._loss_sums: list[torch.Tensor] = []
        self._loss_steps = 0

    def add_losses(self, losses) -> None:
        """Add the detached scalar float entries of a loss TensorDict."""
        if not isinstance(losses, TensorDictBase):
            return
        keys = [k for k, v in losses.items() if _is_scalar(v)]
        values = [losses.get(k).detach() for k in keys]
        if keys != self._loss_keys:
            self._fold_losses()
            self._loss_keys, self._loss_sums = keys, [v.float().clone() for v in values]
        elif values:
            torch._foreach_add_(self._loss_sums, values)
        self._loss_steps += 1

    def add(self, values: dict, log_pbar: bool = False) -> None:
        """Add ``{name: tensor or number}``; ``log_pbar`` marks them for the progress bar."""
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach().reshape(()).float()
                valid = ~torch.isnan(value)
                value = torch.where(valid, value, 0.0)
            else:
                valid = not math.isnan(value)
                value = float(value) if valid else 0.0
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0.0) + valid
            if log_pbar:
                self.pbar_keys.add(key)

    def read(self) -> dict[str, float]:
        """The means since the last read (one host sync); names with no valid value are
        left out. Starts over."""
        self._fold_losses()
        sums, counts = self.sums, self.counts
        self.sums, self.counts = {}, {}
        means = {k: sums[k] / counts[k] for k in sums}
        keys = [k for k, v in means.items() if isinstance(v, torch.Tensor)]
        out = {k: float(v) for k, v in means.items() if not isinstance(v, torch.Tensor)}
        if keys:
            device = means[keys[0]].device
            stacked = torch.stack([means[k].double().to(device) for k in keys])
            out.update(zip(keys, stacked.tolist()))  # the one host sync
        return {k: v for k, v in out.items() if not math.isnan(v)}

    def clear(self) -> None:
        """Drop everything accumulated (nothing reads it)."""
        self.sums, self.counts = {}, {}
        self._loss_keys, self._loss_sums, self._loss_steps = None, [], 0

    def _fold_losses(self) -> None:
        if self._loss_keys and self._loss_steps:
            self.add({k: s / self._loss_steps for k, s in zip(self._loss_keys, self._loss_sums)})
        self._loss_keys, self._loss_sums, self._loss_steps = None, [], 0

    def state_dict(self) -> dict:
        return {
            "sums": dict(self.sums),
            "counts": dict(self.counts),
            "losses": (self._loss_keys, [s.clone() for s in self._loss_sums], self._loss_steps),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.sums, self.counts = dict(state_dict["sums"]), dict(state_dict["counts"])
        keys, sums, self._loss_steps = state_dict["losses"]
        self._loss_keys = None if keys is None else list(keys)
        self._loss_sums = [s.clone() for s in sums]


def _is_scalar(value) -> bool:
    return isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point()


def module_state(obj) -> dict | None:
    """``obj.state_dict()``, or None if it has none (a plain function as loss)."""
    state_dict = getattr(obj, "state_dict", None)
    return state_dict() if callable(state_dict) else None


def object_state(obj) -> dict:
    """``obj.state_dict()``, or its plain counters (ints, floats, bools) if it has none,
    e.g. ``HardUpdate``'s step counter."""
    state_dict = getattr(obj, "state_dict", None)
    if callable(state_dict):
        return {"state_dict": state_dict()}
    attrs = getattr(obj, "__dict__", {})
    return {"attrs": {k: v for k, v in attrs.items() if type(v) in (int, float, bool)}}


def load_object_state(obj, state: dict) -> None:
    """Restore :func:`object_state`'s output."""
    if "state_dict" in state:
        obj.load_state_dict(state["state_dict"])
    else:
        for key, value in state["attrs"].items():
            setattr(obj, key, value)
