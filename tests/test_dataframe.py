"""score_dataframe: same rows, same order, score columns added, a bad row isolated."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ctxprec_ops.evaluation.dataframe import RESULT_COLUMNS, score_dataframe
from ctxprec_ops.scoring.formula import contextual_precision

ANSWER = "Refunds are available within 14 days of a monthly charge and go back to the original card."
GOOD = "Refunds are available within 14 days of a monthly charge."
ALSO = "The refund goes back to the original card used for the charge."
OFF = "Dark mode can be enabled from the appearance menu in your profile."


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query": ["refund policy?", "refund policy?", "refund policy?", "refund policy?", "refund policy?"],
            "gold": [ANSWER, ANSWER, ANSWER, "", ANSWER],
            "nodes": [
                [GOOD, ALSO, OFF],  # perfect ranking
                json.dumps([OFF, GOOD, ALSO]),  # JSON text, relevant pushed down
                [GOOD, 42, OFF],  # non-string node: bad row
                [GOOD, OFF],  # empty expected output: bad row
                [OFF, OFF + " Again.", GOOD],  # relevant last
            ],
            "note": list("abcde"),
        },
        index=[50, 10, 40, 20, 30],  # a non-default, unsorted index must be kept
    )


def test_scores_keep_order_and_isolate_bad_rows():
    df = _frame()
    out = score_dataframe(
        df, judge="lexical", columns={"input": "query", "expected_output": "gold", "retrieval_context": "nodes"}
    )
    assert list(out.index) == [50, 10, 40, 20, 30]
    assert list(out["note"]) == list("abcde")
    assert all(c in out.columns for c in RESULT_COLUMNS)
    assert "score" not in df.columns  # the input frame is untouched
    assert out.loc[50, "score"] == 1.0 and bool(out.loc[50, "success"])
    assert out.loc[10, "score"] == pytest.approx(contextual_precision([False, True, True]))
    assert out.loc[30, "score"] == pytest.approx(contextual_precision([False, False, True]))
    assert not bool(out.loc[30, "success"])
    for bad in (40, 20):
        assert pd.isna(out.loc[bad, "score"]) and not bool(out.loc[bad, "success"])
        assert out.loc[bad, "error"]
    assert "string" in out.loc[40, "error"]
    assert "expected" in out.loc[20, "error"].lower()
    assert out.loc[50, "error"] is None
    verdicts = out.loc[10, "verdicts"]
    assert [v["node"] for v in verdicts] == [1, 2, 3] and [v["relevant"] for v in verdicts] == [False, True, True]
    assert out.loc[50, "reason"]
    assert out["cost"].fillna(0).sum() == 0.0  # the lexical judge is free


def test_threshold_and_strict_mode():
    df = _frame().rename(columns={"query": "input", "gold": "expected_output", "nodes": "retrieval_context"})
    loose = score_dataframe(df, judge="lexical", threshold=0.3)
    assert bool(loose.loc[30, "success"])  # 1/3 >= 0.3
    strict = score_dataframe(df, judge="lexical", strict_mode=True)
    assert strict.loc[10, "score"] == 0.0 and strict.loc[50, "score"] == 1.0


def test_missing_column_is_a_clear_error():
    with pytest.raises(ValueError, match="retrieval_context"):
        score_dataframe(pd.DataFrame({"input": ["q"], "expected_output": ["a"]}), judge="lexical")


def test_empty_frame():
    df = pd.DataFrame({"input": [], "expected_output": [], "retrieval_context": []})
    out = score_dataframe(df, judge="lexical")
    assert len(out) == 0 and all(c in out.columns for c in RESULT_COLUMNS)


def test_llm_judge_over_http_reports_tokens(openai_env):
    server = openai_env
    df = pd.DataFrame(
        {
            "input": ["q1", "q2", "q3"],
            "expected_output": ["a1", "a2", "a3"],
            "retrieval_context": [["RELEVANT one", "nothing"], None, ["nothing", "RELEVANT two"]],
        }
    )
    out = score_dataframe(df, judge="judge-test-model", concurrency=4)
    assert out["score"].iloc[0] == 1.0 and out["score"].iloc[2] == 0.5
    assert pd.isna(out["score"].iloc[1]) and out["error"].iloc[1]
    assert server.calls == 2  # the bad row never reaches the judge
    assert (out["prompt_tokens"].iloc[[0, 2]] > 0).all()
    assert (out["completion_tokens"].iloc[[0, 2]] > 0).all()
