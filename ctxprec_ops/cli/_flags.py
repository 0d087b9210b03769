"""The flags that set a setting: each names its ``Settings`` field, and takes its type, choices,
default and variable from the declaration — the ``PipelineConfig`` / ``AlertRules`` field that holds
the default and the bounds (no pydantic: ``--help`` stays light). The flag's own help says what it
does; the default (its variable, or the declared value) is appended. ``overrides(args)`` gives the values given, by
setting, and the flags they were given as (``_args.settings`` validates them against the
declaration, naming the flag in an error). ``tests/test_configuration_faces.py`` checks this table
against ``Settings``.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from ..judge import defaults
from ..monitoring.rules import AlertRules
from ..pipeline.bounds import Bounds, bounds_of
from ..pipeline.config import CHUNK_SIZE_DEFAULTS, PipelineConfig

__all__ = ["FLAGS", "Flag", "add_flag", "overrides"]

_RUN = {f.name: f for f in fields(PipelineConfig)}
_RULES = {f.name: f for f in fields(AlertRules)}


@dataclass(frozen=True)
class Flag:
    """``--flag`` sets the setting ``setting`` (a ``Settings`` field); ``declared`` is the field
    holding its default and bounds (None: a setting declared in ``Settings`` only)."""

    flag: str
    setting: str
    help: str
    metavar: str | None = None
    declared: Field | None = None
    #: the variable, when it is not ``CTXPREC_`` + the setting in capitals
    variable: str | None = None
    #: how the default reads when it is a rule rather than a value
    default_text: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def env(self) -> str:
        return self.variable or "CTXPREC_" + self.setting.upper()

    @property
    def bounds(self) -> Bounds:
        return bounds_of(self.declared) if self.declared is not None else Bounds()

    @property
    def default(self) -> Any:
        f = self.declared
        if f is None:
            return None
        factory: Any = f.default_factory
        return factory() if f.default is MISSING else f.default

    def type(self) -> type | None:
        b = self.bounds
        if b.integer:
            return int
        if any(v is not None for v in (b.ge, b.gt, b.le, b.lt)):
            return float
        return None

    def full_help(self, about: str | None = None) -> str:
        value = self.default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        shown = value is not None and value != "" and not (isinstance(value, (list, tuple, dict)) and not value)
        default = self.default_text or (f"{self.env} or {value}" if shown else self.env)
        return f"{about or self.help} (default: {default})"


def _run(flag: str, setting: str, help: str, metavar: str | None = None, field: str | None = None) -> Flag:
    return Flag(flag, setting, help, metavar, _RUN[field or setting])


def _rule(flag: str, setting: str, help: str, metavar: str) -> Flag:
    return Flag(flag, setting, help, metavar, _RULES[setting])


#: every flag that sets a setting, by flag
FLAGS: dict[str, Flag] = {
    f.flag: f
    for f in (
        _run("--warehouse", "warehouse_url", "SQLAlchemy URL of the warehouse", "URL", field="warehouse"),
        Flag(
            "--judge",
            "judge",
            "an OpenAI-compatible model name, or 'lexical' for the offline judge",
            "MODEL",
            default_text=f"CTXPREC_JUDGE, else {defaults.LLM_JUDGE} with OPENAI_API_KEY, else lexical",
        ),
        Flag(
            "--judge-url",
            "openai_base_url",
            "the judge's OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 for vLLM; --judge names "
            "the model served there",
            "URL",
            variable="OPENAI_BASE_URL",
            default_text="OPENAI_BASE_URL, else OpenAI",
        ),
        Flag(
            "--chunk-size",
            "chunk_size",
            "rows per chunk",
            "N",
            _RUN["chunk_size"],
            default_text=f"CTXPREC_CHUNK_SIZE, else {CHUNK_SIZE_DEFAULTS}",
        ),
        _run("--threshold", "threshold", "per-case pass threshold in [0, 1]", "X"),
        _run("--max-nodes-per-call", "max_nodes_per_call", "nodes per judge call for long lists", "N"),
        _run(
            "--samples",
            "judge_samples",
            "self-consistency: ask the judge N sampled answers per node (odd; one request with n=N at "
            "temperature 1 where the endpoint supports it) and keep the majority verdict; costs ~N times the "
            "completion tokens",
            "N",
        ),
        _run(
            "--escalate-to",
            "escalate_to",
            "a judge cascade: --judge judges every node, this strong judge re-judges the verdicts --judge is unsure "
            "of (token log-probabilities, or the agreement of --samples answers); with --escalate-below or "
            "--target-agreement",
            "MODEL",
        ),
        _run("--escalate-below", "escalate_below", "cascade: re-judge the verdicts less sure than C", "C"),
        _run(
            "--target-agreement",
            "target_agreement",
            "cascade: choose C on a calibration sample so that agreement with the strong judge is at least A "
            "(95%% lower bound); stored in ctxprec_cascades and reused until the judges or the prompt change",
            "A",
        ),
        _run("--calibration-nodes", "calibration_nodes", "cascade: nodes of the calibration sample", "N"),
        _run("--recalibrate", "recalibrate", "cascade: choose C again on this partition"),
        _run("--concurrency", "concurrency", "judge requests in flight at most", "N"),
        _run("--max-cost", "max_cost", "cap the run's judge spend in USD", "USD"),
        _run(
            "--max-rpm",
            "max_rpm",
            "judge requests per minute at most, kept before sending; several processes sharing one quota each "
            "get their share, see docs/scaling.md",
            "N",
        ),
        _run("--max-tpm", "max_tpm", "judge tokens per minute at most, estimated prompt + completion allowance", "N"),
        _run(
            "--sample-rate",
            "sample_rate",
            "score only this share of the partition's rows, 0 < R <= 1: the same rows on every run and for "
            "every metric (a hash of the log id)",
            "R",
        ),
        _run("--max-rows", "max_rows", "score at most N rows of the partition (of the sample)", "N"),
        _run(
            "--outage-tolerance",
            "outage_tolerance",
            "how long to wait out a judge outage before giving up on the run's remaining rows (an endpoint "
            "that never answered: 30)",
            "SECONDS",
        ),
        _run(
            "--batch-retry",
            "batch_retry",
            "batch mode: requests a batch did not answer usably go to the next batch (`batch`, half price) or "
            "out at once as sync calls (`sync`, full price)",
        ),
        _run(
            "--segment",
            "segments",
            "a column of the input table whose value each score row carries, for per-segment "
            "trend/check/compare (--by COL); repeatable",
            "COL",
        ),
        _run(
            "--source-format",
            "source_format",
            "rows (a retrieval-log table) or a spans table of OpenInference / OTel GenAI traces: one case per "
            "retriever span (with --otlp-json: the file's convention unless given)",
        ),
        _run("--stage", "stage", "spans: score the retriever spans or the reranker spans' order"),
        _run(
            "--expected-attribute",
            "expected_attribute",
            "spans: the span attribute holding the reference answer",
            "KEY",
        ),  # fmt: skip
        _run(
            "--gold-table",
            "gold_table",
            "spans: table of reference answers, expected_output by trace_id or input; with neither this nor "
            "--expected-attribute scoring is reference-free",
            "NAME",
        ),
        _run(
            "--documents-table",
            "documents_table",
            "spans: table of document texts (id, content) for spans that record document ids only",
            "NAME",
        ),
        _run(
            "--phoenix",
            "phoenix_url",
            "an Arize Phoenix server: without --source-table, the day's retriever spans of --phoenix-project "
            "are read from it and scored; the server --write-back annotates",
            "URL",
        ),
        _run("--phoenix-project", "phoenix_project", "the Phoenix project the spans are read from", "NAME"),
        _run(
            "--write-back",
            "write_back",
            "write each scored span's node verdicts (document annotations) and score (a span annotation) back "
            "to the --phoenix server; a failed write-back never fails the run and is sent again by the next",
        ),
        _rule("--min-mean", "min_mean", "alert when the mean is below X", "X"),
        _rule("--min-pass-rate", "min_pass_rate", "alert when the pass rate is below X", "X"),
        _rule("--min-drop", "min_drop", "regression: smallest drop of the mean that alerts", "X"),
        _rule("--alpha", "alpha", "regression: significance level of the Welch t-test", "P"),
        _rule("--baseline-partitions", "baseline_partitions", "trailing baseline size in scored partitions", "N"),
        _rule("--volume-ratio", "volume_ratio", "volume: alert below X times the baseline median rows", "X"),
        _rule("--max-failure-rate", "max_failure_rate", "alert when more than X of the rows failed", "X"),
        Flag("--webhook", "alert_webhook", "POST alerts to this Slack-compatible webhook", "URL"),
        Flag("--email-to", "alert_email_to", "e-mail alerts to ADDR (repeatable; SMTP from CTXPREC_SMTP_*)", "ADDR"),
    )
}

#: flags that may be given several times (their values make a list)
_REPEATED = frozenset({"--segment", "--email-to"})


def add_flag(
    parser: argparse.ArgumentParser, flag: str, *, to: Any = None, about: str | None = None, **kw: Any
) -> None:
    """Add ``flag`` (a key of ``FLAGS``) to ``parser`` (or to its argument group ``to``); ``about``:
    what it does in this command, when that says more than the table's help."""
    f = FLAGS[flag]
    args: dict[str, Any] = dict(dest=f.dest, default=None, help=f.full_help(about))
    if f.metavar:
        args["metavar"] = f.metavar
    if f.bounds.choices:
        args["choices"] = f.bounds.choices
    elif f.type() is not None:
        args["type"] = f.type()
    if flag in _REPEATED:
        args["action"] = "append"
    args.update(kw)
    (to or parser).add_argument(flag, **args)
    parser.set_defaults(_setting_flags=(*(parser.get_default("_setting_flags") or ()), flag))


def overrides(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """``({setting: value}, {setting: flag})`` of the setting flags given on the command line."""
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    for flag in getattr(args, "_setting_flags", ()):
        f = FLAGS[flag]
        value = getattr(args, f.dest, None)
        if value is not None:
            values[f.setting] = value
            names[f.setting] = flag
    return values, names
