"""OpenLineage from the ctxprec operators, through the real provider: ``dag.test()`` with
``apache-airflow-providers-openlineage`` installed and its file transport, the events it emitted
read back; every ``ctxprec`` run facet validated against the JSON schema shipped with the package,
and the facet objects checked against the OpenLineage client's classes."""

from __future__ import annotations

import json
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.airflow_env import AirflowEnv
from tests.test_airflow_dags import DAG_ID, DAY, GOOD, JUDGE_KEY, seed_day, sqlite_env

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

# the part of the OpenLineage spec the facet's schema refers to (BaseFacet's required fields)
OL_RUN_FACET = {
    "type": "object",
    "properties": {"_producer": {"type": "string", "format": "uri"}, "_schemaURL": {"type": "string"}},
    "required": ["_producer", "_schemaURL"],
}


def _validator() -> Any:
    text = resources.files("ctxprec_ops.airflow").joinpath("schemas/CtxPrecRunFacet.json").read_text("utf-8")
    schema = json.loads(text)
    spec = referencing.Resource.from_contents(
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"RunFacet": OL_RUN_FACET}}
    )
    registry = referencing.Registry().with_resource("https://openlineage.io/spec/2-0-2/OpenLineage.json", spec)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _events(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(task, eventType): event}`` from the file transport's JSON lines."""
    out = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        task = event["job"]["name"].split(".", 1)[-1]
        out[(task, event["eventType"])] = event
    return out


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_the_nightly_run_reports_its_lineage_and_figures(airflow_env: AirflowEnv, tmp_path: Path, judge_server) -> None:
    db, log = tmp_path / "warehouse.db", tmp_path / "openlineage.jsonl"
    expected = seed_day(f"sqlite:///{db}", DAY, 9, GOOD)
    transport = {"type": "file", "log_file_path": str(log), "append": True}
    env = sqlite_env(db, judge_server, AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport))
    result = airflow_env.dag_test(DAG_ID, f"{DAY}T00:00:00", env=env)
    assert result.state == "success", result.output[-3000:]
    events = _events(log)
    ns = f"sqlite://{db}"
    logs, scores, failures, runs = (
        (ns, "retrieval_logs"),
        (ns, "ctxprec_scores"),
        (ns, "ctxprec_failures"),
        (ns, "ctxprec_runs"),
    )

    plan = events[("plan_chunks", "COMPLETE")]
    assert _names(plan["inputs"]) == [logs] and plan["outputs"] == []
    chunk = events[("score_chunk", "COMPLETE")]
    assert _names(chunk["inputs"]) == [logs] and _names(chunk["outputs"]) == [scores, failures]
    schema_fields = {f["name"] for f in chunk["outputs"][0]["facets"]["schema"]["fields"]}
    assert {"log_id", "partition_key", "metric", "score", "verdicts", "judge_model", "run_id"} <= schema_fields
    assert chunk["run"]["facets"]["ctxprec"]["rows_scored"] == 9 and chunk["run"]["facets"]["ctxprec"]["chunk"] == 0

    aggregate = events[("aggregate", "COMPLETE")]
    assert _names(aggregate["outputs"]) == [scores, failures, runs]
    facet = aggregate["run"]["facets"]["ctxprec"]
    assert facet["partition_key"] == DAY and facet["metric"] == "contextual_precision"
    assert facet["judge_model"] == judge_server.model_name and facet["status"] == "succeeded"
    assert facet["rows_total"] == 9 and facet["rows_failed"] == 0
    assert facet["mean_score"] == pytest.approx(statistics.fmean(expected), abs=1e-6)
    assert facet["prompt_version"]

    alert = events[("alert", "COMPLETE")]
    assert _names(alert["inputs"]) == [scores, runs] and alert["outputs"] == []

    validator = _validator()
    for (task, kind), event in events.items():
        if task == DAG_ID:  # the DAG run's own events carry no task facet
            continue
        facet = event["run"]["facets"]["ctxprec"]
        errors = [e.message for e in validator.iter_errors(facet)]
        assert not errors, (task, kind, errors)
    assert JUDGE_KEY not in log.read_text()


def test_a_failed_task_reports_the_redacted_error(airflow_env: AirflowEnv, tmp_path: Path, judge_server) -> None:
    db, log = tmp_path / "warehouse.db", tmp_path / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(log), "append": True}
    env = sqlite_env(db, judge_server, AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport))
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{db}")  # a warehouse file without a retrieval_logs table
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE other_logs (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    result = airflow_env.dag_test(DAG_ID, f"{DAY}T00:00:00", env=env)
    assert result.state == "failed" and result.state_of("plan_chunks") == "failed"
    fail = _events(log)[("plan_chunks", "FAIL")]
    facet = fail["run"]["facets"]["ctxprec"]
    assert "retrieval_logs" in facet["error"] and facet["partition_key"] == DAY
    assert not list(_validator().iter_errors(facet))


def test_facets_are_openlineage_client_objects(airflow_env: AirflowEnv, tmp_path: Path) -> None:
    """The methods called directly, as the provider calls them: client classes that serialize."""
    db = tmp_path / "wh.db"
    out = airflow_env.run_python(
        "from openlineage.client.event_v2 import Dataset\n"
        "from openlineage.client.facet_v2 import RunFacet\n"
        "from openlineage.client.serde import Serde\n"
        "from airflow.providers.openlineage.extractors import OperatorLineage\n"
        "from ctxprec_ops.airflow import ContextualPrecisionOperator\n"
        "op = ContextualPrecisionOperator(task_id='t', partition_key='2026-11-28', judge='gpt-4o-mini')\n"
        "start = op.get_openlineage_facets_on_start()\n"
        "op._lineage = {'partition_key': '2026-11-28', 'metric': 'contextual_precision',\n"
        "               'source_table': 'retrieval_logs', 'rows_scored': 4.0, 'mean_score': 0.75}\n"
        "done = op.get_openlineage_facets_on_complete(None)\n"
        "facet = done.run_facets['ctxprec']\n"
        "emit({'lineage': isinstance(done, OperatorLineage),\n"
        "      'datasets': all(isinstance(d, Dataset) for d in done.inputs + done.outputs),\n"
        "      'run_facet': isinstance(facet, RunFacet), 'start': Serde.to_dict(start.run_facets['ctxprec']),\n"
        "      'done': Serde.to_dict(facet), 'inputs': [d.name for d in done.inputs]})",
        env={"AIRFLOW_CONN_CTXPREC_WAREHOUSE": json.dumps({"conn_type": "sqlite", "host": str(db)})},
    )
    assert out["lineage"] and out["datasets"] and out["run_facet"]
    assert out["start"]["judge_model"] == "gpt-4o-mini" and "rows_scored" not in out["start"]
    assert out["done"]["rows_scored"] == 4 and out["done"]["mean_score"] == 0.75 and out["inputs"] == ["retrieval_logs"]
    assert not list(_validator().iter_errors(out["done"]))
