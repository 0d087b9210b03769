"""Print the package diagram of docs/architecture.md, made from the code's own imports.

Every ``import`` and ``from ... import`` of ``ctxprec_ops/``, ``dagster_defs/`` and ``dags/``
(including the ones inside functions) is read with ``ast``; each file is placed in its package
(``ctxprec_ops.<package>``, or a root module), and the arrows between packages are drawn after a
transitive reduction (an arrow that a longer path already implies is left out), as a Mermaid
flowchart. ``tests/test_architecture_doc.py`` checks that the page shows what this prints.

    python scripts/architecture_diagram.py            # the Mermaid block
    python scripts/architecture_diagram.py --edges    # every package-level arrow, unreduced
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("ctxprec_ops", "dagster_defs", "dags")
#: root modules of ctxprec_ops drawn as one node
CORE = "core"


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _node(module: str) -> str | None:
    """The diagram node of a module: ``ctxprec_ops.<package>``, ``core`` for root modules."""
    parts = module.split(".")
    if parts[0] in ("dagster_defs", "dags"):
        return parts[0]
    if parts[0] != "ctxprec_ops":
        return None
    if len(parts) == 1:
        return "ctxprec_ops"  # the package face (public re-exports)
    if (ROOT / "ctxprec_ops" / parts[1]).is_dir():
        return parts[1]
    return CORE


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return out


def graph() -> tuple[dict[str, set[str]], dict[str, int]]:
    edges: dict[str, set[str]] = defaultdict(set)
    lines: dict[str, int] = defaultdict(int)
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            module = _module_of(path)
            here = _node(module)
            if here is None:
                continue
            lines[here] += len(path.read_text(encoding="utf-8").splitlines())
            for target in _imports(path, module):
                there = _node(target)
                if there is not None and there != here and (there != "ctxprec_ops" or here in ("dagster_defs", "dags")):
                    edges[here].add(there)
    return edges, lines


def _reduce(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    def reaches(a: str, b: str, skip: tuple[str, str]) -> bool:
        seen, todo = set(), [a]
        while todo:
            n = todo.pop()
            for m in edges.get(n, ()):
                if (n, m) == skip or m in seen:
                    continue
                if m == b:
                    return True
                seen.add(m)
                todo.append(m)
        return False

    return {a: {b for b in bs if not reaches(a, b, (a, b))} for a, bs in edges.items()}


def mermaid() -> str:
    edges, lines = graph()
    reduced = _reduce(edges)
    out = ["```mermaid", "flowchart TD"]
    for n in sorted(lines):
        label = "root modules" if n == CORE else n
        out.append(f'  {n.replace(".", "_")}["{label}"]')
    for a in sorted(reduced):
        for b in sorted(reduced[a]):
            out.append(f"  {a.replace('.', '_')} --> {b.replace('.', '_')}")
    out.append("```")
    return "\n".join(out)


if __name__ == "__main__":
    if "--edges" in sys.argv:
        edges, _ = graph()
        for a in sorted(edges):
            print(f"{a} -> {', '.join(sorted(edges[a]))}")
    else:
        print(mermaid())
