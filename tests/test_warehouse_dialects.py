"""The dialect registry: one module per family; a dialect nobody claims takes the generic path
with a warning that names it."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from ctxprec_ops.warehouse.dialects import for_dialect
from ctxprec_ops.warehouse.upsert import native_upsert_supported


def test_each_family_has_its_strategies():
    assert for_dialect("postgresql").in_list == "any_array" and for_dialect("postgresql").claims == "advisory"
    assert for_dialect("mysql") is for_dialect("mariadb")
    assert for_dialect("mariadb").claims == "named_lock" and for_dialect("mariadb").native_upsert
    assert (
        for_dialect("sqlite").claims == "none"
        and for_dialect("mysql").engine_options["isolation_level"] == "READ COMMITTED"
    )


def test_an_unknown_dialect_takes_the_generic_path_and_is_named(caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse.dialects"):
        generic = for_dialect("teradata_test_only")
    assert not generic.native_upsert and generic.in_list == "expanding"
    assert "teradata_test_only" in caplog.text and "generic" in caplog.text
    with sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}").connect() as conn:
        assert native_upsert_supported(conn)
