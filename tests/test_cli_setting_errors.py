"""Wrong settings get a message that says what to fix, at once: a URL given as the judge, a judge
endpoint that cannot be reached, a warehouse that refuses connections (secret-free)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main as ctxprec
from tests.fixtures.warehouse_data import create_logs, day_rows

DAY = "2026-11-28"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(sa.create_engine(url), day_rows(4))
    return url


def _error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("ctxprec ")]


@pytest.mark.parametrize(
    "judge", ["http://localhost:8000/v1", "https://api.example.com/v1", "localhost:11434", "127.0.0.1:8000/v1"]
)
@pytest.mark.parametrize("command", ["score", "estimate"])
def test_a_url_given_as_the_judge_is_refused_at_once(
    command: str, judge: str, warehouse: str, openai_env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctxprec([command, "--warehouse", warehouse, "--partition", DAY, "--judge", judge]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "not an endpoint URL" in line and "--judge-url" in line and "OPENAI_BASE_URL" in line
    assert openai_env.requests == []  # nothing was sent anywhere
    assert "ctxprec_scores" not in sa.inspect(sa.create_engine(warehouse)).get_table_names()


def test_a_url_in_ctxprec_judge_or_the_demo_judge_is_refused_too(
    warehouse: str, tmp_path: Path, openai_env, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXPREC_JUDGE", "http://localhost:8000/v1")
    assert ctxprec(["score", "--warehouse", warehouse, "--partition", DAY]) == 2
    assert "CTXPREC_JUDGE" in capsys.readouterr().err
    demo = ["demo", "--warehouse", f"sqlite:///{tmp_path / 'd.db'}", "--judge", "http://localhost:8000/v1"]
    assert ctxprec(demo) == 2
    assert "--judge-url" in capsys.readouterr().err and not (tmp_path / "d.db").exists()


def test_judge_url_names_the_endpoint(
    warehouse: str, judge_server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # no OPENAI_BASE_URL: the flag alone points at the server
    argv = ["score", "--warehouse", warehouse, "--partition", DAY, "--judge", "gpt-4o-mini", "--quiet"]
    assert ctxprec([*argv, "--judge-url", judge_server.base_url]) == 0
    assert len(judge_server.requests) >= 3
    capsys.readouterr()


def test_an_unreachable_judge_says_what_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = f"sqlite:///{tmp_path / 'big.db'}"
    create_logs(sa.create_engine(warehouse), day_rows(40))  # enough calls in a row to trip the breaker
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unreachable-0123456789")
    nothing = f"http://127.0.0.1:{_free_port()}/v1"
    argv = ["score", "--warehouse", warehouse, "--partition", DAY, "--judge", "gpt-4o-mini", "--quiet"]
    assert ctxprec([*argv, "--judge-url", nothing, "--outage-tolerance", "1"]) == 1
    err = capsys.readouterr().err
    (line,) = [ln for ln in _error_lines(err) if "incomplete" in ln]
    assert "connection refused" in line and "check the judge endpoint" in line and "--judge-url" in line
    assert "re-run to retry" not in line and "sk-unreachable" not in err


def test_a_misconfigured_judge_says_fix_it_not_retry(
    warehouse: str, openai_env, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_env.api_key = "the-right-key"  # the client sends test-key: 401
    argv = ["score", "--warehouse", warehouse, "--partition", DAY, "--judge", "gpt-4o-mini", "--quiet"]
    assert ctxprec(argv) == 1
    (line,) = [ln for ln in _error_lines(capsys.readouterr().err) if "incomplete" in ln]
    assert "misconfigured" in line and "fix it" in line and "re-run to retry" not in line


@pytest.mark.parametrize("command", [["trend"], ["check", "--partition", DAY], ["score", "--partition", DAY]])
def test_a_refused_warehouse_connection_says_what_to_check(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql://scorer:Wh-secret-9876@127.0.0.1:{_free_port()}/analytics"
    assert (
        ctxprec(
            [*command, "--warehouse", url, "--judge", "lexical"]
            if command[0] == "score"
            else [*command, "--warehouse", url]
        )
        == 1
    )
    err = capsys.readouterr().err
    (line,) = _error_lines(err)
    assert "Connection refused" in line and "check the host and port" in line and "server is running" in line
    assert "Wh-secret-9876" not in err


def test_an_unknown_warehouse_host_says_to_check_the_host_name(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://scorer:Wh-secret-9876@no-such-host.invalid:5432/analytics"
    assert ctxprec(["trend", "--warehouse", url]) == 1
    err = capsys.readouterr().err
    assert "check the host name" in err and "Wh-secret-9876" not in err


def test_the_tokens_hint_installs_from_what_exists() -> None:
    """ctxprec-ops is on no index: the estimate's hint names the extra's package or the clone install."""
    import tomllib

    from ctxprec_ops.judge.tokens import TOKENS_HINT

    root = Path(__file__).resolve().parent.parent
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["tokens"]
    package = extra[0].split(">")[0].split("=")[0].strip()
    assert f"pip install {package}" in TOKENS_HINT and "-e '.[tokens]'" in TOKENS_HINT
    assert "ctxprec-ops[tokens]" not in TOKENS_HINT
