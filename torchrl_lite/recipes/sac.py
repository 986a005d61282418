"""SAC (soft actor-critic, learned temperature) for continuous actions: config, builders.

Paper: Haarnoja et al. 2018, https://arxiv.org/abs/1812.05905. The defaults solve
Pendulum-v1 (mean return >= -200) in about 4-6k frames; quickly moving targets
(``tau=0.02``) matter most.

``pixels=true`` is DrQ (Kostrikov et al. 2020, https://arxiv.org/abs/2004.13649; see
:class:`~torchrl_lite.objectives.DrQLoss`): dm_control renders 64x64 frames directly (camera
0), 4 grayscale frames stacked, each action repeated ``action_repeat`` times (8, PlaNet's
and DrQ's value for cartpole; 4 for cheetah/reacher/cup, 2 for finger/walker), uint8 stacks
in the buffer, random shifts of +-4 pixels on every sampled batch (root and next frames
drawn independently). As in DrQ, the convolutions (32-32-32 channels, 3x3 kernels, strides
2-2-1 -> 13x13x32) are trained by the critic only; the actor reads them detached and, like
each Q-network, has its own head (Linear to 50 features, LayerNorm, tanh) before its 2 x 256
units. Batch 128, lr 1e-3, tau 0.01 (Q-networks and encoder, every update), temperature
starting at 0.1, 1,000 random agent steps first, two updates per agent step
(``utd_ratio=2``; DrQ makes one), 3-step returns (``n_step=3``, from DrQ-v2; DrQ itself uses
one-step targets, ``n_step=1``), a LayerNorm on each hidden layer of the Q-networks
(``layer_norm=True``, as in DroQ's critic). DrQ's settings shrunk to fit two CPU cores: DrQ
uses 84x84 RGB, 3 frames, 4 conv layers of 32 (35x35x32 features, ~7x the convolution cost),
batch 512 (4x), Q-networks of 2 x 1024, two augmented copies per sample (an option here:
``target_augs=2 q_augs=2``, DrQ's K and M), actor and target updates every second step.
``frames`` counts agent steps: with ``action_repeat=8``, DrQ's 100k env steps are
``frames=12_500``. On cartpole-swingup the target 700 is reached within 100k env frames;
the two updates per step, the LayerNorm and the 3-step returns are what get it there (the
runs: ``docs/notes/recipe-runs.md``). ``grayscale=false`` stacks RGB frames (1.6x the cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import RandomShift
from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import DrQLoss, SACLoss, SoftUpdate
from torchrl_lite.objectives.ensemble import Ensemble
from torchrl_lite.recipes.common import (
    PIXELS_STACK,
    PixelEncoder,
    check_action_kind,
    make_env,
    mlp,
    n_step_postproc,
    whole_batches,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import ReplayBufferTrainer, Trainer

ALGO = "sac"
ACTIONS = "continuous"
TARGETS = {"Pendulum-v1": -200.0}
# physics tasks (gymnasium MuJoCo, dm_control): the paper's settings, 1M frames
_LOCOMOTION = dict(
    frames=1_000_000,
    init_random_frames=10_000,
    buffer_size=1_000_000,
    lr=3e-4,
    tau=0.005,
    hidden=256,
)
# gymnasium MuJoCo: the squared TD error, as the paper, SB3/rl-zoo and CleanRL (returns in
# the thousands: a Huber loss caps the critic's gradient at large TD errors)
ENV_DEFAULTS = {"mujoco": {**_LOCOMOTION, "loss_function": "l2"}, "dm_control": _LOCOMOTION}
# applied when an override turns `pixels` on (not `frames`/`seed`: --frames/--seed win).
# A transition holds two uint8 [4, 64, 64] stacks (32 KiB): 20k of them are 640 MiB.
PIXEL_DEFAULTS = dict(
    action_repeat=8, buffer_size=20_000, batch_size=128, lr=1e-3, tau=0.01, hidden=256,
    init_random_frames=1000, frames_per_batch=2, alpha_init=0.1, n_step=3, layer_norm=True,
    utd_ratio=2.0,
)  # fmt: skip
FEATURES = "features"
"""The encoder's output entry (pixels): what the actor and the Q-networks read."""


@dataclass(frozen=True)
class Config:
    """SAC settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 20_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    init_random_frames: int = 500
    """Frames of uniform random actions before learning starts."""
    frames_per_batch: int = 10
    """Frames collected between two rounds of updates."""
    utd_ratio: float = 1.0
    """Gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    lr: float = 1e-3
    """Adam learning rate (actor, critics and temperature)."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.02
    """Soft target-update rate (0.005, the paper's, needs about twice the frames here)."""
    hidden: int = 64
    """Units per hidden layer (two layers, ReLU)."""
    alpha_init: float = 1.0
    """Initial temperature."""
    pixels: bool = False
    """Learn from rendered images (DrQ: shared encoder, random shifts; see the docstring)."""
    action_repeat: int = 1
    """Env steps per agent step (the action is repeated, rewards summed)."""
    pad: int = 4
    """Largest random shift of the sampled images, in pixels (pixels only)."""
    feature_dim: int = 50
    """Encoder output features (pixels only)."""
    conv_strides: tuple = (2, 2, 1)
    """Strides of the three 3x3 convolutions (pixels only)."""
    grayscale: bool = True
    """Stack luma frames (else RGB: 3 planes per frame; pixels only)."""
    loss_function: str = "smooth_l1"
    """The critic's regression distance: ``"l2"``, ``"smooth_l1"`` or ``"l1"``."""
    n_step: int = 1
    """Rewards summed per critic target: 1 is one-step TD (SAC, DrQ); ``n > 1`` adds
    ``MultiStep(gamma, n - 1, across_batches=True)`` to the collector (DrQ-v2 uses 3)."""
    init: str = "default"
    """Weight init: ``"default"`` (PyTorch's) or ``"orthogonal"`` (DrQ's, see
    :func:`orthogonal_init_`)."""
    target_augs: int = 1
    """DrQ's ``K``: randomly shifted copies of the next frames averaged in each critic
    target (pixels only; DrQ uses 2). Above 1 (or with ``q_augs > 1``) the loss shifts the
    sampled images itself instead of the replay buffer."""
    q_augs: int = 1
    """DrQ's ``M``: randomly shifted copies of the frames in each critic loss (pixels only;
    DrQ uses 2)."""
    layer_norm: bool = False
    """A ``LayerNorm`` on each hidden layer of the Q-networks, before its ReLU (DroQ's
    critic; the actor is left as it is)."""
    compile_update: bool = False
    """Run the loss (forward and backward) through ``torch.compile``. On one CPU thread it
    is slower (``benchmarks/bench_train_speed.py --compile``); meant for GPUs."""


def _env_kwargs(cfg: Config) -> dict:
    kwargs = {"frame_skip": cfg.action_repeat} if cfg.action_repeat > 1 else {}
    if cfg.pixels and cfg.env.startswith("dm_control/"):
        kwargs["render_kwargs"] = {"height": 64, "width": 64, "camera_id": 0}
    if cfg.pixels and not cfg.grayscale:
        kwargs["grayscale"] = False
    return kwargs


def make_train_env(cfg: Config):
    if not cfg.pixels:  # settings of the encoder and the augmentation would be ignored
        default = Config()
        for name in ("pad", "feature_dim", "conv_strides", "grayscale", "target_augs", "q_augs"):
            if getattr(cfg, name) != getattr(default, name):
                raise ValueError(
                    f"sac: {name}={getattr(cfg, name)!r} sets the pixel encoder or its "
                    f"augmentation; it needs pixels=true ({cfg.env} observes the state)."
                )
    env = make_env(cfg.env, seed=cfg.seed, pixels=cfg.pixels, **_env_kwargs(cfg))
    check_action_kind(env, ACTIONS, "SAC")
    return env


def make_eval_env(cfg: Config, **kwargs):
    kwargs = {**_env_kwargs(cfg), **kwargs}
    return make_env(cfg.env, seed=cfg.seed + 10_000, pixels=cfg.pixels, **kwargs)


def make_encoder(cfg: Config, env) -> PixelEncoder:
    """Pixels ``[*B, C, 64, 64]`` uint8 -> flat conv features ``[*B, 32 * 13 * 13]``.

    The convolutions only: the projection to ``feature_dim`` is each network's own head
    (see :func:`make_actor_qvalue`), as in DrQ, where the actor shares the critic's
    convolutions (detached) but trains its own projection.
    """
    strides = tuple(cfg.conv_strides)
    if len(strides) != 3 or not all(isinstance(s, int) and s >= 1 for s in strides):
        raise ValueError(
            f"conv_strides must be three ints >= 1 (one per 3x3 convolution), got "
            f"{cfg.conv_strides!r}; e.g. conv_strides=2,2,1."
        )
    shape = env.observation_spec[PIXELS_STACK].shape[-3:]  # [C, H, W]
    return PixelEncoder(shape[0], (32, 32, 32), (3, 3, 3), strides)


def feature_head(in_features: int, feature_dim: int) -> nn.Module:
    """DrQ's projection of the conv features: Linear, LayerNorm, tanh -> ``[*B, feature_dim]``."""
    return nn.Sequential(nn.Linear(in_features, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())


class HeadQValue(nn.Module):
    """``Q(s, a) = mlp([head(features), action])``: a Q-network with its own feature head.

    Args:
        head: maps ``[*B, F]`` features to ``[*B, D]``.
        net: maps ``[*B, D + A]`` to ``[*B, 1]``.

    Example:
        >>> q = HeadQValue(feature_head(12, 4), MLP(in_features=5, out_features=1))
        >>> q(torch.rand(3, 12), torch.rand(3, 1)).shape
        torch.Size([3, 1])
    """

    def __init__(self, head: nn.Module, net: nn.Module):
        super().__init__()
        self.head, self.net = head, net

    def forward(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([self.head(features), action], -1))


def make_actor_qvalue(
    cfg: Config,
    env,
    obs_key: str = "observation",
    obs_dim: int | None = None,
    head_dim: int | None = None,
):
    """Actor and Q-network reading ``obs_key`` (``"features"`` from pixels).

    With ``head_dim``, each network starts with its own :func:`feature_head` from
    ``obs_dim`` to ``head_dim`` features (pixels: the encoder's conv features).
    """
    obs_dim = env.observation_spec[obs_key].shape[-1] if obs_dim is None else obs_dim
    width = obs_dim if head_dim is None else head_dim
    spec = env.action_spec
    act_dim = spec.shape[-1]
    layers = [mlp(width, 2 * act_dim, cfg.hidden, 2, nn.ReLU), NormalParamExtractor()]
    if head_dim is not None:
        layers.insert(0, feature_head(obs_dim, head_dim))
    actor = ProbabilisticActor(
        TensorDictModule(nn.Sequential(*layers), in_keys=[obs_key], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": spec.low, "high": spec.high},
        spec=spec,
    )
    if cfg.layer_norm:
        qnet = mlp(width + act_dim, 1, cfg.hidden, 2, nn.ReLU, layer_norm=True)
    else:
        qnet = MLP(  # joins observation and action along the last dim
            in_features=width + act_dim,
            out_features=1,
            num_cells=[cfg.hidden, cfg.hidden],
            activation_class=nn.ReLU,
        )
    if head_dim is not None:
        qnet = HeadQValue(feature_head(obs_dim, head_dim), qnet)
    elif cfg.layer_norm:  # a plain MLP reads one input: HeadQValue joins the two
        qnet = HeadQValue(nn.Identity(), qnet)
    qvalue = ValueOperator(qnet, in_keys=[obs_key, "action"])
    return actor, qvalue


def _init_linear_or_conv_(module: nn.Module, weight: torch.Tensor, bias: torch.Tensor | None):
    """DrQ's init of one layer's ``weight``/``bias`` (tensors of ``module``'s shapes)."""
    if isinstance(module, nn.Linear):
        nn.init.orthogonal_(weight)
    else:  # delta-orthogonal: an orthogonal 1x1 map at the kernel's centre, zeros elsewhere
        centre = torch.empty(weight.shape[:2], dtype=weight.dtype)
        nn.init.orthogonal_(centre, gain=nn.init.calculate_gain("relu"))
        weight.zero_()
        weight[:, :, weight.shape[2] // 2, weight.shape[3] // 2] = centre
    if bias is not None:
        bias.zero_()


@torch.no_grad()
def orthogonal_init_(module: nn.Module) -> nn.Module:
    """DrQ's and SAC-AE's initialisation, in place: orthogonal ``Linear`` weights,
    delta-orthogonal ``Conv2d`` weights (ReLU gain), zero biases; LayerNorms untouched.

    Also initialises each copy of an :class:`~torchrl_lite.objectives.ensemble.Ensemble`
    (the Q-networks of a loss) independently. Target copies inside ``module`` get their own
    random values too: copy the online values into them afterwards
    (``SoftUpdate(loss, tau=...).init_()``).

    Example:
        >>> net = orthogonal_init_(nn.Sequential(nn.Conv2d(4, 8, 3), nn.Flatten(), nn.Linear(8, 3)))
        >>> w = net[2].weight
        >>> bool(torch.allclose(w @ w.T, torch.eye(3), atol=1e-5)), float(net[0].weight[:, :, 0].abs().sum())
        (True, 0.0)
    """
    for m in module.modules():
        if isinstance(m, Ensemble):
            for key in m.params.keys(include_nested=True, leaves_only=True):
                if key[-1] != "weight":
                    continue
                owner = m.module.get_submodule(".".join(key[:-1]))
                if not isinstance(owner, (nn.Linear, nn.Conv2d)):
                    continue
                bias_key = (*key[:-1], "bias")
                has_bias = bias_key in m.params.keys(include_nested=True, leaves_only=True)
                weights = m.params.get(key)
                for i in range(weights.shape[0]):
                    bias = m.params.get(bias_key)[i] if has_bias else None
                    _init_linear_or_conv_(owner, weights[i], bias)
        elif isinstance(m, (nn.Linear, nn.Conv2d)):
            _init_linear_or_conv_(m, m.weight, m.bias)
    return module


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    if cfg.pixels:
        encoder = make_encoder(cfg, env)
        conv_out = encoder.out_features(env.observation_spec[PIXELS_STACK].shape[-3:])
        actor, qvalue = make_actor_qvalue(cfg, env, FEATURES, conv_out, cfg.feature_dim)
    else:
        actor, qvalue = make_actor_qvalue(cfg, env)
    loss = SACLoss(
        actor,
        qvalue,
        num_qvalue_nets=2,
        gamma=cfg.gamma,
        action_spec=env.action_spec,
        alpha_init=cfg.alpha_init,
        loss_function=cfg.loss_function,
    )
    if cfg.compile_update:  # an instance attribute: the state_dict keeps its names
        loss.forward = torch.compile(loss.forward)
    policy = actor
    transform = None
    if cfg.pixels:
        shift = RandomShift(cfg.pad, in_keys=[PIXELS_STACK, ("next", PIXELS_STACK)])
        if (cfg.target_augs, cfg.q_augs) == (1, 1):  # one shift per sample: in the buffer
            loss = DrQLoss(encoder, loss, pixels_key=PIXELS_STACK, feature_key=FEATURES)
            transform = shift
        else:  # K / M copies: the loss draws them
            loss = DrQLoss(encoder, loss, pixels_key=PIXELS_STACK, feature_key=FEATURES,
                           augment=shift, num_target_augs=cfg.target_augs,
                           num_q_augs=cfg.q_augs)  # fmt: skip
        # the conv features stay inside the policy: stored, they would add 5408 floats
        # (21 KiB, more than half the two uint8 stacks) to every transition in the buffer
        policy = TensorDictSequential(
            TensorDictModule(encoder, in_keys=[PIXELS_STACK], out_keys=[FEATURES]),
            actor,
            selected_out_keys=list(actor.out_keys),
        )
    if cfg.init not in ("default", "orthogonal"):
        raise ValueError(f"init must be 'default' or 'orthogonal', got {cfg.init!r}.")
    if cfg.init == "orthogonal":
        orthogonal_init_(loss)
        SoftUpdate(loss, tau=cfg.tau).init_()  # then the targets start equal to them
    collector = SyncDataCollector(
        env,
        policy,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
        init_random_frames=cfg.init_random_frames,
        postproc=n_step_postproc(cfg.n_step, cfg.gamma),
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=max(1, round(cfg.utd_ratio * cfg.frames_per_batch)),
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=cfg.lr, fused=True),
        logger=logger,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=500 if cfg.pixels else 5_000,  # pixel runs are slow: resume often
        log_interval=1_000,
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(cfg.buffer_size), transform=transform)
    ReplayBufferTrainer(buffer, batch_size=cfg.batch_size).register(trainer)
    trainer.register_op("post_optim", SoftUpdate(loss, tau=cfg.tau).step)
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
    pixel_defaults=PIXEL_DEFAULTS,
)
