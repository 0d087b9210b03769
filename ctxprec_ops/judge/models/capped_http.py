"""An HTTP client for judge endpoints that refuses to read more than ``max_bytes`` of a response.

The ``openai`` client reads a whole response body into memory before parsing it; a broken or
hostile endpoint answering 50 MB per call, 16 calls at a time, would cost gigabytes. The transport
here rejects a response whose ``Content-Length`` is over the limit before reading it, and stops
reading a body without one as soon as it passes the limit: ``JudgeResponseTooLargeError``.

Built on whichever httpx package the installed ``openai`` client uses (``httpx`` or ``httpx2``).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from functools import lru_cache
from types import ModuleType
from typing import Any

from ...errors import JudgeAnswerError

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "JudgeResponseTooLargeError", "capped_async_client", "response_class"]

#: a verdict answer for 20 nodes is a few kB; 1 MiB leaves room for long reasons
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20


class JudgeResponseTooLargeError(JudgeAnswerError):
    """The judge endpoint's response is larger than ``max_response_bytes`` (not read further)."""

    retryable = False

    def __init__(self, limit: int, size: int | None = None) -> None:
        what = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
        super().__init__(
            f"the judge endpoint's response is {what}, over the limit of {limit:,} bytes "
            "(max_response_bytes); it was not read"
        )
        self.limit, self.size = limit, size


@lru_cache(maxsize=1)
def _httpx() -> ModuleType:
    """The httpx package the openai client's default async client is built on."""
    import openai

    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.split(".")[0])


def response_class() -> type:
    """The HTTP response class of the openai client's httpx (a ``cast_to`` that returns the response
    as it came)."""
    return _httpx().Response


@lru_cache(maxsize=1)
def _transport_class() -> type:
    h: Any = _httpx()  # the openai client's httpx, found at run time: its classes are dynamic bases

    class CappedStream(h.AsyncByteStream):
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner, self._limit = inner, limit

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for piece in self._inner:
                seen += len(piece)
                if seen > self._limit:
                    raise JudgeResponseTooLargeError(self._limit)
                yield piece

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(h.AsyncBaseTransport):
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner, self._limit = inner, limit

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._limit:
                await response.aclose()
                raise JudgeResponseTooLargeError(self._limit, int(declared))
            return h.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=CappedStream(response.stream, self._limit),
                extensions=response.extensions,
                request=request,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport


@lru_cache(maxsize=1)
def _tls_context() -> Any:
    """The TLS context httpx would build for each client (its default verification: certifi, or
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once per process: loading the CA bundle takes ~25 ms,
    paid by every ``evaluate()`` and every partition run before its first request."""
    return _httpx().create_ssl_context()


def capped_async_client(max_bytes: int) -> Any:
    """The ``openai`` client's default async HTTP client, reading at most ``max_bytes`` per response
    (connection limits as the client's defaults)."""
    import openai

    h = _httpx()
    limits = h.Limits(max_connections=1000, max_keepalive_connections=100)
    inner = h.AsyncHTTPTransport(verify=_tls_context(), limits=limits)
    return openai.DefaultAsyncHttpxClient(transport=_transport_class()(inner, max_bytes))
