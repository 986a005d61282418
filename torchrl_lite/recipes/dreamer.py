"""Dreamer (world model + actor-critic in imagination) from pixels: config, builders.

Paper: Hafner et al. 2020, https://arxiv.org/abs/1912.01603. Losses in
:mod:`torchrl_lite.objectives.dreamer`, networks in :mod:`torchrl_lite.modules.models.dreamer`,
imagination in :class:`~torchrl_lite.envs.DreamerEnv`.

Dreamer learns from 64x64 RGB renders (no frame stack: the RSSM carries the history); an
env that cannot render ``rgb_array`` frames raises ValueError. ``pixels=false`` is a
state-based mode: the env's flat observation vector, with MLP encoder and decoder in place
of the convolutions (everything else the same); it separates learning the representation
from learning to act in imagination. ``frames`` counts agent steps; each repeats its action
``action_repeat`` times.

The defaults are a configuration shrunk for two CPU cores: encoder/decoder depth 16,
state 30, belief 100, hidden 100, batches of 16 slices of 32 steps, 50 updates per 250
collected steps (1000 env frames at ``action_repeat=4``), imagination horizon 15. The
paper's full size is ``FULL_SIZE`` (depth 32, belief 200, hidden 200, 50 x 50 batches,
100 updates per 1000 env frames, action repeat 2)::

    torchrl-lite train dreamer depth=32 belief_dim=200 hidden=200 batch_size=50 \\
        slice_len=50 optim_steps_per_batch=100 frames_per_batch=500 action_repeat=2 \\
        frames=50000 init_random_frames=2500

Why the defaults differ from the paper (the runs behind each: ``docs/notes/pixels.md``):
the KL is DreamerV2's (``free_nats=1 kl_balance=0.8``), since under Dreamer's 3 free nats
the prior gets no gradient and its imagined rewards stop carrying information; the actor
and value model take Adam steps of 3.2e-4 with an entropy bonus in imagination
(``actor_entropy=0.1``) and a slow value model (``slow_value_interval=100``), since this
configuration does ~10x less gradient work per env frame than the paper; from pixels the
reward term of the world-model loss weighs 30x (``reward_scale``), since the reconstruction
sums ~12k pixel errors and at equal weights the model drops the 1-2 pixel pole the reward
depends on. The target (300 on cartpole-swingup) is reached within 100k env frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.data.replay_buffers import SliceSampler
from torchrl_lite.envs import (
    Compose,
    DreamerEnv,
    ExcludeTransform,
    InitTracker,
    Resize,
    ToTensorImage,
    TransformedEnv,
)
from torchrl_lite.modules import (
    MLP,
    ObsDecoder,
    ObsEncoder,
    ProbabilisticActor,
    RewardHead,
    RSSMPosterior,
    RSSMPrior,
    TanhNormal,
    TruncatedNormal,
)
from torchrl_lite.modules.models.dreamer import RSSMPolicy
from torchrl_lite.objectives import (
    DreamerActorLoss,
    DreamerLoss,
    DreamerModelLoss,
    DreamerValueLoss,
    HardUpdate,
)
from torchrl_lite.recipes.common import (
    DM_CONTROL_PREFIX,
    PIXELS_STACK,
    check_action_kind,
    check_can_render,
    make_env,
    mlp,
    whole_batches,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import OptimizerHook, ReplayBufferTrainer, Trainer

ALGO = "dreamer"
ACTIONS = "continuous"
TARGETS = {"dm_control/cartpole-swingup": 300.0}
ENV_DEFAULTS: dict = {}
FULL_SIZE = dict(
    depth=32, belief_dim=200, hidden=200, batch_size=50, slice_len=50,
    optim_steps_per_batch=100, frames_per_batch=500, action_repeat=2, frames=50_000,
    init_random_frames=2500, buffer_size=50_000,
)  # fmt: skip
"""The paper's sizes (``config_for(recipe, **FULL_SIZE)``; the CLI line is in the docstring)."""


@dataclass(frozen=True)
class Config:
    """Dreamer settings; the defaults are the two-core configuration (module docstring)."""

    env: str = "dm_control/cartpole-swingup"
    """dm_control/DOMAIN-TASK or a gymnasium id that renders rgb_array frames."""
    frames: int = 25_000
    """Agent steps (x ``action_repeat`` env frames; 25k x 4 = the issue's 100k frames)."""
    seed: int = 0
    """Seeds torch and the envs."""
    pixels: bool = True
    """True: 64x64 RGB renders; False: the env's flat state observation, MLP encoder and
    decoder (``hidden`` units, 2 layers each)."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    action_repeat: int = 4
    """Env steps per agent step."""
    init_random_frames: int = 1000
    """Agent steps of uniform random actions before learning starts (4 episodes)."""
    frames_per_batch: int = 250
    """Agent steps collected between two rounds of updates (1000 env frames)."""
    optim_steps_per_batch: int = 50
    """Updates after each batch (Dreamer: 100 per 1000 env frames; 25 here halved the
    learning speed from pixels: module docstring)."""
    batch_size: int = 16
    """Slices per update."""
    slice_len: int = 32
    """Steps per slice."""
    buffer_size: int = 25_000
    """Replay capacity in steps (each holds two uint8 [3, 64, 64] images: 24 KiB)."""
    depth: int = 16
    """Channels of the first encoder convolution (Dreamer: 32)."""
    state_dim: int = 30
    """Stochastic state size."""
    belief_dim: int = 100
    """GRU (deterministic state) size (Dreamer: 200)."""
    hidden: int = 100
    """Units of the RSSM, reward, value and actor layers (Dreamer: 200-400)."""
    horizon: int = 15
    """Imagination horizon."""
    model_lr: float = 6e-4
    """Adam step of the world model."""
    actor_lr: float = 3.2e-4
    """Adam step of the actor (Dreamer: 8e-5, with ~10x the gradient work per frame; 4x
    Dreamer's here: module docstring)."""
    value_lr: float = 3.2e-4
    """Adam step of the value model (Dreamer: 8e-5)."""
    gamma: float = 0.99
    """Discount of the imagined returns."""
    lmbda: float = 0.95
    """Lambda of the imagined returns."""
    free_nats: float = 1.0
    """The KL is not pushed below this (DreamerV2: 1; Dreamer: 3, which left the prior
    untrained here: module docstring)."""
    kl_balance: float | None = 0.8
    """A number in [0, 1]: DreamerV2's balancing (0.8: the prior moves towards the posterior
    4x faster than the reverse); None: Dreamer's KL."""
    reward_scale: float | None = None
    """Weight of the reward term of the world-model loss; None: 30 from pixels, 1 from the
    state (Dreamer: 1). The reconstruction sums ~12k pixel errors, so at 1 the reward barely
    shapes a pixel representation."""
    exploration_noise: float = 0.3
    """Gaussian action noise while collecting."""
    actor_dist: str = "tanh_normal"
    """``tanh_normal`` (Dreamer: a Normal squashed by tanh, mean ``actor_mean_scale *
    tanh(x / actor_mean_scale)``) or ``trunc_normal`` (DreamerV2: a Normal with mean
    ``tanh(x)`` and std ``2 sigmoid(x / 2) + 0.1``, truncated to the action bounds; the
    ``actor_*_std`` and ``actor_mean_scale`` settings do not apply)."""
    actor_mean_scale: float = 5.0
    """The actor's pre-tanh mean is ``scale * tanh(raw / scale)`` (Dreamer: 5)."""
    actor_init_std: float = 5.0
    """The actor's pre-tanh std at a zero output (Dreamer: 5); ``actor_min_std`` is added."""
    actor_min_std: float = 1e-4
    """Floor of the actor's pre-tanh std (Dreamer: 1e-4)."""
    detach_actor_inputs: bool = False
    """The actor reads detached model states in imagination (Dreamer's code does)."""
    actor_entropy: float = 0.1
    """Weight of the actor's entropy bonus in imagination, against returns in the env's own
    units (Dreamer: 0; DreamerV3: 3e-4 on returns divided by their 5-95 percentile range,
    about 0.03-0.1 on dm_control's). At 0 the actor ends bang-bang (module docstring)."""
    slow_value_interval: int = 100
    """Above 0: the lambda-returns bootstrap with a copy of the value model refreshed every
    this many updates (DreamerV2's target critic: 100); 0: with the value model itself
    (Dreamer)."""
    max_grad_norm: float = 100.0
    """Gradient-norm clip."""
    clip_per_part: bool = True
    """Clip the world model's, the actor's and the value model's gradient norms each on its
    own (Dreamer); False: one norm over all three."""
    layer_norm: bool = False
    """A ``LayerNorm`` before the ELU of every hidden layer of the RSSM, the reward head, the
    actor and the value model (as DreamerV3 normalizes its layers; the image encoder and
    decoder and the state-mode MLPs are left as they are)."""


def obs_key(cfg: Config) -> str:
    """What the world model observes: ``"pixels_stack"`` or (``pixels=false``) ``"observation"``."""
    return PIXELS_STACK if cfg.pixels else K.OBSERVATION


def make_train_env(cfg: Config, seed_offset: int = 0, video: bool = False):
    """64x64 RGB uint8 renders ``"pixels_stack"`` ``[3, 64, 64]`` and ``"is_init"``; with
    ``pixels=false`` the flat ``"observation"`` ``[D]`` and ``"is_init"``."""
    if not cfg.pixels:
        return _make_state_env(cfg, seed_offset, video)
    check_can_render(cfg.env)
    kwargs = {"from_pixels": True, "pixels_only": True}
    if cfg.action_repeat > 1:
        kwargs["frame_skip"] = cfg.action_repeat
    if cfg.env.startswith(DM_CONTROL_PREFIX):
        kwargs["render_kwargs"] = {"height": 64, "width": 64, "camera_id": 0}
    env = make_env(cfg.env, seed=cfg.seed + seed_offset, **kwargs)
    check_action_kind(env, ACTIONS, "Dreamer")
    steps = [
        ToTensorImage(
            from_int=False, dtype=torch.uint8, in_keys=[K.PIXELS], out_keys=[PIXELS_STACK]
        ),  # [3, H, W]
        Resize(64, 64, interpolation="area", in_keys=[PIXELS_STACK]),  # [3, 64, 64]
        InitTracker(),
    ]
    if not video:
        steps.append(ExcludeTransform(K.PIXELS))
    return TransformedEnv(env, Compose(*steps))


def _make_state_env(cfg: Config, seed_offset: int, video: bool):
    kwargs = {"frame_skip": cfg.action_repeat} if cfg.action_repeat > 1 else {}
    if video:  # eval --video: the renders next to the state
        kwargs.update(from_pixels=True, pixels_only=False)
    env = make_env(cfg.env, seed=cfg.seed + seed_offset, **kwargs)
    check_action_kind(env, ACTIONS, "Dreamer")
    spec = env.observation_spec.get(K.OBSERVATION, None)
    if spec is None or len(spec.shape) != 1 or not spec.dtype.is_floating_point:
        raise ValueError(
            f"Dreamer with pixels=false needs a flat float {K.OBSERVATION!r} vector; "
            f"{cfg.env!r} observes {env.observation_spec}. Use pixels=true."
        )
    return TransformedEnv(env, InitTracker())


def make_eval_env(cfg: Config, **kwargs):
    video = bool(kwargs.pop("from_pixels", False))  # eval --video: keep the raw frames
    return make_train_env(cfg, seed_offset=10_000, video=video)


def make_world_model(cfg: Config, env):
    """``(encoder, decoder, prior, posterior, reward_head)`` for the env's observations and
    actions: convolutions for images, MLPs (2 x ``hidden``, ELU) for a state vector."""
    action_dim = env.action_spec.shape[-1]
    features = cfg.state_dim + cfg.belief_dim
    if cfg.pixels:
        channels = env.observation_spec[PIXELS_STACK].shape[-3]
        encoder = ObsEncoder(channels, cfg.depth)
        decoder = ObsDecoder(features, channels, cfg.depth)
    else:
        dim = env.observation_spec[K.OBSERVATION].shape[-1]
        sizes = dict(num_cells=cfg.hidden, depth=2, activation=nn.ELU)
        encoder = MLP(in_features=dim, out_features=cfg.hidden, **sizes)
        decoder = MLP(in_features=features, out_features=dim, **sizes)
    norm = dict(layer_norm=cfg.layer_norm)
    prior = RSSMPrior(action_dim, cfg.state_dim, cfg.belief_dim, cfg.hidden, **norm)
    posterior = RSSMPosterior(
        cfg.belief_dim, encoder.out_features, cfg.state_dim, cfg.hidden, **norm
    )
    return encoder, decoder, prior, posterior, RewardHead(features, cfg.hidden, 2, **norm)


def make_actor_value(cfg: Config, env):
    """A TanhNormal actor on ``("state", "belief")`` and a 3-layer value model."""
    spec = env.action_spec
    features = cfg.state_dim + cfg.belief_dim
    # 3 ELU layers, then loc and scale (params has no weights: the init order is unchanged)
    layers = mlp(features, 2 * spec.shape[-1], cfg.hidden, 3, nn.ELU, cfg.layer_norm)
    if cfg.actor_dist == "trunc_normal":
        params, dist = TruncNormalActorParams(), TruncatedNormal
    elif cfg.actor_dist == "tanh_normal":
        params = DreamerActorParams(cfg.actor_mean_scale, cfg.actor_init_std, cfg.actor_min_std)
        dist = TanhNormal
    else:
        raise ValueError(
            f"dreamer: actor_dist must be 'tanh_normal' or 'trunc_normal', got {cfg.actor_dist!r}."
        )
    net = nn.Sequential(*layers, params)
    actor = ProbabilisticActor(
        TensorDictModule(_Joined(net), in_keys=["state", "belief"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=dist,
        distribution_kwargs={"low": spec.low, "high": spec.high},
        return_log_prob=True,  # the actor loss's entropy estimate
    )
    return actor, RewardHead(features, cfg.hidden, 3, layer_norm=cfg.layer_norm)


class DreamerActorParams(nn.Module):
    """Dreamer's actor parameters: ``[*B, 2A]`` -> ``(loc, scale)``, each ``[*B, A]``.

    ``loc = mean_scale * tanh(raw / mean_scale)`` keeps the pre-tanh mean within
    ``+-mean_scale``, and ``scale = softplus(raw + c) + min_std`` starts at ``init_std``
    (``c = softplus^-1(init_std)``). Without the bound the mean can run far past where
    the TanhNormal saturates, where tanh passes no gradient back to it and the actor
    stays stuck on one bound.

    Example:
        >>> loc, scale = DreamerActorParams()(torch.zeros(2, 2))
        >>> loc.tolist(), [round(s, 4) for s in scale.flatten().tolist()]
        ([[0.0], [0.0]], [5.0001, 5.0001])
        >>> float(DreamerActorParams()(torch.tensor([1e3, 0.0]))[0])
        5.0
    """

    def __init__(self, mean_scale: float = 5.0, init_std: float = 5.0, min_std: float = 1e-4):
        super().__init__()
        if mean_scale <= 0 or init_std <= 0 or min_std < 0:
            raise ValueError(
                f"DreamerActorParams: mean_scale and init_std must be > 0 and min_std >= 0, "
                f"got {mean_scale}, {init_std}, {min_std}."
            )
        self.mean_scale, self.min_std = float(mean_scale), float(min_std)
        self.raw_init_std = math.log(math.expm1(init_std))  # softplus(raw_init_std) == init_std

    def forward(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = raw.chunk(2, dim=-1)
        loc = self.mean_scale * torch.tanh(mean / self.mean_scale)
        scale = nn.functional.softplus(std + self.raw_init_std) + self.min_std
        return loc, scale


class TruncNormalActorParams(nn.Module):
    """DreamerV2's truncated-normal actor parameters: ``[*B, 2A]`` -> ``(loc, scale)``.

    ``loc = tanh(raw_mean)`` and ``scale = 2 sigmoid(raw_std / 2) + min_std``, for a
    :class:`~torchrl_lite.modules.TruncatedNormal` on the action bounds. Its samples are
    not squashed, so an action near a bound keeps the gradient a tanh-squashed sample
    loses there (a saturated TanhNormal's ``d action / d mean`` is ~2e-4). An option, not
    the default: on cartpole-swingup it did not prevent the collapse it was meant for.

    Example:
        >>> loc, scale = TruncNormalActorParams()(torch.zeros(1, 2))
        >>> round(float(loc), 4), round(float(scale), 4)
        (0.0, 1.1)
    """

    def __init__(self, min_std: float = 0.1):
        super().__init__()
        self.min_std = float(min_std)

    def forward(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = raw.chunk(2, dim=-1)
        return torch.tanh(mean), 2 * torch.sigmoid(std / 2) + self.min_std


class _Joined(nn.Module):
    """Calls ``net`` on its inputs joined along the last dim."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, *inputs):
        return self.net(torch.cat(inputs, -1))


def make_model_loss(cfg: Config, env) -> DreamerModelLoss:
    """The world model (:func:`make_world_model`) inside its loss, with the config's weights."""
    return DreamerModelLoss(
        *make_world_model(cfg, env), pixels_key=obs_key(cfg), kl_balance=cfg.kl_balance,
        free_nats=cfg.free_nats, reward_scale=reward_scale(cfg),
    )  # fmt: skip


def reward_scale(cfg: Config) -> float:
    """The reward term's weight: ``cfg.reward_scale``, or 30 from pixels and 1 from the state."""
    if cfg.reward_scale is not None:
        return cfg.reward_scale
    return 30.0 if cfg.pixels else 1.0


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    model_loss = make_model_loss(cfg, env)
    actor, value = make_actor_value(cfg, env)
    model_env = DreamerEnv(model_loss.prior, model_loss.reward_head, env.action_spec)
    actor_loss = DreamerActorLoss(
        actor, value, model_env, imagination_horizon=cfg.horizon, gamma=cfg.gamma,
        lmbda=cfg.lmbda, entropy_coef=cfg.actor_entropy,
        detach_actor_inputs=cfg.detach_actor_inputs, delay_value=cfg.slow_value_interval > 0,
    )  # fmt: skip
    loss = DreamerLoss(model_loss, actor_loss, DreamerValueLoss(value), slice_len=cfg.slice_len)
    spec = env.action_spec
    policy = RSSMPolicy(
        model_loss.encoder, model_loss.prior, model_loss.posterior, actor, spec.low, spec.high,
        obs_key(cfg),
        cfg.exploration_noise,
    )  # fmt: skip
    collector = SyncDataCollector(
        env,
        policy,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
        init_random_frames=cfg.init_random_frames,
    )
    optimizer = torch.optim.Adam(
        [
            {"params": list(model_loss.parameters()), "lr": cfg.model_lr, "name": "model"},
            {"params": list(actor.parameters()), "lr": cfg.actor_lr, "name": "actor"},
            {"params": list(value.parameters()), "lr": cfg.value_lr, "name": "value"},
        ]
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=cfg.optim_steps_per_batch,
        loss_module=loss,
        logger=logger,
        clip_norm=cfg.max_grad_norm,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=cfg.frames_per_batch * 4,
        log_interval=cfg.frames_per_batch,
    )
    # Dreamer clips the model's, the actor's and the value's gradients each on its own: one
    # norm over all three let the model's (250-1,600 in the first updates, against the
    # actor's ~0.01 and the value's ~1-5) scale the other two down by a varying factor
    OptimizerHook(optimizer, clip_per_group=cfg.clip_per_part).register(trainer)
    if cfg.slow_value_interval > 0:
        slow = HardUpdate(actor_loss, value_network_update_interval=cfg.slow_value_interval)
        trainer.register_op("post_optim", slow.step)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size),
        sampler=SliceSampler(slice_len=cfg.slice_len),
    )
    ReplayBufferTrainer(buffer, batch_size=cfg.batch_size * cfg.slice_len).register(trainer)
    return trainer, policy


RECIPE = Recipe(
    name=ALGO,
    Config=Config,
    module=__name__,
    make_trainer=make_trainer,
    make_eval_env=make_eval_env,
    actions=ACTIONS,
    targets=TARGETS,
    env_defaults=ENV_DEFAULTS,
)
