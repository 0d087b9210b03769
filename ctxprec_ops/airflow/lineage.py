"""OpenLineage for the scoring operators (used when ``apache-airflow-providers-openlineage`` is
installed: ``pip install "ctxprec-ops[airflow,openlineage]"``).

The provider's listener calls ``get_openlineage_facets_on_start`` / ``_on_complete`` /
``_on_failure`` on the operator. Each answers an ``OperatorLineage``:

- inputs: the source log table (the alert task: ``ctxprec_scores`` and ``ctxprec_runs``);
- outputs: ``ctxprec_scores`` (with its schema facet) and ``ctxprec_failures`` (the finalize task:
  ``ctxprec_runs`` too; the plan and alert tasks write nothing);
- run facet ``ctxprec``: partition, metric, judge model and, once the task ran, the figures
  (rows scored / failed, mean, pass rate, cost, status) — ``CtxPrecRunFacet``, whose JSON schema
  ships in ``ctxprec_ops/airflow/schemas/CtxPrecRunFacet.json``.

Dataset names follow ``assets.table_ref`` (never a credential). Nothing here is imported unless
the provider asks: the operators work the same without OpenLineage.
"""

from __future__ import annotations

import functools
from typing import Any

from ..secrets import redact

__all__ = ["LineageMixin", "RUN_FACET_NAME", "SCHEMA_URL", "SCORES_COLUMNS", "run_facet_class"]

RUN_FACET_NAME = "ctxprec"
#: where the facet's schema is described (an id, not fetched: ``.invalid`` never resolves); the
#: schema itself is the package file ``schemas/CtxPrecRunFacet.json``
SCHEMA_URL = "https://ctxprec-ops.invalid/spec/facets/1-0-0/CtxPrecRunFacet.json#/$defs/CtxPrecRunFacet"
#: the public columns of ctxprec_scores (never renamed), for the output's schema facet
SCORES_COLUMNS = (
    ("log_id", "TEXT"),
    ("partition_key", "TEXT"),
    ("metric", "TEXT"),
    ("score", "DOUBLE PRECISION"),
    ("success", "BOOLEAN"),
    ("threshold", "DOUBLE PRECISION"),
    ("verdicts", "JSON"),
    ("reason", "TEXT"),
    ("judge_model", "TEXT"),
    ("prompt_version", "TEXT"),
    ("prompt_tokens", "INTEGER"),
    ("completion_tokens", "INTEGER"),
    ("cost", "DOUBLE PRECISION"),
    ("run_id", "TEXT"),
    ("scored_at", "TIMESTAMP"),
)
_FIGURES = ("status", "rows_total", "rows_scored", "rows_cached", "rows_failed", "mean_score", "pass_rate", "cost")


@functools.cache
def run_facet_class() -> type:
    """``CtxPrecRunFacet``, an OpenLineage ``RunFacet`` (built on first use: openlineage is optional)."""
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class CtxPrecRunFacet(RunFacet):
        """A ctxprec partition (or chunk) run: what was scored, by which judge, with what result."""

        partition_key: str
        metric: str
        judge_model: str | None = attr.field(default=None)
        prompt_version: str | None = attr.field(default=None)
        chunk: int | None = attr.field(default=None)
        status: str | None = attr.field(default=None)
        rows_total: int | None = attr.field(default=None)
        rows_scored: int | None = attr.field(default=None)
        rows_cached: int | None = attr.field(default=None)
        rows_failed: int | None = attr.field(default=None)
        mean_score: float | None = attr.field(default=None)
        pass_rate: float | None = attr.field(default=None)
        cost: float | None = attr.field(default=None)
        error: str | None = attr.field(default=None)

        @staticmethod
        def _get_schema() -> str:
            return SCHEMA_URL

    return CtxPrecRunFacet


class LineageMixin:
    """``get_openlineage_facets_on_*`` for an operator with the ``CtxPrecBaseOperator`` arguments.

    ``execute`` records what it learnt in ``self._lineage`` (partition, metric, source table, judge
    and the result's figures); the facets read it, so a method called before the task ran still
    answers the tables and the settings known from the rendered arguments."""

    _lineage: dict[str, Any] | None = None
    #: the tables the task reads and writes: ``source`` (the log table) or an output table's name
    lineage_inputs: tuple[str, ...] = ("source",)
    lineage_outputs: tuple[str, ...] = ("ctxprec_scores", "ctxprec_failures")

    def _lineage_facts(self) -> dict[str, Any]:
        facts = dict(self._lineage or {})
        if "source_table" not in facts:
            from ..config import Settings
            from ..pipeline.kinds import metric_kind

            op: Any = self
            try:
                kind = metric_kind(op.metric)
                facts.setdefault("metric", kind.name)
                facts["source_table"] = op.source_table or getattr(Settings.from_env(), kind.table_setting)
            except ValueError:
                facts.setdefault("metric", str(op.metric))
                facts["source_table"] = op.source_table or "retrieval_logs"
        facts.setdefault("partition_key", str(getattr(self, "partition_key", "")))
        facts.setdefault("judge_model", getattr(self, "judge", None))
        return facts

    def _operator_lineage(self, *, failed: str | None = None) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.facet_v2 import schema_dataset
        from openlineage.client.generated.base import Dataset

        from .assets import SCORES_TABLE, table_ref, warehouse_url_at_parse

        op: Any = self
        facts = self._lineage_facts()
        url = warehouse_url_at_parse(op.warehouse_conn_id, op.warehouse_url)
        conn = op.warehouse_conn_id

        def dataset(table: str, facets: dict[str, Any] | None = None) -> Any:
            ref = table_ref(url, table, conn_id=conn)
            return Dataset(namespace=ref.namespace, name=ref.name, facets=facets or {})

        schema = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in SCORES_COLUMNS]
        )
        facet_cls = run_facet_class()
        values = {k: facts.get(k) for k in ("judge_model", "prompt_version", "chunk", *_FIGURES)}
        if failed:
            values["error"] = redact(failed)[:500]
        run_facet = facet_cls(partition_key=str(facts["partition_key"]), metric=str(facts["metric"]), **_typed(values))

        def table(which: str) -> Any:
            name = str(facts["source_table"]) if which == "source" else which
            return dataset(name, {"schema": schema} if name == SCORES_TABLE else None)

        return OperatorLineage(
            inputs=[table(t) for t in self.lineage_inputs],
            outputs=[table(t) for t in self.lineage_outputs],
            run_facets={RUN_FACET_NAME: run_facet},
        )

    def get_openlineage_facets_on_start(self) -> Any:
        return self._operator_lineage()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._operator_lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        error = (self._lineage or {}).get("error") or getattr(task_instance, "error", None)
        return self._operator_lineage(failed=f"{error}" if error else "task failed")


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    """Coerce the figures to the facet's types (XCom dicts may carry ints as floats, NaN as None)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if v is None:
            out[k] = None
        elif k in ("rows_total", "rows_scored", "rows_cached", "rows_failed", "chunk"):
            out[k] = int(v)
        elif k in ("mean_score", "pass_rate", "cost"):
            out[k] = float(v)
        else:
            out[k] = redact(str(v))
    return out
