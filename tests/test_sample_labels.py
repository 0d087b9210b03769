"""Issue 32 item 6(c): a sampled run is labelled as a sample in ``trend``, ``check`` and the report,
with the sample size, the partition's rows and the confidence interval (from the sampled scores)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_partition, load_trend, render_report
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, day_rows

DAYS = [(datetime(2026, 11, 20) + timedelta(days=d)).date().isoformat() for d in range(4)]


def _warehouse(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows = []
    for d, day in enumerate(DAYS):
        rows += day_rows(80, day=day, start_id=1000 * (d + 1))
    create_logs(get_engine(url), rows)
    for day in DAYS[:-1]:
        score_partition(PipelineConfig(warehouse=url, judge="lexical"), day)
    return url


def test_a_sampled_partition_is_labelled_everywhere(tmp_path, capsys):
    url = _warehouse(tmp_path)
    last = DAYS[-1]
    s = score_partition(PipelineConfig(warehouse=url, judge="lexical", sample_rate=0.25), last)
    assert s.rows_total == 80 and 0 < s.rows_scored < 80
    n = s.rows_scored

    r = check_partition(url, last)
    assert r.figures.sampled and r.figures.rows_total == 80 and r.figures.sample_rate == 0.25
    assert f"sample of {n} of 80 rows, rate 0.25" in r.headline()
    assert r.to_dict()["figures"]["sampled"] is True

    df = load_trend(url, days=4)
    row = df.set_index("partition_key").loc[last]
    assert bool(row["sampled"]) and row["rows_total"] == 80 and row["sample_rate"] == 0.25
    assert not df.set_index("partition_key").loc[DAYS[0], "sampled"]

    assert main(["trend", "--warehouse", url, "--days", "4"]) == 0
    out = capsys.readouterr().out
    assert f"{n}*" in out and f"{last} is a sample: {n} scored of 80 rows (rate 0.25), mean" in out
    assert "95% CI" in out.split(f"{last} is a sample")[1]

    main(["check", "--warehouse", url, "--partition", last])
    out = capsys.readouterr().out
    assert f"sample of {n} of 80 rows" in out
    main(["check", "--warehouse", url, "--partition", last, "--json"])
    assert json.loads(capsys.readouterr().out)["figures"]["rows_total"] == 80

    html = render_report(url, tmp_path / "r.html", days=4).read_text(encoding="utf-8")
    assert 'id="latest-sample"' in html and f"sample of {n} of 80 rows, rate 0.25" in html
    assert html.count('class="pill sample"') >= 2  # the KPI, the partitions table (and the footer's key)
