"""How spans become cases: the trace settings of a run (light: the pipeline's config builds them
without loading the spans reader)."""

from __future__ import annotations

from dataclasses import dataclass

from ..warehouse.identifiers import split_table_name
from .conventions import CONVENTIONS, STAGES

__all__ = ["TraceOptions", "RERANK_SUFFIX"]

#: appended to a spans table's name for the reranker stage's scores (another population)
RERANK_SUFFIX = "__rerank"


@dataclass(frozen=True)
class TraceOptions:
    """How spans become cases (``PipelineConfig``'s trace settings)."""

    convention: str
    stage: str = "retrieve"
    #: span attribute holding the reference answer (on the case span, else on its LLM span)
    expected_attribute: str | None = None
    #: table of reference answers: ``expected_output`` with ``trace_id`` and/or ``input``
    gold_table: str | None = None
    #: table of document texts by id (``id``, ``content``), for spans that record ids only
    documents_table: str | None = None

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ValueError(f"unknown trace convention {self.convention!r}; choose from {', '.join(CONVENTIONS)}")
        if self.stage not in STAGES:
            raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {self.stage!r}")
        if self.stage not in CONVENTIONS[self.convention].markers:
            raise ValueError(
                f"--stage {self.stage} needs --source-format openinference: the {self.convention} "
                "conventions define no reranker span"
            )
        for name in ("gold_table", "documents_table"):
            value = getattr(self, name)
            if value is not None:
                split_table_name(value, None, name.replace("_", " ") + " name")

    @property
    def reference_configured(self) -> bool:
        return bool(self.expected_attribute or self.gold_table)

    def notes(self) -> list[str]:
        """What a run with these options should say about its scores (the reference-free note)."""
        if self.reference_configured:
            return []
        return [
            "reference-free: no expected output is configured, so each retrieval was judged against the "
            "answer of its trace's LLM span (configure an expected-output attribute or a gold table for "
            "reference-based scores)"
        ]
