"""A real local HTTP receiver for alert webhooks: records every POST (path, headers, JSON body)
and answers a scripted sequence of statuses (the last one repeats), e.g. ``[503, 200]``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Receiver", "webhook_receiver"]


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    statuses: list[int] = field(default_factory=lambda: [200])
    posts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = "/hooks/T0SECRETPATH") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def bodies(self) -> list[dict[str, Any]]:
        return [p["json"] for p in self.posts]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        receiver: Receiver = self.server.receiver  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = receiver.statuses[min(len(receiver.posts), len(receiver.statuses) - 1)]
        receiver.posts.append(
            {"path": self.path, "headers": dict(self.headers), "raw": raw.decode(), "json": json.loads(raw or b"null")}
        )
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"ok" if status < 300 else b"try again")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook_receiver() -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    receiver = Receiver(server)
    server.receiver = receiver  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()
