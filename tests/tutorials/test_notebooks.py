"""The tutorial notebooks: each ``.ipynb`` is its ``.py`` pair, carries no outputs, and runs.

Every notebook runs with smoke budgets (``TORCHRL_LITE_SMOKE=1``) in a temporary folder,
headless; its printed ``RESULT`` is checked against the claim in
``tutorials/notebooks.py`` (so a deleted assert or a lowered target still fails), and its
figures (and video) must be in the outputs. A failing run's executed notebook is saved under
``.pytest_cache/d/failed_notebooks/``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).parents[2] / "tutorials"
_spec = importlib.util.spec_from_file_location("tutorial_notebooks", TUTORIALS / "notebooks.py")
nbs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = nbs  # dataclasses look their module up
_spec.loader.exec_module(nbs)

nbformat = pytest.importorskip("nbformat", reason="needs the notebooks extra (nbformat)")
pytest.importorskip("nbclient", reason="needs the notebooks extra (nbclient)")
pytest.importorskip("jupytext", reason="needs the notebooks extra (jupytext)")
pytest.importorskip("matplotlib_inline", reason="needs the notebooks extra (ipykernel)")

NAMES = nbs.notebooks()
MARKS = {
    "07_sac_dm_control": [pytest.mark.dm_control],
    "09_scaling_out_with_ray": [pytest.mark.ray],
}
NEEDS = {"07_sac_dm_control": "dm_control", "09_scaling_out_with_ray": "ray"}


def test_ten_notebooks_with_claims():
    assert len(NAMES) == 10, NAMES
    assert sorted(nbs.CLAIMS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_notebook_pairs_its_source_and_has_no_outputs(name):
    committed = nbformat.read(TUTORIALS / f"{name}.ipynb", as_version=4)
    expected = nbs.to_notebook(name)
    assert nbs._cells(committed) == nbs._cells(expected), (
        f"tutorials/{name}.ipynb differs from tutorials/{name}.py: run `make notebooks`"
    )
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"tutorials/{name}.ipynb carries outputs: run `make notebooks`"
            )
    first = [c for c in committed.cells if c.cell_type == "code"][0].source
    assert "TORCHRL_LITE_SMOKE" in first, "the first code cell sets the budgets"
    last = [c for c in committed.cells if c.cell_type == "code"][-1].source
    assert "RESULT" in last and "assert" in last, "the last code cell prints RESULT and asserts"


def test_sync_keeps_an_edit_made_in_jupyter_and_drops_outputs(tmp_path, monkeypatch):
    import os
    import shutil

    name = NAMES[0]
    for suffix in (".py", ".ipynb"):
        shutil.copy(TUTORIALS / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    monkeypatch.setattr(nbs, "HERE", tmp_path)
    edited = nbformat.read(tmp_path / f"{name}.ipynb", as_version=4)
    edited.cells[0].source += "\n\nAn edit made in Jupyter."
    code = [c for c in edited.cells if c.cell_type == "code"][0]
    code.outputs = [nbformat.v4.new_output("stream", text="an output\n")]
    nbformat.write(edited, tmp_path / f"{name}.ipynb")
    stamp = os.stat(tmp_path / f"{name}.py").st_mtime
    os.utime(tmp_path / f"{name}.ipynb", (stamp + 10, stamp + 10))
    nbs.sync([name])
    assert "# An edit made in Jupyter." in (tmp_path / f"{name}.py").read_text()
    synced = nbformat.read(tmp_path / f"{name}.ipynb", as_version=4)
    assert nbs._cells(synced) == nbs._cells(edited)
    assert all(c.outputs == [] for c in synced.cells if c.cell_type == "code")
    # then the .py is newer: its edit wins
    (tmp_path / f"{name}.py").write_text((tmp_path / f"{name}.py").read_text() + "\n# %%\nx = 1\n")
    nbs.sync([name])
    assert nbformat.read(tmp_path / f"{name}.ipynb", as_version=4).cells[-1].source == "x = 1"


@pytest.mark.parametrize("name", NAMES)
def test_sync_is_idempotent_and_matches_the_committed_notebook(name, tmp_path, monkeypatch):
    import shutil

    shutil.copy(TUTORIALS / f"{name}.py", tmp_path / f"{name}.py")
    monkeypatch.setattr(nbs, "HERE", tmp_path)
    nbs.sync([name])
    first = (tmp_path / f"{name}.ipynb").read_bytes()
    nbs.sync([name])
    assert (tmp_path / f"{name}.ipynb").read_bytes() == first, "sync changed its own output"
    assert (TUTORIALS / f"{name}.ipynb").read_bytes() == first, (
        f"`make notebooks` would rewrite tutorials/{name}.ipynb: run it and commit"
    )


def _figure_check(fig_builder):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = []
    real_show = plt.show
    plt.show = lambda *a, **k: shown.append(1)
    try:
        exec(nbs.FIGURE_CHECK, {})
        fig_builder(plt)
        plt.show()
    finally:
        plt.show = real_show
        plt.close("all")
    return shown


def test_figure_check_rejects_a_one_point_line_without_markers():
    def one_point(plt):
        plt.subplots()[1].plot([1000], [-6.2], label="curve")

    with pytest.raises(AssertionError, match="'curve' has 1 point and no marker"):
        _figure_check(one_point)

    def empty(plt):
        plt.subplots()[1].set_title("nothing")

    with pytest.raises(AssertionError, match="axes 'nothing' shows no data"):
        _figure_check(empty)


def test_figure_check_accepts_markers_images_and_bars():
    def fine(plt):
        fig, axes = plt.subplots(1, 3)
        axes[0].plot([1000], [-6.2], "o-")
        axes[1].imshow([[0, 1], [1, 0]])
        axes[2].bar([0, 1], [1, 2])

    assert _figure_check(fine) == [1]


def test_run_resolves_short_names_and_refuses_unknown_ones():
    assert nbs.resolve("05") == "05_ppo_pendulum"
    assert nbs.resolve("ppo_pendulum") == "05_ppo_pendulum"
    with pytest.raises(SystemExit, match="no single notebook named 'nope'"):
        nbs.resolve("nope")


def test_run_command_executes_one_notebook_and_checks_its_claim(tmp_path):
    import subprocess

    out = subprocess.run(
        [
            sys.executable,
            str(TUTORIALS / "notebooks.py"),
            "run",
            "01",
            "--smoke",
            "--save",
            str(tmp_path / "run.ipynb"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "01_tensordict_and_specs:" in out.stdout and '"fraction_in_spec"' in out.stdout
    executed = nbformat.read(tmp_path / "run.ipynb", as_version=4)
    assert nbs.outputs(executed, "image/png"), "the saved notebook keeps its figure"


def test_parse_result_reads_the_last_cell_and_rejects_a_missing_line():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x"), nbformat.v4.new_code_cell("y")]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text='RESULT {"value": 0}\n')]
    with pytest.raises(ValueError, match="printed 0 RESULT lines"):
        nbs.parse_result(nb)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text='a\nRESULT {"value": 2}\n')]
    assert nbs.parse_result(nb) == {"value": 2}


def _executed(result: dict, figure: bool = True):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("")]
    if figure:
        nb.cells[0].outputs.append(
            nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})
        )
    nb.cells[0].outputs.append(
        nbformat.v4.new_output("stream", text=f"RESULT {json.dumps(result)}\n")
    )
    return nb


def test_check_result_uses_its_own_claims_not_the_notebooks():
    name = "06_dqn_cartpole"
    result = {"metric": "greedy_mean_return", "value": 100.0, "target": 50.0, "smoke": False}
    with pytest.raises(AssertionError, match="claimed >= 475"):
        nbs.check_result(name, _executed(result), smoke=False)
    with pytest.raises(AssertionError, match="RESULT says smoke=False, ran smoke=True"):
        nbs.check_result(name, _executed(result), smoke=True)
    result["smoke"] = True
    assert nbs.check_result(name, _executed(result), smoke=True)["value"] == 100.0
    with pytest.raises(AssertionError, match="no figure"):
        nbs.check_result(name, _executed(result, figure=False), smoke=True)
    with pytest.raises(AssertionError, match="metric 'return', expected 'greedy_mean_return'"):
        nbs.check_result(name, _executed(dict(result, metric="return")), smoke=True)


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, []), id=n) for n in NAMES])
def test_notebook_runs_and_reaches_its_smoke_claim(name, tmp_path, request):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"{name} needs {NEEDS[name]}")
    from nbclient.exceptions import CellExecutionError

    try:
        nb, _ = nbs.execute(name, smoke=True, cwd=tmp_path, timeout=240)
    except CellExecutionError as err:
        saved = Path(request.config.cache.mkdir("failed_notebooks")) / f"{name}.ipynb"
        nbformat.write(err.nb, saved)
        raise AssertionError(f"{name} failed (executed notebook: {saved}):\n{err}") from None
    try:
        nbs.check_result(name, nb, smoke=True)
    except (AssertionError, ValueError, KeyError):
        saved = Path(request.config.cache.mkdir("failed_notebooks")) / f"{name}.ipynb"
        nbformat.write(nb, saved)
        raise


@pytest.mark.parametrize("name", NAMES)
def test_recorded_full_run_reaches_its_claim(name):
    """`make tutorials` records each full run in tutorials/full_runs.json: the recorded
    result must meet the notebook's full claim (and name its metric)."""
    runs = json.loads(nbs.RESULTS.read_text()) if nbs.RESULTS.exists() else {}
    if name not in runs:
        pytest.skip(f"{name} has no recorded full run yet (make tutorials)")
    claim, result = nbs.CLAIMS[name], runs[name]["result"]
    assert result["metric"] == claim.metric and result["smoke"] is False
    assert nbs.OPS[claim.op](float(result["value"]), claim.full), result
    assert runs[name]["seconds"] > 0
