"""`ctxprec score --workers N`: chunks scored in worker processes give the same result as one."""

import json

import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.demo.sample import create_sample_warehouse

DAY = "2026-11-28"


def _scores(url):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT log_id, score FROM ctxprec_scores")).all())
    finally:
        engine.dispose()


def test_workers_score_the_same_rows_to_the_same_scores(tmp_path, capsys, monkeypatch):
    for var in ("CTXPREC_WAREHOUSE_URL", "CTXPREC_JUDGE", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    urls = []
    for name in ("one", "two"):
        url = f"sqlite:///{tmp_path / name}.db"
        create_sample_warehouse(url, days=1, rows_per_day=(60, 60), conversations_per_day=(1, 1), end_date=DAY, seed=3)
        urls.append(url)
    args = ["score", "--partition", DAY, "--judge", "lexical", "--chunk-size", "7", "--json", "--quiet"]
    assert main(args + ["--warehouse", urls[0]]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(args + ["--warehouse", urls[1], "--workers", "2"]) == 0
    two = json.loads(capsys.readouterr().out)
    for k in ("rows_total", "rows_scored", "rows_failed", "mean_score", "pass_rate"):
        assert one[k] == two[k], k
    assert _scores(urls[0]) == _scores(urls[1]) and len(_scores(urls[0])) == one["rows_scored"]


def test_workers_must_be_positive(tmp_path, capsys):
    assert main(["score", "--warehouse", f"sqlite:///{tmp_path}/x.db", "--partition", DAY, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
