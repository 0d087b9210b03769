"""A SQLite warehouse file that does not exist is a clear error on every entry point, never a new
empty file (the Airflow hook's case is in tests/test_airflow_hook.py, Dagster's CLI case in
tests/test_isolation.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.warehouse.engine import MissingWarehouseFileError, require_sqlite_file

DAY = "2026-11-28"


def test_require_sqlite_file_passes_what_needs_no_file(tmp_path: Path) -> None:
    for url in ("sqlite://", "sqlite:///:memory:", "postgresql://u@h/db", f"sqlite:///file:{tmp_path}/x.db?uri=true"):
        require_sqlite_file(url)
    existing = tmp_path / "ok.db"
    existing.touch()
    require_sqlite_file(f"sqlite:///{existing}")


def test_require_sqlite_file_refuses_a_missing_file_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "nested" / "wh.db"
    with pytest.raises(MissingWarehouseFileError, match="does not exist") as info:
        require_sqlite_file(f"sqlite:///{target}", setting="CTXPREC_WAREHOUSE_URL")
    assert "CTXPREC_WAREHOUSE_URL" in str(info.value) and str(target) in str(info.value)
    assert info.value.retryable is False and isinstance(info.value, ValueError)
    assert not target.parent.exists()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingWarehouseFileError, match=r"relative path: resolved from"):
        require_sqlite_file("sqlite:///relative.db")
    assert not (tmp_path / "relative.db").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "--partition", DAY, "--judge", "lexical"],
        ["estimate", "--partition", DAY, "--judge", "lexical"],
        ["trend"],
        ["check", "--partition", DAY],
        ["report", "--out", "r.html"],
    ],
    ids=lambda a: a[0],
)
def test_every_cli_command_refuses_a_missing_file(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", "sqlite:///ctxprec.db")  # the default, not created
    assert ctxprec(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the SQLite warehouse file 'ctxprec.db'" in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_dagster_asset_refuses_a_missing_file(tmp_path: Path) -> None:
    pytest.importorskip("dagster")
    from dagster import DagsterInstance, materialize

    from ctxprec_ops.dagster import resources_for
    from ctxprec_ops.dagster.resources import WarehouseResource
    from dagster_defs.definitions import scores_assets

    target = tmp_path / "missing.db"
    resources = {**resources_for("local"), "warehouse": WarehouseResource(url=f"sqlite:///{target}")}
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [scores_assets["contextual_precision"]],
            instance=instance,
            partition_key=DAY,
            resources=resources,
            raise_on_error=False,
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    text = str(failure.event_specific_data.error)
    assert "SQLite warehouse file" in text and "does not exist" in text
    assert not target.exists()
