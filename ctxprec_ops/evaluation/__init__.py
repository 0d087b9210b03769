"""The deepeval-compatible bulk API: ``evaluate``/``a_evaluate``/``assert_test`` with bounded
concurrency, deepeval's config objects, and ``score_dataframe``."""
