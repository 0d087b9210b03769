"""``ctxprec check`` counts the failures of the checked population only: a run of another judge
(dead: nothing listens at its address) with another column mapping fails every row of the
partition, and the default population's check neither counts those failures nor alerts on them —
whether the default population scored the partition, an earlier day, or nothing yet. The failed
run's own population, checked by name, still reports them."""

from __future__ import annotations

import json
import socket

import pytest

from ctxprec_ops.cli import main
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, day_rows

P, BEFORE = "2026-11-28", "2026-11-27"
OTHER_MAPPING = ["--column", "actual_output=expected_output"]


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.fixture
def url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(40, BEFORE) + day_rows(40, P, start_id=100))
    return url


def _dead_run(url: str, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_dead_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    args = ["score", "--warehouse", url, "--partition", P, "--judge", "gpt-4o-mini", *OTHER_MAPPING]
    assert main([*args, "--outage-tolerance", "0.5", "--quiet"]) == 1  # every row failed
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    capsys.readouterr()


def _check(url: str, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["check", "--warehouse", url, "--partition", P, "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("default_scored", ["the partition", "an earlier day", "nothing"])
def test_another_populations_failed_run_is_not_the_checked_populations_failure(
    url, monkeypatch, capsys, default_scored
):
    if default_scored == "the partition":
        assert main(["score", "--warehouse", url, "--partition", P, "--quiet"]) == 0
    elif default_scored == "an earlier day":
        assert main(["score", "--warehouse", url, "--partition", BEFORE, "--quiet"]) == 0
    _dead_run(url, monkeypatch, capsys)

    code, result = _check(url, capsys)
    figures = result["figures"]
    assert figures["rows"] == 40 and figures["rows_failed"] == 0, figures
    assert "failure_rate" not in [a["rule"] for a in result["alerts"]]
    if default_scored == "the partition":
        assert code == 0 and result["judge_model"] == "lexical"

    # the failed run's own population, named, reports its failures
    code, own = _check(url, capsys, "--judge-model", "gpt-4o-mini", *OTHER_MAPPING)
    assert own["figures"]["rows_failed"] == 40 and code == 3
    assert [a["rule"] for a in own["alerts"]] == ["failure_rate"]
    assert "40 of 40 rows failed" in own["alerts"][0]["message"]
