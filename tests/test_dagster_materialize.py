"""The Dagster assets and checks, run for real: ``materialize()`` in-process on an ephemeral
instance, SQLite and PostgreSQL warehouses, the local OpenAI-compatible judge server.

The judge server's default oracle calls a node relevant iff its text contains the word RELEVANT,
so each seeded row's expected score is known from where its RELEVANT nodes are ranked.
"""

import json
import os
from datetime import datetime, timedelta

os.environ.setdefault("CTXPREC_DAGSTER_RETRY_DELAY", "0.2")  # before dagster_defs builds its RetryPolicy

import pytest
import sqlalchemy as sa
from dagster import AssetCheckSeverity, DagsterInstance, materialize

from ctxprec_ops.dagster import build_scores_asset, scoring_retry_policy
from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from ctxprec_ops.scoring.formula import contextual_precision
from dagster_defs.definitions import log_tables, score_checks, scores_assets
from tests.fixtures.warehouse_data import query

retrieval_logs, conversation_logs = log_tables
contextual_precision_scores = scores_assets["contextual_precision"]
turn_contextual_precision_scores = scores_assets["turn_contextual_precision"]

R, N = "RELEVANT: the refund window is 30 days.", "unrelated text about the weather"
GOOD = [[R, N, N], [R, R, N], [R, N, R], [N, R, N]]  # scores 1, 1, 0.833, 0.5
BAD = [[N, N, R], [N, N, N, R], [N, R, N], [N, N, R, R]]  # scores 0.333, 0.25, 0.5, 0.417
CP_CHECKS = score_checks[0]

_logs = sa.MetaData()
LOGS = sa.Table(
    "retrieval_logs",
    _logs,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("event_time", sa.DateTime()),
    sa.Column("input", sa.Text),
    sa.Column("actual_output", sa.Text),
    sa.Column("expected_output", sa.Text),
    sa.Column("retrieval_context", sa.JSON),
)
CONVERSATIONS = sa.Table(
    "conversation_logs",
    _logs,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("event_time", sa.DateTime()),
    sa.Column("turns", sa.JSON),
    sa.Column("expected_outcome", sa.Text),
)


def expected_score(nodes: list[str]) -> float:
    return contextual_precision([n == R for n in nodes])


def seed(url: str, day: str, contexts: list[list[str]], *, prefix: str | None = None, bad_rows: int = 0) -> None:
    """Insert one row per retrieval context on ``day`` (UTC), plus ``bad_rows`` rows with no context."""
    engine = sa.create_engine(url)
    _logs.create_all(engine)
    t0 = datetime.fromisoformat(day)
    prefix = prefix or day
    rows = [
        {
            "id": f"{prefix}-{i}",
            "event_time": t0 + timedelta(minutes=7 * i),
            "input": f"How long is the refund window? ({prefix} #{i})",
            "actual_output": "30 days.",
            "expected_output": "Refunds are accepted within 30 days.",
            "retrieval_context": ctx,
        }
        for i, ctx in enumerate(contexts)
    ]
    rows += [
        {
            "id": f"{prefix}-bad-{i}",
            "event_time": t0 + timedelta(hours=20, minutes=i),
            "input": "q",
            "actual_output": None,
            "expected_output": "a",
            "retrieval_context": [],
        }
        for i in range(bad_rows)
    ]
    with engine.begin() as conn:
        conn.execute(LOGS.insert(), rows)
    engine.dispose()


def resources(url: str, judge_server, **thresholds) -> dict:
    return {
        "warehouse": WarehouseResource(url=url),
        "judge": JudgeResource(
            model="judge-test-model",
            base_url=judge_server.base_url,
            api_key="test-key",
            timeout=5.0,
            max_retries=1,
            concurrency=4,
        ),
        "thresholds": AlertThresholdsResource(**thresholds),
    }


def run(assets: list, url: str, judge_server, partition: str, *, instance=None, **thresholds):
    """Materialize ``assets`` (plus the source specs) for one partition; never raises."""
    own = instance is None
    instance = instance or DagsterInstance.ephemeral()
    try:
        return materialize(
            [retrieval_logs, conversation_logs, *assets],
            instance=instance,
            partition_key=partition,
            resources=resources(url, judge_server, **thresholds),
            raise_on_error=False,
        )
    finally:
        if own:
            instance.dispose()


def metadata_of(result, asset_name: str) -> dict:
    (mat,) = result.asset_materializations_for_node(asset_name)
    return {k: v.value for k, v in mat.metadata.items()}


def checks_of(result) -> dict:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'warehouse.db'}"


# -- the asset ---------------------------------------------------------------------------------


def _scores_written_with_numeric_metadata(url: str, judge_server) -> None:
    day = "2026-11-20"
    seed(url, day, GOOD * 3, bad_rows=2)
    seed(url, "2026-11-21", GOOD)  # another day: must not be touched
    result = run([contextual_precision_scores], url, judge_server, day)
    assert result.success

    md = metadata_of(result, "contextual_precision_scores")
    for key in ("rows_total", "rows_scored", "rows_failed", "rows_cached", "prompt_tokens", "completion_tokens"):
        assert isinstance(md[key], int), key
    for key in ("mean_score", "pass_rate", "ci_low", "ci_high"):
        assert isinstance(md[key], float), key
    assert md["rows_total"] == 14 and md["rows_scored"] == 12 and md["rows_failed"] == 2
    assert md["status"] == "succeeded" and md["completed"] is True  # bad input is recorded, not retried
    want = [expected_score(c) for c in GOOD * 3]
    assert md["mean_score"] == pytest.approx(sum(want) / len(want))
    assert md["pass_rate"] == pytest.approx(sum(s >= 0.5 for s in want) / len(want))
    assert md["ci_low"] <= md["mean_score"] <= md["ci_high"]
    assert md["prompt_tokens"] > 0 and md["completion_tokens"] > 0
    assert md["judge_model"] == "judge-test-model" and md["prompt_version"]
    assert "test-key" not in json.dumps({k: str(v) for k, v in md.items()})

    rows = query(url, "SELECT log_id, score, partition_key, run_id FROM ctxprec_scores ORDER BY log_id")
    assert len(rows) == 12 and {r[2] for r in rows} == {day}
    assert {r[3] for r in rows} == {result.run_id}  # the Dagster run id is the ctxprec run id
    by_id = {r[0]: r[1] for r in rows}
    for i, ctx in enumerate(GOOD * 3):
        assert by_id[f"{day}-{i}"] == pytest.approx(expected_score(ctx))
    assert query(url, "SELECT count(*) FROM ctxprec_failures")[0][0] == 2
    assert query(url, "SELECT status, rows_total FROM ctxprec_runs WHERE run_id = :r", r=result.run_id) == [
        ("succeeded", 14)
    ]


def test_sqlite_materialize_writes_scores_and_numeric_metadata(sqlite_url, judge_server):
    _scores_written_with_numeric_metadata(sqlite_url, judge_server)


def test_postgres_materialize_writes_scores_and_numeric_metadata(pg_url, judge_server):
    _scores_written_with_numeric_metadata(pg_url, judge_server)


def test_rematerializing_a_partition_creates_no_duplicates(sqlite_url, judge_server):
    day = "2026-11-20"
    seed(sqlite_url, day, GOOD * 2)
    with DagsterInstance.ephemeral() as instance:
        first = run([contextual_precision_scores], sqlite_url, judge_server, day, instance=instance)
        calls = judge_server.calls
        second = run([contextual_precision_scores], sqlite_url, judge_server, day, instance=instance)
    assert first.success and second.success
    assert query(sqlite_url, "SELECT count(*), count(DISTINCT log_id) FROM ctxprec_scores") == [(8, 8)]
    assert judge_server.calls == calls  # nothing judged twice: the judgment cache answered
    md = metadata_of(second, "contextual_precision_scores")
    assert md["rows_total"] == 8 and md["rows_failed"] == 0
    assert md["mean_score"] == pytest.approx(metadata_of(first, "contextual_precision_scores")["mean_score"])
    assert query(sqlite_url, "SELECT count(*) FROM ctxprec_runs") == [(2,)]  # one row per partition run


def test_turn_metric_asset_scores_conversations(sqlite_url, judge_server):
    day = "2026-11-20"
    engine = sa.create_engine(sqlite_url)
    _logs.create_all(engine)
    turns = [
        {"role": "user", "content": "How long is the refund window?"},
        {"role": "assistant", "content": "30 days.", "retrieval_context": [N, R]},
        {"role": "user", "content": "And for sale items?"},
        {"role": "assistant", "content": "Also 30 days.", "retrieval_context": [R, N]},
    ]
    with engine.begin() as conn:
        conn.execute(
            CONVERSATIONS.insert(),
            [
                {
                    "id": f"c{i}",
                    "event_time": datetime(2026, 11, 20, 9 + i),
                    "turns": turns,
                    "expected_outcome": "The user learns the refund window is 30 days.",
                }
                for i in range(3)
            ],
        )
    engine.dispose()
    result = run([turn_contextual_precision_scores], sqlite_url, judge_server, day)
    assert result.success
    md = metadata_of(result, "turn_contextual_precision_scores")
    assert md["rows_total"] == 3 and md["rows_scored"] == 3
    rows = query(sqlite_url, "SELECT metric, score FROM ctxprec_scores")
    assert len(rows) == 3 and {r[0] for r in rows} == {"turn_contextual_precision"}
    assert all(0.0 < r[1] < 1.0 for r in rows)  # one window puts its relevant node second


def test_transient_judge_outage_is_survived_by_the_retry_policy(sqlite_url, judge_server):
    """Attempt 1 meets a dead judge: the judge server answers HTTP 500 to its four requests (one
    per row; the pipeline's per-request retries are off here, so the outage outlasts them),
    every row fails, the run's status is ``failed`` and the step fails. Dagster's RetryPolicy
    re-runs the step after its backoff and attempt 2 scores the partition."""
    day = "2026-11-20"
    seed(sqlite_url, day, GOOD)
    asset = build_scores_asset("contextual_precision", retry_policy=scoring_retry_policy(delay=0.2, max_retries=3))
    res = resources(sqlite_url, judge_server)
    res["judge"] = JudgeResource(
        model="judge-test-model", base_url=judge_server.base_url, api_key="test-key", timeout=5.0, max_retries=0
    )
    judge_server.script(["500"] * len(GOOD))
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [retrieval_logs, asset], instance=instance, partition_key=day, resources=res, raise_on_error=False
        )
    kinds = [e.event_type_value for e in result.all_events]
    assert result.success, kinds
    assert kinds.count("STEP_UP_FOR_RETRY") == 1 and "STEP_RESTARTED" in kinds
    assert judge_server.outcomes["500"] == len(GOOD) and judge_server.outcomes["ok"] == len(GOOD)
    runs = query(sqlite_url, "SELECT run_id, status, rows_failed FROM ctxprec_runs ORDER BY started_at")
    assert [(r[1], r[2]) for r in runs] == [("failed", 4), ("succeeded", 0)]
    assert runs[1][0] == f"{result.run_id}.retry1"  # each attempt is its own ctxprec run
    assert query(sqlite_url, "SELECT count(*) FROM ctxprec_scores") == [(4,)]
    assert query(sqlite_url, "SELECT count(*) FROM ctxprec_failures") == [(0,)]  # the retry cleared them
    md = metadata_of(result, "contextual_precision_scores")
    assert md["status"] == "succeeded" and md["rows_scored"] == 4


def test_misconfiguration_fails_at_once_without_retries(tmp_path, judge_server):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    seed(url, "2026-11-20", GOOD)
    asset = build_scores_asset("contextual_precision", retry_policy=scoring_retry_policy(delay=5.0, max_retries=3))
    res = resources(url, judge_server)
    res["warehouse"] = WarehouseResource(url=url, source_table="no_such_table")
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [asset], instance=instance, partition_key="2026-11-20", resources=res, raise_on_error=False
        )
    kinds = [e.event_type_value for e in result.all_events]
    assert not result.success and "STEP_UP_FOR_RETRY" not in kinds
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "no_such_table" in failure.step_failure_data.error.message


# -- the checks --------------------------------------------------------------------------------


def test_checks_pass_on_good_data_and_fail_with_the_right_severity(sqlite_url, judge_server):
    """Seven good days build the baseline; a bad day breaches the threshold (ERROR, blocking:
    the run fails) and regresses (WARN); a thin good day is a volume drop (WARN)."""
    days = [f"2026-11-{d:02d}" for d in range(10, 19)]
    for d in days[:7]:
        seed(sqlite_url, d, GOOD * 3)
    seed(sqlite_url, days[7], BAD * 3)
    seed(sqlite_url, days[8], GOOD[:2])
    assets = [contextual_precision_scores, CP_CHECKS]
    results = {}
    with DagsterInstance.ephemeral() as instance:
        for d in days:
            results[d] = run(assets, sqlite_url, judge_server, d, instance=instance, min_mean=0.6)

    good = checks_of(results[days[6]])
    assert results[days[6]].success
    assert set(good) == {"threshold", "regression", "volume"} and all(e.passed for e in good.values())
    assert good["threshold"].metadata["mean_score"].value >= 0.6
    assert good["regression"].metadata["baseline_cases"].value == 6 * 12

    bad = checks_of(results[days[7]])
    assert not results[days[7]].success  # blocking ERROR check fails the run ...
    assert metadata_of(results[days[7]], "contextual_precision_scores")["rows_scored"] == 12  # ... after scoring
    assert not bad["threshold"].passed and bad["threshold"].severity == AssetCheckSeverity.ERROR
    assert bad["threshold"].blocking and bad["threshold"].partition == days[7]
    assert bad["threshold"].metadata["mean_score"].value < 0.6 == bad["threshold"].metadata["min_mean"].value
    assert not bad["regression"].passed and bad["regression"].severity == AssetCheckSeverity.WARN
    assert bad["regression"].metadata["p_value"].value < 0.01
    assert bad["regression"].metadata["drop"].value > 0.05
    assert bad["volume"].passed

    thin = checks_of(results[days[8]])
    assert results[days[8]].success  # WARN checks never fail the run
    assert thin["threshold"].passed
    assert not thin["volume"].passed and thin["volume"].severity == AssetCheckSeverity.WARN
    assert thin["volume"].metadata["rows"].value == 2
    assert thin["volume"].metadata["baseline_median_rows"].value == 12


def test_backfill_partitions_are_independent(sqlite_url, judge_server):
    """A backfill runs one partition per run (BackfillPolicy), in any order: a day whose judge
    is down fails alone, its neighbours are scored, and re-running it later completes it."""
    days = ["2026-11-01", "2026-11-02", "2026-11-03"]
    for d in days:
        seed(sqlite_url, d, GOOD)
    asset = build_scores_asset("contextual_precision", retry_policy=scoring_retry_policy(delay=0.1, max_retries=0))
    res = resources(sqlite_url, judge_server)
    res["judge"] = JudgeResource(
        model="judge-test-model", base_url=judge_server.base_url, api_key="test-key", timeout=5.0, max_retries=0
    )

    def one(day: str, instance):
        return materialize(
            [retrieval_logs, asset], instance=instance, partition_key=day, resources=res, raise_on_error=False
        )

    with DagsterInstance.ephemeral() as instance:
        ok3 = one(days[2], instance)
        judge_server.script(["500"] * len(GOOD))
        down = one(days[1], instance)
        ok1 = one(days[0], instance)
        per_day = dict(query(sqlite_url, "SELECT partition_key, count(*) FROM ctxprec_scores GROUP BY partition_key"))
        again = one(days[1], instance)
        assert instance.get_latest_materialization_event(asset.key) is not None
    assert ok3.success and ok1.success and not down.success and again.success
    assert per_day == {days[0]: 4, days[2]: 4}
    assert dict(query(sqlite_url, "SELECT partition_key, count(*) FROM ctxprec_scores GROUP BY partition_key")) == {
        d: 4 for d in days
    }


def test_api_key_never_reaches_events_or_metadata(sqlite_url, judge_server):
    secret = "sk-proj-Secret0123456789abcdef"
    judge_server.api_key = secret  # the server rejects any other key
    seed(sqlite_url, "2026-11-20", GOOD)
    res = resources(sqlite_url, judge_server)
    res["judge"] = JudgeResource(model="judge-test-model", base_url=judge_server.base_url, api_key=secret, timeout=5.0)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [retrieval_logs, contextual_precision_scores], instance=instance, partition_key="2026-11-20", resources=res
        )
        logs = instance.all_logs(result.run_id)
    assert result.success and judge_server.auth_headers[0] == f"Bearer {secret}"
    assert logs and not [e for e in logs if secret in str(e)]
    assert query(sqlite_url, "SELECT count(*) FROM ctxprec_scores") == [(4,)]
