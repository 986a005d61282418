"""How one checkpoint component is written and read: the adapters, and the global RNG state.

An adapter writes a component into its own folder and reads it back into the live object.
``StateDictCheckpointAdapter`` splits a ``state_dict`` into its tensors (stored as
TensorDict files: no pickle, so loading runs no code) and a JSON skeleton of everything
else (nesting, ints, strings, ...); ``payload_format="torch"`` uses ``torch.save``.
"""

from __future__ import annotations

import abc
import base64
import json
import shutil
import zipfile
from collections import OrderedDict
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

__all__ = [
    "CheckpointAdapter",
    "DumpLoadCheckpointAdapter",
    "GlobalRNGState",
    "JSONCheckpointAdapter",
    "StateDictCheckpointAdapter",
    "StateDictFormat",
    "to_json",
]

StateDictFormat = Literal["directory", "archive", "consolidated", "torch"]
_PAYLOADS = ("directory", "archive", "consolidated", "torch")


class CheckpointAdapter(abc.ABC):
    """Writes one component into a folder and reads it back.

    Subclasses set ``adapter_id`` (recorded in the manifest; a load refuses another) and
    may raise ``format_version`` when their layout changes. ``save`` must create ``path``.
    """

    adapter_id: str
    format_version: int = 1

    @abc.abstractmethod
    def save(self, component, path: Path, *, args: tuple, kwargs: Mapping) -> Any:
        """Write ``component`` under the folder ``path``."""

    @abc.abstractmethod
    def load(self, component, path: Path, *, map_location, tensor_load_kwargs, args, kwargs) -> Any:
        """Restore ``component`` from ``path``; a non-None return lands in ``result.values``."""


class DumpLoadCheckpointAdapter(CheckpointAdapter):
    """For objects that save themselves to a folder: ``dump``/``load`` (TorchRL's names)
    or ``dumps``/``loads`` (replay buffers and storages here)."""

    adapter_id = "torchrl.dump_load"

    @staticmethod
    def methods(component) -> tuple | None:
        for save, load in (("dump", "load"), ("dumps", "loads")):
            if callable(getattr(component, save, None)) and callable(
                getattr(component, load, None)
            ):
                return getattr(component, save), getattr(component, load)
        return None

    def save(self, component, path, *, args, kwargs):
        path.mkdir(parents=True, exist_ok=True)
        self.methods(component)[0](path / "data", *args, **kwargs)

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        self.methods(component)[1](path / "data", *args, **kwargs)


class JSONCheckpointAdapter(CheckpointAdapter):
    """For JSON values (configs, counters, metrics). Dicts and lists are refilled in place;
    other values are returned (``result.values[name]``)."""

    adapter_id = "torchrl.json"

    def save(self, component, path, *, args, kwargs):
        if args or kwargs:
            raise TypeError("JSON checkpoint components take no save options.")
        path.mkdir(parents=True, exist_ok=True)
        (path / "value.json").write_text(json.dumps(to_json(component), indent=1, sort_keys=True))

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        if args or kwargs:
            raise TypeError("JSON checkpoint components take no load options.")
        value = json.loads((path / "value.json").read_text())
        if isinstance(component, MutableMapping) and isinstance(value, Mapping):
            component.clear()
            component.update(value)
            return component
        if isinstance(component, list) and isinstance(value, list):
            component[:] = value
            return component
        return value


class StateDictCheckpointAdapter(CheckpointAdapter):
    """For objects with ``state_dict()`` / ``load_state_dict()`` (modules, optimizers, ...).

    Args:
        payload_format: how the tensors are stored: ``"directory"`` (a TensorDict memmap
            folder, the default), ``"archive"`` (that folder in one zip file),
            ``"consolidated"`` (one consolidated TensorDict file) or ``"torch"``
            (``torch.save`` of the whole state dict, read with ``weights_only=True``
            unless ``tensor_load_kwargs`` says otherwise). Loading reads any of them.
    """

    adapter_id = "torchrl.state_dict"

    def __init__(self, payload_format: StateDictFormat = "directory"):
        if payload_format not in _PAYLOADS:
            raise ValueError(f"payload_format must be one of {_PAYLOADS}, got {payload_format!r}.")
        self.payload_format = payload_format

    def save(self, component, path, *, args, kwargs):
        path.mkdir(parents=True, exist_ok=True)
        state = component.state_dict(*args, **kwargs)
        if self.payload_format == "torch":
            torch.save(state, path / "state.pt")
            return
        tensors: dict[str, torch.Tensor] = {}
        skeleton = _encode(state, tensors)
        td = TensorDict(tensors, [])
        if self.payload_format == "consolidated":
            td.consolidate(filename=path / "state.tdc")
        else:
            td.memmap(path / "state")
            if self.payload_format == "archive":
                _zip_folder(path / "state", path / "state.zip")
                shutil.rmtree(path / "state")
        (path / "state.json").write_text(json.dumps(skeleton))

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        if (path / "state.pt").is_file():
            options = {"weights_only": True, **tensor_load_kwargs}
            if map_location is not None:
                options["map_location"] = map_location
            state = torch.load(path / "state.pt", **options)
        else:
            unknown = set(tensor_load_kwargs) - {"weights_only", "mmap"}
            if unknown:
                raise TypeError(
                    f"tensor_load_kwargs {sorted(unknown)} apply to payload_format='torch' "
                    "components only."
                )
            tensors = _read_tensors(path)
            state = _decode(json.loads((path / "state.json").read_text()), tensors, map_location)
        component.load_state_dict(state, *args, **kwargs)


def _zip_folder(folder: Path, file: Path) -> None:
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())


def _read_tensors(path: Path) -> TensorDict:
    if (path / "state").is_dir():
        return TensorDict.load_memmap(path / "state")
    if (path / "state.tdc").is_file():
        return TensorDict.from_consolidated(path / "state.tdc")
    if (path / "state.zip").is_file():
        folder = path / "state.unzipped"
        with zipfile.ZipFile(path / "state.zip") as z:
            z.extractall(folder)
        return TensorDict.load_memmap(folder).clone()  # in memory: the folder may go
    raise FileNotFoundError(
        f"no state-dict payload in {path} (state/, state.tdc, state.zip or state.pt)."
    )


# -- state dicts as JSON + tensors --------------------------------------------------------
def _encode(value, tensors: dict) -> dict:
    """A JSON skeleton of ``value``; tensors and arrays go to ``tensors`` by key."""
    if isinstance(value, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = value.detach()
        return {"tensor": key, "device": str(value.device)}
    if isinstance(value, np.ndarray):
        key = f"t{len(tensors)}"
        tensors[key] = torch.from_numpy(
            value.astype(np.int64) if value.dtype == np.uint32 else value.copy()
        )
        return {"array": key, "dtype": value.dtype.str}
    if isinstance(value, TensorDictBase):  # before Mapping: it is one
        items = {key: _encode(v, tensors) for key, v in value.items()}
        return {
            "tensordict": items,
            "batch_size": list(value.batch_size),
            "device": None if value.device is None else str(value.device),
        }
    if isinstance(value, Mapping):
        out = {"map": [[_encode(k, tensors), _encode(v, tensors)] for k, v in value.items()]}
        if isinstance(value, OrderedDict):
            out["ordered"] = True
        if getattr(value, "_metadata", None) is not None:  # nn.Module state_dict versions
            out["metadata"] = _encode(value._metadata, tensors)
        return out
    if isinstance(value, torch.Size):
        return {"size": list(value)}
    if isinstance(value, (list, tuple)):
        return {
            "list" if isinstance(value, list) else "tuple": [_encode(v, tensors) for v in value]
        }
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device_value": str(value)}
    if isinstance(value, np.generic):
        return {"value": value.item()}
    if isinstance(value, (bytes, bytearray)):  # stored as text; never unpickled here
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(
        f"a state_dict value of type {type(value).__name__} cannot be stored without pickle; "
        "register the component with StateDictCheckpointAdapter(payload_format='torch')."
    )


def _target_device(saved: str, map_location):
    if map_location is None:
        return torch.device(saved)
    if isinstance(map_location, Mapping):
        return torch.device(map_location.get(saved, saved))
    if callable(map_location):
        raise TypeError("a callable map_location needs payload_format='torch'.")
    return torch.device(map_location)


def _decode(node: dict, tensors, map_location):
    if "tensor" in node:
        return tensors[node["tensor"]].to(_target_device(node["device"], map_location), copy=True)
    if "array" in node:
        return tensors[node["array"]].numpy().astype(np.dtype(node["dtype"]))
    if "tensordict" in node:
        entries = {k: _decode(v, tensors, map_location) for k, v in node["tensordict"].items()}
        device = node["device"]
        if device is not None:
            device = _target_device(device, map_location)
        return TensorDict(entries, batch_size=node["batch_size"], device=device)
    if "map" in node:
        out = OrderedDict() if node.get("ordered") else {}
        for k, v in node["map"]:
            out[_decode(k, tensors, map_location)] = _decode(v, tensors, map_location)
        if "metadata" in node:
            out._metadata = _decode(node["metadata"], tensors, map_location)
        return out
    if "size" in node:
        return torch.Size(node["size"])
    if "list" in node:
        return [_decode(v, tensors, map_location) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, tensors, map_location) for v in node["tuple"])
    if "dtype" in node:
        return getattr(torch, node["dtype"])
    if "device_value" in node:
        return torch.device(node["device_value"])
    if "bytes" in node:
        return base64.b64decode(node["bytes"])
    return node["value"]


def to_json(value):
    """``value`` as JSON data (tensors and arrays become numbers or lists); TypeError else."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a value of type {type(value).__name__} is not JSON data.")


class GlobalRNGState:
    """The process's random generators as a checkpoint component: Python's ``random``,
    numpy's global generator, torch's CPU generator and CUDA's when it is in use.

    It is read when the checkpoint is saved and set back when it is loaded, so a resumed
    run draws the same random numbers as an uninterrupted one.

    Example:
        >>> rng = GlobalRNGState()
        >>> state = rng.state_dict()
        >>> a = torch.rand(2)
        >>> rng.load_state_dict(state)
        >>> torch.equal(torch.rand(2), a)
        True
    """

    def state_dict(self) -> dict:
        from torchrl_lite.trainers.checkpoint import rng_state

        return rng_state()

    def load_state_dict(self, state_dict: Mapping) -> None:
        from torchrl_lite.trainers.checkpoint import set_rng_state

        state = dict(state_dict)
        if "cuda" in state and not torch.cuda.is_available():
            raise RuntimeError(
                "the checkpoint holds CUDA generator states but CUDA is not available."
            )
        numpy_state = state["numpy"]
        state["numpy"] = (
            numpy_state[0],
            np.asarray(numpy_state[1], dtype=np.uint32),
            *numpy_state[2:],
        )
        state["python"] = _tuples(state["python"])
        set_rng_state(state)


def _tuples(value):
    """Lists back to the nested tuples ``random.setstate`` expects."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value
