"""MkDocs hooks: the pages generated at build time from the code and the results files.

- ``reference/*.md``: one page per floor of the package (``floors()``), a mkdocstrings block
  per public package listing the names of its ``__all__`` (names a subpackage shares with
  its floor are documented once, under the floor's import path).
- ``<!-- generated: recipe-keys -->`` (command-line page): every recipe's ``Config`` keys
  with their defaults and docstrings, read by ``torchrl_lite.recipes.fields`` (the same
  reader the CLI checks ``key=value`` options with), plus each recipe's per-family defaults.
- ``<!-- generated: results -->`` (results page): the first table of each
  ``benchmarks/results/*.md``, with its setup line, the date of the file's last commit and
  the script that writes it.
- ``tutorials/*.md``: each ``tutorials/NN_slug.py`` (jupytext percent format) as a page.

Nothing here imports torch: the reference is read statically by griffe, and the recipe
keys by parsing the recipe files, which keeps the build fast.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]

# page slug -> (title, intro, packages documented on it, floor first; other public
# subpackages under them are added after these, see ``page_packages``)
FLOORS = {
    "data": (
        "data",
        "Specs (the shapes, dtypes and bounds of every entry), replay buffers "
        "(storage + sampler + writer) and offline datasets.",
        ["torchrl_lite.data", "torchrl_lite.data.replay_buffers", "torchrl_lite.data.datasets"],
    ),
    "modules": (
        "modules",
        "Networks, distributions, actors and exploration modules; each declares the "
        "TensorDict keys it reads and writes.",
        [
            "torchrl_lite.modules",
            "torchrl_lite.modules.tensordict_module",
            "torchrl_lite.modules.models",
            "torchrl_lite.modules.distributions",
        ],
    ),
    "envs": (
        "envs",
        "The `EnvBase` contract, library wrappers, batched envs and transforms.",
        [
            "torchrl_lite.envs",
            "torchrl_lite.envs.transforms",
            "torchrl_lite.envs.custom",
            "torchrl_lite.envs.llm",
            "torchrl_lite.envs.libs.gym",
            "torchrl_lite.envs.libs.dm_control",
            "torchrl_lite.envs.libs.openml",
            "torchrl_lite.envs.libs.openml_cache",
        ],
    ),
    "objectives": (
        "objectives",
        "Losses (one per algorithm, each with its paper) and the value estimators.",
        ["torchrl_lite.objectives", "torchrl_lite.objectives.value"],
    ),
    "collectors": (
        "collectors",
        "Collectors: a policy and env(s) in, batches of experience out; serial, "
        "multiprocess and Ray versions share one interface.",
        ["torchrl_lite.collectors", "torchrl_lite.collectors.distributed"],
    ),
    "trainers": (
        "trainers",
        "The `Trainer` loop with hooks and atomic checkpoints.",
        ["torchrl_lite.trainers"],
    ),
    "checkpoint": (
        "checkpoint",
        "Checkpoints of named training components, crash-safe, with rotation.",
        ["torchrl_lite.checkpoint"],
    ),
    "render": (
        "render",
        "Rendering of rollouts and runs.",
        ["torchrl_lite.render"],
    ),
    "record": (
        "record",
        "Loggers (CSV, TensorBoard, W&B) and video recording.",
        ["torchrl_lite.record", "torchrl_lite.record.loggers"],
    ),
    "recipes": (
        "recipes",
        "The recipe registry used by the command line; each recipe's keys are listed on "
        "[the command line](../command-line.md) page.",
        ["torchrl_lite.recipes"],
    ),
    "scheme": (
        "scheme",
        "Seed 000's distributed training: the `Scheme`, the `Learner` and the seed's "
        "components (`torchrl_lite.agent`).",
        [
            "torchrl_lite",
            "torchrl_lite.scheme",
            "torchrl_lite.agent",
            "torchrl_lite.agent.actors",
            "torchrl_lite.agent.algos",
            "torchrl_lite.agent.storages",
        ],
    ),
    "export": (
        "export",
        "A run's deterministic policy as one deployable file (ONNX, torch.export, TorchScript).",
        ["torchrl_lite.export"],
    ),
    "tune": (
        "tune",
        "Hyperparameter studies with Optuna (`torchrl-lite tune`).",
        ["torchrl_lite.tune"],
    ),
}


def static_all(module: str) -> list[str]:
    """The names in ``module.__all__``, read from its source without importing it
    (``__all__ += [...]`` is followed, and so are ``*other`` entries of an ``__all__``
    imported ``as other`` from a module)."""
    import ast

    path = _source(module)
    tree = _tree(path)
    imported = {}  # local name -> module whose __all__ it is
    names: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "__all__" and alias.asname:
                    imported[alias.asname] = node.module
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            if not isinstance(node, ast.AugAssign):
                names = []
            for elt in node.value.elts:
                if isinstance(elt, ast.Starred) and getattr(elt.value, "id", None) in imported:
                    names += static_all(imported[elt.value.id])
                else:
                    names.append(ast.literal_eval(elt))
    if names is None:
        raise ValueError(f"{path} defines no __all__; list its public names there.")
    return names


def _defines(module: str, name: str) -> bool:
    import ast

    path = _source(module)
    if path is None:
        return False
    for node in _tree(path).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


@functools.cache
def _tree(path: Path):
    """The parsed source of ``path`` (each file is read many times per build)."""
    import ast

    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _source(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def origin(module: str, name: str) -> str:
    """The module that defines ``module.name``, following this package's re-exports
    (``from X import name`` and ``from X import *``); an outside module for a re-export."""
    import ast

    path = _source(module)
    if path is None:
        return module
    tree = _tree(path)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return origin(node.module, alias.name)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.names[0].name == "*":
            if node.module.startswith("torchrl_lite") and name in static_all(node.module):
                return origin(node.module, name)
    if _defines(module, name):
        return module
    lazy = _lazy_origin(tree, name)
    return origin(lazy, name) if lazy is not None else module


def _lazy_origin(tree, name: str) -> str | None:
    """The module a lazy export (imported on first access by ``__getattr__``) comes from."""
    import ast

    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__"):
            continue
        for sub in ast.walk(node):
            if not (isinstance(sub, ast.ImportFrom) and sub.module):
                continue
            for alias in sub.names:
                if alias.name == name:
                    return sub.module
                child = f"{sub.module}.{alias.name}"
                if _source(child) and (_defines(child, name) or _imported(child, name)):
                    return child
    return None


def _imported(module: str, name: str) -> bool:
    """Whether ``module`` imports ``name`` at its top level (griffe then sees an alias)."""
    import ast

    tree = _tree(_source(module))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if any((a.asname or a.name) == name for a in node.names):
                return True
            if node.names[0].name == "*" and name in static_all(node.module):
                return True
    return False


def _has_all(path: Path) -> bool:
    return re.search(r"^__all__\b", path.read_text(encoding="utf-8"), re.M) is not None


def floors() -> dict[str, tuple[str, str, list[str]]]:
    """The reference pages: ``FLOORS`` whose package exists, then a page for every other
    public top-level package with an ``__all__`` (so a new floor is never left out)."""
    pages, covered = {}, set()
    for slug, (title, intro, packages) in FLOORS.items():
        init = _source(packages[0])
        if init is not None and _has_all(init):
            pages[slug] = (title, intro, packages)
            covered.update(page_packages(packages))
    for init in sorted((ROOT / "torchrl_lite").glob("*/__init__.py")):
        name = f"torchrl_lite.{init.parent.name}"
        if init.parent.name.startswith("_") or name in covered or not _has_all(init):
            continue
        pages[init.parent.name] = (init.parent.name, _module_summary(init), [name])
    return pages


def page_packages(listed: list[str]) -> list[str]:
    """The packages of a reference page: those listed, then every other public subpackage
    (with an ``__all__``) found under them, so a new one is never left out."""
    found = []
    for package in listed:
        if package == "torchrl_lite":
            continue
        base = ROOT.joinpath(*package.split("."))
        for init in sorted(base.rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT).parts
            name = ".".join(parts)
            if any(p.startswith("_") for p in parts) or name in listed or name in found:
                continue
            if _has_all(init):
                found.append(name)
    return [*listed, *found]


def reference_page(title: str, intro: str, listed: list[str]) -> str:
    packages = page_packages(listed)
    lines = [f"# {title}", "", intro, ""]
    first: dict[str, str] = {}  # name -> the package it is documented under
    for package in packages:
        names = [n for n in static_all(package) if n not in first]
        shared = [n for n in static_all(package) if n in first]
        first.update((n, package) for n in names)
        outside = {n: origin(package, n) for n in names}
        outside = {n: m for n, m in outside.items() if not m.startswith("torchrl_lite")}
        lines += [f"## `{package}`", ""]
        if shared:
            links = ", ".join(f"[`{n}`](#{first[n]}.{n})" for n in shared)
            lines += [f"Also exported here (documented above): {links}.", ""]
        if outside:
            lines += ["Re-exported unchanged, so that TorchRL's import paths work:", ""]
            lines += [
                f'- <span id="{package}.{n}"></span>`{n}`: `{m}.{n}` (see its documentation)'
                for n, m in outside.items()
            ]
            lines.append("")
        names = [n for n in names if n not in outside]
        # documented through the package, except lazy exports (``__getattr__``) and names
        # shadowing a submodule of the same name: those are documented where defined
        direct = [
            n
            for n in names
            if (origin(package, n) == package or _imported(package, n))
            and _source(f"{package}.{n}") is None
        ]
        if direct:
            lines += [f"::: {package}", "    options:", "      members:"]
            lines += [f"        - {n}" for n in direct]
            lines.append("")
        for n in names:
            if n not in direct:
                lines += [f'<span id="{package}.{n}"></span>', ""]
                lines += [f"::: {origin(package, n)}.{n}", "    options:"]
                lines += ["      show_root_heading: true", "      heading_level: 3", ""]
    return "\n".join(lines)


def _git_date(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path.relative_to(ROOT))],
            cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
        ).stdout.strip()  # fmt: skip
    except OSError:
        out = ""
    return out or "not committed yet"


def _writer_of(result: Path) -> str | None:
    """The benchmark script that writes ``result`` (its name appears in the script)."""
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if re.search(rf"['\"]{re.escape(result.stem)}(\.md)?['\"]", script.read_text("utf-8")):
            return f"benchmarks/{script.name}"
    return None


_DIARY = re.compile(
    r"\s*\((?:issue|sessions?) [\d-]+\)|\s+since sessions? [\d-]+"
    r"|(?<=\()sessions? [\d-]+, |, sessions? [\d-]+(?=[,;)])"
)


def _first_paragraph(lines: list[str]) -> str:
    """The first paragraph of ``lines`` (hand-wrapped lines joined), headings skipped."""
    out: list[str] = []
    for line in lines:
        if line.strip() and not line.startswith("#"):
            out.append(line.strip())
        elif out:
            break
    return " ".join(out)


def results_tables() -> str:
    """The results page's tables (work-log references such as "(issue 17)" or "since
    session 21" are left out: the page says what was measured, not when it was worked on)."""
    out = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.md")):
        text = _DIARY.sub("", path.read_text(encoding="utf-8"))
        lines = text.splitlines()
        heading = next((ln.lstrip("#").strip() for ln in lines if ln.startswith("#")), path.stem)
        start = next((i for i, ln in enumerate(lines) if ln.startswith("|")), None)
        setup = _first_paragraph(lines[1 : start or len(lines)])
        out += [f"## {heading}", ""]
        if setup:
            out += [setup, ""]
        if start is not None:
            end = start
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            out += lines[start:end] + [""]
        writer = _writer_of(path)
        command = f"`python {writer}`" if writer else "the commands are in the notes"
        source = f"benchmarks/results/{path.name}"
        out += [
            f"*Measured:* {_git_date(path)} (last commit of `{source}`) · "
            f"*reproduce:* {command} · *full notes:* `{source}`",
            "",
        ]
    return "\n".join(out)


def recipe_keys() -> str:
    import dataclasses

    from torchrl_lite.recipes import RECIPES
    from torchrl_lite.recipes.fields import config_fields, recipe_constant

    out = []
    for algo, module in RECIPES.items():
        source = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        doc = _module_summary(source)
        out += [f"### `{algo}`", "", f"{doc} Source: `{module.replace('.', '/')}.py`.", ""]
        out += ["| key | type | default | what it does |", "|---|---|---|---|"]
        for field in config_fields(algo).values():
            default = field.default
            shown = "(required)" if default is dataclasses.MISSING else f"`{default!r}`"
            text = field.doc.replace("|", "\\|") or "-"
            out.append(f"| `{field.name}` | `{field.annotation}` | {shown} | {text} |")
        out.append("")
        for const, what in (
            ("ENV_DEFAULTS", "Per env family"),
            ("PIXEL_DEFAULTS", "With `pixels=true`"),
        ):
            value = recipe_constant(algo, const)
            if value:
                out += [f"{what} (`{const}`), applied before your `key=value` options:", ""]
                if const == "ENV_DEFAULTS":
                    for family, changes in value.items():
                        out.append(f"- `{family}`: {_changes(changes)}")
                else:
                    out.append(f"- {_changes(value)}")
                out.append("")
    return "\n".join(out)


def _changes(changes: dict) -> str:
    return ", ".join(f"`{k}={v!r}`" for k, v in changes.items())


def _module_summary(path: Path) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.split("\n\n")[0]
    return " ".join(first.split())


def tutorial_page(path: Path) -> str:
    """A jupytext percent-format source as markdown: prose cells as text, code as blocks."""
    cells: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            cells.append(("markdown" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            cells.append(("code", [line]))
    out = []
    for kind, body in cells:
        while body and not body[-1].strip():
            body.pop()
        if not body:
            continue
        if kind == "markdown":
            out += [re.sub(r"^# ?", "", ln) for ln in body]
        else:
            out += ["```python", *body, "```"]
        out.append("")
    source = f"tutorials/{path.name}"
    notebook = path.with_suffix(".ipynb").name
    out += [
        "---",
        "",
        f"Source: `{source}`; notebook: `tutorials/{notebook}`. Run it with "
        f"`python tutorials/notebooks.py run {path.stem[:2]} --smoke` (seconds) or without "
        "`--smoke` (the full run).",
    ]
    return "\n".join(out)


def tutorial_sources() -> list[Path]:
    return sorted(p for p in (ROOT / "tutorials").glob("[0-9][0-9]_*.py"))


def on_config(config):
    """Fill the nav's "API reference" and "Tutorials" sections from ``floors()`` and the
    tutorial sources."""
    _tree.cache_clear()  # a rebuild (``mkdocs serve``) reads the sources again
    _source.cache_clear()
    for i, item in enumerate(config["nav"]):
        if item == "API reference" or (isinstance(item, dict) and "API reference" in item):
            pages = [{title: f"reference/{s}.md"} for s, (title, _, _) in floors().items()]
            config["nav"][i] = {"API reference": ["reference/index.md", *pages]}
        if isinstance(item, dict) and "Tutorials" in item:
            pages = [f"tutorials/{p.stem}.md" for p in tutorial_sources()]
            config["nav"][i] = {"Tutorials": ["tutorials/index.md", *pages]}
    return config


def on_files(files, config):
    for slug, floor in floors().items():
        files.append(File.generated(config, f"reference/{slug}.md", content=reference_page(*floor)))
    for path in tutorial_sources():
        page = tutorial_page(path)
        files.append(File.generated(config, f"tutorials/{path.stem}.md", content=page))
    return files


GENERATORS = {"recipe-keys": recipe_keys, "results": results_tables}


def on_page_markdown(markdown, page, config, files):
    def fill(match):
        return GENERATORS[match.group(1)]()

    return re.sub(r"<!-- generated: ([a-z-]+) -->", fill, markdown)
