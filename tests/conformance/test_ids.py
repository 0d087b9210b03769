"""Ids round-trip exactly: whatever the id column's type, each row is scored once and its
``log_id`` is the id's exact, unique text (it reads back as the same value). An id longer than a
warehouse's ``log_id`` holds is refused, named in the run's ledger, and costs the other rows
nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from tests.fixtures.warehouse_data import CountingJudge

from .invariants import assert_each_row_once, assert_ledger, logs, outcome, run_row, score, source_count

#: (logical column kind, ids, how a log_id reads back as the id's value)
CASES: dict[str, tuple[str, list[Any], Callable[[str], Any]]] = {
    # in a binary (case- and accent-sensitive) column: seven different ids
    "text-variants": ("text", ["abc", "ABC", "Abc", "resume", "résumé", "RÉSUMÉ", "resumé"], str),
    "long-text": ("text", ["x" * 500, "x" * 499 + "y", "é" * 500, "ü" * 499 + "u"], str),
    "integer": ("integer", [0, 1, -1, 2**53, 2**53 + 1, 2**63 - 1, -(2**63)], int),
    "decimal": (
        "decimal",
        [Decimal("1"), Decimal("1.000000000001"), Decimal("-0.000000000001"), Decimal("12345678901234567890123456.5")],
        Decimal,
    ),
    "float": ("float", [1.0, 1.0000000000000002, 1e-300, -2.5, 1.7976931348623157e308, 5e-324], float),
    "uuid": (
        "uuid",
        [uuid.UUID(int=0), uuid.UUID("123e4567-e89b-12d3-a456-426614174000"), uuid.UUID(int=2**128 - 1)],
        uuid.UUID,
    ),
}
KINDS_WITH_EXACT_TEXT = {"text", "integer", "uuid"}


@pytest.mark.parametrize(
    "case",
    ["text-variants", "long-text", "integer", "decimal", "float", "uuid"],
)
def test_ids_round_trip_exactly(warehouse, backend, case):
    kind, ids, parse = CASES[case]
    if case == "long-text":
        backend.require("long_ids")
    warehouse.create_source(logs(ids), id=kind)
    stored = [parse(str(v)) for (v,) in warehouse.query("SELECT id FROM retrieval_logs")]
    assert sorted(stored) == sorted(ids), "the source does not hold the ids as given (test setup)"
    judge = CountingJudge()
    summary = score(warehouse.url, judge=judge, chunk_size=2)  # keyset chunk bounds between the ids

    log_ids = [log_id for log_id, _ in outcome(warehouse).scores]
    assert len(log_ids) == len(set(log_ids)) == len(ids), f"{len(ids)} ids, log_ids {log_ids}"
    assert sorted(map(parse, log_ids)) == sorted(ids), f"log_ids {log_ids} do not read back as {ids}"
    if kind in KINDS_WITH_EXACT_TEXT:
        assert sorted(log_ids) == sorted(map(str, ids))
    assert judge.calls == len(ids)  # each row judged once
    assert_each_row_once(warehouse, log_ids)
    assert_ledger(warehouse, summary, source_count(warehouse))


def test_ids_too_long_for_log_id_are_refused_and_named_and_the_others_scored(warehouse, backend):
    """Where ``log_id`` is bounded (255 characters on MySQL / MariaDB) a longer id can be neither
    scored nor recorded: the run does not abort, scores the other rows, and its ledger counts and
    names the refused ones (``rows_without_id``, ``error_message``); elsewhere every row scores."""
    long_ids = ["x" * 300, "é" * 256]
    short_ids = ["a-1", "a-2", "a-3"]
    ids = short_ids[:1] + long_ids[:1] + short_ids[1:] + long_ids[1:]
    warehouse.create_source(logs(ids), id="text")
    judge = CountingJudge()
    summary = score(warehouse.url, judge=judge, chunk_size=2)

    refused = [] if backend.has("long_ids") else long_ids
    scored = [i for i in ids if i not in refused]
    assert_each_row_once(warehouse, scored)
    assert judge.calls == len(scored)  # nothing judged that cannot be recorded
    row = run_row(warehouse, summary.run_id)
    assert row["status"] == "succeeded" and row["rows_unaccounted"] == 0
    assert (row["rows_total"], row["rows_scored"], row["rows_without_id"]) == (len(scored), len(scored), len(refused))
    message = row["error_message"] or ""
    for text in refused:
        assert f"{text[:24]!r}... ({len(text)} characters; log_id holds 255)" in message, message
    if refused:
        assert "have an id that log_id cannot hold on this warehouse" in message, message
