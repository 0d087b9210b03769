"""Self-consistency through the pipeline (SQLite and PostgreSQL), the judgment cache, the
report's flip rate, the estimate, the CLI and the orchestrator settings."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.config import Settings, SettingsError
from ctxprec_ops.monitoring.report import render_report
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.estimate import estimate_partition
from ctxprec_ops.scoring.samples import samples_of
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.judge_server import default_oracle
from tests.fixtures.warehouse_data import create_logs, log_row

DAY = "2026-11-28"


def flip_node_b(text, prompt):
    """A disagreeing sample: wrong about the nodes marked B only."""
    return (not default_oracle(text, prompt)) if " B " in text else default_oracle(text, prompt)


def rows():
    # per row: "A" nodes are always judged alike, "B" nodes flip in one sample of three
    return [
        log_row(i, datetime(2026, 11, 28, i), context=[f"row {i} A RELEVANT", f"row {i} B IRRELEVANT", f"{i} A x"])
        for i in range(1, 5)
    ]


def config(url, server, **kw):
    return PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=server.base_url,
        judge_api_key="sk-test",
        concurrency=2,
        **kw,
    )


def scores(engine):
    with engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT log_id, score, verdicts, prompt_version FROM ctxprec_scores")))


def verdicts_of(value):
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pipeline_stores_agreement_in_scores_and_cache(judge_server, tmp_path, request, backend):
    url = f"sqlite:///{tmp_path / 'wh.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = get_engine(url)
    create_logs(engine, rows())
    judge_server.choice_oracles = [default_oracle, flip_node_b, default_oracle]
    run = score_partition(config(url, judge_server, judge_samples=3), DAY)
    assert run.status == "succeeded" and run.rows_scored == 4
    assert samples_of(run.prompt_version) == 3 and run.prompt_version.endswith("+samples=3")
    assert judge_server.calls == 4 and all(r["json"]["n"] == 3 for r in judge_server.requests)
    got = scores(engine)
    assert {r.prompt_version for r in got} == {run.prompt_version}
    for r in got:
        v = verdicts_of(r.verdicts)
        assert [n["relevant"] for n in v] == [True, False, False]
        assert [n["agreement"] for n in v] == [1.0, pytest.approx(2 / 3), 1.0]
        assert r.score == 1.0
    with engine.connect() as conn:
        cached = sorted(
            (round(a, 6), bool(rel))
            for a, rel in conn.execute(sa.text("SELECT agreement, relevant FROM ctxprec_judgments"))
        )
    assert cached == sorted([(1.0, True), (round(2 / 3, 6), False), (1.0, False)] * 4)

    # a rescore reads the sampled verdicts from the cache, agreement included, with no request
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxprec_scores")
    calls = judge_server.calls
    again = score_partition(config(url, judge_server, judge_samples=3), DAY)
    assert judge_server.calls == calls and again.rows_cached == 4
    assert [n["agreement"] for n in verdicts_of(scores(engine)[0].verdicts)] == [1.0, pytest.approx(2 / 3), 1.0]

    # samples=1 is another configuration: its own rows and cache entries, no agreement anywhere
    judge_server.choice_oracles = None
    one = score_partition(config(url, judge_server), DAY)
    assert one.prompt_version == run.prompt_version.split("+")[0]
    # the run's spend counts every sampled answer: the same prompts, three completions each
    assert run.prompt_tokens == one.prompt_tokens and run.judge_calls == one.judge_calls == 4
    assert run.completion_tokens > 2.5 * one.completion_tokens
    assert judge_server.calls == calls + 4
    assert all("n" not in r["json"] for r in judge_server.requests[-4:])
    single = [r for r in scores(engine) if r.prompt_version == one.prompt_version]
    assert len(single) == 4
    assert all(set(n) == {"node", "relevant", "reason"} for r in single for n in verdicts_of(r.verdicts))
    with engine.connect() as conn:
        nulls = conn.execute(
            sa.text("SELECT COUNT(*) FROM ctxprec_judgments WHERE prompt_version = :v AND agreement IS NULL"),
            {"v": one.prompt_version},
        ).scalar()
    assert nulls == 12


def test_report_shows_the_flip_rate_of_a_sampled_population(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows())
    judge_server.choice_oracles = [default_oracle, flip_node_b, default_oracle]
    score_partition(config(url, judge_server, judge_samples=3), DAY)
    html = render_report(url, tmp_path / "r.html", end=DAY, days=3).read_text()
    assert 'id="self-consistency"' in html and "3 sampled answers per node" in html
    section = html.split('id="self-consistency"')[1].split("</section>")[0]
    # 4 cases x 3 nodes, the B node of each flipped: 4 / 12
    assert '<td class="num flip-rate">33.3%</td>' in section
    assert ">12<" in section and ">4<" in section
    assert "66.7%" in html.split('id="worst-cases"')[1]  # the node's agreement next to its verdict

    # a population of single answers: no section
    plain = tmp_path / "plain"
    plain.mkdir()
    url2 = f"sqlite:///{plain / 'wh.db'}"
    create_logs(get_engine(url2), rows())
    score_partition(config(url2, judge_server), DAY)
    assert 'id="self-consistency"' not in render_report(url2, plain / "r.html", end=DAY, days=3).read_text()


def test_old_judgments_table_without_agreement_is_migrated_and_readable(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, rows()[:1])
    score_partition(config(url, judge_server), DAY)
    # the table as an older version wrote it: no agreement column
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE j_old AS SELECT key, judge_model, prompt_version, relevant, reason, created_at "
            "FROM ctxprec_judgments"
        )
        conn.exec_driver_sql("DROP TABLE ctxprec_judgments")
        conn.exec_driver_sql("ALTER TABLE j_old RENAME TO ctxprec_judgments")
        conn.exec_driver_sql("DELETE FROM ctxprec_scores")
    engine.dispose()
    from ctxprec_ops.warehouse import schema

    schema._ensured.clear()
    calls = judge_server.calls
    est = estimate_partition(config(url, judge_server), DAY)  # read-only, before any migration
    assert est.nodes_cached == 3 and est.judge_calls == 0
    again = score_partition(config(url, judge_server), DAY)
    assert judge_server.calls == calls and again.rows_cached == 1


def test_estimate_counts_every_sampled_answer(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows())
    one = estimate_partition(config(url, judge_server), DAY)
    five = estimate_partition(config(url, judge_server, judge_samples=5), DAY)
    assert five.samples == 5 and one.samples == 1
    assert five.judge_calls == one.judge_calls and five.prompt_tokens == one.prompt_tokens
    assert five.completion_tokens == 5 * one.completion_tokens
    assert five.prompt_version.endswith("+samples=5")
    assert "x 5 sampled answers" in five.method and "sampled" not in one.method
    assert five.batch_cost is None  # batch mode does not sample


def test_samples_settings_cli_and_batch_refusal(judge_server, tmp_path, monkeypatch, capsys):
    assert Settings.from_env({"CTXPREC_JUDGE_SAMPLES": "5"}).judge_samples == 5
    assert Settings.from_env({}).judge_samples == 1
    for bad in ("4", "0"):
        with pytest.raises(SettingsError, match="CTXPREC_JUDGE_SAMPLES must be an odd whole number >= 1"):
            Settings.from_env({"CTXPREC_JUDGE_SAMPLES": bad})
    assert Settings.from_env({"CTXPREC_JUDGE_SAMPLES": "3"}).pipeline_config().judge_samples == 3
    for bad in (0, 2, -3):
        with pytest.raises(ValueError, match="judge_samples must be an odd whole number >= 1"):
            PipelineConfig(judge_samples=bad)
    with pytest.raises(ValueError, match="not supported in batch mode"):
        PipelineConfig(judge="gpt-4o-mini", judge_mode="batch", judge_samples=3)

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows())
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    base = ["score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model", "--quiet", "--json"]
    assert main([*base, "--samples", "2"]) == 2
    assert "--samples must be an odd whole number >= 1" in capsys.readouterr().err
    assert main([*base, "--samples", "3", "--batch"]) == 2
    assert "not supported in batch mode" in capsys.readouterr().err
    assert judge_server.calls == 0
    assert main([*base, "--samples", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompt_version"].endswith("+samples=3") and judge_server.requests[0]["json"]["n"] == 3


def test_dagster_and_airflow_carry_samples(monkeypatch):
    pytest.importorskip("dagster")
    from ctxprec_ops.dagster.assets import build_pipeline_config
    from ctxprec_ops.dagster.resources import resources_for

    monkeypatch.setenv("CTXPREC_JUDGE_SAMPLES", "5")
    res = resources_for("local")
    assert res["judge"].judge_samples == 5
    cfg = build_pipeline_config("contextual_precision", res["warehouse"], res["judge"], res["thresholds"])
    assert cfg.judge_samples == 5
    # ``samples``, the resource field's former name, still configures it (kept for existing configs)
    old = res["judge"].model_copy(update={"samples": 3})
    assert build_pipeline_config("contextual_precision", res["warehouse"], old, res["thresholds"]).judge_samples == 3


def test_airflow_operator_judge_samples(monkeypatch, tmp_path):
    pytest.importorskip("airflow")
    from ctxprec_ops.airflow.operators import ContextualPrecisionOperator

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows()[:1])
    op = ContextualPrecisionOperator(
        task_id="t", warehouse_conn_id=None, warehouse_url=url, judge="lexical", judge_samples="3"
    )
    assert "judge_samples" in op.template_fields
    assert op.pipeline_config().judge_samples == 3
    from airflow.sdk.exceptions import AirflowFailException

    bad = ContextualPrecisionOperator(
        task_id="t2", warehouse_conn_id=None, warehouse_url=url, judge="lexical", judge_samples="4"
    )
    with pytest.raises(AirflowFailException, match="judge_samples must be an odd"):
        bad.pipeline_config()


def test_calibrate_a_sampled_judge_gets_its_own_row(judge_server, tmp_path):
    from ctxprec_ops.calibration import parse_labels
    from ctxprec_ops.calibration.run import calibrate
    from ctxprec_ops.judge.models import OpenAIJudge

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows())
    # the labels call every B node relevant: one answer says no, the majority of 3 says yes
    labels = parse_labels(
        "log_id,node,relevant\n" + "".join(f"{i},1,1\n{i},2,1\n{i},3,0\n" for i in range(1, 5)), "b.csv"
    )
    judge = OpenAIJudge("judge-test-model", base_url=judge_server.base_url, api_key="sk-test")
    [one] = calibrate(url, labels, [judge], resamples=20)
    judge_server.choice_oracles = [flip_node_b, flip_node_b, default_oracle]
    [three] = calibrate(url, labels, [judge], resamples=20, samples=3)
    assert one.agreement.recall.value == pytest.approx(0.5) and three.agreement.recall.value == pytest.approx(1.0)
    assert three.prompt_version == one.prompt_version + "+samples=3"
    assert three.judge_calls == 4 and three.completion_tokens > 2 * one.completion_tokens
    with get_engine(url).connect() as conn:
        stored = sorted(r[0] for r in conn.execute(sa.text("SELECT prompt_version FROM ctxprec_calibrations")))
    assert stored == sorted([one.prompt_version, three.prompt_version])
    with pytest.raises(ValueError, match="samples must be an odd"):
        calibrate(url, labels, [judge], samples=2)
