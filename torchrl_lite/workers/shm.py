"""Shared-memory segments for a :class:`~torchrl_lite.workers.channel.PipeChannel`: the
data half of a channel whose messages carry only small headers.

A segment is an anonymous ``memfd`` file mapped by both processes; its file descriptor
travels over the channel (``PipeChannel.send_fd``), so nothing is created in
``/dev/shm`` and the kernel frees it when both sides are gone, even after a SIGKILL.
One side writes (:class:`SegmentWriter`, which replaces its segment by a bigger one when
a message needs more room), the other reads (:class:`SegmentReader`, attached to the
last descriptor received).

Example (both sides in one process):
    >>> writer = SegmentWriter()
    >>> writer.reserve(4)[:4] = [1, 2, 3, 4]
    >>> reader = SegmentReader()
    >>> reader.attach(os.dup(writer.segment.fd))
    >>> reader.segment.array[:4].tolist()
    [1, 2, 3, 4]
    >>> writer.close(), reader.close()
    (None, None)
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys

import numpy as np

__all__ = ["Segment", "SegmentReader", "SegmentWriter", "shm_supported"]

_PAGE = 64 * 1024  # segments grow in steps of this


def shm_supported() -> bool:
    """True where segments work: Linux (``memfd_create``)."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create")


class Segment:
    """A shared-memory buffer: an anonymous ``memfd`` file mapped in this process (a new
    one of ``size`` bytes, or the one behind a received descriptor ``fd``)."""

    def __init__(self, size: int = 0, fd: int | None = None):
        if fd is None:
            fd = os.memfd_create("torchrl_lite-channel", os.MFD_CLOEXEC)
            os.ftruncate(fd, max(int(size), 1))
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self._map = mmap.mmap(fd, self.size)
        self.array = np.frombuffer(self._map, dtype=np.uint8)

    def close(self) -> None:
        self.array = None
        with contextlib.suppress(BufferError):  # a view still alive: unmapped when it goes
            self._map.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class SegmentWriter:
    """The writing end of a one-way segment: grown (a new segment) when a message needs
    more room; ``fresh`` says the reader must be sent the new descriptor."""

    def __init__(self):
        self.segment: Segment | None = None
        self.fresh = False

    def reserve(self, nbytes: int) -> np.ndarray:
        """The segment's bytes (a ``uint8`` array), at least ``nbytes`` long."""
        if self.segment is None or self.segment.size < nbytes:
            if self.segment is not None:
                self.segment.close()
            self.segment = Segment(-(-max(nbytes, 1) * 5 // 4 // _PAGE) * _PAGE)
            self.fresh = True
        return self.segment.array

    def send_fd_if_fresh(self, channel) -> None:
        """Pass a new segment's descriptor over ``channel`` (once per segment)."""
        if self.fresh:
            channel.send_fd(self.segment.fd)
            self.fresh = False

    def close(self) -> None:
        if self.segment is not None:
            self.segment.close()
            self.segment = None


class SegmentReader:
    """The reading end: the segment behind the last descriptor received."""

    def __init__(self):
        self.segment: Segment | None = None

    def attach(self, fd: int) -> None:
        self.close()
        self.segment = Segment(fd=fd)

    def close(self) -> None:
        if self.segment is not None:
            self.segment.close()
            self.segment = None
