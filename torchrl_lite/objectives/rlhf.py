"""RLHF: the reward model's Bradley-Terry loss, and two ways to keep PPO near the
reference policy.

Papers: Ouyang et al. 2022, "Training language models to follow instructions with human
feedback", https://arxiv.org/abs/2203.02155; Ziegler et al. 2019, "Fine-Tuning Language
Models from Human Preferences", https://arxiv.org/abs/1909.08593.

- Reward model: with scores ``r_c`` and ``r_r`` of the chosen and the rejected sequence of
  a pair, ``P(chosen > rejected) = sigmoid(r_c - r_r)`` (Bradley-Terry) and
  ``loss = -mean(log sigmoid(r_c - r_r))``.
- KL in the reward (:class:`KLRewardPenalty`, Ziegler et al.): each generated token's
  reward becomes ``r_t - beta * (log pi_old(a_t|s_t) - log pi_ref(a_t|s_t))`` (the
  sequence score stays on the last token); the sum over a sequence is a sample of
  ``score - beta * KL(pi_old || pi_ref)`` of that sequence. Then plain PPO.
- KL as a loss term (:class:`KLPenalizedPPOLoss`): ClipPPOLoss plus ``loss_kl_ref =
  beta * mean_t KL(pi(.|s_t) || pi_ref(.|s_t))``, exact over the vocabulary at each
  token; the rewards stay the reward model's.

Shapes: a batch of steps ``[*B]`` (e.g. ``[envs, T]``), one token each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from torch import distributions as D

from torchrl_lite import _keys as K
from torchrl_lite.objectives.common import LossModule
from torchrl_lite.objectives.ppo import ClipPPOLoss

__all__ = ["BradleyTerryLoss", "KLRewardPenalty", "KLPenalizedPPOLoss"]

CHOSEN, REJECTED = "chosen", "rejected"


class BradleyTerryLoss(LossModule):
    """The reward model's loss on preference pairs: ``-mean(log sigmoid(r_c - r_r))``.

    Reads ``("chosen", "tokens")``, ``("chosen", "length")`` and the same under
    ``"rejected"`` (``[*B, L]`` and ``[*B, 1]``); returns ``loss`` and the detached
    ``accuracy`` (fraction of pairs with ``r_c > r_r``) and ``margin`` (mean ``r_c -
    r_r``). Paper: https://arxiv.org/abs/2203.02155.

    Args:
        reward_model: ``(tokens, length) -> score [*B]``, e.g. a ``RewardModel``.

    Example:
        >>> from torchrl_lite.modules.models.language import RewardModel, TinyCausalLM
        >>> loss_fn = BradleyTerryLoss(RewardModel(TinyCausalLM(6, 8, hidden=16, n_layer=1)))
        >>> pair = {"tokens": torch.ones(4, 8, dtype=torch.long), "length": torch.full((4, 1), 3)}
        >>> out = loss_fn(TensorDict(chosen=pair, rejected=pair, batch_size=[4]))
        >>> round(out["loss"].item(), 4)  # equal sequences: log 2
        0.6931
    """

    def __init__(self, reward_model):
        super().__init__()
        self.reward_model = reward_model

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        scores = {}
        for side in (CHOSEN, REJECTED):
            pair = tensordict.get(side, None)
            if pair is None or pair.get("tokens", None) is None or pair.get("length", None) is None:
                raise KeyError(
                    f"BradleyTerryLoss: the batch needs ({side!r}, 'tokens') and ({side!r}, "
                    f"'length'); it has {sorted(str(k) for k in tensordict.keys(True, True))}."
                )
            scores[side] = self.reward_model(pair.get("tokens"), pair.get("length"))  # [*B]
        margin = scores[CHOSEN] - scores[REJECTED]
        return TensorDict(
            {
                "loss": -F.logsigmoid(margin).mean(),
                "accuracy": (margin > 0).float().mean().detach(),
                "margin": margin.mean().detach(),
            },
            batch_size=[],
        )


class KLRewardPenalty(torch.nn.Module):
    """Per-token KL to the reference in the reward: ``r_t - beta * (log pi_old - log pi_ref)``.

    On a collected batch ``[*B]`` (with ``"action"`` and ``"sample_log_prob"``, the
    log-probability under the acting policy), computes ``log pi_ref(a_t|s_t)`` with the
    frozen ``reference`` actor and rewrites ``("next", "reward")``; also writes the
    per-token ``"kl_ref"`` sample ``log pi_old - log pi_ref`` ``[*B, 1]``.
    Paper: https://arxiv.org/abs/1909.08593.

    Args:
        reference: the frozen reference policy (a probabilistic actor, ``get_dist``).
        beta: weight of the penalty.

    Example:
        >>> from torchrl_lite.modules.models.language import TinyCausalLM, token_actor
        >>> policy = token_actor(TinyCausalLM(6, 8, hidden=16, n_layer=1))
        >>> td = policy(TensorDict(tokens=torch.ones(3, 8, dtype=torch.long),
        ...     length=torch.full((3, 1), 2), batch_size=[3]))
        >>> td["next", "reward"] = torch.zeros(3, 1)
        >>> out = KLRewardPenalty(policy, beta=0.1)(td)  # reference = policy: no penalty
        >>> out["next", "reward"].abs().max() < 1e-6
        tensor(True)
    """

    def __init__(self, reference, beta: float):
        super().__init__()
        if not beta >= 0:
            raise ValueError(f"KLRewardPenalty: beta must be >= 0, got {beta!r}.")
        self.reference = reference
        self.beta = float(beta)

    @torch.no_grad()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = tensordict.get((K.NEXT, K.REWARD))  # [*B, 1]
        old = tensordict.get(K.SAMPLE_LOG_PROB).reshape(reward.shape)
        ref_dist = self.reference.get_dist(tensordict.select(*self.reference.in_keys))
        ref = ref_dist.log_prob(tensordict.get(K.ACTION)).reshape(reward.shape)
        kl = old - ref
        tensordict.set("kl_ref", kl)
        tensordict.set((K.NEXT, K.REWARD), reward - self.beta * kl)
        return tensordict


class KLPenalizedPPOLoss(ClipPPOLoss):
    """ClipPPOLoss plus ``loss_kl_ref = beta * mean KL(pi || pi_ref)`` (exact, per token).

    The KL of the current policy's distribution to the frozen reference's at each step of
    the batch (``torch.distributions.kl_divergence``; for a Categorical, the sum over the
    vocabulary) is averaged and weighted by ``beta``; it trains the actor only. Also
    returns the detached ``kl_ref``. Paper: https://arxiv.org/abs/2203.02155.

    Args:
        actor_network: the policy (probabilistic actor).
        critic_network: its value network.
        reference: the frozen reference policy (same inputs as the actor).
        beta: weight of the KL term.
        **kwargs: ClipPPOLoss's (``clip_epsilon``, ``entropy_coef``, ...).

    Example:
        >>> from torchrl_lite.modules.models.language import TinyCausalLM, token_actor, token_critic
        >>> lm = TinyCausalLM(6, 8, hidden=16, n_layer=1)
        >>> actor, critic = token_actor(lm), token_critic(TinyCausalLM(6, 8, hidden=16, n_layer=1))
        >>> loss_fn = KLPenalizedPPOLoss(actor, critic, reference=token_actor(lm), beta=0.1)
        >>> td = actor(TensorDict(tokens=torch.ones(3, 8, dtype=torch.long),
        ...     length=torch.full((3, 1), 2), batch_size=[3]))
        >>> td["advantage"], td["value_target"] = torch.zeros(3, 1), torch.zeros(3, 1)
        >>> float(loss_fn(td)["loss_kl_ref"])  # the reference shares the policy's weights
        0.0
    """

    def __init__(self, actor_network, critic_network=None, *, reference, beta: float, **kwargs):
        super().__init__(actor_network, critic_network, **kwargs)
        if not beta >= 0:
            raise ValueError(f"KLPenalizedPPOLoss: beta must be >= 0, got {beta!r}.")
        if not hasattr(reference, "get_dist"):
            raise TypeError(
                f"KLPenalizedPPOLoss: reference must be a probabilistic actor, got {type(reference).__name__}."
            )
        self.beta = float(beta)
        # frozen (read under no_grad), and not a submodule: not trained, not checkpointed
        object.__setattr__(self, "_reference", reference)

    @property
    def out_keys(self) -> list:
        return super().out_keys + ["loss_kl_ref", "kl_ref"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        out = super().forward(tensordict)
        inputs = tensordict.select(*self.actor_network.in_keys)
        dist = self.actor_network.get_dist(inputs.clone(False))
        with torch.no_grad():
            ref = self._reference.get_dist(inputs.clone(False))
        kl = D.kl_divergence(dist, ref).mean()
        out.set("loss_kl_ref", self.beta * kl)
        out.set("kl_ref", kl.detach())
        return out
