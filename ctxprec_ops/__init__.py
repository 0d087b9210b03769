"""ctxprec-ops: contextual precision for RAG retrievers, as a production pipeline.

>>> from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase
>>> metric = ContextualPrecisionMetric(model="lexical")
"""

from .cases.results import EvaluationResult, MetricData, MetricResult, TestResult, WindowResult
from .cases.test_case import (
    ConversationalTestCase,
    LLMTestCase,
    MLLMImage,
    ModelTestCase,
    MultiTurnParams,
    RetrievedContextData,
    SingleTurnParams,
    TestCaseTypeError,
    TestCaseValidationError,
    ToolCall,
    ToolCallParams,
    ToolCallType,
    Turn,
)
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
