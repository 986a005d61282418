"""What the off-policy losses (DDPG, TD3, SAC, REDQ, CQL, IQL) share: the Q-network
input, the bootstrapped target, action bounds and the learnable temperature of the
maximum-entropy losses (SAC family, online decision transformer).

Shapes: a batch ``[*B]``; actions ``[*B, *action_shape]``; state-action values written by
a Q-network ``[*B, 1]``, by an ensemble of ``N`` Q-networks ``[N, *B, 1]``; log
probabilities ``[*B]``; targets ``[*B, 1]`` (the value estimator's shape).
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.data.composite_spec import Composite
from torchrl_lite.objectives._input_checks import check_action_shape, first_call
from torchrl_lite.objectives._loss_maths import distance_loss
from torchrl_lite.objectives.common import LossModule, _LossValueError
from torchrl_lite.objectives.value import ValueEstimators


def _next(key) -> tuple:
    return (K.NEXT, *key) if isinstance(key, tuple) else (K.NEXT, key)


def _unique(keys) -> list:
    out = []
    for key in keys:
        if key not in out:
            out.append(key)
    return out


def action_spec_of(action_spec, actor, action_key):
    """The leaf spec of the action: ``action_spec`` if given, else the actor's, or None."""
    spec = action_spec if action_spec is not None else getattr(actor, "spec", None)
    if isinstance(spec, Composite):
        spec = spec.get(action_key)
    return spec


def action_shape_of(action_spec, action_key, owner: str):
    """The shape of ``action_spec`` (a leaf spec, or a ``Composite`` holding the action key),
    or None when no spec is given."""
    if action_spec is None:
        return None
    spec = action_spec_of(action_spec, None, action_key)
    if spec is None:
        raise ValueError(f"{owner}: action_spec has no entry {action_key!r}: {action_spec}.")
    return tuple(spec.shape)


def action_bounds(action_spec, actor, action_key, owner: str):
    """``(low, high)`` tensors ``[*action_shape]`` of a bounded action spec, else ValueError."""
    spec = action_spec_of(action_spec, actor, action_key)
    low, high = getattr(spec, "low", None), getattr(spec, "high", None)
    if low is None or high is None:
        raise ValueError(
            f"{owner}: needs the action bounds, but neither action_spec nor the actor's spec "
            f"gives a bounded spec for {action_key!r} (got {spec}). Pass "
            f"action_spec=Bounded(low, high, shape=...) (e.g. env.action_spec)."
        )
    return low.detach().clone(), high.detach().clone()


class Temperature:
    """The learnable temperature ``alpha = exp(log_alpha)`` of a maximum-entropy loss.

    A mixin of ``LossModule``: ``_init_temperature`` registers ``log_alpha`` (an
    ``nn.Parameter``, a buffer with ``fixed_alpha``) and the ``target_entropy`` buffer;
    ``_alpha()`` returns the detached ``alpha`` after projecting ``log_alpha`` into
    ``[log(min_alpha), log(max_alpha)]``.
    """

    def _init_temperature(
        self, alpha_init, min_alpha, max_alpha, fixed_alpha: bool, target_entropy, action_shape
    ) -> None:
        owner = type(self).__name__
        for name, value in (
            ("alpha_init", alpha_init),
            ("min_alpha", min_alpha),
            ("max_alpha", max_alpha),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{owner}: {name} must be a positive number, got {value!r}.")
        if min_alpha is not None and max_alpha is not None and min_alpha > max_alpha:
            raise ValueError(
                f"{owner}: min_alpha ({min_alpha}) must not exceed max_alpha ({max_alpha})."
            )
        log_alpha = torch.tensor(math.log(alpha_init))
        if fixed_alpha:
            self.register_buffer("log_alpha", log_alpha)
        else:
            self.log_alpha = nn.Parameter(log_alpha)
        self.fixed_alpha = bool(fixed_alpha)
        self._log_alpha_bounds = (
            None if min_alpha is None else math.log(min_alpha),
            None if max_alpha is None else math.log(max_alpha),
        )
        # "auto" without a known action shape is resolved on the first batch
        self._target_entropy_pending = target_entropy == "auto" and action_shape is None
        if target_entropy == "auto":
            value = float("nan") if action_shape is None else -float(math.prod(action_shape))
        elif isinstance(target_entropy, (int, float)) and not isinstance(target_entropy, bool):
            value = float(target_entropy)
        else:
            raise TypeError(
                f"{owner}: target_entropy must be 'auto' or a number, got {target_entropy!r}."
            )
        self.register_buffer("target_entropy", torch.tensor(value))

    def _alpha(self) -> torch.Tensor:
        """``alpha`` (detached scalar), ``log_alpha`` first projected into its bounds."""
        low, high = self._log_alpha_bounds
        if low is not None or high is not None:
            with torch.no_grad():
                self.log_alpha.clamp_(low, high)
        return self.log_alpha.detach().exp()

    def _target_entropy_for(self, action: torch.Tensor, batch_dims: int) -> torch.Tensor:
        """The target entropy; "auto" is ``-prod(action_shape)``, read once from ``action``."""
        if self._target_entropy_pending:
            self.target_entropy.fill_(-float(math.prod(action.shape[batch_dims:])))
            self._target_entropy_pending = False
        return self.target_entropy


class OffPolicyLoss(LossModule):
    """Base of the actor-critic off-policy losses: Q inputs, next states, TD targets.

    Subclasses register ``actor_network`` and the Q-network named ``_q_name`` (an
    ``Ensemble`` with output ``[N, *B]``, or a single network with output ``[*B]``) and call
    the helpers below. The keys dataclass has ``action``, ``state_action_value``,
    ``priority``, ``reward``, ``done`` and ``terminated``.
    """

    default_value_estimator = ValueEstimators.TD0
    _q_name = "qvalue_network"

    def _check_network(self, network, role: str, example: str) -> None:
        if not hasattr(network, "in_keys"):
            raise TypeError(
                f"{type(self).__name__}: {role} must be a TensorDict module (e.g. {example}), "
                f"got {type(network).__name__}."
            )

    def _set_gamma(self, gamma) -> None:
        """Use ``gamma`` in the default estimator, built now so a bad value fails here."""
        if gamma is not None:
            self._value_kwargs["gamma"] = gamma
            self.make_value_estimator()

    # -- keys ------------------------------------------------------------------------
    def _obs_keys(self, network) -> list:
        """The entries ``network`` reads besides the action."""
        return [k for k in network.in_keys if k != self.tensor_keys.action]

    def _network_in_keys(self, *networks, next_networks=None) -> list:
        """The root entries ``networks`` read, the ``"next"`` entries ``next_networks``
        (default: ``networks``) read besides the action, then reward and done."""
        keys = self.tensor_keys
        next_networks = networks if next_networks is None else next_networks
        root = _unique(k for net in networks for k in net.in_keys)
        nxt = [_next(k) for k in _unique(k for net in next_networks for k in self._obs_keys(net))]
        return _unique([*root, keys.action, *nxt, _next(keys.reward), _next(keys.done)])

    def _check_batch_action(self, td: TensorDictBase) -> None:
        key = self.tensor_keys.action
        actor = getattr(self, "actor_network", None)
        spec = action_spec_of(None, actor, key) if actor is not None else None
        action = td.get(key, None)
        if spec is None or action is None or not hasattr(spec, "shape"):
            return
        try:
            check_action_shape(type(self).__name__, key, action, spec, td.batch_dims)
        except ValueError as err:
            self._checked_inputs.discard("action_shape")
            raise _LossValueError(str(err)) from err

    def _next_td(self, td: TensorDictBase) -> TensorDictBase:
        next_td = td.get(K.NEXT, None)
        if next_td is None:
            raise self._missing(td, K.NEXT, None)
        return next_td

    # -- networks --------------------------------------------------------------------
    def _q_input(self, td: TensorDictBase, action, samples: int | None) -> TensorDictBase:
        """The Q-network's input: its entries of ``td``, with ``action`` if given.

        With ``samples``, ``action`` is ``[samples, *B, ...]`` and the observations are
        expanded to ``[samples, *B]``.
        """
        net = getattr(self, self._q_name)
        if action is None:
            if first_call(self, "action_shape"):  # once: the batch's actions fit the actor
                self._check_batch_action(td)
            return td.select(*net.in_keys)
        inp = td.select(*self._obs_keys(net))
        if samples is not None:
            inp = inp.expand(samples, *inp.batch_size)
        inp.set(self.tensor_keys.action, action)
        return inp

    def _read(self, out: TensorDictBase, field: str, network: str) -> torch.Tensor:
        """``out[self.tensor_keys.<field>]`` squeezed to drop the trailing singleton dim."""
        key = getattr(self.tensor_keys, field)
        value = out.get(key, None)
        if value is None:
            raise _LossValueError(
                f"{type(self).__name__}: {network} did not write {key!r} (it wrote "
                f"{list(out.keys(True, True))}); set the key it writes with "
                f"loss.set_keys({field}=<its out key>)."
            )
        if value.shape[-1:] != (1,):
            raise _LossValueError(
                f"{type(self).__name__}: {network} wrote {key!r} of shape {list(value.shape)}; "
                f"expected a trailing singleton dim ([..., 1])."
            )
        return value.squeeze(-1)

    def _qvalues(self, td, action=None, *, samples=None, target=False, detach=False):
        """``[N, *B]`` Q-values of the ensemble (``[*B]`` for a single Q-network), with the
        online, target (if there is one) or detached parameters.

        ``action`` replaces the batch's action; with ``samples`` it is ``[samples, *B,
        ...]`` and the values are ``[N, samples, *B]``.
        """
        inp = self._q_input(td, action, samples)
        if detach:
            out = self._call_detached(self._q_name, inp)
        elif target:
            out = self._target(self._q_name)(inp)
        else:
            out = getattr(self, self._q_name)(inp)
        return self._read(out, "state_action_value", "the Q-network")

    def _target(self, name: str):
        """The target copy of network ``name``, or the network itself if it has none."""
        target = getattr(self, f"target_{name}", None)
        return getattr(self, name) if target is None else target

    def _action_of(self, actor, td: TensorDictBase) -> torch.Tensor:
        """The action a deterministic ``actor`` writes for the entries of ``td`` it reads."""
        out = actor(td.select(*actor.in_keys))
        action = out.get(self.tensor_keys.action, None)
        if action is None:
            raise _LossValueError(
                f"{type(self).__name__}: the actor did not write {self.tensor_keys.action!r} "
                f"(it wrote {list(out.keys(True, True))}); set the key it writes with "
                f"loss.set_keys(action=<its out key>)."
            )
        return action

    def _policy_dist(self, td: TensorDictBase):
        """The actor's distribution on the entries of ``td`` it reads (``td`` unchanged)."""
        return self.actor_network.get_dist(td.select(*self.actor_network.in_keys))

    def _bootstrap(self, td: TensorDictBase, next_value: torch.Tensor) -> torch.Tensor:
        """The value estimator's target ``[*B, 1]`` from ``next_value`` ``[*B]`` (no grad)."""
        with torch.no_grad():
            return self.value_estimator.value_estimate(td, next_value=next_value.unsqueeze(-1))

    def _td_terms(self, td, pred: torch.Tensor, target: torch.Tensor, out: dict, name: str):
        """``out[name] = sum_i mean(w * d(Q_i, y))`` for predictions ``[N, *B]`` (or ``[*B]``)
        and the target ``[*B, 1]``, ``w`` the prioritized buffer's importance weights
        ``[*B]`` when the batch has them (``priority_weight`` key, ``"_weight"``), else 1;
        writes the TD error ``max_i |Q_i - y|`` ``[*B]``."""
        target = target.squeeze(-1).expand_as(pred)
        loss = distance_loss(pred, target, self.loss_function)  # [N, *B] or [*B]
        weight = td.get(self.tensor_keys.priority_weight, None)
        if weight is not None:
            loss = loss * weight.reshape(td.batch_size).to(loss.dtype)  # broadcast over N
        if pred.dim() > td.batch_dims:  # an ensemble: one mean per network, summed
            out[name] = loss.reshape(loss.shape[0], -1).mean(-1).sum()
            td_error = (pred.detach() - target).abs().max(0).values
        else:
            out[name] = loss.mean()
            td_error = (pred.detach() - target).abs()
        out["td_error"] = self._write_priority(td, td_error)

    def _write_priority(self, td: TensorDictBase, td_error: torch.Tensor) -> torch.Tensor:
        """Write the per-sample ``td_error`` ``[*B]`` (detached) into ``td``; return its mean."""
        td_error = td_error.detach()
        td.set(self.tensor_keys.priority, td_error)
        return td_error.mean()
