"""Reliability: the judge API key and the warehouse password never leak.

A real PostgreSQL role with a real password (scram-sha-256 enforced for that role, so a wrong
password is refused) and a recognisable API key are used for: scoring runs with judge failures
(HTTP 401 from the server configured with another key, HTTP 500s), every CLI command (``score``,
``estimate``, ``check``, ``trend``, ``report``; in-process and through the console script) with the
password in the URL, and unreachable / malformed URLs with a password. Then we grep everything a
person or a tool could read: stdout, stderr, every log record (all loggers, DEBUG), exception
strings, every text column of every ``ctxprec_*`` table, and the HTML report.
(Airflow XCom/task logs and Dagster events/metadata are grepped by their own suites:
tests/test_airflow_dags.py ``assert_no_secrets`` and tests/test_dagster_materialize.py.)
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import DAY, planted_rows

API_KEY = "sk-test-SECRETSECRET1234"
PASSWORD = "pgSECRETpw4321"
ROLE = "ctxprec_secret_role"
CTXPREC = str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "ctxprec")
SECRETS = (API_KEY, PASSWORD, "SECRETSECRET", "SECRETpw")


def assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, (
            f"secret {s!r} leaked into {where}: ...{text[max(0, text.find(s) - 200) : text.find(s) + 50]}..."
        )


@pytest.fixture
def secret_pg(pg_server):
    """A database owned by a role that must log in with ``PASSWORD`` (scram-sha-256)."""
    from psycopg import sql

    if not pg_server.admin("SELECT 1 FROM pg_roles WHERE rolname = %s", ROLE):
        pg_server.admin(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(ROLE), sql.Literal(PASSWORD)).as_string()
        )
    (hba,) = pg_server.admin("SHOW hba_file")[0]
    text = Path(hba).read_text()
    rule = f"local all {ROLE} scram-sha-256\n"
    if rule not in text:  # first match wins: only this role must use its password
        Path(hba).write_text(rule + text)
        pg_server.admin("SELECT pg_reload_conf()")
    db = pg_server.create_database("secret")
    pg_server.admin(
        sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(db), sql.Identifier(ROLE)).as_string()
    )
    url = sa.engine.URL.create(
        "postgresql+psycopg", username=ROLE, password=PASSWORD, database=db, query={"host": pg_server.socket_dir}
    ).render_as_string(hide_password=False)
    try:
        yield url, db
    finally:
        pg_server.drop_database(db)


def dump_tables(engine) -> str:
    """Every text-ish value of every ctxprec_* table."""
    parts = []
    with engine.connect() as conn:
        for table in sa.inspect(engine).get_table_names():
            if table.startswith("ctxprec_"):
                for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')):
                    parts.extend(str(v) for v in row)
    return "\n".join(parts)


def test_password_is_really_checked(secret_pg):
    url, _ = secret_pg
    wrong = url.replace(PASSWORD, "not-the-password")
    with pytest.raises(sa.exc.OperationalError) as exc:
        with sa.create_engine(wrong).connect():
            pass
    assert "password authentication failed" in str(exc.value)
    with get_engine(url).connect() as conn:
        assert conn.exec_driver_sql("SELECT current_user").scalar_one() == ROLE


def test_no_secret_in_logs_tables_reports_or_output(secret_pg, judge_server, tmp_path, capsys, caplog, monkeypatch):
    url, _ = secret_pg
    engine = get_engine(url)
    rows, _truth = planted_rows(30, seed=3)
    create_logs(engine, rows)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", url)
    caplog.set_level(logging.DEBUG)  # every logger, including openai's and httpx's
    texts: list[tuple[str, str]] = []

    # 1. the judge rejects the key (HTTP 401): every row fails, the key is nowhere
    judge_server.api_key = "sk-the-server-wants-another-key"
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key=API_KEY,
        chunk_size=10,
        max_retries=1,
    )
    rejected = score_partition(cfg, DAY)
    assert rejected.status == "failed" and rejected.failures_by_type == {"judge_configuration": 30}
    assert judge_server.auth_headers[0] == f"Bearer {API_KEY}"  # the real key was sent...
    texts.append(("run summary", str(rejected.to_dict())))

    # 2. the key is right but the judge fails half the time (HTTP 500): partial
    judge_server.api_key = API_KEY
    judge_server.p_500 = 0.5
    partial = score_partition(cfg, DAY)
    assert partial.status == "partial" and partial.failures_by_type.get("judge_unavailable", 0) > 0
    texts.append(("run summary", str(partial.to_dict())))

    # 3. an aborted run (the source table is missing): the exception and the ledger row
    with pytest.raises(Exception) as exc:
        score_partition(
            PipelineConfig(
                warehouse=url,
                judge="judge-test-model",
                judge_base_url=judge_server.base_url,
                judge_api_key=API_KEY,
                source_table="no_such_table",
            ),
            DAY,
        )
    texts.append(("exception", f"{exc.value!s} {exc.value!r} {exc.value.__cause__!r}"))

    # 4. every CLI command, in-process, with the password in the URL and the key in the env
    judge_server.p_500 = 0.2
    report = tmp_path / "report.html"
    commands = [
        ["score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model", "--chunk-size", "10"],
        ["score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model", "--json"],
        ["estimate", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model"],
        ["estimate", "--warehouse", url, "--partition", DAY, "--json"],
        ["check", "--warehouse", url, "--partition", DAY, "--min-mean", "0.99"],
        ["check", "--warehouse", url, "--partition", DAY, "--json"],
        ["trend", "--warehouse", url],
        ["report", "--warehouse", url, "--out", str(report)],
        ["score", "--warehouse", url, "--partition", DAY, "--source-table", "missing_table"],
        # unreachable server, malformed URLs: all with a password in them
        ["score", "--warehouse", url.replace("host=", "host=/nonexistent"), "--partition", DAY],
        ["check", "--warehouse", f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:1/wh", "--partition", DAY],
        ["trend", "--warehouse", f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:notaport/wh"],
        ["score", "--warehouse", f"nosuchdb+driver://{ROLE}:{PASSWORD}@host/db", "--partition", DAY],
        ["estimate", "--warehouse", f"{ROLE}:{PASSWORD}@host/db", "--partition", DAY],
        ["report", "--warehouse", f"postgresql://{ROLE}:{PASSWORD}@[::1/db", "--out", str(tmp_path / "x.html")],
    ]
    codes = []
    for argv in commands:
        codes.append(main(argv))
        out = capsys.readouterr()
        texts.append((f"ctxprec {argv[0]} stdout", out.out))
        texts.append((f"ctxprec {argv[0]} stderr", out.err))
    assert codes[4] == 3 and all(c != 0 for c in codes[8:]), codes  # alert; errors
    assert report.exists()
    texts.append(("HTML report", report.read_text()))

    # 5. the console script in a real process: stdout, stderr (warnings, tracebacks if any)
    done = subprocess.run(
        [CTXPREC, "score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "OPENAI_API_KEY": API_KEY,
            "NO_PROXY": "127.0.0.1",
            "OPENAI_BASE_URL": judge_server.base_url,
            "CTXPREC_RETRY_INITIAL_WAIT": "0.01",
        },
    )
    texts.append(("console script", done.stdout + done.stderr))

    texts.append(("log records", "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)))
    texts.append(("ctxprec_* tables", dump_tables(engine)))
    assert any("***" in t for _, t in texts)  # something did mention the URL, masked
    for where, text in texts:
        assert_clean(text, where)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://etl:{PASSWORD}@db/wh",
        f"postgresql://etl:pa/{PASSWORD}@db/wh",  # "/" in the password
        f"postgresql://etl:p@{PASSWORD}@db/wh",  # an unencoded "@"
        f"postgresql://etl:x:{PASSWORD}@db:notaport/wh",
        f"etl:{PASSWORD}@db/wh",  # no scheme: not a URL at all, still masked
        f"postgresql://etl@db/wh?password={PASSWORD}",  # libpq's password as a query parameter
        f"postgresql://etl:{PASSWORD} x@db:54e2/wh",  # a blank typed unencoded, in a URL that does not parse
    ],
)
def test_urls_with_awkward_passwords_are_masked_everywhere_they_are_echoed(url, capsys):
    from ctxprec_ops.secrets import redact, redact_url

    in_text = [redact(f"cannot open '{url}': boom")] if "://" in url else []  # a bare one only alone
    for masked in (redact_url(url), redact(url), *in_text):
        assert_clean(masked, "redact")
        assert "***" in masked
    for argv in (["score", "--warehouse", url, "--partition", DAY], ["check", "--warehouse", url, "--partition", DAY]):
        assert main(argv) != 0
        out = capsys.readouterr()
        assert_clean(out.out + out.err, f"ctxprec {argv[0]}")


def test_a_password_the_url_patterns_cannot_see_is_masked_once_the_url_was_parsed():
    """An unencoded space ends a "user:password@" token, so only knowing the password helps:
    parsing a warehouse URL registers its password for redact()."""
    from ctxprec_ops.secrets import redact
    from ctxprec_ops.warehouse.engine import normalize_url

    spaced = "only here 7Qx2"  # used by no other test: nothing else registered it
    message = f"FATAL: password authentication failed (tried {spaced!r} for etl)"
    assert spaced in redact(message)  # invisible to the patterns
    normalize_url(f"postgresql://etl:{spaced}@db/wh")
    masked = redact(message)
    assert "7Qx2" not in masked and "***" in masked


def test_configuration_objects_show_no_credential_in_their_repr(monkeypatch):
    """A configuration reaches logs whole — an orchestrator's, a traceback's locals: its repr
    shows no password (in a URL's userinfo or query string), no key, no credential in a base URL.
    Each value here is used by no other test, so only the patterns and the fields can mask it."""
    from dagster import EnvVar

    from ctxprec_ops.airflow.base import JudgeSettings
    from ctxprec_ops.config import Settings
    from ctxprec_ops.dagster.resources import JudgeResource, WarehouseResource
    from ctxprec_ops.judge.models.openai_judge import OpenAIJudge

    pw, query_pw, gateway, apim, key, phx = (f"repr{n}Qz81xK" for n in ("PW", "QPW", "GW", "APIM", "KEY", "PHX"))
    warehouse = f"postgresql://etl:{pw}@db/wh?sslpassword={query_pw}"
    base_url = f"http://gw:{gateway}@judge.internal/v1?subscription-key={apim}"
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", warehouse)
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("CTXPREC_PHOENIX_KEY_FOR_TEST", phx)
    settings = Settings.from_env()
    shown = {
        "PipelineConfig": repr(PipelineConfig(warehouse=warehouse, judge="gpt-4o-mini", judge_base_url=base_url)),
        "Settings": repr(settings),
        "str(Settings)": str(settings),
        "OpenAIJudge": repr(OpenAIJudge(model="gpt-4o-mini", base_url=base_url)),
        "JudgeSettings": repr(JudgeSettings("gpt-4o-mini", base_url, key)),
        "WarehouseResource": repr(WarehouseResource(url=warehouse, phoenix_api_key=phx)),
        "JudgeResource": repr(JudgeResource(model="gpt-4o-mini", base_url=base_url, api_key=key)),
        "JudgeResource (EnvVar)": repr(JudgeResource(api_key=EnvVar("CTXPREC_PHOENIX_KEY_FOR_TEST").get_value())),
    }
    for where, text in shown.items():
        for secret in (pw, query_pw, gateway, apim, key, phx):
            assert secret not in text, f"{where}: {text}"
        assert "***" in text or "JudgeSettings" in where, f"{where}: {text}"


def test_a_rejected_request_echoing_the_key_past_the_cut_leaves_none_of_it(judge_server, tmp_path):
    """The endpoint's 400 message is kept to 300 characters; it was cut before it was redacted,
    so a key straddling the cut was no longer found whole and its first 25 characters reached
    ctxprec_failures.error_message."""
    key = "sk-cut-Zq81LmX0aPw3Rr7TsecretKEY"
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), planted_rows(1)[0])
    judge_server.bad_request = ("x" * 285 + f" key={key} was refused", "invalid_request_error")
    judge_server.script(["bad_request"])
    config = PipelineConfig(warehouse=url, judge="gpt-4o-mini", judge_base_url=judge_server.base_url, judge_api_key=key)
    score_partition(config, DAY)
    ((error_type, message),) = (
        get_engine(url).connect().execute(sa.text("SELECT error_type, error_message FROM ctxprec_failures")).all()
    )
    assert error_type == "judge_request_rejected" and "HTTP 400" in message
    assert key[:8] not in message and "Zq81" not in message, message


def test_the_batch_trigger_masks_the_key_an_endpoint_echoes(judge_server, monkeypatch):
    """Airflow's triggerer is a process of its own, where no configuration registered the key:
    a 401 echoing it reached the trigger's event and the task's error. The trigger registers the
    key its client sends."""
    import asyncio

    from ctxprec_ops.airflow.triggers import BatchPollTrigger
    from ctxprec_ops.secrets import redact

    key = "gsk_trigger81LmX0aPw3Rr7Tsecret"  # not shaped like an OpenAI key: only registering masks it
    monkeypatch.setenv("OPENAI_API_KEY", key)
    judge_server.api_key, judge_server.echo_key = "the-right-key", True

    async def first_event():
        trigger = BatchPollTrigger(["batch_1"], base_url=judge_server.base_url, poll_seconds=0.05)
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first_event())
    assert payload["status"] == "error" and "401" in payload["message"] and "***" in payload["message"]
    assert key not in str(payload) and key not in redact(f"Incorrect API key provided: {key}")


def test_registered_secrets_and_the_patterns_mask_together():
    """What to mask is found in the text as given: a short registered secret inside a parameter's
    name ("sslp" of "sslpassword", masked first) hid the name from the query pattern, and a
    pattern masking a registered secret up to its "&" left the rest of it."""
    from ctxprec_ops.secrets import redact, register_secret

    register_secret("sslp")  # values used by no other test
    register_secret("tk1Qz&tk2Qzuniq")
    assert "Q7Qzunique" not in redact("connect postgresql://etl@db/wh?sslpassword=Q7Qzunique failed")
    masked = redact("polling https://hook.example/x?token=tk1Qz&tk2Qzuniq: timed out")
    assert "tk1Qz" not in masked and "tk2Qzuniq" not in masked and masked.endswith(": timed out")
