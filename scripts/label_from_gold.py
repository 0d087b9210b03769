"""Fill a labelling sheet's ``relevant`` column from gold chunk ids: the demo's stand-in for a
person labelling (``ctxprec demo`` writes ``retrieved_ids`` and ``relevant_ids`` next to each
retrieval; node k is relevant when its id is among the relevant ones).

    python scripts/label_from_gold.py --warehouse sqlite:///ctxprec_demo.db labels.csv labelled.csv

Only the demo's sample warehouse has these columns; with your own data, a person fills the sheet.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys

import sqlalchemy as sa


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warehouse", default="sqlite:///ctxprec_demo.db")
    ap.add_argument("--table", default="retrieval_logs")
    ap.add_argument("sheet", help="the CSV written by ctxprec labels sample")
    ap.add_argument("out", help="where to write the labelled CSV")
    args = ap.parse_args(argv)
    with open(args.sheet, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields, lines = list(reader.fieldnames or []), list(reader)
    engine = sa.create_engine(args.warehouse)
    t = sa.Table(args.table, sa.MetaData(), autoload_with=engine)
    ids = sorted({line["log_id"] for line in lines})
    gold: dict[str, tuple[list, set]] = {}
    with engine.connect() as conn:
        for log_id, retrieved, relevant in conn.execute(
            sa.select(t.c.id, t.c.retrieved_ids, t.c.relevant_ids).where(sa.cast(t.c.id, sa.Text).in_(ids))
        ):
            gold[str(log_id)] = (json.loads(retrieved), set(json.loads(relevant)))
    engine.dispose()
    with open(args.out, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fields, lineterminator="\n")
        w.writeheader()
        for line in lines:
            retrieved, relevant = gold[line["log_id"]]
            line["relevant"] = "1" if retrieved[int(line["node"]) - 1] in relevant else "0"
            line["labeller"] = "gold ids"
            w.writerow(line)
    print(f"labelled {len(lines)} nodes of {len(ids)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
