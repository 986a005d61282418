"""Seed 000's ``OffPolicyActor``: the networks of SAC, TD3, DDPG and DQN, built by the
recipes' own builders (``torchrl_lite.recipes.sac`` / ``.td3`` / ``.dqn``), with the seed's
``get_action`` and ``create_factory``."""

from __future__ import annotations

import dataclasses

import gymnasium
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite._utils import did_you_mean
from torchrl_lite.agent.actors._common import (
    ActorFactory,
    check_recurrent,
    clip_action,
    policy_action,
    specs_of,
)
from torchrl_lite.recipes import dqn as dqn_recipe
from torchrl_lite.recipes import sac as sac_recipe
from torchrl_lite.recipes import td3 as td3_recipe

__all__ = ["OffPolicyActor"]

# algorithm -> (recipe, the action space it needs)
_KINDS = {
    "SAC": (sac_recipe, gymnasium.spaces.Box),
    "TD3": (td3_recipe, gymnasium.spaces.Box),
    "DDPG": (td3_recipe, gymnasium.spaces.Box),  # the DDPG recipe uses TD3's networks
    "DQN": (dqn_recipe, gymnasium.spaces.Discrete),
    "DDQN": (dqn_recipe, gymnasium.spaces.Discrete),
}


def _check_algorithm(name: str, action_space) -> str:
    if name is None:
        return "DQN" if isinstance(action_space, gymnasium.spaces.Discrete) else "SAC"
    key = str(name).upper()
    if key not in _KINDS:
        hint = did_you_mean(key, list(_KINDS))
        raise ValueError(
            f"OffPolicyActor: unknown algorithm_name {name!r}.{hint} Known: {', '.join(_KINDS)}."
        )
    wanted = _KINDS[key][1]
    if not isinstance(action_space, wanted):
        raise TypeError(
            f"OffPolicyActor: {key} needs a {wanted.__name__} action space, got {action_space!r}."
        )
    return key


class OffPolicyActor(nn.Module):
    """The networks of an off-policy algorithm: ``actor.policy`` (what acts) and
    ``actor.q`` (the Q-network template the loss copies; None for DQN, whose policy is its
    Q-network).

    SAC: tanh-Normal policy and a Q(s, a) MLP; TD3 / DDPG: a deterministic tanh policy and
    a Q(s, a) MLP; DQN / DDQN: a Q-value actor (arg-max of ``"action_value"``). The
    networks are the recipes' (hidden sizes from the recipe's ``Config`` unless given).

    Args:
        obs_space, action_space: gymnasium spaces of one env (Box observations).
        algorithm_name: ``"SAC"``, ``"TD3"``, ``"DDPG"``, ``"DQN"`` or ``"DDQN"`` (default:
            SAC for Box actions, DQN for Discrete ones).
        hidden: units per hidden layer (None: the recipe's default).
        recurrent_nets: must be False.

    Example:
        >>> obs, act = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OffPolicyActor.create_factory(obs, act, algorithm_name="TD3")("cpu")
        >>> actor.get_action(torch.zeros(4, 3), None, None)[1].shape
        torch.Size([4, 1])
    """

    def __init__(self, obs_space, action_space, algorithm_name=None, hidden=None,
                 recurrent_nets: bool = False):  # fmt: skip
        super().__init__()
        check_recurrent(recurrent_nets)
        self.algorithm_name = _check_algorithm(algorithm_name, action_space)
        self.obs_space, self.action_space = obs_space, action_space
        recipe = _KINDS[self.algorithm_name][0]
        cfg = recipe.Config()
        if hidden is not None:
            cfg = dataclasses.replace(cfg, hidden=int(hidden))
        specs = specs_of(obs_space, action_space)
        if recipe is dqn_recipe:
            self.policy, self.q = recipe.make_qvalue_actor(cfg, specs), None
        else:
            self.policy, self.q = recipe.make_actor_qvalue(cfg, specs)
        self.action_spec = specs.action_spec
        self.in_keys = [K.OBSERVATION]

    @classmethod
    def create_factory(cls, obs_space, action_space, algorithm_name=None, hidden=None,
                       restart_model=None, recurrent_nets: bool = False):  # fmt: skip
        """``actor_factory(device) -> OffPolicyActor``; ``restart_model`` loads saved weights."""
        check_recurrent(recurrent_nets)
        return ActorFactory(
            cls, restart_model, obs_space=obs_space, action_space=action_space,
            algorithm_name=_check_algorithm(algorithm_name, action_space), hidden=hidden,
        )  # fmt: skip

    @property
    def recurrent_hidden_state_size(self) -> int:
        return 1

    @property
    def is_recurrent(self) -> bool:
        return False

    def get_action(self, obs, rhs, done, deterministic: bool = False):
        """``(action, clipped_action, logp_action, rhs, entropy)``. SAC samples unless
        ``deterministic``; TD3/DDPG/DQN act greedily (their exploration is the algorithm's
        ``acting_policy``), with zero log-probability and entropy."""
        if self.algorithm_name == "SAC":
            action, clipped, logp, entropy = policy_action(
                self.policy, self.in_keys, obs, self.action_space, deterministic
            )
            return action, clipped, logp, rhs, entropy
        td = TensorDict({K.OBSERVATION: obs}, batch_size=obs.shape[:1])
        action = self.policy(td).get(K.ACTION)
        zeros = torch.zeros(obs.shape[0], 1, device=obs.device)
        return action, clip_action(action, self.action_space), zeros, rhs, zeros
