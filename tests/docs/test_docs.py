"""The documentation site: it builds with ``--strict``, its API reference lists every public
name, its command-line page lists every recipe key, and a headless Chromium opens it.

The build runs once per session (``site``); each check reads the built HTML.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torchrl_lite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=280,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    print(f"docs build: {seconds:.1f} s")
    return out


def _public_packages() -> list[str]:
    """Every public package of torchrl_lite that declares ``__all__``, and public modules
    of ``envs.libs`` (each library wrapper), imported: the reference to check against."""
    names = ["torchrl_lite"]
    for info in pkgutil.walk_packages(torchrl_lite.__path__, "torchrl_lite."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if info.ispkg or info.name.startswith("torchrl_lite.envs.libs."):
            names.append(info.name)
    return [n for n in names if hasattr(importlib.import_module(n), "__all__")]


def _anchors(site: Path) -> set[str]:
    ids = set()
    for page in (site / "reference").rglob("*.html"):
        ids.update(re.findall(r'id="(torchrl_lite[\w.]*)"', page.read_text(encoding="utf-8")))
    return ids


def test_docs_reference_lists_every_public_name(site):
    anchors = _anchors(site)
    missing = []
    for package in _public_packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            # documented under this path, or under a parent package exporting the same object
            parts = package.split(".")
            homes = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
            found = any(
                f"{home}.{name}" in anchors
                and getattr(importlib.import_module(home), name, None) is getattr(module, name)
                for home in homes
            )
            if not found:
                missing.append(f"{package}.{name}")
    assert not missing, (
        f"not in the API reference: {missing}; add the package to FLOORS in "
        "tools/docs_hooks.py (or the name to its __all__)."
    )


def test_docs_every_public_class_and_function_has_a_docstring():
    import inspect

    bare = set()
    for package in _public_packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            ours = getattr(obj, "__module__", "").startswith("torchrl_lite")
            if ours and (inspect.isclass(obj) or inspect.isfunction(obj)):
                if not (obj.__doc__ or "").strip():
                    bare.add(f"{package}.{name}")
    assert not bare, f"public names without a docstring (the reference would be empty): {bare}"


def test_docs_reference_renders_docstrings(site):
    page = (site / "reference" / "envs" / "index.html").read_text(encoding="utf-8")
    assert 'id="torchrl_lite.envs.GymEnv"' in page
    # the first docstring line of GymEnv, as written in the code
    summary = torchrl_lite.envs.GymEnv.__doc__.strip().splitlines()[0].strip()
    words = re.sub(r"[`*]", "", summary).split()[:4]
    text = re.sub(r"<[^>]+>", "", page)
    assert " ".join(words) in " ".join(text.split())


def test_docs_command_line_lists_every_recipe_key(site):
    from torchrl_lite.recipes import RECIPES, get_recipe

    page = (site / "command-line" / "index.html").read_text(encoding="utf-8")
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    for algo in RECIPES:
        cfg = get_recipe(algo).Config
        assert f'id="{algo}"' in page, f"no section for the {algo} recipe"
        section = page.split(f'id="{algo}"', 1)[1].split("<h3", 1)[0]
        rows = re.findall(r"<tr>\s*<td><code>(\w+)</code></td>.*?</tr>", section, re.S)
        assert rows == [f.name for f in dataclasses.fields(cfg)], algo
        for field in dataclasses.fields(cfg):
            if field.default is not dataclasses.MISSING:
                shown = html.escape(repr(field.default), quote=False)
                assert f"<code>{shown}</code>" in section, (algo, field.name)
    assert "Discount; Pendulum" in text  # a field docstring (PPO's gamma), generated


def test_docs_results_tables_come_from_the_results_files(site):
    page = (site / "results" / "index.html").read_text(encoding="utf-8")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        heading = next(ln for ln in lines if ln.startswith("## "))
        title = heading[3:].split("(")[0].split("`")[0].strip()
        assert title[:30] in text, path.name
        row = next((ln for ln in lines if ln.startswith("|") and "---" not in ln), None)
        if row is not None:  # the table's header row, cell by cell
            cells = [c.strip().strip("`*") for c in row.strip("|").split("|")]
            assert all(c.split("`")[0].strip()[:12] in text for c in cells), path.name
    assert "python benchmarks/bench_learning.py" in text


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browse(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=3000",
    ]
    return subprocess.run(
        [binary, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def served(site):
    """The built site over HTTP on localhost (the search index loads in a web worker,
    which browsers refuse to start from file:// pages)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_docs_open_in_a_headless_browser(served, tmp_path, request):
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium (make system-deps installs Debian's chromium as root)")
    screenshots = Path(request.config.cache.mkdir("docs-screenshots"))
    pages = {
        "index": ("/", "torchrl_lite", "A TensorDict-centric"),
        "envs": ("/reference/envs/", "envs - torchrl_lite", 'id="torchrl_lite.envs.GymEnv"'),
    }
    for name, (path, title, text) in pages.items():
        dom = _browse(binary, tmp_path / f"profile-{name}", "--dump-dom", served + path)
        assert dom.returncode == 0, dom.stderr
        assert f"<title>{title}</title>" in dom.stdout
        assert text in dom.stdout
        # the theme's script ran, and it showed the search box (it hides it when the
        # search index cannot load)
        assert re.search(r'<html[^>]*class="[^"]*\bjs\b', dom.stdout), (
            "the page's script did not run"
        )
        assert 'data-md-component="search-query"' in dom.stdout
        search = re.search(r'<div class="md-search"[^>]*>', dom.stdout)
        assert search and "hidden" not in search.group(0), search
        png = screenshots / f"{name}.png"
        png.unlink(missing_ok=True)
        shot = _browse(
            binary,
            tmp_path / f"profile-{name}-shot",
            f"--screenshot={png}",
            "--window-size=1280,900",
            served + path,
        )
        assert shot.returncode == 0 and png.exists(), shot.stderr
        image = pytest.importorskip("PIL.Image").open(png).convert("RGB")
        assert image.size == (1280, 900)
        colours = image.resize((128, 90)).getcolors(maxcolors=128 * 90)
        assert len(colours) > 20, f"{png} looks blank"
