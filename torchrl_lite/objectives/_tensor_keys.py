"""``set_keys``: renaming the entries a loss or a value estimator reads and writes.

Both keep their key names in a dataclass instance, ``self.tensor_keys`` (TorchRL's
convention), so one method checks and sets them for both.
"""

from __future__ import annotations

from dataclasses import fields

from torchrl_lite._utils import did_you_mean

__all__ = ["TensorKeysMixin"]


class TensorKeysMixin:
    """``set_keys(**names)`` over the dataclass ``self.tensor_keys``."""

    def set_keys(self, **kwargs):
        """Rename the entries read or written, e.g. ``set_keys(reward="r")``; returns self.

        Keys are strings or tuples of strings (nested entries). Every name is checked
        before any is set, so a bad call changes nothing.

        Raises:
            ValueError: a name that is not a field of ``tensor_keys``.
            TypeError: a key that is not a str or a tuple of str.
        """
        owner = type(self).__name__
        accepted = [f.name for f in fields(self.tensor_keys)]
        for name, key in kwargs.items():
            if name not in accepted:
                raise ValueError(
                    f"{owner}.set_keys: unknown key name {name!r} (accepted names: "
                    f"{accepted}).{did_you_mean(name, accepted)}"
                )
            if not isinstance(key, (str, tuple)):
                raise TypeError(
                    f"{owner}.set_keys: {name} must be a str or a tuple of str, got {key!r}."
                )
        for name, key in kwargs.items():
            setattr(self.tensor_keys, name, key)
        self._keys_set()
        return self

    def _keys_set(self) -> None:
        """Called after ``set_keys`` (a loss passes the names on to its value estimator)."""
