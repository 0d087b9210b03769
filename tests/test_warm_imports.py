"""Imports warmed in the background, and the judge's HTTP clients sharing one TLS context."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_warm_imports_imports_in_a_thread_and_ignores_what_cannot_be_imported():
    code = textwrap.dedent(
        """
        import sys, threading
        from ctxprec_ops._warm import warm_imports
        assert "colorsys" not in sys.modules
        warm_imports("no_such_module_anywhere", "colorsys")
        for t in threading.enumerate():
            if t.name == "ctxprec-warm-imports":
                t.join(30)
        assert "colorsys" in sys.modules
        assert "no_such_module_anywhere" not in sys.modules
        warm_imports("colorsys")  # already imported: no thread at all
        assert not any(t.name == "ctxprec-warm-imports" for t in threading.enumerate())
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_judge_http_clients_share_one_tls_context():
    from ctxprec_ops.judge.models.capped_http import capped_async_client

    def context_of(client):
        pool = client._transport._inner._pool  # CappedTransport -> httpx transport -> connection pool
        return pool._ssl_context

    a, b = capped_async_client(1024), capped_async_client(2048)
    assert context_of(a) is context_of(b)
    assert context_of(a).verify_mode.name == "CERT_REQUIRED"  # the default verification, not weakened
