"""The configuration of ctxprec-ops: every setting declared once (``Settings``, pydantic-settings),
read from the ``CTXPREC_*`` variables — the only place the environment is read — with one parser
per type (``parsing``) and the one way a face turns it into a run (``Settings.pipeline_config``).

Only the faces (the CLI, the Airflow and Dagster integrations, the DAG files and ``dagster_defs``)
import this package; everything below them receives explicit values (``PipelineConfig``).
"""

from ..pipeline.config import DEFAULT_WAREHOUSE_URL
from .parsing import SettingsError, parse_auto_bool, parse_bool
from .settings import ENV_PREFIX, SECTIONS, Settings

__all__ = [
    "DEFAULT_WAREHOUSE_URL",
    "ENV_PREFIX",
    "SECTIONS",
    "Settings",
    "SettingsError",
    "default_judge_name",
    "parse_auto_bool",
    "parse_bool",
]


def default_judge_name() -> str:
    """The judge a run uses when none is named: ``CTXPREC_JUDGE``, else ``gpt-4o-mini`` when
    ``OPENAI_API_KEY`` is set, else ``lexical`` (the metric API's ``model=None`` asks this)."""
    return Settings.from_env().judge
