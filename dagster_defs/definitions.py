"""Compose the Dagster definitions; the resource set comes from ``CTXPREC_DEPLOYMENT``.

- ``local`` (default): SQLite ``sqlite:///ctxprec.db`` (or CTXPREC_WAREHOUSE_URL), offline ``lexical`` judge.
- ``production``: CTXPREC_WAREHOUSE_URL and the judge from CTXPREC_JUDGE / OPENAI_* (as EnvVars).
"""

from dagster import Definitions

from .assets import contextual_precision_scores, turn_contextual_precision_scores
from .checks import score_checks
from .jobs import score_partition_job
from .resources import resources_for
from .schedules import nightly_schedule
from .sources import conversation_logs, retrieval_logs

defs = Definitions(
    assets=[retrieval_logs, conversation_logs, contextual_precision_scores, turn_contextual_precision_scores],
    asset_checks=score_checks,
    jobs=[score_partition_job],
    schedules=[nightly_schedule],
    resources=resources_for(),
)
