"""`ctxprec trend / check / report`: exit codes and output, in-process and via the console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from tests.synthetic_history import Day, beta_scores, steady_history, write_history
from tests.test_monitoring_sinks import webhook_server  # noqa: F401  (fixture)

P = "2026-11-28"
CLEAN = "2026-11-27"
CTXPREC = Path(sys.executable).with_name("ctxprec")


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli") / "wh.db"
    eng = sa.create_engine(f"sqlite:///{path}")
    rng = np.random.default_rng(2)
    write_history(eng, steady_history(rng, "2026-11-18", 10, mean=0.74) + [Day(P, beta_scores(rng, 60, 0.55))])
    eng.dispose()
    return f"sqlite:///{path}"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (
        "CTXPREC_MIN_MEAN",
        "CTXPREC_MIN_PASS_RATE",
        "CTXPREC_WAREHOUSE_URL",
        "CTXPREC_ALERT_WEBHOOK",
        "CTXPREC_ALERT_EMAIL_TO",
    ):
        monkeypatch.delenv(name, raising=False)


def test_check_exit_codes(url, capsys):
    assert main(["check", "--warehouse", url, "--partition", P]) == 3
    out = capsys.readouterr().out
    assert "ALERT [warn] regression" in out and "Welch t-test" in out and "baseline (7 partitions)" in out
    assert main(["check", "--warehouse", url, "--partition", CLEAN]) == 0
    assert "no alerts" in capsys.readouterr().out


def test_check_json_and_env_thresholds(url, capsys, monkeypatch):
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", url)
    monkeypatch.setenv("CTXPREC_MIN_MEAN", "0.99")
    assert main(["check", "--partition", CLEAN, "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["partition_key"] == CLEAN and data["fired"] is True
    assert [a["rule"] for a in data["alerts"]] == ["min_mean"] and data["alerts"][0]["severity"] == "error"
    # a flag overrides the environment
    assert main(["check", "--partition", CLEAN, "--min-mean", "0.1", "--json"]) == 0


def test_check_errors(url, tmp_path, capsys):
    assert main(["check", "--warehouse", f"sqlite:///{tmp_path / 'missing.db'}", "--partition", P]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["check", "--warehouse", url, "--partition", "2026-02-30"]) == 2
    assert "2026-02-30" in capsys.readouterr().err
    assert main(["check", "--warehouse", url, "--partition", P, "--min-mean", "7"]) == 2
    assert "--min-mean must be between 0 and 1, got 7.0" in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    sa.create_engine(f"sqlite:///{empty}").connect().close()
    assert main(["check", "--warehouse", f"sqlite:///{empty}", "--partition", P]) == 1
    assert "no ctxprec_scores table" in capsys.readouterr().err


def test_check_posts_to_webhook(url, webhook_server, capsys):  # noqa: F811
    hook = f"http://127.0.0.1:{webhook_server.server_port}/hooks/T0SECRET"
    assert main(["check", "--warehouse", url, "--partition", P, "--webhook", hook]) == 3
    [(_, _, body)] = webhook_server.received
    assert "regression" in json.loads(body)["text"]
    assert main(["check", "--warehouse", url, "--partition", CLEAN, "--webhook", hook]) == 0
    assert len(webhook_server.received) == 1  # nothing sent when nothing fired
    webhook_server.status = 503
    assert main(["check", "--warehouse", url, "--partition", P, "--webhook", hook]) == 3  # the alert still counts
    err = capsys.readouterr().err
    assert "alert delivery failed" in err and "HTTP 503" in err and "T0SECRET" not in err


def test_trend_and_report(url, tmp_path, capsys):
    assert main(["trend", "--warehouse", url, "--days", "5"]) == 0
    out = capsys.readouterr().out
    assert P in out and "2026-11-24" in out and "2026-11-23" not in out
    assert "ALERT" in out and "regression" in out
    target = tmp_path / "r.html"
    assert main(["report", "--warehouse", url, "--out", str(target), "--days", "7"]) == 0
    assert target.exists() and "alert-marker" in target.read_text()
    # a bad --out is a usage error (exit 2), found before any work
    assert main(["report", "--warehouse", url, "--out", str(tmp_path / "nodir" / "r.html")]) == 2
    capsys.readouterr()
    bad = tmp_path / "bad.html"
    assert main(["report", "--warehouse", url, "--out", str(bad), "--source-table", "logs; DROP TABLE x"]) == 2
    assert "not a valid identifier" in capsys.readouterr().err and not bad.exists()


def test_console_script(url):
    """The installed `ctxprec` entry point (one subprocess: interpreter start-up is slow in CI)."""
    assert CTXPREC.exists(), CTXPREC
    proc = subprocess.run(
        [str(CTXPREC), "check", "--warehouse", url, "--partition", P], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 3, proc.stderr
    assert "regression" in proc.stdout and "Welch t-test" in proc.stdout


def test_password_in_warehouse_url_never_printed(capsys):
    secret = "pa55-w0rd-xyz"
    assert main(["check", "--warehouse", f"postgresql://monitor:{secret}@127.0.0.1:1/wh", "--partition", P]) == 1
    cap = capsys.readouterr()
    assert cap.err.startswith("ctxprec check: error:") and secret not in cap.err + cap.out
    assert main(["trend", "--warehouse", f"postgresql://monitor:{secret}@127.0.0.1:1/wh"]) == 1
    cap = capsys.readouterr()
    assert cap.err.startswith("ctxprec trend: error:") and secret not in cap.err + cap.out
