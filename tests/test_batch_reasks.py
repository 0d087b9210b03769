"""A completed batch whose output lacks some requests' lines (and holds an answer that cannot be
used): the requests are asked again in a further batch, and the run says so — how many requests
and rows, asked again or followed up, in which mode and at which price — in its notes, in the
CLI's output of a completed run, and in the log as it happens. The local Batch API server writes
the result file, the real openai client reads it."""

from __future__ import annotations

import json

import pytest

from ctxprec_ops.batch import score_partition_batch
from ctxprec_ops.cli import main
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.test_batch_mode import DAY, FAST, batches, config, rows, scores
from tests.test_batch_reliability import _first_batch_only


def _drop_two_and_spoil_one(lines: list[str]) -> list[str]:
    """The first result file: the first two requests' lines missing, and the third line's answer
    short of a verdict (usable only after a re-ask)."""
    obj = json.loads(lines[2])
    message = obj["response"]["body"]["choices"][0]["message"]
    answer = json.loads(message["content"])
    answer["verdicts"] = answer["verdicts"][:-1]
    message["content"] = json.dumps(answer)
    return [json.dumps(obj), *lines[3:]]


@pytest.fixture
def warehouses(tmp_path, judge_server):
    url, ref = f"sqlite:///{tmp_path / 'wh.db'}", f"sqlite:///{tmp_path / 'ref.db'}"
    for u in (url, ref):
        create_logs(get_engine(u), rows(6))
    from ctxprec_ops.pipeline import score_partition

    score_partition(config(ref, judge_server), DAY)
    judge_server.reset()
    return url, ref


def test_requests_missing_from_a_completed_batch_are_asked_again_and_the_run_says_how(judge_server, warehouses, caplog):
    url, ref = warehouses
    judge_server.batch_output_lines = _first_batch_only(_drop_two_and_spoil_one)
    with caplog.at_level("WARNING", logger="ctxprec_ops.batch"):
        summary = score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert scores(get_engine(url)) == scores(get_engine(ref))  # every row scored, as the sync run did
    first, second = batches(get_engine(url))
    assert first["status"] == "completed" and (first["answered"], first["failed"]) == (first["requests"] - 2, 2)
    assert second["requests"] == 3  # the two missing requests again, plus the re-ask of the short answer
    notes = summary.error_message or ""
    assert f"batch {first['batch_id']} completed without a line for 2 of its {first['requests']} request(s)" in notes
    assert "round 2: 2 request(s) of 2 row(s) the earlier batch(es) did not answer, asked again" in notes
    assert "1 follow-up request(s) of 1 row(s) (re-asks of unusable answers)" in notes
    assert "submitted again at the batch price, in a new batch (batch mode, ~$" in notes
    assert judge_server.calls == 0  # no sync call
    said = [r.getMessage() for r in caplog.records if "round 2" in r.getMessage()]
    assert said and said[0].startswith(f"partition {DAY}: round 2: 2 request(s)")


def test_the_cli_prints_the_notes_of_a_completed_batch_run(judge_server, warehouses, monkeypatch, capsys):
    url, _ = warehouses
    judge_server.batch_output_lines = _first_batch_only(_drop_two_and_spoil_one)
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("CTXPREC_BATCH_POLL_SECONDS", "0.01")
    code = main(["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--batch", "--quiet",
                 "--chunk-size", "5", "--max-nodes-per-call", "3"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0  # complete (the one bad-input row is recorded as such)
    text = " ".join((out.out + out.err).split())
    assert "completed without a line for 2 of its" in text
    assert "round 2: 2 request(s) of 2 row(s) the earlier batch(es) did not answer, asked again" in text
    assert "submitted again at the batch price, in a new batch (batch mode" in text
