"""Warehouse families: one class per warehouse, found by SQLAlchemy dialect name, through the
package's own registry or an entry point of group ``ctxprec_ops.dialects``; a dialect nobody
claims takes the generic path with a warning that names it."""

from __future__ import annotations

import logging
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.dialects import (
    ENTRY_POINT_GROUP,
    Dialect,
    built_in,
    dialect_of,
    for_dialect,
    registered_names,
    reload_entry_points,
)
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

ROOT = Path(__file__).resolve().parents[1]


def test_each_family_declares_its_capabilities():
    pg, maria, lite = for_dialect("postgresql"), for_dialect("mariadb"), for_dialect("sqlite")
    assert (pg.id_binding, pg.claims, pg.snapshot_isolation) == ("any_array", "advisory", "REPEATABLE READ")
    assert type(for_dialect("mysql")) is type(maria) and maria.claims == "named_lock" and maria.native_upsert
    assert maria.engine_options["isolation_level"] == "READ COMMITTED" and maria.utc_session
    assert lite.claims == "process" and not lite.has_grants and lite.serial_in_process and not lite.utc_session
    duck, snow = for_dialect("duckdb"), for_dialect("snowflake")
    assert (duck.claims, snow.claims) == ("file_lock", "lease") and duck.reflection == "information_schema"
    assert not snow.keys_enforced and not snow.secondary_indexes and duck.id_binding == "frame"


def test_the_packages_families_are_its_entry_points():
    """The families the package's modules declare (found without installed metadata) are what
    pyproject declares as entry points, and both are found by name."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == {name: f"{cls.__module__}:{cls.__name__}" for name, cls in built_in().items()}
    assert {
        "sqlite", "postgresql", "mysql", "mariadb", "duckdb", "snowflake", "clickhousedb", "redshift", "bigquery",
        "databricks",
    } <= set(declared)  # fmt: skip
    assert set(declared) <= set(registered_names())


def test_an_unknown_dialect_takes_the_generic_path_and_is_named(caplog):
    with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse.dialects"):
        generic = for_dialect("teradata_test_only")
    assert type(generic) is Dialect and not generic.native_upsert and generic.claims == "lease"
    assert "teradata_test_only" in caplog.text and "generic" in caplog.text


def test_the_generic_path_writes_what_the_native_one_writes(tmp_path):
    """The base class's per-row update-then-insert and SQLite's own statements leave the same
    rows (last row of a key wins) — what a warehouse without a family of its own gets."""
    md = sa.MetaData()
    t = sa.Table("t", md, sa.Column("k", sa.String(10), primary_key=True), sa.Column("v", sa.Integer))
    rows = [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}]
    stored = []
    for family in (Dialect(), for_dialect("sqlite")):
        engine = sa.create_engine(f"sqlite:///{tmp_path / f'{type(family).__name__}.db'}")
        md.create_all(engine)
        with engine.begin() as conn:
            family.upsert(conn, t, rows, ["k"])
            family.upsert(conn, t, [{"k": "b", "v": 5}], ["k"])
            family.insert_ignore(conn, t, [{"k": "b", "v": 9}, {"k": "c", "v": 7}], ["k"])
            stored.append(sorted(tuple(r) for r in conn.execute(sa.select(t))))
    assert stored[0] == stored[1] == [("a", 3), ("b", 5), ("c", 7)]


PLUGIN = '''
from ctxprec_ops.warehouse.dialects import Dialect
from ctxprec_ops.warehouse.dialects.sqlite import SQLiteDialect


class CountingSQLite(SQLiteDialect):
    """SQLite, counting the chunk writes the pipeline asks of it."""

    family = "SQLite (counted)"
    upserts = 0

    def upsert(self, conn, table, rows, keys):
        type(self).upserts += 1
        return super().upsert(conn, table, rows, keys)


class TestWarehouse(Dialect):
    family = "a warehouse shipped by another distribution"
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A distribution installed in a directory on ``sys.path``: its module and a dist-info whose
    ``entry_points.txt`` declares two dialects (one of them SQLite's, over the built-in)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ctxprec_test_plugin.py").write_text(PLUGIN)
    info = site / "ctxprec_test_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxprec-test-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(f"""\
            [{ENTRY_POINT_GROUP}]
            sqlite = ctxprec_test_plugin:CountingSQLite
            testwarehouse = ctxprec_test_plugin:TestWarehouse
            """)
    )
    monkeypatch.syspath_prepend(str(site))
    reload_entry_points()
    yield
    monkeypatch.delitem(sys.modules, "ctxprec_test_plugin", raising=False)
    monkeypatch.undo()
    reload_entry_points()


def test_a_dialect_registered_by_an_entry_point_is_found(plugin, caplog):
    with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse.dialects"):
        found = for_dialect("testwarehouse")
    assert type(found).__name__ == "TestWarehouse" and found.name == "testwarehouse"
    assert not caplog.text  # a registered family: no "generic path" warning
    assert "testwarehouse" in set(registered_names())


def test_an_entry_point_replaces_a_built_in_family_without_touching_the_core(plugin, tmp_path):
    """A distribution's ``sqlite`` entry point wins over the built-in one: the whole pipeline
    then writes through the plugin's class (it counts the writes asked of it)."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(5))
    family = dialect_of(get_engine(url))
    assert type(family).__name__ == "CountingSQLite"
    summary = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=2), "2026-11-28")
    assert summary.rows_scored == 5 and type(family).upserts >= 3  # each of the 3 chunks' scores at least


def test_the_chunk_size_defaults_text_names_each_familys_own():
    """Help texts and docs say the defaults in one sentence (``CHUNK_SIZE_DEFAULTS``): the generic
    500 and every family whose own differs, by its name and value, and nothing else."""
    from ctxprec_ops.pipeline.config import CHUNK_SIZE_DEFAULTS

    said = CHUNK_SIZE_DEFAULTS.split(": ", 1)[1].split(", ")
    own = {cls.family: cls.default_chunk_size for cls in set(built_in().values())}
    differing = {f"{family} {n:,}" for family, n in own.items() if n != Dialect.default_chunk_size}
    assert said[0] == f"{Dialect.default_chunk_size:,}" and set(said[1:]) == differing and differing


def test_a_run_that_sets_no_chunk_size_takes_its_warehouses(tmp_path):
    """``chunk_size`` unset: the family's (a URL or an engine); set (argument or variable): as set;
    a URL that does not parse: the generic default, and the run's own error where it connects."""
    from ctxprec_ops.config import Settings
    from ctxprec_ops.pipeline import plan_chunks

    duck_url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    assert PipelineConfig(warehouse=duck_url).chunk_size == for_dialect("duckdb").default_chunk_size == 1500
    assert PipelineConfig(warehouse=get_engine(duck_url)).chunk_size == 1500
    assert PipelineConfig(warehouse=f"sqlite:///{tmp_path / 'a.db'}").chunk_size == 500
    assert PipelineConfig(warehouse=duck_url, chunk_size=70).chunk_size == 70
    assert Settings.from_env({}, warehouse_url=duck_url).pipeline_config().chunk_size == 1500
    env = {"CTXPREC_WAREHOUSE_URL": duck_url, "CTXPREC_CHUNK_SIZE": "300"}
    assert Settings.from_env(env).pipeline_config().chunk_size == 300
    bad = PipelineConfig(warehouse="not a url")
    assert bad.chunk_size == 500
    with pytest.raises(ValueError, match="invalid warehouse URL"):
        score_partition(bad, "2026-11-28")
    # the plan cuts the family's chunks: 3,500 rows on DuckDB are 3 chunks, not 7
    create_logs(get_engine(duck_url), day_rows(3500))
    planned = plan_chunks(PipelineConfig(warehouse=duck_url), "2026-11-28")
    assert [c.rows for c in planned] == [1500, 1500, 500]
    again = PipelineConfig(warehouse=duck_url)
    again.chunk_size = None  # cleared after construction: resolved again where it is read
    assert again.rows_per_chunk == 1500
