"""Source-grouped retrieval context (issue 36, item 2; deepeval 4.3): ``RetrievedContextData``
items sharing a ``source`` are one node at the rank of the source's first item, its text the
source name and the items' texts; plain strings stay nodes of their own. Python API,
``evaluate()``, warehouse rows, verdicts and the report's node texts."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa
from pydantic import BaseModel, ValidationError

from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    LLMTestCase,
    RetrievedContextData,
    Turn,
    TurnContextualPrecisionMetric,
    evaluate,
)
from ctxprec_ops.cases.contexts import context_nodes, display_nodes
from ctxprec_ops.pipeline.rows import row_to_test_case

FAQ_1 = RetrievedContextData(context="Shipping takes a week.", source="faq.md")
POLICY = RetrievedContextData(context="Refunds are paid within 5 days.", source="policy.md")
FAQ_2 = RetrievedContextData(context="We ship worldwide.", source="faq.md")
PLAIN = "Our office is in Lyon."
#: the issue's example: three nodes, the relevant one (policy.md) at rank 3
ITEMS = [FAQ_1, PLAIN, POLICY, FAQ_2]


def _judge(server):
    from ctxprec_ops import OpenAIJudge

    return OpenAIJudge("judge-test-model", base_url=server.base_url, api_key="test-key")


def refunds_only(text: str, prompt: str) -> bool:
    return "Refunds" in text


def test_items_sharing_a_source_are_one_node_at_the_first_items_rank():
    nodes = context_nodes(ITEMS)
    assert nodes == [
        "Source: faq.md\n\nShipping takes a week.\n\nWe ship worldwide.",
        PLAIN,
        "Source: policy.md\n\nRefunds are paid within 5 days.",
    ]
    assert context_nodes([PLAIN, "b"]) == [PLAIN, "b"]  # plain strings: the list as it is
    assert context_nodes([FAQ_1, FAQ_2]) == [nodes[0]]
    assert display_nodes(ITEMS) == nodes
    # the same for the JSON elements of a warehouse row, as the report reads them
    raw = [{"context": i.context, "source": i.source} if isinstance(i, RetrievedContextData) else i for i in ITEMS]
    assert display_nodes(raw) == nodes


def test_grouped_case_scores_as_deepeval_on_the_same_verdicts(judge_server):
    judge_server.oracle = refunds_only
    metric = ContextualPrecisionMetric(model=_judge(judge_server))
    case = LLMTestCase(input="How fast are refunds?", expected_output="Within 5 days.", retrieval_context=ITEMS)
    assert metric.measure(case) == pytest.approx(1 / 3, abs=0)
    assert [(v.node, v.relevant) for v in metric.verdicts] == [(1, False), (2, False), (3, True)]
    (request,) = judge_server.requests
    assert request["node_ids"] == [1, 2, 3]
    prompt = request["json"]["messages"][0]["content"]
    assert '<node id="1">\nSource: faq.md\n\nShipping takes a week.\n\nWe ship worldwide.\n</node>' in prompt
    assert "relevant: rank 3 of 3" in metric.reason
    # the items stay on the case as given (ranked, with their sources)
    assert case.retrieval_context == ITEMS


def test_evaluate_and_its_dataframe_number_the_grouped_nodes(judge_server):
    judge_server.oracle = refunds_only
    cases = [
        LLMTestCase(input="q1", expected_output="a", retrieval_context=ITEMS, id="grouped"),
        LLMTestCase(input="q2", expected_output="a", retrieval_context=[POLICY, FAQ_1, FAQ_2], id="first"),
        LLMTestCase(input="q3", expected_output="a", retrieval_context=[PLAIN, "Refunds: 5 days"], id="plain"),
    ]
    result = evaluate(cases, [ContextualPrecisionMetric(model=_judge(judge_server))])
    assert [r.score for r in result.results] == [pytest.approx(1 / 3, abs=0), 1.0, 0.5]
    assert [len(r.verdicts) for r in result.results] == [3, 2, 2]
    frame = result.to_pandas()
    assert list(frame["id"]) == ["grouped", "first", "plain"]
    assert result.test_results[0].metrics_data[0].score == pytest.approx(1 / 3, abs=0)


def test_score_dataframe_takes_grouped_items_in_json_text(judge_server):
    import pandas as pd

    from ctxprec_ops.evaluation.dataframe import score_dataframe

    judge_server.oracle = refunds_only
    raw = [{"context": i.context, "source": i.source} if isinstance(i, RetrievedContextData) else i for i in ITEMS]
    frame = pd.DataFrame(
        {"input": ["q", "q2"], "expected_output": ["a", "a"], "retrieval_context": [json.dumps(raw), raw[1:3]]}
    )
    scored = score_dataframe(frame, judge=_judge(judge_server))
    assert list(scored["score"]) == [pytest.approx(1 / 3, abs=0), 0.5]
    assert [len(v) for v in scored["verdicts"]] == [3, 2]


def test_items_are_validated_and_converted():
    case = LLMTestCase(
        input="q",
        retrieval_context=[{"context": "c", "source": "s.md"}, "plain"],
    )
    assert case.retrieval_context == [RetrievedContextData(context="c", source="s.md"), "plain"]
    dumped = case.model_dump()
    assert dumped["retrieval_context"] == [{"context": "c", "source": "s.md"}, "plain"]
    assert LLMTestCase(**dumped) == case
    assert json.loads(case.model_dump_json(by_alias=True))["retrievalContext"][0] == {"context": "c", "source": "s.md"}
    with pytest.raises(ValidationError):
        RetrievedContextData(context="c")  # source is required, as in deepeval
    with pytest.raises(TypeError, match=r"'retrieval_context\[0\]' must be a string, an MLLMImage or a Retrieved"):
        LLMTestCase(input="q", retrieval_context=[{"context": "c"}])

    class ForeignItem(BaseModel):  # deepeval's item has this shape and class name
        context: str
        source: str

    ForeignItem.__name__ = "RetrievedContextData"
    theirs = LLMTestCase(input="q", retrieval_context=[ForeignItem(context="c", source="s.md")])
    assert theirs.retrieval_context == [RetrievedContextData(context="c", source="s.md")]


def test_warehouse_rows_with_context_and_source_objects():
    row = {
        "id": 9,
        "input": "q",
        "expected_output": "a",
        "retrieval_context": json.dumps(
            [{"context": "A", "source": "faq.md"}, "plain", {"context": "B", "source": "faq.md"}]
        ),
    }
    case = row_to_test_case(row)
    assert case.retrieval_context == [
        RetrievedContextData(context="A", source="faq.md"),
        "plain",
        RetrievedContextData(context="B", source="faq.md"),
    ]
    assert case.multimodal is False
    assert context_nodes(case.retrieval_context) == ["Source: faq.md\n\nA\n\nB", "plain"]
    from ctxprec_ops.errors import InvalidTestCaseError

    for bad in ({"context": "A"}, {"context": 1, "source": "s"}, {"context": "A", "source": "s", "url": "https://x"}):
        with pytest.raises(InvalidTestCaseError, match=r"retrieval_context\[0\] must have a string 'context'"):
            row_to_test_case({**row, "retrieval_context": [bad]})


def test_partition_of_grouped_rows_verdicts_and_report_texts(judge_server, tmp_path):
    from ctxprec_ops.monitoring.cases import load_worst_cases
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from ctxprec_ops.pipeline.estimate import estimate_partition
    from ctxprec_ops.warehouse.engine import get_engine
    from tests.fixtures.warehouse_data import count, create_logs, log_row

    judge_server.oracle = refunds_only
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    grouped = [
        {"context": FAQ_1.context, "source": "faq.md"},
        PLAIN,
        {"context": POLICY.context, "source": "policy.md"},
        {"context": FAQ_2.context, "source": "faq.md"},
    ]
    create_logs(
        engine,
        [
            log_row(1, datetime(2026, 11, 28, 1), context=grouped),
            log_row(2, datetime(2026, 11, 28, 2), context=[POLICY.context, PLAIN]),
        ],
    )
    cfg = PipelineConfig(warehouse=url, judge="gpt-4o-mini", judge_base_url=judge_server.base_url, judge_api_key="k")
    est = estimate_partition(cfg, "2026-11-28")
    assert est.nodes_total == 3 + 2 and judge_server.calls == 0  # the grouped nodes, as they will be judged
    summary = score_partition(cfg, "2026-11-28")
    assert summary.status == "succeeded" and summary.rows_scored == 2
    # one cache entry per node: faq.md's group, the plain string (shared by both rows), policy.md's
    # group, and row 2's policy passage as a plain node
    assert count(engine, "ctxprec_judgments") == 4
    with engine.connect() as conn:
        rows = dict(conn.execute(sa.text("SELECT log_id, verdicts FROM ctxprec_scores")).all())
        scores = dict(conn.execute(sa.text("SELECT log_id, score FROM ctxprec_scores")).all())
    assert scores == {"1": pytest.approx(1 / 3, abs=0), "2": 1.0}
    verdicts = json.loads(rows["1"]) if isinstance(rows["1"], str) else rows["1"]
    assert [(v["node"], v["relevant"]) for v in verdicts] == [(1, False), (2, False), (3, True)]
    worst = load_worst_cases(engine, "contextual_precision", None, "2026-11-28")
    case = next(c for c in worst if c["log_id"] == "1")
    assert [n["text"] for n in case["verdicts"]] == context_nodes(ITEMS)


def test_turn_metric_keeps_each_item_a_node_as_deepeval_does(judge_server):
    judge_server.oracle = refunds_only
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content="refunds?"),
            Turn(role="assistant", content="5 days", retrieval_context=[FAQ_1, FAQ_2, POLICY]),
        ],
        expected_outcome="The user learns refunds take 5 days.",
    )
    metric = TurnContextualPrecisionMetric(model=_judge(judge_server))
    assert metric.measure(conv) == pytest.approx(1 / 3, abs=0)  # three nodes: faq.md is not merged here
    assert judge_server.requests[0]["node_ids"] == [1, 2, 3]
    assert "Source: faq.md\n\nShipping takes a week." in judge_server.requests[0]["json"]["messages"][0]["content"]


def test_calibration_labels_number_the_grouped_nodes(tmp_path):
    from ctxprec_ops.calibration import parse_labels
    from ctxprec_ops.calibration.run import load_cases
    from ctxprec_ops.cases.contexts import node_count
    from ctxprec_ops.warehouse.engine import get_engine
    from tests.fixtures.warehouse_data import create_logs, log_row

    assert node_count(ITEMS) == 3 and node_count(["a", "b"]) == 2 and node_count(None) == 0
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    raw = [{"context": i.context, "source": i.source} if isinstance(i, RetrievedContextData) else i for i in ITEMS]
    create_logs(engine, [log_row(1, datetime(2026, 11, 28, 1), context=raw)])
    labels = parse_labels("log_id,node,relevant\n1,1,0\n1,3,1\n1,4,0\n")
    data = load_cases(engine, labels)
    assert data.labels == {"1": {1: False, 3: True}}  # four elements, three nodes: node 4 does not exist
    assert "the row has 3 nodes" in data.skipped["1"]
