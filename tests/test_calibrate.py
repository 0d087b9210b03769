"""``ctxprec calibrate``: agreement figures against a small case computed by hand, the stored
``ctxprec_calibrations`` row, ``--compare``, label-file errors, and the demo's label set."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from ctxprec_ops.calibration import parse_labels, read_labels
from ctxprec_ops.calibration.labels import LabelFileError
from ctxprec_ops.calibration.run import calibrate, compare
from ctxprec_ops.calibration.stats import spearman
from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.judge.models.base import JudgeModel
from tests.fixtures.warehouse_data import query

_NODE = re.compile(r'<node id="(\d+)">')

#: question -> the judge's verdicts by rank; the labels below differ from them on purpose
ANSWERS = {"alpha question": [1, 1, 0], "beta question": [0, 1], "gamma question": [1, 0, 1, 1]}
LABELS_CSV = """log_id,node,relevant,note
1,1,1,
1,2,0,
1,3,yes,
2,1,false,
2,2,1,
3,1,1,only two of four nodes labelled
3,2,0,
"""


class ScriptedJudge(JudgeModel):
    """Answers each question with its scripted verdicts (by the node ids in the prompt)."""

    def __init__(self, name: str = "scripted", flip: str | None = None) -> None:
        self.name, self.flip = name, flip

    def get_model_name(self) -> str:
        return self.name

    def generate(self, prompt: str, schema=None):
        q = next(k for k in ANSWERS if k in prompt)
        verdicts = list(ANSWERS[q])
        if self.flip == q:
            verdicts = [1 - v for v in verdicts]
        ids = [int(k) for k in _NODE.findall(prompt)]
        return json.dumps({"verdicts": [{"node": k, "relevant": bool(verdicts[k - 1]), "reason": "r"} for k in ids]})

    async def a_generate(self, prompt: str, schema=None):
        return self.generate(prompt, schema)


def _warehouse(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT, input TEXT, "
            "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        for i, (q, verdicts) in enumerate(ANSWERS.items(), start=1):
            nodes = [f"{q} node {k}" for k in range(1, len(verdicts) + 1)]
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (?, '2026-11-28 10:00:00', ?, NULL, 'the answer', ?)",
                (i, q, json.dumps(nodes)),
            )
    engine.dispose()


def test_figures_match_the_hand_computation(tmp_path) -> None:
    """Nodes: case 1 labels 1 0 1 vs verdicts 1 1 0 -> TP FP FN; case 2 labels 0 1 vs 0 1 -> TN TP;
    case 3 labels 1 0 (of 4 nodes) vs 1 0 -> TP TN.  TP=3 FP=1 FN=1 TN=2, n=7:
    precision = recall = F1 = 3/4; kappa = (5/7 - 25/49) / (1 - 25/49) = 10/24.
    Scores of the complete cases 1 and 2: label 5/6 vs judge 1, label 1/2 vs judge 1/2:
    MAE = (1/6 + 0) / 2 = 1/12; Spearman rho = 1 (same order)."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url)
    labels = parse_labels(LABELS_CSV, "hand.csv")
    [r] = calibrate(url, labels, [ScriptedJudge()], resamples=200)
    a = r.agreement
    assert (a.cases, a.nodes, a.scored_cases, a.tp, a.fp, a.fn, a.tn) == (3, 7, 2, 3, 1, 1, 2)
    assert a.precision.value == pytest.approx(0.75) and a.recall.value == pytest.approx(0.75)
    assert a.f1.value == pytest.approx(0.75)
    assert a.kappa.value == pytest.approx(10 / 24)
    assert a.mae.value == pytest.approx(1 / 12)
    assert a.spearman.value == pytest.approx(1.0)
    for e in (a.precision, a.recall, a.f1, a.kappa, a.mae):
        assert e.low is not None and e.high is not None and e.low <= e.value + 1e-12 and e.value <= e.high + 1e-12
    assert r.judge_calls == 3 and not r.failed_cases
    row = query(
        url,
        "SELECT judge_model, label_set, cases, nodes, tp, fp, fn, tn, kappa, mae, kappa_low, kappa_high "
        "FROM ctxprec_calibrations",
    )
    assert len(row) == 1 and row[0][:8] == ("scripted", labels.digest, 3, 7, 3, 1, 1, 2)
    assert row[0][8] == pytest.approx(10 / 24) and row[0][9] == pytest.approx(1 / 12)
    calibrate(url, labels, [ScriptedJudge()], resamples=10)  # re-running overwrites its row
    assert query(url, "SELECT COUNT(*) FROM ctxprec_calibrations")[0][0] == 1


def test_compare_gives_the_paired_difference(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url)
    labels = parse_labels(LABELS_CSV, "hand.csv")
    # judge b flips every verdict of case 2: its nodes become FP, FN (from TN, TP)
    a, b = calibrate(url, labels, [ScriptedJudge("a"), ScriptedJudge("b", flip="beta question")], resamples=200)
    assert (b.agreement.tp, b.agreement.fp, b.agreement.fn, b.agreement.tn) == (2, 2, 2, 1)
    diff = compare(a, b, resamples=200)
    assert diff["precision"].value == pytest.approx(0.5 - 0.75)
    assert diff["mae"].value == pytest.approx((1 / 6 + 1 / 2) / 2 - 1 / 12)  # case 2: label 1/2, judge 1 now
    assert diff["precision"].low <= diff["precision"].value <= diff["precision"].high
    assert query(url, "SELECT COUNT(*) FROM ctxprec_calibrations")[0][0] == 2


def test_spearman_handles_ties_and_constants() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ties: ranks (1.5, 1.5, 3) vs (1, 2, 3): rho = 0.866...
    assert spearman([0.5, 0.5, 1.0], [1, 2, 3]) == pytest.approx(0.8660254, abs=1e-6)
    assert spearman([1, 1, 1], [1, 2, 3]) is None and spearman([1], [1]) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,node,relevant\n1,1,1\n", "missing: log_id"),
        ("log_id,node,relevant\n1,first,1\n", "line 2: node must be a 1-based rank"),
        ("log_id,node,relevant\n1,0,1\n", "line 2: node must be >= 1"),
        ("log_id,node,relevant\n1,1,maybe\n", "line 2: relevant must be"),
        ("log_id,node,relevant\n1,1,1\n1,1,0\n", "line 3: log_id '1' node 1 is labelled both"),
        ("log_id,node,relevant\n", "no labels"),
    ],
)
def test_bad_label_files_fail_with_one_clear_line(text, message) -> None:
    with pytest.raises(LabelFileError, match=message):
        parse_labels(text, "x.csv")


def test_cli_calibrate_and_compare(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url)
    path = tmp_path / "labels.csv"
    path.write_text(LABELS_CSV + "99,1,1\n")  # an id the warehouse does not have: reported, not fatal
    assert ctxprec(["calibrate", "--warehouse", url, "--labels", str(path), "--judge", "lexical", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    [cal] = payload["calibrations"]
    assert cal["judge_model"] == "lexical" and cal["cases"] == 3 and cal["failed_cases"] == 1
    assert ctxprec(["calibrate", "--warehouse", url, "--labels", str(path), "--judge", "lexical", "--compare"]) == 2
    assert "--compare needs exactly two" in capsys.readouterr().err
    assert ctxprec(["calibrate", "--warehouse", url, "--labels", str(tmp_path / "nope.csv"), "--judge", "lexical"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_demo_labels_calibrate_the_lexical_judge_offline_and_show_in_the_report(tmp_path, monkeypatch) -> None:
    """The demo writes ~200 node labels over its topics, calibrates its (lexical) judge against
    them, and the report shows the calibration; ``ctxprec calibrate`` re-runs on the file."""
    from ctxprec_ops.demo.job import run_demo

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url, out = f"sqlite:///{tmp_path / 'demo.db'}", tmp_path / "report.html"
    result = run_demo(
        url, days=3, rows_per_day=(100, 120), conversations_per_day=(2, 3), end_date="2026-11-28", out=out
    )
    labels = read_labels(result.labels_path)
    assert 190 <= labels.nodes <= 210 and len(labels.labels) >= 25
    a = result.calibration.agreement
    assert a.nodes == labels.nodes and a.scored_cases == a.cases  # every node of each case is labelled
    assert a.tp and a.tn and result.calibration.judge_calls == 0  # offline
    assert 0 < a.f1.value < 1 and a.kappa.low <= a.kappa.value <= a.kappa.high
    html = out.read_text()
    assert 'id="calibration"' in html and "report_node_labels.csv" in html
    assert (
        ctxprec(
            [
                "calibrate",
                "--warehouse",
                url,
                "--labels",
                str(result.labels_path),
                "--judge",
                "lexical",
                "--resamples",
                "100",
            ]
        )
        == 0
    )
    assert query(url, "SELECT COUNT(*) FROM ctxprec_calibrations")[0][0] == 1  # same judge, prompt and labels
