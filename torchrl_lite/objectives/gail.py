"""GAIL's discriminator loss (Ho & Ermon 2016, https://arxiv.org/abs/1606.03476).

A discriminator ``D(s, a)`` in (0, 1) learns to tell expert pairs (label 1) from the
policy's (label 0)::

    loss = BCE(D(s_E, a_E), 1) + BCE(D(s_pi, a_pi), 0)
         [+ gp_lambda * mean((||grad_x D(x_mix)||_2 - 1)^2)]   (use_grad_penalty)

with ``x_mix = u * x_pi + (1 - u) * x_E``, ``u ~ U(0, 1)`` per element (the WGAN-GP
penalty, https://arxiv.org/abs/1704.00028). The policy is then trained on the reward
``-log(1 - D(s, a))`` with any on-policy loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from torch.nn import functional as F

from torchrl_lite import _keys as K
from torchrl_lite.objectives.common import LossModule

__all__ = ["GAILLoss"]


@dataclass
class _GAILKeys:
    """Keys of ``GAILLoss``; change them with ``loss.set_keys(...)``.

    The expert pair is read at ``expert_observation``/``expert_action`` (which are also
    the discriminator's input names), the policy's pair at ``collector_observation``/
    ``collector_action``; the discriminator writes ``discriminator_pred``.
    """

    expert_observation: str | tuple = K.OBSERVATION
    expert_action: str | tuple = K.ACTION
    collector_observation: str | tuple = "collector_observation"
    collector_action: str | tuple = "collector_action"
    discriminator_pred: str | tuple = "d_logits"


class GAILLoss(LossModule):
    """The GAIL discriminator loss on a batch of expert and policy pairs.

    Returns ``"loss"`` (and the detached ``"gp_loss"`` with ``use_grad_penalty``).

    Args:
        discriminator_network: a TensorDict module reading ``expert_observation`` and
            ``expert_action`` and writing ``discriminator_pred`` ``[*B, 1]`` in (0, 1).
        use_grad_penalty: add the gradient penalty.
        gp_lambda: its weight.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` for the BCE terms.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> class D(torch.nn.Module):
        ...     def forward(self, s, a):
        ...         return torch.sigmoid(torch.cat([s, a], -1).sum(-1, keepdim=True))
        >>> loss = GAILLoss(TensorDictModule(D(), ["observation", "action"], ["d_logits"]))
        >>> z = torch.zeros(4, 2)
        >>> out = loss(TensorDict(observation=z, action=z, collector_observation=z,
        ...     collector_action=z, batch_size=[4]))
        >>> round(out["loss"].item(), 4)  # D = 0.5 everywhere: 2 log 2
        1.3863
    """

    _AcceptedKeys = _GAILKeys

    def __init__(
        self,
        discriminator_network,
        *,
        use_grad_penalty: bool = False,
        gp_lambda: float = 10.0,
        reduction: str = "mean",
    ):
        super().__init__()
        if not hasattr(discriminator_network, "in_keys"):
            raise TypeError(
                "GAILLoss: discriminator_network must be a TensorDict module reading the "
                "observation and action (e.g. TensorDictModule(net, ['observation', 'action'], "
                f"['d_logits'])), got {type(discriminator_network).__name__}."
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"GAILLoss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}."
            )
        if gp_lambda < 0:
            raise ValueError(f"GAILLoss: gp_lambda must be >= 0, got {gp_lambda}.")
        self.register_network("discriminator_network", discriminator_network)
        self.use_grad_penalty = bool(use_grad_penalty)
        self.gp_lambda = float(gp_lambda)
        self.reduction = reduction

    @property
    def in_keys(self) -> list:
        k = self.tensor_keys
        return [k.expert_observation, k.expert_action, k.collector_observation, k.collector_action]

    @property
    def out_keys(self) -> list:
        return ["loss", "gp_loss"] if self.use_grad_penalty else ["loss"]

    def _discriminate(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        k = self.tensor_keys
        batch = obs.shape[: obs.dim() - 1]
        inp = TensorDict({k.expert_observation: obs, k.expert_action: action}, batch_size=batch)
        pred = self.discriminator_network(inp).get(k.discriminator_pred, None)
        if pred is None:
            raise KeyError(
                f"GAILLoss: the discriminator did not write {k.discriminator_pred!r}; set the "
                "key it writes with loss.set_keys(discriminator_pred=<its out key>)."
            )
        return pred

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        obs_e = self._get(tensordict, "expert_observation")
        act_e = self._get(tensordict, "expert_action")
        obs_c = self._get(tensordict, "collector_observation")
        act_c = self._get(tensordict, "collector_action")
        n = obs_e.shape[0]
        pred = self._discriminate(torch.cat([obs_e, obs_c]), torch.cat([act_e, act_c]))
        expert, collected = pred[:n], pred[n:]
        loss = F.binary_cross_entropy(
            expert, torch.ones_like(expert), reduction=self.reduction
        ) + F.binary_cross_entropy(collected, torch.zeros_like(collected), reduction=self.reduction)
        out = {}
        if self.use_grad_penalty:
            u_obs, u_act = torch.rand_like(obs_e), torch.rand_like(act_e)
            mix_obs = (u_obs * obs_c + (1 - u_obs) * obs_e).detach().requires_grad_(True)
            mix_act = (u_act * act_c + (1 - u_act) * act_e).detach().requires_grad_(True)
            mix = self._discriminate(mix_obs, mix_act)
            grads = torch.autograd.grad(mix.sum(), [mix_obs, mix_act], create_graph=True)
            norm = torch.cat([g.flatten(1) for g in grads], -1).norm(2, dim=-1)  # [B]
            gp = self.gp_lambda * ((norm - 1) ** 2).mean()
            loss = loss + gp
            out["gp_loss"] = gp.detach()
        out["loss"] = loss
        return TensorDict(out, batch_size=[] if self.reduction != "none" else loss.shape[:1])
