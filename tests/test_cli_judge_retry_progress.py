"""While the judge is being retried, stderr says so: that it is retrying, why, and for how long
(real `openai` client against the local judge server, and against a closed port)."""

from __future__ import annotations

import io
import socket

import sqlalchemy as sa
from rich.console import Console

from ctxprec_ops.cli import main
from ctxprec_ops.cli.progress import ProgressDisplay
from ctxprec_ops.demo.sample import create_sample_warehouse
from ctxprec_ops.judge.events import JudgeRetry, notify_retry
from ctxprec_ops.pipeline import ProgressEvent

DAY = "2026-11-28"


def _warehouse(tmp_path, rows: int = 6) -> str:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    eng = sa.create_engine(url)
    create_sample_warehouse(eng, days=1, rows_per_day=(rows, rows), conversations_per_day=(1, 1), end_date=DAY)
    eng.dispose()
    return url


def test_rate_limited_judge_is_reported_as_retrying(tmp_path, openai_env, capsys):
    openai_env.script(["429", "429"])  # the first two requests are rate limited (Retry-After 0.05 s)
    url = _warehouse(tmp_path)
    assert main(["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--concurrency", "1"]) == 0
    err = capsys.readouterr().err
    assert "judge retrying: rate limited (HTTP 429)" in err and "retry 1 of 6" in err and "failing for" in err


def test_unreachable_judge_says_why_and_for_how_long(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-shown")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("CTXPREC_RETRY_INITIAL_WAIT", "0.01")
    monkeypatch.setenv("CTXPREC_RETRY_MAX_WAIT", "0.02")
    url = _warehouse(tmp_path, rows=3)
    code = main(["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--concurrency", "2"])
    assert code != 0  # nothing could be scored
    err = capsys.readouterr().err
    retry_lines = [ln for ln in err.splitlines() if "judge retrying" in ln]
    assert retry_lines and "unreachable: APIConnectionError" in retry_lines[0]
    assert "retry 1 of 6" in retry_lines[0] and "failing for 0s" in retry_lines[0]
    assert len(retry_lines) <= 3  # one line per 10 s at most, not one per failed call
    assert "sk-test-not-shown" not in err


def test_bars_show_the_retry_and_clear_it_when_rows_get_done():
    buf = io.StringIO()
    with ProgressDisplay(Console(file=buf, force_terminal=True, width=200), interactive=True) as display:
        on = display.callback("run")
        on(ProgressEvent("planned", DAY, 0, 10, "10 rows"))
        notify_retry(JudgeRetry(2, 6, 4.0, "unreachable: APIConnectionError: Connection error."))
        assert display._retry_task is not None
        task = next(t for t in display._progress.tasks if t.id == display._retry_task)
        assert "retry 2 of 6, next attempt in 4s" in task.fields["note"]
        on(ProgressEvent("rows_done", DAY, 3, 10))
        assert display._retry_task is None and display._retry_since is None
    notify_retry(JudgeRetry(1, 6, 1.0, "x"))  # after exit: unsubscribed, nothing happens
