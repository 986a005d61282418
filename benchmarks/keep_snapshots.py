"""Keep a copy of a running run's weights every N env steps, for probing it afterwards.

A run's checkpoint (``RUN/checkpoint``) is replaced every few thousand steps, so once a
run has gone wrong no earlier weights are left to look at. Run this beside the training:
it polls the checkpoint and, each time its frame count crosses a multiple of ``--every``,
copies its ``state.pt`` (networks, optimizers, counters; not the replay buffer) to
``RUN/snapshots/state-<frames>.pt``. It stops when the run has written its
``summary.json``; started again, it keeps the snapshots it already has.

A snapshot loads like the checkpoint's own file::

    state = torch.load("RUN/snapshots/state-750000.pt", weights_only=False)
    loss_module.load_state_dict(state["loss_module"])

Run: ``python benchmarks/keep_snapshots.py benchmarks/runs/sac-Hopper-v5-s1 --every 50000``
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from torchrl_lite._run_folder.files import checkpoint_frames as frames_of


def snapshot(run: Path, every: int) -> Path | None:
    """Copy the checkpoint's ``state.pt`` if its frames reached a multiple of ``every``
    not yet kept; the new file, else None."""
    checkpoint, keep = run / "checkpoint", run / "snapshots"
    frames = frames_of(checkpoint)
    if frames is None or frames < every:
        return None
    target = keep / f"state-{frames // every * every}.pt"
    if target.exists():
        return None
    keep.mkdir(exist_ok=True)
    partial = target.with_suffix(".tmp")
    try:
        shutil.copyfile(checkpoint / "state.pt", partial)
    except OSError:  # the checkpoint was swapped during the copy: try again next poll
        partial.unlink(missing_ok=True)
        return None
    if frames_of(checkpoint) != frames:  # replaced meanwhile: the copy may mix two saves
        partial.unlink(missing_ok=True)
        return None
    partial.replace(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder (holding checkpoint/)")
    parser.add_argument("--every", type=int, default=50_000, help="env steps between copies")
    parser.add_argument("--poll", type=float, default=20.0, help="seconds between checks")
    args = parser.parse_args()
    if args.every < 1:
        parser.error(f"--every must be >= 1, got {args.every}")
    if not args.run.is_dir():
        parser.error(f"no run folder at {args.run}")
    while not (args.run / "summary.json").exists():
        kept = snapshot(args.run, args.every)
        if kept is not None:
            print(f"kept {kept}", flush=True)
        time.sleep(args.poll)


if __name__ == "__main__":
    main()
