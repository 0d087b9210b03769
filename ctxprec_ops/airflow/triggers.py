"""``BatchPollTrigger``: polls OpenAI batches on the triggerer while the scoring task is deferred
(no worker slot is held while the provider works), and fires once every batch has ended.

The API key is not part of the trigger's (stored) arguments: the trigger reads it from the
judge connection's password when ``judge_conn_id`` names one, else from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..batch.api import TERMINAL_STATUSES
from ..secrets import redact, register_secret

__all__ = ["BatchPollTrigger"]


class BatchPollTrigger(BaseTrigger):
    def __init__(
        self,
        batch_ids: list[str],
        base_url: str | None = None,
        judge_conn_id: str | None = None,
        poll_seconds: float = 60.0,
        first_poll: float = 1.0,
    ) -> None:
        super().__init__()
        self.batch_ids = list(batch_ids)
        self.base_url = base_url
        self.judge_conn_id = judge_conn_id
        self.poll_seconds = float(poll_seconds)
        self.first_poll = float(first_poll)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__name__}",
            {
                "batch_ids": self.batch_ids,
                "base_url": self.base_url,
                "judge_conn_id": self.judge_conn_id,
                "poll_seconds": self.poll_seconds,
                "first_poll": self.first_poll,
            },
        )

    async def _api_key(self) -> str | None:
        if self.judge_conn_id:
            from .hooks import optional_connection

            try:
                conn = await asyncio.to_thread(optional_connection, self.judge_conn_id)
            except Exception:  # no connection access here: fall back to the environment
                conn = None
            if conn is not None and conn.password:
                return str(conn.password)
        return None  # the openai client reads OPENAI_API_KEY itself

    async def run(self) -> AsyncIterator[TriggerEvent]:
        import openai

        try:
            client = openai.AsyncOpenAI(base_url=self.base_url, api_key=await self._api_key(), max_retries=3)
        except openai.OpenAIError as exc:
            yield TriggerEvent({"status": "error", "message": redact(str(exc))[:500]})
            return
        # the triggerer is a process of its own: the key it sends (the connection's, or the one the
        # client read from OPENAI_API_KEY) is masked in what it reports, an endpoint may echo it
        register_secret(client.api_key)
        wait = min(self.first_poll, self.poll_seconds)
        try:
            while True:
                statuses: dict[str, str] = {}
                for batch_id in self.batch_ids:
                    batch = await client.batches.retrieve(batch_id)
                    statuses[batch_id] = str(batch.status)
                if all(s in TERMINAL_STATUSES for s in statuses.values()):
                    yield TriggerEvent({"status": "ended", "batches": statuses})
                    return
                self.log.info("batches still running: %s; next poll in %.0f s", statuses, wait)
                await asyncio.sleep(wait)
                wait = min(self.poll_seconds, wait * 1.5)
        except Exception as exc:  # the task resumes, reports it and is retried
            yield TriggerEvent({"status": "error", "message": redact(f"{type(exc).__name__}: {exc}")[:500]})
        finally:
            await client.close()
