"""One outcome policy: the CLI's exit code, the Airflow operators and the Dagster asset take the
same done / retry / fail decision for the same run results and errors (pipeline/outcome.py)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from dagster import Failure
from sqlalchemy.exc import OperationalError

from ctxprec_ops.airflow.operators import ContextualPrecisionOperator
from ctxprec_ops.cli._args import UsageError, fail
from ctxprec_ops.cli.score import _exit_code
from ctxprec_ops.dagster.assets import _error_failure, apply_decision
from ctxprec_ops.errors import IdentifierError, JudgeConfigurationError, JudgeUnavailableError
from ctxprec_ops.pipeline import ChunkResult, Outcome, RunSummary, decide, decide_error
from ctxprec_ops.warehouse.source import PartitionKeyError, SourceTableError


def summary(status: str, failures: dict[str, int] | None = None, scored: int = 10, unaccounted: int = 0) -> RunSummary:
    failures = failures or {}
    return RunSummary(
        rows_unaccounted=unaccounted,
        unaccounted_ids=[f"id-{i}" for i in range(min(unaccounted, 5))],
        run_id="r",
        partition_key="2026-11-28",
        metric="contextual_precision",
        status=status,
        rows_total=scored + sum(failures.values()),
        rows_scored=scored,
        rows_failed=sum(failures.values()),
        failures_by_type=failures,
    )


RESULTS = {
    "succeeded": (summary("succeeded"), Outcome.DONE),
    "succeeded with bad input": (summary("succeeded", {"invalid_input": 3, "not_scorable": 1}), Outcome.DONE),
    "partial, rows unaccounted for": (summary("partial", unaccounted=2), Outcome.RETRY),
    "partial, judge outage": (summary("partial", {"judge_unavailable": 2, "invalid_input": 1}), Outcome.RETRY),
    "partial, bad judge answers": (summary("partial", {"judge_answer_invalid": 1}), Outcome.RETRY),
    "failed, judge outage": (summary("failed", {"judge_unavailable": 5}, scored=0), Outcome.RETRY),
    "failed, judge misconfigured": (summary("failed", {"judge_configuration": 5}, scored=0), Outcome.FAIL),
    "budget exhausted": (summary("budget_exhausted", {"budget_exhausted": 4}), Outcome.FAIL),
    "chunk with an outage": (
        ChunkResult(
            "2026-11-28", 3, rows_total=5, rows_scored=4, rows_failed=1, failures_by_type={"judge_unavailable": 1}
        ),
        Outcome.RETRY,
    ),
    "chunk with bad input": (
        ChunkResult("2026-11-28", 0, rows_total=5, rows_scored=4, rows_failed=1, failures_by_type={"invalid_input": 1}),
        Outcome.DONE,
    ),
}

ERRORS = {
    "judge down": (JudgeUnavailableError("connection refused"), Outcome.RETRY),
    "warehouse down": (OperationalError("select 1", {}, Exception("could not connect")), Outcome.RETRY),
    "network": (ConnectionError("reset by peer"), Outcome.RETRY),
    "judge misconfigured": (JudgeConfigurationError("no API key"), Outcome.FAIL),
    "bad identifier": (IdentifierError("bad name"), Outcome.FAIL),
    "missing table": (SourceTableError("no such table"), Outcome.FAIL),
    "bad partition": (PartitionKeyError("not a date"), Outcome.FAIL),
    "usage": (UsageError("--workers must be at least 1"), Outcome.FAIL),
    "plain TypeError": (TypeError("unexpected keyword"), Outcome.FAIL),
    "plain ValueError": (ValueError("bad number"), Outcome.FAIL),
    "unexpected": (RuntimeError("something broke"), Outcome.RETRY),
}


def airflow_outcome(thing: object) -> Outcome:
    op = ContextualPrecisionOperator(task_id="score_chunk")
    try:
        if isinstance(thing, BaseException):

            def boom() -> None:
                raise thing

            op._call(boom)
        else:
            op.finish(thing)  # type: ignore[arg-type]
    except AirflowFailException:
        return Outcome.FAIL
    except Exception:
        return Outcome.RETRY
    return Outcome.DONE


def dagster_outcome(thing: object) -> Outcome:
    try:
        if isinstance(thing, BaseException):
            try:
                raise thing
            except BaseException as exc:
                raise _error_failure(exc, "contextual_precision", "2026-11-28") from None
        apply_decision(decide(thing))  # type: ignore[arg-type]
    except Failure as failure:
        return Outcome.RETRY if failure.allow_retries else Outcome.FAIL
    return Outcome.DONE


def cli_exit_code(thing: object) -> int:
    if isinstance(thing, BaseException):
        return fail("score", thing)
    return _exit_code(thing)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(RESULTS))
def test_every_entry_point_takes_the_same_decision_on_a_result(name: str) -> None:
    result, expected = RESULTS[name]
    decision = decide(result)
    assert decision.outcome is expected
    assert airflow_outcome(result) is expected
    assert dagster_outcome(result) is expected
    code = cli_exit_code(result)
    assert code == decision.exit_code
    assert (code == 0) == (expected is Outcome.DONE)
    if name == "budget exhausted":
        assert code == 4


@pytest.mark.parametrize("name", list(ERRORS))
def test_every_entry_point_takes_the_same_decision_on_an_error(name: str) -> None:
    exc, expected = ERRORS[name]
    assert decide_error(exc).outcome is expected
    assert airflow_outcome(exc) is expected
    assert dagster_outcome(exc) is expected
    code = cli_exit_code(exc)
    assert code != 0
    assert code == (2 if isinstance(exc, (UsageError, PartitionKeyError)) else 1)


def test_a_done_decision_names_the_recorded_bad_input() -> None:
    decision = decide(summary("succeeded", {"invalid_input": 3}))
    assert decision.outcome is Outcome.DONE and "3 row(s) recorded as bad input" in decision.reason


def test_a_retry_decision_says_what_failed_and_never_a_secret() -> None:
    from ctxprec_ops.secrets import register_secret

    register_secret("sk-outcome-secret-123")
    s = summary("partial", {"judge_unavailable": 2})
    s.error_message = "judge said 401 for key sk-outcome-secret-123"
    decision = decide(s)
    assert "judge_unavailable: 2" in decision.reason and "re-run" in decision.reason
    assert "sk-outcome-secret-123" not in decision.reason
