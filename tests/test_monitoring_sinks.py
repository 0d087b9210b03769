"""Alert sinks against real servers on 127.0.0.1: an HTTP webhook receiver and a small SMTP server."""

from __future__ import annotations

import base64
import email
import json
import logging
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.config import Settings
from ctxprec_ops.monitoring import check_partition
from ctxprec_ops.monitoring.sinks import EmailSink, LogSink, SmtpSettings, WebhookSink, deliver
from tests.synthetic_history import Day, beta_scores, steady_history, write_history

P = "2026-11-28"
DB_PASSWORD = "hunter2-db-pass"
SMTP_PASSWORD = "smtp-s3cret-pw"


# --- a webhook receiver ------------------------------------------------------------------------


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, self.headers.get("Content-Type"), body))
        self.send_response(self.server.status)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    srv.received, srv.status = [], 200
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


# --- a minimal SMTP server (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT) -----------------------------


class _Smtp(socketserver.StreamRequestHandler):
    def _send(self, line: str) -> None:
        self.wfile.write((line + "\r\n").encode())

    def handle(self):
        srv = self.server
        self._send("220 localhost test SMTP")
        mail = {"from": None, "to": [], "auth": None}
        while True:
            raw = self.rfile.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\r\n")
            cmd = line.split(" ", 1)[0].upper()
            if cmd in ("EHLO", "HELO"):
                self._send("250-localhost")
                self._send("250 AUTH PLAIN")
            elif cmd == "AUTH":
                parts = line.split()
                _, user, pw = base64.b64decode(parts[2]).decode().split("\0")
                mail["auth"] = (user, pw)
                self._send("235 2.7.0 Authentication successful")
            elif cmd == "MAIL":
                mail["from"] = line.split(":", 1)[1].strip()
                self._send("250 OK")
            elif cmd == "RCPT":
                mail["to"].append(line.split(":", 1)[1].strip())
                self._send("250 OK")
            elif cmd == "DATA":
                self._send("354 End data with <CR><LF>.<CR><LF>")
                data = []
                while True:
                    line = self.rfile.readline()
                    if line in (b".\r\n", b".\n", b""):
                        break
                    data.append(line[1:] if line.startswith(b"..") else line)
                mail["data"] = b"".join(data)
                srv.messages.append(dict(mail))
                self._send("250 OK queued")
            elif cmd == "QUIT":
                self._send("221 Bye")
                return
            else:
                self._send("250 OK")


@pytest.fixture
def smtp_server():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Smtp)
    srv.daemon_threads = True
    srv.messages = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


# --- a fired result ----------------------------------------------------------------------------


@pytest.fixture
def fired_result(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    rng = np.random.default_rng(31)
    write_history(eng, steady_history(rng, "2026-11-21", 7) + [Day(P, beta_scores(rng, 60, 0.5))])
    eng.dispose()
    return check_partition(f"sqlite:///{tmp_path / 'wh.db'}", P, min_mean=0.6)


def _leaks(text: str) -> bool:
    return DB_PASSWORD in text or SMTP_PASSWORD in text or "T000SECRETPATH" in text


def test_webhook_posts_slack_json(webhook_server, fired_result):
    url = f"http://127.0.0.1:{webhook_server.server_port}/services/T000SECRETPATH"
    assert deliver(fired_result, [WebhookSink(url)]) == []
    [(path, ctype, body)] = webhook_server.received
    assert path == "/services/T000SECRETPATH" and ctype == "application/json"
    payload = json.loads(body)
    assert payload["text"].startswith(f"[ctxprec] ALERT {P} contextual_precision: 2 alert(s)")
    assert "Welch t-test" in payload["text"] and "below min_mean 0.600" in payload["text"]
    assert payload["blocks"][0]["type"] == "header"
    assert any("`regression`" in b["text"]["text"] for b in payload["blocks"][2:])


def test_webhook_failure_is_reported_without_the_url(webhook_server, fired_result):
    webhook_server.status = 500
    url = f"http://127.0.0.1:{webhook_server.server_port}/services/T000SECRETPATH"
    errors = deliver(fired_result, [WebhookSink(url), LogSink()])
    assert len(errors) == 1 and "HTTP 500" in errors[0] and not _leaks(errors[0])
    # nothing to send when nothing fired
    clean = fired_result.__class__(**{**fired_result.__dict__, "alerts": []})
    webhook_server.received.clear()
    assert deliver(clean, [WebhookSink(url)]) == [] and webhook_server.received == []


def test_unreachable_webhook_is_an_error_not_a_crash(fired_result):
    sock = __import__("socket").socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    errors = deliver(fired_result, [WebhookSink(f"http://127.0.0.1:{port}/hook/T000SECRETPATH", timeout=2)])
    assert len(errors) == 1 and "ConnectError" in errors[0] and not _leaks(errors[0])


def test_email_via_smtp_with_auth(smtp_server, fired_result):
    settings = SmtpSettings(
        host="127.0.0.1", port=smtp_server.server_address[1], recipients=["oncall@example.com"],
        sender="ctxprec@example.com", user="alerts", password=SMTP_PASSWORD, starttls="auto",
    )  # fmt: skip
    assert deliver(fired_result, [EmailSink(settings)]) == []
    [m] = smtp_server.messages
    assert m["auth"] == ("alerts", SMTP_PASSWORD)  # the server got the credentials ...
    assert "oncall@example.com" in m["to"][0]
    msg = email.message_from_bytes(m["data"])
    assert msg["Subject"].startswith(f"[ctxprec] ALERT {P}")
    body = msg.get_payload(decode=True).decode()
    assert "min_mean" in body and "regression" in body
    assert not _leaks(m["data"].decode())  # ... but no secret is in the message


def test_smtp_settings_from_env_and_failure(smtp_server, fired_result):
    env = {
        "CTXPREC_ALERT_EMAIL_TO": "a@example.com, b@example.com",
        "CTXPREC_SMTP_HOST": "127.0.0.1",
        "CTXPREC_SMTP_PORT": "1",  # nothing listens on port 1
        "CTXPREC_SMTP_PASSWORD": SMTP_PASSWORD,
        "CTXPREC_SMTP_USER": "u",
    }
    sinks = Settings.from_env(env).alert_sinks()
    assert [s.name for s in sinks] == ["log", "email"]
    assert sinks[1].settings.recipients == ["a@example.com", "b@example.com"]
    assert SMTP_PASSWORD not in repr(sinks[1].settings)
    errors = deliver(fired_result, sinks)
    assert len(errors) == 1 and errors[0].startswith("e-mail via 127.0.0.1:1 failed") and not _leaks(errors[0])


def test_log_sink_levels(fired_result, caplog):
    with caplog.at_level(logging.INFO, logger="ctxprec.alerts"):
        LogSink().send(fired_result)
    [rec] = caplog.records
    assert rec.levelno == logging.ERROR and "min_mean" in rec.getMessage()


def test_no_db_password_in_any_message(tmp_path, webhook_server, smtp_server):
    """A password in the warehouse URL never reaches a sink, even through error text."""
    from ctxprec_ops.secrets import redact

    url = f"postgresql://reader:{DB_PASSWORD}@127.0.0.1:1/warehouse"
    with pytest.raises(Exception) as info:
        check_partition(url, P)
    assert DB_PASSWORD not in redact(str(info.value))
    # a result whose notes mention the URL is redacted in every rendering
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    write_history(eng, steady_history(np.random.default_rng(1), "2026-11-21", 7))
    r = check_partition(eng, P)
    r.notes.append(f"warehouse {url}")
    hook = WebhookSink(f"http://127.0.0.1:{webhook_server.server_port}/x")
    mail = EmailSink(SmtpSettings(host="127.0.0.1", port=smtp_server.server_address[1], recipients=["x@example.com"]))
    assert deliver(r, [hook, mail]) == []
    sent = webhook_server.received[0][2].decode() + smtp_server.messages[0]["data"].decode()
    assert "reader:***@" in sent and not _leaks(sent) and not _leaks(json.dumps(r.to_dict()))
