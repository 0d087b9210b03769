"""``compare`` over a range of days, scored through the real pipeline: the row counts of a paired
comparison are the rows really compared (a repeat, several days), and the population (judge,
prompt, input table, column mapping) is chosen over the whole range — a range scored by two
judges is refused, naming both, never compared on one day's rows while listing both days."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import compare
from ctxprec_ops.monitoring import compare as compare_module
from ctxprec_ops.pipeline import PipelineConfig, score_partition

D1, D2 = "2026-11-27", "2026-11-28"
EXPECTED = "Refunds are paid back within five business days to the original card."
GOOD = [EXPECTED + " RELEVANT", "Shipping rates vary by region. IRRELEVANT", "Refunds take five days. RELEVANT"]
WORSE = ["Gift wrapping costs extra. IRRELEVANT", EXPECTED + " RELEVANT", "Refunds take five days. RELEVANT"]
SEGMENTS = ["retriever_version", "query_id"]


def _source(engine: sa.Engine, rows: list[dict]) -> None:
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
        sa.Column("retriever_version", sa.Text),
        sa.Column("query_id", sa.Text),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), rows)


def _rows(days: tuple[str, ...], queries: int, *, repeat: bool) -> list[dict]:
    """Per day, each query answered by v1 and v2 (v2 ranks worse); with ``repeat`` v1 answers
    query q000 a second time on the last day."""
    out: list[dict] = []

    def add(day: str, version: str, q: int) -> None:
        i = len(out)
        out.append(
            {
                "id": i + 1,
                "event_time": dt.datetime.fromisoformat(f"{day}T{8 + i % 12:02d}:{i % 60:02d}:00"),
                "input": f"How long do refunds take for order {q}? ({version}, {day}, {i})",
                "expected_output": EXPECTED,
                "retrieval_context": json.dumps(GOOD if version == "v1" else WORSE),
                "retriever_version": version,
                "query_id": f"q{q:03d}",
            }
        )

    for day in days:
        for q in range(queries):
            add(day, "v1", q)
            add(day, "v2", q)
    if repeat:
        add(days[-1], "v1", 0)
    return out


def _count(url: str, sql: str) -> int:
    eng = sa.create_engine(url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(sa.text(sql)).scalar_one())
    finally:
        eng.dispose()


def test_paired_row_counts_are_the_rows_compared_over_two_days_with_a_repeat(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _source(sa.create_engine(url), _rows((D1, D2), 5, repeat=True))
    for day in (D1, D2):
        score_partition(PipelineConfig(warehouse=url, judge="lexical", segments=SEGMENTS), day)
    real = {
        v: _count(url, f"select count(*) from ctxprec_segments where seg_retriever_version = '{v}'")
        for v in ("v1", "v2")
    }
    assert real == {"v1": 11, "v2": 10}  # 5 queries x 2 days, plus one repeat of v1

    c = compare(url, D1, until=D2, by="retriever_version", baseline="v1", candidate="v2", pair_on="query_id")
    figures = c.to_dict()
    assert figures["pairs"] == 5  # one per query id over the range
    assert (figures["baseline_rows"], figures["candidate_rows"]) == (real["v1"], real["v2"])
    assert (figures["unpaired_baseline"], figures["unpaired_candidate"]) == (0, 0)

    # an unpaired row counts once on its side, next to the paired rows
    extra = _rows((D2,), 1, repeat=False)[:1]
    extra[0].update(id=1000, query_id="q999")
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        conn.execute(sa.table("retrieval_logs", *(sa.column(k) for k in extra[0])).insert(), extra)
    eng.dispose()
    score_partition(PipelineConfig(warehouse=url, judge="lexical", segments=SEGMENTS), D2)
    again = compare(url, D1, until=D2, by="retriever_version", baseline="v1", candidate="v2", pair_on="query_id")
    f2 = again.to_dict()
    assert (f2["pairs"], f2["baseline_rows"], f2["candidate_rows"], f2["unpaired_baseline"]) == (5, 12, 10, 1)
    # unpaired (Welch): the rows themselves
    w = compare(url, D1, until=D2, by="retriever_version", baseline="v1", candidate="v2").to_dict()
    assert (w["baseline_rows"], w["candidate_rows"]) == (12, 10)


@pytest.fixture
def two_judges(tmp_path, judge_server):
    """Day 1 scored by the offline judge, day 2 by the LLM judge (the local server): 40 + 40 rows."""
    url = f"sqlite:///{tmp_path / 'judges.db'}"
    _source(sa.create_engine(url), _rows((D1, D2), 20, repeat=False))
    score_partition(PipelineConfig(warehouse=url, judge="lexical", segments=SEGMENTS), D1)
    llm = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        segments=SEGMENTS,
    )
    score_partition(llm, D2)
    assert _count(url, "select count(*) from ctxprec_segments") == 80
    return url


def test_a_range_scored_by_two_judges_is_refused_naming_both(two_judges):
    url = two_judges
    with pytest.raises(getattr(compare_module, "MixedPopulationsError", ValueError)) as err:
        compare(url, D1, until=D2, by="retriever_version", baseline="v1", candidate="v2", pair_on="query_id")
    message = str(err.value)
    assert "\n" not in message
    assert "lexical" in message and "judge-test-model" in message
    assert f"40 rows on {D1}" in message and f"40 rows on {D2}" in message
    assert "--judge-model" in message

    # one judge named: its rows over the whole range, and the other judge's rows said to be left out
    c = compare(
        url, D1, until=D2, by="retriever_version", baseline="v1", candidate="v2", pair_on="query_id",
        judge_model="lexical",
    )  # fmt: skip
    d = c.to_dict()
    assert d["judge_model"] == "lexical" and d["pairs"] == 20
    assert (d["baseline_rows"], d["candidate_rows"]) == (20, 20)
    (other,) = d["other_populations"]
    assert other["judge_model"] == "judge-test-model" and other["rows"] == 40 and other["partitions"] == [D2, D2]
    assert "40 rows of other populations in the range are not compared" in c.summary()

    # a range with one population (each day alone) compares as before
    one = compare(url, D2, by="retriever_version", baseline="v1", candidate="v2", pair_on="query_id")
    assert one.population is not None and one.population.judge_model == "judge-test-model"
    assert one.to_dict()["pairs"] == 20 and one.to_dict()["other_populations"] == []


def test_cli_refuses_a_mixed_range_in_one_line_exit_2(two_judges, capsys):
    args = ["compare", "--warehouse", two_judges, "--partition", D1, "--until", D2, "--by", "retriever_version",
            "--baseline", "v1", "--candidate", "v2", "--pair-on", "query_id"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 populations" in err[0] and "lexical" in err[0] and "judge-test-model" in err[0]
    assert main([*args, "--judge-model", "judge-test-model", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["judge_model"] == "judge-test-model" and data["pairs"] == 20
    assert data["other_populations"][0]["rows"] == 40
