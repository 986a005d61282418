"""A griffe extension for the docs build: reads this project's docstrings as written.

- ``Example:`` sections (the project's spelling, also ``Example (a note):``) are read as
  Google ``Examples:`` sections, so their ``>>>`` lines render as code.
- An ``Args:`` item naming several parameters (``a, b, c: what they do``, the names
  possibly wrapped over lines) becomes one item per name with the same description.

Used by mkdocs.yml (``extensions`` of the mkdocstrings Python handler); changes nothing
in the package.
"""

from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$")
_EXAMPLE_NOTE = re.compile(r"^(\s*)Example \((.+)\):\s*$")  # ``Example (needs Ray):``
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Other Parameters):\s*$")
_NAMES = re.compile(r"^\w+(\s*,\s*\w+)+$")


def rewrite(text: str) -> str:
    """``text`` with ``Example:`` headers renamed and multi-name argument items split."""
    lines = []
    for line in text.splitlines():
        note = _EXAMPLE_NOTE.match(line)
        if note:  # the note becomes the section's first line of prose
            lines += [f"{note[1]}Examples:", f"{note[1]}    ({note[2]})"]
        else:
            lines.append(_EXAMPLE.sub(r"\1Examples:", line))
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        section = _SECTION.match(lines[i])
        i += 1
        if not section:
            continue
        indent = None
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(section[1])):
            line = lines[i]
            indent = _indent(line) if indent is None and line.strip() else indent
            if line.strip() and _indent(line) == indent and ":" not in line.split("(")[0]:
                # ``a, b,`` / ``    c: text`` : gather the names up to the colon
                j, head = i, line.strip()
                while ":" not in head and j + 1 < len(lines):
                    j += 1
                    head += " " + lines[j].strip()
                names, _, desc = head.partition(":")
                if _NAMES.match(names.strip().rstrip(",")):
                    body = []
                    k = j + 1
                    while k < len(lines) and lines[k].strip() and _indent(lines[k]) > indent:
                        body.append(lines[k])
                        k += 1
                    for name in names.replace(" ", "").rstrip(",").split(","):
                        out.append(" " * indent + f"{name}: {desc.strip()}")
                        out.extend(body)
                    i = k
                    continue
            out.append(line)
            i += 1
    return "\n".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


class ProjectDocstrings(griffe.Extension):
    """Applies :func:`rewrite` to every docstring griffe reads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
