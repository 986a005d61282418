"""Render a trained policy from its checkpoint: a video, frames or a step log (TorchRL's
``torchrl.render``, without its notebook and web viewers).

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from torchrl_lite.envs import PendulumEnv
    >>> folder = Path(tempfile.mkdtemp())
    >>> torch.save({}, folder / "policy.pt")
    >>> def policy(spec):
    ...     return lambda td: td.set("action", torch.zeros(1))
    >>> config = RenderConfig(ckpt=folder / "policy.pt", policy=policy,
    ...     env=lambda spec: PendulumEnv(), max_steps=3, format="jsonl",
    ...     out=folder / "render.jsonl", auto_load_policy=False)
    >>> render_policy(config).metadata["trajectories"][0]["steps"]
    3
"""

from torchrl_lite.render._config import (
    FrameBundle,
    RenderConfig,
    RenderEnvSpec,
    RenderFormat,
    RenderPolicySpec,
    RenderResult,
)
from torchrl_lite.render._render import (
    call_with_supported_kwargs,
    checkpoint_hash,
    import_from_string,
    infer_state_dict,
    load_checkpoint,
    render_policy,
    save_render_checkpoint,
)

__all__ = [
    "FrameBundle",
    "RenderConfig",
    "RenderEnvSpec",
    "RenderFormat",
    "RenderPolicySpec",
    "RenderResult",
    "call_with_supported_kwargs",
    "checkpoint_hash",
    "import_from_string",
    "infer_state_dict",
    "load_checkpoint",
    "render_policy",
    "save_render_checkpoint",
]
