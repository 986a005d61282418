"""Reading a run folder back: its recipe and config, its checkpoint, its trained policy.

``eval``, ``export``, ``dataset`` and ``--resume`` all start here, for runs of the Trainer
path and of the Scheme path alike (a ``"scheme"`` entry in ``config.json`` tells them apart).
"""

from __future__ import annotations

import json
from pathlib import Path

from torchrl_lite._run_folder.files import config_path

__all__ = ["check_resumable", "load_run", "read_config", "trained_policy", "trained_trainer"]


def _missing(folder: Path, path: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"No run in {folder}: {path} is missing (pass a folder that `torchrl-lite train` wrote)."
    )


def read_config(folder: Path) -> dict:
    """A run folder's ``config.json`` as a dict (errors name the file)."""
    path = config_path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"No run in {folder}: the folder does not exist.")
    if not path.is_file():
        raise _missing(folder, path)
    try:
        saved = json.loads(path.read_text())
        saved["algo"], saved["config"]["env"]  # noqa: B018 - the entries every run has
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a valid run config: {err!r}.") from err
    return saved


def load_run(folder: Path):
    """``(recipe, cfg)``: the recipe and config saved in a run folder."""
    from torchrl_lite.recipes import get_recipe
    from torchrl_lite.recipes.config import saved_config

    path = config_path(folder)
    if not path.is_file():
        raise _missing(folder, path)
    try:
        saved = json.loads(path.read_text())
        recipe = get_recipe(saved["algo"])
        cfg = saved_config(recipe, saved)
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a valid run config: {err}") from err
    return recipe, cfg


def check_resumable(checkpoint: Path, verb: str = "resume") -> None:
    """A complete checkpoint is at ``checkpoint``, or beside it after a killed save; else
    an error that says whether one is missing or corrupt."""
    from torchrl_lite.trainers.checkpoint import checkpoint_exists

    if checkpoint_exists(checkpoint):
        return
    run = checkpoint.parent
    if not checkpoint.exists():
        raise FileNotFoundError(
            f"Cannot {verb}: {run} has no checkpoint ({checkpoint} is missing): was it "
            f"written by `torchrl-lite train`, and did its first checkpoint finish?"
        )
    meta = checkpoint / "meta.json"
    problem = "is missing" if not meta.is_file() else "is corrupt (not a checkpoint's metadata)"
    raise ValueError(
        f"Cannot {verb}: the checkpoint in {checkpoint} is incomplete or corrupt: {meta} "
        f"{problem}, and no older complete copy lies beside it."
    )


def _restored(run: Path, recipe, cfg):
    """``(trainer, policy)`` of a recipe-trained run, the loss module (so the policy) with
    its checkpoint's weights, the collector shut down."""
    from torchrl_lite.trainers.checkpoint import load_checkpoint

    check_resumable(run / "checkpoint", "evaluate")
    state, _ = load_checkpoint(run / "checkpoint")
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    trainer.loss_module.load_state_dict(state["loss_module"])
    getattr(trainer.collector, "shutdown", lambda: None)()
    return trainer, policy


def trained_trainer(folder):
    """``(recipe, cfg, trainer, policy)`` of a run folder trained by a recipe's trainer (not
    Scheme), with its checkpoint's weights: for probes that need the loss module's networks."""
    run = Path(folder)
    recipe, cfg = load_run(run)
    return (recipe, cfg, *_restored(run, recipe, cfg))


def trained_policy(folder):
    """``(recipe, cfg, policy)`` of a run folder, the policy with its checkpoint's weights."""
    run = Path(folder)
    recipe, cfg = load_run(run)
    if "scheme" in json.loads(config_path(run).read_text()):  # trained by Scheme + Learner
        from torchrl_lite.scheme.run import scheme_policy

        return recipe, cfg, scheme_policy(run, recipe, cfg)
    return recipe, cfg, _restored(run, recipe, cfg)[1]
