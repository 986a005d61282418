"""Whole-trajectory batches: the collectors' ``trajs_per_batch=`` / ``traj_format=`` options.

A collector batch cuts trajectories at its edges. :class:`TrajectoryAssembler` takes the
batches as they come, keeps the steps of each running trajectory (grouped by
``("collector", "traj_ids")``) and releases a trajectory once its last step is done
(``("next", "done")``, which ``max_frames_per_traj`` truncations also set). Running
episodes are never released.
"""

from __future__ import annotations

from collections import deque

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.collectors.utils import split_trajectories

__all__ = ["TrajectoryAssembler", "check_traj_options"]

TRAJ_IDS = ("collector", "traj_ids")
FORMATS = ("padded", "cat")


def check_traj_options(trajs_per_batch, traj_format, split_trajs: bool, owner: str):
    """Validate ``trajs_per_batch`` / ``traj_format``; return them (format defaulted)."""
    if trajs_per_batch is None:
        if traj_format is not None:
            raise ValueError(
                f"{owner}: traj_format={traj_format!r} only applies with trajs_per_batch=N "
                "(whole-trajectory batches); pass trajs_per_batch or drop traj_format."
            )
        return None, None
    if isinstance(trajs_per_batch, bool) or not isinstance(trajs_per_batch, int):
        raise TypeError(f"{owner}: trajs_per_batch must be an int >= 1, got {trajs_per_batch!r}")
    if trajs_per_batch < 1:
        raise ValueError(f"{owner}: trajs_per_batch must be >= 1, got {trajs_per_batch}")
    traj_format = "padded" if traj_format is None else traj_format
    if traj_format not in FORMATS:
        raise ValueError(
            f"{owner}: traj_format must be 'padded' ([N, max_len] with a mask) or 'cat' "
            f"(flat, trajectories end to end), got {traj_format!r}"
        )
    if split_trajs:
        raise ValueError(
            f"{owner}: split_trajs=True and trajs_per_batch={trajs_per_batch} both shape the "
            "batches; trajs_per_batch already yields whole trajectories, drop split_trajs."
        )
    return trajs_per_batch, traj_format


class TrajectoryAssembler:
    """Collect steps by trajectory id and hand out trajectories whose last step is done.

    Example:
        >>> from tensordict import TensorDict
        >>> asm = TrajectoryAssembler()
        >>> ids = torch.tensor([[0, 0, 1]])
        >>> done = torch.tensor([[False, True, False]]).unsqueeze(-1)
        >>> asm.add(TensorDict({"collector": {"traj_ids": ids}, "next": {"done": done}}, [1, 3]))
        >>> len(asm), asm.pop(1, "cat")["collector", "traj_ids"].tolist()
        (1, [0, 0])
    """

    def __init__(self):
        self._running: dict[int, list[TensorDictBase]] = {}
        self._complete: deque[TensorDictBase] = deque()

    def __len__(self) -> int:
        """The number of complete trajectories waiting."""
        return len(self._complete)

    def clear(self) -> None:
        self._running.clear()
        self._complete.clear()

    def add(self, batch: TensorDictBase) -> None:
        """Add a ``[*B, T]`` batch (time last); complete trajectories become available."""
        if batch.batch_dims == 0:
            raise ValueError("trajectory assembly needs batches with a time dim, got batch_size []")
        ids = batch.get(TRAJ_IDS, None)
        if ids is None:
            raise KeyError(
                f"trajectory assembly reads {TRAJ_IDS} (written by the collectors); the batch "
                "has none. A postproc must not drop it."
            )
        steps = batch.batch_size[-1]
        rows = batch.reshape(-1, steps)  # [n_envs, T]
        ids = ids.reshape(-1, steps)
        done = batch.get((K.NEXT, K.DONE)).reshape(-1, steps)
        for r in range(rows.batch_size[0]):
            change = torch.ones(steps, dtype=torch.bool)
            change[1:] = ids[r, 1:] != ids[r, :-1]
            starts = change.nonzero().squeeze(-1).tolist() + [steps]
            for a, b in zip(starts[:-1], starts[1:]):
                tid = int(ids[r, a])
                self._running.setdefault(tid, []).append(rows[r, a:b])
                if bool(done[r, b - 1]):
                    pieces = self._running.pop(tid)
                    self._complete.append(pieces[0] if len(pieces) == 1 else torch.cat(pieces))

    def pop(self, n: int | None, traj_format: str) -> TensorDictBase:
        """The first ``n`` complete trajectories (all if None): ``[n, max_len]`` padded with
        ``("collector", "mask")``, or ``"cat"``: one flat ``[sum of lengths]`` TensorDict."""
        n = len(self._complete) if n is None else n
        trajs = [self._complete.popleft() for _ in range(n)]
        flat = torch.cat(trajs)  # [sum_i T_i]
        if traj_format == "cat":
            return flat
        return split_trajectories(flat, trajectory_key=TRAJ_IDS)
