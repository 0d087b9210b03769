"""Retry and backfill policies of the scoring assets.

The RetryPolicy covers what the pipeline's own per-request retries could not absorb: a judge
endpoint or warehouse that stays down for minutes. Each retry re-runs the whole partition, which
is cheap: rows already scored are upserted again from the judgment cache, never re-judged.
"""

import os

from dagster import Backoff, Jitter, RetryPolicy

__all__ = ["RETRY_DELAY_ENV", "RETRY_MAX_ENV", "scoring_retry_policy"]

RETRY_DELAY_ENV = "CTXPREC_DAGSTER_RETRY_DELAY"  # seconds before the first retry (default 30)
RETRY_MAX_ENV = "CTXPREC_DAGSTER_MAX_RETRIES"  # default 3


def scoring_retry_policy(delay: float | None = None, max_retries: int | None = None) -> RetryPolicy:
    """Exponential backoff with ± jitter: retry n waits (2ⁿ-1)·delay ± delay, i.e. ~1, 3, 7 × delay."""
    if delay is None:
        delay = float(os.environ.get(RETRY_DELAY_ENV) or 30.0)
    if max_retries is None:
        max_retries = int(os.environ.get(RETRY_MAX_ENV) or 3)
    if delay < 0 or max_retries < 0:
        raise ValueError(f"{RETRY_DELAY_ENV} and {RETRY_MAX_ENV} must not be negative")
    return RetryPolicy(
        max_retries=max_retries, delay=delay, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS
    )


# Backfills: no BackfillPolicy on the assets (the parameter is beta in Dagster 1.13 and warns on
# every code load). Without one, Dagster launches one run per partition, so each day succeeds,
# fails and retries on its own.
