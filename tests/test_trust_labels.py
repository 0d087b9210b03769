"""The labelling loop and the label-corrected figures end to end, on a real SQLite warehouse scored
through the real pipeline by a judge whose errors are known (tests/helpers/labelled_warehouse.py):
``labels sample`` draws what it says, ``labels import`` validates like ``calibrate`` and is
idempotent, and the corrected mean reaches check (``--json``, ``--use-corrected``), trend, report,
compare and ``calibrate --label-set``."""

from __future__ import annotations

import csv
import json
import random
import re

import pytest
import sqlalchemy as sa

from ctxprec_ops.calibration.correction import MIN_LABELLED_ROWS, difference_estimate
from ctxprec_ops.calibration.label_sheet import RELEVANCE, SheetRow, sheet_html
from ctxprec_ops.calibration.label_table import import_labels, read_label_set
from ctxprec_ops.calibration.labels import LabelFileError, parse_labels, read_labels
from ctxprec_ops.calibration.run import calibrate
from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.monitoring import check_partition, compare, load_trend, render_report
from ctxprec_ops.monitoring.label_sample import sample_labels
from ctxprec_ops.monitoring.trend import format_trend_table
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate
from tests.fixtures.warehouse_data import query
from tests.helpers.labelled_warehouse import DAY, KnownErrorJudge, Truth, build, fill_sheet, score


def _sheet(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _scores(url: str) -> dict[str, float]:
    return {str(k): float(v) for k, v in query(url, "SELECT log_id, score FROM ctxprec_scores")}


@pytest.fixture
def under(tmp_path) -> tuple[str, Truth]:
    """120 rows scored by a judge that misses 40% of the relevant nodes (the raw mean is too low)."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    truth = build(url)
    score(url, KnownErrorJudge(truth, fn=0.4, fp=0.02))
    return url, truth


def _label(url: str, truth: Truth, tmp_path, n: int, *, seed: int = 0, only: int | None = None) -> list[str]:
    """Sample ``n`` rows, label (the first ``only`` of) them from the gold, import; the drawn ids."""
    sheet, done = tmp_path / f"sheet{n}-{seed}.csv", tmp_path / f"done{n}-{seed}.csv"
    sample_labels(url, DAY, n, sheet, seed=seed)
    ids = list(dict.fromkeys(line["log_id"] for line in _sheet(sheet)))
    fill_sheet(str(sheet), str(done), truth, only=set(ids[:only]) if only is not None else None)
    import_labels(url, read_labels(done, allow_empty=True))
    return ids


# -- labels sample --------------------------------------------------------------------------------


def test_sample_draws_a_seeded_uniform_prefix_and_lists_every_node(under, tmp_path):
    url, truth = under
    out = tmp_path / "s.csv"
    result = sample_labels(url, DAY, 25, out, seed=7)
    lines = _sheet(out)
    ids = list(dict.fromkeys(line["log_id"] for line in lines))
    reference = random.Random(7).sample(sorted(truth.gold), len(truth.gold))[:25]  # the documented draw
    assert ids == reference and result.rows == 25 and result.frame == 120
    assert result.export_name == str(out)
    assert [(line["log_id"], int(line["node"])) for line in lines] == [
        (i, k) for i in ids for k in range(1, len(truth.gold[i]) + 1)
    ]
    assert all(line["relevant"] == "" for line in lines)
    first = lines[0]
    assert (
        first["node_text"]
        == f"Passage 1 about {'the refund window' if truth.gold[ids[0]][0] else 'gift wrapping options'} for order {ids[0]}."
    )
    assert first["input"].startswith("How long is the refund window") and first["expected_output"].endswith("30 days.")
    bigger = tmp_path / "b.csv"
    sample_labels(url, DAY, 40, bigger, seed=7)  # a larger draw with the same seed keeps the smaller one
    assert list(dict.fromkeys(line["log_id"] for line in _sheet(bigger)))[:25] == ids
    other = tmp_path / "o.csv"
    sample_labels(url, DAY, 25, other, seed=8)
    assert list(dict.fromkeys(line["log_id"] for line in _sheet(other))) != ids


def test_sample_reads_only(under, tmp_path):
    url, _ = under
    before = (
        sorted(sa.inspect(sa.create_engine(url)).get_table_names()),
        query(url, "SELECT count(*) FROM ctxprec_scores"),
    )
    assert (
        ctxprec(
            ["labels", "sample", "--warehouse", url, "--partition", DAY, "--n", "5", "--out", str(tmp_path / "x.html")]
        )
        == 0
    )
    after = (
        sorted(sa.inspect(sa.create_engine(url)).get_table_names()),
        query(url, "SELECT count(*) FROM ctxprec_scores"),
    )
    assert before == after and "ctxprec_labels" not in after[0]


def test_sample_errors_are_clear(under, tmp_path, capsys):
    url, _ = under
    assert (
        ctxprec(
            [
                "labels",
                "sample",
                "--warehouse",
                url,
                "--partition",
                "2026-11-29",
                "--n",
                "5",
                "--out",
                str(tmp_path / "x.csv"),
            ]
        )
        == 1
    )
    assert "2026-11-29 has no contextual_precision scores" in capsys.readouterr().err
    assert (
        ctxprec(
            ["labels", "sample", "--warehouse", url, "--partition", DAY, "--n", "5", "--out", str(tmp_path / "x.txt")]
        )
        == 2
    )
    assert "--out must end in .csv or .html" in capsys.readouterr().err


# -- labels import --------------------------------------------------------------------------------


def test_import_validates_like_calibrate_and_names_the_line(under, tmp_path, capsys):
    url, truth = under
    bad = tmp_path / "bad.csv"
    bad.write_text("log_id,node,relevant\n1,1,1\n1,x,0\n", encoding="utf-8")
    assert ctxprec(["labels", "import", "--warehouse", url, "--labels", str(bad)]) == 1
    assert "bad.csv line 3: node must be a 1-based rank" in capsys.readouterr().err
    both = tmp_path / "both.csv"
    both.write_text("log_id,node,relevant\n1,1,1\n1,2,0\n1,1,no\n", encoding="utf-8")
    assert ctxprec(["labels", "import", "--warehouse", url, "--labels", str(both)]) == 1
    assert "both.csv line 4: log_id '1' node 1 is labelled both relevant and not relevant" in capsys.readouterr().err
    n = len(truth.gold["1"])
    beyond = tmp_path / "beyond.csv"
    beyond.write_text(f"log_id,node,relevant\n1,1,1\n1,{n + 1},0\n", encoding="utf-8")
    assert ctxprec(["labels", "import", "--warehouse", url, "--labels", str(beyond)]) == 1
    assert (
        f"beyond.csv line 3: log_id '1' has {n} nodes (as scored); node {n + 1} does not exist"
        in capsys.readouterr().err
    )
    # nothing of the refused files was stored
    assert (
        "ctxprec_labels" not in sa.inspect(sa.create_engine(url)).get_table_names()
        or not query(url, "SELECT count(*) FROM ctxprec_labels")[0][0]
    )


def test_import_accepts_empty_cells_reports_partial_rows_and_is_idempotent(under, tmp_path, capsys):
    url, truth = under
    sheet, done = tmp_path / "s.csv", tmp_path / "d.csv"
    sample_labels(url, DAY, 12, sheet, seed=1)
    ids = list(dict.fromkeys(line["log_id"] for line in _sheet(sheet)))
    fill_sheet(str(sheet), str(done), truth, only=set(ids[:10]))
    # one row of the ten loses its last label: partially labelled
    lines = _sheet(done)
    last = max(i for i, line in enumerate(lines) if line["log_id"] == ids[3])
    lines[last]["relevant"] = ""
    with open(done, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(lines[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(lines)
    assert ctxprec(["labels", "import", "--warehouse", url, "--labels", str(done), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    labelled = sum(len(truth.gold[i]) for i in ids[:10]) - 1
    assert report["new"] == labelled and report["changed"] == 0 and report["rows"] == 10
    assert report["blank"] == sum(len(truth.gold[i]) for i in ids) - labelled
    assert report["fully_labelled"] == 9 and list(report["not_fully_labelled"]) == [ids[3]]
    assert report["not_fully_labelled"][ids[3]] == [len(truth.gold[ids[3]])]
    stored = query(url, "SELECT label_set, source_table, count(*), min(labeller) FROM ctxprec_labels GROUP BY 1, 2")
    stamp = query(url, "SELECT max(imported_at) FROM ctxprec_labels")
    assert stored == [("default", "retrieval_logs", labelled, "tester")]
    # the same file again: nothing new, nothing rewritten
    assert ctxprec(["labels", "import", "--warehouse", url, "--labels", str(done)]) == 0
    text = capsys.readouterr().out
    assert f"0 new, 0 changed, {labelled} unchanged" in text and "9 of 10 rows fully labelled" in text
    assert f"{ids[3]} (node {len(truth.gold[ids[3]])} unlabelled)" in text
    assert query(url, "SELECT count(*) FROM ctxprec_labels")[0][0] == labelled
    assert query(url, "SELECT max(imported_at) FROM ctxprec_labels") == stamp
    # a changed answer replaces the stored one (a correction), counted as changed
    flipped = parse_labels(f"log_id,node,relevant\n{ids[0]},1,{int(not truth.gold[ids[0]][0])}\n", "fix.csv")
    again = import_labels(url, flipped)
    assert (again.new, again.changed) == (0, 1)
    # the partial row is left out of the correction, and counted
    est = check_partition(url, DAY).corrected
    assert est is not None and est.partial_rows == 1 and est.labelled_rows == 9


def test_the_sheet_defines_relevance_as_the_prompt_does():
    prompt = ContextualPrecisionTemplate.generate_verdicts("q", "a", ["n"], [1])
    assert RELEVANCE in prompt


def test_the_html_sheet_keeps_hostile_text_as_data():
    evil = '</script><script>alert(1)</script><img src=x onerror=alert(2)> "quoted", =SUM(A1)'
    html = sheet_html([SheetRow("7", evil, "expected & <b>", (evil, "plain"))], partition_key=DAY)
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    data = re.search(r'<script type="application/json" id="sheet-data">(.*?)</script>', html, re.DOTALL)
    assert data is not None
    parsed = json.loads(data.group(1))
    assert parsed["rows"][0]["nodes"] == [evil, "plain"] and parsed["rows"][0]["expected"] == "expected & <b>"
    assert "Content-Security-Policy" in html and "http://" not in html.replace("http://www.w3.org", "")


# -- the corrected figures --------------------------------------------------------------------------


def test_check_carries_the_estimator_computed_on_the_drawn_rows(under, tmp_path, capsys):
    url, truth = under
    ids = _label(url, truth, tmp_path, 30)
    judge = _scores(url)
    gold = [contextual_precision(truth.gold[i]) for i in ids]
    want = difference_estimate(sum(judge.values()) / len(judge), len(judge), gold, [judge[i] for i in ids])
    result = check_partition(url, DAY)
    assert result.corrected == want
    assert truth.mean() - result.figures.summary.mean > 0.05  # the raw mean's error is visible
    assert abs(result.corrected.mean - truth.mean()) < abs(result.figures.summary.mean - truth.mean())
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    c = out["corrected"]
    assert {"mean", "ci_low", "ci_high", "labelled_rows", "method"} <= set(c)
    assert c["labelled_rows"] == 30 and c["method"] == "difference estimator"
    assert c["mean"] == pytest.approx(want.mean) and c["ci_low"] == pytest.approx(want.ci_low)
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY]) == 0
    assert (
        f"labels: corrected mean {want.mean:.3f} [95% CI {want.ci_low:.3f}-{want.ci_high:.3f}]"
        in capsys.readouterr().out
    )


def test_without_labels_corrected_is_null(under, capsys):
    url, _ = under
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["corrected"] is None


def test_use_corrected_changes_the_threshold_outcome(under, tmp_path, capsys):
    """The judge under-calls: its mean is below min_mean, the corrected mean is not."""
    url, truth = under
    _label(url, truth, tmp_path, 40)
    result = check_partition(url, DAY)
    raw, fixed = result.figures.summary.mean, result.corrected.mean
    assert raw < fixed
    limit = f"{(raw + fixed) / 2:.4f}"
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY, "--min-mean", limit, "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert [a["rule"] for a in out["alerts"]] == ["min_mean"] and "mean" in out["alerts"][0]["message"]
    assert (
        ctxprec(["check", "--warehouse", url, "--partition", DAY, "--min-mean", limit, "--use-corrected", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["alerts"] == [] and out["rules"]["use_corrected"] is True
    assert any(
        f"checked against the corrected mean {fixed:.3f}" in n and "alone would have fired" in n for n in out["notes"]
    )
    # above the corrected mean too: --use-corrected fires, and its message says it used the corrected mean
    high = f"{fixed + 0.02:.4f}"
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY, "--min-mean", high, "--use-corrected"]) == 3
    text = capsys.readouterr().out
    assert f"corrected mean {fixed:.3f}" in text and "is below min_mean" in text and "(40 labelled rows of 120" in text


def test_too_few_labels_keep_the_raw_figures_and_say_so(under, tmp_path, capsys):
    url, truth = under
    _label(url, truth, tmp_path, MIN_LABELLED_ROWS - 1)
    result = check_partition(url, DAY, min_mean=0.99, use_corrected=True)
    c = result.corrected
    assert c is not None and c.mean is None and c.labelled_rows == MIN_LABELLED_ROWS - 1
    assert f"the correction needs at least {MIN_LABELLED_ROWS}" in c.note
    assert [a.rule for a in result.alerts] == ["min_mean"] and "corrected" not in result.alerts[0].message
    assert any("min_mean was checked against the judge's mean" in n for n in result.notes)
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY]) == 0
    assert "the correction needs at least 10" in capsys.readouterr().out


def test_trend_and_report_show_the_corrected_mean(under, tmp_path):
    url, truth = under
    _label(url, truth, tmp_path, 20)
    df = load_trend(url)
    row = df[df["partition_key"] == DAY].iloc[0]
    want = check_partition(url, DAY).corrected
    assert row["corrected_mean"] == pytest.approx(want.mean) and row["labelled_rows"] == 20
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(format_trend_table(df))
    text = console.export_text()
    assert f"{want.mean:.3f} ±" in text and "corrected (labels)" in text
    html = render_report(url, tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="trust"' in html and "corrected-series" in html and 'id="latest-corrected"' in html
    assert f"<b>{want.mean:.3f}</b>" in html


def test_calibrate_reads_its_labels_from_a_label_set(under, tmp_path, capsys):
    url, truth = under
    _label(url, truth, tmp_path, 15)
    labels = read_label_set(url)
    assert len(labels.labels) == 15 and labels.name == "ctxprec_labels:default"
    [r] = calibrate(url, labels, [KnownErrorJudge(truth, fn=0.4, fp=0.02)], resamples=50)
    assert r.agreement.cases == 15 and r.agreement.fn > 0
    assert ctxprec(["calibrate", "--warehouse", url, "--label-set", "default", "--judge", "lexical", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibrations"][0]["cases"] == 15
    assert ctxprec(["calibrate", "--warehouse", url, "--label-set", "nobody", "--judge", "lexical"]) == 1
    assert "no labels in label set 'nobody'" in capsys.readouterr().err
    with pytest.raises(LabelFileError):
        read_label_set(url, "nobody")


def test_compare_gives_the_corrected_delta(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cmp.db'}"
    truth = build(url, rows=160, segment=lambda i: "v1" if i % 2 else "v2")
    score(url, KnownErrorJudge(truth, fn=0.35, fp=0.05), segments=["version"])
    ids = _label(url, truth, tmp_path, 70)
    c = compare(url, DAY, by="version", baseline="v1", candidate="v2")
    assert c.corrected is not None
    judge = _scores(url)
    sides = {}
    for side, parity in (("baseline", 1), ("candidate", 0)):
        rows = [i for i in judge if int(i) % 2 == parity]
        drawn = [i for i in ids if int(i) % 2 == parity]
        sides[side] = difference_estimate(
            sum(judge[i] for i in rows) / len(rows), len(rows),
            [contextual_precision(truth.gold[i]) for i in drawn], [judge[i] for i in drawn],
        )  # fmt: skip
        assert c.corrected[side]["mean"] == pytest.approx(sides[side].mean)
        assert c.corrected[side]["labelled_rows"] == len(drawn)
    assert c.corrected["delta"] == pytest.approx(sides["candidate"].mean - sides["baseline"].mean)
    assert c.corrected["ci_low"] < c.corrected["delta"] < c.corrected["ci_high"]
    assert (
        ctxprec(
            [
                "compare",
                "--warehouse",
                url,
                "--partition",
                DAY,
                "--by",
                "version",
                "--baseline",
                "v1",
                "--candidate",
                "v2",
            ]
        )
        == 0
    )
    assert f"corrected with labels: delta {c.corrected['delta']:+.3f}" in capsys.readouterr().out
    html = render_report(
        url, tmp_path / "cmp.html", comparison={"by": "version", "baseline": "v1", "candidate": "v2"}
    ).read_text(encoding="utf-8")
    assert 'id="comparison-corrected"' in html and f"<b>{c.corrected['delta']:+.3f}</b>" in html


def test_labels_and_the_corrected_mean_on_postgresql(pg_url, tmp_path):
    truth = build(pg_url, rows=60)
    score(pg_url, KnownErrorJudge(truth, fn=0.4, fp=0.02))
    ids = _label(pg_url, truth, tmp_path, 20)
    again = import_labels(pg_url, read_labels(tmp_path / "done20-0.csv", allow_empty=True))
    assert again.new == 0 and again.unchanged == sum(len(truth.gold[i]) for i in ids)
    judge = _scores(pg_url)
    want = difference_estimate(
        sum(judge.values()) / len(judge), len(judge),
        [contextual_precision(truth.gold[i]) for i in ids], [judge[i] for i in ids],
    )  # fmt: skip
    got = check_partition(pg_url, DAY).corrected
    assert got.mean == pytest.approx(want.mean) and got.ci_high == pytest.approx(want.ci_high)
    assert got.labelled_rows == 20


def test_check_by_segment_carries_each_segments_corrected_mean(tmp_path, capsys):
    """``check --by``: each segment value's corrected mean is the estimator over its own rows and
    its own labelled rows, and ``use_corrected`` applies per segment."""
    from ctxprec_ops.monitoring import check_segments
    from ctxprec_ops.monitoring.rules import AlertRules

    url = f"sqlite:///{tmp_path / 'seg.db'}"
    truth = build(url, rows=160, segment=lambda i: "v1" if i % 2 else "v2")
    score(url, KnownErrorJudge(truth, fn=0.35, fp=0.05), segments=["version"])
    ids = _label(url, truth, tmp_path, 70)
    judge = _scores(url)
    check = check_segments(url, DAY, "version")
    got = {s.label: s.result.corrected for s in check.segments}
    for value, parity in (("v1", 1), ("v2", 0)):
        rows = [i for i in judge if int(i) % 2 == parity]
        drawn = [i for i in ids if int(i) % 2 == parity]
        want = difference_estimate(
            sum(judge[i] for i in rows) / len(rows), len(rows),
            [contextual_precision(truth.gold[i]) for i in drawn], [judge[i] for i in drawn],
        )  # fmt: skip
        assert got[value].labelled_rows == want.labelled_rows == len(drawn)
        for name in ("mean", "ci_low", "ci_high", "judge_mean"):
            assert getattr(got[value], name) == pytest.approx(getattr(want, name), rel=1e-12), name
    # a threshold between each segment's raw and corrected means: only the raw figures alert
    low = max(s.mean for s in check.segments)
    high = min(got[v].mean for v in got)
    assert low < high
    threshold = (low + high) / 2
    raw = check_segments(url, DAY, "version", rules=AlertRules(min_mean=threshold))
    assert {s.label for s in raw.segments if any(a.rule == "min_mean" for a in s.alerts)} == {"v1", "v2"}
    fixed = check_segments(url, DAY, "version", rules=AlertRules(min_mean=threshold, use_corrected=True))
    assert not any(a.rule == "min_mean" for s in fixed.segments for a in s.alerts)
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY, "--by", "version", "--json"]) in (0, 3)
    data = json.loads(capsys.readouterr().out)
    segs = data["by"]["version"]["segments"]
    assert all(s["corrected"]["labelled_rows"] > 0 for s in segs if s["label"] in ("v1", "v2"))
