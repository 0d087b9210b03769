"""BigQuery (sqlalchemy-bigquery): a member of the MERGE family whose chunk goes to the warehouse
as one query parameter, keys not enforced (a primary key is dropped from the DDL; readers keep
each key's latest row), claims that rely on no key (``warehouse/claims.py``), no secondary indexes, JSON
kept as text, ``TIMESTAMP`` for instants.

The write path: one ``MERGE INTO target USING UNNEST(@rows) ON key ...`` per table and chunk
(up to ``MERGE_ROWS`` rows a statement), the rows bound as one ``ARRAY<STRUCT<...>>`` parameter.
One query job per table and chunk, nothing staged: a BigQuery temporary table exists only inside a script
or session, and every row-by-row or multi-statement path costs a job (seconds) per statement.

The client: sqlalchemy-bigquery's own (Application Default Credentials, or ``credentials_path``
/ ``location`` in the URL), unless the URL names an endpoint (``api_endpoint=URL``: an emulator
or a private endpoint) or asks for anonymous credentials (``anonymous=true``: an emulator); then
this class builds the client itself (``bigquery_client``) with the URL's dataset as the default
dataset, and hands it to the engine."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table, bindparam
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import DateTime, LargeBinary, String, TypeEngine, UserDefinedType

from ..write_rows import bind_processors, bind_values
from .facts import Lineage
from .merge import MergeDialect
from .reads import TimeMode, in_parts
from .snowflake import JSONAsText

__all__ = ["BigQueryDialect", "CLIENT_PARAMETERS"]

#: URL query parameters this class reads to build the client itself (the rest go to sqlalchemy-bigquery)
CLIENT_PARAMETERS = ("api_endpoint", "anonymous")
#: rows of one MERGE (one array parameter: a chunk's judgments, 5 per row, in one statement; a few
#: MB at most, under a query's 10 MB request limit) and values of one ``IN UNNEST(@values)``
MERGE_ROWS = 5_000
IN_VALUES = 10_000
_TRUE = ("1", "true", "yes", "on")


def _struct_type(type_sql: str) -> str:
    """A column's DDL type as a parameter's field type: no length (``STRING(255)`` -> ``STRING``)."""
    return re.sub(r"\(.*\)", "", type_sql).strip()


class _Bytes(UserDefinedType[bytes]):
    """``BYTES`` bound as is: sqlalchemy-bigquery runs ``LargeBinary``'s bind processor on an
    expanding ``IN`` parameter's whole list instead of each value."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "BYTES"

    def bind_processor(self, dialect: Any) -> None:
        return None


class BigQueryDialect(MergeDialect):
    names = ("bigquery",)
    family = "BigQuery"
    write_path = (
        "the chunk de-duplicated and bound as one `ARRAY<STRUCT>` parameter, one "
        "`MERGE … USING UNNEST(@rows)` job per table (5,000 rows a statement)"
    )
    secondary_indexes = False
    json_as_text = True

    # --- the client and the engine ------------------------------------------------------------

    def builds_client(self, url: URL) -> bool:
        """Whether the URL asks for a client this class builds (an endpoint or anonymous access)."""
        return any(name in url.query for name in CLIENT_PARAMETERS)

    def engine_url(self, url: URL) -> URL:
        """Without the parameters only this class reads; ``user_supplied_client`` when it builds
        the client."""
        if not self.builds_client(url):
            return url
        drop = (*CLIENT_PARAMETERS, "credentials_path", "location")
        return url.difference_update_query(drop).update_query_dict({"user_supplied_client": "true"})

    def bigquery_client(self, url: URL) -> Any:
        """A ``google.cloud.bigquery.Client`` for the URL: project (the host), default dataset
        (the database), ``api_endpoint``, credentials (``anonymous=true``, else
        ``credentials_path``'s service-account key, else Application Default Credentials) and
        ``location``."""
        from google.api_core.client_options import ClientOptions
        from google.cloud import bigquery

        query = url.query
        credentials: Any = None
        if str(query.get("anonymous", "")).lower() in _TRUE:
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()
        elif query.get("credentials_path"):
            from google.oauth2 import service_account

            credentials = service_account.Credentials.from_service_account_file(
                str(query["credentials_path"]), scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
        endpoint = query.get("api_endpoint")
        config = bigquery.QueryJobConfig()
        if url.host and url.database:
            config.default_dataset = f"{url.host}.{url.database}"
        return bigquery.Client(
            project=url.host,
            credentials=credentials,
            location=str(query["location"]) if query.get("location") else None,
            client_options=ClientOptions(api_endpoint=str(endpoint)) if endpoint else None,
            default_query_job_config=config,
        )

    def engine_arguments(self, url: URL, *, read_only: bool = False) -> dict[str, Any]:
        arguments = super().engine_arguments(url, read_only=read_only)
        if self.builds_client(url):
            arguments["connect_args"] = {"client": self.bigquery_client(url)}
        return arguments

    def session_time_zone(self) -> str:
        return "none needed: `TIMESTAMP` is an instant, `DATETIME` naive (UTC)"

    def write_conflict(self, exc: BaseException) -> bool:
        """A DML statement that lost to a concurrent one on the same table ("Could not serialize
        access to table ... due to concurrent update"); run again, the MERGE updates or skips."""
        return "concurrent update" in str(getattr(exc, "orig", None) or exc)

    def lineage(self, url: URL, table: str) -> Lineage:
        """OpenLineage's BigQuery naming: namespace ``bigquery``, name ``project.dataset.table``."""
        name = ".".join(p for p in (url.host, url.database, table) if p)
        return Lineage("bigquery", name, f"bigquery://{name.replace('.', '/')}")

    # --- column types ----------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        """``STRING`` without a length where none is asked for: a key's text is as long as the id."""
        return String(length) if length is not None else String()

    def json_type(self) -> TypeEngine[Any]:
        return JSONAsText()  # STRING: sqlalchemy-bigquery binds no JSON parameter

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()  # BYTES

    def timestamp_type(self) -> TypeEngine[Any]:
        try:
            from sqlalchemy_bigquery import TIMESTAMP  # the [bigquery] extra
        except ImportError:
            return DateTime(timezone=True)
        return TIMESTAMP()  # an instant; SQLAlchemy's DateTime is DATETIME (naive) there

    def time_mode(self, column: Any) -> TimeMode | None:
        """``TIMESTAMP`` is an instant, ``DATETIME`` naive (UTC by the contract)."""
        if type(column.type).__name__.upper() == "TIMESTAMP":
            return "aware"
        return super().time_mode(column)

    # --- reads -----------------------------------------------------------------------------------

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
        """``column IN UNNEST(@values)``, ``IN_VALUES`` values a statement (one array parameter,
        not one parameter a value); binary keys bound as ``ARRAY<BYTES>`` as they are."""
        values = list(values)
        binary = bool(values) and isinstance(values[0], (bytes, bytearray))
        for part in in_parts(values, IN_VALUES):
            yield column.in_(bindparam("keys", list(part), expanding=True, type_=_Bytes()) if binary else list(part))

    # --- writes ----------------------------------------------------------------------------------

    def merge_rows(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], others: list[str] | None
    ) -> int:
        """``MERGE table USING UNNEST(@rows)``: the rows (distinct keys, the same columns each) as
        one array-of-struct parameter per ``MERGE_ROWS`` rows, through the columns' bind processors."""
        if not rows:
            return 0
        dialect = conn.dialect
        prep = dialect.identifier_preparer
        cols = list(rows[0])
        # field names unquoted: the DB-API's type spec takes plain names (the output tables' are)
        fields = ", ".join(f"{c} {_struct_type(table.c[c].type.compile(dialect=dialect))}" for c in cols)
        on = " AND ".join(f"t.{prep.quote(k)} = s.{prep.quote(k)}" for k in keys)
        sql = f"MERGE {prep.format_table(table)} AS t USING UNNEST(%(rows:ARRAY<STRUCT<{fields}>>)s) AS s ON {on}"
        if others:
            sql += " WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{prep.quote(c)} = s.{prep.quote(c)}" for c in others)
        names = ", ".join(prep.quote(c) for c in cols)
        sql += f" WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({', '.join(f's.{prep.quote(c)}' for c in cols)})"
        procs = bind_processors(table, cols, dialect)
        for start in range(0, len(rows), MERGE_ROWS):
            batch = rows[start : start + MERGE_ROWS]
            columns = [bind_values([r[c] for r in batch], p) for c, p in zip(cols, procs)]
            conn.exec_driver_sql(sql, {"rows": [dict(zip(cols, values)) for values in zip(*columns)]})
        return len(rows)
