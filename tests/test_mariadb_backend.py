"""What is particular to MariaDB / MySQL (the invariants every backend shares are in
tests/conformance/): the permission precheck under strict mode, on the throwaway server of
tests/fixtures/mariadb.py."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

DAY = "2026-11-28"


def _load(url: str, n: int = 7) -> list[dict]:
    """A source table of ``n`` rows (retrieval context as JSON text: fakesnow has no SQLAlchemy JSON)."""
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(n)]
    create_logs(get_engine(url), rows, context_type=sa.Text)
    return rows


def test_mariadb_precheck_names_a_really_missing_privilege(mariadb_server, mariadb_url):
    """Strict mode: the precheck passes with the grants (above) and names INSERT when it is missing;
    the password never reaches the message."""
    from sqlalchemy.engine import make_url

    from ctxprec_ops.warehouse.permissions import OutputPermissionError

    _load(mariadb_url)
    score_partition(PipelineConfig(warehouse=mariadb_url, judge=CountingJudge(), chunk_size=3), DAY)
    db = make_url(mariadb_url).database
    mariadb_server.admin("CREATE USER 'reader'@'localhost' IDENTIFIED BY 's3cret-pw'")
    mariadb_server.admin(f"GRANT SELECT ON `{db}`.* TO 'reader'@'localhost'")
    url = make_url(mariadb_url).set(username="reader", password="s3cret-pw").render_as_string(hide_password=False)
    with pytest.raises(OutputPermissionError) as info:
        score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=3), "2026-11-29")
    assert "INSERT" in str(info.value) and "s3cret-pw" not in str(info.value)
    mariadb_server.admin("DROP USER 'reader'@'localhost'")
