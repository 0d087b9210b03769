"""docs/architecture.md shows the package graph the code has (made by the script, not by hand)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("architecture_diagram", ROOT / "scripts" / "architecture_diagram.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_import_graph_of_the_code():
    script = _script()
    shown = script.page_diagram(script.DOC.read_text(encoding="utf-8"))
    assert shown == script.mermaid(), "run: python scripts/architecture_diagram.py --write"


def test_the_graph_has_no_arrow_up_the_layers():
    edges, _ = _script().graph()
    assert "batch" not in edges["pipeline"]  # the run path knows no transport but its own
    for low in ("scoring", "cases", "judge", "metrics"):
        assert not edges.get(low, set()) & {"pipeline", "warehouse", "batch", "cli", "airflow", "dagster"}
