"""Write an :class:`~torchrl_lite.export.pipeline.ExportedPolicy` to a file, load it back with
the file's own runtime, and check it against the eager policy.

Formats: ``"onnx"`` (``torch.onnx.export`` through ``torch.export``; run by onnxruntime),
``"pt2"`` (``torch.export.save``; run by ``torch.export.load``) and ``"torchscript"``
(``torch.jit.trace``; run by ``torch.jit.load``). The batch dim is dynamic in all three.

The parity check plays the eager deterministic policy in the recipe's eval env, records
the raw observations the wrapped env returned (before any transform), feeds them to the
loaded file step by step (frame stacks carried from one call to the next, ``is_init`` at
each reset) and compares its actions with the eager ones (one-hot actions by their index).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from torchrl_lite.envs import Transform
from torchrl_lite.export.pipeline import ExportedPolicy

__all__ = [
    "FORMATS", "Reference", "Runtime", "input_description", "load_runtime", "parity",
    "record_reference", "save",
]  # fmt: skip

FORMATS = {"onnx": ".onnx", "pt2": ".pt2", "torchscript": ".pt"}
"""Format -> the file suffix written by default."""


def _example_inputs(module: ExportedPolicy, reference: Reference, batch: int = 2) -> tuple:
    """Inputs of batch ``batch`` built from the reference's first step (export traces them)."""
    first = reference.inputs(0, _first_stacks(module))
    return tuple(torch.as_tensor(x).expand(batch, *x.shape[1:]).clone() for x in first)


def save(module: ExportedPolicy, path: Path, fmt: str, example: tuple) -> None:
    """Write ``module`` as ``fmt`` to ``path``, traced on ``example`` (dim 0 dynamic)."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    dynamic = (tuple({0: batch} for _ in example),)  # forward(*inputs): one varargs parameter
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "pt2":
            torch.export.save(torch.export.export(module, example, dynamic_shapes=dynamic), path)
        elif fmt == "torchscript":
            torch.jit.save(torch.jit.trace(module, example, check_trace=False), str(path))
        else:
            _require("onnxscript", "ONNX export")
            with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
                torch.onnx.export(
                    module, example, str(path), dynamo=True, dynamic_shapes=dynamic,
                    input_names=module.input_names, output_names=module.output_names,
                    external_data=False, verbose=False,
                )  # fmt: skip


def _require(package: str, what: str) -> None:
    try:
        __import__(package)
    except ImportError as err:
        raise ImportError(f"{what} needs {package}: pip install 'torchrl-lite[export]'") from err


class Runtime:
    """An exported file loaded by its own runtime: ``runtime(inputs) -> outputs`` (numpy)."""

    def __init__(self, path: Path, fmt: str):
        self.path, self.format = Path(path), fmt
        if fmt == "onnx":
            _require("onnxruntime", "Running an ONNX policy")
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            self._session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            self.input_names = [i.name for i in self._session.get_inputs()]
        elif fmt == "pt2":
            self._module = torch.export.load(str(path)).module()
        elif fmt == "torchscript":
            with warnings.catch_warnings():  # torch.jit's deprecation notice
                warnings.simplefilter("ignore", DeprecationWarning)
                self._module = torch.jit.load(str(path))
        else:
            raise ValueError(f"Unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")

    def __call__(self, inputs: list[np.ndarray], names: list[str]) -> list[np.ndarray]:
        if self.format == "onnx":
            feeds = dict(zip(names, inputs))
            return self._session.run(None, {n: feeds[n] for n in self.input_names})
        with torch.no_grad():
            out = self._module(*(torch.from_numpy(np.ascontiguousarray(x)) for x in inputs))
        return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


def load_runtime(path, fmt: str | None = None) -> Runtime:
    """The runtime of an exported file; the format from its suffix unless given."""
    path = Path(path)
    if fmt is None:
        fmt = {suffix: name for name, suffix in FORMATS.items()}.get(path.suffix)
        if fmt is None:
            raise ValueError(
                f"Cannot tell the format of {path} from its suffix; expected one of "
                f"{', '.join(FORMATS.values())}."
            )
    if not path.is_file():
        raise FileNotFoundError(f"No exported policy at {path}.")
    return Runtime(path, fmt)


class _RawTap(Transform):
    """Records the wrapped env's raw observations at each reset and step (parity data)."""

    def __init__(self, keys: list):
        super().__init__(in_keys=keys)
        self.records: list[tuple[bool, list]] = []

    def _record(self, td, is_init: bool):
        self.records.append((is_init, [td.get(k).clone() for k in self.in_keys]))
        return td

    def _call(self, next_tensordict):
        return self._record(next_tensordict, False)

    def _reset(self, tensordict, tensordict_reset):
        return self._record(tensordict_reset, True)


@dataclass
class Reference:
    """The eager policy's episodes: per step the raw observations, ``is_init`` and the action
    the env was given (one-hot actions as their index)."""

    observations: list = field(default_factory=list)  # per step: [obs tensor per key]
    is_init: list = field(default_factory=list)
    actions: list = field(default_factory=list)

    def inputs(self, t: int, stacks: list) -> list[np.ndarray]:
        """The exported file's inputs at step ``t`` (batch 1), given the previous stacks."""
        obs = [x.unsqueeze(0).numpy() for x in self.observations[t]]
        if not stacks:
            return obs
        init = np.array([[self.is_init[t]]], dtype=bool)
        # before the first call no stack exists: any array of the right shape (is_init wins)
        return [*obs, init, *stacks]


def record_reference(env, policy, module: ExportedPolicy, episodes: int, max_steps: int):
    """Play ``episodes`` deterministic episodes (each at most ``max_steps``) of ``policy`` in
    ``env`` and record a :class:`Reference` for ``module``'s inputs."""
    from torchrl_lite import _keys as K
    from torchrl_lite.recipes.common import play_deterministic

    inner = env
    while isinstance(inner.base_env, type(env)) and hasattr(inner.base_env, "base_env"):
        inner = inner.base_env
    tap = _RawTap(module.obs_keys)
    inner.insert_transform(0, tap)
    try:
        rollouts = play_deterministic(env, policy, episodes, max_steps)
    finally:
        inner.transform.pop(0)
    ref, records = Reference(), iter(tap.records)
    for rollout in rollouts:
        actions = rollout.get(K.ACTION)
        if module.one_hot:
            actions = actions.argmax(-1)
        for t in range(rollout.batch_size[-1]):
            is_init, obs = next(records)
            if t == 0 and not is_init:
                raise RuntimeError("parity check: the recorded episode does not start at a reset")
            ref.observations.append(obs)
            ref.is_init.append(t == 0)
            ref.actions.append(actions[t].numpy())
        next(records)  # the observation after the episode's last step
    return ref


def parity(runtime: Runtime, module: ExportedPolicy, reference: Reference) -> float:
    """The largest absolute difference between ``runtime``'s and the eager actions."""
    names, worst = module.input_names, 0.0
    stacks = _first_stacks(module)
    for t, expected in enumerate(reference.actions):
        out = runtime(reference.inputs(t, stacks), names)
        stacks = out[1:]
        diff = np.abs(out[0][0].astype(np.float64) - expected.astype(np.float64))
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return worst


def _first_stacks(module: ExportedPolicy) -> list:
    """Stacks for the first call (batch 1; ``is_init`` replaces them)."""
    return [s.numpy() for s in module.initial_stacks(1)]


def input_description(module: ExportedPolicy, example: tuple) -> tuple[list, list]:
    """``(inputs, outputs)``: name, shape (``"batch"`` first) and dtype of each."""
    with torch.no_grad():
        outputs = module(*example)
    roles = ["observation"] * len(module.obs_keys)
    if module.stack_keys:
        roles += ["is_init"] + ["state"] * len(module.stack_keys)

    def describe(names, tensors, roles=None):
        return [
            {"name": n, "shape": ["batch", *x.shape[1:]], "dtype": str(x.dtype).split(".")[-1],
             **({"role": r} if r else {})}
            for n, x, r in zip(names, tensors, roles or [None] * len(names))
        ]  # fmt: skip

    return describe(module.input_names, example, roles), describe(module.output_names, outputs)
