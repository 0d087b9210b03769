"""What is scored and what scoring returns: the test cases (deepeval's fields, images, retrieved
context grouped by source) and the result records (``MetricResult``, ``EvaluationResult`` and
deepeval's ``TestResult``/``MetricData`` views)."""
