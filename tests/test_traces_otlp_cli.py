"""``ctxprec score`` on traces: ``--otlp-json FILE`` (an export made by the SDK's own OTLP encoder),
``--source-format`` / ``--stage`` / the ``CTXPREC_*`` span settings, and the same settings in the
Dagster resources and the Airflow operator."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.traces.otlp import OtlpFileError, load_otlp_json, read_otlp_spans
from ctxprec_ops.warehouse.engine import get_engine
from tests.helpers import traces as T

DAY = "2026-11-28"
CASES = [
    ("What is the refund window?", ["Refunds within 30 days.", "Shipping takes 5 days."], "30 days."),
    ("Do you ship abroad?", ["We ship to 40 countries.", "Refunds within 30 days.", "Open 9-5."], "Yes."),
    ("Opening hours?", ["Open 9-5 on weekdays.", "We ship to 40 countries."], "9 to 5."),
]


@pytest.fixture
def clean_env(monkeypatch):
    for var in (
        "CTXPREC_WAREHOUSE_URL",
        "CTXPREC_JUDGE",
        "CTXPREC_SOURCE_TABLE",
        "CTXPREC_SOURCE_FORMAT",
        "CTXPREC_STAGE",
        "CTXPREC_SPAN_TABLE",
        "CTXPREC_SPAN_COLUMNS",
        "CTXPREC_GOLD_TABLE",
        "CTXPREC_EXPECTED_ATTRIBUTE",
        "CTXPREC_DOCUMENTS_TABLE",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CTXPREC_JUDGE", "lexical")


def on_day(doc: dict, day: str = DAY) -> dict:
    """The export's start times moved onto ``day`` 09:00 UTC (order and gaps kept)."""
    from datetime import UTC, datetime

    spans = [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    first = min(int(sp["startTimeUnixNano"]) for sp in spans)
    base = int(datetime.fromisoformat(f"{day}T09:00:00").replace(tzinfo=UTC).timestamp()) * 10**9
    for sp in spans:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            sp[key] = str(int(sp[key]) - first + base)
    return doc


def export(tmp_path, spans, *, hex_ids=True, lines=False, name="traces.json"):
    doc = on_day(json.loads(T.otlp_json(spans, hex_ids=hex_ids)))
    path = tmp_path / name
    if lines:  # the Collector's file exporter: one request per line
        rs = doc["resourceSpans"]
        path.write_text("\n".join(json.dumps({"resourceSpans": [r]}) for r in rs) + "\n")
    else:
        path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("hex_ids,lines", [(True, False), (False, False), (True, True)])
def test_otlp_json_export_loads_with_its_ids_and_attributes(tmp_path, hex_ids, lines):
    spans = T.langchain_spans(CASES)
    path = export(tmp_path, spans, hex_ids=hex_ids, lines=lines)
    rows = list(read_otlp_spans(path))
    assert len(rows) == len(spans)
    want = {format(s.context.span_id, "016x"): s for s in spans}
    for r in rows:
        s = want[r["span_id"]]
        assert r["trace_id"] == format(s.context.trace_id, "032x")
        assert r["parent_id"] == (format(s.parent.span_id, "016x") if s.parent else None)
        assert json.loads(r["attributes"]) == {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in s.attributes.items()
        }
        assert r["start_time"].strftime("%Y-%m-%d") == DAY
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    first = load_otlp_json(engine, path)
    again = load_otlp_json(engine, path)  # loading twice adds nothing (no duplicates to fail on)
    assert (first.inserted, again.inserted, again.already_loaded) == (len(spans), 0, len(spans))
    assert first.detected_format() == "openinference" and first.days == [DAY] and first.traces == 3


def test_bad_otlp_files_are_one_clear_error(tmp_path):
    for text, why in [
        ("", "is empty"),
        ('{"resourceSpans": [', "line 1 is not JSON"),
        ('{"spans": []}', "not an OTLP/JSON trace export"),
    ]:
        path = tmp_path / "bad.json"
        path.write_text(text)
        with pytest.raises(OtlpFileError, match=why):
            list(read_otlp_spans(path))


def test_score_otlp_json_creates_the_warehouse_and_scores_it(tmp_path, capsys, clean_env):
    spans = T.langchain_spans(CASES)
    path = export(tmp_path, spans)
    url = f"sqlite:///{tmp_path / 'new.db'}"
    code = main(["score", "--warehouse", url, "--otlp-json", str(path), "--partition", DAY, "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"loaded {len(spans)} of {len(spans)} span(s) (3 trace(s)) into spans" in err
    assert "note: reference-free" in out
    with get_engine(url).connect() as conn:
        n, traces = conn.exec_driver_sql("SELECT count(*), count(DISTINCT trace_id) FROM ctxprec_scores").one()
    assert (n, traces) == (3, 3)
    # again: the file's spans are there already, nothing is judged twice
    assert main(["score", "--warehouse", url, "--otlp-json", str(path), "--partition", DAY, "--quiet", "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (
        f"{len(spans)} were already there" in err and summary["rows_cached"] == 3 and summary["source_table"] == "spans"
    )
    # the report says the scores are reference-free
    out_html = tmp_path / "report.html"
    assert main(["report", "--warehouse", url, "--source-table", "spans", "--end", DAY, "--out", str(out_html)]) == 0
    html = out_html.read_text()
    assert 'id="reference-free"' in html and "3 of these scores judged each retrieval against the answer" in html


def test_score_flags_and_env_for_a_spans_table(tmp_path, capsys, clean_env, monkeypatch):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    rows = T.span_rows(T.openinference_manual_spans(CASES, reranked=[[1, 0], [2, 1, 0], [0, 1]]), DAY)
    renamed = [{**r, "attributes": r["attributes"]} for r in rows]
    T.write_spans(engine, renamed, name="app_spans")
    base = ["score", "--warehouse", url, "--partition", DAY, "--quiet", "--json"]
    assert main([*base, "--source-format", "openinference", "--source-table", "app_spans"]) == 0
    assert json.loads(capsys.readouterr().out)["rows_scored"] == 3
    # the same from the environment, the reranker stage
    monkeypatch.setenv("CTXPREC_SOURCE_FORMAT", "openinference")
    monkeypatch.setenv("CTXPREC_SPAN_TABLE", "app_spans")
    monkeypatch.setenv("CTXPREC_STAGE", "rerank")
    assert main(base) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source_table"] == "app_spans__rerank" and summary["rows_scored"] == 3
    # the monitoring commands read the configured stage's scores by default
    main(["check", "--warehouse", url, "--partition", DAY, "--json"])
    check = json.loads(capsys.readouterr().out)
    assert check["source_table"] == "app_spans__rerank" and check["figures"]["rows"] == 3, check
    # estimate reads the same source (the reranker's spans), without a judge call
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")
    assert main(["estimate", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert (est["rows_total"], est["rows_to_score"], est["judge_calls"]) == (3, 3, 3)
    monkeypatch.delenv("OPENAI_API_KEY")
    # bad combinations: one line, exit 2, before any work
    monkeypatch.delenv("CTXPREC_STAGE")
    for flags, why in [
        (["--source-format", "otel-genai", "--stage", "rerank"], "define no reranker span"),
        (["--source-format", "rows", "--gold-table", "gold"], "gold_table applies to a spans table"),
        (["--column", "retrieval_context=ctx"], "a spans table's logical columns are"),
    ]:
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err


def test_dagster_asset_scores_a_spans_table(tmp_path, clean_env):
    from dagster import materialize

    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
    from dagster_defs.definitions import scores_assets

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    T.write_spans(get_engine(url), T.span_rows(T.openinference_manual_spans(CASES), DAY))
    warehouse = WarehouseResource(url=url, source_format="openinference")
    result = materialize(
        [scores_assets["contextual_precision"]],
        partition_key=DAY,
        resources={
            "warehouse": warehouse,
            "judge": JudgeResource(model="lexical"),
            "thresholds": AlertThresholdsResource(),
        },
        raise_on_error=False,
    )
    assert result.success
    with get_engine(url).connect() as conn:
        got = conn.execute(sa.text("SELECT count(*), min(source_table) FROM ctxprec_scores")).one()
    assert tuple(got) == (3, "spans")
    assert warehouse.recorded_table_for("contextual_precision") == "spans"
    assert (
        WarehouseResource(url=url, source_format="openinference", stage="rerank").recorded_table_for(
            "contextual_precision"
        )
        == "spans__rerank"
    )
    # the turn metric keeps reading its conversation table
    assert warehouse.table_for("turn_contextual_precision") == "conversation_logs"


AIRFLOW_PROBE = r"""
import json, types
import sqlalchemy as sa
from ctxprec_ops.airflow.operators import ContextualPrecisionOperator
engine = sa.create_engine(URL)
md = sa.MetaData()
spans = sa.Table("spans", md, *[sa.Column(c, sa.Text) for c in
                 ("trace_id", "span_id", "parent_id", "name", "start_time", "attributes")])
md.create_all(engine)
with engine.begin() as c:
    c.execute(spans.insert(), ROWS)
op = ContextualPrecisionOperator(task_id="spans", partition_key="2026-11-28", judge="lexical", warehouse_url=URL,
                                 judge_conn_id=None, source_format="{{ params.fmt }}")
op.source_format = "openinference"  # as rendered from the template
ctx = {"ti": types.SimpleNamespace(dag_id="probe", try_number=1), "run_id": "manual__spans"}
out = {"summary": op.execute(ctx), "templates": list(ContextualPrecisionOperator.template_fields)}
rerank = ContextualPrecisionOperator(task_id="r", warehouse_url=URL, source_format="openinference", stage="rerank")
out["rerank_table"] = rerank._source_table_name("contextual_precision")
emit(out)
"""


def test_airflow_operator_scores_a_spans_table(airflow_env, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows = T.span_rows(T.openinference_manual_spans(CASES), DAY)
    head = f"URL = {url!r}\nROWS = __import__('json').loads({json.dumps(rows)!r})\n"
    out = airflow_env.run_python(head + AIRFLOW_PROBE)
    assert {"source_format", "stage"} <= set(out["templates"])
    summary = out["summary"]
    assert (summary["rows_total"], summary["rows_scored"], summary["source_table"]) == (3, 3, "spans")
    assert out["rerank_table"] == "spans__rerank"
