"""Segments end to end: ``score --segment`` writes the values, ``check --by`` / ``trend --by``
alert per segment (Holm-corrected, too few rows listed), ``compare`` finds the known answer.

The warehouse (tests/segment_data.py) is scored through the real pipeline: 60 queries x 3
tenants x 2 retriever versions per day for 9 days, v2 worse for tenant globex on one day only.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa
from scipy import stats as sps

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_partition, check_segments, compare, segment_trend
from ctxprec_ops.monitoring.segment_data import SegmentError
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.source import SourceTableError
from tests.segment_data import BAD_DAY, DAYS, ODD_TENANT, SEGMENTS, build, write_source

VERSION = "retriever_version"


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    return build(f"sqlite:///{tmp_path_factory.mktemp('segments') / 'wh.db'}")


def _rows(url: str, sql: str) -> list[tuple]:
    eng = sa.create_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        eng.dispose()


# -- storage ------------------------------------------------------------------------------------


def test_every_score_row_carries_its_segment_values_as_text_null_kept(url):
    n_scores = _rows(url, "select count(*) from ctxprec_scores")[0][0]
    assert _rows(url, "select count(*) from ctxprec_segments")[0][0] == n_scores
    recorded = _rows(url, "select distinct segment_columns from ctxprec_segments")
    assert recorded == [(json.dumps(sorted(SEGMENTS), separators=(",", ":")),)]
    tenants = dict(_rows(url, f"select seg_tenant, count(*) from ctxprec_segments where partition_key='{BAD_DAY}' "
                              "group by seg_tenant"))  # fmt: skip
    assert tenants[None] == 50 and tenants[ODD_TENANT] == 50 and tenants["solo"] == 1
    # the copied score is the score row's
    diff = _rows(
        url,
        "select count(*) from ctxprec_segments g join ctxprec_scores s on s.log_id = g.log_id "
        "and s.metric = g.metric and s.judge_model = g.judge_model and s.prompt_version = g.prompt_version "
        "and s.source_table = g.source_table where s.score <> g.score or s.partition_key <> g.partition_key",
    )
    assert diff == [(0,)]


def test_a_missing_segment_column_fails_before_any_judge_call(tmp_path, openai_env):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    write_source(sa.create_engine(url))
    config = PipelineConfig(warehouse=url, judge="gpt-4o-mini", segments=["tenant", "region"])
    with pytest.raises(SourceTableError, match="segment column 'region' is not a column of retrieval_logs"):
        score_partition(config, BAD_DAY)
    assert openai_env.calls == 0
    assert "ctxprec_segments" not in sa.inspect(sa.create_engine(url)).get_table_names()


def test_changing_the_segment_columns_rescores_and_records_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    write_source(sa.create_engine(url))
    first = score_partition(PipelineConfig(warehouse=url, segments=["tenant"]), BAD_DAY)
    again = score_partition(PipelineConfig(warehouse=url, segments=["tenant"]), BAD_DAY)
    assert again.rows_cached == again.rows_scored == first.rows_scored  # nothing to do
    wider = score_partition(PipelineConfig(warehouse=url, segments=["tenant", "query_id"]), BAD_DAY)
    assert wider.rows_scored == first.rows_scored and wider.rows_cached == 0  # scored again
    got = _rows(url, "select count(*), count(distinct segment_columns), count(seg_query_id) from ctxprec_segments")
    assert got == [(first.rows_scored, 1, first.rows_scored)]
    assert _rows(url, "select count(*) from ctxprec_scores") == [(first.rows_scored,)]  # upserted, not doubled


@pytest.mark.parametrize(
    "value, message",
    [
        ('["tenant", "tenant"]', "given twice"),
        ('["bad name"]', "not a valid identifier"),
        ('{"tenant": 1}', "JSON list"),
    ],
)
def test_bad_segment_settings_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig(segments=value)


# -- check --by / trend --by ------------------------------------------------------------------------


def test_check_by_tenant_alerts_for_that_tenant_only(url):
    c = check_segments(url, BAD_DAY, "tenant")
    assert [s.label for s in c.alerting] == ["globex"]
    g = c.alerting[0]
    assert g.delta < -0.1 and g.p_adjusted < 0.01 and g.rows == 120
    msg = g.alerts[0].message
    assert msg.startswith("tenant=globex (120 rows): ") and f"{g.mean:.3f}" in msg and f"{g.baseline_mean:.3f}" in msg
    assert "Holm-adjusted p=" in msg
    assert [s.label for s in c.too_few] == ["solo"] and "tenant=solo (1 rows)" in c.too_few_line()
    assert {s.label for s in c.segments} == {"acme", "globex", "initech", "(null)", ODD_TENANT, "solo"}
    # the partition as a whole does not fire: the drop is diluted below min_drop
    assert not check_partition(url, BAD_DAY).alerts_of("regression")
    # no segment alerts on the days before
    for day in DAYS[1:-2]:
        assert not check_segments(url, day, "tenant").fired, day


def test_holm_correction_uses_every_tested_segment(url):
    c = check_segments(url, BAD_DAY, "tenant")
    tested = [s for s in c.segments if s.p_adjusted is not None]
    assert len(tested) == 5
    ps = sorted(s.p_value for s in tested)
    assert min(s.p_adjusted for s in tested) == pytest.approx(5 * ps[0])


def test_trend_by_tenant_marks_the_bad_day(url):
    checks = segment_trend(url, "tenant", days=9)
    assert [c.partition_key for c in checks] == DAYS
    alerting = {(c.partition_key, s.label) for c in checks for s in c.alerting}
    assert alerting == {(BAD_DAY, "globex")}


def test_cli_check_by_exits_3_naming_the_segment(url, capsys):
    code = main(["check", "--warehouse", url, "--partition", BAD_DAY, "--by", "tenant"])
    out = capsys.readouterr().out
    assert code == 3
    assert "tenant=globex (120 rows)" in out and "too few rows" in out and "solo" in out
    assert "tenant=acme" not in out.split("ALERT")[-1]
    assert main(["check", "--warehouse", url, "--partition", DAYS[-2], "--by", "tenant"]) == 0
    capsys.readouterr()
    code = main(["check", "--warehouse", url, "--partition", BAD_DAY, "--by", "tenant", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 3 and data["fired"] is True
    segs = {s["label"]: s for s in data["by"]["tenant"]["segments"]}
    assert segs["globex"]["status"] == "alert" and segs["solo"]["status"] == "too few rows"
    assert segs["(null)"]["value"] is None and segs[ODD_TENANT]["status"] == "ok"


def test_cli_by_a_column_never_recorded_is_a_clear_error(url, capsys):
    assert main(["check", "--warehouse", url, "--partition", BAD_DAY, "--by", "region"]) == 1
    err = capsys.readouterr().err
    assert "no score rows carry segment column 'region'" in err and "--segment region" in err


def test_cli_trend_by(url, capsys):
    assert main(["trend", "--warehouse", url, "--days", "9", "--end", DAYS[-1], "--by", "tenant"]) == 0
    out = capsys.readouterr().out
    assert "by tenant" in out and BAD_DAY in out and "globex" in out


# -- compare ---------------------------------------------------------------------------------------


def test_compare_finds_the_known_answer(url):
    c = compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")
    assert c.paired and c.method == "paired t-test"
    o = c.overall
    assert o.test.delta < 0 and o.test.ci_high < 0 and c.significant and c.worse
    by = {s.label: s for s in c.segments}
    assert [s.label for s in c.segments if s.significant] == ["globex"]
    g = by["globex"]
    assert g.pairs == 60 and g.test.ci_high < 0 and g.test.delta == pytest.approx(-0.389, abs=0.01)
    assert c.segments[0].label == "globex"  # sorted by delta, worst first
    assert by["acme"].unpaired_baseline == 2 and by["acme"].pairs == 60
    assert by["solo"].pairs == 0 and by["solo"].unpaired_baseline == 1 and by["solo"].test.p_value is None
    assert by["(null)"].pairs == 25 and by[ODD_TENANT].pairs == 25
    assert o.pairs == 60 * 3 + 25 * 2 and o.unpaired_baseline == 3


def test_compare_on_a_normal_day_finds_nothing(url):
    c = compare(url, DAYS[2], by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")
    assert not c.worse and not any(s.significant for s in c.segments)
    assert c.overall.test.ci_low < 0 < c.overall.test.ci_high


def test_compare_matches_scipy_paired_and_welch(url):
    rows = _rows(
        url,
        f"select seg_query_id, seg_retriever_version, score from ctxprec_segments where partition_key='{BAD_DAY}' "
        "and seg_tenant='globex'",
    )
    v1 = {q: s for q, v, s in rows if v == "v1"}
    v2 = {q: s for q, v, s in rows if v == "v2"}
    qs = sorted(v1.keys() & v2.keys())
    ref = sps.ttest_rel([v2[q] for q in qs], [v1[q] for q in qs])
    c = compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")
    g = next(s for s in c.segments if s.label == "globex")
    assert g.test.p_value == pytest.approx(float(ref.pvalue), rel=1e-6)
    lo, hi = ref.confidence_interval(0.95)
    assert (g.test.ci_low, g.test.ci_high) == pytest.approx((float(lo), float(hi)), rel=1e-6)
    w = compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v2", within="tenant")
    gw = next(s for s in w.segments if s.label == "globex")
    a = [s for q, v, s in rows if v == "v1"]
    b = [s for q, v, s in rows if v == "v2"]
    ref = sps.ttest_ind(b, a, equal_var=False)
    assert not w.paired and gw.test.p_value == pytest.approx(float(ref.pvalue), rel=1e-6)
    assert gw.test.delta == pytest.approx(np.mean(b) - np.mean(a))


def test_compare_over_a_range_and_the_null_segment_as_a_side(url):
    c = compare(url, DAYS[0], until=DAYS[-1], by=VERSION, baseline="v1", candidate="v2")
    assert c.partitions == DAYS and c.overall.baseline.n > 9 * 200
    n = compare(url, BAD_DAY, by="tenant", baseline=None, candidate=ODD_TENANT)
    assert n.overall.baseline.n == 50 and n.overall.candidate.n == 50


def test_compare_errors_are_clear(url):
    with pytest.raises(SegmentError, match="no rows with retriever_version = 'v9'.*v1 .* rows"):
        compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v9")
    with pytest.raises(SegmentError, match="'region'"):
        compare(url, BAD_DAY, by="region", baseline="a", candidate="b")
    with pytest.raises(ValueError, match="same value"):
        compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v1")


def test_cli_compare_json_keys_and_fail_if_worse(url, capsys):
    args = ["compare", "--warehouse", url, "--partition", BAD_DAY, "--by", VERSION, "--baseline", "v1",
            "--candidate", "v2", "--pair-on", "query_id", "--within", "tenant"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for k in ("pairs", "baseline_mean", "candidate_mean", "delta", "ci_low", "ci_high", "p_value", "segments"):
        assert k in data, k
    for s in data["segments"]:
        assert {"value", "pairs", "delta", "ci_low", "ci_high", "p_value", "significant"} <= set(s)
    assert data["delta"] == pytest.approx(data["candidate_mean"] - data["baseline_mean"])
    assert [s["value"] for s in data["segments"] if s["significant"]] == ["globex"]
    assert main([*args, "--fail-if-worse"]) == 3
    out = capsys.readouterr().out
    assert "globex" in out and "worse" in out and "paired t-test" in out
    ok = ["compare", "--warehouse", url, "--partition", DAYS[2], "--by", VERSION, "--baseline", "v1",
          "--candidate", "v2", "--pair-on", "query_id", "--fail-if-worse"]  # fmt: skip
    assert main(ok) == 0
    capsys.readouterr()
    assert main([*args[:-2], "--within", VERSION]) == 2  # the same column twice: bad arguments


def test_compare_on_postgresql(pg_url):
    url = build(pg_url, days=[BAD_DAY])
    c = compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")
    assert [s.label for s in c.segments if s.significant] == ["globex"]
    assert next(s for s in c.segments if s.label == "acme").unpaired_baseline == 2
    check = check_segments(url, BAD_DAY, "tenant")
    assert {s.label for s in check.segments} >= {"globex", "(null)", ODD_TENANT}


def test_the_worked_example_in_docs_segments_is_real_output(url):
    """docs/segments.md shows this warehouse's ``compare --json``: its figures are today's."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "segments.md").read_text(encoding="utf-8")
    block = doc[doc.index("```json\n") + len("```json\n") :]
    shown = json.loads(block[: block.index("```")].replace('"…"', "null"))
    c = compare(url, BAD_DAY, by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")
    real = c.to_dict()
    for k, v in shown.items():
        if k == "segments":
            assert v[:2] == real["segments"][:2]
        elif k != "prompt_version":  # the prompt's hash changes with the template, not the figures
            assert real[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert "tenant=globex (120 rows)" in doc and "too few rows (< 20, not alerted on): tenant=solo (1 rows)" in doc
