"""Checkpoint in, artifact out: ``render_policy`` and the render checkpoint helpers.

``render_policy(config)`` loads the checkpoint, builds the env and the policy with the
config's factories (loading the weights into the policy), plays ``num_trajs`` episodes
with the deterministic action, and writes a video (mp4, gif), the frames (png) or a JSON
lines log of the steps. Frames come from the rollout's ``pixel_key`` entry, else from
``env.render()`` after each reset and step.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from torchrl_lite.checkpoint import Checkpoint
from torchrl_lite.render._config import (
    FrameBundle,
    RenderConfig,
    RenderEnvSpec,
    RenderPolicySpec,
    RenderResult,
)

__all__ = [
    "call_with_supported_kwargs",
    "checkpoint_hash",
    "import_from_string",
    "infer_state_dict",
    "load_checkpoint",
    "render_policy",
    "save_render_checkpoint",
]

_STATE_KEYS = ("model_state_dict", "policy", "state_dict")


class _StateDict:
    """A state dict as a checkpoint component (saved, and read back into ``value``)."""

    def __init__(self, value=None):
        self.value = value

    def state_dict(self):
        return self.value

    def load_state_dict(self, value):
        self.value = value


def save_render_checkpoint(
    path,
    model,
    *,
    env_metadata=None,
    frames=None,
    metrics=None,
    config=None,
    extra=None,
    format=None,
) -> Path | None:
    """Save what ``render_policy`` needs: the weights and how the env was built.

    Args:
        path: the checkpoint path; None or ``""`` saves nothing.
        model: a module (its ``state_dict()``) or a state dict.
        env_metadata: e.g. ``{"env_name": ...}``, read back at the payload's top level.
        frames: the frames trained so far, recorded.
        metrics: the run's metrics, recorded.
        config: the run's config, recorded.
        extra: more entries, recorded at the payload's top level.
        format: ``"directory"`` or ``"archive"`` (a ``torchrl_lite.checkpoint``); None: one
            ``torch.save`` file holding ``{"model_state_dict": ..., **env_metadata, ...}``.

    Returns:
        the path written, or None.
    """
    if path in (None, ""):
        return None
    path = Path(path).expanduser()
    state = dict(model) if isinstance(model, Mapping) else model.state_dict()
    if format is None:
        payload = {"model_state_dict": state, **dict(env_metadata or {})}
        for name, value in (("frames", frames), ("metrics", metrics), ("config", config)):
            if value is not None:
                payload[name] = int(value) if name == "frames" else dict(value)
        payload.update(dict(extra or {}))
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(payload, path)
        return path
    parts = {"policy": _StateDict(state)}
    for name, value in (
        ("environment_metadata", env_metadata),
        ("metrics", metrics),
        ("config", config),
        ("extra", extra),
    ):
        if value is not None:
            parts[name] = _StateDict(dict(value))
    if frames is not None:
        parts["trainer_state"] = {"frames": int(frames)}
    return Checkpoint(format=format, **parts).save(path)


def load_checkpoint(path, map_location="cpu", *, weights_only: bool | None = None):
    """The payload of a render checkpoint: a ``torchrl_lite.checkpoint`` folder or archive
    (as a dict: ``"model_state_dict"``, the env metadata at the top level, ``frames``, ...)
    or whatever ``torch.load`` reads from a file (trusted files only: not weights-only
    unless asked)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}: the path does not exist.")
    if Checkpoint.is_checkpoint(path):
        stored = Checkpoint.manifest(path)["components"]
        parts = {
            name: _StateDict()
            for name in ("policy", "environment_metadata", "metrics", "config", "extra")
            if name in stored
        }
        trainer = {}
        if "trainer_state" in stored:
            parts["trainer_state"] = trainer
        Checkpoint(strict="ignore", **parts).load(path, map_location=map_location)
        payload = {}
        if "policy" in parts:
            payload["model_state_dict"] = parts["policy"].value
        payload.update(
            parts["environment_metadata"].value if "environment_metadata" in parts else {}
        )
        for name in ("metrics", "config"):
            if name in parts:
                payload[name] = parts[name].value
        if "frames" in trainer:
            payload["frames"] = trainer["frames"]
        payload.update(parts["extra"].value if "extra" in parts else {})
        return payload
    return torch.load(
        path,
        map_location=map_location,
        weights_only=False if weights_only is None else weights_only,
    )


def checkpoint_hash(path) -> str:
    """SHA-256 of the checkpoint file, or of a folder's files and their relative names."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}: the path does not exist.")
    digest = hashlib.sha256()
    for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def infer_state_dict(payload):
    """The policy weights in a checkpoint payload: its ``"model_state_dict"``, ``"policy"``
    or ``"state_dict"`` entry, else the payload itself if it maps names to tensors."""
    if isinstance(payload, Mapping):
        for key in _STATE_KEYS:
            if isinstance(payload.get(key), Mapping):
                return payload[key]
        if payload and all(isinstance(v, torch.Tensor) for v in payload.values()):
            return payload
    return None


def import_from_string(target: str):
    """The object a ``"package.module:name"`` string names."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:name', got {target!r}.")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def call_with_supported_kwargs(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with only the keyword arguments ``fn`` accepts."""
    params = inspect.signature(fn).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(*args, **kwargs)


def _factory(value, what: str):
    if isinstance(value, str):
        value = import_from_string(value)
    if not callable(value):
        raise TypeError(
            f"RenderConfig.{what} must be a factory or a 'module:name' string, got {value!r}."
        )
    return value


def render_policy(config: RenderConfig) -> RenderResult:
    """Render ``config.num_trajs`` episodes of the checkpoint's policy; see the module doc."""
    from torchrl_lite.envs import StepCounter, TransformedEnv
    from torchrl_lite.envs.utils import ExplorationType, set_exploration_type

    out = Path(config.out)
    if out.exists() and not config.overwrite:
        raise FileExistsError(f"{out} exists; pass overwrite=True to replace it.")
    device = torch.device(config.policy_device or config.device)
    payload = load_checkpoint(config.ckpt, map_location=device)
    digest = checkpoint_hash(config.ckpt)
    env_spec = RenderEnvSpec(
        torch.device(config.env_device or config.device),
        config.seed,
        config.max_steps,
        dict(config.env_kwargs),
        config,
        payload,
    )
    env = _factory(config.env, "env")(env_spec)
    warnings_ = []
    try:
        if config.max_steps is not None:
            env = TransformedEnv(env, StepCounter(config.max_steps))
        if config.seed is not None:
            env.set_seed(config.seed)
        policy_spec = RenderPolicySpec(
            Path(config.ckpt),
            payload,
            digest,
            device,
            getattr(env, "full_observation_spec", None),
            dict(config.policy_kwargs),
            config,
        )
        policy = _factory(config.policy, "policy")(policy_spec)
        if config.auto_load_policy and callable(getattr(policy, "load_state_dict", None)):
            state = infer_state_dict(payload)
            if state is None:
                raise ValueError(
                    f"{config.ckpt} holds no policy weights ('model_state_dict', 'policy' or "
                    "'state_dict'); pass auto_load_policy=False if the factory loads them."
                )
            policy.load_state_dict(state, strict=config.strict_load)
        if isinstance(policy, torch.nn.Module):
            policy.eval()
        mode = ExplorationType.DETERMINISTIC if config.deterministic else ExplorationType.RANDOM
        trajectories, frames = [], []
        start = time.perf_counter()
        with torch.no_grad(), set_exploration_type(mode):
            for i in range(config.num_trajs):
                traj, shots = _play(env, policy, config, i, warnings_)
                trajectories.append(traj)
                frames.append(shots)
        seconds = time.perf_counter() - start
    finally:
        env.close()
    metadata = {
        "format": config.format,
        "num_trajs": len(trajectories),
        "max_steps": config.max_steps,
        "fps": config.fps,
        "seconds": seconds,
        "checkpoint": {"path": str(config.ckpt), "sha256": digest},
        "trajectories": [
            {
                "index": i,
                "steps": int(t.batch_size[0]),
                "return": float(t.get(("next", "reward")).sum())
                if ("next", "reward") in t.keys(True)
                else None,
            }
            for i, t in enumerate(trajectories)
        ],
        "warnings": warnings_,
    }
    result = RenderResult(out, trajectories, [], metadata, warnings_, frames)
    _write(result, config)
    return result


def _play(env, policy, config: RenderConfig, index: int, notes: list):
    """One episode as a ``[T]`` TensorDict, and its frames."""
    from torchrl_lite.envs.utils import step_mdp

    shots = []
    want_frames = config.format != "jsonl"

    def snap(td, step):
        if not want_frames:
            return
        frame = td.get(config.pixel_key, None) if td is not None else None
        if frame is None and callable(getattr(env, "render", None)):
            frame = env.render()
        if frame is None:
            return
        frame = torch.as_tensor(np.asarray(frame)) if not isinstance(frame, torch.Tensor) else frame
        if frame.dtype != torch.uint8:
            frame = (
                (frame.float().clamp(0, 1) * 255).to(torch.uint8)
                if frame.is_floating_point()
                else frame.to(torch.uint8)
            )
        if frame.ndim == 3 and frame.shape[0] in (1, 3) and frame.shape[-1] not in (1, 3):
            frame = frame.permute(1, 2, 0)  # [C, H, W] -> [H, W, C]
        shots.append(FrameBundle({"default": frame.cpu().numpy()}, step, index))

    td = env.reset()
    snap(td, 0)
    steps, limit = [], config.max_steps or 10**9
    while len(steps) < limit:
        td = policy(td)
        td = env.step(td)
        steps.append(td.clone())
        snap(td.get("next"), len(steps))
        if bool(td.get(("next", "done")).any()):
            break
        td = step_mdp(td)
    if want_frames and not shots:
        raise ValueError(
            f"format={config.format!r} needs frames: the rollout has no {config.pixel_key!r} entry "
            "and the env has no render(); build the env with from_pixels=True or use format='jsonl'."
        )
    return torch.stack(steps), shots


def _write(result: RenderResult, config: RenderConfig) -> None:
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if config.format == "jsonl":
        with open(tmp, "w") as f:
            f.write(json.dumps({"type": "metadata", **result.metadata}) + "\n")
            for i, traj in enumerate(result.trajectories):
                rewards = traj.get(("next", "reward")).reshape(len(traj), -1).sum(-1).tolist()
                done = traj.get(("next", "done")).reshape(len(traj), -1).any(-1).tolist()
                for t in range(len(traj)):
                    f.write(
                        json.dumps(
                            {
                                "type": "step",
                                "trajectory": i,
                                "step": t,
                                "reward": rewards[t],
                                "done": done[t],
                            }
                        )
                        + "\n"
                    )
    elif config.format == "png":
        import imageio.v2 as imageio

        tmp.mkdir()
        for shots in result.frames:
            for shot in shots:
                file = tmp / f"traj{shot.trajectory_index:03d}_step{shot.step:05d}.png"
                imageio.imwrite(file, shot.frames["default"])
        result.frame_paths = sorted(out / p.name for p in tmp.iterdir())
    else:
        import imageio.v2 as imageio

        tmp = tmp.with_suffix(out.suffix or f".{config.format}")
        timing = {"duration": 1000 / config.fps} if config.format == "gif" else {"fps": config.fps}
        with imageio.get_writer(tmp, format=config.format.upper(), **timing) as writer:
            for shots in result.frames:
                for shot in shots:
                    writer.append_data(shot.frames["default"])
    if out.is_dir():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()
    os.replace(tmp, out)
    result.artifact_path = out
