"""Collector utilities: ``split_trajectories`` (a batch of steps -> padded trajectories)."""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message

__all__ = ["finished_returns", "split_trajectories"]


def _keys_for(td: TensorDictBase, prefix, trajectory_key) -> tuple:
    """The trajectory-id key and the mask key, following TorchRL's rules."""
    if trajectory_key is not None:
        key = trajectory_key if isinstance(trajectory_key, tuple) else (trajectory_key,)
        return trajectory_key, (*key[:-1], "mask") if len(key) > 1 else "mask"
    if prefix is None and "collector" in td.keys():
        prefix = "collector"
    if prefix is None:
        return "traj_ids", "mask"
    return (prefix, "traj_ids"), (prefix, "mask")


def _segment_starts(td: TensorDictBase, traj_key, done_key, rows: int, steps: int):
    """``[rows, steps]`` bool: True where a trajectory starts (each row's first step, a
    change of trajectory id, or the step after a done)."""
    ids = td.get(traj_key, None)
    if ids is not None:
        ids = ids.reshape(rows, steps)
        changed = ids[:, 1:] != ids[:, :-1]
    else:
        done = td.get(done_key, None)
        if done is None:
            raise KeyError(
                f"split_trajectories needs the trajectory ids {traj_key!r} or the done flags "
                f"{done_key!r}. " + missing_key_message(traj_key, td.keys(True, True))
            )
        changed = done.reshape(rows, steps)[:, :-1].bool()
    starts = torch.ones(rows, steps, dtype=torch.bool, device=changed.device)
    starts[:, 1:] = changed
    return starts


def split_trajectories(
    rollout_tensordict: TensorDictBase,
    *,
    prefix=None,
    trajectory_key=None,
    done_key=None,
    as_nested=False,
) -> TensorDictBase:
    """Split a ``[*B, T]`` batch of steps into ``[n_traj, max_len]`` zero-padded trajectories.

    A trajectory is a run of consecutive steps of one env (one row of ``*B``) with the
    same trajectory id (``("collector", "traj_ids")``, as collectors write it); without
    ids, a trajectory ends at each ``("next", "done")``. Trajectories come in row order,
    then time order; each is padded with zeros (False) up to the longest, and the mask
    ``("collector", "mask")`` (``[n_traj, max_len]``, bool) is True on real steps. The
    lazy stack of a batched env whose copies' specs differ gives a lazy stack of
    trajectories, each with its copy's entries.

    Args:
        rollout_tensordict: the steps, time as the last batch dim (``[T]`` or ``[*B, T]``).
        prefix: the sub-TensorDict holding ``"traj_ids"`` and receiving ``"mask"``
            (default ``"collector"`` when present, else the root).
        trajectory_key: the trajectory-id entry (overrides ``prefix``); the mask is
            written next to it.
        done_key: the done flags used when there are no trajectory ids (default
            ``("next", "done")``).
        as_nested: return ``[n_traj]`` TensorDict whose leaves are nested tensors (one
            unpadded trajectory each, no mask) instead of padding; a ``torch.layout``
            (``torch.strided``, ``torch.jagged``) picks the nested layout.

    Example:
        >>> td = TensorDict({"obs": torch.arange(6.).reshape(2, 3),
        ...     "collector": {"traj_ids": torch.tensor([[0, 0, 1], [2, 2, 2]])}}, [2, 3])
        >>> out = split_trajectories(td)
        >>> out["obs"].tolist()
        [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [3.0, 4.0, 5.0]]
        >>> out["collector", "mask"].tolist()
        [[True, True, False], [True, False, False], [True, True, True]]
    """
    if not isinstance(rollout_tensordict, TensorDictBase):
        raise TypeError(
            f"split_trajectories expects a TensorDict, got {type(rollout_tensordict).__name__}"
        )
    td = rollout_tensordict
    args = (prefix, trajectory_key, done_key, as_nested)
    if isinstance(td, LazyStackedTensorDict) and td.stack_dim == 0 and td.batch_dims > 1:
        return _split_copies(td, args)  # a batched env of copies whose specs differ
    return _split(td, *args)


def _split_copies(td: LazyStackedTensorDict, args: tuple) -> TensorDictBase:
    """``[n, *B, T]`` steps of copies of different entries: each copy's trajectories,
    padded to the longest of all, lazily stacked (``out[j]`` holds its copy's entries)."""
    parts = [_split(row, *args) for row in td.tensordicts]
    if args[-1] is False:  # padded: every trajectory to the same length
        longest = max(part.batch_size[1] for part in parts)
        parts = [_split(row, *args, pad_to=longest) for row in td.tensordicts]
    trajectories = [traj for part in parts for traj in part.unbind(0)]
    return LazyStackedTensorDict(*trajectories, stack_dim=0)


def _split(td, prefix, trajectory_key, done_key, as_nested, pad_to: int = 0) -> TensorDictBase:
    if td.batch_dims == 0:
        raise ValueError(
            "split_trajectories needs a TensorDict with a time dimension ([T] or [*B, T]), "
            "got batch_size []"
        )
    traj_key, mask_key = _keys_for(td, prefix, trajectory_key)
    done_key = (K.NEXT, K.DONE) if done_key is None else done_key
    steps = td.batch_size[-1]
    rows = td.batch_size[:-1].numel()
    starts = _segment_starts(td, traj_key, done_key, rows, steps).reshape(-1)  # [N]
    n_steps = rows * steps
    seg = starts.long().cumsum(0) - 1  # [N] trajectory of each step
    start_index = starts.nonzero().squeeze(-1)  # [n_traj]
    n_traj = start_index.numel()
    pos = torch.arange(n_steps, device=seg.device) - start_index[seg]  # [N] step in its traj
    lengths = torch.diff(start_index, append=start_index.new_tensor([n_steps]))
    if as_nested is not False:
        return _nested(td, n_steps, lengths, as_nested)
    max_len = max(int(lengths.max()) if n_traj else 0, pad_to)
    out = TensorDict(batch_size=[n_traj, max_len], device=td.device)
    for key, value in td.items(True, True):
        flat = value.reshape(n_steps, *value.shape[td.batch_dims :])  # [N, *feature]
        padded = flat.new_zeros((n_traj, max_len, *flat.shape[1:]))
        padded[seg, pos] = flat
        out.set(key, padded)
    mask = torch.zeros(n_traj, max_len, dtype=torch.bool, device=seg.device)
    mask[seg, pos] = True
    out.set(mask_key, mask)
    return out


def _nested(td: TensorDictBase, n_steps: int, lengths: torch.Tensor, layout) -> TensorDictBase:
    """The trajectories as nested tensors: ``[n_traj]`` batch, leaves ``[n_traj, (len), ...]``."""
    layout = torch.strided if layout is True else layout
    if not isinstance(layout, torch.layout):
        raise TypeError(
            f"split_trajectories: as_nested must be a bool or a torch.layout, got {layout!r}"
        )
    splits = lengths.tolist()
    out = TensorDict(batch_size=[len(splits)], device=td.device)
    for key, value in td.items(True, True):
        flat = value.reshape(n_steps, *value.shape[td.batch_dims :])  # [N, *feature]
        out.set(key, torch.nested.nested_tensor(list(flat.split(splits)), layout=layout))
    return out


def finished_returns(batch) -> list[float]:
    """Returns of the episodes that end in a collected ``batch`` (``[*B, T]``).

    Read from ``("next", "episode_reward")`` (a ``RewardSum`` transform writes it) where
    ``("next", "done")`` is set. In n-step batches (:class:`~torchrl_lite.data.MultiStep`)
    the last steps of an episode all carry its end flag; only the one whose window is its
    own step (``"steps_to_next_obs" == 1``) counts, so each episode is read once.
    """
    done = batch.get((K.NEXT, K.DONE)).reshape(batch.batch_size)  # [*B, T]
    steps = batch.get("steps_to_next_obs", None)  # n-step windows: [*B, T, 1]
    if steps is not None:
        done = done & (steps.reshape(batch.batch_size) == 1)
    returns = batch.get((K.NEXT, "episode_reward")).reshape(batch.batch_size)
    return returns[done].tolist()  # one host sync per batch
