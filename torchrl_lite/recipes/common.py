"""What every recipe shares: env ids to envs, episode-return tracking, small networks.

Env ids are gymnasium ids (``"Pendulum-v1"``) or ``"dm_control/DOMAIN-TASK"``
(``"dm_control/cartpole-swingup"``). Every recipe env carries a ``RewardSum`` transform,
so finished episodes report their return in ``("next", "episode_reward")``. With
``pixels=True`` the env observes its rendered frames instead of its state: the last
``PIXEL_FRAMES`` grayscale ``PIXEL_SIZE``-square frames, stacked in ``"pixels_stack"``.
``"ALE/GAME-v5"`` ids (the ``atari`` family) always observe pixels: their screen,
preprocessed the standard way (see :func:`atari_transforms`).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import statistics
from collections.abc import Callable

import torch
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.data import Bounded, Categorical, MultiStep, OneHot, TensorSpec
from torchrl_lite.envs import (
    CatFrames,
    CatTensors,
    Compose,
    DoubleToFloat,
    EnvBase,
    ExcludeTransform,
    GrayScale,
    GymEnv,
    Resize,
    RewardClipping,
    RewardSum,
    ToTensorImage,
    TransformedEnv,
)
from torchrl_lite.modules import ConvNet
from torchrl_lite.recipes.fields import parse_value, unknown_option
from torchrl_lite.trainers.hooks import TrainerHookBase

__all__ = [
    "PIXELS_STACK",
    "EpisodeReturns",
    "PeriodicEvaluation",
    "PixelEncoder",
    "action_kind",
    "env_family",
    "apply_overrides",
    "atari_transforms",
    "check_can_render",
    "make_env",
    "mlp",
    "observation_network",
    "pixel_transforms",
    "whole_batches",
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
        from torchrl_lite.envs import SerialEnv
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


def whole_batches(frames: int, frames_per_batch: int) -> int:
    """``frames`` rounded up to whole collector batches."""
    return -(-frames // frames_per_batch) * frames_per_batch


def n_step_postproc(n_step, gamma: float):
    """The collector post-processor for ``n_step``-reward targets (None for one step).

    ``MultiStep(gamma, n_step - 1, across_batches=True)``: the off-policy losses'
    one-step estimator then bootstraps with ``gamma ** k`` (see ``MultiStep``).
    """
    if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step < 1:
        raise ValueError(f"n_step must be an int >= 1, got {n_step!r}.")
    return MultiStep(gamma, n_step - 1, across_batches=True) if n_step > 1 else None


def action_kind(spec: TensorSpec) -> str:
    """``"continuous"`` (Bounded float), ``"discrete"`` (OneHot/Categorical) or ``"other"``."""
    if isinstance(spec, (OneHot, Categorical)):
        return "discrete"
    if isinstance(spec, Bounded) and spec.dtype.is_floating_point:
        return "continuous"
    return "other"


def check_action_kind(env: EnvBase, wanted: str, algo: str) -> None:
    """Raise ValueError when the algorithm cannot act in the env (e.g. DQN, continuous)."""
    kind = action_kind(env.action_spec)
    if kind != wanted:
        raise ValueError(
            f"{algo} needs a {wanted} action space, but this env's action spec is "
            f"{type(env.action_spec).__name__} ({kind}). Pick an algorithm for {kind} "
            f"actions ({'dqn' if kind == 'discrete' else 'ppo, sac, td3'})."
        )


def mlp(
    in_features: int,
    out_features: int,
    hidden: int,
    depth: int,
    act=nn.Tanh,
    layer_norm: bool = False,
) -> nn.Module:
    """A plain MLP: ``depth`` hidden layers of ``hidden`` units (with ``layer_norm``, each
    normalized by a ``LayerNorm`` before its activation)."""
    layers, width = [], in_features
    for _ in range(depth):
        norm = [nn.LayerNorm(hidden)] if layer_norm else []
        layers += [nn.Linear(width, hidden), *norm, act()]
        width = hidden
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


class PixelEncoder(nn.Module):
    """uint8 frame stacks ``[*B, C, H, W]`` to features ``[*B, F]``: scaled to ``[0, 1]``,
    then convolutions with ReLUs (default: Nature DQN's 32-64-64 channels, kernels 8-4-3,
    strides 4-2-1)."""

    def __init__(
        self,
        in_channels: int,
        num_cells=(32, 64, 64),
        kernel_sizes=(8, 4, 3),
        strides=(4, 2, 1),
    ):
        super().__init__()
        self.conv = ConvNet(
            in_features=in_channels,
            num_cells=list(num_cells),
            kernel_sizes=list(kernel_sizes),
            strides=list(strides),
            activation_class=nn.ReLU,
        )

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        batch = pixels.shape[:-3]
        # channels-last: oneDNN's convolutions run about 2x faster on CPU with this layout
        x = pixels.reshape(-1, *pixels.shape[-3:]).contiguous(memory_format=torch.channels_last)
        out = self.conv(x / 255)  # uint8 -> float32 in [0, 1], layout kept; [N, F]
        return out.reshape(*batch, *out.shape[1:])

    def out_features(self, shape) -> int:
        """Features per image of shape ``[C, H, W]``."""
        with torch.no_grad():
            return self(torch.zeros(1, *shape, dtype=torch.uint8)).shape[-1]


def observation_network(
    env: EnvBase,
    out_features: int,
    hidden: int,
    depth: int,
    act=nn.Tanh,
    pixels: bool = False,
    layer_norm: bool = False,
) -> tuple[nn.Module, str]:
    """``(net, in_key)``: an :func:`mlp` reading ``"observation"`` or, with ``pixels``, a
    :class:`PixelEncoder` reading ``"pixels_stack"`` followed by that MLP (also without
    ``pixels`` when the env only observes ``"pixels_stack"``: Atari). ``layer_norm``
    normalizes the MLP's hidden layers."""
    if not pixels and K.OBSERVATION not in env.observation_spec.keys():
        pixels = PIXELS_STACK in env.observation_spec.keys()
    if not pixels:
        obs_dim = env.observation_spec[K.OBSERVATION].shape[-1]
        return mlp(obs_dim, out_features, hidden, depth, act, layer_norm), K.OBSERVATION
    shape = env.observation_spec[PIXELS_STACK].shape[-3:]  # [C, H, W]
    encoder = PixelEncoder(shape[0])
    features = encoder.out_features(shape)
    head = mlp(features, out_features, hidden, depth, act, layer_norm)
    return nn.Sequential(encoder, head), PIXELS_STACK


def apply_overrides(config, overrides: dict[str, str]):
    """A copy of a frozen config dataclass with ``key=value`` strings applied.

    Values are parsed by the field's type (:func:`~torchrl_lite.recipes.fields.parse_value`);
    an unknown key raises ValueError naming the closest field. Turning ``pixels`` on also
    applies the recipe module's ``PIXEL_DEFAULTS`` (the other overrides still win).
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    changes = {}
    for key, text in overrides.items():
        if key not in fields:
            raise unknown_option(key, fields, type(config).__name__)
        changes[key] = parse_value(text, type(getattr(config, key)), key)
    if changes.get("pixels") and not getattr(config, "pixels", False):
        recipe = importlib.import_module(type(config).__module__)
        changes = {**getattr(recipe, "PIXEL_DEFAULTS", {}), **changes}
    return dataclasses.replace(config, **changes)


class EpisodeReturns(TrainerHookBase):
    """Track the returns of finished training episodes; stop at a target mean.

    Reads ``("next", "episode_reward")`` where ``("next", "done")`` is set (a
    ``RewardSum`` transform writes it), keeps ``(frames, return)`` per episode, logs
    ``"episode_return"`` (the mean of the last ``window`` episodes) at each batch, and
    ends training once that mean reaches ``target`` (with at least ``window`` episodes).
    In n-step batches (:class:`~torchrl_lite.data.MultiStep`) the last steps of an episode
    all carry its end flag; only the one whose window is its own step
    (``"steps_to_next_obs" == 1``) counts, so each episode is kept once.

    Args:
        window: episodes in the running mean.
        target: stop when the running mean reaches it (None: never stop).
        on_episode: optional callback ``(frames, return)`` for each finished episode.
    """

    def __init__(self, window: int = 10, target: float | None = None, on_episode=None):
        self.window = window
        self.target = target
        self.on_episode: Callable | None = on_episode
        self.history: list[tuple[int, float]] = []
        self.solved_at: int | None = None
        self._trainer = None

    def running_mean(self) -> float:
        last = [r for _, r in self.history[-self.window :]]
        return sum(last) / len(last) if last else -math.inf

    def __call__(self, batch):
        done = batch.get((K.NEXT, K.DONE)).reshape(batch.batch_size)  # [*B, T]
        steps = batch.get("steps_to_next_obs", None)  # n-step windows: [*B, T, 1]
        if steps is not None:
            done = done & (steps.reshape(batch.batch_size) == 1)
        returns = batch.get((K.NEXT, "episode_reward")).reshape(batch.batch_size)
        frames = self._trainer.collected_frames if self._trainer is not None else 0
        for value in returns[done].tolist():  # one host sync per batch
            self.history.append((frames, value))
            if self.on_episode is not None:
                self.on_episode(frames, value)
        if self.history:
            mean = self.running_mean()
            if (
                self.target is not None
                and self.solved_at is None
                and len(self.history) >= self.window
                and mean >= self.target
            ):
                self.solved_at = frames
                if self._trainer is not None:  # finish after this batch's updates
                    self._trainer.total_frames = frames
            return {"episode_return": torch.tensor(mean), "log_pbar": True}
        return None

    def state_dict(self) -> dict:
        return {"history": list(self.history), "solved_at": self.solved_at}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]
        self.solved_at = state["solved_at"]

    def register(self, trainer, name: str = "episode_returns") -> None:
        self._trainer = trainer
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name, self)


def play_deterministic(env: EnvBase, policy, episodes: int, max_steps: int) -> list:
    """``episodes`` rollouts of ``policy``'s deterministic actions, each to its end or ``max_steps``.

    Runs under ``ExplorationType.DETERMINISTIC`` and ``torch.no_grad()``; the episodes are
    played one after the other in ``env``.
    """
    from torchrl_lite.envs import ExplorationType, set_exploration_type

    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        return [env.rollout(max_steps, policy, break_when_any_done=True) for _ in range(episodes)]


class PeriodicEvaluation(TrainerHookBase):
    """Evaluate the deterministic policy every ``interval`` collected frames.

    Each evaluation plays ``episodes`` episodes of ``env`` one after the other, each to its
    end (or ``max_steps`` steps), under ``ExplorationType.DETERMINISTIC`` (the greedy
    action of a Q-network, the mode of a stochastic actor) and ``torch.no_grad()``, and
    appends ``(frames, mean return, std)`` to ``history``; it logs ``"eval_return"``. It runs
    at the first batch past each multiple of ``interval`` and after the last batch; its
    history is checkpointed. The training episodes (:class:`EpisodeReturns`) act with
    exploration; this is the policy a user deploys (SB3's ``EvalCallback``).

    Args:
        env: the evaluation env (not the collector's), e.g. ``recipe.make_eval_env(cfg)``.
        policy: the policy to evaluate.
        interval: collected frames between two evaluations.
        episodes: episodes per evaluation.
        max_steps: the longest episode.

    Example:
        >>> env = make_env("Pendulum-v1", seed=0)
        >>> zero = lambda td: td.set("action", torch.zeros(1))
        >>> evaluation = PeriodicEvaluation(env, zero, interval=1_000, episodes=2)
        >>> out = evaluation()  # without a trainer: evaluate now
        >>> len(evaluation.history), out["eval_return"] < -100
        (1, True)
    """

    def __init__(self, env: EnvBase, policy, *, interval: int, episodes: int = 5,
                 max_steps: int = 10_000):  # fmt: skip
        for name, value in (
            ("interval", interval),
            ("episodes", episodes),
            ("max_steps", max_steps),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PeriodicEvaluation: {name} must be an int >= 1, got {value!r}.")
        self.env, self.policy = env, policy
        self.interval, self.episodes, self.max_steps = interval, episodes, max_steps
        self.history: list[tuple[int, float, float]] = []
        self._trainer = None

    def evaluate(self) -> list[float]:
        """The returns of ``episodes`` deterministic episodes."""
        policy = self.policy
        was_training = isinstance(policy, nn.Module) and policy.training
        if was_training:
            policy.eval()
        try:
            rollouts = play_deterministic(self.env, policy, self.episodes, self.max_steps)
        finally:
            if was_training:
                policy.train()
        return [float(rollout.get((K.NEXT, K.REWARD)).sum()) for rollout in rollouts]

    def __call__(self, batch=None) -> dict | None:
        trainer = self._trainer
        if trainer is not None:
            frames = trainer.collected_frames
            last = self.history[-1][0] if self.history else 0
            final = frames >= trainer.total_frames
            if frames // self.interval <= last // self.interval and not final:
                return None
            if self.history and frames == last:  # already evaluated at this frame count
                return None
        else:
            frames = len(self.history)
        returns = self.evaluate()
        mean, std = statistics.fmean(returns), statistics.pstdev(returns)
        self.history.append((frames, mean, std))
        return {"eval_return": mean, "log_pbar": True}

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]

    def register(self, trainer, name: str = "periodic_evaluation") -> None:
        self._trainer = trainer
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)
