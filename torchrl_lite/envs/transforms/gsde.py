"""gSDENoise: the per-episode noise matrix of gSDE exploration, kept in the env's data."""

from __future__ import annotations

from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.transforms.primer import TensorDictPrimer

__all__ = ["gSDENoise"]


class gSDENoise(TensorDictPrimer):  # noqa: N801  (TorchRL's name)
    """Write ``"_eps_gSDE"`` at each reset: ``N(0, 1)`` noise ``[*B, action_dim, state_dim]``.

    The gSDE layer (``gSDEModule``) reads it and passes it on step after step, so the
    exploration noise is constant within an episode and redrawn at the next reset. Without
    both dims the entry is a one-value zero placeholder and the layer draws the noise on
    its first call.

    Args:
        state_dim: ``S``, the size of the features the noise multiplies.
        action_dim: ``A``.
        shape: leading dims of the entry (default: none beyond the env's batch).

    Example:
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), gSDENoise(action_dim=1, state_dim=3))  # doctest: +SKIP
        >>> env.reset()["_eps_gSDE"].shape  # doctest: +SKIP
        torch.Size([1, 3])
    """

    def __init__(self, state_dim: int | None = None, action_dim: int | None = None, shape=None):
        known = state_dim is not None and action_dim is not None
        tail = (action_dim, state_dim) if known else (1,)
        super().__init__(random=known, _eps_gSDE=Unbounded(shape=(*(shape or ()), *tail)))
