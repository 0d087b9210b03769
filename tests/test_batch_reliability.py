"""Batch mode when the provider's files are wrong, when a configuration changes, and what the run
says about it (issue 32: items 1, 2, 5, 6a, 6b), plus the one-run-path guarantee (issue 30): a
batch run and a sync run of one partition write the same scores, failures and run row.

Every fault is produced by the local Batch API server (``tests/fixtures/batch_api.py``) serving a
bad file, the way a provider would, and read by the real ``openai`` client.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sqlalchemy as sa

from ctxprec_ops.batch import BatchOptions, score_partition_batch
from ctxprec_ops.cli import main
from ctxprec_ops.pipeline import score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.test_batch_mode import DAY, FAST, batches, config, rows, scores


def _warehouses(tmp_path, server, n: int = 6):
    """A batch warehouse and a sync-scored reference with the same rows."""
    data = rows(n)
    url, ref = f"sqlite:///{tmp_path / 'wh.db'}", f"sqlite:///{tmp_path / 'ref.db'}"
    for u in (url, ref):
        create_logs(get_engine(u), data)
    reference = score_partition(config(ref, server), DAY)
    server.reset()
    return url, ref, reference


def _failures(url: str) -> dict[str, tuple[str, str]]:
    with get_engine(url).connect() as conn:
        q = sa.text("SELECT log_id, error_type, error_message FROM ctxprec_failures")
        return {r.log_id: (r.error_type, r.error_message) for r in conn.execute(q)}


def _first_batch_only(rewrite):
    """A line rewriter applied to the first result file the server writes, not to later ones."""
    seen = {"n": 0}

    def apply(lines: list[str]) -> list[str]:
        seen["n"] += 1
        return rewrite(list(lines)) if seen["n"] == 1 else lines

    return apply


def _flipped(line: str) -> str:
    """The same result line with every verdict turned around (a different answer)."""
    obj = json.loads(line)
    message = obj["response"]["body"]["choices"][0]["message"]
    answer = json.loads(message["content"])
    for v in answer["verdicts"]:
        v["relevant"] = not v["relevant"]
    message["content"] = json.dumps(answer)
    return json.dumps(obj)


# -- 32.1: a bad line costs its request, never the partition ----------------------------------
def test_unreadable_lines_are_asked_again_and_the_rest_is_used(judge_server, tmp_path):
    url, ref, reference = _warehouses(tmp_path, judge_server)

    def spoil(lines: list[str]) -> list[str]:
        lines[1] = "this is not json {"
        lines[3] = json.dumps(["a", "list"])
        return lines

    judge_server.batch_output_lines = _first_batch_only(spoil)
    summary = score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert summary.rows_scored == reference.rows_scored and summary.failures_by_type == {"invalid_input": 1}
    assert scores(get_engine(url)) == scores(get_engine(ref))
    recs = batches(get_engine(url))
    assert [r["requests"] for r in recs][1:] == [2]  # only the two unreadable lines' requests again
    assert all(r["finished_at"] is not None for r in recs)
    message = summary.error_message or ""
    assert "2 unreadable line(s)" in message and "line 2: not JSON" in message and "line 4: a JSON list" in message


def test_a_line_unreadable_twice_fails_its_row_naming_batch_and_line_and_a_rerun_completes(judge_server, tmp_path):
    url, ref, reference = _warehouses(tmp_path, judge_server)
    judge_server.batch_output_lines = lambda lines: ["garbage"] + lines[1:]  # every file's first line
    cfg = config(url, judge_server, judge_mode="batch")
    one = score_partition_batch(cfg, DAY, options=FAST)
    recs = batches(get_engine(url))
    assert len(recs) == 2 and recs[1]["requests"] == 1  # asked again once, not a third time
    assert all(r["status"] == "completed" and r["finished_at"] is not None for r in recs)
    assert one.failures_by_type == {"invalid_input": 1, "judge_unavailable": 1}
    ((error_type, message),) = [f for f in _failures(url).values() if f[0] == "judge_unavailable"]
    assert recs[1]["batch_id"] in message and "line 1: not JSON" in message
    assert "1 request(s) got no usable answer after 2 batch round(s)" in (one.error_message or "")
    judge_server.batch_output_lines = None
    two = score_partition_batch(cfg, DAY, options=FAST)
    assert two.rows_scored == reference.rows_scored and two.failures_by_type == {"invalid_input": 1}
    assert scores(get_engine(url)) == scores(get_engine(ref))


def test_an_unreadable_error_file_line_is_counted_not_fatal(judge_server, tmp_path):
    url, ref, reference = _warehouses(tmp_path, judge_server)
    failed_once: set[str] = set()

    def first_time(cid: str) -> bool:  # row 2's requests fail in the first batch only
        if cid.split("|")[1] == "2" and cid not in failed_once:
            failed_once.add(cid)
            return True
        return False

    judge_server.batch_line_error = first_time
    judge_server.batch_error_lines = _first_batch_only(lambda lines: [*lines, "{not json", "42"])
    summary = score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert summary.rows_scored == reference.rows_scored and summary.failures_by_type == {"invalid_input": 1}
    assert scores(get_engine(url)) == scores(get_engine(ref))
    assert "unreadable line(s)" in (summary.error_message or "")


# -- 32.2: a custom_id answered twice ---------------------------------------------------------
def test_a_conflicting_duplicate_is_never_trusted(judge_server, tmp_path):
    url, ref, _ = _warehouses(tmp_path, judge_server)
    judge_server.batch_output_lines = _first_batch_only(lambda lines: [*lines, _flipped(lines[0])])
    summary = score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert scores(get_engine(url)) == scores(get_engine(ref))  # neither of the two answers was guessed
    recs = batches(get_engine(url))
    assert [r["requests"] for r in recs][1:] == [1]  # that request was asked again
    assert "1 duplicate custom_id line(s) (0 identical, used; 1 conflicting, asked again)" in summary.error_message


def test_an_identical_duplicate_is_used_and_counted(judge_server, tmp_path):
    url, ref, _ = _warehouses(tmp_path, judge_server)
    judge_server.batch_output_lines = _first_batch_only(lambda lines: [*lines, lines[0]])
    summary = score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert scores(get_engine(url)) == scores(get_engine(ref)) and len(batches(get_engine(url))) == 1
    assert "(1 identical, used; 0 conflicting" in (summary.error_message or "")


# -- 32.6a / 6b: what happens to unanswered requests is said, with the price ---------------------
def test_requests_an_expired_batch_did_not_answer_go_to_the_next_batch_or_sync_as_configured(judge_server, tmp_path):
    url, ref, _ = _warehouses(tmp_path, judge_server)
    judge_server.batch_final, judge_server.batch_answer_limit = "expired", 3
    flip = {"n": 0}

    def sleep(_s: float) -> None:  # from the second batch on, batches complete
        flip["n"] += 1
        judge_server.batch_final = "completed"

    again = score_partition_batch(
        config(url, judge_server, judge_mode="batch"), DAY, options=BatchOptions(0, 0, sleep=sleep)
    )
    assert scores(get_engine(url)) == scores(get_engine(ref)) and judge_server.calls == 0
    assert "submitted again at the batch price" in (again.error_message or "")

    url2 = f"sqlite:///{tmp_path / 'sync.db'}"
    create_logs(get_engine(url2), rows(6))
    judge_server.reset()
    judge_server.batch_final, judge_server.batch_answer_limit = "expired", 3
    sync = score_partition_batch(config(url2, judge_server, judge_mode="batch", batch_retry="sync"), DAY, options=FAST)
    assert scores(get_engine(url2)) == scores(get_engine(ref))
    assert len(judge_server.batch_created) == 1 and judge_server.calls > 0  # the rest went out as chat calls
    assert (
        f"{judge_server.calls} request(s) the batches did not answer were sent as sync calls at the full price ($"
        in (sync.error_message or "")
    )


# -- 32.5: a batch of an earlier configuration is named, and can be collected or cancelled ------
def test_an_open_batch_of_another_judge_is_named_then_collected_and_one_cancelled(
    judge_server, tmp_path, monkeypatch, capsys
):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows(4))
    judge_server.batch_hold = True
    waiting = score_partition(config(url, judge_server, judge_mode="batch"), DAY, wait=False)
    assert waiting.status == "waiting" and waiting.waiting is not None
    (old,) = waiting.waiting.ids
    judge_server.batch_hold = False
    other = score_partition_batch(replace(config(url, judge_server), judge="gpt-4.1-mini"), DAY, options=FAST)
    message = other.error_message or ""
    assert f"batch {old} (judge gpt-4o-mini" in message and f"ctxprec batches collect {old}" in message
    assert f"ctxprec batches cancel {old}" in message

    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert main(["batches", "--warehouse", url, "list", "--open", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [b["batch_id"] for b in listed] == [old]
    # collected with the settings it was asked with (nodes per call shape the requests)
    assert main(["batches", "--warehouse", url, "collect", old, "--max-nodes-per-call", "3", "--json"]) == 0
    collected = json.loads(capsys.readouterr().out)
    assert collected["judge_model"] == "gpt-4o-mini" and collected["rows_scored"] == 4
    assert [r["finished_at"] is not None for r in batches(get_engine(url))] == [True, True]  # nothing new asked

    judge_server.batch_hold = True
    third = score_partition(replace(config(url, judge_server, judge_mode="batch"), judge="gpt-4o"), DAY, wait=False)
    (held,) = third.waiting.ids
    assert main(["batches", "--warehouse", url, "cancel", held]) == 0
    assert "ended: cancelled" in capsys.readouterr().out
    (row,) = [r for r in batches(get_engine(url)) if r["batch_id"] == held]
    assert row["status"] == "cancelled" and row["finished_at"] is not None
    assert main(["batches", "--warehouse", url, "list", "--open", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# -- issue 30: one run path --------------------------------------------------------------------
RUN_FIELDS = (
    "status",
    "rows_total",
    "rows_scored",
    "rows_cached",
    "rows_failed",
    "mean_score",
    "median_score",
    "pass_rate",
    "ci_low",
    "ci_high",
    "prompt_tokens",
    "completion_tokens",
    "judge_model",
    "prompt_version",
    "threshold",
    "judge_calls",
    "failures_by_type",
    "source_table",
    "sample_rate",
    "rows_sampled",
)


def _run_row(url: str) -> dict:
    with get_engine(url).connect() as conn:
        (row,) = conn.execute(sa.text("SELECT * FROM ctxprec_runs")).mappings()
        return dict(row)


def _segment_rows(url: str) -> list[tuple]:
    with get_engine(url).connect() as conn:
        q = sa.text("SELECT log_id, seg_actual_output, score FROM ctxprec_segments ORDER BY log_id")
        return [tuple(r) for r in conn.execute(q)]


@pytest.mark.parametrize("sample_rate, segments", [(1.0, ()), (0.5, ()), (1.0, ("actual_output",))])
def test_a_batch_run_and_a_sync_run_write_the_same_scores_failures_and_run_row(
    judge_server, tmp_path, sample_rate, segments
):
    data = rows(12)
    for i, row in enumerate(data):
        row["actual_output"] = ["v1", "v2", None][i % 3]
    sync_url, batch_url = f"sqlite:///{tmp_path / 'sync.db'}", f"sqlite:///{tmp_path / 'batch.db'}"
    for u in (sync_url, batch_url):
        create_logs(get_engine(u), data)
    kw = {"sample_rate": sample_rate, "segments": segments}
    sync = score_partition(config(sync_url, judge_server, **kw), DAY)
    batch = score_partition(config(batch_url, judge_server, judge_mode="batch", **kw), DAY)
    if segments:  # the segment rows too: written by the same chunk write
        assert _segment_rows(batch_url) == _segment_rows(sync_url) and len(_segment_rows(sync_url)) == 12
    assert scores(get_engine(batch_url)) == scores(get_engine(sync_url))
    assert _failures(batch_url) == _failures(sync_url)
    s, b = _run_row(sync_url), _run_row(batch_url)
    assert {k: b[k] for k in RUN_FIELDS} == {k: s[k] for k in RUN_FIELDS}
    assert b["cost"] == pytest.approx(s["cost"] / 2) and b["run_id"] != s["run_id"]
    assert (batch.status, batch.rows_scored, batch.rows_failed) == (sync.status, sync.rows_scored, sync.rows_failed)


def test_image_rows_go_to_the_batch_as_image_parts_and_score_as_in_sync_mode(judge_server, tmp_path):
    from datetime import datetime

    from tests.fixtures.warehouse_data import log_row

    cat = "https://img.example/cat.png"
    judge_server.oracle = lambda text, prompt: "cat.png" in text
    data = [
        log_row(1, datetime(2026, 11, 28, 1), context=["Dogs bark.", {"url": cat}]),
        log_row(2, datetime(2026, 11, 28, 2), context=[{"url": cat}, "Birds sing."]),
    ]
    sync_url, batch_url = f"sqlite:///{tmp_path / 'sync.db'}", f"sqlite:///{tmp_path / 'batch.db'}"
    for u in (sync_url, batch_url):
        create_logs(get_engine(u), data)
    score_partition(config(sync_url, judge_server), DAY)
    batch = score_partition(config(batch_url, judge_server, judge_mode="batch"), DAY)
    assert batch.status == "succeeded" and scores(get_engine(batch_url)) == scores(get_engine(sync_url))
    assert {k: v[0] for k, v in scores(get_engine(batch_url)).items()} == {"1": 0.5, "2": 1.0}
    assert judge_server.batch_images == [cat, cat]  # the images went as image_url parts, not as text
    # the two rows share the cat node (same question): one round still answers both, each with the
    # prompt it recorded (a pass's lookups never see verdicts judged in the same pass)
    assert len(judge_server.batch_created) == 1


def test_each_engine_gets_the_batches_table_whatever_its_id(tmp_path, monkeypatch):
    """The batches table is created once per engine, known by the engine itself: an engine made
    after another was collected may get its ``id()``, and was then taken to have the table (a CI
    run met "no such table: ctxprec_batches" in a batch run that followed a sync run). Here every
    engine has the same id, as after such a reuse."""
    import ctxprec_ops.batch.store as store

    monkeypatch.setattr(store, "id", lambda obj: 0, raising=False)
    for name in ("a.db", "b.db"):
        engine = get_engine(f"sqlite:///{tmp_path / name}")
        store.batches_table(engine)
        assert sa.inspect(engine).has_table("ctxprec_batches"), name
