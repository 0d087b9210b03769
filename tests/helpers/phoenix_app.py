"""A RAG app instrumented with OpenInference, sending its traces to a Phoenix server over OTLP.

Run by the tests with the Python of the Phoenix environment (``.venv-phoenix``: arize-phoenix-otel
and openinference-instrumentation), as a separate process, the way a traced application sends
spans::

    python phoenix_app.py ENDPOINT PROJECT DAY CASES_JSON

``CASES_JSON``: a JSON list of ``[query, [documents...], answer]``. Each case is one trace: a CHAIN
root, a RETRIEVER span with the documents and an LLM span with the answer, started on ``DAY`` at
noon UTC (one second apart). Prints the retriever spans' ids as a JSON list, in case order.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta


def main() -> int:
    endpoint, project, day, cases = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    from openinference.instrumentation import (
        OITracer,
        TraceConfig,
        get_input_attributes,
        get_llm_attributes,
        get_retriever_attributes,
        get_span_kind_attributes,
    )
    from phoenix.otel import register

    provider = register(endpoint=endpoint, project_name=project, batch=False, set_global_tracer_provider=False)
    tracer = OITracer(provider.get_tracer("rag-app"), config=TraceConfig())
    noon = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
    ids = []
    for n, (query, documents, answer) in enumerate(cases):
        at = int((noon + timedelta(seconds=n)).timestamp() * 1e9)
        ms = 1_000_000
        with tracer.start_as_current_span(
            "rag", start_time=at, attributes=get_span_kind_attributes("chain"), end_on_exit=False
        ) as root:
            with tracer.start_as_current_span("retrieve", start_time=at + ms, end_on_exit=False) as span:
                span.set_attributes(get_span_kind_attributes("retriever"))
                span.set_attributes(get_input_attributes(query))
                docs = [{"content": text, "id": f"doc-{n}-{i}"} for i, text in enumerate(documents)]
                span.set_attributes(get_retriever_attributes(documents=docs))
                ids.append(format(span.get_span_context().span_id, "016x"))
                span.end(end_time=at + 40 * ms)
            with tracer.start_as_current_span("llm", start_time=at + 41 * ms, end_on_exit=False) as span:
                span.set_attributes(get_span_kind_attributes("llm"))
                span.set_attributes(
                    get_llm_attributes(
                        model_name="rag-model",
                        input_messages=[{"role": "user", "content": query}],
                        output_messages=[{"role": "assistant", "content": answer}],
                    )
                )
                span.end(end_time=at + 900 * ms)
            root.end(end_time=at + 905 * ms)
    provider.force_flush()
    print(json.dumps(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
