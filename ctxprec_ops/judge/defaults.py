"""The judge layer's defaults, each written once: the metric API (``evaluate``, the metrics), the
judge models, ``PipelineConfig`` and ``ctxprec_ops.config.Settings`` (the ``CTXPREC_*`` variables)
all take them from here. No imports: the CLI's ``--help`` shows them without loading anything."""

from collections.abc import Callable

__all__ = [
    "CALIBRATION_NODES",
    "CONCURRENCY",
    "configured_judge",
    "LLM_JUDGE",
    "JUDGE_TIMEOUT",
    "MAX_NODES_PER_CALL",
    "MAX_RETRIES",
    "OUTAGE_TOLERANCE",
    "RETRY_INITIAL_WAIT",
    "RETRY_MAX_WAIT",
]

#: a judge cascade with a target agreement: nodes of the calibration sample judged by both judges
CALIBRATION_NODES = 300
#: the LLM judge a run uses when none is named and an OpenAI key is set (else the offline ``lexical``)
LLM_JUDGE = "gpt-4o-mini"
#: judge requests in flight at most
CONCURRENCY = 16
#: seconds one judge request may take
JUDGE_TIMEOUT = 60.0
#: nodes one judge call judges at most (longer lists are judged in groups)
MAX_NODES_PER_CALL = 20
#: retries of a judge call that failed transiently (429, 5xx, timeouts, connection errors)
MAX_RETRIES = 6
#: seconds before the first retry (exponential backoff with full jitter from there)
RETRY_INITIAL_WAIT = 0.5
#: the longest wait between two retries, also the cap on a server's ``Retry-After``
RETRY_MAX_WAIT = 30.0
#: seconds a judge outage is waited out (pause, probe, resume) before a run's remaining rows fail
OUTAGE_TOLERANCE = 600.0


#: the judge ``make_judge(None)`` (the metric API's ``model=None``) names: the package
#: (``ctxprec_ops/__init__.py``) sets it to the configured default judge — ``CTXPREC_JUDGE``, else by
#: ``OPENAI_API_KEY`` (``ctxprec_ops.config``) — so the judge layer itself reads no configuration
def _offline() -> str:
    return "lexical"


configured_judge: Callable[[], str] = _offline
