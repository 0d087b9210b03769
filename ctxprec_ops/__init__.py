"""ctxprec-ops: contextual precision for RAG retrievers, as a production pipeline.

>>> from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase
>>> metric = ContextualPrecisionMetric(model="lexical")
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from .judge import defaults as _judge_defaults

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name is imported on first use
    from .cases.contexts import RetrievedContextData
    from .cases.conversational import ConversationalTestCase, Turn
    from .cases.images import MLLMImage
    from .cases.params import MultiTurnParams, SingleTurnParams, ToolCallParams
    from .cases.results import EvaluationResult, MetricData, MetricResult, TestResult, WindowResult
    from .cases.single_turn import LLMTestCase, ModelTestCase
    from .cases.tool_call import ToolCall, ToolCallType
    from .cases.validation import TestCaseTypeError, TestCaseValidationError
    from .errors import (
        BudgetExhaustedError,
        CtxPrecError,
        InvalidTestCaseError,
        JudgeAnswerError,
        JudgeConfigurationError,
        JudgeUnavailableError,
        NotScorableError,
    )
    from .evaluation.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
    from .evaluation.evaluate import a_evaluate, assert_test, evaluate
    from .judge.models import DeepEvalBaseLLM, JudgeModel, LexicalJudge, OpenAIJudge, make_judge
    from .judge.retry import TransientJudgeError
    from .metrics.contextual_precision import ContextualPrecisionMetric
    from .metrics.turn_contextual_precision import TurnContextualPrecisionMetric
    from .scoring.template import ContextualPrecisionTemplate, TurnContextualPrecisionTemplate
    from .scoring.verdicts import NodeVerdict

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use: ``_lazy``)
_EXPORTS = {
    "EvaluationResult": ".cases.results",
    "MetricData": ".cases.results",
    "MetricResult": ".cases.results",
    "TestResult": ".cases.results",
    "WindowResult": ".cases.results",
    "ConversationalTestCase": ".cases.conversational",
    "LLMTestCase": ".cases.single_turn",
    "MLLMImage": ".cases.images",
    "ModelTestCase": ".cases.single_turn",
    "MultiTurnParams": ".cases.params",
    "RetrievedContextData": ".cases.contexts",
    "SingleTurnParams": ".cases.params",
    "TestCaseTypeError": ".cases.validation",
    "TestCaseValidationError": ".cases.validation",
    "ToolCall": ".cases.tool_call",
    "ToolCallParams": ".cases.params",
    "ToolCallType": ".cases.tool_call",
    "Turn": ".cases.conversational",
    "BudgetExhaustedError": ".errors",
    "CtxPrecError": ".errors",
    "InvalidTestCaseError": ".errors",
    "JudgeAnswerError": ".errors",
    "JudgeConfigurationError": ".errors",
    "JudgeUnavailableError": ".errors",
    "NotScorableError": ".errors",
    "AsyncConfig": ".evaluation.configs",
    "CacheConfig": ".evaluation.configs",
    "DisplayConfig": ".evaluation.configs",
    "ErrorConfig": ".evaluation.configs",
    "a_evaluate": ".evaluation.evaluate",
    "assert_test": ".evaluation.evaluate",
    "evaluate": ".evaluation.evaluate",
    "DeepEvalBaseLLM": ".judge.models",
    "JudgeModel": ".judge.models",
    "LexicalJudge": ".judge.models",
    "OpenAIJudge": ".judge.models",
    "make_judge": ".judge.models",
    "TransientJudgeError": ".judge.retry",
    "ContextualPrecisionMetric": ".metrics.contextual_precision",
    "TurnContextualPrecisionMetric": ".metrics.turn_contextual_precision",
    "ContextualPrecisionTemplate": ".scoring.template",
    "TurnContextualPrecisionTemplate": ".scoring.template",
    "NodeVerdict": ".scoring.verdicts",
}

__all__ = [
    "ContextualPrecisionMetric",
    "TurnContextualPrecisionMetric",
    "LLMTestCase",
    "ModelTestCase",
    "ConversationalTestCase",
    "Turn",
    "ContextualPrecisionTemplate",
    "TurnContextualPrecisionTemplate",
    "JudgeModel",
    "OpenAIJudge",
    "LexicalJudge",
    "make_judge",
    "evaluate",
    "a_evaluate",
    "EvaluationResult",
    "MetricResult",
    "WindowResult",
    "NodeVerdict",
    "TransientJudgeError",
    "CtxPrecError",
    "InvalidTestCaseError",
    "JudgeAnswerError",
    "JudgeUnavailableError",
    "JudgeConfigurationError",
    "BudgetExhaustedError",
    "NotScorableError",
    # deepeval compatibility
    "assert_test",
    "AsyncConfig",
    "DisplayConfig",
    "ErrorConfig",
    "CacheConfig",
    "DeepEvalBaseLLM",
    "MetricData",
    "TestResult",
    "ToolCall",
    "TestCaseTypeError",
    "MLLMImage",
    "RetrievedContextData",
    "SingleTurnParams",
    "MultiTurnParams",
    "ToolCallParams",
    "ToolCallType",
    "TestCaseValidationError",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


def _configured_judge() -> str:
    """The Python API's ``model=None``: the judge the settings name (``ctxprec_ops.config``; read
    when a metric is made, so the configuration is loaded only by those who use it)."""
    from .config import default_judge_name

    return default_judge_name()


# the package is the Python API's face: it gives the judge layer the configured default judge
# (``judge.defaults.configured_judge``), which the layers below never read themselves
_judge_defaults.configured_judge = _configured_judge
