"""Export a trained policy to one file with a parity check, and play such a file.

The file (``policy.onnx``, ``policy.pt2`` or ``policy.pt``) gets a description beside it,
``<file>.json``: the format, the recipe and config it was trained with, each input and
output (name, shape with ``"batch"`` first, dtype, role) and the parity check's result
(the largest absolute action difference against the eager policy and the tolerance).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import numpy as np
import torch

from torchrl_lite.export.formats import (
    FORMATS,
    _example_inputs,
    input_description,
    load_runtime,
    parity,
    record_reference,
    save,
)
from torchrl_lite.export.pipeline import ExportError, exportable_policy, flat_transforms

__all__ = ["export_policy", "export_trained", "play_exported", "sidecar_path"]

TOLERANCE = 1e-5
"""Largest absolute action difference accepted (float32 actions)."""


def sidecar_path(path) -> Path:
    """Where the description of an exported file is written: ``<file>.json``."""
    return Path(f"{path}.json")


def export_policy(
    env, policy, path, fmt: str, *, tolerance: float = TOLERANCE, episodes: int = 2,
    max_steps: int = 200, meta: dict | None = None, module=None,
) -> dict:  # fmt: skip
    """Export ``policy`` acting in ``env`` as ``fmt`` to ``path``; check it; describe it.

    The parity check compares the file, loaded by its own runtime, with the eager
    deterministic policy over ``episodes`` episodes of at most ``max_steps`` steps. Above
    ``tolerance`` the file is deleted and ``ExportError`` raised; otherwise the description
    (also written to ``<path>.json``, with ``meta`` merged in) is returned.

    Args:
        env: the env the policy acts in (a recipe's eval env).
        policy: the TensorDict policy.
        path: the file to write.
        fmt: ``"onnx"``, ``"pt2"`` or ``"torchscript"``.
        tolerance: the largest accepted absolute action difference.
        episodes: the episodes of the recorded rollout.
        max_steps: the most steps of each of those episodes.
        meta: extra entries for the description (e.g. the recipe and config).
        module: the :class:`ExportedPolicy` to write (default: built from env and policy).
    """
    if fmt not in FORMATS:
        raise ValueError(f"Unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    path = Path(path)
    module = exportable_policy(env, policy) if module is None else module
    reference = record_reference(env, policy, module, episodes, max_steps)
    example = _example_inputs(module, reference)
    path.parent.mkdir(parents=True, exist_ok=True)
    save(module, path, fmt, example)
    try:
        worst = parity(load_runtime(path, fmt), module, reference)
    except Exception:
        path.unlink(missing_ok=True)
        raise
    if not worst <= tolerance:
        path.unlink(missing_ok=True)
        raise ExportError(
            f"Parity check failed: the {fmt} file's actions differ from the eager policy's by "
            f"up to {worst:.3g} (tolerance {tolerance:g}) over {len(reference.actions)} "
            f"recorded steps; {path} was not kept. A baked transform or the action mapping "
            "does not match the env's; raise tolerance= only for a lower-precision format."
        )
    inputs, outputs = input_description(module, example)
    description = {
        "format": fmt,
        "file": path.name,
        **(meta or {}),
        "inputs": inputs,
        "outputs": outputs,
        "discrete": module.one_hot,
        "parity": {
            "max_abs_diff": worst,
            "tolerance": tolerance,
            "steps": len(reference.actions),
            "runtime": {"onnx": "onnxruntime", "pt2": "torch.export.load"}.get(
                fmt, "torch.jit.load"
            ),
        },
    }
    sidecar_path(path).write_text(json.dumps(description, indent=2))
    return description


def export_trained(recipe, cfg, policy, path, fmt: str, tolerance: float = TOLERANCE) -> dict:
    """Export a recipe's trained deterministic ``policy`` to ``path`` (``torchrl-lite
    export`` loads the run folder, then calls this), checked in the recipe's eval env."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    env = recipe.make_eval_env(cfg)
    try:
        meta = {"algo": recipe.ALGO, "env": cfg.env, "config": dataclasses.asdict(cfg)}
        return export_policy(env, policy, Path(path), fmt, tolerance=tolerance, meta=meta)
    finally:
        env.close()


def _read_description(path: Path) -> dict:
    side = sidecar_path(path)
    if not side.is_file():
        raise FileNotFoundError(
            f"{side} is missing: `torchrl-lite eval --exported` reads the description "
            "written beside the file by `torchrl-lite export`."
        )
    return json.loads(side.read_text())


def play_exported(
    path, env_id: str | None = None, episodes: int = 10, max_steps: int = 2_000
) -> tuple[float, float]:
    """Mean and std of the return of ``episodes`` episodes played by an exported file.

    The file alone picks the actions: it gets the raw observations of the recipe's env
    (without any transform) and its output goes to the env as it is (a one-hot vector
    for discrete gymnasium envs wrapped by ``GymEnv``).
    """
    from torchrl_lite.envs.utils import step_mdp
    from torchrl_lite.recipes import get_recipe

    path = Path(path)
    meta = _read_description(path)
    runtime = load_runtime(path, meta["format"])
    recipe = get_recipe(meta["algo"])
    config = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()}
    cfg = recipe.Config(**{**config, "env": env_id or meta["env"]})
    env = recipe.make_eval_env(cfg)
    base, _ = flat_transforms(env)
    observations = [i for i in meta["inputs"] if i["role"] == "observation"]
    keys = [tuple(i["name"].split(".")) if "." in i["name"] else i["name"] for i in observations]
    for key, info in zip(keys, observations):
        spec = base.observation_spec.get(key, None)
        want = list(info["shape"][1:])
        if spec is None or list(spec.shape) != want:
            have = None if spec is None else list(spec.shape)
            raise ValueError(
                f"{path} takes {info['name']!r} of shape {want}; env {cfg.env!r} gives "
                f"{have}. Play it in the env it was exported for ({meta['env']!r})."
            )
    states = [i for i in meta["inputs"] if i["role"] == "state"]
    names = [i["name"] for i in meta["inputs"]]
    returns = []
    try:
        for _ in range(episodes):
            td, total = base.reset(), 0.0
            stacks = [np.zeros([1, *i["shape"][1:]], dtype=i["dtype"]) for i in states]
            for t in range(max_steps):
                inputs = [td.get(k).unsqueeze(0).numpy() for k in keys]
                if states:
                    inputs += [np.array([[t == 0]]), *stacks]
                out = runtime(inputs, names)
                stacks = out[1:]
                action = torch.as_tensor(out[0][0])
                if meta["discrete"]:
                    action = torch.nn.functional.one_hot(action, base.action_spec.shape[-1])
                td.set("action", action.to(base.action_spec.dtype))
                td = base.step(td)
                total += float(td.get(("next", "reward")).sum())
                if bool(td.get(("next", "done")).any()):
                    break
                td = step_mdp(td)
            returns.append(total)
    finally:
        env.close()
    return statistics.fmean(returns), statistics.pstdev(returns)
