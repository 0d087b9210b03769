"""The OpenAI Batch API, as the batch judge mode uses it: request lines (the same body the sync
judge sends), JSONL input files split at the provider's limits, upload, create, retrieve,
cancel, and the output/error files parsed into answers per ``custom_id``.

Works with OpenAI and Azure OpenAI (``OpenAIJudge(azure_endpoint=...)``) through the official
``openai`` client; the API key never leaves the client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from ..errors import JudgeConfigurationError
from ..judge.models.openai_judge import OpenAIJudge, message_content
from ..scoring.verdicts import JudgeAnswer
from ..secrets import redact
from .results import ResultFile, parse_result_file

__all__ = [
    "BatchClient",
    "request_line",
    "split_lines",
    "MAX_REQUESTS",
    "MAX_BYTES",
    "ENDPOINT",
    "TERMINAL_STATUSES",
]

ENDPOINT = "/v1/chat/completions"
#: provider limits per input file (OpenAI: 50,000 requests, 200 MB)
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})


def request_line(
    judge: OpenAIJudge,
    custom_id: str,
    prompt: str,
    schema: type[BaseModel] | None = JudgeAnswer,
    logprobs: bool = False,
) -> dict[str, Any]:
    """The request line for ``prompt``: the body the sync judge sends for it, nothing else
    (``logprobs``: with the answer's token log-probabilities, a cascade's cheap stage)."""
    body: dict[str, Any] = {"model": judge.model, "messages": [{"role": "user", "content": message_content(prompt)}]}
    if judge.temperature is not None:
        body["temperature"] = judge.temperature
    if logprobs:
        body["logprobs"] = True
    fmt = judge.response_format(schema)
    if fmt is not None:
        body["response_format"] = fmt
    return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}


def split_lines(
    lines: list[dict[str, Any]], max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES
) -> Iterator[bytes]:
    """JSONL files of at most ``max_requests`` lines and ``max_bytes`` bytes each."""
    part: list[bytes] = []
    size = 0
    for line in lines:
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        if len(data) > max_bytes:
            raise ValueError(f"one batch request ({len(data)} bytes) exceeds the {max_bytes}-byte file limit")
        if part and (len(part) >= max_requests or size + len(data) > max_bytes):
            yield b"".join(part)
            part, size = [], 0
        part.append(data)
        size += len(data)
    if part:
        yield b"".join(part)


class BatchClient:
    """Sync Batch API calls for one judge's endpoint (its base URL, key, Azure settings)."""

    def __init__(self, judge: OpenAIJudge) -> None:
        import openai

        self.judge = judge
        try:
            self.client: Any = judge.sync_client(max_retries=3)
        except openai.OpenAIError:
            raise JudgeConfigurationError(
                f"cannot create the OpenAI client for batch judge {judge.model!r}: set OPENAI_API_KEY "
                "(or pass api_key) and, for other endpoints, OPENAI_BASE_URL"
            ) from None

    def _configuration_errors(self, exc: Exception) -> None:
        """A rejected key, an unknown endpoint or model, a refused request: no retry can fix it."""
        import openai

        if isinstance(
            exc,
            (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError, openai.BadRequestError),
        ):
            raise JudgeConfigurationError(
                f"the Batch API of judge {self.judge.model!r} refused the request "
                f"(HTTP {exc.status_code}): {redact(str(exc))[:300]}"
            ) from None

    def upload(self, data: bytes, filename: str) -> str:
        try:
            return str(self.client.files.create(file=(filename, data, "application/jsonl"), purpose="batch").id)
        except Exception as exc:
            self._configuration_errors(exc)
            raise

    def create(self, input_file_id: str, metadata: dict[str, str]) -> Any:
        try:
            return self.client.batches.create(
                input_file_id=input_file_id, endpoint=ENDPOINT, completion_window="24h", metadata=metadata
            )
        except Exception as exc:
            self._configuration_errors(exc)
            raise

    def retrieve(self, batch_id: str) -> Any:
        return self.client.batches.retrieve(batch_id)

    def cancel(self, batch_id: str) -> Any:
        return self.client.batches.cancel(batch_id)

    def file_text(self, file_id: str) -> str:
        return str(self.client.files.content(file_id).text)

    def results(self, batch: Any) -> ResultFile:
        """Every line the batch returned: output file first, then the error file."""
        out = ResultFile()
        for fid in (batch.output_file_id, batch.error_file_id):
            if fid:
                out.merge(parse_result_file(self.file_text(fid)))
        return out

    def close(self) -> None:
        self.client.close()
