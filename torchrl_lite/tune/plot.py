"""The summary figure of a study: optimisation history and parameter importances."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_summary"]


def plot_summary(study, path: Path, title: str) -> dict:
    """Save the figure to ``path``; return the importances (empty with under 2 completed
    trials, where Optuna cannot estimate them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    done = optuna.trial.TrialState.COMPLETE
    pruned = optuna.trial.TrialState.PRUNED
    fig, (history, bars) = plt.subplots(1, 2, figsize=(11, 4))
    complete = [(t.number, t.value) for t in study.trials if t.state == done]
    stopped = [
        (t.number, t.intermediate_values[max(t.intermediate_values)])
        for t in study.trials
        if t.state == pruned and t.intermediate_values
    ]
    if complete:
        history.plot(*zip(*complete), "o", label="completed")
        best, line = -float("inf"), []
        for number, value in complete:
            best = max(best, value)
            line.append((number, best))
        history.step(*zip(*line), where="post", label="best so far")
    if stopped:
        history.plot(*zip(*stopped), "x", color="grey", label="pruned (last evaluation)")
    history.set(xlabel="trial", ylabel="mean evaluation return", title=f"{title}: history")
    history.legend(loc="best")
    try:
        importances = optuna.importance.get_param_importances(study) if len(complete) > 1 else {}
    except (RuntimeError, ValueError):
        importances = {}
    if importances:
        names = list(importances)[::-1]
        bars.barh(names, [importances[n] for n in names])
        bars.set(xlabel="importance (fANOVA)", title="parameter importances")
    else:
        bars.text(0.5, 0.5, "importances need 2+ completed trials", ha="center", va="center")
        bars.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {k: float(v) for k, v in importances.items()}
