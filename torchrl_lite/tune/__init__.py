"""Hyperparameter tuning of a recipe on Optuna (``torchrl-lite tune``).

:func:`~torchrl_lite.tune.study.run_study` creates or continues a study in a folder (TPE
sampler, median pruner fed by periodic evaluations, SQLite storage); the search spaces
are in :mod:`torchrl_lite.tune.space`; the best config is a file that ``torchrl-lite train
ALGO config=FILE`` reads (:mod:`torchrl_lite.tune.config_file`). Importing this package
loads neither torch nor optuna.
"""

from torchrl_lite.tune.config_file import read_config_file, write_config_file
from torchrl_lite.tune.space import SEARCH_SPACES, check_space, space_for
from torchrl_lite.tune.study import TuneSetup, check_study_folder, run_study

__all__ = [
    "SEARCH_SPACES",
    "TuneSetup",
    "check_space",
    "check_study_folder",
    "read_config_file",
    "run_study",
    "space_for",
    "write_config_file",
]
