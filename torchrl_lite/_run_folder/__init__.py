"""The run folder that ``torchrl-lite train`` writes, for the Trainer and the Scheme paths.

:mod:`~torchrl_lite._run_folder.files` keeps a run's files safe (a fresh folder per run,
logs cut back on resume, Ctrl-C handling); :mod:`~torchrl_lite._run_folder.driver` is the
one driver both training paths run through; :mod:`~torchrl_lite._run_folder.trained` reads
a finished run back. This face re-exports the file helpers under their old path.
"""

from torchrl_lite._run_folder.files import (
    check_new_run,
    check_writable,
    checkpoint_frames,
    config_path,
    describe,
    first_sigint_stops,
    holds_files,
    interrupted_message,
    next_free,
    plot_curve,
    start_run,
    truncate_logs,
    write_rows,
    write_text_atomic,
)

__all__ = [
    "check_new_run",
    "check_writable",
    "checkpoint_frames",
    "config_path",
    "describe",
    "first_sigint_stops",
    "holds_files",
    "interrupted_message",
    "next_free",
    "plot_curve",
    "start_run",
    "truncate_logs",
    "write_rows",
    "write_text_atomic",
]
