"""Proximal policy optimisation losses: ``PPOLoss`` (plain importance-weighted policy
gradient), ``ClipPPOLoss`` (clipped surrogate) and ``KLPENPPOLoss`` (adaptive KL penalty).

Paper: Schulman et al. 2017, "Proximal Policy Optimization Algorithms",
https://arxiv.org/abs/1707.06347.

With ``r = pi(a|s) / pi_old(a|s)`` (from ``"sample_log_prob"``) and advantage ``A``, all
``[*B]``, the policy terms are

- PPOLoss: ``-mean(r * A)``
- ClipPPOLoss: ``-mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))``
- KLPENPPOLoss: ``-mean(r * A - beta * KL(pi_old || pi))``

plus ``loss_critic = critic_coef * mean(d(V(s), value_target))`` and
``loss_entropy = -entropy_coef * mean(H(pi))``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictModule
from torch import distributions as D

from torchrl_lite.objectives._actor_critic import OnPolicyLoss
from torchrl_lite.objectives._loss_maths import reduce_to_batch

__all__ = ["PPOLoss", "ClipPPOLoss", "KLPENPPOLoss"]


def _policy_diagnostics(log_weight: torch.Tensor, out: dict) -> None:
    """Detached ``"kl_approx"`` and ``"ESS"`` (effective sample size / N) of the ratios."""
    lw = log_weight.detach().reshape(-1)  # [N]
    out["kl_approx"] = (-lw).mean()  # E_old[log pi_old - log pi]
    # ESS / N = (sum w)^2 / (N sum w^2), from log-weights without overflow
    out["ESS"] = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp() / lw.numel()


class PPOLoss(OnPolicyLoss):
    """PPO without clipping or penalty: ``-mean(r * A)`` plus value and entropy terms.

    Reads ``"action"``, ``"sample_log_prob"``, ``"advantage"`` and ``"value_target"`` (GAE
    writes both when the advantage is absent); returns ``loss_objective``, ``loss_critic``,
    ``loss_entropy`` and the detached ``entropy``, ``kl_approx`` and ``ESS``.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. ``ProbabilisticActor``.
        critic_network: a value network writing ``"state_value"``, or None (no value loss;
            the batch holds the advantage).
        entropy_bonus: add ``loss_entropy = -entropy_coef * mean entropy``.
        samples_mc_entropy: samples of the Monte-Carlo entropy when there is no closed form.
        entropy_coef: weight of the entropy bonus (default 0.01; or ``entropy_coeff``).
        critic_coef: weight of the value loss (default 1.0; or ``critic_coeff``).
        loss_critic_type: ``"l1"``, ``"l2"`` or ``"smooth_l1"``.
        normalize_advantage: standardise the advantage over the batch (zero mean, unit std).
        gamma: discount of the default estimator (else 0.99; see ``make_value_estimator``).
        separate_losses: the value loss does not train parameters shared with the actor.
        clip_value: clip the value to ``old value ± clip_value`` in the value loss.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
        >>> net = TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
        ...     in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ProbabilisticActor(net, ["loc", "scale"], distribution_class=TanhNormal,
        ...     return_log_prob=True)
        >>> critic = ValueOperator(nn.Linear(3, 1), in_keys=["observation"])
        >>> loss_fn = PPOLoss(actor, critic)
        >>> batch = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> batch["advantage"], batch["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
        >>> sorted(k for k in loss_fn(batch).keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        actor_network,
        critic_network=None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coef: float | None = None,
        critic_coef: float | None = None,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        gamma: float | None = None,
        separate_losses: bool = False,
        clip_value: float | None = None,
        entropy_coeff: float | None = None,
        critic_coeff: float | None = None,
    ):
        super().__init__(
            actor_network,
            critic_network,
            entropy_bonus=entropy_bonus,
            samples_mc_entropy=samples_mc_entropy,
            entropy_coef=entropy_coef,
            critic_coef=critic_coef,
            loss_critic_type=loss_critic_type,
            gamma=gamma,
            separate_losses=separate_losses,
            clip_value=clip_value,
            entropy_coeff=entropy_coeff,
            critic_coeff=critic_coeff,
        )
        self.normalize_advantage = bool(normalize_advantage)

    @property
    def out_keys(self) -> list:
        keys = ["loss_objective", "kl_approx", "ESS"]
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        if self.critic_network is not None:
            keys.append("loss_critic")
        return keys

    def _objective(self, log_weight, advantage, dist, td, out: dict) -> torch.Tensor:
        """The policy term (``[*B]``, to be averaged and negated); may add diagnostics."""
        return log_weight.exp() * advantage

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The PPO terms on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        advantage = self._advantage(td)  # [*B]
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-6)
        dist, log_prob = self._dist_and_log_prob(td)  # [*B]
        log_weight = log_prob - self._old_log_prob(td)  # [*B]
        out: dict = {}
        gain = self._objective(log_weight, advantage, dist, td, out)
        out["loss_objective"] = -gain.mean()
        _policy_diagnostics(log_weight, out)
        self._entropy_terms(dist, td, out)
        self._critic_terms(td, out)
        return self._output(out)


class ClipPPOLoss(PPOLoss):
    """PPO with the clipped surrogate ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``.

    Adds the detached ``clip_fraction`` (share of samples with ``|r - 1| > eps``).
    Paper: https://arxiv.org/abs/1707.06347 (eq. 7).

    Args:
        actor_network: a probabilistic actor, e.g. ``ProbabilisticActor``.
        critic_network: a value network writing ``"state_value"``, or None.
        clip_epsilon: the clipping range ``eps``.
        clip_value: clip the value in the value loss to ``old value ± clip_value``;
            True uses ``clip_epsilon``.
        **kwargs: the other arguments of :class:`PPOLoss` (``entropy_coef`` /
            ``entropy_coeff``, ``critic_coef`` / ``critic_coeff``, ``loss_critic_type``, ``normalize_advantage``, ``gamma``,
            ``separate_losses``, ``entropy_bonus``, ``samples_mc_entropy``).

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
        >>> net = TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
        ...     in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ProbabilisticActor(net, in_keys=["loc", "scale"],
        ...     distribution_class=TanhNormal, return_log_prob=True)
        >>> critic = ValueOperator(nn.Linear(3, 1), in_keys=["observation"])
        >>> loss_fn = ClipPPOLoss(actor, critic)
        >>> optim = torch.optim.Adam(loss_fn.parameters(), lr=2e-4)
        >>> batch = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> batch["advantage"], batch["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
        >>> loss_vals = loss_fn(batch)
        >>> sum(v for k, v in loss_vals.items() if k.startswith("loss")).backward()
        >>> float(loss_vals["clip_fraction"])
        0.0
    """

    def __init__(self, actor_network, critic_network=None, *, clip_epsilon: float = 0.2, **kwargs):
        if not 0.0 < clip_epsilon < 1.0:
            raise ValueError(f"ClipPPOLoss: clip_epsilon must lie in (0, 1), got {clip_epsilon}.")
        if kwargs.get("clip_value") is True:
            kwargs["clip_value"] = clip_epsilon
        elif kwargs.get("clip_value") is False:
            kwargs["clip_value"] = None
        super().__init__(actor_network, critic_network, **kwargs)
        # a buffer, as in TorchRL: scripts anneal it in place (loss.clip_epsilon.copy_(...))
        self.register_buffer("clip_epsilon", torch.tensor(float(clip_epsilon)))

    @property
    def out_keys(self) -> list:
        return [*super().out_keys, "clip_fraction"]

    def _objective(self, log_weight, advantage, dist, td, out: dict) -> torch.Tensor:
        eps = self.clip_epsilon
        ratio = log_weight.exp()
        clipped = ratio.clamp(1.0 - eps, 1.0 + eps)
        out["clip_fraction"] = ((ratio.detach() - 1.0).abs() > eps).float().mean()
        return torch.minimum(ratio * advantage, clipped * advantage)


class KLPENPPOLoss(PPOLoss):
    """PPO with an adaptive KL penalty: ``-mean(r A - beta KL(pi_old || pi))``.

    The KL is analytic when the batch holds the old policy's distribution parameters
    (the entries the actor's distribution reads, e.g. ``"loc"``/``"scale"``, written at
    collection time) and torch knows the closed form; otherwise it is the sample estimate
    ``log pi_old(a) - log pi(a)`` at the batch's actions. After each call ``beta`` is
    multiplied by ``increment`` when the mean KL exceeds ``1.5 * dtarg`` and by
    ``decrement`` when it is below ``dtarg / 1.5`` (without a host sync).
    Paper: https://arxiv.org/abs/1707.06347 (section 4).

    Args:
        actor_network: a probabilistic actor, e.g. ``ProbabilisticActor``.
        critic_network: a value network writing ``"state_value"``, or None.
        dtarg: the target KL.
        beta: the initial penalty coefficient.
        increment: factor applied to ``beta`` when the KL is too large (> 1).
        decrement: factor applied to ``beta`` when the KL is too small (< 1).
        samples_mc_kl: samples of the Monte-Carlo KL when old parameters are present but
            no closed form exists.
        **kwargs: the other arguments of :class:`PPOLoss`.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import ProbabilisticActor, ValueOperator
        >>> net = TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
        ...     in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ProbabilisticActor(net, in_keys=["loc", "scale"],
        ...     distribution_class=torch.distributions.Normal, return_log_prob=True)
        >>> loss_fn = KLPENPPOLoss(actor, ValueOperator(nn.Linear(3, 1)), beta=1.0)
        >>> batch = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> batch["advantage"], batch["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
        >>> float(loss_fn(batch)["kl"])
        0.0
    """

    def __init__(
        self,
        actor_network,
        critic_network=None,
        *,
        dtarg: float = 0.01,
        beta: float = 1.0,
        increment: float = 2.0,
        decrement: float = 0.5,
        samples_mc_kl: int = 1,
        **kwargs,
    ):
        if increment < 1.0 or not 0.0 < decrement <= 1.0:
            raise ValueError(
                f"KLPENPPOLoss: need increment >= 1 and 0 < decrement <= 1, got "
                f"increment={increment}, decrement={decrement}."
            )
        super().__init__(actor_network, critic_network, **kwargs)
        self.dtarg = float(dtarg)
        self.increment = float(increment)
        self.decrement = float(decrement)
        self.samples_mc_kl = int(samples_mc_kl)
        self.register_buffer("beta", torch.tensor(float(beta)))
        sampler = _last_probabilistic(actor_network)
        self._dist_in = list(sampler.in_keys) if sampler is not None else []
        self._sampler = [sampler]  # not a submodule: already held by the actor

    @property
    def out_keys(self) -> list:
        return [*super().out_keys, "kl", "beta"]

    def _kl(self, dist, log_weight, td: TensorDictBase) -> torch.Tensor:
        """``KL(pi_old || pi)`` per sample ``[*B]``."""
        present = td.keys(include_nested=True)
        sampler = self._sampler[0]
        if sampler is not None and self._dist_in and all(k in present for k in self._dist_in):
            old_dist = sampler.get_dist(td.select(*self._dist_in).detach())
            try:
                return reduce_to_batch(D.kl_divergence(old_dist, dist), td.batch_dims)
            except NotImplementedError:
                sample = old_dist.sample((self.samples_mc_kl,))
                diff = old_dist.log_prob(sample) - dist.log_prob(sample)
                return reduce_to_batch(diff, td.batch_dims + 1).mean(0)
        return -log_weight

    def _objective(self, log_weight, advantage, dist, td, out: dict) -> torch.Tensor:
        kl = self._kl(dist, log_weight, td)  # [*B]
        beta = self.beta.clone()
        gain = log_weight.exp() * advantage - beta * kl
        with torch.no_grad():
            mean_kl = kl.detach().mean()
            factor = torch.where(
                mean_kl > 1.5 * self.dtarg,
                self.increment,
                torch.where(mean_kl < self.dtarg / 1.5, self.decrement, 1.0),
            )
            self.beta.mul_(factor)
        out["kl"] = mean_kl
        out["beta"] = beta
        return gain


def _last_probabilistic(actor):
    """The module that builds the actor's distribution (its ``in_keys`` are the params)."""
    found = None
    for module in actor.modules():
        if isinstance(module, ProbabilisticTensorDictModule):
            found = module
    return found
