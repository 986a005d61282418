"""The component factories ``create_factory`` returns: plain picklable objects."""

from __future__ import annotations


class Factory:
    """``factory(*args) -> cls(*args, **kwargs)``: e.g. ``algo_factory(device, actor)``,
    ``storage_factory(device, actor, algo)``. Picklable (the Scheme sends it to workers)
    and inspectable (``factory.kwargs``).

    Example:
        >>> Factory(dict, {"a": 1})()
        {'a': 1}
    """

    def __init__(self, cls, kwargs: dict):
        self.cls, self.kwargs = cls, dict(kwargs)

    def __call__(self, *args):
        return self.cls(*args, **self.kwargs)

    def __repr__(self) -> str:
        return f"{self.cls.__name__}.create_factory(**{self.kwargs!r})"


def check_int(owner: str, name: str, value, minimum: int = 1) -> int:
    """``value`` if it is an int >= ``minimum``; ValueError naming ``owner.name`` otherwise.

    Example:
        >>> check_int("PPO", "num_epochs", 4)
        4
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}.")
    return value
