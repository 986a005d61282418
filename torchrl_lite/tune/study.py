"""``torchrl-lite tune``: an Optuna study over a recipe's config, stored in a study folder.

The folder holds ``study.json`` (what is tuned: recipe, env, frames per trial, seed, fixed
options, search space), ``study.db`` (the Optuna study, SQLite: every finished trial is
kept, so running the same command again continues it), and after each run
``best_config.json`` (for ``torchrl-lite train ALGO config=FILE``), ``summary.png``
(optimisation history and parameter importances) and ``summary.json``.

Each trial trains the recipe for ``frames`` frames with the sampled options and evaluates
the deterministic policy ``EVALUATIONS`` times along the way; each evaluation is reported
to Optuna, whose median pruner stops a trial whose evaluation is below the median of the
earlier trials' at the same evaluation. The objective is the last evaluation's mean
return. Samples come from TPE. With ``jobs > 1`` the trials run in that many processes
sharing the SQLite study.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchrl_lite.tune.config_file import write_config_file

__all__ = ["EVALUATIONS", "TuneSetup", "check_study_folder", "run_study", "summarize"]

EVALUATIONS = 5
"""Evaluations of the deterministic policy per trial (the pruner's intermediate values)."""
META, DB, BEST, PLOT, SUMMARY = (
    "study.json", "study.db", "best_config.json", "summary.png", "summary.json",
)  # fmt: skip


@dataclass(frozen=True)
class TuneSetup:
    """What a study tunes; saved as ``study.json`` and compared when a study continues."""

    algo: str
    env: str
    frames: int
    seed: int = 0
    eval_episodes: int = 3
    fixed: dict = field(default_factory=dict)
    space: dict = field(default_factory=dict)


def check_study_folder(folder: Path, setup: TuneSetup) -> bool:
    """Whether ``folder`` already holds this study (True), or is new (False).

    Raises ValueError when it holds a study of another recipe, env, budget, seed, fixed
    options or search space: its trials would not be comparable.
    """
    meta = folder / META
    if not meta.is_file():
        if folder.exists() and any(folder.iterdir()):
            raise ValueError(
                f"--study {folder} is not empty and holds no {META}: pick a new folder."
            )
        return False
    saved = json.loads(meta.read_text())
    changed = [k for k, v in asdict(setup).items() if saved.get(k) != v]
    if changed:
        was = ", ".join(f"{k}={saved.get(k)!r}" for k in changed)
        now = ", ".join(f"{k}={getattr(setup, k)!r}" for k in changed)
        raise ValueError(
            f"--study {folder} was created for {saved.get('algo')} on {saved.get('env')} "
            f"with {was}; this command asks for {now}. Continue it with the same settings, "
            "or give another --study folder."
        )
    return True


def _storage(folder: Path):
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna.storages.RDBStorage(
        f"sqlite:///{(folder / DB).resolve()}",
        engine_kwargs={"connect_args": {"timeout": 120}},
        heartbeat_interval=30,
        grace_period=120,  # a trial of a killed process is marked failed after this
    )


def open_study(folder: Path, setup: TuneSetup, worker: int = 0, pruner=None):
    """The study in ``folder`` (created when missing) with TPE and the median pruner."""
    import optuna

    study = optuna.create_study(
        study_name="tune", storage=_storage(folder), load_if_exists=True, direction="maximize"
    )
    # a new seed per run and per worker: a continued study draws new points
    seed = setup.seed * 100_003 + len(study.trials) * 101 + worker
    study.sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    study.pruner = pruner or optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=2)
    return study


def _suggest(trial, key: str, entry: dict):
    if "choices" in entry:
        return trial.suggest_categorical(key, entry["choices"])
    if "int" in entry:
        return trial.suggest_int(key, *entry["int"], log=bool(entry.get("log")))
    return trial.suggest_float(key, *entry["float"], log=bool(entry.get("log")))


def trial_config(setup: TuneSetup, params: dict):
    """``(recipe, cfg)`` of a trial: the recipe's config for the env, the fixed options,
    then the sampled ``params``; checked against the recipe's ranges."""
    from torchrl_lite.recipes import config_for, get_recipe
    from torchrl_lite.recipes.common import apply_overrides
    from torchrl_lite.recipes.ranges import check_ranges

    recipe = get_recipe(setup.algo)
    cfg = config_for(recipe, setup.env, frames=setup.frames, seed=setup.seed)
    cfg = apply_overrides(cfg, {**setup.fixed, **params})
    check_ranges(cfg, {k: f"{k}={v}" for k, v in {**setup.fixed, **params}.items()})
    return recipe, cfg


def objective(trial, setup: TuneSetup) -> float:
    """Train one trial's config, reporting each evaluation; the last mean return."""
    import optuna
    import torch

    from torchrl_lite.recipes.common import PeriodicEvaluation

    torch.set_num_threads(int(os.environ.get("TORCHRL_LITE_THREADS", "1")))
    params = {k: _suggest(trial, k, entry) for k, entry in setup.space.items()}
    recipe, cfg = trial_config(setup, params)

    class Reporting(PeriodicEvaluation):
        def __call__(self, batch=None):
            out = super().__call__(batch)
            if out is not None:
                step, mean = len(self.history), self.history[-1][1]
                trial.report(mean, step)
                if trial.should_prune():
                    raise optuna.TrialPruned(f"evaluation {step}: mean return {mean:.1f}")
            return out

    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    env = recipe.make_eval_env(cfg)
    evaluation = Reporting(
        env, policy, interval=max(1, setup.frames // EVALUATIONS), episodes=setup.eval_episodes
    )
    evaluation.register(trainer)
    try:
        trainer.train()
    finally:
        trial.set_user_attr("evaluations", [list(h) for h in evaluation.history])
        getattr(trainer.collector, "shutdown", lambda: None)()
        env.close()
    return evaluation.history[-1][1]


def _finished(study) -> int:
    import optuna

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def optimize(folder: Path, setup: TuneSetup, trials: int, timeout, worker=0, pruner=None):
    """Run trials in this process until the study holds ``trials`` finished ones (or
    ``timeout`` seconds pass)."""
    import optuna

    study = open_study(folder, setup, worker, pruner)
    if _finished(study) >= trials:
        return study
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    study.optimize(
        lambda trial: objective(trial, setup),
        timeout=timeout,
        callbacks=[optuna.study.MaxTrialsCallback(trials, states=states)],
        catch=(ValueError, RuntimeError),  # a config the recipe refuses fails that trial only
        gc_after_trial=True,
    )
    return study


def run_study(
    folder, setup: TuneSetup, trials: int, jobs: int = 1, timeout: float | None = None,
    pruner=None,
) -> dict:  # fmt: skip
    """Create or continue the study in ``folder`` until it holds ``trials`` finished trials.

    ``jobs > 1`` runs that many worker processes on the shared SQLite study. Ctrl-C stops
    the run; the finished trials stay in the study. Returns the summary (also written).
    """
    folder = Path(folder)
    if not check_study_folder(folder, setup):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / META).write_text(json.dumps(asdict(setup), indent=2))
    interrupted = False
    try:
        if jobs == 1:
            optimize(folder, setup, trials, timeout, pruner=pruner)
        else:
            _run_workers(folder, trials, jobs, timeout)
    except KeyboardInterrupt:
        interrupted = True
        print(f"\ninterrupted: the finished trials are kept in {folder / DB}", flush=True)
    summary = summarize(folder, setup)
    if interrupted:
        raise SystemExit(130)
    return summary


def _run_workers(folder: Path, trials: int, jobs: int, timeout) -> None:
    """``jobs`` processes running :func:`optimize` (logs in ``worker-N.log``)."""
    import optuna

    # the parent creates the database and the study: workers creating the SQLite schema at
    # the same moment race on it (a UNIQUE constraint error in one of them)
    optuna.create_study(
        study_name="tune", storage=_storage(folder), load_if_exists=True, direction="maximize"
    )
    procs = []
    for worker in range(jobs):
        cmd = [sys.executable, "-m", "torchrl_lite.tune.worker", str(folder), str(trials),
               str(timeout or 0), str(worker)]  # fmt: skip
        log = open(folder / f"worker-{worker}.log", "a")  # noqa: SIM115 (closed below)
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    try:
        failed = [i for i, (p, _) in enumerate(procs) if p.wait() != 0]
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
            log.close()
    if failed:
        raise RuntimeError(
            f"tune worker(s) {failed} failed; see {folder}/worker-N.log for their errors."
        )


def summarize(folder: Path, setup: TuneSetup) -> dict:
    """Write ``best_config.json``, ``summary.png`` and ``summary.json``; return the summary."""
    import optuna

    from torchrl_lite.tune.plot import plot_summary

    study = optuna.load_study(study_name="tune", storage=_storage(folder))
    counts = {}
    for t in study.trials:
        counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
    summary = {"algo": setup.algo, "env": setup.env, "frames_per_trial": setup.frames,
               "trials": counts}  # fmt: skip
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if complete:
        best = study.best_trial
        _, cfg = trial_config(setup, best.params)  # the fixed options typed as the recipe's
        options = {k: getattr(cfg, k) for k in {**setup.fixed, **best.params}}
        write_config_file(folder / BEST, options)
        summary.update(best_value=best.value, best_trial=best.number, best_config=options)
        summary["best_config_file"] = BEST  # in the study folder, wherever it moves
    summary["importances"] = plot_summary(study, folder / PLOT, f"{setup.algo} on {setup.env}")
    (folder / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary
