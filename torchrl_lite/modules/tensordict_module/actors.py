"""Actors and critics: policies that write ``"action"``, value networks, shared trunks.

Each class is a thin, key-declaring wrapper over tensordict modules:

- ``Actor``: a deterministic policy, ``"observation" -> "action"``.
- ``ProbabilisticActor``: a network writing distribution parameters, then a sample
  (and its ``"sample_log_prob"``).
- ``ValueOperator``: ``"observation" -> "state_value"`` (``"state_action_value"`` when
  ``"action"`` is an input).
- ``ActorValueOperator`` / ``ActorCriticOperator``: a shared trunk with a policy head
  and a value (or Q-value) head; ``get_*_operator()`` give standalone modules holding
  the same sub-modules, hence the same parameters.
- ``ActorCriticWrapper``: a policy and a value network without a shared trunk.
- ``QValueActor`` / ``DistributionalQValueActor``: arg-max policies over action values
  (in ``qvalue.py``, re-exported here).
"""

from __future__ import annotations

from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModuleBase,
)
from tensordict.nn.distributions import Delta

from torchrl_lite import _keys as K
from torchrl_lite.modules.tensordict_module.common import SafeModule, SafeSequential
from torchrl_lite.modules.tensordict_module.probabilistic import (
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
)
from torchrl_lite.modules.tensordict_module.qvalue import (
    DistributionalQValueActor,
    DistributionalQValueModule,
    QValueActor,
    QValueModule,
)

__all__ = [
    "Actor",
    "ProbabilisticActor",
    "ValueOperator",
    "ActorValueOperator",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "QValueModule",
    "QValueActor",
    "DistributionalQValueModule",
    "DistributionalQValueActor",
]


def _as_list(keys) -> list:
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


def _input_keys(in_keys, owner: str) -> list:
    """``in_keys`` as a list (default ``["observation"]``), with at least one key."""
    keys = [K.OBSERVATION] if in_keys is None else _as_list(in_keys)
    if not keys:
        raise ValueError(
            f"{owner}: in_keys is empty, so the network would be called without inputs; "
            "name the entries it reads, e.g. in_keys=['observation']."
        )
    return keys


class Actor(SafeModule):
    """A deterministic policy: reads ``in_keys`` and writes the action.

    Args:
        module: the network (any callable) mapping observations to actions.
        in_keys: entries read. Defaults to ``["observation"]``.
        out_keys: entries written. Defaults to ``["action"]``.
        spec: the action spec (a ``TensorSpec`` or a ``Composite`` keyed by out key).
        safe: project the action into ``spec`` (otherwise it is written unchanged).

    Example:
        >>> from tensordict import TensorDict
        >>> actor = Actor(torch.nn.Linear(3, 1))
        >>> actor(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 1])
    """

    def __init__(self, module, in_keys=None, out_keys=None, *, spec=None, safe: bool = False):
        in_keys = _input_keys(in_keys, "Actor")
        out_keys = [K.ACTION] if out_keys is None else out_keys
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, spec=spec, safe=safe)


class ProbabilisticActor(SafeProbabilisticTensorDictSequential):
    """A stochastic policy: ``module`` writes distribution parameters, then a sample is drawn.

    The action is a sample under ``ExplorationType.RANDOM`` and the distribution's
    mode / deterministic sample under ``DETERMINISTIC`` (``default_interaction_type``
    outside any ``set_exploration_type`` block). ``get_dist(td)`` returns the
    distribution (losses use it).

    Args:
        module: a TensorDict module writing the parameters (e.g. ``loc``, ``scale``).
        in_keys: the parameter entries the distribution reads, e.g. ``["loc", "scale"]``.
        out_keys: where the action is written. Defaults to ``["action"]``.
        spec: the action spec; with ``safe=True`` the action is projected into it.
        safe: project the action into ``spec``.
        distribution_class: the distribution (e.g. ``TanhNormal``).
        distribution_kwargs: constant keyword arguments (e.g. ``{"low": -1, "high": 1}``).
        return_log_prob: also write the log-probability at ``log_prob_key``.
        default_interaction_type: exploration type outside ``set_exploration_type``.
        log_prob_key: key of the log-probability. Defaults to ``"sample_log_prob"``.
        **kwargs: passed to ``SafeProbabilisticModule`` (e.g. ``num_samples``).

    Raises:
        ValueError: a distribution parameter neither in ``in_keys`` nor in the kwargs.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2),
        ...     NormalParamExtractor()), in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ProbabilisticActor(net, in_keys=["loc", "scale"],
        ...     distribution_class=torch.distributions.Normal, return_log_prob=True)
        >>> td = actor(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))
        >>> td["action"].shape, td["sample_log_prob"].shape
        (torch.Size([4, 1]), torch.Size([4, 1]))
    """

    def __init__(
        self,
        module,
        in_keys,
        out_keys=None,
        *,
        spec=None,
        safe: bool = False,
        distribution_class=Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        log_prob_key=K.SAMPLE_LOG_PROB,
        **kwargs,
    ):
        if not isinstance(module, TensorDictModuleBase):
            raise TypeError(
                f"ProbabilisticActor: module must be a TensorDict module that writes the "
                f"distribution parameters {_as_list(in_keys)}, got {type(module).__name__}. "
                "Wrap it: TensorDictModule(net, in_keys=['observation'], out_keys=[...])."
            )
        sampler = SafeProbabilisticModule(
            in_keys=in_keys,
            out_keys=[K.ACTION] if out_keys is None else out_keys,
            spec=spec,
            safe=safe,
            distribution_class=distribution_class,
            distribution_kwargs=distribution_kwargs,
            return_log_prob=return_log_prob,
            default_interaction_type=default_interaction_type,
            log_prob_key=log_prob_key,
            **kwargs,
        )
        super().__init__(module, sampler)


class ValueOperator(SafeModule):
    """A value network: writes ``"state_value"``, or ``"state_action_value"`` if it reads ``"action"``.

    Args:
        module: the network; its inputs are ``in_keys`` in order.
        in_keys: entries read. Defaults to ``["observation"]``.
        out_keys: entries written. Defaults to ``["state_action_value"]`` when
            ``"action"`` is among ``in_keys``, else ``["state_value"]``.

    Example:
        >>> from tensordict import TensorDict
        >>> value = ValueOperator(torch.nn.Linear(3, 1), in_keys=["observation"])
        >>> value(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["state_value"].shape
        torch.Size([4, 1])
    """

    def __init__(self, module, in_keys=None, out_keys=None):
        in_keys = _input_keys(in_keys, "ValueOperator")
        if out_keys is None:
            out_keys = ["state_action_value" if K.ACTION in in_keys else K.STATE_VALUE]
        super().__init__(module, in_keys=in_keys, out_keys=out_keys)


def _is_probabilistic(module) -> bool:
    return isinstance(module, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))


def _check_td_module(module, role: str, owner: str) -> None:
    if not isinstance(module, TensorDictModuleBase):
        raise TypeError(
            f"{owner}: the {role} must be a TensorDict module (it declares the keys the "
            f"heads read), got {type(module).__name__}. Wrap it: SafeModule(net, "
            "in_keys=['pixels'], out_keys=['hidden'])."
        )


class ActorValueOperator(SafeSequential):
    """A shared trunk, a policy head and a value head, run in that order.

    A head given as a plain ``nn.Module`` is wrapped to read the trunk's ``out_keys``:
    the policy as an ``Actor``, the value as a ``ValueOperator``. The operators
    returned by ``get_policy_operator()`` / ``get_value_operator()`` hold the same
    trunk and heads, so they share (and train) the same parameters.

    Args:
        common_operator: the trunk, a TensorDict module (e.g. ``SafeModule``).
        policy_operator: the policy head (TensorDict module, probabilistic or not).
        value_operator: the value head.

    Example:
        >>> from tensordict import TensorDict
        >>> trunk = SafeModule(torch.nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
        >>> av = ActorValueOperator(trunk, torch.nn.Linear(8, 1), torch.nn.Linear(8, 1))
        >>> td = av(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))
        >>> sorted(k for k in td.keys() if k != "observation")
        ['action', 'hidden', 'state_value']
        >>> policy = av.get_policy_operator()
    """

    _value_reads_action = False

    def __init__(self, common_operator, policy_operator, value_operator):
        owner = type(self).__name__
        _check_td_module(common_operator, "common operator", owner)
        trunk_out = list(common_operator.out_keys)
        if not isinstance(policy_operator, TensorDictModuleBase):
            policy_operator = Actor(policy_operator, in_keys=trunk_out)
        if not isinstance(value_operator, TensorDictModuleBase):
            value_in = trunk_out + ([K.ACTION] if self._value_reads_action else [])
            value_operator = ValueOperator(value_operator, in_keys=value_in)
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_head(self):
        """The policy head alone (reads the trunk's outputs)."""
        return self.module[1]

    def get_value_head(self):
        """The value head alone (reads the trunk's outputs)."""
        return self.module[2]

    def get_policy_operator(self):
        """A standalone policy: trunk then policy head (same modules, same parameters)."""
        common, policy = self.module[0], self.module[1]
        if _is_probabilistic(policy):
            return SafeProbabilisticTensorDictSequential(common, policy)
        return SafeSequential(common, policy)

    def get_value_operator(self):
        """A standalone value network: trunk then value head (same parameters)."""
        return SafeSequential(self.module[0], self.module[2])


class ActorCriticOperator(ActorValueOperator):
    """A shared trunk, a policy head and a Q-value head that reads the action.

    The full operator writes the policy's action and ``Q(s, pi(s))``. A value head given
    as a plain ``nn.Module`` is wrapped as a ``ValueOperator`` reading the trunk's
    ``out_keys`` plus ``"action"`` (so it writes ``"state_action_value"``).

    Args:
        common_operator: the trunk, a TensorDict module.
        policy_operator: the policy head.
        value_operator: the Q-value head; must read ``"action"``.

    Example:
        >>> from tensordict import TensorDict
        >>> trunk = SafeModule(torch.nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
        >>> critic_head = ValueOperator(lambda h, a: h.sum(-1, keepdim=True) + a,
        ...     in_keys=["hidden", "action"])
        >>> ac = ActorCriticOperator(trunk, torch.nn.Linear(8, 1), critic_head)
        >>> td = ac(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))
        >>> td["state_action_value"].shape
        torch.Size([4, 1])
    """

    _value_reads_action = True

    def __init__(self, common_operator, policy_operator, value_operator):
        super().__init__(common_operator, policy_operator, value_operator)
        if K.ACTION not in self.module[2].in_keys:
            raise ValueError(
                f"ActorCriticOperator: the value head must read 'action' to estimate "
                f"Q(s, a); its in_keys are {self.module[2].in_keys}. Use "
                "ActorValueOperator for a state-value head."
            )

    def get_critic_operator(self):
        """``Q(s, a)`` for the action already in the input: trunk then Q-value head."""
        return SafeSequential(self.module[0], self.module[2])

    def get_value_operator(self):
        """``V(s) = Q(s, pi(s))``: the full operator (trunk, policy, Q-value head)."""
        return self


class ActorCriticWrapper(SafeSequential):
    """A policy and a value network without a shared trunk, run in that order.

    Args:
        policy_operator: the policy (a TensorDict module).
        value_operator: the value network (a TensorDict module).

    Example:
        >>> from tensordict import TensorDict
        >>> ac = ActorCriticWrapper(Actor(torch.nn.Linear(3, 1)),
        ...     ValueOperator(torch.nn.Linear(3, 1)))
        >>> sorted(ac(TensorDict(observation=torch.zeros(3))).keys())
        ['action', 'observation', 'state_value']
    """

    def __init__(self, policy_operator, value_operator):
        _check_td_module(policy_operator, "policy operator", "ActorCriticWrapper")
        _check_td_module(value_operator, "value operator", "ActorCriticWrapper")
        super().__init__(policy_operator, value_operator)

    def get_policy_operator(self):
        """The policy (the same module)."""
        return self.module[0]

    def get_value_operator(self):
        """The value network (the same module)."""
        return self.module[1]

    get_policy_head = get_policy_operator
    get_value_head = get_value_operator
