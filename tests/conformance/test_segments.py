"""Segments: each score row carries its row's values of the segment columns (NULL is the
``(null)`` segment, text kept as it is), and ``check --by`` / ``trend --by`` report per value."""

from __future__ import annotations

import json
from collections import Counter

from ctxprec_ops.cli import main

from .invariants import DAY, assert_each_row_once, assert_ledger, logs, score, source_count

TENANTS = ["acme", "globex", 'Ünïcode ☃ "quoted"', None, "ACME"]
IDS = list(range(1, 26))


def _rows() -> list[dict]:
    return [dict(r, tenant=TENANTS[i % len(TENANTS)]) for i, r in enumerate(logs(IDS))]


def _label(value: str | None) -> str:
    return "(null)" if value is None else value


def test_score_rows_carry_the_segment_values_and_check_and_trend_report_per_segment(warehouse, capsys):
    rows = _rows()
    warehouse.create_source(rows, extra={"tenant": "label"})
    summary = score(warehouse.url, segments=["tenant"])
    assert_each_row_once(warehouse, IDS)
    assert_ledger(warehouse, summary, source_count(warehouse))

    carried = dict((str(a), b) for a, b in warehouse.query("SELECT log_id, seg_tenant FROM ctxprec_segments"))
    assert carried == {str(r["id"]): r["tenant"] for r in rows}

    want = Counter(_label(r["tenant"]) for r in rows)
    capsys.readouterr()
    code = main(
        ["check", "--warehouse", warehouse.url, "--partition", DAY, "--by", "tenant", "--min-rows", "1", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out.get("alerts")
    assert {s["label"]: s["rows"] for s in out["by"]["tenant"]["segments"]} == want

    code = main(
        ["trend", "--warehouse", warehouse.url, "--end", DAY, "--days", "1", "--by", "tenant", "--min-rows", "1"]
    )
    text = capsys.readouterr().out
    assert code == 0
    for label in want:
        assert label in text, f"trend --by tenant does not show segment {label!r}"
