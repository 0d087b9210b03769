"""Exception types. Every message is written for the person reading a failed run."""

from __future__ import annotations


class CtxPrecError(Exception):
    """Base class of every error ctxprec-ops raises on purpose."""

    #: short machine-readable category, stored in ``ctxprec_failures.error_type``
    error_type = "error"
    #: whether running the same thing again can succeed (an orchestrator retry): True for
    #: transient causes, False for configuration and input problems (see pipeline/outcome.py)
    retryable = True


class InvalidTestCaseError(CtxPrecError, ValueError):
    """A test case cannot be scored as given (missing or malformed fields).

    Raised before any judge call: an invalid case never costs money.
    """

    error_type = "invalid_input"
    retryable = False


class JudgeAnswerError(CtxPrecError):
    """The judge's answer could not be mapped onto the nodes, even after repair."""

    error_type = "judge_answer_invalid"


class JudgeUnavailableError(CtxPrecError):
    """The judge endpoint kept failing (rate limits, 5xx, timeouts) after all retries."""

    error_type = "judge_unavailable"


class JudgeConfigurationError(CtxPrecError, ValueError):
    """The judge is misconfigured (unknown model name, missing key, bad endpoint)."""

    error_type = "judge_configuration"
    retryable = False


class JudgeAnswersUnusableError(JudgeConfigurationError):
    """The judge's answers are systematically unusable (every answer of several cases in a row
    failed the same way: node ids from 0, ``relevant`` not a boolean, empty answers): the judge
    does not follow the answer format. The remaining rows are not sent; a configuration error,
    so the outcome policy fails the run instead of having an orchestrator retry it (a retry would
    pay for the same unusable answers again)."""


class JudgeRequestRejectedError(CtxPrecError):
    """The judge endpoint refused the request as made (HTTP 400/403/413/422 other than an
    unsupported response format): asking again would get the same answer."""

    error_type = "judge_request_rejected"
    retryable = False


class JudgeDeferredError(CtxPrecError):
    """The judge's answer is not there yet: the request was handed to a deferred transport (the
    Batch API) and is answered in a later pass of the same run. A deferred case is written
    neither as a score nor as a failure; the run waits, then judges it again."""

    error_type = "deferred"


class BudgetExhaustedError(CtxPrecError):
    """The run's ``max_cost`` did not leave enough budget to judge this case."""

    error_type = "budget_exhausted"
    retryable = False


class NotScorableError(CtxPrecError, ValueError):
    """The case is well formed but there is nothing to score (e.g. no retrieval at all)."""

    error_type = "not_scorable"
    retryable = False


class IdentifierError(CtxPrecError, ValueError):
    """A configured table or column name is not a safe SQL identifier."""

    error_type = "invalid_identifier"
    retryable = False


def one_line(exc: BaseException) -> str:
    """``Type: first line`` of ``exc``; for a driver error wrapped by SQLAlchemy, the driver's
    error and its first line only (never the SQL statement or its parameters, which may hold row
    data). Not redacted: pass it through ``secrets.redact``."""
    orig = getattr(exc, "orig", None)
    target = orig if isinstance(orig, BaseException) else exc
    lines = [line.strip() for line in str(target).splitlines() if line.strip()]
    return f"{type(target).__name__}: {lines[0]}" if lines else type(target).__name__
