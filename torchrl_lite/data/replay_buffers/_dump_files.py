"""Checks of a storage dump's files on disk (``TensorStorage.loads``): sizes, metadata."""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from torchrl_lite._atomic import read_json


def _fsync_file(file: Path) -> None:
    with open(file, "rb+") as f:
        os.fsync(f.fileno())


def _check_data_files(folder: Path, leaves: list, rows: int) -> None:
    """Every data file exists with the size its shape and dtype give, every metadata file
    of the memory-mapped TensorDict is JSON; raise naming the file."""
    for meta_file in sorted((folder / "data").rglob("meta.json")):
        read_json(meta_file)
    for leaf in leaves:
        try:
            file = folder / leaf["file"]
            shape, dtype = [int(n) for n in leaf["shape"]], getattr(torch, leaf["dtype"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(
                f"{folder / 'meta.json'} is corrupt: bad leaf entry {leaf!r}."
            ) from err
        if not isinstance(dtype, torch.dtype) or not shape or shape[0] != rows:
            raise ValueError(
                f"{folder / 'meta.json'} is corrupt: leaf {leaf['file']} has shape {shape} and "
                f"dtype {leaf['dtype']!r} for {rows} rows."
            )
        expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if not file.is_file():
            raise FileNotFoundError(
                f"the storage dump at {folder} is missing its data file {file} "
                f"(shape {shape}, {leaf['dtype']}); the dump is incomplete, nothing was loaded."
            )
        size = file.stat().st_size
        if size != expected:
            raise ValueError(
                f"data file {file} holds {size} bytes but its shape {shape} and dtype "
                f"{leaf['dtype']} need {expected} (truncated or wrong file); nothing was loaded."
            )
