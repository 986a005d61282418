"""What both seed-000 actors share: spec conversion, ``restart_model`` loading, get_action."""

from __future__ import annotations

import os
from types import SimpleNamespace

import gymnasium
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.agent._factory import Factory
from torchrl_lite.data import Composite
from torchrl_lite.envs.libs.gym import space_to_spec
from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
from torchrl_lite.objectives._loss_maths import entropy_of


def specs_of(obs_space, action_space) -> SimpleNamespace:
    """An object with the ``observation_spec`` / ``action_spec`` a GymWrapper of one env
    with these spaces declares (what the recipes' network builders read)."""
    obs = space_to_spec(obs_space, True)
    observation = Composite(shape=())
    if isinstance(obs, Composite):
        for key, spec in obs.items():
            observation[key] = spec
    else:
        observation[K.OBSERVATION] = obs
    return SimpleNamespace(observation_spec=observation, action_spec=space_to_spec(action_space))


def load_restart_model(module: nn.Module, path) -> None:
    """Load ``torch.save(actor.state_dict())`` (what ``Learner.save_model()`` writes).

    Raises FileNotFoundError for a missing file and ValueError naming the entries when the
    file does not fit the actor (other networks, spaces or feature extractor).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"restart_model={path!r}: no such file. Pass the path Learner.save_model() "
            f"returned (the actor's state_dict saved with torch.save)."
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # not a torch file
        raise ValueError(f"restart_model={path!r} is not a saved state_dict: {err}") from err
    if not isinstance(state, dict):
        raise ValueError(
            f"restart_model={path!r} holds a {type(state).__name__}, not a state_dict."
        )
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = [
        f"{k}: file {list(state[k].shape)} vs actor {list(own[k].shape)}"
        for k in own
        if k in state and hasattr(state[k], "shape") and state[k].shape != own[k].shape
    ]
    if missing or unexpected or wrong:
        parts = []
        if wrong:
            parts.append("wrong shapes: " + "; ".join(wrong[:5]))
        if missing:
            parts.append(f"missing entries: {missing[:5]}")
        if unexpected:
            parts.append(f"unexpected entries: {unexpected[:5]}")
        raise ValueError(
            f"restart_model={path!r} does not fit this actor ({', '.join(parts)}). Build the "
            f"actor with the observation/action spaces and feature extractor of the run "
            f"that saved it."
        )
    module.load_state_dict(state)


def policy_action(policy, in_keys, obs, action_space, deterministic: bool):
    """``(action, clipped_action, logp_action, entropy)`` of a probabilistic policy on plain
    observation tensors ``[B, ...]`` (one tensor, or a dict for dict observations)."""
    entries = obs if isinstance(obs, dict) else {in_keys[0]: obs}
    batch = next(iter(entries.values())).shape[:1]
    td = TensorDict(dict(entries), batch_size=batch)
    if K.IS_INIT in in_keys and K.IS_INIT not in entries:  # gSDE reading episode starts
        td.set(K.IS_INIT, torch.zeros(*batch, 1, dtype=torch.bool))
    # the distribution without exploring: a policy with state (gSDE's noise) steps once
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        dist = policy.get_dist(td.clone())
    mode = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
    with set_exploration_type(mode):
        td = policy(td)
    # an unsquashed policy clipped for the env: the action is the raw sample (its logp)
    action = td.get(getattr(policy, "raw_action_key", K.ACTION))
    logp = td.get(K.SAMPLE_LOG_PROB, None)
    if logp is None:
        logp = dist.log_prob(action)
    logp = logp.reshape(*batch, -1).sum(-1, keepdim=True)  # [B, 1]
    try:
        entropy = entropy_of(dist, 1).reshape(*batch, 1)  # [B, 1]
    except Exception:  # a deterministic policy (Delta): no entropy
        entropy = torch.zeros(*batch, 1)
    return action, clip_action(action, action_space), logp, entropy


def clip_action(action: torch.Tensor, action_space) -> torch.Tensor:
    """What a gymnasium env takes: Box actions clipped to the bounds, Discrete one-hot
    actions as indices ``[B, 1]``."""
    if isinstance(action_space, gymnasium.spaces.Box):
        low = torch.as_tensor(action_space.low, dtype=action.dtype, device=action.device)
        high = torch.as_tensor(action_space.high, dtype=action.dtype, device=action.device)
        return torch.maximum(torch.minimum(action, high), low)
    if isinstance(action_space, gymnasium.spaces.Discrete):
        if action.shape[-1] == action_space.n and action.dtype in (torch.bool, torch.long):
            return action.long().argmax(-1, keepdim=True)
        return action.reshape(action.shape[0], -1)[:, :1].long()
    return action


def check_recurrent(recurrent_nets) -> None:
    if recurrent_nets:
        raise ValueError(
            "recurrent_nets=True is not available in torchrl_lite's seed-000 actors: their "
            "collection runs stateless policies. Use recurrent_nets=False (the default), or a "
            "GRUModule policy in a TensorDict loop (torchrl_lite.modules.GRUModule)."
        )


class ActorFactory(Factory):
    """``factory(device) -> actor``, loading ``restart_model`` when given (checked here, at
    creation, so that a bad path fails in the caller and not in a remote worker)."""

    def __init__(self, cls, restart_model, **kwargs):
        super().__init__(cls, kwargs)
        self.restart_model = restart_model
        if restart_model is not None:
            load_restart_model(cls(**kwargs), restart_model)

    def __call__(self, device="cpu"):
        actor = self.cls(**self.kwargs)
        if self.restart_model is not None:
            load_restart_model(actor, self.restart_model)
        return actor.to(torch.device(device))
