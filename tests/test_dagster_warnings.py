"""The Dagster definitions use no beta/preview/superseded API: loading them (in a fresh
interpreter, as every `dagster dev` run worker does) and materializing a partition print none
of Dagster's BetaWarning / PreviewWarning / SupersessionWarning, nor a DeprecationWarning from
our code."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from tests.fixtures.isolation import clean_cwd

dagster = pytest.importorskip("dagster")

NOISY = ("BetaWarning", "PreviewWarning", "SupersessionWarning")


def test_loading_the_definitions_warns_nothing():
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import dagster_defs.definitions as d; d.defs.get_repository_def()"],
        cwd=clean_cwd(),  # an empty directory: dagster reads the .env of its cwd
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [ln for ln in proc.stderr.splitlines() if any(w in ln for w in NOISY)], proc.stderr[-2000:]


def test_materializing_a_partition_warns_nothing(tmp_path, monkeypatch):
    from dagster import DagsterInstance, materialize

    from ctxprec_ops.dagster import resources_for
    from ctxprec_ops.demo.sample import create_sample_warehouse
    from dagster_defs.definitions import score_checks, scores_assets

    url = f"sqlite:///{tmp_path / 'w.db'}"
    create_sample_warehouse(url, days=1, rows_per_day=(20, 30), conversations_per_day=(2, 3), end_date="2026-11-28")
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", url)
    with warnings.catch_warnings(record=True) as caught, DagsterInstance.ephemeral() as instance:
        warnings.simplefilter("always")
        result = materialize(
            [scores_assets["contextual_precision"], score_checks[0]],
            instance=instance,
            partition_key="2026-11-28",
            resources=resources_for("local"),
        )
    assert result.success
    noisy = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if w.category.__name__ in NOISY
        or (issubclass(w.category, DeprecationWarning) and "dagster_defs" in str(w.filename))
    ]
    assert not noisy, noisy
