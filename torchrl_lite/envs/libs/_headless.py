"""Off-screen rendering without SDL noise: pygame-based ``rgb_array`` renders on a machine
with no display print "XDG_RUNTIME_DIR is invalid" (SDL looking for a window system) on
every env. An ``rgb_array`` render never opens a window, so SDL's dummy video driver is
what it needs; a user's own ``SDL_VIDEODRIVER`` is left as it is.

SDL also installs its own SIGTERM handler when pygame starts, which turns the signal into a
quit event that no env reads: ``kill PID`` then leaves a training run going. Every env that
renders through pygame therefore asks SDL to leave the signals alone (``SDL_NO_SIGNAL_HANDLERS``,
unless the user set it).
"""

from __future__ import annotations

import os


def use_offscreen_sdl() -> None:
    """Select SDL's dummy video driver when none is chosen and no display is attached.

    Example:
        >>> use_offscreen_sdl()
        >>> "SDL_VIDEODRIVER" in os.environ or bool(os.environ.get("DISPLAY"))
        True
    """
    if "SDL_VIDEODRIVER" in os.environ:
        return
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    os.environ["SDL_VIDEODRIVER"] = "dummy"


def keep_default_signals() -> None:
    """Ask SDL (pygame) not to install its SIGINT/SIGTERM handlers, so ``kill`` stops the process.

    Must run before pygame initialises SDL; a user's own ``SDL_NO_SIGNAL_HANDLERS`` is kept.

    Example:
        >>> keep_default_signals()
        >>> os.environ["SDL_NO_SIGNAL_HANDLERS"] in ("0", "1")
        True
    """
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")
