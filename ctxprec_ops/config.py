"""Settings read from the environment, so one ``.env`` configures the CLI, Dagster and Airflow.

Explicit arguments (CLI flags, resource fields, operator arguments) override these.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

__all__ = ["Settings", "default_judge_name"]


def default_judge_name(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    explicit = env.get("CTXPREC_JUDGE")
    if explicit:
        return explicit
    return "gpt-4o-mini" if env.get("OPENAI_API_KEY") else "lexical"


def _float(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class Settings:
    """Every knob DESIGN.md lists, with its documented default."""

    warehouse_url: str = "sqlite:///ctxprec.db"
    judge: str = "lexical"
    source_table: str = "retrieval_logs"
    conversation_table: str = "conversation_logs"
    threshold: float = 0.5
    min_mean: float | None = None
    min_pass_rate: float | None = None
    concurrency: int = 16
    chunk_size: int = 500
    start_date: str = "2025-01-01"
    #: seconds a judge outage may last before a run gives up (circuit breaker)
    outage_tolerance: float = 600.0
    #: provider quota kept before sending: requests / tokens per minute (None: no cap)
    max_rpm: float | None = None
    max_tpm: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        env = os.environ if env is None else env
        s = cls(
            warehouse_url=env.get("CTXPREC_WAREHOUSE_URL") or cls.warehouse_url,
            judge=default_judge_name(env),
            source_table=env.get("CTXPREC_SOURCE_TABLE") or cls.source_table,
            conversation_table=env.get("CTXPREC_CONVERSATION_TABLE") or cls.conversation_table,
            threshold=_float(env, "CTXPREC_THRESHOLD", cls.threshold),  # type: ignore[arg-type]
            min_mean=_float(env, "CTXPREC_MIN_MEAN", None),
            min_pass_rate=_float(env, "CTXPREC_MIN_PASS_RATE", None),
            concurrency=_int(env, "CTXPREC_CONCURRENCY", cls.concurrency),
            chunk_size=_int(env, "CTXPREC_CHUNK_SIZE", cls.chunk_size),
            start_date=env.get("CTXPREC_START_DATE") or cls.start_date,
            outage_tolerance=_float(env, "CTXPREC_OUTAGE_TOLERANCE", cls.outage_tolerance),  # type: ignore[arg-type]
            max_rpm=_float(env, "CTXPREC_MAX_RPM", None),
            max_tpm=_float(env, "CTXPREC_MAX_TPM", None),
        )
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - known
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        return replace(s, **clean)
