"""What scoring a partition would cost, without calling the judge: ``estimate_partition``.

The partition is streamed in keyset chunks by the pipeline's own pager (``pipeline.plan``). Per row: rows that
already have a score for this (metric, judge, prompt version) are skipped, rows that would fail
validation cost nothing, and nodes already in ``ctxprec_judgments`` (or repeated within a chunk)
are not judged again. The remaining nodes are grouped by ``max_nodes_per_call`` like the real
run, each group's prompt is rendered with the real template, and

- prompt tokens = the rendered prompt's tokens in the model's BPE encoding when an offline
  tokenizer is installed (``tokens.py``: ``bpe-openai`` bundles cl100k_base and o200k_base), else
  prompt characters / 4 (for English text typically ~15% above the model's count); + 8 per call;
- completion tokens ~= 40 per node + 10 per call (one short JSON verdict per node), times
  ``samples`` when the metric asks several sampled answers per node (self-consistency: the
  prompt is sent once, every answer is paid for).

Repairs and retries are not predicted (they add calls only when the judge answers badly), and
an offline judge (``lexical``) makes these "calls" locally at no cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import CtxPrecError
from ..judge.cache import judgment_keys
from ..judge.calls import EST_COMPLETION_TOKENS_PER_NODE
from ..judge.models import JudgeModel
from ..judge.pricing import BATCH_DISCOUNT, batch_price_of, price_of
from ..judge.tokens import token_counter
from ..scoring.template import answer_format
from ..warehouse.engine import get_engine, read_connection
from ..warehouse.reflect import get_columns, table_names
from ..warehouse.schema import JUDGMENTS, SCORES, output_tables
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.source import Partition, reflect_source
from ..warehouse.store import load_judgments, scored_ids
from . import PipelineConfig
from .formats import SPAN_FORMATS, make_reader
from .judges import build_judge
from .mapping import mapping_of
from .plan import iter_chunk_rows

__all__ = [
    "Estimate",
    "estimate_partition",
    "PROMPT_TOKENS_PER_CALL",
    "COMPLETION_TOKENS_PER_NODE",
    "COMPLETION_TOKENS_PER_CALL",
]

PROMPT_TOKENS_PER_CALL = 8  # chat message framing
COMPLETION_TOKENS_PER_NODE = EST_COMPLETION_TOKENS_PER_NODE
COMPLETION_TOKENS_PER_CALL = 10

EstimateProgress = Callable[[int, int | None], None]  # (rows read, rows total or None)


@dataclass
class Estimate:
    """Figures a run of one partition would produce (before any judge call)."""

    partition_key: str
    metric: str
    judge_model: str
    prompt_version: str
    offline_judge: bool
    rows_total: int = 0
    rows_already_scored: int = 0
    rows_invalid: int = 0
    rows_to_score: int = 0
    nodes_total: int = 0
    nodes_cached: int = 0
    nodes_to_judge: int = 0
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0  # None when the judge's price is unknown
    #: the same calls through the Batch API (``judge_mode="batch"``): half price unless
    #: CTXPREC_PRICES has a ``"model@batch"`` entry
    batch_cost: float | None = 0.0
    price_per_million: tuple[float, float] | None = None
    invalid_examples: list[str] = field(default_factory=list)  # up to 5 messages
    #: how prompt tokens were counted: "o200k_base BPE (bpe-openai)" or "characters/4 (...)"
    tokenizer: str = ""
    method: str = ""
    #: sampled answers per node (self-consistency); completion tokens count every one
    samples: int = 1
    #: a judge cascade: the strong stage's and the calibration's figures (``estimate_cascade``); the
    #: figures above are the cheap judge's, ``cost`` the whole
    cascade: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.method:
            completion = f"{COMPLETION_TOKENS_PER_NODE}/node + {COMPLETION_TOKENS_PER_CALL}/call"
            if self.samples > 1:
                completion = f"({completion}) x {self.samples} sampled answers"
            self.method = (
                f"prompt tokens = rendered prompts counted by {self.tokenizer or 'characters/4'} + "
                f"{PROMPT_TOKENS_PER_CALL} per call; completion tokens = {completion}; excludes rows already "
                "scored and nodes in the judgment cache; repairs/retries not included"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _price(judge: JudgeModel, config: PipelineConfig) -> tuple[float, float] | None:
    return judge.price_per_million or price_of(judge.get_model_name(), config.prices)


def estimate_partition(
    config: PipelineConfig,
    partition_key: str | Partition,
    *,
    progress: EstimateProgress | None = None,
) -> Estimate:
    """Count what scoring ``partition_key`` with ``config`` would send to the judge. Read-only:
    no judge call, nothing written (output tables that do not exist yet are treated as empty)."""
    partition = Partition.of(partition_key)
    kind = config.kind
    judge = build_judge(config)
    metric = kind.build(config, judge)
    template = metric.evaluation_template
    model, version = metric.evaluation_model, metric.prompt_version
    # the nodes the (cheap) judge would judge: those not in its stage of the judgment cache
    cache_model, cache_version = model, version
    if metric.cascade is not None:
        cache_model, cache_version = judge.get_model_name(), metric.stage_versions()[0]
    price = _price(judge, config)
    counter = token_counter(judge.get_model_name())
    est = Estimate(
        partition.key,
        metric.metric_name,
        model,
        version,
        bool(getattr(judge, "offline", False)),
        price_per_million=price,
        tokenizer=counter.description,
        samples=metric.judge_samples,
    )
    group = config.max_nodes_per_call
    samples = est.samples
    engine = get_engine(config.warehouse, read_only=True)  # an estimate writes nothing, not even SQLite's header
    src = reflect_source(
        engine,
        config.table_name,
        config.source_schema,
        config.source_columns.as_dict(),
        columns_env="CTXPREC_SPAN_COLUMNS" if config.source_format in SPAN_FORMATS else kind.columns_env,
        optional=config.source_columns.optional_missing_ok(),
    )
    reader = make_reader(config, engine, src)
    existing = set(table_names(engine, config.output_schema))
    tables = output_tables(config.output_schema)
    # scores of this input table (tables written before source_table existed: of any table)
    have = {c["name"] for c in get_columns(engine, SCORES, config.output_schema)} if SCORES in existing else set()
    keyed_by_table = "source_table" in have
    # and of this column mapping (tables written before mapping existed: of any)
    mapping = mapping_of(config) if "mapping" in have else None
    key = ScoringKey(metric.metric_name, model, version, reader.name if keyed_by_table else None, mapping)
    prompt_tokens = 0

    for _chunk, rows in iter_chunk_rows(engine, src, partition, config.rows_per_chunk, config.sample, reader):
        est.rows_total += len(rows)
        ids = [str(r["id"]) for r in rows]
        with read_connection(engine) as conn:
            done = scored_ids(conn, tables, key, ids) if SCORES in existing else set()
        est.rows_already_scored += len(done)
        # (question, expected, [(rank, node)]) per judge request of every case still to score
        requests: list[tuple[str, str, list[tuple[int, str]]]] = []
        for row, log_id in zip(rows, ids):
            if log_id in done:
                continue
            try:
                for q, a, texts in metric.judge_requests(reader.to_case(row)):
                    requests.append((q, a, list(enumerate(texts, start=1))))
            except CtxPrecError as exc:
                est.rows_invalid += 1
                if len(est.invalid_examples) < 5:
                    est.invalid_examples.append(f"{log_id}: {exc}")
                continue
            est.rows_to_score += 1
        keyed = [
            judgment_keys(cache_model, cache_version, q, a, [text for _, text in nodes]) for q, a, nodes in requests
        ]
        with read_connection(engine) as conn:
            cached = (
                set(load_judgments(conn, tables, [k for ks in keyed for k in ks], agreement=False))
                if JUDGMENTS in existing
                else set()
            )
        for (q, a, nodes), keys in zip(requests, keyed):
            est.nodes_total += len(nodes)
            todo: list[tuple[int, str]] = []
            for (rank, text), k in zip(nodes, keys):
                if k in cached:
                    est.nodes_cached += 1
                else:
                    cached.add(k)  # judged once in this chunk, a cache hit afterwards
                    todo.append((rank, text))
            est.nodes_to_judge += len(todo)
            for i in range(0, len(todo), group):
                part = todo[i : i + group]
                prompt = answer_format(template).prompt(q, a, [t for _, t in part], [r for r, _ in part])
                prompt_tokens += counter.count(prompt)
                est.judge_calls += 1
                est.prompt_tokens += PROMPT_TOKENS_PER_CALL
                # every sampled answer is a completion (self-consistency: ``samples`` per request)
                est.completion_tokens += (COMPLETION_TOKENS_PER_CALL + COMPLETION_TOKENS_PER_NODE * len(part)) * samples
        if progress is not None:
            progress(est.rows_total, None)

    est.prompt_tokens += prompt_tokens
    if price is None:
        est.cost = None
    else:
        est.cost = (est.prompt_tokens * price[0] + est.completion_tokens * price[1]) / 1_000_000
    model_name = judge.get_model_name()  # a cascade's cheap judge (est.judge_model names the cascade)
    batch_price = batch_price_of(model_name, config.prices) if price is not None else None
    if judge.price_per_million is not None and price is not None and f"{model_name}@batch" not in config.prices:
        batch_price = (price[0] * BATCH_DISCOUNT, price[1] * BATCH_DISCOUNT)
    est.batch_cost = (
        None
        if batch_price is None or samples > 1  # batch mode does not sample
        else (est.prompt_tokens * batch_price[0] + est.completion_tokens * batch_price[1]) / 1_000_000
    )
    if metric.cascade is not None:  # the strong stage on the expected share, and a calibration when due
        from .estimate_cascade import price_cascade

        price_cascade(est, config, metric, engine, price)
    return est
