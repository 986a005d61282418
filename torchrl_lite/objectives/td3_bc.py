"""TD3 with behaviour cloning for offline RL: ``TD3BCLoss``.

Paper: Fujimoto & Gu 2021, "A Minimalist Approach to Offline Reinforcement Learning",
https://arxiv.org/abs/2106.06860.

Shapes: a batch ``[*B]``; actions ``[*B, *action_shape]``; Q-values ``[N, *B]``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch.nn import functional as F

from torchrl_lite.objectives.td3 import TD3Loss

__all__ = ["TD3BCLoss"]


class TD3BCLoss(TD3Loss):
    """TD3 whose actor loss adds a behaviour-cloning term weighted against the Q-value.

    ``loss_actor = -lmbda * mean(Q_1(s, mu(s))) + mean((mu(s) - a_data)^2)`` with
    ``lmbda = alpha / mean(|Q_1(s, mu(s))|)`` (detached; the mean squared error is taken
    over the batch and the action dims, as in the authors' code). ``loss_qvalue`` is TD3's.
    Also returns the detached ``bc_loss`` and ``lmbda``. Paper:
    https://arxiv.org/abs/2106.06860.

    Args:
        actor_network: a deterministic actor writing ``"action"`` (e.g. ``Actor``).
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``; copied ``num_qvalue_nets`` times.
        alpha: the weight of the Q-value term against the behaviour-cloning term.
        **kwargs: the other arguments of :class:`TD3Loss` (``action_spec``, ``bounds``,
            ``policy_noise``, ``noise_clip``, ``loss_function``, ``delay_actor``,
            ``delay_qvalue``, ``num_qvalue_nets``, ``gamma``).

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import MLP, Actor, ValueOperator
        >>> actor = Actor(MLP(3, 2, depth=1), spec=Bounded(-1.0, 1.0, shape=(2,)))
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = TD3BCLoss(actor, qvalue, alpha=2.5, gamma=0.99)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> losses = loss_module(batch)
        >>> sorted(k for k in losses.keys() if k.startswith("loss_")), losses["bc_loss"].shape
        (['loss_actor', 'loss_qvalue'], torch.Size([]))
    """

    def __init__(self, actor_network, qvalue_network, *, alpha: float = 2.5, **kwargs):
        if not alpha >= 0:
            raise ValueError(f"TD3BCLoss: alpha must be >= 0, got {alpha}.")
        super().__init__(actor_network, qvalue_network, **kwargs)
        self.alpha = float(alpha)

    @property
    def out_keys(self) -> list:
        return [*super().out_keys, "bc_loss", "lmbda"]

    def _actor_terms(self, td: TensorDictBase, out: dict) -> None:
        action = self._action_of(self.actor_network, td)  # [*B, *action_shape]
        q_first = self._qvalues(td, action, detach=True)[0]  # [*B]
        lmbda = self.alpha / q_first.detach().abs().mean().clamp_min(
            torch.finfo(q_first.dtype).tiny
        )
        bc_loss = F.mse_loss(action, self._get(td, "action"))
        out["loss_actor"] = -lmbda * q_first.mean() + bc_loss
        out["bc_loss"] = bc_loss.detach()
        out["lmbda"] = lmbda

    # actor_loss (inherited) returns ``loss_actor`` with ``{"bc_loss", "lmbda"}``; TorchRL's
    # TD3+BC script calls the critic's term ``qvalue_loss``: TD3's clipped double-Q loss
    def qvalue_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``(loss_qvalue, {"td_error", "pred_value", "target_value"})``, as ``value_loss``."""
        return self.value_loss(tensordict)
