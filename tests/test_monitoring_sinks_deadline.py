"""Alert deliveries end by their deadline, against real local servers that answer too slowly to
ever trip a per-read timeout: an HTTP receiver that sends its 200 and then trickles its body
(8 bytes every 0.5 s: a minute and more for the whole body), and an SMTP server that trickles its
every reply a byte at a time. ``ctxprec check --webhook --email-to`` reports both deliveries as
late and exits with its alert code; the sink the Airflow notifier and the Dagster sensors post
through (``WebhookSink.post``) is cut the same way."""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_partition
from ctxprec_ops.monitoring.sinks import (
    DEFAULT_DELIVERY_DEADLINE,
    DeliveryError,
    EmailSink,
    SmtpSettings,
    WebhookSink,
    deliver,
)
from ctxprec_ops.warehouse.engine import get_engine
from tests.synthetic_history import Day, beta_scores, steady_history, write_history

P = "2026-11-28"
#: the slow servers stop after this long whatever happens (a client without a deadline waits it out)
GIVE_UP = 90.0


class _TrickleHook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.posts.append(time.monotonic())  # type: ignore[attr-defined]
        body = json.dumps({"ok": True, "padding": "x" * 2000}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        end = time.monotonic() + GIVE_UP
        try:
            for i in range(0, len(body), 8):
                if time.monotonic() > end:
                    break
                self.wfile.write(body[i : i + 8])
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:  # the client hung up
            self.server.hung_up += 1  # type: ignore[attr-defined]

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def trickling_receiver() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _TrickleHook)
    srv.daemon_threads = True
    srv.posts, srv.hung_up = [], 0  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


class _StallingSmtp(socketserver.StreamRequestHandler):
    """Speaks SMTP, but writes every reply one byte every 0.3 s."""

    def _send(self, line: str) -> None:
        end = time.monotonic() + GIVE_UP
        for ch in (line + "\r\n").encode():
            if time.monotonic() > end:
                return
            self.wfile.write(bytes([ch]))
            self.wfile.flush()
            time.sleep(0.3)

    def handle(self) -> None:
        self.server.connections += 1  # type: ignore[attr-defined]
        try:
            self._send("220 localhost slow SMTP")
            while raw := self.rfile.readline():
                cmd = raw.decode(errors="replace").split(" ", 1)[0].strip().upper()
                if cmd in ("EHLO", "HELO"):
                    self._send("250 localhost")
                elif cmd == "DATA":
                    self._send("354 go ahead")
                    while self.rfile.readline() not in (b".\r\n", b""):
                        pass
                    self._send("250 queued")
                elif cmd == "QUIT":
                    self._send("221 bye")
                    return
                else:
                    self._send("250 OK")
        except OSError:
            pass


@pytest.fixture
def stalling_smtp() -> Iterator[socketserver.ThreadingTCPServer]:
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _StallingSmtp)
    srv.daemon_threads = True
    srv.connections = 0  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fired_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rng = np.random.default_rng(31)
    write_history(get_engine(url), steady_history(rng, "2026-11-21", 7) + [Day(P, beta_scores(rng, 60, 0.5))])
    return url


def test_check_reports_a_trickling_webhook_and_a_stalling_smtp_server_as_late(
    fired_url, trickling_receiver, stalling_smtp, monkeypatch, capsys
):
    hook = f"http://127.0.0.1:{trickling_receiver.server_port}/services/T000SECRETPATH"
    monkeypatch.setenv("CTXPREC_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("CTXPREC_SMTP_PORT", str(stalling_smtp.server_address[1]))
    monkeypatch.setenv("CTXPREC_SMTP_STARTTLS", "false")
    started = time.monotonic()
    code = main(["check", "--warehouse", fired_url, "--partition", P, "--min-mean", "0.6", "--webhook", hook,
                 "--email-to", "oncall@example.com"])  # fmt: skip
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 3  # the alert still fired: a late delivery never hides it
    # each delivery cut at its deadline (the receivers would take a minute and more)
    assert took < 2 * DEFAULT_DELIVERY_DEADLINE + 5, took
    assert "alert delivery failed: webhook POST to http://127.0.0.1:" in err
    assert f"timed out: no complete answer within the {DEFAULT_DELIVERY_DEADLINE:g} s delivery deadline" in err
    assert "alert delivery failed: e-mail via 127.0.0.1:" in err and "did not finish within the" in err
    assert "T000SECRETPATH" not in err
    assert len(trickling_receiver.posts) == 1 and stalling_smtp.connections == 1  # type: ignore[attr-defined]


def test_the_notifier_and_sensor_sink_is_cut_at_its_deadline(trickling_receiver):
    """``WebhookSink`` as the Airflow notifier builds it (per-read timeout 10 s, 3 retries)."""
    url = f"http://127.0.0.1:{trickling_receiver.server_port}/hooks/T0SECRETPATH"
    sink = WebhookSink(url, timeout=10.0, retries=3, backoff=1.0, deadline=2.0)
    started = time.monotonic()
    with pytest.raises(DeliveryError, match=r"timed out: no complete answer within the 2 s delivery deadline"):
        sink.post({"text": "x"}, {"Authorization": "Bearer t0ken"})
    assert time.monotonic() - started < 4.0
    deadline = time.monotonic() + 3
    while not trickling_receiver.hung_up and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.05)
    assert trickling_receiver.hung_up == 1  # type: ignore[attr-defined]  # the connection was closed, not left open


def test_deliver_never_raises_and_names_each_late_sink(fired_url, trickling_receiver, stalling_smtp):
    result = check_partition(fired_url, P, min_mean=0.6)
    smtp = SmtpSettings(
        host="127.0.0.1", port=stalling_smtp.server_address[1], recipients=["a@example.com"], starttls="false",
        deadline=1.5,
    )  # fmt: skip
    hook = WebhookSink(f"http://127.0.0.1:{trickling_receiver.server_port}/h", deadline=1.5)
    started = time.monotonic()
    errors = deliver(result, [hook, EmailSink(smtp)])
    assert time.monotonic() - started < 2 * 1.5 + 2
    assert len(errors) == 2 and all("timed out" in e for e in errors)


def test_a_bad_deadline_is_refused():
    with pytest.raises(ValueError, match="deadline"):
        WebhookSink("http://127.0.0.1:9/h", deadline=0)
    with pytest.raises(ValueError, match="deadline"):
        SmtpSettings(host="h", recipients=["a@b"], deadline=-1)
