"""``track_policy_version=``: collectors that say which policy version made each frame.

``track_policy_version=True`` makes a :class:`~torchrl_lite.envs.llm.transforms.PolicyVersion`
(int versions); a ``PolicyVersion`` passed in is used as given; False: no tracking.
A ``SyncDataCollector`` appends the tracker to its env, so every frame carries
``"policy_version"``, and bumps it at each ``update_policy_weights_()``. A multiprocess
collector keeps the tracker in this process (``increment_version()``, ``policy_version``)
while each worker stamps frames with its own tracker, which counts the weight updates
that worker has loaded: the frames say which weights really produced them.
"""

from __future__ import annotations

from torchrl_lite.envs.llm.transforms import PolicyVersion

__all__ = ["make_tracker", "VersionTracking"]


def make_tracker(track_policy_version, owner: str) -> PolicyVersion | None:
    """The tracker for ``track_policy_version`` (True, False/None or a ``PolicyVersion``)."""
    if track_policy_version is None or track_policy_version is False:
        return None
    if track_policy_version is True:
        return PolicyVersion("int")
    if isinstance(track_policy_version, PolicyVersion):
        return track_policy_version
    raise TypeError(
        f"{owner}: track_policy_version must be True, False or a PolicyVersion, got "
        f"{track_policy_version!r}"
    )


class VersionTracking:
    """``increment_version()``, ``policy_version`` and ``get_policy_version()`` of every
    collector (``policy_version_tracker`` is None when not tracking)."""

    policy_version_tracker: PolicyVersion | None = None

    def increment_version(self) -> None:
        """Bump the tracked version (nothing happens when the collector does not track)."""
        if self.policy_version_tracker is not None:
            self.policy_version_tracker.increment_version()

    @property
    def policy_version(self) -> int | str | None:
        """The tracker's current version in this process (None when not tracking)."""
        tracker = self.policy_version_tracker
        return None if tracker is None else tracker.version

    def get_policy_version(self) -> int | str | None:
        """The same as :attr:`policy_version`."""
        return self.policy_version
