"""Traces as a source: OpenInference and OTel GenAI spans -> the cases the pipeline scores.

- ``attributes``: a span's attributes (flat keys, nested objects, OTLP ``KeyValue`` lists) as one
  flat mapping;
- ``conventions``: where each convention keeps the query, the documents and the answer;
- ``assemble``: spans -> logical rows (pure);
- ``reader``: ``SpanReader``, the run path's reader of a spans table (``pipeline/formats.py``);
- ``otlp``: an OTLP/JSON export file loaded into a spans table.

See docs/traces.md.
"""
