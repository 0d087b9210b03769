#!/usr/bin/env bash
# Airflow quick-start from nothing: a fresh AIRFLOW_HOME, the DAGs, a migrated metadata DB, the
# warehouse connection, the DAG registered and unpaused, then one nightly run scored now.
#
#   scripts/airflow_quickstart.sh [WAREHOUSE.db] [PARTITION]
#
# WAREHOUSE.db: a SQLite warehouse (default ctxprec_demo.db; created with `ctxprec demo` when it
# does not exist). PARTITION: the day to score (default: the latest day of retrieval_logs).
# AIRFLOW_HOME: kept when set, else ./.airflow. The judge is the offline lexical one unless
# CTXPREC_JUDGE names another. Needs `airflow` and `ctxprec` on PATH (pip install -e ".[airflow]",
# or `make venv` and `. .venv/bin/activate`). Safe to run again: every step is idempotent.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AIRFLOW="${AIRFLOW:-airflow}"
CTXPREC="${CTXPREC:-ctxprec}"
DAG_ID="contextual_precision_nightly"
for tool in "$AIRFLOW" "$CTXPREC"; do
    command -v "$tool" >/dev/null || {
        echo "quickstart: '$tool' not found: pip install -e \".[airflow]\" (or make venv; . .venv/bin/activate)" >&2
        exit 1
    }
done
PYTHON="${PYTHON:-$(dirname "$(command -v "$AIRFLOW")")/python}"

export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/.airflow}"
export AIRFLOW__CORE__LOAD_EXAMPLES="${AIRFLOW__CORE__LOAD_EXAMPLES:-False}"
export CTXPREC_JUDGE="${CTXPREC_JUDGE:-lexical}"
warehouse="$(realpath -m "${1:-ctxprec_demo.db}")"

step() { printf '\n== %s\n' "$*"; }

if [ ! -f "$warehouse" ]; then
    step "no warehouse at $warehouse: creating the demo's (ctxprec demo, offline)"
    "$CTXPREC" demo --warehouse "sqlite:///$warehouse" --days 8 --quiet --out "$(dirname "$warehouse")/ctxprec_report.html"
fi
partition="${2:-$("$PYTHON" - "$warehouse" <<'PY'
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute("SELECT substr(MAX(event_time), 1, 10) FROM retrieval_logs").fetchone()
print(row[0] or "")
PY
)}"
[ -n "$partition" ] || { echo "quickstart: retrieval_logs in $warehouse is empty: give a PARTITION" >&2; exit 1; }

step "1. the DAG files into $AIRFLOW_HOME/dags"
mkdir -p "$AIRFLOW_HOME/dags"
cp "$repo"/dags/*.py "$AIRFLOW_HOME/dags/"

step "2. the metadata database (airflow db migrate)"
"$AIRFLOW" db migrate

step "3. the warehouse connection ctxprec_warehouse (sqlite, file in host)"
"$AIRFLOW" connections delete ctxprec_warehouse >/dev/null 2>&1 || true
"$AIRFLOW" connections add ctxprec_warehouse --conn-type sqlite --conn-host "$warehouse"

step "4. register the DAGs (airflow dags reserialize) and unpause $DAG_ID"
"$AIRFLOW" dags reserialize
"$AIRFLOW" dags unpause "$DAG_ID"

step "5. one nightly run now, in this process (airflow dags test $DAG_ID $partition)"
"$AIRFLOW" dags test "$DAG_ID" "$partition"

step "done"
cat <<EOF
The run for $partition is in $AIRFLOW_HOME (scores in $warehouse: ctxprec trend --warehouse sqlite:///$warehouse).
With a scheduler running (AIRFLOW_HOME=$AIRFLOW_HOME airflow standalone), trigger runs as usual:
  AIRFLOW_HOME=$AIRFLOW_HOME airflow dags trigger $DAG_ID --conf '{"partition_key": "$partition", "min_mean": 0.6}'
EOF
