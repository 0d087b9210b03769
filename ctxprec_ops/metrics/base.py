"""What both metrics share: construction (deepeval's signature), measure()/a_measure(),
the result attributes, and turning a case into a ``MetricResult`` without raising."""

from __future__ import annotations

import time
from typing import Any

from .._async import run_sync
from ..cases.results import MetricResult
from ..errors import CtxPrecError, InvalidTestCaseError, JudgeConfigurationError
from ..judge import defaults
from ..judge.cache import judgment_keys
from ..judge.calls import JudgeRun, Usage
from ..judge.cascade import DEFAULT_CALIBRATION_NODES, Cascade, check_cascade_settings, confidence_source, judge_cascade
from ..judge.limiter import AdaptiveLimiter
from ..judge.models import JudgeModel, resolve_judge
from ..judge.nodes import judge_nodes
from ..scoring.samples import check_samples, sampled_version
from ..scoring.template import prompt_version as _prompt_version
from ..secrets import redact

__all__ = ["BaseRetrievalMetric", "record_usage"]


class BaseRetrievalMetric:
    #: value stored in ``ctxprec_scores.metric``
    metric_name: str = "metric"
    #: deepeval's display name
    __name__ = "Metric"
    default_template: type = object
    #: a judge cascade's strong stage and threshold (``escalate_to``); None: one judge
    cascade: Cascade | None = None

    def __init__(
        self,
        threshold: float | None = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: str | None = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        flaky: bool = False,
        evaluation_template: type | None = None,
        *,
        max_nodes_per_call: int = defaults.MAX_NODES_PER_CALL,
        max_retries: int = defaults.MAX_RETRIES,
        samples: int = 1,
        escalate_to: Any = None,
        escalate_below: float | None = None,
        target_agreement: float | None = None,
        calibration_nodes: int = DEFAULT_CALIBRATION_NODES,
    ) -> None:
        """Arguments in deepeval's (4.3) names and positional order. ``threshold=None`` scores
        without a pass/fail verdict (``success`` stays None); ``model`` is a model name,
        ``"lexical"``, a ``JudgeModel`` or a deepeval-style custom model (``get_model_name``,
        ``generate``, ``a_generate``). deepeval's ``eval_mode`` is accepted as ``None``/``"llm"``
        only (the judge is always an LLM-style model here); ``system_one_model`` is not supported.

        ``samples`` (odd, default 1): self-consistency — each node's verdict is the majority of
        that many sampled answers (``consistency.py``); the verdicts then carry their
        ``agreement`` and ``prompt_version`` ends in ``+samples=N``. A deterministic judge
        (``"lexical"``) is asked once whatever ``samples`` says.

        ``escalate_to`` (a judge, as ``model``) makes a cascade (``judge.cascade``): every node is
        judged by ``model`` with a confidence (token log-probabilities, or the agreement of
        ``samples`` >= 3 sampled answers), and the nodes less sure than ``escalate_below`` are
        judged again by ``escalate_to``, whose verdict replaces the first. Or give
        ``target_agreement``: the threshold is then chosen on a sample of ``calibration_nodes``
        nodes judged by both (``calibrate``; ``evaluate`` does it first), so that agreement with
        the strong judge is at least the target (``judge.escalation``). ``evaluation_model`` then
        names the cascade (both models and the threshold or target)."""
        if system_one_model is not None:
            raise JudgeConfigurationError("system_one_model is not supported: pass the judge as model=")
        if eval_mode not in (None, "llm"):
            raise JudgeConfigurationError(f"eval_mode={eval_mode!r} is not supported (only 'llm')")
        if threshold is not None and (
            not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold <= 1
        ):
            raise ValueError(f"threshold must be a number between 0 and 1 or None, got {threshold!r}")
        if max_nodes_per_call < 1:
            raise ValueError("max_nodes_per_call must be at least 1")
        check_samples(samples)
        check_cascade_settings(escalate_to, escalate_below, target_agreement, calibration_nodes)
        self.strict_mode = strict_mode
        self.threshold: float | None = 1.0 if strict_mode else (None if threshold is None else float(threshold))
        self.model: JudgeModel = resolve_judge(model)
        #: the cascade's strong stage and threshold (None: one judge)
        self.cascade: Cascade | None = None
        if escalate_to is not None:
            strong = resolve_judge(escalate_to)
            if strong.get_model_name() == self.model.get_model_name():
                raise JudgeConfigurationError(
                    f"escalate_to names the cheap judge again ({strong.get_model_name()!r}): a cascade "
                    "escalates to another judge"
                )
            source = confidence_source(self.model, samples)  # refused before any call
            self.cascade = Cascade(strong, escalate_below, target_agreement, calibration_nodes, source)
        self.evaluation_model = self._model_name()
        self.include_reason = include_reason
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        self.flaky = flaky
        self.eval_mode = eval_mode or "llm"
        self.system_one_model = None
        template = evaluation_template or self.default_template
        #: the judge's prompt template; None on a metric that calls no judge (the label metric)
        self.evaluation_template: type | None = template
        #: sampled answers per node asked for; ``judge_samples``: what the judge is really asked
        #: (1 for a deterministic judge, which would repeat its one answer)
        self.samples = samples
        self.judge_samples = 1 if self.model.deterministic else samples
        self._template_version = _prompt_version(template)
        self.prompt_version = sampled_version(self._template_version, self.judge_samples)
        self.max_nodes_per_call = max_nodes_per_call
        self.max_retries = max_retries
        self._reset()

    def _model_name(self) -> str:
        """The judge of this metric's scores: the model's name, or the cascade's (``cascade_name``)."""
        cheap = self.model.get_model_name()
        return cheap if self.cascade is None else self.cascade.name(cheap)

    def stage_keys(self, question: str, expected: str, nodes: list[str]) -> list[bytes]:
        """The judgment-cache keys judging ``nodes`` looks up: one judge's, or both stages' of a
        cascade (the strong stage's may have been judged before: a calibration, a strong-only run)."""
        if self.cascade is None:
            return judgment_keys(self.evaluation_model, self.prompt_version, question, expected, nodes)
        cheap_version, strong_version = self.stage_versions()
        return judgment_keys(self.model.get_model_name(), cheap_version, question, expected, nodes) + judgment_keys(
            self.cascade.strong_model, strong_version, question, expected, nodes
        )

    async def judge_node_list(
        self, run: JudgeRun, question: str, expected: str, nodes: list[str], usage: Usage
    ) -> list:
        """The verdicts of ``nodes`` (rank 1 first): the judge's, or the cascade's."""
        template = self.judge_template()
        if self.cascade is None:
            verdicts, _ = await judge_nodes(
                self.model, template, self.prompt_version, question, expected, nodes, run,
                max_nodes_per_call=self.max_nodes_per_call, usage=usage, samples=self.judge_samples,
            )  # fmt: skip
            return verdicts
        versions = self.stage_versions()
        return await judge_cascade(
            self.model, self.cascade, template, versions, question, expected, nodes, run,
            usage=usage, max_nodes_per_call=self.max_nodes_per_call, samples=self.judge_samples,
        )  # fmt: skip

    def stage_versions(self) -> tuple[str, str]:
        """The prompt versions that key a cascade's cheap and strong stages in the judgment cache."""
        if self.cascade is None:
            raise JudgeConfigurationError("this metric has no cascade (escalate_to): it has one judge's prompt version")
        return self.cascade.versions(self._template_version, self.judge_samples)

    def set_threshold(self, escalate_below: float, calibration: Any = None) -> None:
        """Set the cascade's ``C`` (chosen by a calibration for its target agreement)."""
        if self.cascade is None:
            raise JudgeConfigurationError("this metric has no cascade (escalate_to) to set a threshold for")
        self.cascade.escalate_below = float(escalate_below)
        self.cascade.calibration = calibration

    def calibrate(self, cases: Any, *, nodes: int | None = None, labels: Any = None, seed: Any = 0) -> Any:
        """Choose the cascade's threshold for its ``target_agreement`` on a sample of ``nodes`` nodes
        (default ``calibration_nodes``) of ``cases``, judged by both judges; ``labels``
        (``{case id: {rank: relevant}}``) makes people's labels the reference for the labelled
        nodes instead of the strong judge. Returns the ``judge.escalation.Calibration``."""
        from .cascade_calibration import calibrate_metric

        return run_sync(lambda: calibrate_metric(self, cases, nodes=nodes, labels=labels, seed=seed))

    def judge_template(self) -> type:
        """The prompt template the judge is called with (a judged metric always has one)."""
        if self.evaluation_template is None:
            raise JudgeConfigurationError(f"{type(self).__name__} has no evaluation_template to call a judge with")
        return self.evaluation_template

    def _reset(self) -> None:
        self.score: float | None = None
        self.success: bool | None = None
        self.reason: str | None = None
        self.verdicts: list = []
        self.evaluation_cost: float | None = None
        self.verbose_logs: str | None = None
        self.error: str | None = None
        self.result: MetricResult | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    # -- to implement ------------------------------------------------------------------------
    def accepts(self, test_case: Any) -> bool:
        """Whether this metric scores this kind of case (``evaluate`` pairs them up)."""
        raise NotImplementedError

    def coerce(self, test_case: Any) -> Any:
        """The case as this metric's own test-case class (a deepeval case is copied by attribute);
        returned unchanged when it is of another kind (``_validate`` then says so)."""
        return test_case

    def _validate(self, test_case: Any) -> None:
        raise NotImplementedError

    def judgment_keys(self, test_case: Any) -> list[bytes]:
        """The judgment-cache keys scoring ``test_case`` looks up (to preload them in one query)."""
        raise NotImplementedError

    def judge_requests(self, test_case: Any) -> list[tuple[str, str, list[str]]]:
        """``[(question, expected, nodes)]`` scoring ``test_case`` sends the judge (after validation)."""
        raise NotImplementedError

    async def _evaluate(self, test_case: Any, run: JudgeRun, result: MetricResult) -> None:
        """Fill ``result`` (score, verdicts, usage...). Raise on failure."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------------
    async def score_case(self, test_case: Any, run: JudgeRun, case_index: int = 0) -> MetricResult:
        """Score one case; never raises for a case-level problem (the error is in the result)."""
        result = MetricResult(
            case_id=getattr(test_case, "id", None),
            metric=self.metric_name,
            threshold=self.threshold,
            judge_model=self.evaluation_model,
            prompt_version=self.prompt_version,
            case_index=case_index,
        )
        started = time.perf_counter()
        try:
            test_case = self.coerce(test_case)
            if getattr(test_case, "multimodal", False) and not all(
                j.supports_multimodal() for j in (self.model, *((self.cascade.strong,) if self.cascade else ()))
            ):
                raise InvalidTestCaseError(
                    f"{_case_label(test_case, case_index)}: images are not supported by the judge "
                    f"{self.evaluation_model!r}: the case holds images and this judge is not multimodal (use a "
                    "vision model such as gpt-4o-mini, OpenAIJudge(..., multimodal=True), or a custom judge whose "
                    "supports_multimodal() is True); no judge call was made"
                )
            self._validate(test_case)
            await self._evaluate(test_case, run, result)
            result.success = _passes(result.score, self.threshold)
        except Exception as exc:  # isolate: one case never takes others down
            result.score = None
            result.success = False
            result.reason = None
            result.error_type = getattr(exc, "error_type", None) or _error_type(exc)
            result.error = redact(f"{exc}" if isinstance(exc, CtxPrecError) else f"{type(exc).__name__}: {exc}")
            result.exception = exc
        result.seconds = time.perf_counter() - started
        return result

    def _apply(self, result: MetricResult) -> None:
        self.result = result
        self.score = result.score
        self.success = result.success
        self.reason = result.reason if self.include_reason else None
        self.verdicts = list(result.verdicts)
        self.evaluation_cost = result.cost
        self.verbose_logs = result.verbose_logs
        self.error = result.error
        self.input_tokens = result.prompt_tokens
        self.output_tokens = result.completion_tokens
        if self.verbose_mode and result.verbose_logs:
            print(result.verbose_logs)

    async def a_measure(self, test_case: Any, _show_indicator: bool = True, **_: Any) -> float | None:
        self._reset()
        run = JudgeRun(limiter=AdaptiveLimiter(defaults.CONCURRENCY), max_retries=self.max_retries)
        try:
            result = await self.score_case(test_case, run)
        finally:
            for judge in (self.model, *((self.cascade.strong,) if self.cascade else ())):
                close = getattr(judge, "aclose", None)
                if close is not None:
                    await close()
        self._apply(result)
        exc = result.exception
        if exc is not None:
            raise exc
        return self.score

    def measure(self, test_case: Any, _show_indicator: bool = True, **_: Any) -> float | None:
        """Score one case; works inside a running event loop (no loop patching)."""
        return run_sync(lambda: self.a_measure(test_case))

    def is_successful(self) -> bool | None:
        """As deepeval computes it, from the current attributes: None without a threshold, False
        after an error, else ``score >= threshold`` (False when there is no score)."""
        if self.threshold is None:
            self.success = None
        elif self.error is not None:
            self.success = False
        else:
            self.success = _passes(self.score, self.threshold)
        return self.success

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold}, model={self.evaluation_model!r})"


def record_usage(result: MetricResult, usage: Any) -> None:
    """Copy a ``judge.calls.Usage`` (calls, tokens, cost, attempts, cache hits) onto ``result``."""
    result.judge_calls = usage.calls
    result.prompt_tokens = usage.prompt_tokens
    result.completion_tokens = usage.completion_tokens
    result.cost = usage.cost
    result.attempts = usage.attempts
    result.cached_nodes = usage.cached_nodes
    if usage.cascade_nodes:
        result.nodes_judged = usage.cascade_nodes
        result.nodes_escalated = usage.escalated_nodes
    result.strong_cost = usage.strong_cost


def _passes(score: float | None, threshold: float | None) -> bool | None:
    if threshold is None:
        return None
    return score is not None and score >= threshold


def _case_label(test_case: Any, index: int) -> str:
    """How an error names the case: its id, else its name, else its position."""
    for attr in ("id", "name"):
        value = getattr(test_case, attr, None)
        if value is not None:
            return f"case {value!r}"
    return f"case at index {index}"


def _error_type(exc: Exception) -> str:
    if isinstance(exc, InvalidTestCaseError):
        return "invalid_input"
    return "error"
