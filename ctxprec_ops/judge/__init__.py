"""Talking to the judge: the judge models (``models``: OpenAI-compatible, lexical, custom), sending
a node list with retries, repair and sampling (``calls``, ``nodes``), and what guards the calls —
the adaptive limiter and request quota, the circuit breaker, retry rules, the budget, the
judgment cache keys, prices and token counts."""
