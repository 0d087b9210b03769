"""Configured names are validated identifiers: injection strings are refused, nothing is dropped."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxprec_ops.errors import IdentifierError
from ctxprec_ops.pipeline import PipelineConfig, SourceColumns, plan_chunks
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.identifiers import split_table_name, validate_identifier
from tests.fixtures.warehouse_data import create_logs, day_rows

BAD = [
    "retrieval_logs; DROP TABLE x",
    'retrieval_logs"; DROP TABLE x; --',
    "retrieval_logs'",
    "",
    "a" * 64,
    "1table",
    "has space",
    "tab\tle",
    "réservé",
    "x--",
]


@pytest.mark.parametrize("name", BAD)
def test_bad_identifiers_are_refused_with_the_setting_named(name):
    with pytest.raises(IdentifierError) as exc:
        validate_identifier(name, "source table name")
    assert "source table name" in str(exc.value)


def test_good_identifiers_and_schema_split():
    assert validate_identifier("retrieval_logs") == "retrieval_logs"
    assert validate_identifier("_T1") == "_T1"
    assert validate_identifier("a" * 63) == "a" * 63
    assert split_table_name("analytics.retrieval_logs") == ("analytics", "retrieval_logs")
    assert split_table_name("retrieval_logs", "analytics") == ("analytics", "retrieval_logs")
    with pytest.raises(IdentifierError):
        split_table_name("a.b.c")
    with pytest.raises(IdentifierError):
        split_table_name("a.b", "c")
    with pytest.raises(IdentifierError):
        split_table_name("ok.bad;name")
    with pytest.raises(IdentifierError):
        validate_identifier(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"source_table": "retrieval_logs; DROP TABLE retrieval_logs"},
        {"source_table": "retrieval_logs", "source_schema": "main; DROP TABLE retrieval_logs"},
        {"output_schema": "x y"},
        {"columns": "bad"},
    ],
)
def test_pipeline_config_refuses_bad_names(kwargs):
    with pytest.raises((IdentifierError, TypeError)):
        PipelineConfig(warehouse="sqlite://", **kwargs)


def test_bad_column_names_are_refused():
    with pytest.raises(IdentifierError) as exc:
        SourceColumns(input="input); DROP TABLE retrieval_logs; --")
    assert "'input'" in str(exc.value)


def test_injection_attempt_drops_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, day_rows(3))
    for name in ("retrieval_logs; DROP TABLE retrieval_logs", "retrieval_logs --", 'x"; DROP TABLE retrieval_logs'):
        with pytest.raises(IdentifierError):
            plan_chunks(PipelineConfig(warehouse=url, source_table=name), "2026-11-28")
    assert "retrieval_logs" in sa.inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM retrieval_logs").scalar_one() == 3
