"""``PolicyVersion``: which version of the policy produced each collected frame.

With asynchronous collection the frames in a replay buffer come from policies of different
ages. The transform holds a version (an int counting weight updates from 0, or a random
UUID string per update); a collector built with ``track_policy_version=`` bumps it each
time new weights reach the policy, and every reset and step writes the current int
version into ``"policy_version"`` (int64, shape ``env.batch_size``), so a sampled batch
says how stale each frame is.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

import torch
from tensordict import TensorDictBase

from torchrl_lite.data.tensor_specs import Composite, Unbounded
from torchrl_lite.envs.transforms.transforms import Transform

__all__ = ["PolicyVersion", "VersionChange"]

VERSION_KEY = "policy_version"
_KINDS = {int: "int", "int": "int", str: "uuid", "uuid": "uuid"}


class VersionChange(NamedTuple):
    """One bump of a ``PolicyVersion``: when, from which version, to which."""

    timestamp: datetime
    old_version: int | str | None
    new_version: int | str


class PolicyVersion(Transform):
    """Track the policy's version and write it into every frame as ``"policy_version"``.

    Args:
        version_type: ``"int"`` (or ``int``, the default): 0, then +1 per bump.
            ``"uuid"`` (or ``str``): a fresh UUID string per bump; such versions are
            tracked (``version``, ``version_history``) but cannot be written into env
            data, whose specs hold tensors only.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv, TransformedEnv
        >>> version = PolicyVersion("int")
        >>> env = TransformedEnv(PendulumEnv(seed=0), version)
        >>> version.increment_version()
        >>> env.rollout(3)["next", "policy_version"].tolist()
        [1, 1, 1]
    """

    def __init__(self, version_type="int"):
        kind = _KINDS.get(version_type) if isinstance(version_type, (str, type)) else None
        if kind is None:
            raise ValueError(
                f"PolicyVersion: version_type must be 'int' (or int) or 'uuid' (or str), got "
                f"{version_type!r}"
            )
        super().__init__(in_keys=[], out_keys=[])
        self.version_type = version_type
        self._kind = kind
        self._current: int | str | None = None
        self.version_history: list[VersionChange] = []
        self._bump(first=True)

    @property
    def version(self) -> int | str:
        """The current version."""
        return self._current

    @version.setter
    def version(self, value) -> None:
        want = int if self._kind == "int" else str
        if isinstance(value, bool) or not isinstance(value, want):
            raise TypeError(
                f"PolicyVersion({self._kind!r}): a version must be a {want.__name__}, got {value!r}"
            )
        self._current = value

    def increment_version(self) -> None:
        """Move to the next version (collectors call this when weights are updated)."""
        self._bump(first=False)

    def _bump(self, first: bool) -> None:
        old = self._current
        if self._kind == "uuid":
            self._current = str(uuid.uuid4())
        else:
            self._current = 0 if first else old + 1
        self.version_history.append(VersionChange(datetime.now(), old, self._current))

    # -- stamping frames -------------------------------------------------------------
    def _check_stampable(self) -> None:
        if self._kind != "int":
            raise TypeError(
                "PolicyVersion('uuid'): UUID versions are strings and env data holds tensors "
                "only; use PolicyVersion('int') to write versions into collected frames."
            )

    def _stamp(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_stampable()
        version = torch.full(
            tensordict.batch_size, self._current, dtype=torch.int64, device=tensordict.device
        )
        tensordict.set(VERSION_KEY, version)
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._stamp(next_tensordict)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        self._check_stampable()
        observation_spec[VERSION_KEY] = Unbounded(
            observation_spec.shape, dtype=torch.int64, device=observation_spec.device
        )
        return observation_spec

    def extra_repr(self) -> str:
        return f"version_type={self._kind!r}, version={self._current!r}"
