"""docs/warehouses.md's capability table is what the warehouse families' classes declare (made by
scripts/warehouses_doc.py, not by hand)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("warehouses_doc", ROOT / "scripts" / "warehouses_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_capabilities_the_classes_declare():
    """Compared with what the script prints in a fresh interpreter: the types a family renders
    (``DATETIME(6)``, ``FLOAT(53)``) must not depend on what earlier tests of this process did to
    SQLAlchemy's dialect objects (a live MariaDB connection initializes them)."""
    import subprocess

    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "warehouses_doc.py")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert _script().shown() == printed, "run: python scripts/warehouses_doc.py --write"


def test_the_table_follows_a_change_of_a_class(monkeypatch):
    """A capability the class changes shows in the table (the table is read from the classes)."""
    from ctxprec_ops.warehouse.dialects.mysql import MySQLDialect

    script = _script()
    before = script.table()
    assert "named lock (`GET_LOCK`)" in before and "utf8mb4_bin" in before
    monkeypatch.setattr(MySQLDialect, "claims", "lease")
    after = script.table()
    assert after != before and "named lock (`GET_LOCK`)" not in after
