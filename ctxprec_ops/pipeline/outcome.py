"""The one outcome policy: from a run's result (or the error that ended it) to ``done`` /
``retry`` / ``fail``. The CLI's exit code, the Airflow operators (retried exception vs
``AirflowFailException``) and the Dagster asset (``Failure(allow_retries=...)``) all map from it.

| what happened                                             | outcome | CLI | Airflow      | Dagster       |
|-----------------------------------------------------------|---------|-----|--------------|---------------|
| ``succeeded`` (bad-input rows are recorded, not retried)  | done    | 0   | task succeeds| materialized  |
| ``partial``/``failed`` with judge failures (outage, bad answers) | retry | 1 | retried    | RetryPolicy   |
| ``partial`` with rows unaccounted for (the ledger)        | retry   | 1   | retried      | RetryPolicy   |
| ``judge_configuration`` / ``judge_request_rejected`` failures | fail | 1 | failed at once | no retry |
| ``budget_exhausted`` (``max_cost`` reached)               | fail    | 4   | failed at once | no retry    |
| not retryable (bad names, no table, bad partition, ValueError) | fail | 1 (2: usage) | failed at once | no retry |
| any other error (warehouse or network down, ...)          | retry   | 1   | retried      | RetryPolicy   |
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import BudgetExhaustedError, CtxPrecError, JudgeConfigurationError, JudgeRequestRejectedError
from ..secrets import redact
from .records import INPUT_PROBLEMS, ChunkResult, RunStatus, RunSummary, run_status

__all__ = [
    "Outcome",
    "Decision",
    "decide",
    "decide_error",
    "unaccounted_text",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_BUDGET",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BUDGET = 4

#: failure types no retry can fix (the row is fine, the configuration is not)
_PERMANENT_FAILURES = frozenset({JudgeConfigurationError.error_type, JudgeRequestRejectedError.error_type})


class Outcome(str, Enum):
    DONE = "done"
    RETRY = "retry"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    #: one secret-free line for logs, the CLI's stderr and the orchestrators' failure text
    reason: str
    exit_code: int

    @property
    def retryable(self) -> bool:
        return self.outcome is Outcome.RETRY


def decide(result: RunSummary | ChunkResult) -> Decision:
    """The decision for a finished partition run (or one chunk, as Airflow scores them)."""
    failures = dict(result.failures_by_type)
    if isinstance(result, RunSummary):
        status = RunStatus(result.status)
        where = f"partition {result.partition_key}"
    else:
        status = run_status(result.rows_scored, failures)
        where = f"chunk {result.index} of {result.partition_key}"
    waiting = getattr(result, "waiting", None)
    if status is RunStatus.WAITING and waiting is not None:
        ids = ", ".join(waiting.ids)
        return Decision(
            Outcome.RETRY, f"{where} waiting for {len(waiting.ids)} {waiting.transport} job(s): {ids}", EXIT_ERROR
        )
    other = {t: n for t, n in failures.items() if t not in INPUT_PROBLEMS}
    bad_input = sum(n for t, n in failures.items() if t in INPUT_PROBLEMS)
    if isinstance(result, RunSummary) and result.rows_unaccounted and status is not RunStatus.BUDGET_EXHAUSTED:
        return Decision(Outcome.RETRY, f"{where} incomplete: {unaccounted_text(result)}", EXIT_ERROR)
    if status in (RunStatus.SUCCEEDED, RunStatus.PARTIAL) and not other:
        note = f"; {bad_input} row(s) recorded as bad input" if bad_input else ""
        return Decision(Outcome.DONE, f"{where} complete{note}", EXIT_OK)
    detail = ", ".join(f"{t}: {n}" for t, n in sorted(other.items())) or status.value
    message = getattr(result, "error_message", None)
    suffix = f": {redact(message)}" if message else ""
    if status is RunStatus.BUDGET_EXHAUSTED:
        n = failures.get(BudgetExhaustedError.error_type, 0)
        return Decision(
            Outcome.FAIL,
            f"budget exhausted: {n} row(s) of {where} could not be afforded under "
            "max_cost; they are recorded as budget_exhausted failures and the next run picks them up",
            EXIT_BUDGET,
        )
    if _PERMANENT_FAILURES & set(other):
        why = (
            "the judge is misconfigured"
            if JudgeConfigurationError.error_type in other
            else "the judge endpoint refuses these requests as made"
        )
        return Decision(
            Outcome.FAIL, f"{where} incomplete ({status.value}; {detail}): {why}; fix it and re-run{suffix}", EXIT_ERROR
        )
    if message and message.startswith("judge unreachable"):
        # never reached (no such host, nothing listening): most often the endpoint setting; say what to check
        return Decision(
            Outcome.RETRY,
            f"{where} incomplete ({status.value}; {detail}){suffix}; check the judge endpoint (--judge-url / "
            "OPENAI_BASE_URL, or the judge's base_url) and that its server is running, then re-run",
            EXIT_ERROR,
        )
    return Decision(
        Outcome.RETRY,
        f"{where} incomplete ({status.value}; {detail}); re-run to retry the failed rows{suffix}",
        EXIT_ERROR,
    )


def unaccounted_text(result: RunSummary) -> str:
    """One line on a run's unaccounted rows, naming the first few ids."""
    n = result.rows_unaccounted
    ids = ", ".join(repr(i[:60]) for i in result.unaccounted_ids)
    more = "" if len(result.unaccounted_ids) >= n else ", ..."
    named = f" (ids {ids}{more})" if ids else ""
    return (
        f"{n} row(s) of the source in neither ctxprec_scores nor ctxprec_failures{named}; "
        "re-run the partition to score them"
    )


def decide_error(exc: BaseException) -> Decision:
    """The decision for an error that ended a run before it had a result."""
    text = redact(f"{type(exc).__name__}: {exc}").splitlines()
    line = text[0] if text else type(exc).__name__
    if isinstance(exc, CtxPrecError):
        retryable = bool(exc.retryable)
        usage = getattr(exc, "error_type", "") in ("usage", "invalid_partition")
    else:
        # a programming or configuration error does not heal by itself; anything else (a
        # warehouse or network outage, a killed connection) may
        retryable = not isinstance(exc, (ValueError, TypeError, LookupError, AttributeError, NotImplementedError))
        usage = False
    if retryable:
        return Decision(Outcome.RETRY, line, EXIT_ERROR)
    return Decision(Outcome.FAIL, line, EXIT_USAGE if usage else EXIT_ERROR)
