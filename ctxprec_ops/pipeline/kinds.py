"""The metric kinds a partition run can compute: the one list of metrics in the product.

A ``MetricKind`` says everything an entry point needs about a metric: its name (as stored in
``ctxprec_scores.metric``), the logical columns its input table has, how a row becomes a case,
which table it reads by default and which ``Settings`` fields configure that table and its
column mapping, and how its metric object is built. The CLI, the Airflow operators, the Dagster
assets, monitoring and the demo all iterate or look up this registry instead of keeping lists.

The registry itself is light (names, columns, settings): a kind's metric class and row reader
are imported when a run first builds the metric or reads a row, so the CLI's parsers and
``--help`` list the metrics without loading pydantic and the judge stack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import JudgeConfigurationError
from ..metrics import names
from .columns import ColumnSet, ConversationColumns, LabelColumns, SourceColumns
from .judges import JudgeSettings, build_judge

if TYPE_CHECKING:
    from ..judge.models.base import JudgeModel
    from ..metrics.base import BaseRetrievalMetric

__all__ = ["MetricKind", "MetricSettings", "METRIC_KINDS", "METRIC_NAMES", "DEFAULT_METRIC", "metric_kind"]


class MetricSettings(JudgeSettings, Protocol):
    """What building a metric reads from a run's configuration (``MetricSettings`` has it all)."""

    threshold: float
    strict_mode: bool
    max_nodes_per_call: int
    max_retries: int
    window_size: int
    judge_samples: int
    escalate_to: Any
    escalate_below: float | None
    target_agreement: float | None
    calibration_nodes: int


@dataclass(frozen=True)
class MetricKind:
    """One metric the pipeline can compute."""

    name: str
    title: str
    #: the logical column set of its input table (dataclass; field names are the logical names)
    columns: type[ColumnSet]
    #: returns ``row_to_case`` (imported on first use: the registry stays light)
    load_row_to_case: Callable[[], Callable[[dict[str, Any]], Any]]
    default_table: str
    #: ``Settings`` field naming the input table, and the one holding its column mapping
    table_setting: str
    columns_setting: str
    #: the logical column that holds the retrieved nodes (the report shows their text)
    nodes_column: str
    #: the logical column the judge compares against (the report shows it)
    expected_column: str
    query_column: str
    build: Callable[[MetricSettings, JudgeModel | None], BaseRetrievalMetric]
    #: the description of the scores asset and of the metric in reports
    description: str
    #: ``ctxprec demo``: appended to the report file's stem ("" = the main report)
    report_suffix: str = ""
    #: Airflow: ``nightly_dags`` builds a ``<name>_nightly`` DAG for it; Dagster: its asset is in
    #: the nightly job (an asset of a kind that is not nightly is materialized on demand)
    nightly: bool = True
    #: False: pure computation (``build`` gets no judge, the metric has ``compute(case)``); the
    #: pipeline then builds no judge, needs no API key and reads no judgment cache
    needs_judge: bool = True

    @cached_property
    def row_to_case(self) -> Callable[[dict[str, Any]], Any]:
        """``row dict (logical names) -> test case``; raises ``InvalidTestCaseError`` for bad rows."""
        return self.load_row_to_case()

    @property
    def columns_env(self) -> str:
        return f"CTXPREC_{self.columns_setting.upper()}"

    @property
    def table_env(self) -> str:
        return f"CTXPREC_{self.table_setting.upper()}"


def _common(config: MetricSettings, judge: JudgeModel | None) -> dict[str, Any]:
    if judge is None:  # prepare() builds a judge for every kind that needs one
        raise JudgeConfigurationError("this metric needs a judge, and none was configured")
    out = dict(
        threshold=config.threshold,
        model=judge,
        strict_mode=config.strict_mode,
        max_nodes_per_call=config.max_nodes_per_call,
        max_retries=config.max_retries,
        samples=config.judge_samples,
    )
    if config.escalate_to is not None:  # a cascade: the strong judge at the same endpoint, its own price
        out.update(
            escalate_to=build_judge(config, config.escalate_to),
            escalate_below=config.escalate_below,
            target_agreement=config.target_agreement,
            calibration_nodes=config.calibration_nodes,
        )
    return out


def _single(config: MetricSettings, judge: JudgeModel | None) -> BaseRetrievalMetric:
    from ..metrics.contextual_precision import ContextualPrecisionMetric

    return ContextualPrecisionMetric(**_common(config, judge))


def _turns(config: MetricSettings, judge: JudgeModel | None) -> BaseRetrievalMetric:
    from ..metrics.turn_contextual_precision import TurnContextualPrecisionMetric

    return TurnContextualPrecisionMetric(window_size=config.window_size, **_common(config, judge))


def _labels(config: MetricSettings, judge: JudgeModel | None) -> BaseRetrievalMetric:
    from ..metrics.label_precision import LabelContextualPrecisionMetric

    return LabelContextualPrecisionMetric(threshold=config.threshold, strict_mode=config.strict_mode)


def _test_case_rows() -> Callable[[dict[str, Any]], Any]:
    from .rows import row_to_test_case

    return row_to_test_case


def _conversation_rows() -> Callable[[dict[str, Any]], Any]:
    from .rows import row_to_conversation

    return row_to_conversation


def _labelled_rows() -> Callable[[dict[str, Any]], Any]:
    from .label_rows import row_to_labelled

    return row_to_labelled


_KINDS = (
    MetricKind(
        name=names.CONTEXTUAL_PRECISION,
        title="contextual precision",
        columns=SourceColumns,
        load_row_to_case=_test_case_rows,
        default_table="retrieval_logs",
        table_setting="source_table",
        columns_setting="source_columns",
        nodes_column="retrieval_context",
        expected_column="expected_output",
        query_column="input",
        build=_single,
        description="Contextual precision of every retrieval logged that day (UTC), judged by the LLM judge.",
    ),
    MetricKind(
        name=names.TURN_CONTEXTUAL_PRECISION,
        title="turn contextual precision",
        columns=ConversationColumns,
        load_row_to_case=_conversation_rows,
        default_table="conversation_logs",
        table_setting="conversation_table",
        columns_setting="conversation_columns",
        nodes_column="turns",
        expected_column="expected_outcome",
        query_column="turns",
        build=_turns,
        description="Turn contextual precision of every conversation logged that day (UTC), judged by "
        "sliding windows of user→assistant interactions.",
        report_suffix="_conversations",
    ),
    MetricKind(
        name=names.LABEL_CONTEXTUAL_PRECISION,
        title="label contextual precision",
        columns=LabelColumns,
        load_row_to_case=_labelled_rows,
        default_table="retrieval_logs",
        table_setting="source_table",
        columns_setting="source_columns",
        nodes_column="retrieval_context",
        expected_column="expected_output",
        query_column="input",
        build=_labels,
        description="Contextual precision of every labelled retrieval logged that day (UTC), computed from the "
        "gold labels (retrieved_ids, relevant_ids) with no judge call; recall, reciprocal rank and "
        "NDCG@k in ctxprec_label_figures.",
        report_suffix="_labels",
        # opt-in: a logs table without label columns would fail every night
        nightly=False,
        needs_judge=False,
    ),
)

#: name -> kind, in display order
METRIC_KINDS: dict[str, MetricKind] = {k.name: k for k in _KINDS}
METRIC_NAMES: tuple[str, ...] = tuple(METRIC_KINDS)
DEFAULT_METRIC: str = METRIC_NAMES[0]


def metric_kind(name: str) -> MetricKind:
    """The kind called ``name``; ``ValueError`` naming the choices otherwise."""
    try:
        return METRIC_KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown metric {name!r}; choose from {', '.join(METRIC_NAMES)}") from None
