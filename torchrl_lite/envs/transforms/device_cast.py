"""DeviceCastTransform: move a TensorDict's entries to another device.

Its main use is as a replay-buffer transform (samples stored on CPU, trained on a GPU):
``forward`` moves every entry (no keys given) or only the ``in_keys`` entries to
``device``, renamed to ``out_keys`` when those differ (the source entries stay). ``inv``
moves the ``in_keys_inv`` entries (or all) back to ``orig_device``.

In an env it may only name the env's own device: an env's device is fixed when it is
built here, so build the env with ``device=`` instead of casting its outputs.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite.envs.transforms.transforms import Transform

__all__ = ["DeviceCastTransform"]


class DeviceCastTransform(Transform):
    """Move entries (all, or ``in_keys``) to ``device``; the inverse moves them back.

    Args:
        device: where ``forward`` puts the entries.
        orig_device: where ``inv`` puts them back (default: the parent env's device, or
            the device the entries came from).
        in_keys, out_keys: the entries to move (default: all) and their names afterwards.
        in_keys_inv, out_keys_inv: the same for ``inv``.

    Example:
        >>> td = TensorDict(obs=torch.ones(2, dtype=torch.float64), batch_size=[])
        >>> DeviceCastTransform(device="cpu")(td)["obs"].device
        device(type='cpu')
    """

    def __init__(
        self, device, orig_device=None, *, in_keys=None, out_keys=None, in_keys_inv=None,
        out_keys_inv=None,
    ):  # fmt: skip
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.device = torch.device(device)
        self.orig_device = None if orig_device is None else torch.device(orig_device)

    def _move(self, tensordict: TensorDictBase, pairs, device) -> TensorDictBase:
        if not self.in_keys and not self.in_keys_inv:
            return tensordict.to(device)
        for in_key, out_key in pairs:
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, value.to(device))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._move(next_tensordict, self._pairs, self.device)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        device = parent.device if parent is not None else self.orig_device
        if device is None:
            return tensordict
        return self._move(tensordict, self._inv_pairs, device)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Move the entries of a standalone TensorDict (e.g. a replay-buffer sample)."""
        if self.orig_device is None and tensordict.device is not None:
            self.orig_device = tensordict.device
        self._check_present(tensordict, self._pairs)
        return self._call(tensordict)

    def _attach(self, specs) -> None:
        super()._attach(specs)
        env_device = torch.device(specs.device) if specs.device is not None else None
        if env_device is not None and env_device != self.device:
            raise ValueError(
                f"DeviceCastTransform(device={str(self.device)!r}) in an env on "
                f"{str(env_device)!r}: an env's device is set when it is built here; build "
                f"it with device={str(self.device)!r}, or cast replay-buffer samples "
                "instead (ReplayBuffer(transform=DeviceCastTransform(...)))."
            )

    def extra_repr(self) -> str:
        return f"device={self.device}, orig_device={self.orig_device}, " + super().extra_repr()
