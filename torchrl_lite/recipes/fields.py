"""A recipe's config fields read from its source file, without importing it (nor torch).

The command line checks ``key=value`` options against these before anything heavy is
imported (an unknown key, a value of the wrong type or range fails in a fraction of a
second), and ``torchrl-lite config ALGO`` prints them with their defaults and docstrings
(the string under each field, which the dataclass itself does not keep).

Example:
    >>> fields = config_fields("ppo")
    >>> fields["gamma"].default, fields["gamma"].annotation
    (0.9, 'float')
    >>> parse_value("3e-4", float, "lr")
    0.0003
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from functools import cache

from torchrl_lite._utils import did_you_mean
from torchrl_lite.recipes.ranges import range_error

__all__ = [
    "Field",
    "check_overrides",
    "config_fields",
    "parse_value",
    "recipe_constant",
    "unknown_option",
]


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field: its name, default, annotation (as written) and docstring."""

    name: str
    default: object
    annotation: str
    doc: str


def _module_source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the source of {module}.")
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()


@cache
def _class_fields(module: str, cls: str) -> tuple[Field, ...]:
    """The fields of ``module.cls`` (a dataclass), its bases' first, as the dataclass orders them."""
    tree = ast.parse(_module_source(module))
    imports = {}  # local name -> module it comes from (``from M import X`` / ``from P import m``)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        raise ValueError(f"{module} has no class {cls}.")
    fields: dict[str, Field] = {}
    for base in node.bases:
        for field in _base_fields(base, module, imports):
            fields[field.name] = field
    body = node.body
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        after = body[i + 1] if i + 1 < len(body) else None
        doc = ""
        if isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None), ast.Constant):
            doc = " ".join(str(after.value.value).split())
        default = ast.literal_eval(stmt.value) if stmt.value is not None else dataclasses.MISSING
        name = stmt.target.id  # a redefined field keeps its base's place, as in dataclasses
        fields[name] = Field(name, default, ast.unparse(stmt.annotation), doc)
    return tuple(fields.values())


def _base_fields(base: ast.expr, module: str, imports: dict) -> tuple[Field, ...]:
    if isinstance(base, ast.Name):  # ``Config(OfflineConfig)``
        if base.id in imports:
            source, name = imports[base.id]
            return _class_fields(source, name)
        return _class_fields(module, base.id)
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):  # ``dt.Config``
        source, name = imports.get(base.value.id, (None, None))
        if source is not None:
            return _class_fields(f"{source}.{name}", base.attr)
    raise ValueError(f"{module}: cannot read the config base class {ast.unparse(base)}.")


def config_fields(algo: str) -> dict[str, Field]:
    """``{name: Field}`` of the recipe ``algo``'s ``Config``, in declaration order."""
    from torchrl_lite.recipes import RECIPES, recipe_key

    return {f.name: f for f in _class_fields(RECIPES[recipe_key(algo)], "Config")}


def recipe_constant(algo: str, name: str):
    """A module-level literal of the recipe ``algo`` (e.g. ``TARGETS``), or None."""
    from torchrl_lite.recipes import RECIPES, recipe_key

    tree = ast.parse(_module_source(RECIPES[recipe_key(algo)]))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def parse_value(text, kind: type, key: str):
    """``text`` (as typed after ``key=``) as a value of ``kind``, the type of the field's
    default (``NoneType``: an optional number, where ``none`` means unset)."""
    if not isinstance(text, str):
        return text
    if kind is type(None):
        if text.lower() in ("none", ""):
            return None
        kind = float
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if kind is int:
            return int(float(text)) if "e" in text.lower() else int(text)
        if kind is float:
            return float(text)
        if kind is tuple:
            return tuple(int(v) for v in text.strip("()[]").split(",") if v.strip())
    except ValueError:
        raise ValueError(f"Option {key}={text!r} is not a valid {kind.__name__}.") from None
    return text


def unknown_option(key: str, names, owner: str) -> ValueError:
    """The error for an option that is not a field: the closest name and the valid ones."""
    hint = did_you_mean(key, list(names))
    return ValueError(
        f"Unknown option {key!r} for {owner}.{hint} Options: {', '.join(sorted(names))} "
        f"(`torchrl-lite config ALGO` lists them with their defaults)."
    )


def check_overrides(algo: str, overrides: dict[str, str], typed: dict[str, str]) -> None:
    """Check ``key=value`` options against the recipe's fields: known keys, values that
    parse as the field's type, in its range (``typed``: how each was written)."""
    fields = config_fields(algo)
    for key, text in overrides.items():
        if key not in fields:
            raise unknown_option(key, fields, f"the {algo} recipe")
        value = parse_value(text, type(fields[key].default), key)
        if value is not None and not isinstance(value, (str, tuple, bool)):
            message = range_error(key, value)
            if message:
                raise ValueError(f"{typed.get(key, f'{key}={text}')}: {message}")
