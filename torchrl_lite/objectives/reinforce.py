"""REINFORCE: the Monte-Carlo policy gradient, optionally with a learned value baseline.

Paper: Williams 1992, "Simple statistical gradient-following algorithms for
connectionist reinforcement learning", https://doi.org/10.1007/BF00992696.

``loss_actor = -mean(log pi(a|s) * A)`` where ``A`` is the discounted return to the end
of the episode (``G_t``) or, with a critic, ``G_t - V(s_t)``; with a critic,
``loss_value = mean(d(V(s), G_t))``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite.objectives._actor_critic import OnPolicyLoss
from torchrl_lite.objectives.value import ValueEstimators

__all__ = ["ReinforceLoss"]


class ReinforceLoss(OnPolicyLoss):
    """REINFORCE, with an optional value baseline.

    The default value estimator is TD(1): the discounted return to the episode's end,
    bootstrapped with the critic at truncations and at the batch's last step (with zero
    when there is no critic). Reads ``"action"`` and ``"advantage"`` (computed when absent),
    with a critic also ``"value_target"``. Returns ``loss_actor`` and, with a critic,
    ``loss_value``. Paper: https://doi.org/10.1007/BF00992696.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. ``ProbabilisticActor``.
        critic_network: a value network writing ``"state_value"`` used as the baseline, or
            None for the plain return.
        delay_value: the value estimator uses a target copy of the critic (update it with
            ``SoftUpdate`` / ``HardUpdate``).
        loss_critic_type: ``"l1"``, ``"l2"`` or ``"smooth_l1"``.
        gamma: discount of the default estimator (else 0.99; see ``make_value_estimator``).

    Example:
        >>> from torchrl_lite.modules import OneHotCategorical, ProbabilisticActor, SafeModule
        >>> net = SafeModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["logits"])
        >>> actor = ProbabilisticActor(net, in_keys=["logits"],
        ...     distribution_class=OneHotCategorical, return_log_prob=True)
        >>> batch = actor(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        >>> batch["next"] = TensorDict(reward=torch.ones(5, 1),
        ...     done=torch.zeros(5, 1, dtype=torch.bool), batch_size=[5])
        >>> out = ReinforceLoss(actor, gamma=0.9)(batch)
        >>> batch["advantage"][:, 0]  # the returns: 1 + 0.9 + ... to the batch's end
        tensor([4.0951, 3.4390, 2.7100, 1.9000, 1.0000])
    """

    default_value_estimator = ValueEstimators.TD1

    def __init__(
        self,
        actor_network,
        critic_network=None,
        *,
        delay_value: bool = False,
        loss_critic_type: str = "smooth_l1",
        gamma: float | None = None,
    ):
        super().__init__(
            actor_network,
            critic_network,
            entropy_bonus=False,
            loss_critic_type=loss_critic_type,
            gamma=gamma,
        )
        self.delay_value = bool(delay_value)
        if self.delay_value:
            if critic_network is None:
                raise ValueError("ReinforceLoss: delay_value=True needs a critic_network.")
            self.register_network("critic_network", critic_network, create_target=True)

    def _value_estimator_network(self):
        return self.target_critic_network if self.delay_value else self.critic_network

    @property
    def in_keys(self) -> list:
        keys = super().in_keys
        keys.remove(self.tensor_keys.sample_log_prob)
        return keys

    @property
    def out_keys(self) -> list:
        return ["loss_actor"] + (["loss_value"] if self.critic_network is not None else [])

    def _advantage(self, td: TensorDictBase) -> torch.Tensor:
        if self.critic_network is None and td.get(self.tensor_keys.advantage, None) is None:
            reward = self._get(td, "reward", nested_next=True)
            with torch.no_grad():  # no critic: returns to go, bootstrapped with zero
                ret = self.value_estimator.value_estimate(td, next_value=torch.zeros_like(reward))
            td.set(self.tensor_keys.advantage, ret)
            td.set(self.tensor_keys.value_target, ret)
        return super()._advantage(td)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The REINFORCE terms on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        advantage = self._advantage(td)  # [*B]
        _, log_prob = self._dist_and_log_prob(td)  # [*B]
        out: dict = {"loss_actor": -(log_prob * advantage).mean()}
        self._critic_terms(td, out)
        if "loss_critic" in out:
            out["loss_value"] = out.pop("loss_critic")
        return self._output(out)
