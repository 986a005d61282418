"""What ``render_policy`` is told (``RenderConfig``) and what its factories receive."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

__all__ = [
    "FrameBundle",
    "RenderConfig",
    "RenderEnvSpec",
    "RenderFormat",
    "RenderPolicySpec",
    "RenderResult",
]

RenderFormat = Literal["mp4", "gif", "png", "jsonl"]
FORMATS = ("mp4", "gif", "png", "jsonl")


@dataclass
class RenderConfig:
    """A render: which checkpoint, how to build the env and the policy, what to write.

    Args:
        ckpt: the checkpoint (a ``torch.save`` file, or a ``torchrl_lite.checkpoint``
            folder or archive, e.g. from ``save_render_checkpoint``).
        policy: ``policy(spec: RenderPolicySpec)`` returns the policy (a TensorDict
            module or callable) or an ``"module:function"`` string naming one.
        env: ``env(spec: RenderEnvSpec)`` returns the env, or a ``"module:function"``.
        num_trajs: episodes to play.
        format: ``"mp4"``, ``"gif"``, ``"png"`` (one file per frame in a folder) or
            ``"jsonl"`` (metadata and per-step events, no frames needed).
        out: the artifact path (default ``render.<format>``; a folder for ``"png"``).
        max_steps: cut each episode after this many steps (a ``StepCounter`` is added).
        fps: frames per second of videos.
        deterministic: play the policy's deterministic action.
        seed: the env's seed (None: unseeded).
        device, policy_device, env_device: where the policy and the env run.
        env_kwargs, policy_kwargs: passed on through the specs.
        auto_load_policy: load the checkpoint's weights (``"model_state_dict"``,
            ``"policy"`` or ``"state_dict"`` entry, or the whole payload) into the
            policy the factory returned, if it has ``load_state_dict``.
        strict_load: ``strict`` for that ``load_state_dict``.
        pixel_key: where frames are read in the rollout; else ``env.render()`` is used.
        overwrite: replace an existing ``out``.
    """

    ckpt: str | Path
    policy: Any
    env: Any
    num_trajs: int = 1
    format: RenderFormat = "mp4"
    out: str | Path | None = None
    max_steps: int | None = None
    fps: float = 30.0
    deterministic: bool = True
    seed: int | None = 0
    device: torch.device | str = "cpu"
    policy_device: torch.device | str | None = None
    env_device: torch.device | str | None = None
    env_kwargs: dict = field(default_factory=dict)
    policy_kwargs: dict = field(default_factory=dict)
    auto_load_policy: bool = True
    strict_load: bool = True
    pixel_key: Any = "pixels"
    overwrite: bool = False

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(
                f"RenderConfig: format must be one of {list(FORMATS)}, got {self.format!r} "
                "(notebook and MuJoCo web viewers are not available in torchrl_lite)."
            )
        if (
            isinstance(self.num_trajs, bool)
            or not isinstance(self.num_trajs, int)
            or self.num_trajs < 1
        ):
            raise ValueError(f"RenderConfig: num_trajs must be an int >= 1, got {self.num_trajs!r}")
        if self.max_steps is not None and (
            not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise ValueError(
                f"RenderConfig: max_steps must be an int >= 1 or None, got {self.max_steps!r}"
            )
        self.ckpt = Path(self.ckpt).expanduser()
        self.out = Path(self.out if self.out is not None else f"render.{self.format}").expanduser()


@dataclass
class RenderEnvSpec:
    """What the env factory receives."""

    device: torch.device
    seed: int | None
    max_steps: int | None
    env_kwargs: dict
    config: RenderConfig
    checkpoint: Any = None


@dataclass
class RenderPolicySpec:
    """What the policy factory receives (``env_specs``: the built env's full specs)."""

    ckpt_path: Path
    checkpoint: Any
    checkpoint_hash: str
    device: torch.device
    env_specs: Any
    policy_kwargs: dict
    config: RenderConfig


@dataclass
class FrameBundle:
    """One rendered frame (``[H, W, 3]`` uint8 array) of one step of one episode."""

    frames: dict
    step: int
    trajectory_index: int
    metadata: dict = field(default_factory=dict)


@dataclass
class RenderResult:
    """What ``render_policy`` produced."""

    artifact_path: Path | None
    trajectories: list
    frame_paths: list
    metadata: dict
    warnings: list
    frames: list = field(default_factory=list)
