"""What the on-policy losses (PPO, A2C, REINFORCE) share: an actor whose distribution is
rebuilt from the batch, an optional critic, the advantage, the entropy and value terms.

Shapes: a batch of ``[*B]`` samples gives log-probabilities, ratios, entropies and
advantages of shape ``[*B]``; values and value targets are ``[*B, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.objectives._input_checks import (
    check_probabilistic_actor,
    missing_advantage_message,
)
from torchrl_lite.objectives._loss_maths import (
    check_distance,
    distance_loss,
    entropy_of,
    log_prob_of,
)
from torchrl_lite.objectives.common import LossModule, _LossKeyError, _LossValueError
from torchrl_lite.objectives.value import ValueEstimators


@dataclass
class _OnPolicyKeys:
    """Keys of the on-policy losses; change them with ``loss.set_keys(...)``.

    ``reward``, ``done`` and ``terminated`` are read under ``"next"`` by the value
    estimator; ``value`` is what the critic writes (and what the estimator stored).
    """

    advantage: str | tuple = K.ADVANTAGE
    value_target: str | tuple = K.VALUE_TARGET
    value: str | tuple = K.STATE_VALUE
    sample_log_prob: str | tuple = K.SAMPLE_LOG_PROB
    action: str | tuple = K.ACTION
    reward: str | tuple = K.REWARD
    done: str | tuple = K.DONE
    terminated: str | tuple = K.TERMINATED


def _as_batch(x: torch.Tensor, batch_shape: torch.Size, key, owner: str) -> torch.Tensor:
    """``x`` shaped ``[*B]`` (from ``[*B]`` or ``[*B, 1]``), else a ValueError."""
    if x.shape == batch_shape:
        return x
    if x.shape[:-1] == batch_shape and x.shape[-1] == 1:
        return x.squeeze(-1)
    raise _LossValueError(
        f"{owner}: {key!r} has shape {list(x.shape)}; expected {[*batch_shape, 1]} or "
        f"{list(batch_shape)} for a batch of size {list(batch_shape)}."
    )


def _alias(owner: str, name: str, value, alias_value, default):
    """``value`` or its TorchRL spelling ``<name>f`` (``entropy_coeff``), not both."""
    if alias_value is not None:
        if value is not None:
            raise TypeError(
                f"{owner}: got both {name}={value!r} and {name}f={alias_value!r}; they are "
                f"the same argument (TorchRL's older and newer spelling), give one."
            )
        return alias_value
    return default if value is None else value


def _shared_ids(a: nn.Module, b: nn.Module) -> set[int]:
    return {id(p) for p in a.parameters()} & {id(p) for p in b.parameters()}


class OnPolicyLoss(LossModule):
    """Base of PPO / A2C / REINFORCE: actor, optional critic, advantage, entropy, value loss.

    Subclasses implement ``forward`` with the helpers below.

    Args:
        actor_network: a probabilistic actor (``get_dist(td)`` gives the policy's
            distribution), e.g. a ``ProbabilisticActor``. With a
            ``ClippedProbabilisticActor``, the action the loss scores is its raw sample
            (``set_keys(action=actor.raw_action_key)``, done here).
        critic_network: a value network writing ``"state_value"``, or None.
        entropy_bonus: add ``loss_entropy = -entropy_coef * entropy``.
        samples_mc_entropy: samples of the Monte-Carlo entropy estimate (used when the
            distribution has no analytic entropy, e.g. ``TanhNormal``).
        entropy_coef: weight of the entropy bonus (default 0.01).
        critic_coef: weight of the value loss (default 1.0).
        loss_critic_type: ``"l1"``, ``"l2"`` or ``"smooth_l1"``.
        gamma: discount of the default value estimator.
        separate_losses: the value loss does not train parameters shared with the actor.
        clip_value: clip the value prediction to ``old value ± clip_value`` in the value
            loss (the old value is the batch's ``"state_value"``); None for no clipping.
        entropy_coeff: TorchRL's current name of ``entropy_coef`` (give one of them).
        critic_coeff: TorchRL's current name of ``critic_coef`` (give one of them).
    """

    _AcceptedKeys = _OnPolicyKeys
    default_value_estimator = ValueEstimators.GAE

    def __init__(
        self,
        actor_network: TensorDictModuleBase,
        critic_network: TensorDictModuleBase | None = None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coef: float | None = None,
        critic_coef: float | None = None,
        loss_critic_type: str = "smooth_l1",
        gamma: float | None = None,
        separate_losses: bool = False,
        clip_value: float | None = None,
        entropy_coeff: float | None = None,
        critic_coeff: float | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        entropy_coef = _alias(name, "entropy_coef", entropy_coef, entropy_coeff, 0.01)
        critic_coef = _alias(name, "critic_coef", critic_coef, critic_coeff, 1.0)
        check_probabilistic_actor(actor_network, name)
        if critic_network is not None and not hasattr(critic_network, "in_keys"):
            raise TypeError(
                f"{name}: critic_network must be a TensorDict module (e.g. ValueOperator), "
                f"got {type(critic_network).__name__}."
            )
        self.register_network("actor_network", actor_network)
        if critic_network is not None:
            self.register_network("critic_network", critic_network)
        else:
            self.critic_network = None
        self.entropy_bonus = bool(entropy_bonus)
        self.samples_mc_entropy = int(samples_mc_entropy)
        self.register_buffer("entropy_coef", torch.tensor(float(entropy_coef)))
        self.register_buffer("critic_coef", torch.tensor(float(critic_coef)))
        self.loss_critic_type = check_distance(loss_critic_type, name)
        self.separate_losses = bool(separate_losses)
        if clip_value is not None and (isinstance(clip_value, bool) or clip_value <= 0):
            raise ValueError(f"{name}: clip_value must be a positive number, got {clip_value!r}.")
        self.clip_value = clip_value
        self._set_value_kwargs(gamma=gamma)
        shared = _shared_ids(actor_network, critic_network) if critic_network is not None else set()
        self._detach_shared = shared if self.separate_losses else set()
        self._actor_in = list(actor_network.in_keys)
        raw_key = getattr(actor_network, "raw_action_key", None)
        if raw_key is not None:  # ClippedProbabilisticActor: its log-prob is the raw sample's
            self.set_keys(action=raw_key)
        self._critic_in = list(critic_network.in_keys) if critic_network is not None else []

    def _value_estimator_network(self):
        return self.critic_network

    @property
    def in_keys(self) -> list:
        keys = self.tensor_keys
        out = [*self._actor_in, keys.action, keys.sample_log_prob]
        for key in self._critic_in:
            if key not in out:
                out.append(key)
        out += [(K.NEXT, keys.reward), (K.NEXT, keys.done)]
        return out

    # -- pieces ----------------------------------------------------------------------
    def _advantage(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` advantage from the batch, computed by the value estimator if absent."""
        adv = td.get(self.tensor_keys.advantage, None)
        if adv is None and self.critic_network is None:
            raise _LossKeyError(
                missing_advantage_message(type(self).__name__, self.tensor_keys.advantage)
            )
        if adv is None:
            with torch.no_grad():
                self._estimate(td)
            adv = td.get(self.tensor_keys.advantage)
        return _as_batch(adv, td.batch_size, self.tensor_keys.advantage, type(self).__name__)

    def _dist_and_log_prob(self, td: TensorDictBase):
        """The current policy's distribution and log-probability of the batch's actions."""
        dist = self.actor_network.get_dist(td.select(*self._actor_in, strict=False))
        action = self._get(td, "action")
        if action.requires_grad:  # data, not a function of the parameters
            action = action.detach()
        return dist, log_prob_of(dist, action, td.batch_dims)

    def _old_log_prob(self, td: TensorDictBase) -> torch.Tensor:
        """``[*B]`` log-probability of the action under the policy that acted."""
        old = self._get(td, "sample_log_prob")
        if old.requires_grad:
            old = old.detach()
        if old.shape != td.batch_size:
            old = old.reshape(*td.batch_size, -1).sum(-1)  # per-dim log-probs: summed
        return old

    def _entropy_terms(self, dist, td: TensorDictBase, out: dict) -> None:
        """Write ``"entropy"`` (detached) and ``"loss_entropy"`` into ``out``."""
        if not self.entropy_bonus:
            return
        entropy = entropy_of(dist, td.batch_dims, self.samples_mc_entropy).mean()
        out["entropy"] = entropy.detach()
        out["loss_entropy"] = -self.entropy_coef * entropy

    def _critic_terms(self, td: TensorDictBase, out: dict) -> None:
        """Write ``"loss_critic"`` (and ``"value_clip_fraction"``) into ``out``."""
        if self.critic_network is None:
            return
        keys = self.tensor_keys
        target = self._get(td, "value_target")  # written with the advantage
        old_value = td.get(keys.value, None) if self.clip_value is not None else None
        if self.clip_value is not None and old_value is None:
            raise self._missing(td, keys.value, "value")
        value = self._critic_value(td)
        if value.shape != target.shape:
            raise _LossValueError(
                f"{type(self).__name__}: the critic wrote {keys.value!r} of shape "
                f"{list(value.shape)} but {keys.value_target!r} is {list(target.shape)}."
            )
        loss = distance_loss(value, target, self.loss_critic_type)
        if self.clip_value is not None:
            old_value = old_value.detach()
            clipped = old_value + (value - old_value).clamp(-self.clip_value, self.clip_value)
            loss_clipped = distance_loss(clipped, target, self.loss_critic_type)
            out["value_clip_fraction"] = (loss_clipped > loss).float().mean()
            loss = torch.maximum(loss, loss_clipped)
        out["loss_critic"] = self.critic_coef * loss.mean()

    def _critic_value(self, td: TensorDictBase) -> torch.Tensor:
        """``V(s)``, ``[*B, 1]``; shared parameters detached with ``separate_losses``."""
        inputs = td.select(*self._critic_in, strict=False)
        if self._detach_shared:
            params = TensorDict.from_module(self.critic_network)
            params = params.apply(lambda p: p.detach() if id(p) in self._detach_shared else p)
            with params.to_module(self.critic_network, preserve_module_state=False):
                out = self.critic_network(inputs)
        else:
            out = self.critic_network(inputs)
        value = out.get(self.tensor_keys.value, None)
        if value is None:
            raise _LossValueError(
                f"{type(self).__name__}: the critic did not write {self.tensor_keys.value!r} "
                f"(it wrote {list(out.keys(True, True))}); set the key it writes with "
                f"loss.set_keys(value=<its out key>)."
            )
        return value

    @staticmethod
    def _output(out: dict) -> TensorDict:
        return TensorDict(out, batch_size=[])
