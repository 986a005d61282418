"""Env ids to envs with the recipes' pipelines: the env that ``torchrl-lite train`` builds.

Ids are gymnasium ids (``"Pendulum-v1"``), ``"dm_control/DOMAIN-TASK"``
(``"dm_control/cartpole-swingup"``) or ``"ALE/GAME-v5"``. Every env carries a ``RewardSum``
transform, so finished episodes report their return in ``("next", "episode_reward")``.
With ``pixels=True`` the env observes its rendered frames instead of its state: the last
``PIXEL_FRAMES`` grayscale ``PIXEL_SIZE``-square frames, stacked in ``"pixels_stack"``.
Atari ids (the ``atari`` family) always observe pixels: their screen, preprocessed the
standard way (see :func:`atari_transforms`). :func:`env_family` names the family that
recipes key their per-family defaults by.
"""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.libs.gym import GymEnv
from torchrl_lite.envs.transforms import (
    CatFrames,
    CatTensors,
    Compose,
    DoubleToFloat,
    ExcludeTransform,
    GrayScale,
    Resize,
    RewardClipping,
    RewardSum,
    ToTensorImage,
    TransformedEnv,
)

__all__ = [
    "ATARI_PREFIX",
    "DM_CONTROL_PREFIX",
    "PIXELS_STACK",
    "atari_transforms",
    "check_can_render",
    "env_family",
    "make_env",
    "pixel_transforms",
]

DM_CONTROL_PREFIX = "dm_control/"
ATARI_PREFIX = "ALE/"
PIXELS_STACK = "pixels_stack"
"""The preprocessed frame stack the pixel networks read (the raw ``"pixels"`` stay free
for ``eval --video``)."""
PIXEL_SIZE = 64
"""Side of the square frames: PlaNet/Dreamer's size, (84/64)^2 = 1.7x cheaper than 84."""
ATARI_SIZE = 84
"""Side of the Atari frames (Nature DQN's)."""
PIXEL_FRAMES = 4
"""Frames per stack, so that velocities are observable (Nature DQN's 4)."""


def make_env(
    env_id: str,
    num_envs: int = 0,
    seed: int | None = None,
    pixels: bool = False,
    grayscale: bool = True,
    **kwargs,
) -> EnvBase:
    """A recipe env: gymnasium (vectorized when ``num_envs``) or dm_control, with RewardSum.

    float64 observations (MuJoCo) are cast to float32; dm_control envs get their dict
    observation concatenated into one float32 ``"observation"``; ``num_envs`` copies of
    them run in a ``SerialEnv``. With ``pixels`` the env renders and observes
    ``"pixels_stack"`` (see :func:`pixel_transforms`) instead of its state;
    ``from_pixels=True`` in ``kwargs`` (what ``eval --video`` passes) keeps the raw
    ``"pixels"`` frames too; ``grayscale=False`` stacks RGB frames instead of luma.
    """
    if env_id.startswith(ATARI_PREFIX):
        return _make_atari_env(env_id, num_envs, seed, **kwargs)
    keep_raw = False
    if pixels:
        check_can_render(env_id)
        keep_raw = kwargs.pop("from_pixels", False)
        kwargs = {"pixels_only": True, **kwargs, "from_pixels": True}
    transforms: list = []
    if env_id.startswith(DM_CONTROL_PREFIX):
        from torchrl_lite.envs.batched_envs import SerialEnv
        from torchrl_lite.envs.libs.dm_control import DMControlEnv

        domain, _, task = env_id[len(DM_CONTROL_PREFIX) :].partition("-")

        def one():
            base = DMControlEnv(domain, task, **kwargs)
            keys = [k for k in base.observation_spec.keys() if k != K.PIXELS]
            if not keys:  # pixels only; float64 actions still cast
                return TransformedEnv(base, DoubleToFloat())
            return TransformedEnv(
                base, Compose(DoubleToFloat(), CatTensors(in_keys=keys, out_key=K.OBSERVATION))
            )

        env = SerialEnv(num_envs, one) if num_envs else one()
    else:
        env = GymEnv(env_id, num_envs=num_envs, **kwargs)
        if any(spec.dtype == torch.float64 for spec in env.observation_spec.values(True, True)):
            transforms.append(DoubleToFloat())  # gymnasium's MuJoCo envs: the nets are float32
    if pixels:
        transforms.append(pixel_transforms(keep_raw, grayscale=grayscale))
    transforms.append(RewardSum())
    env = TransformedEnv(env, transforms[0] if len(transforms) == 1 else Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env


def check_can_render(env_id: str) -> None:
    """ValueError unless the gymnasium env ``env_id`` renders ``rgb_array`` frames.

    Read from the env class's ``metadata["render_modes"]`` (nothing is built); dm_control
    envs always render.
    """
    if env_id.startswith(DM_CONTROL_PREFIX):
        return
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    spec = gymnasium.envs.registry.get(env_id)
    if spec is None:
        return  # GymEnv reports the unknown id
    creator = spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    modes = list(getattr(creator, "metadata", {}).get("render_modes", []))
    if "rgb_array" not in modes:
        raise ValueError(
            f"pixels=true needs an env that renders with render_mode='rgb_array', but "
            f"{env_id!r} offers render modes {modes}. Pick an env that renders rgb_array "
            "frames, or drop pixels=true to learn from its state."
        )


def _make_atari_env(env_id: str, num_envs: int, seed: int | None, **kwargs) -> EnvBase:
    """An ``ALE/...-v5`` env: the screen as ``"pixels"``, then :func:`atari_transforms`."""
    try:
        import ale_py
    except ImportError as err:
        raise ImportError(f"{env_id!r} needs ale-py: pip install 'torchrl-lite[atari]'") from err
    import gymnasium

    gymnasium.register_envs(ale_py)
    keep_raw = kwargs.pop("from_pixels", False)
    kwargs.pop("pixels_only", None)
    env = GymEnv(env_id, num_envs=num_envs, **kwargs)  # "pixels": [*B, 210, 160, 3] uint8
    env = TransformedEnv(env, atari_transforms(keep_raw))
    if seed is not None:
        env.set_seed(seed)
    return env


def atari_transforms(keep_raw: bool = False) -> Compose:
    """Standard Atari preprocessing on a ``v5`` env (Machado et al. 2018's protocol).

    ALE's v5 envs already repeat each action 4 times and repeat the previous action with
    probability 0.25 (sticky actions, in place of no-op starts); episodes last until the
    game is over (no life-loss terminals). On top of the screen (``"pixels"``):
    grayscale, an 84x84 area resize and 4 stacked frames (Mnih et al. 2015) in
    ``"pixels_stack"``, ``RewardSum`` of the raw score into ``"episode_reward"``, then
    rewards clipped to ``[-1, 1]`` for learning.
    """
    return Compose(
        pixel_transforms(keep_raw, size=ATARI_SIZE),
        RewardSum(),  # the game score, before clipping
        RewardClipping(-1.0, 1.0),
    )


def pixel_transforms(
    keep_raw: bool = False, size: int = PIXEL_SIZE, grayscale: bool = True
) -> Compose:
    """Raw uint8 ``"pixels"`` ``[*B, H, W, 3]`` to a uint8 ``"pixels_stack"`` ``[*B, 4, 64, 64]``.

    Grayscale (colour carries no state in these scenes; ``grayscale=False`` keeps the RGB
    planes: ``[*B, 12, 64, 64]``), an area-averaging resize (a
    bilinear one without antialiasing samples 4 of the ~60 source pixels per output pixel,
    aliasing thin shapes like CartPole's pole) and the last ``PIXEL_FRAMES`` frames. The
    stack stays uint8 (a quarter of float32's memory in a replay buffer); the networks
    scale it to ``[0, 1]`` (see :class:`PixelEncoder`).

    Args:
        keep_raw: keep the raw ``"pixels"`` (for videos); otherwise they are dropped.
        size: the side of the square frames.
        grayscale: convert to one luma plane per frame (else 3 RGB planes per frame).
    """
    steps = [
        ToTensorImage(
            from_int=False, dtype=torch.uint8, in_keys=[K.PIXELS], out_keys=[PIXELS_STACK]
        ),  # [*B, 3, H, W]
        *([GrayScale(in_keys=[PIXELS_STACK])] if grayscale else []),  # [*B, 1 or 3, H, W]
        Resize(size, size, interpolation="area", in_keys=[PIXELS_STACK]),  # [*B, c, 64, 64]
        CatFrames(N=PIXEL_FRAMES, dim=-3, in_keys=[PIXELS_STACK]),  # [*B, 4c, 64, 64]
    ]
    if not keep_raw:
        steps.append(ExcludeTransform(K.PIXELS))
    return Compose(*steps)


def env_family(env_id: str) -> str:
    """``"dm_control"``, ``"mujoco"`` (gymnasium's MuJoCo envs), ``"atari"`` (``ALE/...``)
    or ``"classic"`` (the rest).

    Recipes key their ``ENV_DEFAULTS`` by family: the physics tasks want bigger networks,
    slower targets and longer budgets than classic control.

    Example:
        >>> env_family("HalfCheetah-v5"), env_family("dm_control/cartpole-swingup")
        ('mujoco', 'dm_control')
        >>> env_family("Pendulum-v1")
        'classic'
    """
    if env_id.startswith(DM_CONTROL_PREFIX):
        return "dm_control"
    if env_id.startswith(ATARI_PREFIX):
        return "atari"
    import gymnasium

    spec = gymnasium.envs.registry.get(env_id)
    entry = getattr(spec, "entry_point", "") if spec is not None else ""
    if isinstance(entry, str) and ".mujoco" in entry:
        return "mujoco"
    return "classic"
