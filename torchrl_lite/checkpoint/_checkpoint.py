"""``Checkpoint``: named components saved together, restored all or in part.

A checkpoint is a folder (``format="directory"``) or one zip file of the same tree
(``format="archive"``)::

    path/
      components/0000-optimizer/   what the component's adapter wrote
      components/0001-policy/
      meta.json                    the manifest: format, versions, metadata, and per
                                   component its adapter, adapter version and files

A folder is written with the crash-safe swap of ``torchrl_lite/_atomic.py`` (the
manifest is its completeness marker, written last): a killed save leaves the previous
checkpoint complete, and a load then reads the complete copy. An archive is written
beside its place and renamed over it. A load reads the manifest first and opens only the
requested components' files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
import warnings
import zipfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import tensordict
import torch

from torchrl_lite._atomic import find_complete, write_folder
from torchrl_lite.checkpoint._adapters import (
    CheckpointAdapter,
    DumpLoadCheckpointAdapter,
    JSONCheckpointAdapter,
    StateDictCheckpointAdapter,
    to_json,
)

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointFormat",
    "CheckpointLoadResult",
    "CheckpointOptions",
    "CheckpointStrictness",
]

CheckpointFormat = Literal["directory", "archive"]
CheckpointStrictness = Literal["error", "warn", "ignore"]
FORMAT = "torchrl.checkpoint"  # TorchRL's manifest format name
VERSION = 1
MANIFEST = "meta.json"  # the completeness marker of _atomic's folders


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written or read; ``result`` holds what a load did."""

    def __init__(self, message: str, result: CheckpointLoadResult | None = None):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class CheckpointOptions:
    """Extra arguments for a component's save and load calls (``state_dict(*save_args,
    **save_kwargs)``, ``load_state_dict(state, *load_args, **load_kwargs)``, ``dump(path,
    ...)``). Options given to one ``save``/``load`` call override the registered ones."""

    save_args: tuple | None = None
    save_kwargs: Mapping | None = None
    load_args: tuple | None = None
    load_kwargs: Mapping | None = None

    def merged(self, override: CheckpointOptions | None) -> CheckpointOptions:
        if override is None:
            return self
        return CheckpointOptions(
            save_args=self.save_args if override.save_args is None else override.save_args,
            save_kwargs={**(self.save_kwargs or {}), **(override.save_kwargs or {})},
            load_args=self.load_args if override.load_args is None else override.load_args,
            load_kwargs={**(self.load_kwargs or {}), **(override.load_kwargs or {})},
        )


@dataclass
class CheckpointLoadResult:
    """What ``Checkpoint.load`` did, by component name."""

    loaded: set = field(default_factory=set)
    missing: set = field(default_factory=set)  # requested, absent from the checkpoint
    incompatible: dict = field(default_factory=dict)  # name -> reason
    unrequested: set = field(default_factory=set)  # in the checkpoint, not requested
    values: dict = field(default_factory=dict)  # what adapters returned (JSON values)
    manifest: dict = field(default_factory=dict)


@dataclass
class _Entry:
    value: Any
    adapter: CheckpointAdapter | None
    options: CheckpointOptions


class Checkpoint:
    """Named components (modules, optimizers, buffers, collectors, RNG, JSON values) saved
    together and restored all or in part.

    A component is written by its adapter: the one given to ``register``, else one
    registered for its type (``register_adapter``), else ``dump``/``load`` (or
    ``dumps``/``loads``), else ``state_dict``/``load_state_dict``, else JSON.

    Args:
        format: ``"directory"`` (default) or ``"archive"`` (one zip file).
        strict: on a load, what a missing or incompatible requested component does:
            ``"error"`` (CheckpointError), ``"warn"`` or ``"ignore"``.
        save_components: the components ``save`` writes by default (default: all).
        **components: components to register by name.

    Example:
        >>> import tempfile
        >>> net, copy = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
        >>> folder = tempfile.mkdtemp()
        >>> path = Checkpoint(policy=net, frames={"n": 8}).save(f"{folder}/ckpt")
        >>> result = Checkpoint(policy=copy).load(path)
        >>> result.loaded, result.unrequested, torch.equal(copy.weight, net.weight)
        ({'policy'}, {'frames'}, True)
    """

    def __init__(
        self,
        *,
        format: CheckpointFormat = "directory",
        strict: CheckpointStrictness = "error",
        save_components: Collection[str] | None = None,
        **components,
    ):
        _check_choice("format", format, ("directory", "archive"))
        _check_choice("strict", strict, ("error", "warn", "ignore"))
        self.format, self.strict = format, strict
        self.save_components = None if save_components is None else frozenset(save_components)
        self._entries: dict[str, _Entry] = {}
        self._type_adapters: list[tuple[type, CheckpointAdapter]] = []
        for name, value in components.items():
            self.register(name, value)

    @property
    def components(self) -> dict:
        """The registered components by name."""
        return {name: entry.value for name, entry in self._entries.items()}

    def __contains__(self, name) -> bool:
        return name in self._entries

    def register(self, name: str, component, *, adapter=None, options=None) -> Checkpoint:
        """Register ``component`` as ``name`` (optionally with its adapter); returns self."""
        if (
            not isinstance(name, str)
            or not name
            or name in (".", "..")
            or "/" in name
            or "\\" in name
        ):
            raise ValueError(f"a component name is a non-empty string without '/', got {name!r}.")
        if name in self._entries:
            raise KeyError(f"the component {name!r} is already registered.")
        if adapter is not None and not isinstance(adapter, CheckpointAdapter):
            raise TypeError(f"adapter must be a CheckpointAdapter, got {type(adapter).__name__}.")
        self._entries[name] = _Entry(component, adapter, options or CheckpointOptions())
        return self

    def register_adapter(self, component_type: type, adapter: CheckpointAdapter) -> Checkpoint:
        """Use ``adapter`` for components of ``component_type`` (latest registration first)."""
        if not isinstance(component_type, type) or not isinstance(adapter, CheckpointAdapter):
            raise TypeError("register_adapter takes a type and a CheckpointAdapter.")
        self._type_adapters.insert(0, (component_type, adapter))
        return self

    # -- save ------------------------------------------------------------------------
    def save(
        self, path, *, components=None, component_options=None, format=None, metadata=None
    ) -> Path:
        """Write the selected components to ``path`` (replacing a checkpoint there).

        Args:
            path: the checkpoint folder or archive file.
            components: names to save (default ``save_components``, else all).
            component_options: ``{name: CheckpointOptions}`` for this call.
            format: ``"directory"`` or ``"archive"`` for this call.
            metadata: JSON values stored in the manifest (``manifest(path)["metadata"]``).

        Returns:
            the absolute path written.
        """
        path = _local(path)
        fmt = self.format if format is None else format
        _check_choice("format", fmt, ("directory", "archive"))
        names = self._select(self.save_components if components is None else components)
        options = dict(component_options or {})
        extra = sorted(set(options) - names)
        if extra:
            raise KeyError(f"component_options name components not being saved: {extra}.")
        meta = to_json(metadata or {})

        def write(folder: Path) -> None:
            records = {}
            for index, name in enumerate(sorted(names)):
                entry = self._entries[name]
                adapter = self._adapter(name, entry)
                rel = Path("components") / f"{index:04d}-{quote(name, safe='._-')}"
                opts = entry.options.merged(options.get(name))
                adapter.save(
                    entry.value,
                    folder / rel,
                    args=tuple(opts.save_args or ()),
                    kwargs=dict(opts.save_kwargs or {}),
                )
                files = sorted(
                    f.relative_to(folder / rel).as_posix()
                    for f in (folder / rel).rglob("*")
                    if f.is_file()
                )
                records[name] = {
                    "adapter": adapter.adapter_id,
                    "adapter_version": adapter.format_version,
                    "path": rel.as_posix(),
                    "files": files,
                }
            manifest = {
                "format": FORMAT,
                "format_version": VERSION,
                "container": fmt,
                "checkpoint_id": uuid.uuid4().hex,
                "created_at": datetime.now(timezone.utc).isoformat(),
                "versions": _versions(),
                "metadata": meta,
                "components": records,
            }
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))

        if path.exists() and not _is_checkpoint(path):
            raise ValueError(
                f"refusing to replace {path}: it exists and is not a checkpoint (no {MANIFEST} "
                f"of format {FORMAT!r}). Choose another path."
            )
        if fmt == "directory":
            return write_folder(path, write, _is_checkpoint, "checkpoint").absolute()
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.stage-") as stage:
            write(Path(stage))
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
                for f in sorted(Path(stage).rglob("*")):
                    if f.is_file():
                        z.write(f, f.relative_to(stage).as_posix())
            if path.is_dir():
                shutil.rmtree(path)
            os.replace(tmp, path)
        return path

    # -- load ------------------------------------------------------------------------
    def load(
        self,
        path,
        *,
        components=None,
        component_options=None,
        map_location=None,
        tensor_load_kwargs=None,
        strict: CheckpointStrictness | None = None,
    ) -> CheckpointLoadResult:
        """Restore the requested components (default: all registered) from ``path``.

        Args:
            path: a checkpoint folder or archive.
            components: names to restore; the other components' files are not opened.
            component_options: ``{name: CheckpointOptions}`` for this call.
            map_location: the device tensors go to (a device, or ``{saved: target}``).
            tensor_load_kwargs: ``torch.load`` options for ``payload_format="torch"``.
            strict: overrides the checkpoint's ``strict`` for this call.
        """
        strict = self.strict if strict is None else strict
        _check_choice("strict", strict, ("error", "warn", "ignore"))
        source = _local(path)
        if source.is_dir() or not source.exists():
            source = find_complete(source, _is_checkpoint, "checkpoint") or source
        manifest = self.manifest(source)
        requested = self._select(components)
        stored = manifest["components"]
        result = CheckpointLoadResult(
            missing=requested - set(stored), unrequested=set(stored) - requested, manifest=manifest
        )
        options = dict(component_options or {})
        extra = sorted(set(options) - requested)
        if extra:
            raise KeyError(f"component_options name components not being loaded: {extra}.")
        adapters = {}
        for name in sorted(requested & set(stored)):
            adapter = self._adapter(name, self._entries[name])
            record = stored[name]
            if record["adapter"] != adapter.adapter_id:
                result.incompatible[name] = (
                    f"saved by adapter {record['adapter']!r}, restored with {adapter.adapter_id!r}"
                )
            elif record["adapter_version"] != adapter.format_version:
                result.incompatible[name] = (
                    f"saved by adapter version {record['adapter_version']}, this one reads "
                    f"version {adapter.format_version}"
                )
            else:
                adapters[name] = adapter
        _report(result, strict)
        with _opened(source, [stored[n] for n in adapters]) as root:
            for name, adapter in adapters.items():
                entry = self._entries[name]
                opts = entry.options.merged(options.get(name))
                try:
                    value = adapter.load(
                        entry.value,
                        root / stored[name]["path"],
                        map_location=map_location,
                        tensor_load_kwargs=dict(tensor_load_kwargs or {}),
                        args=tuple(opts.load_args or ()),
                        kwargs=dict(opts.load_kwargs or {}),
                    )
                except Exception as err:
                    result.incompatible[name] = f"{type(err).__name__}: {err}"
                    if strict == "error":
                        raise CheckpointError(
                            f"cannot restore the component {name!r} from {source}: {err}", result
                        ) from err
                    if strict == "warn":
                        warnings.warn(f"cannot restore {name!r}: {err}", stacklevel=2)
                    continue
                result.loaded.add(name)
                if value is not None:
                    result.values[name] = value
        return result

    @classmethod
    def manifest(cls, path) -> dict:
        """The manifest of the checkpoint at ``path`` (no component is read)."""
        source = _local(path)
        if not source.exists():
            raise FileNotFoundError(f"no checkpoint at {source}: the path does not exist.")
        try:
            if source.is_dir():
                manifest = json.loads((source / MANIFEST).read_text())
            elif zipfile.is_zipfile(source):
                with zipfile.ZipFile(source) as z:
                    manifest = json.loads(z.read(MANIFEST))
            else:
                raise CheckpointError(f"{source} is neither a checkpoint folder nor an archive.")
        except (OSError, KeyError, ValueError) as err:
            raise CheckpointError(f"{source} has no readable {MANIFEST}: {err}") from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CheckpointError(
                f"{source} is not a checkpoint (its manifest is not of format {FORMAT!r})."
            )
        if manifest.get("format_version") != VERSION:
            raise CheckpointError(
                f"{source} has checkpoint format version {manifest.get('format_version')!r}; "
                f"this torchrl_lite reads version {VERSION}."
            )
        for name, record in manifest.get("components", {}).items():
            rel = Path(str(record.get("path", "")))
            if rel.is_absolute() or ".." in rel.parts:
                raise CheckpointError(f"{source}: the component {name!r} has an unsafe path {rel}.")
        return manifest

    @classmethod
    def is_checkpoint(cls, path) -> bool:
        """Whether ``path`` holds a readable checkpoint manifest."""
        try:
            cls.manifest(path)
        except (CheckpointError, OSError):
            return False
        return True

    # -- internals -----------------------------------------------------------------------
    def _select(self, names) -> set:
        chosen = set(self._entries) if names is None else set(names)
        unknown = sorted(chosen - set(self._entries))
        if unknown:
            raise KeyError(
                f"unregistered checkpoint components {unknown}; registered: {sorted(self._entries)}."
            )
        return chosen

    def _adapter(self, name: str, entry: _Entry) -> CheckpointAdapter:
        if entry.adapter is not None:
            return entry.adapter
        for kind, adapter in self._type_adapters:
            if isinstance(entry.value, kind):
                return adapter
        if DumpLoadCheckpointAdapter.methods(entry.value) is not None:
            return DumpLoadCheckpointAdapter()
        if callable(getattr(entry.value, "state_dict", None)) and callable(
            getattr(entry.value, "load_state_dict", None)
        ):
            return StateDictCheckpointAdapter()
        try:
            to_json(entry.value)
        except TypeError:
            raise TypeError(
                f"no way to save the component {name!r} ({type(entry.value).__name__}): give it "
                "state_dict/load_state_dict or dump/load, or register it with adapter=."
            ) from None
        return JSONCheckpointAdapter()


def _check_choice(what: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"Checkpoint {what} must be one of {list(choices)}, got {value!r}.")


def _local(path) -> Path:
    if "://" in str(path):
        raise ValueError(f"checkpoints are local paths, got {path!s}.")
    return Path(path).expanduser().absolute()


def _is_checkpoint(path: Path) -> bool:
    return Checkpoint.is_checkpoint(path)


def _versions() -> dict:
    from torchrl_lite import __version__

    return {
        "torchrl_lite": __version__,
        "tensordict": tensordict.__version__,
        "torch": torch.__version__,
    }


def _report(result: CheckpointLoadResult, strict: str) -> None:
    if not result.missing and not result.incompatible:
        return
    parts = [f"missing {sorted(result.missing)}"] if result.missing else []
    if result.incompatible:
        parts.append(f"incompatible {result.incompatible}")
    message = "checkpoint restore: " + "; ".join(parts)
    if strict == "error":
        raise CheckpointError(message, result)
    if strict == "warn":
        warnings.warn(message, stacklevel=3)


@contextlib.contextmanager
def _opened(source: Path, records: list):
    """The folder to read from: the checkpoint folder, or the selected components of an
    archive extracted into a temporary folder."""
    if source.is_dir():
        yield source
        return
    with (
        tempfile.TemporaryDirectory(prefix="torchrl_lite-checkpoint-") as tmp,
        zipfile.ZipFile(source) as z,
    ):
        for record in records:
            (Path(tmp) / record["path"]).mkdir(parents=True, exist_ok=True)
            for f in record["files"]:
                member = Path(record["path"]) / f
                if member.is_absolute() or ".." in member.parts:
                    raise CheckpointError(f"{source}: unsafe archive member {member}.")
                z.extract(member.as_posix(), tmp)
        yield Path(tmp)
