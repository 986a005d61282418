"""DreamerV3's three losses: world model, actor (in imagination) and critic.

Paper: Hafner et al. 2023, "Mastering Diverse Domains through World Models",
https://arxiv.org/abs/2301.04104. Networks and the scalar maths (symlog, two-hot bins,
uniform-mixed categoricals) are in :mod:`torchrl_lite.modules.models.dreamer_v3` and
:mod:`torchrl_lite.modules.models.two_hot`.

World model, on replay slices ``[B, T]`` (``q``/``p``: posterior/prior categoricals):

- ``loss_model_dynamic = mean max(free, sum_C KL(sg(q) || p))`` (trains the prior) and
  ``loss_model_representation = mean max(free, sum_C KL(q || sg(p)))`` (trains the
  encoder), weighted 1 and 0.1, with ``free = 1`` nat (``kl_mode="separate"``; the
  default ``"balanced"`` mixes the two per categorical with ``alpha`` into one
  ``loss_model_kl``);
- ``loss_model_reco``: squared (or absolute) error in symlog space, summed over the
  observation's entries; ``loss_model_reward``: two-hot cross-entropy of the reward
  logits against the true reward; ``loss_model_continue`` (with ``lambda_continue > 0``):
  binary cross-entropy of the continue logit against ``scale * (1 - terminated)``.

Actor: ``H`` imagined steps from the posterior states; returns
``R_t = r_t + gamma c_{t+1} ((1 - lambda) v(s_{t+1}) + lambda R_{t+1})``, ``R_H = v(s_H)``
(``c``: the continuation model's probability, 1 without one), weights
``w_t = c_0 prod_{k=1..t} gamma c_k``; the returns are divided by
``S = max(min_scale, P95 - P5)``, the 5-95 percentile range of the returns tracked by an
exponential moving average (rate 0.01), so the entropy bonus ``eta = 3e-4`` means the same
whatever the reward scale:

- REINFORCE: ``loss_actor = -mean(w_t log pi(sg(a_t) | sg(s_t)) sg(R_t - v(s_t)) / S) - eta mean(w_t H_t)``;
- otherwise the returns' gradient through the (frozen) dynamics: ``-mean(w_t R_t) - eta mean(w_t H_t)``.

Critic: two-hot cross-entropy (or symlog squared error) of ``v(s_t)`` against
``sg(R_t)``, weighted by ``w_t``, plus ``slow_critic_regularization`` times the same loss
against a slow (Polyak-averaged) copy's prediction; step a
:class:`~torchrl_lite.objectives.SoftUpdate` on the value loss to move the copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase

from torchrl_lite.envs.utils import step_mdp
from torchrl_lite.modules.models.two_hot import (
    check_unimix,
    symlog,
    symlog_bins,
    two_hot_cross_entropy,
    two_hot_decode,
)
from torchrl_lite.modules.tensordict_module.exploration import (
    ExplorationType,
    set_exploration_type,
)
from torchrl_lite.objectives.common import LossModule
from torchrl_lite.objectives.dreamer import _frozen
from torchrl_lite.objectives.dreamer_v3_maths import (
    categorical_kl,
    categorical_kl_balanced,
    categorical_kl_terms,
    continuation_lambda_returns,
)
from torchrl_lite.objectives.value import ValueEstimators
from torchrl_lite.objectives.value.advantages import TD0Estimator, TDLambdaEstimator

__all__ = [
    "DreamerV3ActorLoss",
    "DreamerV3ModelLoss",
    "DreamerV3ValueLoss",
    "categorical_kl",
    "categorical_kl_balanced",
    "categorical_kl_terms",
    "continuation_lambda_returns",
]

LAMBDA_TARGET = "lambda_target"


def _check_reduction(reduction: str | None, owner: str) -> str:
    reduction = "mean" if reduction is None else reduction
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{owner}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
    return reduction


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _as_column(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x`` shaped like ``like`` ``[*B, H, 1]``: a per-step ``[*B, H]`` gains the last dim;
    a per-dimension ``[*B, H, A]`` (log-probability, entropy) is summed over it."""
    if x.ndim == like.ndim - 1:
        return x.unsqueeze(-1)
    if x.ndim == like.ndim and x.shape[-1] != 1:
        return x.sum(-1, keepdim=True)
    return x


class DreamerV3ModelLoss(LossModule):
    """The world-model loss (see the module docstring); ``forward`` returns
    ``(losses, world-model output)`` (the output detached unless ``detach_output=False``).

    The world model reads the batch and writes under ``"next"``: ``"prior_logits"``,
    ``"posterior_logits"`` ``[B, T, C, K]``, ``"reco_pixels"`` (the decoded observation),
    ``"reward_logits"`` (or the scalar ``"reward"`` with ``reward_two_hot=False``) and,
    for the continue term, ``"continue_pred"``. Each loss term has shape ``[1]``.

    Args:
        world_model: the TensorDict module above.
        lambda_kl, lambda_reco, lambda_reward, lambda_continue: the terms' weights
            (``lambda_continue=0`` leaves the continue term out).
        kl_mode: ``"balanced"`` (one ``loss_model_kl``) or ``"separate"``
            (``loss_model_dynamic`` and ``loss_model_representation``).
        lambda_dynamic, lambda_representation: the separate terms' weights (1 and 0.1).
        unimix: the uniform share in the KL's categoricals (separate mode).
        continue_target_scale: the continue target of a non-terminal step (``1 - 1/333``
            folds the discount into the continuation model).
        kl_alpha: the balance of ``"balanced"``. free_bits: the KL floor in nats.
        reco_loss: ``"l2"`` or ``"l1"``, in symlog space.
        reward_two_hot: two-hot reward logits (else a scalar reward, symlog squared error).
        num_reward_bins: the reward head's bins. global_average: average the
            reconstruction over every entry instead of summing per step.
        detach_output: detach the returned world-model output.
    """

    @dataclass
    class _AcceptedKeys:
        reward: str | tuple = "reward"
        reward_logits: str | tuple = "reward_logits"
        true_reward: str | tuple = "true_reward"
        prior_logits: str | tuple = "prior_logits"
        posterior_logits: str | tuple = "posterior_logits"
        pixels: str | tuple = "pixels"
        reco_pixels: str | tuple = "reco_pixels"
        continue_pred: str | tuple = "continue_pred"
        done: str | tuple = "done"
        terminated: str | tuple = "terminated"

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        world_model,
        *,
        lambda_kl: float = 1.0,
        lambda_reco: float = 1.0,
        lambda_reward: float = 1.0,
        lambda_continue: float = 0.0,
        kl_mode: str = "balanced",
        lambda_dynamic: float = 1.0,
        lambda_representation: float = 0.1,
        unimix: float = 0.0,
        continue_target_scale: float = 1.0,
        kl_alpha: float = 0.8,
        free_bits: float = 1.0,
        reco_loss: str = "l2",
        reward_two_hot: bool = True,
        num_reward_bins: int = 255,
        global_average: bool = False,
        detach_output: bool = True,
    ):
        super().__init__()
        name = type(self).__name__
        if kl_mode not in ("balanced", "separate"):
            raise ValueError(f"{name}: kl_mode must be 'balanced' or 'separate', got {kl_mode!r}.")
        if reco_loss not in ("l1", "l2"):
            raise ValueError(f"{name}: reco_loss must be 'l1' or 'l2', got {reco_loss!r}.")
        if not 0.0 < continue_target_scale <= 1.0:
            raise ValueError(
                f"{name}: continue_target_scale must lie in (0, 1] (e.g. 1 - 1/333), got "
                f"{continue_target_scale}."
            )
        if free_bits < 0:
            raise ValueError(f"{name}: free_bits must be >= 0 (paper: 1.0), got {free_bits}.")
        self.world_model = world_model
        self.lambda_kl, self.lambda_reco, self.lambda_reward = lambda_kl, lambda_reco, lambda_reward
        self.lambda_continue, self.kl_mode, self.kl_alpha = lambda_continue, kl_mode, kl_alpha
        self.lambda_dynamic, self.lambda_representation = lambda_dynamic, lambda_representation
        self.unimix = check_unimix(unimix, name)
        self.continue_target_scale, self.free_bits = continue_target_scale, free_bits
        self.reco_loss, self.reward_two_hot = reco_loss, reward_two_hot
        self.num_reward_bins, self.global_average = int(num_reward_bins), global_average
        self.detach_output = detach_output
        self.register_buffer("reward_bins", symlog_bins(self.num_reward_bins))

    @property
    def in_keys(self) -> list:
        keys = self.tensor_keys
        return ["action", ("next", keys.pixels), ("next", keys.reward)]

    @property
    def out_keys(self) -> list:
        kl = (["loss_model_dynamic", "loss_model_representation"] if self.kl_mode == "separate"
              else ["loss_model_kl"])  # fmt: skip
        extra = ["loss_model_continue"] if self.lambda_continue > 0 else []
        return [*kl, "loss_model_reco", "loss_model_reward", *extra]

    def _reward_loss(self, nxt: TensorDictBase) -> torch.Tensor:
        keys = self.tensor_keys
        true_reward = nxt.get(keys.true_reward)  # [B, T, 1]
        if not self.reward_two_hot:
            return (symlog(nxt.get(keys.reward)) - symlog(true_reward)).pow(2).mean()
        logits = nxt.get(keys.reward_logits, None)
        if logits is None:
            raise KeyError(
                f"{type(self).__name__}: the world model wrote no ('next', {keys.reward_logits!r}); "
                "with reward_two_hot=True the reward head must write its logits there "
                "(or set_keys(reward_logits=...))."
            )
        if logits.shape[-1] != self.num_reward_bins:
            raise ValueError(
                f"{type(self).__name__}: the reward logits have {logits.shape[-1]} classes but "
                f"num_reward_bins={self.num_reward_bins}; make them equal."
            )
        return two_hot_cross_entropy(logits, true_reward, self.reward_bins).mean()

    def forward(self, tensordict: TensorDictBase):
        keys = self.tensor_keys
        td = tensordict.copy()
        td.rename_key_(("next", keys.reward), ("next", keys.true_reward))
        td = self.world_model(td)
        nxt = td.get("next")
        post, prior = nxt.get(keys.posterior_logits), nxt.get(keys.prior_logits)
        out = TensorDict(batch_size=[])
        if self.kl_mode == "separate":
            dynamic, representation = categorical_kl_terms(post, prior, self.free_bits, self.unimix)
            out.set("loss_model_dynamic", self.lambda_kl * self.lambda_dynamic * dynamic.reshape(1))
            out.set("loss_model_representation",
                    self.lambda_kl * self.lambda_representation * representation.reshape(1))  # fmt: skip
        else:
            kl = categorical_kl_balanced(post, prior, self.kl_alpha, self.free_bits)
            out.set("loss_model_kl", self.lambda_kl * kl.reshape(1))
        pixels = nxt.get(keys.pixels)
        error = symlog(pixels.float()) - symlog(nxt.get(keys.reco_pixels))
        error = error.pow(2) if self.reco_loss == "l2" else error.abs()
        if not self.global_average:
            error = error.reshape(*td.batch_size, -1).sum(-1)  # summed per step
        out.set("loss_model_reco", self.lambda_reco * error.mean().reshape(1))
        out.set("loss_model_reward", self.lambda_reward * self._reward_loss(nxt).reshape(1))
        if self.lambda_continue > 0:
            logit = nxt.get(keys.continue_pred, None)
            ended = nxt.get(keys.terminated, None)
            ended = nxt.get(keys.done, None) if ended is None else ended
            if logit is not None and ended is not None:
                target = (~ended).to(logit.dtype) * self.continue_target_scale
                bce = F.binary_cross_entropy_with_logits(logit.reshape(target.shape), target)
                out.set("loss_model_continue", self.lambda_continue * bce.reshape(1))
        return out, (td.detach() if self.detach_output else td)


class DreamerV3ActorLoss(LossModule):
    """The actor loss through imagination (see the module docstring).

    ``forward(start)`` reads ``"state"`` and ``"belief"`` ``[N, S]``, ``[N, D]`` (posterior
    states), rolls ``imagination_horizon`` steps in ``model_based_env`` and returns
    ``(losses, imagined)``: ``"loss_actor"`` with the diagnostics ``"return_low"``,
    ``"return_high"``, ``"return_scale"``, ``"continuation_mean"``, and the detached
    rollout ``[N, H]`` holding ``"lambda_target"``, ``"discount_weight"`` (what
    :class:`DreamerV3ValueLoss` reads) and, with a continuation model, the root and next
    ``"continuation"``. ``gamma`` and ``lmbda`` are the value
    estimator's: ``make_value_estimator(ValueEstimators.TDLambda, gamma=..., lmbda=...)``.

    Args:
        actor_model: a probabilistic actor (``get_dist``) reading ``("state", "belief")``.
        value_model: the critic, writing ``"state_value"`` (trained by the value loss).
        model_based_env: a ``DreamerEnv(world_model=...)``.
        continuation_model: writes ``"continuation"`` (a probability) from a state.
        imagination_horizon: ``H``. discount_loss: weigh the steps by ``w_t``.
        entropy_bonus: ``eta``. use_reinforce: REINFORCE instead of the dynamics' gradient.
        return_normalization: divide by the percentile range ``S``.
        return_normalization_rate: its moving average's rate.
        return_normalization_quantiles: the two percentiles (0.05, 0.95).
        return_normalization_min_scale: the floor of ``S``.
    """

    @dataclass
    class _AcceptedKeys:
        state: str | tuple = "state"
        belief: str | tuple = "belief"
        reward: str | tuple = "reward"
        value: str | tuple = "state_value"
        action: str | tuple = "action"
        done: str | tuple = "done"
        terminated: str | tuple = "terminated"
        continuation: str | tuple = "continuation"
        discount_weight: str | tuple = "discount_weight"

    default_value_estimator = ValueEstimators.TDLambda

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        actor_model,
        value_model,
        model_based_env,
        *,
        continuation_model=None,
        imagination_horizon: int = 15,
        discount_loss: bool = True,
        entropy_bonus: float = 3e-4,
        use_reinforce: bool = False,
        return_normalization: bool = True,
        return_normalization_rate: float = 0.01,
        return_normalization_quantiles: tuple[float, float] = (0.05, 0.95),
        return_normalization_min_scale: float = 1.0,
        gamma=None,
        lmbda=None,
    ):
        name = type(self).__name__
        if gamma is not None or lmbda is not None:
            raise TypeError(
                f"{name}(gamma=, lmbda=) are not constructor arguments: call "
                "loss.make_value_estimator(ValueEstimators.TDLambda, gamma=..., lmbda=...)."
            )
        if not 0.0 <= return_normalization_rate <= 1.0:
            raise ValueError(
                f"{name}: return_normalization_rate must lie in [0, 1], got {return_normalization_rate}."
            )
        low, high = return_normalization_quantiles
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(
                f"{name}: return_normalization_quantiles must be (low, high) with "
                f"0 <= low < high <= 1 (paper: (0.05, 0.95)), got {return_normalization_quantiles}."
            )
        if return_normalization_min_scale <= 0:
            raise ValueError(
                f"{name}: return_normalization_min_scale must be > 0, got "
                f"{return_normalization_min_scale}."
            )
        super().__init__()
        self.actor_model = actor_model
        # used, not trained, here: kept out of this loss's parameters
        self.__dict__["value_model"] = value_model
        self.__dict__["continuation_model"] = continuation_model
        self.model_based_env = model_based_env
        self.imagination_horizon, self.discount_loss = int(imagination_horizon), discount_loss
        self.entropy_bonus, self.use_reinforce = entropy_bonus, use_reinforce
        self.return_normalization = return_normalization
        self.return_normalization_rate = return_normalization_rate
        self.return_normalization_quantiles = (float(low), float(high))
        self.return_normalization_min_scale = return_normalization_min_scale
        self.register_buffer("return_low", torch.tensor(0.0))
        self.register_buffer("return_high", torch.tensor(0.0))

    @property
    def in_keys(self) -> list:
        return [self.tensor_keys.state, self.tensor_keys.belief]

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "return_low", "return_high", "return_scale", "continuation_mean"]

    def make_value_estimator(self, value_type=None, **hyperparams):
        """The estimator giving ``gamma`` and ``lmbda`` (TD(lambda), TD(0): ``lmbda=0``, or
        TD(1): ``lmbda=1``); returns the loss."""
        value_type = self.default_value_estimator if value_type is None else value_type
        allowed = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
        if value_type not in allowed:
            raise ValueError(
                f"{type(self).__name__}: value_type must be one of {[v.name for v in allowed]} "
                f"(lambda-returns in imagination), got {value_type!r}."
            )
        return super().make_value_estimator(value_type, **hyperparams)

    def _gamma_lmbda(self) -> tuple[float, float]:
        est = self.value_estimator  # one of the three (make_value_estimator checks)
        if isinstance(est, TDLambdaEstimator):
            return float(est.gamma), float(est.lmbda)
        return float(est.gamma), 0.0 if isinstance(est, TD0Estimator) else 1.0

    def lambda_target(self, reward, next_value, continuation=None) -> torch.Tensor:
        """The returns ``R_t`` ``[*B, H, 1]`` (continuation 1 where None)."""
        gamma, lmbda = self._gamma_lmbda()
        if continuation is None:
            continuation = torch.ones_like(reward)
        return continuation_lambda_returns(reward, next_value, continuation, gamma, lmbda)

    def _return_scale(self, returns: torch.Tensor) -> torch.Tensor:
        """``max(min_scale, high - low)``; in training mode the percentiles of ``returns``
        first move ``low``/``high`` at the moving average's rate."""
        if not self.return_normalization:
            return torch.ones((), dtype=returns.dtype, device=returns.device)
        if self.training:
            levels = torch.tensor(self.return_normalization_quantiles, device=returns.device)
            low, high = torch.quantile(returns.detach().float().flatten(), levels)
            with torch.no_grad():
                self.return_low.lerp_(low.to(self.return_low), self.return_normalization_rate)
                self.return_high.lerp_(high.to(self.return_high), self.return_normalization_rate)
        return (self.return_high - self.return_low).clamp_min(self.return_normalization_min_scale)

    def _imagine(self, start: TensorDictBase):
        """Roll out in the model (its parameters and the critic's frozen): the rollout
        ``[*N, H]``, next values ``[*N, H, 1]`` and, with a continuation model, the
        continuations of the root and next states ``[*N, H, 1]`` (else None)."""
        env, keys = self.model_based_env, self.tensor_keys
        critic, cont_model = self.value_model, self.__dict__["continuation_model"]
        extra = () if cont_model is None else (cont_model,)
        with _frozen(env, critic, *extra), set_exploration_type(ExplorationType.RANDOM):
            start = env.reset(start.copy())
            imagined = env.rollout(
                self.imagination_horizon, self.actor_model, auto_reset=False, tensordict=start
            )  # [*N, H]
            nxt = critic(step_mdp(imagined, keep_other=True))
            if cont_model is None:
                return imagined, nxt.get(keys.value), None, None
            first = cont_model(imagined[..., :1].select(*cont_model.in_keys, strict=False))
            later = cont_model(nxt.select(*cont_model.in_keys, strict=False))
        cont_next = later.get(keys.continuation)  # c(s_{t+1})
        cont_root = torch.cat([first.get(keys.continuation), cont_next[..., :-1, :]], -2)
        return imagined, nxt.get(keys.value), cont_root, cont_next

    def _entropy(self, dist) -> torch.Tensor:
        try:
            return dist.entropy()
        except NotImplementedError:  # a one-sample estimate
            return -dist.log_prob(dist.rsample())

    def forward(self, tensordict: TensorDictBase):
        keys = self.tensor_keys
        start = tensordict.select(keys.state, keys.belief).detach()
        imagined, next_value, cont_root, cont_next = self._imagine(start)
        target = self.lambda_target(imagined.get(("next", keys.reward)), next_value, cont_next)
        imagined.set(LAMBDA_TARGET, target)
        if cont_root is not None:
            imagined.set(keys.continuation, cont_root)
            imagined.set(("next", keys.continuation), cont_next)
        if self.discount_loss:
            gamma, _ = self._gamma_lmbda()
            root = torch.ones_like(target) if cont_root is None else cont_root
            weight = torch.cat([root[..., :1, :], gamma * root[..., 1:, :]], -2).cumprod(-2)
        else:
            weight = torch.ones_like(target)
        weight = weight.detach()  # [*N, H, 1]
        imagined.set(keys.discount_weight, weight)

        dist = None
        if self.use_reinforce or self.entropy_bonus > 0:
            states = imagined.select(*self.actor_model.in_keys, strict=False).detach()
            dist = self.actor_model.get_dist(states)
        if self.use_reinforce:
            log_prob = _as_column(dist.log_prob(imagined.get(keys.action).detach()), target)
            with torch.no_grad():
                critic_in = imagined.select(*self.value_model.in_keys, strict=False)
                baseline = self.value_model(critic_in).get(keys.value)
            scale = self._return_scale(target)
            advantage = ((target - baseline) / scale).detach()
            loss = -(weight * log_prob * advantage).mean()
        else:
            scale = torch.ones((), dtype=target.dtype, device=target.device)
            loss = -(weight * target).mean()
        if self.entropy_bonus > 0:
            entropy = _as_column(self._entropy(dist), target)
            loss = loss - self.entropy_bonus * (weight * entropy).mean()
        cont_mean = torch.ones((), device=loss.device) if cont_next is None else cont_next.mean()
        out = TensorDict(
            loss_actor=loss, return_low=self.return_low.clone(),
            return_high=self.return_high.clone(), return_scale=scale.detach().clone(),
            continuation_mean=cont_mean.detach(), batch_size=[],
        )  # fmt: skip
        return out, imagined.detach()


class DreamerV3ValueLoss(LossModule):
    """The critic loss on the actor loss's imagined rollout (see the module docstring).

    Reads ``"lambda_target"`` ``[*N, H, 1]`` and ``"discount_weight"`` (else ``gamma^t``
    weights with ``discount_loss``, ``gamma`` from ``actor_loss`` when given);
    returns ``(losses, fake_data)`` with ``"loss_value"`` and the detached
    ``"value_slow_loss"``.

    Args:
        value_model: writes ``"state_value_logits"`` ``[*N, H, K]`` (two-hot) and/or the
            decoded ``"state_value"`` ``[*N, H, 1]``.
        value_loss: ``"symlog_mse"`` or ``"two_hot"``.
        discount_loss: weigh the steps when no ``"discount_weight"`` is given.
        gamma: the discount of those weights (ignored with ``actor_loss``).
        num_value_bins: ``K``. actor_loss: a :class:`DreamerV3ActorLoss` giving ``gamma``.
        slow_critic_regularization: the weight of the term towards the slow critic
            (> 0 creates the slow copy, updated by ``SoftUpdate(value_loss, tau=0.02)``).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """

    @dataclass
    class _AcceptedKeys:
        value: str | tuple = "state_value"
        value_logits: str | tuple = "state_value_logits"
        discount_weight: str | tuple = "discount_weight"

    def __init__(self, value_model, value_loss: str = "symlog_mse", discount_loss: bool = True,
                 gamma: float = 0.99, num_value_bins: int = 255, actor_loss=None,
                 slow_critic_regularization: float = 0.0, reduction: str | None = None):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        if value_loss not in ("symlog_mse", "two_hot"):
            raise ValueError(
                f"{name}: value_loss must be 'symlog_mse' or 'two_hot', got {value_loss!r}."
            )
        if slow_critic_regularization < 0:
            raise ValueError(
                f"{name}: slow_critic_regularization must be >= 0 (paper: 1.0), got "
                f"{slow_critic_regularization}."
            )
        self.reduction = _check_reduction(reduction, name)
        self.value_loss, self.discount_loss, self.gamma = value_loss, discount_loss, gamma
        self.slow_critic_regularization = slow_critic_regularization
        self.register_network("value_model", value_model,
                              create_target=slow_critic_regularization > 0)  # fmt: skip
        self.__dict__["_actor_loss"] = actor_loss  # not a submodule: its own parameters
        self.register_buffer("value_bins", symlog_bins(num_value_bins))

    @property
    def in_keys(self) -> list:
        return [*self.value_model.in_keys, LAMBDA_TARGET]

    @property
    def out_keys(self) -> list:
        return ["loss_value", "value_slow_loss"]

    def _gamma(self) -> float:
        actor_loss = self.__dict__["_actor_loss"]
        return self.gamma if actor_loss is None else actor_loss._gamma_lmbda()[0]

    def _prediction(self, out: TensorDictBase) -> torch.Tensor:
        if self.value_loss == "symlog_mse":
            return out.get(self.tensor_keys.value).squeeze(-1)  # [*N, H]
        logits = out.get(self.tensor_keys.value_logits, None)
        if logits is None:
            raise KeyError(
                f"{type(self).__name__}(value_loss='two_hot'): the value model wrote no "
                f"{self.tensor_keys.value_logits!r}; write the logits there "
                "(or set_keys(value_logits=...))."
            )
        if logits.shape[-1] != self.value_bins.numel():
            raise ValueError(
                f"{type(self).__name__}: the value logits have {logits.shape[-1]} classes but "
                f"num_value_bins={self.value_bins.numel()}; make them equal."
            )
        return logits  # [*N, H, K]

    def _distance(self, prediction, target) -> torch.Tensor:
        if self.value_loss == "two_hot":
            return two_hot_cross_entropy(prediction, target, self.value_bins)
        return (symlog(prediction) - symlog(target)).pow(2)

    def forward(self, fake_data: TensorDictBase):
        target = fake_data.get(LAMBDA_TARGET).squeeze(-1)  # [*N, H]
        inputs = fake_data.select(*self.value_model.in_keys, strict=False)
        prediction = self._prediction(self.value_model(inputs.copy()))
        weight = fake_data.get(self.tensor_keys.discount_weight, None)
        if weight is not None:
            weight = weight.squeeze(-1)
        elif self.discount_loss and target.ndim >= 2:
            steps = torch.arange(target.shape[-1], device=target.device, dtype=target.dtype)
            weight = (self._gamma() ** steps).expand_as(target)
        else:
            weight = torch.ones_like(target)
        loss = self._distance(prediction, target.detach())
        slow = torch.zeros_like(loss)
        if self.slow_critic_regularization > 0:
            with torch.no_grad():
                slow_out = self.target_value_model(inputs.copy())
                slow_value = slow_out.get(self.tensor_keys.value)
                if slow_value.shape[-1] == self.value_bins.numel():  # logits: decode them
                    slow_value = two_hot_decode(slow_value, self.value_bins).unsqueeze(-1)
            slow = self._distance(prediction, slow_value.squeeze(-1))
            loss = loss + self.slow_critic_regularization * slow
        out = TensorDict(
            loss_value=_reduce(weight * loss, self.reduction),
            value_slow_loss=_reduce(weight * slow, self.reduction).detach(), batch_size=[],
        )  # fmt: skip
        return out, fake_data
