"""The global RNG states of a process: read, restored, or seeded together.

Workers save them with their state (a resumed run draws the same numbers) and seed them
at start (forked workers would otherwise share the parent's states).
"""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["rng_state", "seed_rngs", "set_rng_state"]


def rng_state() -> dict:
    """The global RNG states: torch (and CUDA when in use), numpy, python ``random``.

    Example:
        >>> state = rng_state()
        >>> a = torch.rand(2)
        >>> set_rng_state(state)
        >>> torch.equal(torch.rand(2), a)
        True
    """
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the states returned by :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_rngs(seed: int) -> None:
    """Seed this process's torch, numpy and ``random`` generators."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
