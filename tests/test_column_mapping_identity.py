"""Issue 32.3: the column mapping is part of what identifies a score.

One table, two context columns: ``retrieval_context`` and ``alt_context``. Rows 1-2 hold the same
nodes in both (identical judge input), rows 3-4 other nodes, row 5 none in ``alt_context``.
Scoring with ``retrieval_context=alt_context`` after the default mapping re-judges: the judge
(the local OpenAI-protocol server) is asked about the new nodes only, rows 1-2 come from the
judgment cache, row 5 is an ``invalid_input`` failure of the new mapping only; check, trend and
report (API and CLI) show the new mapping's scores; back to the default mapping, the first
scores are found again with no judge call. The migration of the previous version's tables (no
``mapping`` column) is tested on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_partition, load_trend
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.columns import SourceColumns
from ctxprec_ops.pipeline.mapping import DEFAULT_MAPPING, mapping_id
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.schema import output_tables
from ctxprec_ops.warehouse.segments import segments_table
from tests.fixtures.warehouse_data import EXPECTED, QUESTION, query

DAY = "2026-11-28"
ALT = {"retrieval_context": "alt_context"}
SAME = ["a RELEVANT fact", "IRRELEVANT filler", "another RELEVANT fact"]
GOOD = ["fact {i} RELEVANT", "note {i} IRRELEVANT"]  # retrieval_context of rows 3-4: 1.0
BAD = ["other {i} IRRELEVANT", "other fact {i} RELEVANT"]  # alt_context of rows 3-4: 0.5


def _contexts(i: int) -> tuple[list[str] | None, list[str] | None]:
    if i <= 2:
        return SAME, SAME
    if i <= 4:
        return [n.format(i=i) for n in GOOD], [n.format(i=i) for n in BAD]
    return [n.format(i=i) for n in GOOD], None


def _logs(engine: sa.Engine) -> None:
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
        sa.Column("alt_context", sa.Text),
    )
    md.create_all(engine)
    rows = []
    for i in range(1, 6):
        ctx, alt = _contexts(i)
        rows.append(
            {
                "id": i,
                "event_time": datetime(2026, 11, 28, i),
                "input": QUESTION,
                "actual_output": "Paris.",
                "expected_output": EXPECTED,
                "retrieval_context": json.dumps(ctx),
                "alt_context": None if alt is None else json.dumps(alt),
            }
        )
    with engine.begin() as conn:
        conn.execute(sa.insert(t), rows)


def _score(url: str, server, columns=None):
    return score_partition(
        PipelineConfig(
            warehouse=url,
            judge="gpt-4o-mini",
            judge_base_url=server.base_url,
            judge_api_key="test-key",
            columns=columns,
        ),
        DAY,
    )


def _mean(nodes_of) -> float:
    scores = [contextual_precision(["IRRELEVANT" not in n for n in nodes_of(i)]) for i in range(1, 6) if nodes_of(i)]
    return sum(scores) / len(scores)


def _judged_nodes(server, since: int) -> list[str]:
    import re

    out = []
    for r in server.requests[since:]:
        prompt = r["json"]["messages"][-1]["content"]
        out += re.findall(r'<node id="\d+">\n(.*?)\n</node>', prompt if isinstance(prompt, str) else json.dumps(prompt))
    return out


def test_the_fingerprint_is_stable_and_default_for_the_default_mapping():
    assert mapping_id(SourceColumns()) == DEFAULT_MAPPING
    assert mapping_id(SourceColumns(retrieval_context="retrieval_context")) == DEFAULT_MAPPING  # same as default
    alt = mapping_id(SourceColumns.from_mapping(ALT))
    assert len(alt) == 16 and int(alt, 16) >= 0 and alt == mapping_id(SourceColumns(retrieval_context="alt_context"))
    assert alt != mapping_id(SourceColumns(input="alt_context"))  # which logical column counts
    # fixed canonical form: sha256('{"columns":{"retrieval_context":"alt_context"}}')[:16], in every process
    assert alt == "69e59cc88fd1cfca"


def test_a_changed_mapping_rejudges_and_readers_show_its_scores(judge_server, tmp_path, capsys, monkeypatch):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    _logs(engine)
    alt_id = mapping_id(SourceColumns.from_mapping(ALT))
    mean_a = _mean(lambda i: _contexts(i)[0])
    mean_b = _mean(lambda i: _contexts(i)[1])
    assert mean_a != mean_b

    first = _score(url, judge_server)
    assert (first.status, first.rows_scored, first.mean_score, first.mapping) == ("succeeded", 5, mean_a, "default")
    before = {r[0]: r[1:] for r in query(url, "SELECT log_id, score, run_id, scored_at FROM ctxprec_scores")}
    calls = judge_server.calls

    # the mapping changes: every row is scored again under the new mapping
    second = _score(url, judge_server, ALT)
    assert second.mapping == alt_id
    assert (second.rows_scored, second.rows_failed, second.failures_by_type) == (4, 1, {"invalid_input": 1})
    assert second.rows_cached == 2  # rows 1-2: the same nodes, answered by the judgment cache
    assert second.mean_score == pytest.approx(mean_b, abs=0)
    # the judge saw exactly the nodes it had not judged before: those of alt_context, rows 3-4
    new_nodes = sorted(n for i in (3, 4) for n in _contexts(i)[1])
    assert judge_server.calls - calls == 2 and sorted(_judged_nodes(judge_server, calls)) == new_nodes
    rows = query(url, "SELECT mapping, log_id, score FROM ctxprec_scores ORDER BY mapping, log_id")
    by_mapping: dict[str, dict[str, float]] = {}
    for m, log_id, score in rows:
        by_mapping.setdefault(m, {})[log_id] = score
    assert set(by_mapping) == {"default", alt_id}
    assert by_mapping["default"] == {k: v[0] for k, v in before.items()}  # the first scores are kept as they were
    assert set(by_mapping[alt_id]) == {"1", "2", "3", "4"}
    assert [by_mapping[alt_id][k] != by_mapping["default"][k] for k in "1234"] == [False, False, True, True]
    # row 5 failed under the new mapping only; its score under the default mapping stays
    assert query(url, "SELECT log_id, mapping, error_type FROM ctxprec_failures") == [("5", alt_id, "invalid_input")]
    assert sorted(query(url, "SELECT mapping, rows_scored FROM ctxprec_runs")) == sorted([("default", 5), (alt_id, 4)])

    # readers: the new mapping's scores, never the old ones
    assert check_partition(url, DAY).population.mapping == alt_id  # default: the most recent scores
    for mapping, mean, n in ((alt_id, mean_b, 4), (DEFAULT_MAPPING, mean_a, 5)):
        result = check_partition(url, DAY, mapping=mapping)
        figures = result.figures
        assert (figures.summary.mean, figures.summary.n, result.population.mapping) == (mean, n, mapping)
        assert figures.rows == 5  # the partition's rows: scored or failed
        df = load_trend(url, days=1, mapping=mapping)
        assert list(df["mean"]) == [mean] and df.attrs["mapping"] == mapping
    capsys.readouterr()
    assert (
        main(["check", "--warehouse", url, "--partition", DAY, "--json", "--column", "retrieval_context=alt_context"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["figures"]["mean"], out["mapping"]) == (mean_b, alt_id)
    main(["check", "--warehouse", url, "--partition", DAY, "--json"])  # the configured mapping: the default
    assert json.loads(capsys.readouterr().out)["figures"]["mean"] == mean_a
    monkeypatch.setenv("CTXPREC_SOURCE_COLUMNS", json.dumps(ALT))  # configured in the environment instead
    main(["check", "--warehouse", url, "--partition", DAY])
    text = capsys.readouterr().out
    assert f"column mapping {alt_id}" in text
    main(["trend", "--warehouse", url, "--days", "1"])
    assert f"{mean_b:.3f}" in capsys.readouterr().out
    report = tmp_path / "r.html"
    assert main(["report", "--warehouse", url, "--out", str(report)]) == 0
    html = report.read_text()
    assert "other 3 IRRELEVANT" in html and "note 3 IRRELEVANT" not in html  # the new column's texts
    monkeypatch.delenv("CTXPREC_SOURCE_COLUMNS")

    # back to the first mapping: its scores are found again, nothing is judged or rewritten
    calls = judge_server.calls
    third = _score(url, judge_server)
    assert (third.rows_scored, third.rows_cached, third.judge_calls, third.mean_score) == (5, 5, 0, mean_a)
    assert judge_server.calls == calls
    again = {
        r[0]: r[1:]
        for r in query(url, "SELECT log_id, score, run_id, scored_at FROM ctxprec_scores WHERE mapping = 'default'")
    }
    assert again == before


# -- the previous version's tables ---------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'wh.db'}"
    return request.getfixturevalue("pg_url")


def _previous_version(engine: sa.Engine, version: str) -> None:
    """The output tables (and ctxprec_segments with a tenant column) as the version before
    ``mapping`` declared them: today's declaration without that column, with one row each."""
    md = sa.MetaData()
    current = output_tables()
    for t in (current.scores, current.failures, current.runs, segments_table(None, ["tenant"])):
        cols = [c._copy() for c in t.columns if c.name != "mapping"]
        keys = [c.name for c in t.primary_key.columns if c.name != "mapping"]
        old = sa.Table(t.name, md, *cols, sa.PrimaryKeyConstraint(*keys, name=t.primary_key.name))
        for ix in t.indexes:
            sa.Index(ix.name, *(old.c[c.name] for c in ix.columns))
    md.create_all(engine)
    now = datetime(2026, 11, 29, 1)
    key = {"metric": "contextual_precision", "judge_model": "gpt-4o-mini", "prompt_version": version}
    key["source_table"] = "retrieval_logs"
    with engine.begin() as conn:
        conn.execute(
            md.tables["ctxprec_scores"].insert(),
            [{**key, "log_id": "1", "partition_key": DAY, "score": 0.25, "success": False, "threshold": 0.5,
              "reason": "old", "run_id": "old-run", "scored_at": now}],
        )  # fmt: skip
        conn.execute(
            md.tables["ctxprec_failures"].insert(),
            [{**key, "log_id": "2", "partition_key": DAY, "error_type": "judge_unavailable",
              "error_message": "old failure", "attempts": 6, "run_id": "old-run", "failed_at": now}],
        )  # fmt: skip
        conn.execute(
            md.tables["ctxprec_runs"].insert(),
            [{"run_id": "old-run", "partition_key": DAY, "metric": key["metric"], "source_table": "retrieval_logs",
              "status": "partial", "rows_total": 2, "rows_scored": 1, "rows_cached": 0, "rows_failed": 1}],
        )  # fmt: skip
        conn.execute(
            md.tables["ctxprec_segments"].insert(),
            [{**key, "log_id": "1", "partition_key": DAY, "score": 0.25, "success": False,
              "segment_columns": '["tenant"]', "seg_tenant": "acme"}],
        )  # fmt: skip


def test_tables_of_the_previous_version_get_the_mapping_key_in_place(judge_server, warehouse_url):
    """Old rows count as the mapping the migrating run is configured with (here: the default):
    the old score and its segment row are kept (not re-judged), the old failure is retried, the
    keys now include ``mapping``; a run with another mapping then scores every row anew."""
    from ctxprec_ops.judge.models import make_judge
    from ctxprec_ops.metrics.contextual_precision import ContextualPrecisionMetric

    engine = get_engine(warehouse_url)
    judge = make_judge("gpt-4o-mini", base_url=judge_server.base_url, api_key="test-key")
    _previous_version(engine, ContextualPrecisionMetric(model=judge).prompt_version)
    _logs(engine)
    with engine.begin() as conn:  # a tenant column to segment by
        conn.exec_driver_sql("ALTER TABLE retrieval_logs ADD COLUMN tenant TEXT")
        conn.exec_driver_sql("UPDATE retrieval_logs SET tenant = 'acme'")

    def config(columns=None):
        return PipelineConfig(
            warehouse=warehouse_url, judge="gpt-4o-mini", judge_base_url=judge_server.base_url,
            judge_api_key="test-key", columns=columns, segments=["tenant"],
        )  # fmt: skip

    summary = score_partition(config(), DAY)
    assert (summary.rows_scored, summary.rows_cached, summary.rows_failed) == (5, 1, 0)
    scores = {r[0]: r[1:] for r in query(warehouse_url, "SELECT log_id, mapping, score, reason FROM ctxprec_scores")}
    assert scores["1"] == ("default", 0.25, "old")  # kept, as the default mapping's
    assert {v[0] for v in scores.values()} == {"default"}
    assert query(warehouse_url, "SELECT count(*) FROM ctxprec_failures") == [(0,)]  # retried, now scored
    assert dict(query(warehouse_url, "SELECT run_id, mapping FROM ctxprec_runs")) == {
        "old-run": "default",
        summary.run_id: "default",
    }
    assert query(warehouse_url, "SELECT mapping, seg_tenant FROM ctxprec_segments WHERE log_id = '1'") == [
        ("default", "acme")
    ]
    insp = sa.inspect(engine)
    for table, first in (
        ("ctxprec_scores", "log_id"),
        ("ctxprec_failures", "log_id"),
        ("ctxprec_runs", "run_id"),
        ("ctxprec_segments", "metric"),
    ):
        key = insp.get_pk_constraint(table)["constrained_columns"]
        assert key[0] == first and "mapping" in key and "source_table" in key, (table, key)
        assert {c["name"]: c["nullable"] for c in insp.get_columns(table)}["mapping"] is False
    assert "ix_ctxprec_scores_partition" in {i["name"] for i in insp.get_indexes("ctxprec_scores")}

    # another mapping of the same table: its own scores (row 5 has no alt_context)
    other = score_partition(config(ALT), DAY)
    assert (other.rows_scored, other.rows_failed, other.judge_calls) == (4, 1, 2)
    assert query(warehouse_url, "SELECT count(*) FROM ctxprec_segments") == [(9,)]


def test_old_rows_count_as_the_mapping_the_migrating_run_is_configured_with(judge_server, tmp_path):
    """The documented assumption: the version before recorded no mapping, so the configuration in
    force when the tables are upgraded says what wrote them (here the run maps alt_context)."""
    from ctxprec_ops.judge.models import make_judge
    from ctxprec_ops.metrics.contextual_precision import ContextualPrecisionMetric

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    judge = make_judge("gpt-4o-mini", base_url=judge_server.base_url, api_key="test-key")
    _previous_version(engine, ContextualPrecisionMetric(model=judge).prompt_version)
    _logs(engine)
    alt_id = mapping_id(SourceColumns.from_mapping(ALT))
    summary = _score(url, judge_server, ALT)
    assert (summary.rows_scored, summary.rows_cached, summary.rows_failed) == (4, 1, 1)
    assert query(url, "SELECT mapping, score, reason FROM ctxprec_scores WHERE log_id = '1'") == [(alt_id, 0.25, "old")]
    assert query(url, "SELECT mapping FROM ctxprec_runs WHERE run_id = 'old-run'") == [(alt_id,)]
    assert query(url, "SELECT mapping FROM ctxprec_segments") == [(alt_id,)]  # migrated by a run without segments too
