"""Checks a loss makes on its first batch (then never again: they cost a host sync).

- :func:`check_discrete_actions`: DQN-family actions are indices in ``[0, n)``, or one-hot
  vectors with exactly one 1 (an all-zero or two-hot "one-hot" would be read by argmax as
  some other action, silently).
- :func:`missing_advantage_message`: a PPO/A2C loss built without a critic needs the batch
  to carry the advantage; say so, and the two ways to provide it.
- :func:`check_action_shape`: a continuous-control loss's batch actions have the shape the
  actor's action spec gives (SAC, TD3, DDPG, CQL, IQL).
- :func:`warn_if_not_trajectory`: a value estimator's batch runs along time (a shuffled
  minibatch gives wrong advantages without any error).
"""

from __future__ import annotations

import warnings

import torch

from torchrl_lite import _keys as K

__all__ = [
    "check_action_shape",
    "check_discrete_actions",
    "missing_advantage_message",
    "warn_if_not_trajectory",
]


def check_probabilistic_actor(actor, owner: str, example: str = "ProbabilisticActor") -> None:
    """Raise ``TypeError`` unless ``actor`` has ``get_dist`` (the losses sample or score it)."""
    if not hasattr(actor, "get_dist"):
        raise TypeError(
            f"{owner}: actor_network must be a probabilistic actor with get_dist() (e.g. "
            f"{example}), got {type(actor).__name__}."
        )


def first_call(loss, name: str) -> bool:
    """True the first time ``loss`` asks for check ``name``; False afterwards (cheap)."""
    done = loss.__dict__.setdefault("_checked_inputs", set())
    if name in done:
        return False
    done.add(name)
    return True


def check_discrete_actions(
    loss_name: str, key, action: torch.Tensor, n_actions: int, one_hot: bool
) -> None:
    """Raise ValueError when ``action`` is not a valid discrete action of ``n_actions``.

    Example:
        >>> check_discrete_actions("DQNLoss", "action", torch.tensor([0, 2]), 3, one_hot=False)
        >>> check_discrete_actions(  # doctest: +ELLIPSIS
        ...     "DQNLoss", "action", torch.tensor([0, 3]), 3, one_hot=False
        ... )
        Traceback (most recent call last):
        ...
        ValueError: DQNLoss: action 'action' holds indices outside [0, 3): [3] (3 actions); ...
    """
    if one_hot:
        if action.dtype.is_floating_point or action.dtype == torch.bool:
            values = action.to(torch.float32)
        else:
            values = action.to(torch.int64)
        hot = (values == 1).sum(-1)
        other = ((values != 0) & (values != 1)).any(-1)
        bad = (hot != 1) | other
        if bool(bad.any()):
            example = action[bad][0].tolist()
            raise ValueError(
                f"{loss_name}: action {key!r} is not one-hot: {int(bad.sum())} of "
                f"{bad.numel()} rows do not hold exactly one 1 (e.g. {example}); store one-hot "
                f"actions, or indices with action_space='categorical'."
            )
        return
    if action.dtype.is_floating_point and bool((action != action.round()).any()):
        raise ValueError(
            f"{loss_name}: action {key!r} holds non-integer values for a categorical action "
            f"space (e.g. {action[action != action.round()][:3].tolist()})."
        )
    index = action.long()
    bad = (index < 0) | (index >= n_actions)
    if bool(bad.any()):
        shown = sorted(set(index[bad].reshape(-1)[:5].tolist()))
        raise ValueError(
            f"{loss_name}: action {key!r} holds indices outside [0, {n_actions}): {shown} "
            f"({n_actions} actions); the value network and the env's action spec must agree."
        )


def missing_advantage_message(loss_name: str, key) -> str:
    return (
        f"{loss_name}: the batch has no {key!r} entry and the loss has no critic to compute "
        f"it. Either compute it before the loss (e.g. GAE(gamma=..., lmbda=..., "
        f"value_network=critic)(batch)), or build the loss with a critic_network so that it "
        f"computes the advantage itself."
    )


def check_action_shape(loss_name: str, key, action: torch.Tensor, spec, batch_dims: int) -> None:
    """The batch's ``action`` has the action dim of the actor's action spec (its last dim).

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> spec = Bounded(-1.0, 1.0, (2,))
        >>> check_action_shape("SACLoss", "action", torch.zeros(8, 3), spec, 1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: SACLoss: action 'action' has shape [8, 3] (per item [3]), but the actor's action spec has shape [2] ...
    """
    expected = tuple(spec.shape)
    item = tuple(action.shape[batch_dims:])
    if expected and item[-1:] != expected[-1:]:
        raise ValueError(
            f"{loss_name}: action {key!r} has shape {list(action.shape)} (per item "
            f"{list(item)}), but the actor's action spec has shape {list(expected)} ({spec}); "
            f"the batch's actions must come from this actor's action space."
        )


def warn_if_not_trajectory(estimator: str, td, done: torch.Tensor) -> None:
    """Warn when the batch's last dim does not run along time (e.g. a shuffled minibatch).

    Read from ``("collector", "traj_ids")`` when present (the id changes only after a done),
    else from the observations (``("next", "observation")`` at ``t`` is ``"observation"`` at
    ``t + 1`` unless done).
    """
    if td.batch_size[-1] < 2:
        return
    cont = ~done[..., :-1, 0]  # [*B, T-1]: steps that a trajectory continues after
    ids = td.get(K.TRAJ_IDS, None)
    if ids is not None and ids.shape[: td.batch_dims] == td.batch_size:
        ids = ids.reshape(td.batch_size)
        broken = (ids[..., 1:] != ids[..., :-1]) & cont
        suspicious = bool(broken.any())
    else:
        obs, nxt = td.get(K.OBSERVATION, None), td.get((K.NEXT, K.OBSERVATION), None)
        if obs is None or nxt is None or obs.shape != nxt.shape:
            return
        tdim, steps = td.batch_dims - 1, td.batch_size[-1] - 1
        same = nxt.narrow(tdim, 0, steps) == obs.narrow(tdim, 1, steps)  # [*B, T-1, ...]
        same = same.reshape(*cont.shape, -1).all(-1)
        suspicious = bool(cont.any()) and float((~same & cont).sum()) > 0.5 * float(cont.sum())
    if suspicious:
        warnings.warn(
            f"{estimator} ran over a batch {list(td.batch_size)} whose last dim is not a "
            f"trajectory in time order (e.g. a shuffled minibatch): the advantages are wrong. "
            f"Compute them on the collected [envs, time] batch, then split it into minibatches.",
            UserWarning,
            stacklevel=4,
        )
