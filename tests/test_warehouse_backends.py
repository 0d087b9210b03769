"""The full cycle on real MySQL/MariaDB and fakesnow-emulated Snowflake: load a source
table, ``score`` twice (second run: 0 judge calls, identical rows, no duplicates), two concurrent
``score`` runs on one partition, ``check``, ``trend``, ``report``.

DuckDB is a file (duckdb-engine), MariaDB a throwaway server (``tests/fixtures/mariadb.py``),
Snowflake the ``fakesnow`` emulator (DuckDB underneath). Each step is its own test so that what
works and what does not on a backend is visible one by one.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring.check import check_partition
from ctxprec_ops.monitoring.report import render_report
from ctxprec_ops.monitoring.trend import trend_results
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, all_ids, create_logs, day_rows

DAY = "2026-11-28"


@pytest.fixture(params=[pytest.param("duckdb"), pytest.param("mariadb"), pytest.param("snowflake")])
def backend_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _load(url: str, n: int = 7) -> list[dict]:
    """A source table of ``n`` rows (retrieval context as JSON text: fakesnow has no SQLAlchemy JSON)."""
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(n)]
    create_logs(get_engine(url), rows, context_type=sa.Text)
    return rows


def _scores(url: str) -> list[tuple]:
    engine = get_engine(url)
    with engine.connect() as conn:
        return sorted(tuple(r) for r in conn.exec_driver_sql("SELECT log_id, score FROM ctxprec_scores"))


def test_score_twice(backend_url):
    rows = _load(backend_url)
    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=backend_url, judge=judge, chunk_size=3), DAY)
    assert judge.calls == 7 and summary.rows_scored == 7
    first = _scores(backend_url)
    assert [r[0] for r in first] == all_ids(rows)
    again = CountingJudge()
    rerun = score_partition(PipelineConfig(warehouse=backend_url, judge=again, chunk_size=3), DAY)
    assert again.calls == 0 and rerun.rows_cached == 7
    assert _scores(backend_url) == first


def test_two_concurrent_runs(backend_url):
    rows = _load(backend_url, 12)
    judges = [CountingJudge(), CountingJudge()]
    with ThreadPoolExecutor(2) as pool:
        futs = [
            pool.submit(score_partition, PipelineConfig(warehouse=backend_url, judge=j, chunk_size=2), DAY)
            for j in judges
        ]
        for f in futs:
            f.result()
    got = _scores(backend_url)
    assert [r[0] for r in got] == all_ids(rows)  # every row once, no duplicate
    # chunk claims (MariaDB's named locks, DuckDB's and Snowflake's leases): no row is judged by
    # both runs
    assert sum(j.calls for j in judges) == len(rows), [j.calls for j in judges]


def test_check_trend_report(backend_url, tmp_path):
    _load(backend_url)
    score_partition(PipelineConfig(warehouse=backend_url, judge=CountingJudge(), chunk_size=3), DAY)
    check_partition(backend_url, DAY)
    trend_results(backend_url, end=DAY)
    render_report(backend_url, tmp_path / "r.html", end=DAY)
    assert (tmp_path / "r.html").stat().st_size > 0


def test_mariadb_precheck_names_a_really_missing_privilege(mariadb_server, mariadb_url):
    """Strict mode: the precheck passes with the grants (above) and names INSERT when it is missing;
    the password never reaches the message."""
    from sqlalchemy.engine import make_url

    from ctxprec_ops.warehouse.permissions import OutputPermissionError

    _load(mariadb_url)
    score_partition(PipelineConfig(warehouse=mariadb_url, judge=CountingJudge(), chunk_size=3), DAY)
    db = make_url(mariadb_url).database
    mariadb_server.admin("CREATE USER 'reader'@'localhost' IDENTIFIED BY 's3cret-pw'")
    mariadb_server.admin(f"GRANT SELECT ON `{db}`.* TO 'reader'@'localhost'")
    url = make_url(mariadb_url).set(username="reader", password="s3cret-pw").render_as_string(hide_password=False)
    with pytest.raises(OutputPermissionError) as info:
        score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=3), "2026-11-29")
    assert "INSERT" in str(info.value) and "s3cret-pw" not in str(info.value)
    mariadb_server.admin("DROP USER 'reader'@'localhost'")


def _trend(url: str) -> list[tuple]:
    """Each trend partition's case count, rows, mean and median (sums rounded: row order may differ)."""
    history, _results = trend_results(url, end=DAY)
    out = []
    for key, p in sorted(history.partitions.items()):
        mean = p.moments.total / p.moments.n if p.moments.n else None
        out.append((key, p.moments.n, p.rows, None if mean is None else round(mean, 9), p.median))
    assert any(row[1] for row in out), out  # the scored day is in the window
    return out


def test_snowflake_readers_keep_the_latest_row_of_a_duplicated_key(snowflake_url):
    """Snowflake's keys are informational: two racing writers may leave a key twice. Simulated by
    a ``ctxprec_scores`` without its primary key and a stale second row per key (older
    ``scored_at``, inverted score): ``check`` and ``trend`` read each key once, its latest row."""
    from sqlalchemy.schema import CreateTable

    from ctxprec_ops.warehouse.schema import output_tables

    engine = get_engine(snowflake_url)
    declared = output_tables().scores
    keyless = sa.Table(declared.name, sa.MetaData(), *[sa.Column(c.name, c.type) for c in declared.columns])
    with engine.begin() as conn:
        conn.execute(CreateTable(keyless))
    _load(snowflake_url)
    score_partition(PipelineConfig(warehouse=snowflake_url, judge=CountingJudge(), chunk_size=3), DAY)
    before = check_partition(snowflake_url, DAY).to_dict()["figures"]
    trend_before = _trend(snowflake_url)
    with engine.begin() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.select(keyless))]
        stale = [dict(r, score=1.0 - r["score"], scored_at=r["scored_at"] - timedelta(days=1)) for r in rows]
        conn.execute(sa.insert(keyless), stale)
        assert conn.execute(sa.select(sa.func.count()).select_from(keyless)).scalar_one() == 2 * len(rows)
    after = check_partition(snowflake_url, DAY).to_dict()["figures"]
    assert after == before
    assert _trend(snowflake_url) == trend_before
    again = CountingJudge()
    score_partition(PipelineConfig(warehouse=snowflake_url, judge=again, chunk_size=3), DAY)
    assert again.calls == 0


def test_duckdb_writes_the_same_rows_without_pyarrow(duckdb_url, tmp_path, monkeypatch):
    """DuckDB's staged write takes pandas object columns when pyarrow is not installed (hidden
    here): the same score and judgment rows as through Arrow."""
    arrow_url = f"duckdb:///{tmp_path / 'arrow.duckdb'}"
    for url in (arrow_url, duckdb_url):
        _load(url)
    score_partition(PipelineConfig(warehouse=arrow_url, judge=CountingJudge(), chunk_size=3), DAY)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # ``import pyarrow`` raises ImportError
    score_partition(PipelineConfig(warehouse=duckdb_url, judge=CountingJudge(), chunk_size=3), DAY)

    def rows(url: str) -> tuple[list, list]:
        with get_engine(url).connect() as conn:
            scores = conn.exec_driver_sql(
                "SELECT log_id, score, success, verdicts::VARCHAR, judge_calls FROM ctxprec_scores ORDER BY log_id"
            ).fetchall()
            cache = conn.exec_driver_sql(
                "SELECT key, relevant, reason, agreement FROM ctxprec_judgments ORDER BY key"
            ).fetchall()
        return scores, cache

    assert rows(duckdb_url) == rows(arrow_url)
    assert rows(duckdb_url)[0] and rows(duckdb_url)[1]
