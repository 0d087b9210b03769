"""Partitions are UTC days of ``event_time``, at the day's edges, whatever the server's and the
session's time zone: a naive timestamp is UTC, an aware one is the instant it names."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime, timedelta, timezone

import pytest

from .invariants import assert_each_row_once, log, score

#: (id, UTC instant, its partition): the day's edges, and the local midnights of the zones the
#: backends set (New York -05:00, Kolkata +05:30, Tokyo +09:00) around the day
EDGES = [
    (1, datetime(2026, 11, 27, 23, 59, 59, 999999), "2026-11-27"),
    (2, datetime(2026, 11, 28, 0, 0, 0), "2026-11-28"),
    (3, datetime(2026, 11, 28, 0, 0, 0, 1), "2026-11-28"),
    (4, datetime(2026, 11, 28, 12, 0, 0), "2026-11-28"),
    (5, datetime(2026, 11, 28, 23, 59, 59, 999999), "2026-11-28"),
    (6, datetime(2026, 11, 29, 0, 0, 0), "2026-11-29"),
    (7, datetime(2026, 11, 28, 4, 59, 59, 999999), "2026-11-28"),  # 23:59:59 on the 27th in New York
    (8, datetime(2026, 11, 29, 4, 59, 59), "2026-11-29"),  # 23:59:59 on the 28th in New York
    (9, datetime(2026, 11, 27, 18, 30, 0), "2026-11-27"),  # midnight of the 28th in Kolkata
    (10, datetime(2026, 11, 28, 18, 30, 0), "2026-11-28"),  # midnight of the 29th in Kolkata
    (11, datetime(2026, 11, 28, 15, 0, 0), "2026-11-28"),  # midnight of the 29th in Tokyo
    (12, datetime(2026, 11, 27, 14, 59, 59), "2026-11-27"),  # 23:59:59 on the 27th in Tokyo
]
DAYS = ("2026-11-27", "2026-11-28", "2026-11-29")
#: the offsets aware values are written with (cycled): an instant means the same in any of them
OFFSETS = [timezone(timedelta(hours=h, minutes=m)) for h, m in ((9, 0), (-5, 0), (5, 30), (0, 0), (-8, 0))]
UTC_NAMES = ("UTC", "+00:00", "GMT", "Etc/UTC", "Z")


def _rows(column: str) -> list[dict]:
    rows = []
    for i, (rid, instant, _day) in enumerate(EDGES):
        value = instant if column == "timestamp" else instant.replace(tzinfo=UTC).astimezone(OFFSETS[i % len(OFFSETS)])
        rows.append(log(rid, value, rid))
    return rows


@pytest.mark.parametrize("zone", ["utc", "non-utc"])
@pytest.mark.parametrize("column", ["timestamp", "timestamptz"])
def test_utc_day_partitions_at_the_days_edges(warehouse, backend, column, zone):
    if zone == "non-utc":
        backend.require("time_zone")
    warehouse.create_source(_rows(column), event_time=column)
    setting = backend.time_zone(warehouse) if zone == "non-utc" else nullcontext(warehouse.url)
    with setting as url:
        if zone == "non-utc":
            zones = backend.current_time_zones(url)
            assert not [z for z in zones if z.split()[-1] in UTC_NAMES], f"not a non-UTC setting: {zones}"
        for day in DAYS:
            score(url, day, chunk_size=50)
    for day in DAYS:
        assert_each_row_once(warehouse, [rid for rid, _, d in EDGES if d == day], day=day)
