"""Randomized ensembled double Q-learning: ``REDQLoss``.

Paper: Chen et al. 2021, "Randomized Ensembled Double Q-Learning: Learning Fast Without a
Model", https://arxiv.org/abs/2101.05982.

The terms are SAC's (see :class:`SACLoss`) with two changes: the target's value of
the next state is the minimum over ``M`` target Q-networks drawn at random (without
replacement) at each call, ``min_{i in M} Q'_i(s', a') - alpha * log pi(a'|s')``;
and the actor maximises the mean over all ``N`` Q-networks,
``loss_actor = mean(alpha * log pi(a|s) - mean_i Q_i(s, a))``. Every Q-network is
regressed onto the same target. The paper's update-to-data ratio (``G`` updates per
environment step) belongs to the training loop.

Shapes: a batch ``[*B]``; Q-values of the ``N`` Q-networks ``[N, *B]``; of the sampled
subset ``[M, *B]``; targets ``[*B, 1]``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite.objectives.sac import SACLoss

__all__ = ["REDQLoss"]


class REDQLoss(SACLoss):
    """SAC with an ensemble of ``N`` Q-networks and a random subset of ``M`` in the target.

    Its terms are written out in the module docstring.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. a ``ProbabilisticActor``
            with a ``TanhNormal``.
        qvalue_network: a TensorDict module reading the observation and ``"action"`` and
            writing ``"state_action_value"`` ``[*B, 1]``; copied ``num_qvalue_nets`` times.
        num_qvalue_nets: ``N``, the ensemble size.
        sub_sample_len: ``M``, the number of target Q-networks the target minimises over.
        **kwargs: the other arguments of :class:`SACLoss` (``loss_function``,
            ``alpha_init``, ``min_alpha``, ``max_alpha``, ``fixed_alpha``,
            ``target_entropy``, ``action_spec``, ``delay_actor``, ``delay_qvalue``,
            ``gamma``).

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(MLP(3, 4, depth=1),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=TanhNormal)
        >>> qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        >>> loss_module = REDQLoss(actor, qvalue, num_qvalue_nets=10, sub_sample_len=2)
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.rand(8, 2),
        ...     next=TensorDict(observation=torch.randn(8, 3), reward=torch.randn(8, 1),
        ...         done=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss_module(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        num_qvalue_nets: int = 10,
        sub_sample_len: int = 2,
        **kwargs,
    ):
        if "value_network" in kwargs:
            raise TypeError("REDQLoss: there is no value network in REDQ (SAC v2 only).")
        if not 1 <= int(sub_sample_len) <= int(num_qvalue_nets):
            raise ValueError(
                f"REDQLoss: sub_sample_len must lie in [1, num_qvalue_nets={num_qvalue_nets}], "
                f"got {sub_sample_len}."
            )
        super().__init__(actor_network, qvalue_network, num_qvalue_nets=num_qvalue_nets, **kwargs)
        self.sub_sample_len = int(sub_sample_len)

    def _actor_q(self, qvalues: torch.Tensor) -> torch.Tensor:
        """``[N, *B]`` -> ``[*B]``: the mean over the whole ensemble."""
        return qvalues.mean(0)

    def _next_q(self, next_td: TensorDictBase, next_action: torch.Tensor) -> torch.Tensor:
        """``[*B]``: the minimum over ``M`` target Q-networks drawn at random."""
        target = self._target("qvalue_network")
        subset = torch.randperm(self.num_qvalue_nets, device=next_action.device)[
            : self.sub_sample_len
        ]
        out = target(self._q_input(next_td, next_action, None), params=target.params[subset])
        return self._read(out, "state_action_value", "the Q-network").min(0).values
