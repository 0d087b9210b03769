"""What is scored and what scoring returns: the test cases (deepeval's fields, images, retrieved
context grouped by source) and the result records (``MetricResult``, ``EvaluationResult`` and
deepeval's ``TestResult``/``MetricData`` views).

The test cases accept every field deepeval's classes accept (snake_case or camelCase), keep the
ones contextual precision does not use so they round-trip through ``model_dump()``, and validate
when built, with deepeval's error types and messages. The parts, by what they do: ``single_turn``
(``LLMTestCase``), ``conversational`` (``Turn``, ``ConversationalTestCase``), ``tool_call``
(``ToolCall``), ``images`` (``MLLMImage``), ``contexts`` (``RetrievedContextData`` and the nodes
grouped by source), ``params``, ``validation`` (the shared checks and error types), ``foreign``
(deepeval's own objects read by attribute), ``results``. The public names are imported from
``ctxprec_ops``."""
