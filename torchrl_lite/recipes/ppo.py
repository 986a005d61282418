"""PPO (clipped surrogate) for continuous and discrete actions: config, then builders.

Paper: Schulman et al. 2017, https://arxiv.org/abs/1707.06347. The defaults solve
Pendulum-v1 (mean return >= -200) in about 40k frames; ``dm_control/...`` envs get the
longer-horizon settings of ``ENV_DEFAULTS``. ``pixels=true`` learns from rendered frames
(actor and critic each with their own ConvNet encoder) with ``PIXEL_DEFAULTS``: a
starting point that trains without errors, not settings seen to solve any env. Discrete
action spaces get a categorical policy; ``ALE/GAME-v5`` ids (e.g. ``ALE/Breakout-v5``)
observe the standard preprocessed Atari screen (see :mod:`torchrl_lite.envs.make`) and use
the paper's Atari settings (``ENV_DEFAULTS["atari"]``); ``frames`` counts agent steps (4
emulator frames each). The paper's one-trunk network (``shared_encoder=true``) is an
option, not the default: it did no better on Breakout (``docs/notes/pixels.md``).
Gymnasium's MuJoCo ids get the paper's MuJoCo settings (advantages computed once per
batch) plus what the baselines code behind the paper and CleanRL add: running observation
and reward normalization (``normalize_obs``, ``normalize_reward``; rl-zoo's too),
orthogonal init (``ortho_init``) and a linearly decayed learning rate (``lr_decay``). Their
Gaussian clipped to the bounds is an option (``squash=false``); the default TanhNormal
did better on HalfCheetah and Hopper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.modules import (
    ClippedProbabilisticActor,
    GSDEHead,
    GSDENormal,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)
from torchrl_lite.objectives import ClipPPOLoss
from torchrl_lite.objectives.value import GAE
from torchrl_lite.recipes.common import (
    PIXELS_STACK,
    PixelEncoder,
    action_kind,
    check_action_kind,
    make_env,
    observation_network,
    whole_batches,
)
from torchrl_lite.recipes.registry import Recipe
from torchrl_lite.trainers import ShuffledMiniBatches, Trainer
from torchrl_lite.trainers.hooks import TrainerHookBase

ALGO = "ppo"
ACTIONS = "continuous or discrete"
TARGETS = {"Pendulum-v1": -200.0, "dm_control/cartpole-swingup": 700.0}
ENV_DEFAULTS = {
    "dm_control": dict(
        gamma=0.99, frames=1_000_000, num_envs=8, frames_per_batch=8000, lr=3e-4,
        mini_batch_size=256, entropy_coef=0.0,
    ),
    # Atari (ALE/...-v5, pixels): the PPO paper's Atari settings (8 envs x 128 steps, 4
    # epochs of 4 mini-batches, clip 0.1, entropy 0.01, lr 2.5e-4, advantages computed
    # once per batch); frames count agent steps (4 emulator frames each)
    "atari": dict(
        pixels=True, gamma=0.99, frames=2_000_000, num_envs=8, frames_per_batch=1024,
        epochs=4, mini_batch_size=256, lr=2.5e-4, clip_epsilon=0.1, entropy_coef=0.01,
        hidden=256, recompute_advantage=False,
    ),
    # the PPO paper's MuJoCo settings (one env, 2048 steps, 10 epochs of 64-frame batches,
    # advantages computed once per batch), with what its baselines implementation and
    # CleanRL add: running observation and reward normalization (rl-zoo's VecNormalize
    # too), orthogonal init, the learning rate decayed linearly to 0; the policy stays a
    # TanhNormal (a clipped Gaussian did worse on HalfCheetah: docs/notes/mujoco.md)
    "mujoco": dict(
        gamma=0.99, frames=1_000_000, num_envs=1, frames_per_batch=2048, lr=3e-4,
        mini_batch_size=64, entropy_coef=0.0, recompute_advantage=False,
        normalize_obs=True, normalize_reward=True, ortho_init=True, lr_decay=True,
    ),
}  # fmt: skip
# applied when an override turns `pixels` on (not `frames`/`seed`: --frames/--seed win).
# Atari PPO's step size (the convolutions want a smaller one than Pendulum's 1e-3); the
# rollouts are uint8 stacks (2048 x 32 KiB = 64 MiB), so the batch sizes stay
PIXEL_DEFAULTS = dict(lr=3e-4)


@dataclass(frozen=True)
class Config:
    """PPO settings; the defaults are for Pendulum-v1."""

    env: str = "Pendulum-v1"
    """Gymnasium id or ``dm_control/DOMAIN-TASK``."""
    frames: int = 200_000
    """Frame budget (training stops earlier once ``target`` is reached)."""
    seed: int = 0
    """Seeds torch and the envs."""
    target: float | None = None
    """Stop when the mean of the last 10 training returns reaches this (None: recipe's)."""
    num_envs: int = 4
    """Copies of the env stepped together (gymnasium vector API)."""
    frames_per_batch: int = 2048
    """Frames collected between two rounds of updates."""
    epochs: int = 10
    """Passes over each batch."""
    mini_batch_size: int = 64
    """Frames per gradient step."""
    lr: float = 1e-3
    """Adam learning rate (actor and critic)."""
    gamma: float = 0.9
    """Discount; Pendulum's short credit horizon learns much faster with 0.9."""
    lmbda: float = 0.95
    """GAE lambda."""
    recompute_advantage: bool = True
    """Recompute GAE with the latest critic at every epoch (as TorchRL); False computes it
    once per batch, as the PPO paper and SB3 do (Atari: a quarter of the critic passes)."""
    clip_epsilon: float = 0.2
    """PPO ratio clip."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""
    critic_coef: float = 0.5
    """Value-loss weight."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    hidden: int = 64
    """Units per hidden layer (two layers, tanh)."""
    pixels: bool = False
    """Learn from rendered images instead of the state (4 stacked 64x64 grayscale frames)."""
    shared_encoder: bool = False
    """Pixels (incl. Atari): one trunk, the Nature-DQN convolutions and a ``hidden``-unit
    ReLU layer, under a policy head and a value head, trained by the sum of the losses
    (the PPO paper's Atari network; orthogonal init with gains sqrt(2), 0.01 for the
    policy head and 1 for the value head, as SB3 and CleanRL). False: actor and critic
    each with their own encoder and two-layer tanh MLP."""
    use_sde: bool = False
    """Continuous actions: gSDE (state-dependent noise on the last hidden layer, held for
    ``sde_sample_freq`` steps) with an unsquashed Gaussian clipped to the action bounds."""
    sde_sample_freq: int = 4
    """With ``use_sde``: steps between two draws of the noise matrices (<= 0: per batch)."""
    init_log_std: float = 0.0
    """Initial log-std (with ``use_sde``: of every entry of gSDE's log-sigma matrix)."""
    normalize_obs: bool = False
    """Standardise the state by running mean and variance (clipped to +-10) inside the
    actor and the critic; the statistics take in each batch after its updates, so a batch
    is collected and trained with the same ones, and are saved with the weights."""
    normalize_reward: bool = False
    """Divide the rewards the losses see by the running std of the discounted return
    (SB3's ``VecNormalize(norm_reward=True)``, clipped to +-10); returns are logged raw."""
    squash: bool = True
    """Continuous actions without ``use_sde``: a tanh-squashed Gaussian (TanhNormal).
    False: a Gaussian whose samples are clipped to the action bounds for the env and
    scored unclipped, as in the paper's baselines code, SB3 and CleanRL."""
    ortho_init: bool = False
    """Orthogonal init of the actor's and the critic's layers, biases 0: gain sqrt(2) on
    the hidden layers, 0.01 on the policy head and 1 on the value head (baselines, SB3,
    CleanRL). False: PyTorch's default init."""
    lr_decay: bool = False
    """Decay the learning rate linearly from ``lr`` to 0 over ``frames``, batch by batch
    (the baselines code's MuJoCo setting and CleanRL's default)."""


class StateIndependentScale(nn.Module):
    """Turns a loc into ``(loc, scale)`` with a learned, state-independent log-std."""

    def __init__(self, action_dim: int, init_log_std: float = 0.0):
        super().__init__()
        self.log_std = nn.Parameter(torch.full((action_dim,), init_log_std))

    def forward(self, loc: torch.Tensor):
        return loc, self.log_std.exp().expand_as(loc)


def make_train_env(cfg: Config):
    env = make_env(cfg.env, num_envs=cfg.num_envs, seed=cfg.seed, pixels=cfg.pixels)
    if action_kind(env.action_spec) != "discrete":
        check_action_kind(env, "continuous", "PPO")
    return env


def make_eval_env(cfg: Config, **kwargs):
    return make_env(cfg.env, seed=cfg.seed + 10_000, pixels=cfg.pixels, **kwargs)


def make_actor_critic(cfg: Config, env):
    """Actor and critic, each with its own network (and encoder, with ``pixels``).

    Continuous actions: a TanhNormal (``squash=false``: a Gaussian clipped to the bounds)
    with a state-independent scale, or with ``use_sde`` gSDE's Gaussian clipped to them
    (the clipped ones by a ``ClippedProbabilisticActor``, which keeps the raw sample at
    ``"raw_action"``); discrete ones (Atari): a one-hot categorical over the logits.
    """
    spec = env.action_spec
    if cfg.shared_encoder:
        return _shared_trunk_actor_critic(cfg, env)
    body, key = observation_network(env, spec.shape[-1], cfg.hidden, 2, pixels=cfg.pixels)
    if cfg.ortho_init:
        orthogonal_init(body, head_gain=0.01)
    norm = _observation_norm(cfg, env, key)
    if norm is not None:  # one module: the actor and the critic see the same statistics
        body = nn.Sequential(norm, body)
    if cfg.use_sde and action_kind(spec) != "discrete":
        low, high = _bounds(spec)
        actor = _gsde_actor(cfg, body, key, spec.shape[-1], low, high)
    else:
        actor = _policy(cfg, spec, body, key)
    # the critic is built after the actor: the seeded init is the same
    return actor, _critic(cfg, env, norm)


def _observation_norm(cfg: Config, env, key: str):
    """The shared ``RunningNorm`` of ``normalize_obs`` (None without it)."""
    if not cfg.normalize_obs:
        return None
    if key != "observation":
        raise ValueError(
            f"normalize_obs=true standardises a state vector; {cfg.env} with pixels="
            f"{cfg.pixels} observes {key!r} images. Drop normalize_obs=true."
        )
    from torchrl_lite.modules.models.normalization import RunningNorm

    return RunningNorm(env.observation_spec[key].shape[-1:])


def _bounds(spec) -> tuple[torch.Tensor, torch.Tensor]:
    """The action bounds ``[A]`` each, without the env's batch dims."""
    act_dim = spec.shape[-1]
    return spec.low.reshape(-1, act_dim)[0], spec.high.reshape(-1, act_dim)[0]


def _policy(cfg: Config, spec, net: nn.Module, key: str):
    """The actor on ``net``'s output: a one-hot categorical over logits (discrete actions)
    or, around a loc with a state-independent scale (continuous ones), a TanhNormal or
    (``squash=false``) a Gaussian clipped to the bounds."""
    if action_kind(spec) == "discrete":
        return ProbabilisticActor(
            TensorDictModule(net, in_keys=[key], out_keys=["logits"]),
            in_keys=["logits"],
            distribution_class=OneHotCategorical,
            return_log_prob=True,
        )
    low, high = _bounds(spec)
    net = nn.Sequential(net, StateIndependentScale(spec.shape[-1], cfg.init_log_std))
    if not cfg.squash:
        return ClippedProbabilisticActor(
            TensorDictModule(net, in_keys=[key], out_keys=["loc", "scale"]),
            in_keys=["loc", "scale"], low=low, high=high,
            distribution_class=IndependentNormal, return_log_prob=True,
        )  # fmt: skip
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=[key], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": low, "high": high},
        return_log_prob=True,
    )


def _shared_trunk_actor_critic(cfg: Config, env):
    """Actor and critic on one pixel trunk (``shared_encoder``); see the Config field."""
    if PIXELS_STACK not in env.observation_spec.keys():
        raise ValueError(
            "shared_encoder=true shares a pixel encoder: it needs pixels=true (or an "
            f"ALE/... env); {cfg.env} observes the state."
        )
    if cfg.use_sde:
        raise ValueError("shared_encoder=true does not support use_sde=true (gSDE's head).")
    shape = env.observation_spec[PIXELS_STACK].shape[-3:]  # [C, H, W]
    encoder = PixelEncoder(shape[0])
    trunk = nn.Sequential(encoder, nn.Linear(encoder.out_features(shape), cfg.hidden), nn.ReLU())
    policy_head = nn.Linear(cfg.hidden, env.action_spec.shape[-1])
    value_head = nn.Linear(cfg.hidden, 1)
    for module, gain in ((trunk, 2**0.5), (policy_head, 0.01), (value_head, 1.0)):
        orthogonal_init(module, head_gain=gain)
    actor = _policy(cfg, env.action_spec, nn.Sequential(trunk, policy_head), PIXELS_STACK)
    return actor, ValueOperator(nn.Sequential(trunk, value_head), in_keys=[PIXELS_STACK])


def orthogonal_init(net: nn.Module, head_gain: float) -> None:
    """Orthogonal weights and zero biases for ``net``'s linear and convolution layers:
    gain ``head_gain`` for the last one, sqrt(2) for the others (``ortho_init``)."""
    layers = [m for m in net.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for i, layer in enumerate(layers):
        nn.init.orthogonal_(layer.weight, head_gain if i == len(layers) - 1 else 2**0.5)
        nn.init.zeros_(layer.bias)


def _without_head(body: nn.Sequential) -> tuple[nn.Module, int]:
    """``body`` without its last ``Linear`` (the features) and the features' size."""
    *layers, last = list(body)
    if isinstance(last, nn.Sequential):  # pixels: (encoder, mlp)
        inner, width = _without_head(last)
        return nn.Sequential(*layers, inner), width
    return nn.Sequential(*layers), last.in_features


def _gsde_actor(cfg: Config, body, key, act_dim, low, high):
    """gSDE on the MLP's last hidden layer, its samples clipped to ``[low, high]``."""
    features, width = _without_head(body)
    head = GSDEHead(width, act_dim, cfg.init_log_std, cfg.sde_sample_freq)
    return ClippedProbabilisticActor(
        TensorDictModule(nn.Sequential(features, head), in_keys=[key],
                         out_keys=["loc", "scale", "sde_noise"]),
        in_keys={"loc": "loc", "scale": "scale", "noise": "sde_noise"},
        low=low, high=high, distribution_class=GSDENormal, return_log_prob=True,
    )  # fmt: skip


def _critic(cfg: Config, env, norm: nn.Module | None = None):
    value_net, key = observation_network(env, 1, cfg.hidden, 2, pixels=cfg.pixels)
    if cfg.ortho_init:
        orthogonal_init(value_net, head_gain=1.0)
    if norm is not None:
        value_net = nn.Sequential(norm, value_net)
    return ValueOperator(value_net, in_keys=[key])


class NormalizationHooks(TrainerHookBase):
    """The trainer side of ``normalize_obs`` / ``normalize_reward``.

    ``batch_process``: keeps the batch's observations and, with a ``returns`` normalizer,
    returns a shallow copy of the batch whose ``("next", "reward")`` ``[*B, T, 1]`` is
    scaled (the collector's own TensorDict is left as it was). ``post_steps``: merges the
    kept observations into ``norm``'s statistics, after the batch's updates.

    Args:
        norm: the networks' ``RunningNorm``, or None.
        returns: a ``ReturnNormalizer``, or None.
    """

    def __init__(self, norm: nn.Module | None, returns=None):
        self.norm, self.returns = norm, returns
        self._pending = None

    def process(self, batch):
        if self.norm is not None:
            self._pending = batch.get("observation")
        if self.returns is None:
            return None
        reward = batch.get(("next", "reward"))  # [*B, T, 1]
        done = batch.get(("next", "done"))
        steps = batch.batch_size[-1] if batch.batch_dims else 1
        scaled = self.returns.normalize(reward.reshape(-1, steps), done.reshape(-1, steps))
        batch = batch.copy()
        batch.set(("next", "reward"), scaled.reshape(reward.shape).to(reward.dtype))
        return batch

    def update(self) -> None:
        if self._pending is not None:
            self.norm.update(self._pending)
            self._pending = None

    def state_dict(self) -> dict:
        return {"returns": None if self.returns is None else self.returns.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if self.returns is not None and state.get("returns") is not None:
            self.returns.load_state_dict(state["returns"])

    def register(self, trainer, name: str = "normalization") -> None:
        trainer.register_op("batch_process", self.process)
        trainer.register_op("post_steps", self.update)
        trainer.register_module(name, self)


def make_loss(cfg: Config, actor, critic):
    return ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_bonus=cfg.entropy_coef > 0,
        entropy_coef=cfg.entropy_coef,
        critic_coef=cfg.critic_coef,
        normalize_advantage=True,
    )  # with gSDE's clipped Gaussian the loss scores the raw sample (OnPolicyLoss)


def make_trainer(cfg: Config, logger=None, checkpoint=None, progress_bar=True):
    """Everything to train: ``(trainer, policy)``; hooks registered."""
    torch.manual_seed(cfg.seed)
    env = make_train_env(cfg)
    actor, critic = make_actor_critic(cfg, env)
    loss = make_loss(cfg, actor, critic)
    collector = SyncDataCollector(
        env,
        actor,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=whole_batches(cfg.frames, cfg.frames_per_batch),
    )
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.frames,
        optim_steps_per_batch=cfg.epochs * (cfg.frames_per_batch // cfg.mini_batch_size),
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=cfg.lr, fused=True),
        logger=logger,
        clip_norm=cfg.max_grad_norm,
        progress_bar=progress_bar,
        save_trainer_file=checkpoint,
        save_trainer_interval=cfg.frames_per_batch * 10,
        log_interval=cfg.frames_per_batch,
    )
    if cfg.normalize_obs or cfg.normalize_reward:
        from torchrl_lite.modules.models.normalization import ReturnNormalizer, RunningNorm

        norm = next((m for m in critic.modules() if isinstance(m, RunningNorm)), None)
        returns = ReturnNormalizer(cfg.gamma) if cfg.normalize_reward else None
        NormalizationHooks(norm, returns).register(trainer)
    if cfg.lr_decay:
        optimizer = trainer.optimizer

        def decay_lr():  # of the frames collected before this batch: a resumed run alike
            before = trainer.collected_frames - cfg.frames_per_batch
            for group in optimizer.param_groups:
                group["lr"] = cfg.lr * max(0.0, 1.0 - before / cfg.frames)

        trainer.register_op("pre_optim_steps", decay_lr)
    gae = GAE(gamma=cfg.gamma, lmbda=cfg.lmbda, value_network=critic)
    ShuffledMiniBatches(
        cfg.mini_batch_size, advantage_module=gae, recompute_each_epoch=cfg.recompute_advantage
    ).register(trainer)
    return trainer, actor


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
