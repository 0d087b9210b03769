"""A name that starts with an underscore belongs to its module: no other module of the product
imports it (``from x import _y``) or reaches it through the module (``x._y``). A name another
module needs is a public name of the module that owns it. A private module (``cli/_args.py``) is
used inside its own package only (the ``private_modules`` contract of import-linter checks the
same for the packages it reads; this covers scripts/ and bench/ too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("ctxprec_ops", "dagster_defs", "dags", "scripts", "bench")
PACKAGES = ("ctxprec_ops", "dagster_defs")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _private_module_owner(module: str) -> str | None:
    """The package a private module of ``module``'s path belongs to (None: no part is private)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    return None


def private_uses(source: str, module: str, is_package: bool = False) -> list[str]:
    """The private names of other modules that ``source`` (the text of ``module``) takes."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> a module of this tree

    def take_module(name: str, local: str, line: int) -> None:
        modules[local] = name
        owner = _private_module_owner(name)
        if owner is not None and not _inside(module, owner):
            found.append(f"{line}: private module {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if _is_module(full):
                    take_module(full, alias.asname or alias.name, node.lineno)
                elif _private(alias.name):
                    found.append(f"{node.lineno}: from {source_module} import {alias.name}")
                else:
                    owner = _private_module_owner(source_module)
                    if owner is not None and not _inside(module, owner):
                        found.append(f"{node.lineno}: private module {source_module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    take_module(alias.name, alias.asname or alias.name, node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                owner = ".".join([modules[value.id], *reversed(chain)])
                if owner != module:
                    found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def test_no_module_takes_another_modules_private_names():
    found = []
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            module, is_package = _module_name(path)
            for use in private_uses(path.read_text(), module, is_package):
                found.append(f"{path.relative_to(ROOT)}:{use}")
    assert found == [], "make the name public in the module that owns it (or move it there)"


def test_the_search_finds_each_form():
    """Each way of taking another module's private name is found; public names, private names of
    the module itself and private modules inside their own package are not."""
    taken = {
        "from ctxprec_ops.judge.calls import _send": ("ctxprec_ops.batch.notes", False),
        "from ..judge.calls import JudgeRun, _send": ("ctxprec_ops.batch.notes", False),
        "from .intake import _Intake": ("ctxprec_ops.pipeline.chunk", False),
        "from . import _x": ("ctxprec_ops.pipeline", True),
        "from ctxprec_ops.judge import calls\ncalls._send(1)": ("ctxprec_ops.batch.notes", False),
        "import ctxprec_ops.judge.calls as c\nc._send": ("ctxprec_ops.batch.notes", False),
        "from ctxprec_ops.cli._args import settings": ("ctxprec_ops.airflow.base", False),
        "from ctxprec_ops.cli import _args": ("scripts.cli_reference", False),
    }
    assert [src for src, (module, pkg) in taken.items() if not private_uses(src, module, pkg)] == []
    fine = {
        "from ctxprec_ops.judge.calls import JudgeRun as _JudgeRun": ("ctxprec_ops.batch.notes", False),
        "from ._args import settings": ("ctxprec_ops.cli.score", False),
        "from .. import _async\n_async.run_sync": ("ctxprec_ops.metrics.base", False),
        "def _f(): pass\n_f()": ("ctxprec_ops.batch.notes", False),
        "from ctxprec_ops.judge import calls\ncalls.__name__": ("ctxprec_ops.batch.notes", False),
        "from sqlalchemy import _x": ("ctxprec_ops.warehouse.engine", False),
    }
    assert {
        src: private_uses(src, module, pkg) for src, (module, pkg) in fine.items() if private_uses(src, module, pkg)
    } == {}
