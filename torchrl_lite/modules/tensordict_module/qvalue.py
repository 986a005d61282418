"""Arg-max policies over action values (DQN and distributional DQN).

``QValueModule`` reads ``"action_value"`` (``[*B, n_actions]``) and writes the greedy
``"action"`` (one-hot ``[*B, n]`` or an index ``[*B]``) and its value
``"chosen_action_value"`` (``[*B, 1]``). ``QValueActor`` puts a network before it.
The distributional versions read per-action distributions over a fixed ``support``
(``[*B, n_atoms, n_actions]`` log-probabilities) and act on their expectation.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from torch import nn
from torch.nn.functional import one_hot

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data.tensor_specs import Categorical, Composite, OneHot, TensorSpec
from torchrl_lite.modules.tensordict_module.common import (
    SafeModule,
    SafeSequential,
    _SpecMixin,
    missing_input_error,
)

__all__ = ["QValueModule", "QValueActor", "DistributionalQValueModule", "DistributionalQValueActor"]

ACTION_VALUE = "action_value"
CHOSEN_ACTION_VALUE = "chosen_action_value"
_ACTION_SPACES = ("one_hot", "categorical")


def resolve_action_space(action_space, spec, owner: str) -> str:
    """``"one_hot"`` or ``"categorical"``, given or read from the action spec.

    ``action_space`` may be a name (``"one_hot"``, ``"one-hot"``, ``"categorical"``) or a
    spec (``OneHot`` / ``Categorical``, or a ``Composite`` holding ``"action"``), as TorchRL
    accepts.
    """
    if isinstance(action_space, (TensorSpec, Composite)):
        action_space, spec = None, action_space
    if isinstance(action_space, str):
        action_space = action_space.replace("-", "_")
    leaf = spec.get(K.ACTION) if isinstance(spec, Composite) else spec
    if action_space is None:
        if isinstance(leaf, OneHot):
            return "one_hot"
        if isinstance(leaf, Categorical):
            return "categorical"
        raise ValueError(
            f"{owner}: pass action_space ('one_hot' or 'categorical') or a OneHot / "
            f"Categorical action spec; got action_space=None and spec={leaf}."
        )
    if action_space not in _ACTION_SPACES:
        raise ValueError(
            f"{owner}: action_space must be one of {_ACTION_SPACES} (or a OneHot / "
            f"Categorical spec), got {action_space!r}."
        )
    return action_space


class QValueModule(_SpecMixin, TensorDictModuleBase):
    """Write the greedy action of ``"action_value"`` and the value of that action.

    Args:
        action_space: ``"one_hot"`` (action ``[*B, n]``, int64) or ``"categorical"``
            (action index ``[*B]``, int64); read from ``spec`` when None.
        action_value_key: the entry with the values, ``[*B, n_actions]``.
        action_mask_key: optional bool entry ``[*B, n_actions]``; False actions are
            never chosen.
        out_keys: ``[action, action_value, chosen_action_value]`` keys.
        spec: the action spec (a ``TensorSpec`` or ``Composite`` with ``"action"``).
        safe: project the action into ``spec``.

    Example:
        >>> from tensordict import TensorDict
        >>> qv = QValueModule(action_space="categorical")
        >>> td = qv(TensorDict(action_value=torch.tensor([[0.0, 2.0, 1.0]]), batch_size=[1]))
        >>> td["action"], td["chosen_action_value"]
        (tensor([1]), tensor([[2.]]))
    """

    def __init__(
        self,
        action_space: str | None = None,
        action_value_key=ACTION_VALUE,
        action_mask_key=None,
        out_keys=None,
        spec=None,
        safe: bool = False,
    ):
        super().__init__()
        self.action_space = resolve_action_space(action_space, spec, type(self).__name__)
        self.action_value_key = action_value_key
        self.action_mask_key = action_mask_key
        self.in_keys = [action_value_key] + (
            [action_mask_key] if action_mask_key is not None else []
        )
        self.out_keys = (
            [K.ACTION, action_value_key, CHOSEN_ACTION_VALUE] if out_keys is None else out_keys
        )
        self._set_spec(spec, safe, self.out_keys[:1])

    def _greedy(self, values: torch.Tensor, tensordict: TensorDictBase) -> torch.Tensor:
        """Indices of the best allowed action, ``[*B]``."""
        if self.action_mask_key is not None:
            mask = tensordict.get(self.action_mask_key, None)
            if mask is None:
                raise missing_input_error(self, tensordict)
            values = values.masked_fill(~mask.bool(), float("-inf"))
        return values.argmax(-1)

    def _action(self, index: torch.Tensor, n: int) -> torch.Tensor:
        return one_hot(index, n) if self.action_space == "one_hot" else index

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        values = tensordict.get(self.action_value_key, None)
        if values is None:
            raise missing_input_error(self, tensordict)
        index = self._greedy(values, tensordict)  # [*B]
        chosen = values.gather(-1, index.unsqueeze(-1))  # [*B, 1]
        action_key, value_key, chosen_key = self.out_keys
        tensordict.set(action_key, self._action(index, values.shape[-1]))
        tensordict.set(value_key, values)
        tensordict.set(chosen_key, chosen)
        if self._project_items:
            self._project(tensordict)
        return tensordict


class DistributionalQValueModule(QValueModule):
    """Greedy action of per-action value distributions over a fixed ``support``.

    Reads ``"action_value"``: log-probabilities ``[*B, n_atoms, n_actions]``; the
    action maximises the expected value ``sum_atoms p * support``. Writes the action
    and passes ``"action_value"`` through.

    Args:
        action_space: ``"one_hot"`` or ``"categorical"`` (read from ``spec`` when None).
        support: the atoms' values, ``[n_atoms]``.
        action_value_key: the entry with the log-probabilities.
        action_mask_key: optional bool entry ``[*B, n_actions]`` of allowed actions.
        out_keys: ``[action, action_value]`` keys.
        spec: the action spec.
        safe: project the action into ``spec``.

    Example:
        >>> from tensordict import TensorDict
        >>> mod = DistributionalQValueModule("categorical", support=torch.tensor([0.0, 1.0]))
        >>> logp = torch.tensor([[[0.9, 0.1], [0.1, 0.9]]]).log()  # [1, atoms, actions]
        >>> mod(TensorDict(action_value=logp, batch_size=[1]))["action"]
        tensor([1])
    """

    def __init__(
        self,
        action_space: str | None,
        support: torch.Tensor,
        action_value_key=ACTION_VALUE,
        action_mask_key=None,
        out_keys=None,
        spec=None,
        safe: bool = False,
    ):
        out_keys = [K.ACTION, action_value_key] if out_keys is None else out_keys
        super().__init__(action_space, action_value_key, action_mask_key, out_keys, spec, safe)
        self.register_buffer("support", torch.as_tensor(support, dtype=torch.float32))

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        log_probs = tensordict.get(self.action_value_key, None)  # [*B, atoms, actions]
        if log_probs is None:
            raise missing_input_error(self, tensordict)
        if log_probs.shape[-2] != self.support.numel():
            raise ValueError(
                f"DistributionalQValueModule: {self.action_value_key!r} has "
                f"{log_probs.shape[-2]} atoms (dim -2 of {list(log_probs.shape)}) but the "
                f"support has {self.support.numel()}."
            )
        expected = (log_probs.exp() * self.support.unsqueeze(-1)).sum(-2)  # [*B, actions]
        index = self._greedy(expected, tensordict)
        tensordict.set(self.out_keys[0], self._action(index, expected.shape[-1]))
        tensordict.set(self.out_keys[1], log_probs)
        if self._project_items:
            self._project(tensordict)
        return tensordict


def _value_net(module, in_keys, action_value_key):
    if isinstance(module, TensorDictModuleBase):
        return module
    in_keys = [K.OBSERVATION] if in_keys is None else in_keys
    return SafeModule(module, in_keys=in_keys, out_keys=[action_value_key])


class QValueActor(SafeSequential):
    """A DQN policy: a network writes ``"action_value"``, then the greedy action is written.

    Args:
        module: the network ``[*B, obs] -> [*B, n_actions]``, or a TensorDict module
            writing ``action_value_key``.
        in_keys: entries the network reads. Defaults to ``["observation"]``.
        spec: the action spec (``OneHot`` / ``Categorical``, or a ``Composite``).
        safe: project the action into ``spec``.
        action_space: ``"one_hot"`` or ``"categorical"``; read from ``spec`` when None.
        action_value_key: the entry for the action values.
        action_mask_key: optional bool entry of allowed actions.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import OneHot
        >>> actor = QValueActor(torch.nn.Linear(4, 2), spec=OneHot(2))
        >>> td = actor(TensorDict(observation=torch.zeros(3, 4), batch_size=[3]))
        >>> td["action"].shape, td["chosen_action_value"].shape
        (torch.Size([3, 2]), torch.Size([3, 1]))
    """

    def __init__(
        self,
        module,
        in_keys=None,
        spec=None,
        safe: bool = False,
        action_space: str | None = None,
        action_value_key=ACTION_VALUE,
        action_mask_key=None,
    ):
        qvalue = QValueModule(action_space, action_value_key, action_mask_key, spec=spec, safe=safe)
        super().__init__(_value_net(module, in_keys, action_value_key), qvalue)

    @property
    def action_space(self) -> str:
        return self.module[-1].action_space


class _LogSoftmax(nn.Module):
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return values.log_softmax(-2)  # over the atoms of [*B, atoms, actions]


class DistributionalQValueActor(SafeSequential):
    """A distributional DQN policy: the network writes per-action atom logits.

    Args:
        module: the network ``[*B, obs] -> [*B, n_atoms, n_actions]``, or a TensorDict
            module writing ``action_value_key``.
        support: the atoms' values, ``[n_atoms]``.
        in_keys: entries the network reads. Defaults to ``["observation"]``.
        spec: the action spec.
        safe: project the action into ``spec``.
        action_space: ``"one_hot"`` or ``"categorical"``; read from ``spec`` when None.
        action_value_key: the entry for the atom log-probabilities.
        action_mask_key: optional bool entry of allowed actions.
        make_log_softmax: turn the network's logits into log-probabilities over atoms.

    Example:
        >>> from tensordict import TensorDict
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2 * 5), torch.nn.Unflatten(-1, (5, 2)))
        >>> actor = DistributionalQValueActor(net, support=torch.linspace(-1, 1, 5),
        ...     action_space="categorical")
        >>> actor(TensorDict(observation=torch.zeros(3, 4), batch_size=[3]))["action"].shape
        torch.Size([3])
    """

    def __init__(
        self,
        module,
        support: torch.Tensor,
        in_keys=None,
        spec=None,
        safe: bool = False,
        action_space: str | None = None,
        action_value_key=ACTION_VALUE,
        action_mask_key=None,
        make_log_softmax: bool = True,
    ):
        modules = [_value_net(module, in_keys, action_value_key)]
        if make_log_softmax:
            modules.append(SafeModule(_LogSoftmax(), [action_value_key], [action_value_key]))
        modules.append(
            DistributionalQValueModule(
                action_space, support, action_value_key, action_mask_key, spec=spec, safe=safe
            )
        )
        super().__init__(*modules)

    @property
    def action_space(self) -> str:
        return self.module[-1].action_space
