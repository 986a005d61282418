"""Layout facts of the package that a reviewer can check by reading.

    python tools/house_facts.py            the table
    python tools/house_facts.py --detail   with the cycles and upward arrows listed

Counts (static, from the ``import`` statements of ``torchrl_lite/``; "module level" includes
imports placed at the bottom of a file, "deferred too" adds imports inside functions, the
usual way around a cycle or an upward arrow):

- modules at the root of ``envs/`` (``__init__`` aside);
- import cycles: strongly connected groups of two or more modules;
- upward arrows: a package on a lower floor importing one on a higher floor (``FLOORS``),
  counted once per (lower, higher) pair.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "torchrl_lite"

# Lowest floor first. A package may import its own floor and every floor below it.
FLOORS = [
    {"_td", "_utils", "_keys", "_timing", "_atomic", "_mp", "_returns", "workers"},
    {"data"},
    {"modules"},
    {"envs", "record"},
    {"objectives"},
    {"collectors"},
    {"trainers", "checkpoint"},
    {"recipes", "export", "render"},
    {"agent", "scheme", "learner", "tune", "_run_folder"},
    {"cli", "_cli_train", "_cli_deploy", "__main__", "__init__"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    names = [f"{base}.{alias.name}" for alias in node.names]
    if not module.startswith(base + "."):  # a parent package is imported already
        names.append(base)
    return names


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level (``deferred``: anywhere,
    function bodies included)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text())
        targets: set[str] = set()
        for node in tree.body:
            walk = deferred or isinstance(node, (ast.If, ast.Try))
            for sub in ast.walk(node) if walk else [node]:
                if isinstance(sub, ast.Import):
                    targets.update(alias.name for alias in sub.names)
                elif isinstance(sub, ast.ImportFrom):
                    targets.update(_resolve(module, path.name == "__init__.py", sub))
        graph[module] = {t for t in targets if t in files and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(module: str) -> int | None:
    top = _top(module)
    for level, names in enumerate(FLOORS):
        if top in names:
            return level
    return None


def upward_arrows(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    arrows: dict[tuple[str, str], list[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            low_floor, high_floor = _floor(source), _floor(target)
            if low_floor is not None and high_floor is not None and high_floor > low_floor:
                pair = (_top(source), _top(target))
                arrows.setdefault(pair, []).append(f"{source} -> {target}")
    return arrows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", action="store_true", help="list cycles and arrows")
    args = parser.parse_args()
    envs_root = [p for p in (PACKAGE / "envs").glob("*.py") if p.name != "__init__.py"]
    print(f"modules at the root of envs/: {len(envs_root)}")
    for label, graph in (("module level", import_graph()), ("deferred too", import_graph(True))):
        found = cycles(graph)
        arrows = upward_arrows(graph)
        print(f"{label}: import cycles {len(found)}, upward arrows (package pairs) {len(arrows)}")
        if args.detail:
            for group in found:
                print("  cycle:", " <-> ".join(group))
            for pair, edges in sorted(arrows.items()):
                print(f"  arrow {pair[0]} -> {pair[1]}: {', '.join(sorted(edges)[:3])}")


if __name__ == "__main__":
    main()
