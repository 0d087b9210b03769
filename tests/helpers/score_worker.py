"""A scoring worker run in a subprocess by the reliability tests (concurrency, crashes).

    python score_worker.py MODE URL PARTITION RUN_ID GO_FILE [chunk_size]

MODE ``partition`` calls ``score_partition`` (as the Dagster asset does); MODE ``chunks`` plans,
scores every chunk with ``score_chunk`` and then ``finalize_run`` (as the Airflow DAG's mapped
tasks do). The judge is the OpenAI judge at ``OPENAI_BASE_URL``. The worker waits until
``GO_FILE`` exists (after creating ``GO_FILE.<pid>.ready``), so several workers start at the
same instant. It prints one JSON line: the
run summary, or the error.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    mode, url, partition, run_id, go_file = sys.argv[1:6]
    chunk_size = int(sys.argv[6]) if len(sys.argv) > 6 else 25
    from ctxprec_ops.pipeline import PipelineConfig, finalize_run, plan_chunks, prepare, score_chunk, score_partition

    config = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=os.environ["OPENAI_BASE_URL"],
        judge_api_key=os.environ["OPENAI_API_KEY"],
        chunk_size=chunk_size,
        concurrency=8,
    )
    from ctxprec_ops.judge.models.openai_judge import OpenAIJudge  # noqa: F401  (imported before the start)

    open(f"{go_file}.{os.getpid()}.ready", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit("never told to start")
        time.sleep(0.002)
    try:
        if mode == "partition":
            summary = score_partition(config, partition, run_id=run_id)
        else:
            ctx = prepare(config)
            results = [
                score_chunk(config, c, run_id=run_id, context=ctx) for c in plan_chunks(config, partition, context=ctx)
            ]
            summary = finalize_run(config, partition, run_id=run_id, chunk_results=results, context=ctx)
    except Exception as exc:  # reported to the test, which fails on it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(summary.to_dict(), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
