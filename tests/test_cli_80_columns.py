"""Every command that prints a table stays readable in an 80-column terminal (``COLUMNS=80``, the
console script in a subprocess, as a user runs it): no printed line is wider than 80 cells, and
every row's name or date (a partition, a segment value, ``overall``, a batch id, a figure's
label) is printed whole on one line — never cut to ``2026-…``, never wrapped, never squeezed to
nothing — and a ``mean ± CI`` stays on one line.

The same commands at 200 columns show every column (nothing is left out when there is room).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from rich.cells import cell_len

from tests.segment_data import BAD_DAY, DAYS, ODD_TENANT, RELEVANT, build

CTXPREC = Path(sys.executable).with_name("ctxprec")
SCORED = DAYS[-4:]  # ends with BAD_DAY
TENANTS = ["acme", "globex", "initech", "(null)", ODD_TENANT]
MEAN_CI = re.compile(r"\d\.\d{3} ± \d\.\d{3}")
BATCH_ID = "batch_6790a1b2c3d4e5f6a7b8c9d0e1f2a3b4"


def _run(*argv: str, width: int = 80, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [str(CTXPREC), *argv], capture_output=True, text=True, timeout=300, cwd=cwd,
        env=dict(os.environ, COLUMNS=str(width)),
    )  # fmt: skip
    assert proc.returncode in (0, 3), f"{argv}: exit {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def _fits(out: str, width: int = 80) -> list[str]:
    lines = out.splitlines()
    wide = [(cell_len(line), line) for line in lines if cell_len(line) > width]
    assert not wide, "lines wider than the terminal:\n" + "\n".join(f"{n}: {line}" for n, line in wide)
    return lines


def _whole(lines: list[str], *names: str) -> None:
    """Each name is printed whole, as a cell of its own (between the table's borders or spaces)."""
    for name in names:
        cell = re.compile(rf"(^|[│┃ ]){re.escape(name)}($|[ │┃])")
        assert any(cell.search(line) for line in lines), f"{name!r} is not printed whole:\n" + "\n".join(lines)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> tuple[str, Path]:
    """A segment warehouse scored on a few days, with a batch recorded and a labels file."""
    from ctxprec_ops.batch.store import BatchRecord, batches_table, record_batch
    from ctxprec_ops.warehouse.engine import get_engine, release_sqlite_files

    d = tmp_path_factory.mktemp("cols80")
    url = build(f"sqlite:///{d / 'wh.db'}", days=SCORED)
    engine = get_engine(url)
    record_batch(engine, batches_table(engine), BatchRecord(
        batch_id=BATCH_ID, partition_key=BAD_DAY, metric="contextual_precision",
        judge_model="gpt-4o-mini-2024-07-18", prompt_version="v1-0d0b187b4494", status="in_progress",
        requests=1234, input_file_id="file-abc", submitted_at=datetime(2026, 11, 29, 1, 0, tzinfo=UTC),
    ))  # fmt: skip
    with engine.connect() as conn:  # labels: a node is relevant when it is one of the refund texts
        rows = conn.execute(sa.text("SELECT id, retrieval_context FROM retrieval_logs ORDER BY id LIMIT 40")).all()
    with (d / "labels.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["log_id", "node", "relevant"])
        for log_id, context in rows:
            for k, node in enumerate(json.loads(context), start=1):
                w.writerow([log_id, k, int(node in RELEVANT)])
    release_sqlite_files()
    return url, d


def test_trend_keeps_dates_and_mean_ci_whole(warehouse):
    url, _ = warehouse
    lines = _fits(_run("trend", "--warehouse", url, "--days", "9"))
    _whole(lines, *SCORED)
    assert len([line for line in lines if MEAN_CI.search(line)]) == len(SCORED)
    wide = _run("trend", "--warehouse", url, "--days", "9", width=200)
    assert "mean bar" in wide and "median" in wide  # left out only for want of room


def test_trend_and_check_by_segment(warehouse):
    url, _ = warehouse
    lines = _fits(_run("trend", "--warehouse", url, "--days", "9", "--by", "tenant"))
    _whole(lines, *TENANTS, *SCORED)
    lines = _fits(_run("check", "--warehouse", url, "--partition", BAD_DAY, "--by", "tenant"))
    _whole(lines, *TENANTS, "n (scored cases)", "regression test")


@pytest.mark.parametrize("within", [True, False])
@pytest.mark.parametrize("paired", [True, False])
def test_compare_keeps_every_row_name(warehouse, within, paired):
    url, _ = warehouse
    argv = ["compare", "--warehouse", url, "--partition", BAD_DAY, "--by", "retriever_version", "--baseline", "v1",
            "--candidate", "v2"]  # fmt: skip
    argv += ["--pair-on", "query_id"] if paired else []
    argv += ["--within", "tenant"] if within else []
    lines = _fits(_run(*argv))
    _whole(lines, "overall", *(TENANTS if within else ()))
    rows = [line for line in lines if re.search(r"[│ ][+-]\d\.\d{3} … [+-]\d\.\d{3} ", line)]
    assert len(rows) == (len(TENANTS) + 1 if within else 1), lines  # each row's CI on its row's line
    wide = _run(*argv, width=200)
    assert re.search(r"┃ +v1 ┃ +v2 ┃", wide)  # both sides' means, when there is room


def test_score_estimate_batches_calibrate(warehouse, tmp_path):
    url, d = warehouse
    copy = tmp_path / "wh.db"
    shutil.copy2(d / "wh.db", copy)
    lines = _fits(_run("score", "--warehouse", f"sqlite:///{copy}", "--partition", DAYS[0], "--judge", "lexical",
                       "--quiet"))  # fmt: skip
    _whole(lines, DAYS[0], "tokens (prompt / completion)", "of which cached / already scored")
    lines = _fits(_run("score", "--warehouse", f"sqlite:///{copy}", "--partition", DAYS[1], "--judge", "lexical",
                       "--chunk-size", "100", "--chunk", "1", "--quiet"))  # fmt: skip
    assert any("judge calls" in line or "cost" in line for line in lines)
    lines = _fits(_run("estimate", "--warehouse", url, "--partition", DAYS[0], "--judge", "lexical"))
    _whole(lines, "rows in partition", "estimated cost, batch mode")
    lines = _fits(_run("batches", "--warehouse", url))
    _whole(lines, BATCH_ID, BAD_DAY, "in_progress")
    lines = _fits(_run("calibrate", "--warehouse", f"sqlite:///{copy}", "--labels", str(d / "labels.csv"),
                       "--judge", "lexical", "--judge", "lexical", "--compare", "--resamples", "50"))  # fmt: skip
    _whole(lines, "verdict precision", "score MAE (lower = better)", "cases (fully labelled)", "TP/FP/FN/TN")


def test_demo(tmp_path):
    out = _run("demo", "--warehouse", f"sqlite:///{tmp_path / 'demo.db'}", "--out", str(tmp_path / "r.html"),
               "--days", "4", "--rows-per-day", "40-50", "--conversations-per-day", "4-6", "--quiet",
               "--end-date", "2026-11-28", cwd=tmp_path)  # fmt: skip
    lines = _fits(out)
    days = ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"]
    _whole(lines, *days)
    assert len([line for line in lines if MEAN_CI.search(line)]) >= 2 * len(days)  # two metrics' trends at least
