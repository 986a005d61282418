"""The docs build's helpers: the griffe extension that reads our docstring conventions
(tools/griffe_docstrings.py) and the hooks' static readers (tools/docs_hooks.py), checked
against the imported package."""

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rewrite():
    pytest.importorskip("griffe", reason="the docs extra is not installed")
    return _load("griffe_docstrings").rewrite


@pytest.fixture(scope="module")
def hooks():
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    return _load("docs_hooks")


def test_rewrite_example_sections_become_examples(rewrite):
    text = "Sum.\n\nExample:\n    >>> 1 + 1\n    2\n"
    assert rewrite(text) == "Sum.\n\nExamples:\n    >>> 1 + 1\n    2"
    noted = "Sum.\n\nExample (needs Ray):\n    >>> 1\n    1"
    assert rewrite(noted) == "Sum.\n\nExamples:\n    (needs Ray)\n    >>> 1\n    1"


def test_rewrite_splits_multi_name_argument_items(rewrite):
    text = (
        "Run.\n\nArgs:\n    env: the env.\n    a, b,\n        c: as for ``Other``\n"
        "            (continued).\n    d (int): plain.\n\nReturns:\n    x"
    )
    expected = (
        "Run.\n\nArgs:\n    env: the env.\n"
        "    a: as for ``Other``\n            (continued).\n"
        "    b: as for ``Other``\n            (continued).\n"
        "    c: as for ``Other``\n            (continued).\n"
        "    d (int): plain.\n\nReturns:\n    x"
    )
    assert rewrite(text) == expected


def test_rewrite_leaves_other_docstrings_alone(rewrite):
    text = "Run.\n\nArgs:\n    env: the env, a, b: not names.\n\nNote: Example: inline."
    assert rewrite(text) == text


@pytest.mark.parametrize(
    "package",
    ["torchrl_lite", "torchrl_lite.envs", "torchrl_lite.modules", "torchrl_lite.objectives"],
)
def test_static_all_matches_the_imported_all(hooks, package):
    assert hooks.static_all(package) == list(importlib.import_module(package).__all__)


def test_origin_follows_reexports_to_the_defining_module(hooks):
    import torchrl_lite

    for package, name in [
        ("torchrl_lite.envs", "GymEnv"),
        ("torchrl_lite.envs", "RewardSum"),  # through ``from .transforms import *``
        ("torchrl_lite.modules", "Delta"),  # tensordict's, re-exported
        ("torchrl_lite", "Learner"),  # a lazy export (module ``__getattr__``)
    ]:
        obj = getattr(importlib.import_module(package), name)
        found = hooks.origin(package, name)
        if found.startswith("torchrl_lite"):
            assert found == obj.__module__, (package, name)
        else:  # another library's: the module it is imported from there
            assert obj.__module__.startswith(found), (package, name)
    assert torchrl_lite.timeit.__module__ == hooks.origin("torchrl_lite", "timeit")


def test_static_all_without_all_names_the_file(hooks, tmp_path, monkeypatch):
    pkg = tmp_path / "nopkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("X = 1\n")
    monkeypatch.setattr(hooks, "ROOT", tmp_path)
    with pytest.raises(ValueError, match=r"nopkg/__init__.py defines no __all__"):
        hooks.static_all("nopkg")


def test_tutorial_page_renders_prose_and_code(hooks, tmp_path):
    source = tmp_path / "03_demo.py"
    source.write_text("# %% [markdown]\n# # Title\n#\n# Text.\n\n# %%\nx = 1\n\n")
    page = hooks.tutorial_page(source)
    assert page.startswith("# Title\n\nText.\n\n```python\nx = 1\n```\n")
    assert "python tutorials/notebooks.py run 03 --smoke" in page


def test_results_tables_keep_the_table_and_drop_work_log_references(hooks, tmp_path, monkeypatch):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "area.md").write_text(
        "## Area speed (issue 17)\n\nSetup, the default since session 21.\n\n"
        "| case | ours | floor | target |\n|---|---|---|---|\n| step | 1.0 | 2.0 | <= 1.5 |\n\n"
        "Notes after the table.\n"
    )
    (tmp_path / "benchmarks" / "bench_area.py").write_text('OUT = "area.md"\n')
    monkeypatch.setattr(hooks, "ROOT", tmp_path)
    page = hooks.results_tables()
    assert page.startswith("## Area speed\n\nSetup, the default.\n\n| case | ours | floor |")
    assert "| step | 1.0 | 2.0 | <= 1.5 |" in page
    assert "Notes after the table" not in page
    assert "*reproduce:* `python benchmarks/bench_area.py`" in page
