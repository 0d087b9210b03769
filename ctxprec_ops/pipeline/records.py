"""What a partition run produces: chunks, chunk results, the run row, progress events.

Row accounting of a run (the ledger, ``pipeline/ledger.py``): ``rows_total`` is the partition's
rows in the source (with an id a ``log_id`` can hold; ``rows_without_id`` counts the others),
``rows_sampled`` those in the run's sample, and every sampled row is in exactly one of
``rows_scored`` (a score row, however obtained), ``rows_failed`` (a ``ctxprec_failures`` row) or
``rows_unaccounted`` (neither: never ``succeeded``). ``rows_cached`` is the part of
``rows_scored`` that cost no judge call in this run (scored by an earlier run, or every node
verdict from the judgment cache). A chunk's ``rows_total`` is its rows, ``rows_scored +
rows_failed`` plus the rows deferred to a later pass and the rows another run held
(``rows_held``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from ..errors import BudgetExhaustedError, InvalidTestCaseError, NotScorableError

if TYPE_CHECKING:  # light at import (the CLI's progress display reads these records)
    from ..warehouse.source import Partition

__all__ = [
    "Chunk",
    "ChunkResult",
    "RunSummary",
    "RunStatus",
    "ProgressEvent",
    "ProgressCallback",
    "Waiting",
    "INPUT_PROBLEMS",
    "run_status",
]

#: failure types that are problems of the data, not of the run: a partition whose only failures
#: are of these types is complete (the rows are recorded; fixing them is the source's job)
INPUT_PROBLEMS = frozenset({InvalidTestCaseError.error_type, NotScorableError.error_type})


class RunStatus(str, Enum):
    """``ctxprec_runs.status``: whether work is left for a retry.

    ``succeeded``: the run did all it could — every row of the partition is scored or recorded
    as bad input (``invalid_input``, ``not_scorable``: counted in ``rows_failed``, fixed at the
    source, never retried). ``partial``: work is left for a retry — rows failed for judge reasons,
    or rows are unaccounted for (``rows_unaccounted``). ``budget_exhausted``: some rows could not
    be afforded under ``max_cost`` (the next run picks them up). ``failed``: rows exist but none
    could be scored because of judge errors, or the run aborted. ``running``: written when a run starts,
    replaced when it ends. ``interrupted``: a ``running`` row that a later run of the same
    partition found when it finished (the process was killed before it recorded its end).
    """

    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    BUDGET_EXHAUSTED = "budget_exhausted"
    FAILED = "failed"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    WAITING = "waiting"

    def __str__(self) -> str:
        return self.value


def run_status(scored: int, failed_by_type: dict[str, int], unaccounted: int = 0) -> RunStatus:
    """The status of a finished run from its scored count, failures by type and unaccounted rows."""
    if BudgetExhaustedError.error_type in failed_by_type:
        return RunStatus.BUDGET_EXHAUSTED
    retryable = [t for t in failed_by_type if t not in INPUT_PROBLEMS]
    if not retryable and not unaccounted:
        return RunStatus.SUCCEEDED
    if scored == 0 and retryable:
        return RunStatus.FAILED
    return RunStatus.PARTIAL


@dataclass(frozen=True)
class Chunk:
    """One keyset slice of a partition: ids in (after_id, upto_id], in id order."""

    partition_key: str
    index: int
    after_id: Any | None
    upto_id: Any
    rows: int
    #: the partition's sampling cutoff (``pipeline.sampling``): a row is scored iff its sampling
    #: hash is below it; None = every row
    sample_cutoff: int | None = None

    @classmethod
    def of(cls, partition: Partition, index: int, after_id: Any, upto_id: Any, rows: int) -> Chunk:
        """A chunk of ``partition``, which it carries (never parsed again)."""
        chunk = cls(partition.key, index, after_id, upto_id, rows)
        chunk.__dict__["partition"] = partition  # the cached_property's value
        return chunk

    @cached_property
    def partition(self) -> Partition:
        """The chunk's ``Partition``: the one it was planned in, or ``partition_key`` parsed once
        (a chunk that came as a dict, e.g. from another Airflow task)."""
        from ..warehouse.source import Partition

        return Partition.of(self.partition_key)

    def with_cutoff(self, cutoff: int | None) -> Chunk:
        """This chunk with the partition's sampling cutoff (and the same ``partition``)."""
        chunk = replace(self, sample_cutoff=cutoff)
        chunk.__dict__["partition"] = self.partition
        return chunk

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Chunk:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class ChunkResult:
    partition_key: str
    index: int
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_calls: int = 0
    #: ``{error_type: rows}`` of this chunk's failures
    failures_by_type: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: why the chunk is incomplete when one cause explains it (the judge outage that was given up on)
    error_message: str | None = None
    #: rows of the chunk in the sample (``rows_total`` counts every row of the chunk)
    rows_sampled: int | None = None
    #: rows whose judge requests a deferred transport took (written in a later pass)
    rows_deferred: int = 0
    #: a judge cascade: nodes of the scored rows, those the strong judge decided, and the spend
    #: of each judge (None: unknown)
    nodes_judged: int = 0
    nodes_escalated: int = 0
    cheap_cost: float | None = 0.0
    strong_cost: float | None = 0.0
    #: rows another run was judging when the chunk was read (``warehouse/claims.py``): the
    #: stream reads the chunk again once they are released (``rows_total`` counts them)
    rows_held: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChunkResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class Waiting:
    """What a run that returned before its transport's work ended waits for (JSON-safe)."""

    #: the transport (``judge_mode``) and the provider ids of its work in flight (batch ids)
    transport: str
    ids: list[str]
    #: how often to poll, and what to pass back as ``score_partition(resume=...)``
    poll_seconds: float
    resume: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    """The ``ctxprec_runs`` row of one partition run (JSON-safe via ``to_dict``)."""

    run_id: str
    partition_key: str
    metric: str
    status: str
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    mean_score: float | None = None
    median_score: float | None = None
    pass_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_model: str | None = None
    prompt_version: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    threshold: float | None = None
    judge_calls: int = 0
    failures_by_type: dict[str, int] = field(default_factory=dict)
    error_message: str | None = None
    #: rows of the source table that belong to no partition (``event_time`` NULL or unreadable)
    #: and rows of this partition whose id is NULL: neither scored nor failed, counted and warned
    rows_unpartitioned: int = 0
    rows_without_id: int = 0
    #: the input table the run read (``schema.table`` as configured): part of the run's identity
    source_table: str | None = None
    #: the fingerprint of the column mapping it read the table with (``pipeline.mapping``)
    mapping: str | None = None
    #: the run's sampling rate; ``rows_sampled`` rows of the partition's ``rows_total`` were in the
    #: sample (all of them at rate 1 without ``max_rows``)
    sample_rate: float = 1.0
    rows_sampled: int | None = None
    #: rows of the sample in neither ``ctxprec_scores`` nor ``ctxprec_failures`` after the run
    #: (the ledger); ``unaccounted_ids``: the first few of their ids (not a column)
    rows_unaccounted: int = 0
    unaccounted_ids: list[str] = field(default_factory=list)
    #: a judge cascade (None for one judge): the nodes of the rows this run scored, those the
    #: strong judge decided and their share, the spend of each judge, the threshold C used and
    #: the agreement with the reference measured on the calibration sample that chose it
    nodes_judged: int | None = None
    nodes_escalated: int | None = None
    escalation_rate: float | None = None
    cheap_cost: float | None = None
    strong_cost: float | None = None
    escalate_below: float | None = None
    calibration_agreement: float | None = None
    #: set while the run waits for its transport (status ``waiting``); not a ``ctxprec_runs`` column
    waiting: Waiting | None = None

    def __post_init__(self) -> None:
        self.status = RunStatus(self.status).value  # refuse unknown statuses; store the plain string

    @property
    def completed(self) -> bool:
        """Every row is scored, or recorded as bad input (the scheduler's "done")."""
        return self.status == RunStatus.SUCCEEDED

    @property
    def input_problems(self) -> int:
        """Rows recorded as bad input (fixed at the source, not by re-running)."""
        return sum(n for t, n in self.failures_by_type.items() if t in INPUT_PROBLEMS)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["waiting"] is None:  # only a waiting run carries it
            del d["waiting"]
        for k in ("started_at", "finished_at"):
            if d[k] is not None:
                d[k] = d[k].isoformat()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSummary:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        for k in ("started_at", "finished_at"):
            if isinstance(values.get(k), str):
                values[k] = datetime.fromisoformat(values[k])
        if isinstance(values.get("waiting"), dict):
            values["waiting"] = Waiting(**values["waiting"])
        return cls(**values)


@dataclass(frozen=True)
class ProgressEvent:
    #: ``judge_outage``: the circuit breaker paused, probed, resumed or gave up (``message`` says
    #: which, why and for how long)
    #: ``cascade``: the run's cascade threshold was reused or chosen (``message`` says which)
    #: ``claims_waiting``: rows another run is judging are waited for (``message`` names the run)
    kind: Literal[
        "planned",
        "chunk_started",
        "rows_done",
        "chunk_done",
        "finished",
        "judge_outage",
        "batch_waiting",
        "cascade",
        "claims_waiting",
    ]
    partition_key: str
    done: int = 0
    total: int | None = None
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]
