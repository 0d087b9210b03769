"""The sub-commands: which module registers each, and its one-line help (``ctxprec --help``
lists them from here, without importing any command module)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["COMMANDS", "Command"]


class Command(NamedTuple):
    module: str
    help: str


#: name -> (module of ``ctxprec_ops.cli`` whose ``register`` adds it, one-line help), in display order
COMMANDS: dict[str, Command] = {
    "score": Command("score", "score one partition (UTC day) and write scores back"),
    "estimate": Command("estimate", "tokens and cost a score run would spend, without calling the judge"),
    "demo": Command("demo", "generate a sample warehouse, score every day, print the trend and alerts, write a report"),
    "trend": Command("monitor", "recent partitions with their figures, alerts and a compact trend"),
    "check": Command("monitor", "check one partition; exit 3 when an alert fires"),
    "report": Command("monitor", "write a self-contained HTML report"),
    "compare": Command("compare", "compare two values of a segment column (e.g. retriever v1 vs v2), paired or not"),
    "calibrate": Command("calibrate", "measure judge(s) against labelled node judgments"),
    "labels": Command("labels", "draw rows to label (sample) and store the labels (import) that correct the figures"),
    "audit": Command("audit", "audit the judge: does a verdict change with where the node is shown? (position)"),
    "batches": Command("batches", "list, collect or cancel Batch API batches"),
}
