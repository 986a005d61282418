"""``factories_from_recipe``: a recipe's ``Config`` as the five factories of a ``Scheme``.

The same networks, hyperparameters and env settings as ``torchrl-lite train ALGO``
(``make_trainer``), in seed 000's components, so the CLI's ``--col-workers`` /
``--grad-workers`` path trains what the single-process path trains. Unit mapping: a
recipe's ``frames_per_batch`` over ``num_envs`` copies is ``num_envs`` envs x
``frames_per_batch / num_envs`` steps per round (rounded up with a warning, as the Trainer
path's collector rounds it). ``n_step > 1`` replays n-step windows
(``NStepReplayBuffer``: windows cut by a time limit or a round's end are dropped, where the
recipe's ``MultiStep`` carries them over). A setting the Scheme path does not implement
(pixels, SAC's ``loss_function`` / ``init`` / ``action_repeat``, DQN's ``lr_end`` /
``lr_drop_at``) is refused with ``ValueError`` when set away from the recipe's default.
"""

from __future__ import annotations

import dataclasses
import warnings

import gymnasium

from torchrl_lite._utils import did_you_mean
from torchrl_lite.agent.actors import OffPolicyActor, OnPolicyActor
from torchrl_lite.agent.algos import A2C, DDPG, DDQN, PPO, SAC, TD3
from torchrl_lite.agent.env import VecEnv
from torchrl_lite.agent.storages import GAEBuffer, NStepReplayBuffer, ReplayBuffer
from torchrl_lite.envs import (
    dmc_test_env_factory,
    dmc_train_env_factory,
    gym_test_env_factory,
    gym_train_env_factory,
)
from torchrl_lite.envs.make import DM_CONTROL_PREFIX

__all__ = ["SCHEME_ALGOS", "factories_from_recipe"]


def _envs(cfg, num_envs: int):
    """``(train_envs_factory, test_envs_factory, action_space, obs_space)`` of ``cfg.env``."""
    if getattr(cfg, "pixels", False):
        raise ValueError(
            "factories_from_recipe: pixels=true is not available on the Scheme path (its env "
            "factories give state observations); train pixel policies without --col-workers/"
            "--grad-workers."
        )
    if cfg.env.startswith(DM_CONTROL_PREFIX):
        domain, _, task = cfg.env[len(DM_CONTROL_PREFIX) :].partition("-")
        kwargs = {"domain_name": domain, "task_name": task}
        train_fn, test_fn = dmc_train_env_factory, dmc_test_env_factory
    else:
        kwargs = {"env_id": cfg.env}
        train_fn, test_fn = gym_train_env_factory, gym_test_env_factory
    train, action_space, obs_space = VecEnv.create_factory(train_fn, kwargs, max(1, num_envs))
    test, _, _ = VecEnv.create_factory(test_fn, kwargs, 1, name="test")
    return train, test, action_space, obs_space


def _steps(cfg, num_envs: int) -> int:
    """Steps per env per round: ``frames_per_batch`` over the envs, rounded up with a
    warning when it does not divide, as the Trainer path's collector does."""
    envs = max(1, num_envs)
    steps = -(-cfg.frames_per_batch // envs)
    if cfg.frames_per_batch % envs:
        warnings.warn(
            f"factories_from_recipe: frames_per_batch={cfg.frames_per_batch} is not divisible "
            f"by num_envs={envs}; each round holds {steps * envs} frames. Pass a multiple of "
            f"{envs} to silence this.",
            UserWarning,
            stacklevel=3,
        )
    return steps


def _refuse(cfg, fields: dict[str, str]) -> None:
    """Refuse a setting the Scheme path does not train with (``fields``: name -> what it
    does), when ``cfg`` sets it away from the recipe's default: ignoring it would train
    something else than the user asked for."""
    default = type(cfg)()
    for name, what in fields.items():
        value = getattr(cfg, name)
        if value != getattr(default, name):
            raise ValueError(
                f"factories_from_recipe: {name}={value!r} ({what}) is not available on the "
                f"Scheme path; train without --col-workers/--grad-workers, or leave {name} "
                f"at {getattr(default, name)!r}."
            )


_PIXEL_ONLY = ("pad", "feature_dim", "conv_strides", "grayscale", "target_augs", "q_augs")
"""SAC's settings of the pixel encoder and its augmentation."""


def _replay_factory(cfg):
    """The replay storage: n-step windows when the recipe's ``n_step`` asks for them."""
    n_step = getattr(cfg, "n_step", 1)
    if n_step > 1:
        return NStepReplayBuffer.create_factory(size=cfg.buffer_size, n_step=n_step)
    return ReplayBuffer.create_factory(size=cfg.buffer_size)


class _RecipeLoss:
    """``(policy, value) -> loss``: the recipe's own ``make_loss(cfg, policy, value)``, so
    the recipe's field names reach the loss as they are (picklable)."""

    def __init__(self, algo: str, cfg):
        self.algo, self.cfg = algo, cfg

    def __call__(self, policy, value):
        from torchrl_lite.recipes import get_recipe

        return get_recipe(self.algo).make_loss(self.cfg, policy, value)


class _RecipeA2CActor:
    """The A2C recipe's networks (observation statistics from a seeded random rollout of
    the recipe's env), as an ``OnPolicyActor`` (picklable factory)."""

    def __init__(self, cfg, obs_space, action_space):
        self.cfg, self.obs_space, self.action_space = cfg, obs_space, action_space

    def __call__(self, device="cpu"):
        import torch

        from torchrl_lite.recipes import a2c

        torch.manual_seed(self.cfg.seed)
        env = a2c.make_train_env(self.cfg)
        try:
            policy, value = a2c.make_actor_critic(self.cfg, env)
        finally:
            env.close()
        actor = OnPolicyActor(self.obs_space, self.action_space, policy=policy, value=value)
        return actor.to(torch.device(device))


def _ppo(cfg):
    num_envs = cfg.num_envs
    train, test, act, obs = _envs(cfg, num_envs)
    hidden = {"hidden_sizes": (cfg.hidden, cfg.hidden)}
    policy = {"log_std_init": cfg.init_log_std}
    if cfg.use_sde and isinstance(act, gymnasium.spaces.Box):  # the recipe: Box actions only
        policy.update(use_sde=True, sde_sample_freq=cfg.sde_sample_freq)
    return dict(
        algo_factory=PPO.create_factory(
            lr=cfg.lr,
            num_epochs=cfg.epochs,
            max_grad_norm=cfg.max_grad_norm,
            mini_batch_size=cfg.mini_batch_size,
            gamma=cfg.gamma,
            make_loss=_RecipeLoss("ppo", cfg),
        ),  # fmt: skip
        actor_factory=OnPolicyActor.create_factory(
            obs, act, feature_extractor_kwargs=hidden, **policy
        ),
        storage_factory=GAEBuffer.create_factory(
            size=_steps(cfg, num_envs),
            gae_lambda=cfg.lmbda,
            recompute_each_epoch=cfg.recompute_advantage,
        ),
        train_envs_factory=train,
        test_envs_factory=test,
    )


class _ScaledRewards:
    """An envs factory whose envs multiply the learning reward by ``scale`` (returns in
    ``"episode_reward"`` stay unscaled), as the A2C recipe's ``make_train_env``."""

    def __init__(self, envs_factory, scale: float):
        self.envs_factory, self.scale = envs_factory, float(scale)

    def __call__(self, *args, **kwargs):
        from torchrl_lite.envs import RewardScaling, TransformedEnv

        env = self.envs_factory(*args, **kwargs)
        return TransformedEnv(env, RewardScaling(loc=0.0, scale=self.scale))


def _a2c(cfg):
    train, test, act, obs = _envs(cfg, cfg.num_envs)
    if cfg.reward_scale != 1.0:
        train = _ScaledRewards(train, cfg.reward_scale)
    updates = cfg.frames // cfg.frames_per_batch if cfg.lr_decay else None
    return dict(
        algo_factory=A2C.create_factory(
            lr=cfg.lr,
            max_grad_norm=cfg.max_grad_norm,
            gamma=cfg.gamma,
            lr_decay_updates=updates,
            make_loss=_RecipeLoss("a2c", cfg),
        ),  # fmt: skip
        actor_factory=_RecipeA2CActor(cfg, obs, act),
        storage_factory=GAEBuffer.create_factory(
            size=_steps(cfg, cfg.num_envs),
            gae_lambda=cfg.lmbda,
            recompute_each_epoch=False,
            normalize_advantage=True,
        ),  # fmt: skip
        train_envs_factory=train,
        test_envs_factory=test,
    )


def _off_policy(name: str, algo_cls, extra, refused: dict | None = None):
    def build(cfg):
        num_envs = getattr(cfg, "num_envs", 1)
        train, test, act, obs = _envs(cfg, num_envs)  # first: it refuses pixels=true
        _refuse(cfg, refused or {})
        updates = getattr(cfg, "optim_steps_per_batch", None)
        if updates is None:
            updates = max(1, round(cfg.utd_ratio * cfg.frames_per_batch))
        kwargs = dict(
            lr=cfg.lr, gamma=cfg.gamma, num_updates=updates,
            update_every=_steps(cfg, num_envs), start_steps=cfg.init_random_frames,
            mini_batch_size=cfg.batch_size, **extra(cfg),
        )  # fmt: skip
        return dict(
            algo_factory=algo_cls.create_factory(**kwargs),
            actor_factory=OffPolicyActor.create_factory(
                obs, act, algorithm_name=name, hidden=cfg.hidden
            ),
            storage_factory=_replay_factory(cfg),
            train_envs_factory=train,
            test_envs_factory=test,
        )

    return build


SCHEME_ALGOS = {
    "ppo": _ppo,
    "a2c": _a2c,
    "sac": _off_policy(
        "SAC",
        SAC,
        lambda c: {"polyak": 1 - c.tau, "initial_alpha": c.alpha_init},
        {
            "loss_function": "the critic's loss",
            "init": "the weight initialisation",
            "action_repeat": "repeated actions",
            **dict.fromkeys(_PIXEL_ONLY, "a pixel setting"),
        },
    ),
    "td3": _off_policy(
        "TD3",
        TD3,
        lambda c: {
            "polyak": 1 - c.tau,
            "policy_delay": c.policy_delay,
            "exploration_noise": c.exploration_noise,
            "policy_noise": c.policy_noise,
            "noise_clip": c.noise_clip,
        },
    ),  # fmt: skip
    "ddpg": _off_policy(
        "DDPG", DDPG, lambda c: {"polyak": 1 - c.tau, "exploration_noise": c.exploration_noise}
    ),
    # the DQN recipe is double DQN
    "dqn": _off_policy(
        "DDQN",
        DDQN,
        lambda c: {
            "target_update_interval": c.target_update_interval,
            "initial_epsilon": c.eps_init,
            "final_epsilon": c.eps_end,
            "max_grad_norm": c.max_grad_norm,
            "epsilon_annealing_steps": max(
                1, c.eps_frames * c.optim_steps_per_batch // c.frames_per_batch
            ),
        },
        {"lr_end": "a learning-rate decay", "lr_drop_at": "a learning-rate drop"},
    ),  # fmt: skip
}
"""Recipes the Scheme path runs (the offline ones, REDQ, CQL, IQL and TD3+BC, do not)."""


def factories_from_recipe(algo_name: str, cfg) -> dict:
    """The ``Scheme`` factories of a recipe run: ``algo_factory``, ``actor_factory``,
    ``storage_factory``, ``train_envs_factory``, ``test_envs_factory``.

    Args:
        algo_name: ``"ppo"``, ``"a2c"``, ``"sac"``, ``"td3"``, ``"ddpg"`` or ``"dqn"``.
        cfg: the recipe's ``Config`` (e.g. ``config_for(get_recipe("ppo"), env)``).

    Example:
        >>> from torchrl_lite.recipes import get_recipe
        >>> factories = factories_from_recipe("ppo", get_recipe("ppo").Config())
        >>> sorted(factories)[:2], factories["storage_factory"].kwargs["size"]
        (['actor_factory', 'algo_factory'], 512)
    """
    key = str(algo_name).lower().replace("-", "_")
    if key not in SCHEME_ALGOS:
        hint = did_you_mean(key, list(SCHEME_ALGOS))
        raise ValueError(
            f"factories_from_recipe: {algo_name!r} has no Scheme path.{hint} "
            f"Available: {', '.join(SCHEME_ALGOS)}."
        )
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(
            f"factories_from_recipe: cfg must be the recipe's Config instance, got "
            f"{type(cfg).__name__}; build it with get_recipe({key!r}).Config(...) (or "
            f"config_for(get_recipe({key!r}), env))."
        )
    return SCHEME_ALGOS[key](cfg)
