"""Retry and backfill policies of the scoring assets.

The RetryPolicy covers what the pipeline's own per-request retries could not absorb: a judge
endpoint or warehouse that stays down for minutes. Each retry re-runs the whole partition, which
is cheap: rows already scored are upserted again from the judgment cache, never re-judged.
"""

from dagster import Backoff, Jitter, RetryPolicy

from ctxprec_ops.config import Settings

__all__ = ["scoring_retry_policy"]


def scoring_retry_policy(delay: float | None = None, max_retries: int | None = None) -> RetryPolicy:
    """Exponential backoff with ± jitter: retry n waits (2ⁿ-1)·delay ± delay, i.e. ~1, 3, 7 × delay."""
    settings = Settings.from_env()
    delay = settings.dagster_retry_delay if delay is None else delay
    max_retries = settings.dagster_max_retries if max_retries is None else max_retries
    if delay < 0 or max_retries < 0:
        raise ValueError("the retry delay and the number of retries must not be negative")
    return RetryPolicy(max_retries=max_retries, delay=delay, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)


# Backfills: no BackfillPolicy on the assets (the parameter is beta in Dagster 1.13 and warns on
# every code load). Without one, Dagster launches one run per partition, so each day succeeds,
# fails and retries on its own.
