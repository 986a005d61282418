"""``RandomPolicy``: a policy that acts at random within the action spec (a baseline, or
the first frames of an off-policy run)."""

from __future__ import annotations

from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Composite

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """A policy that writes a random action drawn from ``action_spec`` (``spec.rand()``).

    Args:
        action_spec: a leaf spec (written at ``action_key``) or a Composite (each of its
            entries written), usually ``env.action_spec`` or ``env.full_action_spec``.
        action_key: where a leaf spec's draw goes (default ``"action"``).

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> env = PendulumEnv()
        >>> env.rollout(3, RandomPolicy(env.action_spec))["action"].shape
        torch.Size([3, 1])
    """

    def __init__(self, action_spec, action_key=K.ACTION):
        self.action_spec = action_spec.clone()
        self.action_key = action_key
        self._composite = isinstance(action_spec, Composite)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._composite:
            return tensordict.update(self.action_spec.rand())
        return tensordict.set(self.action_key, self.action_spec.rand())

    def __repr__(self) -> str:
        return f"RandomPolicy(action_spec={self.action_spec}, action_key={self.action_key!r})"
