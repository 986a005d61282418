"""Advantage actor-critic loss.

Paper: Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning",
https://arxiv.org/abs/1602.01783.

``loss_objective = -mean(log pi(a|s) * A)``, ``loss_critic = critic_coef * mean(d(V(s),
value_target))``, ``loss_entropy = -entropy_coef * mean(H(pi))``.
"""

from __future__ import annotations

from tensordict import TensorDict, TensorDictBase

from torchrl_lite.objectives._actor_critic import OnPolicyLoss

__all__ = ["A2CLoss"]


class A2CLoss(OnPolicyLoss):
    """A2C: policy gradient with an advantage, a value loss and an entropy bonus.

    Reads ``"action"`` and ``"advantage"`` (computed with the default value estimator,
    GAE, when absent; that writes ``"value_target"`` too) and ``"value_target"``. Returns
    ``loss_objective``, ``loss_critic`` (with a critic), ``loss_entropy`` (with
    ``entropy_bonus``) and the detached ``entropy``.
    Paper: https://arxiv.org/abs/1602.01783.

    Args:
        actor_network: a probabilistic actor (``get_dist``), e.g. ``ProbabilisticActor``.
        critic_network: a value network writing ``"state_value"``, or None.
        entropy_bonus: add ``loss_entropy = -entropy_coef * mean entropy``.
        samples_mc_entropy: samples of the Monte-Carlo entropy when there is no closed form.
        entropy_coef: weight of the entropy bonus (default 0.01; or ``entropy_coeff``).
        critic_coef: weight of the value loss (default 1.0; or ``critic_coeff``).
        loss_critic_type: ``"l1"``, ``"l2"`` or ``"smooth_l1"``.
        gamma: discount of the default estimator (else 0.99; see ``make_value_estimator``).
        separate_losses: the value loss does not train parameters shared with the actor.
        clip_value: clip the value to ``old value ± clip_value`` in the value loss.

    Example:
        >>> from torchrl_lite.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> from torchrl_lite.modules import SafeModule
        >>> net = SafeModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["logits"])
        >>> actor = ProbabilisticActor(net, in_keys=["logits"],
        ...     distribution_class=OneHotCategorical, return_log_prob=True)
        >>> loss_fn = A2CLoss(actor, ValueOperator(nn.Linear(3, 1)))
        >>> batch = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> batch["advantage"], batch["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
        >>> sorted(k for k in loss_fn(batch).keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    @property
    def in_keys(self) -> list:
        keys = super().in_keys
        keys.remove(self.tensor_keys.sample_log_prob)  # on-policy: no behaviour log-prob
        return keys

    @property
    def out_keys(self) -> list:
        keys = ["loss_objective"]
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        if self.critic_network is not None:
            keys.append("loss_critic")
        return keys

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The A2C terms on a batch ``[*B]`` (see the class docstring)."""
        td = tensordict
        advantage = self._advantage(td)  # [*B]
        dist, log_prob = self._dist_and_log_prob(td)  # [*B]
        out: dict = {"loss_objective": -(log_prob * advantage).mean()}
        self._entropy_terms(dist, td, out)
        self._critic_terms(td, out)
        return self._output(out)
