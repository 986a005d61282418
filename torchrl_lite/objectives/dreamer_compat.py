"""Dreamer's three losses in TorchRL's form: TensorDict modules in, keys read by name.

Paper: Hafner et al. 2020, "Dream to Control: Learning Behaviors by Latent Imagination",
https://arxiv.org/abs/1912.01603.

TorchRL builds its losses from a world model (a TensorDict module that encodes, runs the
RSSM and decodes, then predicts the reward), an actor and a value model reading
``("state", "belief")``, and a ``DreamerEnv(world_model=...)``. ``DreamerModelLoss(world_model)``,
``DreamerActorLoss(actor, value, model_based_env)`` with such an env and
``DreamerValueLoss(value_model, ...)`` with a TensorDict value model build the classes
here (ours, from the networks themselves, are in :mod:`torchrl_lite.objectives.dreamer`).
The maths are the same as ours, with TorchRL's reductions:

- ``loss_model_kl = mean(max(KL(q || p), free_nats))`` (the KL summed over the state dims
  per step, clamped per step unless ``delayed_clamp``);
- ``loss_model_reco = mean_b sum ||o - reco||^2`` over the last three dims, and
  ``loss_model_reward = mean (r - r_hat)^2``;
- ``loss_actor = -mean_n sum_t gamma^t V^lambda_t`` and ``loss_value = mean_n sum_t
  gamma^t (v(s_t) - V^lambda_t)^2`` (``discount_loss``; without it no ``gamma^t``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.envs.utils import step_mdp
from torchrl_lite.modules.tensordict_module.exploration import (
    ExplorationType,
    set_exploration_type,
)
from torchrl_lite.objectives._loss_maths import check_distance, distance_loss
from torchrl_lite.objectives.dreamer import (
    DreamerActorLoss,
    DreamerModelLoss,
    DreamerValueLoss,
    _frozen,
    lambda_returns,
)
from torchrl_lite.objectives.value import ValueEstimators

__all__ = ["TorchRLDreamerActorLoss", "TorchRLDreamerModelLoss", "TorchRLDreamerValueLoss"]

LAMBDA_TARGET = "lambda_target"


def _discount(gamma: float, like: torch.Tensor) -> torch.Tensor:
    """``gamma^t`` along the time dim (-2) of ``like`` ``[*B, T, 1]``."""
    steps = torch.arange(like.shape[-2], device=like.device, dtype=like.dtype)
    return (gamma**steps).unsqueeze(-1).expand_as(like)


class TorchRLDreamerModelLoss(DreamerModelLoss):
    """The world-model loss of a TorchRL world model (see the module docstring).

    ``forward(batch)`` returns ``(losses, batch)``: the three terms (shape ``[1]``) and
    the batch the world model filled (detached), whose ``("next", "state")`` and
    ``("next", "belief")`` start the actor's imagination.

    Args:
        world_model: a ``WorldModelWrapper``: its transition model writes
            ``("next", prior_mean/prior_std/posterior_mean/posterior_std)`` and
            ``("next", reco_pixels)``, its reward model ``("next", "reward")``.
        lambda_kl, lambda_reco, lambda_reward: the weights of the terms.
        reco_loss, reward_loss: the distances (``"l2"`` by default, ``"l1"``, ``"smooth_l1"``).
        free_nats: the KL is not pushed below this.
        delayed_clamp: clamp the mean KL instead of each step's.
        global_average: average the KL and reconstruction over every entry instead of
            summing over the state dims and the image.
    """

    @dataclass
    class _AcceptedKeys:
        reward: str | tuple = K.REWARD
        true_reward: str | tuple = "true_reward"
        prior_mean: str | tuple = "prior_mean"
        prior_std: str | tuple = "prior_std"
        posterior_mean: str | tuple = "posterior_mean"
        posterior_std: str | tuple = "posterior_std"
        pixels: str | tuple = K.PIXELS
        reco_pixels: str | tuple = "reco_pixels"

    def __init__(self, world_model, *, lambda_kl=1.0, lambda_reco=1.0, lambda_reward=1.0,
                 reco_loss=None, reward_loss=None, free_nats=3, delayed_clamp=False,
                 global_average=False):  # fmt: skip
        super(DreamerModelLoss, self).__init__()  # LossModule's state
        self.world_model = world_model
        self.reco_loss = check_distance(reco_loss or "l2", "DreamerModelLoss")
        self.reward_loss = check_distance(reward_loss or "l2", "DreamerModelLoss")
        self.lambda_kl, self.lambda_reco, self.lambda_reward = lambda_kl, lambda_reco, lambda_reward
        self.free_nats, self.delayed_clamp = free_nats, delayed_clamp
        self.global_average = global_average

    @property
    def in_keys(self) -> list:
        keys = self.tensor_keys
        return [K.ACTION, (K.NEXT, keys.pixels), (K.NEXT, keys.reward)]

    @property
    def out_keys(self) -> list:
        return ["loss_model_kl", "loss_model_reco", "loss_model_reward"]

    def kl_loss(self, prior_mean, prior_std, posterior_mean, posterior_std) -> torch.Tensor:
        """The clamped KL ``KL(q || p)`` (a scalar)."""
        var_ratio = (posterior_std / prior_std) ** 2
        mahalanobis = ((posterior_mean - prior_mean) / prior_std) ** 2
        kl = 0.5 * (var_ratio + mahalanobis - 1 - var_ratio.log())  # [B, T, S]
        kl = kl.mean(-1) if self.global_average else kl.sum(-1)
        if self.delayed_clamp:
            return kl.mean().clamp_min(self.free_nats)
        return kl.clamp_min(self.free_nats).mean()

    def forward(self, tensordict: TensorDictBase):
        keys = self.tensor_keys
        td = tensordict.clone(False)
        td.rename_key_((K.NEXT, keys.reward), (K.NEXT, keys.true_reward))
        td = self.world_model(td)
        nxt = td.get(K.NEXT)
        kl = self.kl_loss(
            nxt.get(keys.prior_mean), nxt.get(keys.prior_std),
            nxt.get(keys.posterior_mean), nxt.get(keys.posterior_std),
        )  # fmt: skip
        pixels = nxt.get(keys.pixels)
        reco = distance_loss(pixels, nxt.get(keys.reco_pixels).to(pixels.dtype), self.reco_loss)
        if not self.global_average:
            reco = reco.sum((-3, -2, -1))  # the image (or, for a vector, the whole batch)
        reward = distance_loss(nxt.get(keys.true_reward), nxt.get(keys.reward), self.reward_loss)
        losses = TensorDict(
            loss_model_kl=self.lambda_kl * kl.unsqueeze(-1),
            loss_model_reco=self.lambda_reco * reco.mean().unsqueeze(-1),
            loss_model_reward=self.lambda_reward * reward.mean().unsqueeze(-1),
            batch_size=[],
        )  # fmt: skip
        return losses, td.detach()


class TorchRLDreamerActorLoss(DreamerActorLoss):
    """The actor loss, imagining in a ``DreamerEnv(world_model=...)`` (module docstring).

    ``forward(batch)`` reads ``"state"`` and ``"belief"`` of the world model's output and
    returns ``(losses, imagined)``: ``"loss_actor"`` and the imagined rollout ``[N, H]``
    with ``"lambda_target"`` (detached), what the value loss reads. ``gamma`` and
    ``lmbda`` come from :meth:`make_value_estimator` (default 0.99, 0.95).

    Args:
        actor_model: a probabilistic actor reading ``("state", "belief")``.
        value_model: a TensorDict module writing ``"state_value"``.
        model_based_env: the imagination env.
        imagination_horizon: ``H``.
        discount_loss: weigh step ``t`` by ``gamma^t``.
    """

    @dataclass
    class _AcceptedKeys:
        belief: str | tuple = "belief"
        reward: str | tuple = K.REWARD
        value: str | tuple = "state_value"
        done: str | tuple = K.DONE
        terminated: str | tuple = K.TERMINATED

    def __init__(self, actor_model, value_model, model_based_env, *, imagination_horizon=15,
                 discount_loss=True, gamma=None, lmbda=None):  # fmt: skip
        if gamma is not None or lmbda is not None:
            raise TypeError(
                "DreamerActorLoss(gamma=, lmbda=) are not taken by the constructor: call "
                "loss.make_value_estimator(gamma=..., lmbda=...)."
            )
        super(DreamerActorLoss, self).__init__()  # LossModule's state
        self.actor_model = actor_model
        self.__dict__["value_model"] = value_model  # trained by the value loss
        self.model_based_env = model_based_env
        self.imagination_horizon, self.discount_loss = int(imagination_horizon), discount_loss
        self.gamma, self.lmbda = 0.99, 0.95

    @property
    def in_keys(self) -> list:
        return ["state", self.tensor_keys.belief]

    @property
    def out_keys(self) -> list:
        return ["loss_actor"]

    def make_value_estimator(self, value_type=None, **hyperparams):
        """Set the lambda-return's ``gamma`` and ``lmbda`` (TD(lambda) only); returns the loss."""
        if value_type not in (None, ValueEstimators.TDLambda):
            raise ValueError(
                f"DreamerActorLoss uses TD(lambda) returns; got value_type={value_type!r}: "
                "pass ValueEstimators.TDLambda or nothing."
            )
        unknown = set(hyperparams) - {"gamma", "lmbda"}
        if unknown:
            raise TypeError(
                f"DreamerActorLoss.make_value_estimator takes gamma and lmbda, got {sorted(unknown)}."
            )
        self.gamma = float(hyperparams.get("gamma", self.gamma))
        self.lmbda = float(hyperparams.get("lmbda", self.lmbda))
        return self

    def lambda_target(self, reward: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """``V^lambda`` ``[*B, H, 1]`` of imagined rewards and next values (no episode ends)."""
        return lambda_returns(reward, value, self.gamma, self.lmbda)

    def forward(self, tensordict: TensorDictBase):
        keys = self.tensor_keys
        start = tensordict.select("state", keys.belief).detach().reshape(-1)
        env = self.model_based_env
        with _frozen(env, self.value_model), set_exploration_type(ExplorationType.RANDOM):
            start = env.reset(start.copy())
            imagined = env.rollout(
                self.imagination_horizon, self.actor_model, auto_reset=False, tensordict=start
            )  # [N, H]
            next_td = self.value_model(step_mdp(imagined, keep_other=True))
        reward = imagined.get((K.NEXT, keys.reward))  # [N, H, 1]
        target = self.lambda_target(reward, next_td.get(keys.value))  # [N, H, 1]
        imagined.set(LAMBDA_TARGET, target)
        weighted = target * _discount(self.gamma, target) if self.discount_loss else target
        loss = -weighted.sum((-2, -1)).mean()
        return TensorDict(loss_actor=loss, batch_size=[]), imagined.detach()


class TorchRLDreamerValueLoss(DreamerValueLoss):
    """The value loss on an imagined rollout with ``"lambda_target"`` (module docstring).

    Args:
        value_model: a TensorDict module writing ``"state_value"``.
        value_loss: the distance (``"l2"`` by default).
        discount_loss: weigh step ``t`` by ``gamma^t``.
        gamma: the discount of that weight.
    """

    @dataclass
    class _AcceptedKeys:
        value: str | tuple = "state_value"

    def __init__(self, value_model, value_loss=None, discount_loss=True, gamma=0.99):
        super(DreamerValueLoss, self).__init__()  # LossModule's state
        self.value_model = value_model
        self.value_loss = check_distance(value_loss or "l2", "DreamerValueLoss")
        self.discount_loss, self.gamma = discount_loss, gamma

    @property
    def in_keys(self) -> list:
        return [*self.value_model.in_keys, LAMBDA_TARGET]

    @property
    def out_keys(self) -> list:
        return ["loss_value"]

    def forward(self, fake_data: TensorDictBase):
        target = fake_data.get(LAMBDA_TARGET)  # [N, H, 1]
        selected = fake_data.select(*self.value_model.in_keys, strict=False)
        value = self.value_model(selected).get(self.tensor_keys.value)
        error = distance_loss(value, target, self.value_loss)
        if self.discount_loss:
            error = error * _discount(self.gamma, target)
        loss = error.sum((-1, -2)).mean()
        return TensorDict(loss_value=loss, batch_size=[]), fake_data
