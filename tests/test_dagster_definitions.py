"""What ``dagster_defs`` declares: assets, partitions, retry and backfill policies, checks,
resources per deployment, the nightly schedule; and that Dagster's own tools load it
(``dagster definitions validate``, ``dagster dev``)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("CTXPREC_DAGSTER_RETRY_DELAY", "0.2")  # before dagster_defs builds its RetryPolicy

import pytest
from dagster import AssetKey, Backoff, Definitions, EnvVar, Jitter, build_schedule_context

from ctxprec_ops.dagster import build_daily_partitions, build_nightly_schedule
from ctxprec_ops.dagster.resources import JudgeResource, WarehouseResource, resources_for
from dagster_defs import defs
from dagster_defs.definitions import log_tables, score_checks, score_job, scores_assets
from tests.fixtures.isolation import clean_cwd

retrieval_logs, conversation_logs = log_tables
contextual_precision_scores = scores_assets["contextual_precision"]
turn_contextual_precision_scores = scores_assets["turn_contextual_precision"]
score_partition_job = score_job
nightly_schedule = build_nightly_schedule(score_job)

ROOT = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
SCORES = ("contextual_precision_scores", "turn_contextual_precision_scores")


def _graph():
    return defs.resolve_asset_graph()


def test_scores_assets_are_daily_utc_partitions_from_the_start_date():
    graph = _graph()
    for name in SCORES:
        node = graph.get(AssetKey(name))
        pd = node.partitions_def
        assert pd.timezone == "UTC" and pd.get_first_partition_key() == "2025-01-01"
        yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
        assert pd.get_last_partition_key() == yesterday  # today's partition exists once the day has ended


def test_start_date_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CTXPREC_START_DATE", "2026-03-01")
    assert build_daily_partitions().get_first_partition_key() == "2026-03-01"


def test_source_tables_are_upstream_for_lineage_only():
    graph = _graph()
    assert graph.get(AssetKey("contextual_precision_scores")).parent_keys == {AssetKey("retrieval_logs")}
    assert graph.get(AssetKey("turn_contextual_precision_scores")).parent_keys == {AssetKey("conversation_logs")}
    for source in ("retrieval_logs", "conversation_logs"):
        assert not graph.get(AssetKey(source)).is_materializable  # external: never loaded by an IO manager


def test_retry_policy_is_exponential_with_jitter_and_backfills_run_one_partition_per_run():
    for name in SCORES:
        assets_def = defs.resolve_assets_def(name)
        policy = assets_def.op.retry_policy
        assert policy.max_retries == 3 and policy.backoff == Backoff.EXPONENTIAL and policy.jitter == Jitter.PLUS_MINUS
        assert policy.delay == pytest.approx(float(os.environ["CTXPREC_DAGSTER_RETRY_DELAY"]))
        # no BackfillPolicy (beta: it warned on every load): Dagster's default is one run per partition
        assert assets_def.backfill_policy is None


def test_each_scores_asset_has_threshold_regression_and_volume_checks():
    graph = _graph()
    for name in SCORES:
        keys = {k for k in graph.asset_check_keys if k.asset_key == AssetKey(name)}
        assert {k.name for k in keys} == {"threshold", "regression", "volume"}
        blocking = {k.name: graph.get_check_spec(k).blocking for k in keys}
        assert blocking == {"threshold": True, "regression": False, "volume": False}


def test_local_deployment_is_sqlite_and_the_offline_judge(monkeypatch):
    for var in ("CTXPREC_WAREHOUSE_URL", "CTXPREC_JUDGE", "OPENAI_API_KEY", "CTXPREC_MIN_MEAN"):
        monkeypatch.delenv(var, raising=False)
    res = resources_for("local")
    assert res["warehouse"].url == "sqlite:///ctxprec.db" and res["judge"].model == "lexical"
    assert res["thresholds"].min_mean is None and res["thresholds"].threshold == 0.5

    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", "postgresql://etl:hunter2@db/warehouse")
    monkeypatch.setenv("CTXPREC_MIN_MEAN", "0.7")
    res = resources_for("local")
    assert isinstance(res["warehouse"].url, EnvVar)  # the URL (and its password) stays in the environment
    assert res["thresholds"].min_mean == 0.7


def test_production_deployment_reads_secrets_as_env_vars(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefghijklmnop")
    monkeypatch.setenv("CTXPREC_JUDGE", "gpt-4o-mini")
    monkeypatch.setenv("CTXPREC_CONCURRENCY", "4")
    res = resources_for("production")
    judge: JudgeResource = res["judge"]
    assert judge.model == "gpt-4o-mini" and judge.concurrency == 4
    assert isinstance(judge.api_key, EnvVar) and judge.api_key.env_var_name == "OPENAI_API_KEY"
    warehouse: WarehouseResource = res["warehouse"]
    assert isinstance(warehouse.url, EnvVar) and warehouse.url.env_var_name == "CTXPREC_WAREHOUSE_URL"
    assert "sk-live" not in json.dumps(judge._get_non_default_public_field_values(), default=str)


def test_unknown_deployment_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CTXPREC_DEPLOYMENT", "staging")
    with pytest.raises(ValueError, match="CTXPREC_DEPLOYMENT must be one of local, production"):
        resources_for()


@pytest.mark.parametrize(
    ("tick", "partition"),
    [
        (datetime(2026, 11, 29, 0, 0, tzinfo=UTC), "2026-11-28"),
        (datetime(2026, 12, 1, 0, 0, tzinfo=UTC), "2026-11-30"),
        (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), "2025-12-31"),
    ],
)
def test_nightly_schedule_targets_yesterdays_partition(tick, partition):
    schedule = defs.get_schedule_def("contextual_precision_nightly")
    assert schedule.cron_schedule == "0 0 * * *" and schedule.execution_timezone == "UTC"
    with build_schedule_context(scheduled_execution_time=tick) as context:
        data = schedule.evaluate_tick(context)
    assert [r.partition_key for r in data.run_requests] == [partition]
    job = defs.resolve_job_def(schedule.job_name)
    assert set(job.asset_layer.selected_asset_keys) == {AssetKey(n) for n in SCORES}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "PYTHONWARNINGS": "ignore"}
    env["CTXPREC_WAREHOUSE_URL"] = f"sqlite:///{tmp_path / 'wh.db'}"
    Path(env["DAGSTER_HOME"]).mkdir()
    return env


def test_dagster_definitions_validate(tmp_path):
    """The real CLI check, on the default (local) deployment."""
    proc = subprocess.run(
        [DAGSTER, "definitions", "validate", "-m", "dagster_defs"],
        cwd=clean_cwd(),  # an empty directory: dagster reads the .env of its cwd
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Validation successful for code location dagster_defs" in proc.stdout + proc.stderr


def test_production_resources_make_loadable_definitions(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-validate-123456")
    production = Definitions(
        assets=[*log_tables, *scores_assets.values()],
        asset_checks=score_checks,
        jobs=[score_partition_job],
        schedules=[nightly_schedule],
        resources=resources_for("production"),
    )
    Definitions.validate_loadable(production)
    assert defs.resolve_job_def("contextual_precision_job").partitions_def is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


@pytest.mark.skipif(
    os.environ.get("CTXPREC_SLOW_TESTS") != "1",
    reason="slow (~1 min: dagster dev starts three processes); run with CTXPREC_SLOW_TESTS=1",
)
def test_dagster_dev_loads_the_code_location(tmp_path):
    """Start ``dagster dev`` on a free port, wait for the webserver, ask GraphQL for the assets,
    then stop it (SIGINT, as Ctrl-C; its own process group is killed if it lingers)."""
    port = _free_port()
    log = (tmp_path / "dev.log").open("w")
    proc = subprocess.Popen(
        [DAGSTER, "dev", "-m", "dagster_defs", "-h", "127.0.0.1", "-p", str(port)],
        cwd=clean_cwd(),  # an empty directory: dagster reads the .env of its cwd
        env={**_env(tmp_path), "no_proxy": "127.0.0.1"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline, info = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as resp:
                    info = json.load(resp)
                break
            except OSError:
                time.sleep(0.5)
        assert info is not None, (tmp_path / "dev.log").read_text()[-3000:]
        assert info["dagster_version"].startswith("1.13")
        nodes = []
        while time.monotonic() < deadline and len(nodes) < 5:  # the code location loads after the webserver
            data = _graphql(port, "{ assetNodes { assetKey { path } isPartitioned } }").get("data") or {}
            nodes = data.get("assetNodes") or []
            time.sleep(0.5)
        keys = {n["assetKey"]["path"][0]: n["isPartitioned"] for n in nodes}
        assert keys == {
            "retrieval_logs": False,
            "conversation_logs": False,
            "contextual_precision_scores": True,
            "turn_contextual_precision_scores": True,
            "label_contextual_precision_scores": True,
        }
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
