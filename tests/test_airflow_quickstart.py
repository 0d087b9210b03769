"""The Airflow quick-start as a user runs it: ``scripts/airflow_quickstart.sh`` with the real
``airflow`` CLI, from nothing (a fresh AIRFLOW_HOME in an empty directory, no warehouse yet),
then a manual trigger of the registered DAG; and the same steps by hand as docs/airflow.md shows
them, run as written, twice, after the demo.

The script makes the DAGs folder, migrates the metadata DB, adds the ``ctxprec_warehouse``
connection, reserializes and unpauses the DAG and runs one nightly run with ``airflow dags test``
(the steps whose absence made the old README sequence fail). Under ``CTXPREC_SLOW_TESTS=1`` (CI)
it is run a second time in the same AIRFLOW_HOME: every step is idempotent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.fixtures.isolation import run_isolated

pytest.importorskip("airflow", reason="the airflow extra is not installed")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "airflow_quickstart.sh"
DOC = ROOT / "docs" / "airflow.md"
BIN = Path(sys.executable).parent
DAG_ID = "contextual_precision_nightly"


def _env(home: Path) -> dict[str, str]:
    return {
        "AIRFLOW_HOME": str(home),
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),  # as after `. .venv/bin/activate`
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _check(proc, what: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{out[-4000:]}"
    return out


@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_airflow_quickstart_works_from_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "airflow_home"  # does not exist yet: the script creates what it needs
    env = _env(home)

    out = _check(run_isolated(["bash", str(SCRIPT)], env, cwd=work, timeout=840), "the quick-start")
    assert (home / "dags" / "ctxprec_nightly.py").exists()
    warehouse = work / "ctxprec_demo.db"
    assert warehouse.exists()  # created by the demo, offline
    with sqlite3.connect(warehouse) as db:
        (latest,) = db.execute("SELECT substr(MAX(event_time), 1, 10) FROM retrieval_logs").fetchone()
        runs = db.execute(
            "SELECT status, rows_total, rows_scored, judge_model FROM ctxprec_runs "
            "WHERE partition_key = ? AND metric = 'contextual_precision' AND run_id LIKE 'airflow:%'",
            (latest,),
        ).fetchall()
    assert len(runs) == 1, (runs, out[-3000:])
    status, total, scored, judge = runs[0]
    assert status in ("succeeded", "partial") and total > 0 and scored > 0 and judge == "lexical"
    assert f"{DAG_ID} {latest}" in out

    # the DAG is registered and unpaused: a manual trigger is accepted and queued (no DagNotFound)
    airflow = str(BIN / "airflow")
    conf = json.dumps({"partition_key": latest})
    trigger = run_isolated([airflow, "dags", "trigger", DAG_ID, "--conf", conf, "-o", "json"], env, cwd=work)
    [run] = _json(_check(trigger, "airflow dags trigger") and trigger.stdout)
    assert run["dag_id"] == DAG_ID and run["state"] == "queued", run
    details = run_isolated([airflow, "dags", "details", DAG_ID, "-o", "json"], env, cwd=work)
    [dag] = _json(_check(details, "airflow dags details") and details.stdout)
    assert str(dag["is_paused"]) == "False"  # (the CLI prints it as text)

    if os.environ.get("CTXPREC_SLOW_TESTS") == "1":  # again, in the same AIRFLOW_HOME: idempotent
        _check(run_isolated(["bash", str(SCRIPT)], env, cwd=work, timeout=840), "the quick-start, again")


def _json(stdout: str) -> list[dict]:
    """The JSON list an ``airflow ... -o json`` command prints (among any log lines)."""
    decoder = json.JSONDecoder()
    for at in (i for i, ch in enumerate(stdout) if ch == "["):
        try:
            data, _end = decoder.raw_decode(stdout, at)
        except ValueError:
            continue
        if isinstance(data, list) and all(isinstance(x, dict) for x in data) and data:
            return data
    raise AssertionError(f"no JSON list of objects in:\n{stdout[-3000:]}")


def _documented_steps() -> str:
    """The shell block of docs/airflow.md's "The same steps by hand", exactly as the page shows it."""
    found = re.search(r"<!-- example: airflow-steps -->\n```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert found, "docs/airflow.md shows the manual steps in a block marked <!-- example: airflow-steps -->"
    return found.group(1)


@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_documented_manual_steps_succeed_as_written_twice(tmp_path: Path) -> None:
    """After the demo (what `make demo` runs, with its defaults: 14 days ending yesterday, three of
    them deliberate dips that fire the regression alert), the page's block runs in a clone's
    directory with a fresh AIRFLOW_HOME, then again in the same one: both passes succeed, whatever
    today's date, and each records an Airflow run of a day that is not a dip."""
    work = tmp_path / "clone"
    work.mkdir()
    (work / "dags").symlink_to(ROOT / "dags")  # the steps copy the clone's dags/*.py
    env = _env(tmp_path / "airflow_home")
    ctxprec = str(BIN / "ctxprec")
    _check(run_isolated([ctxprec, "demo", "--quiet"], env, cwd=work, timeout=300), "the demo (make demo)")
    with sqlite3.connect(work / "ctxprec_demo.db") as db:
        dips = {
            r[0]
            for r in db.execute(
                "SELECT partition_key FROM ctxprec_runs WHERE metric = 'contextual_precision' AND mean_score < 0.6"
            )
        }
    steps = _documented_steps()
    for attempt in (1, 2):
        out = _check(
            run_isolated(["bash", "-euo", "pipefail", "-c", steps], env, cwd=work, timeout=420), f"pass {attempt}"
        )
        with sqlite3.connect(work / "ctxprec_demo.db") as db:
            days = db.execute(
                "SELECT partition_key FROM ctxprec_runs WHERE run_id LIKE 'airflow:%' AND metric = 'contextual_precision'"
            ).fetchall()
        assert len(days) == attempt, (days, out[-3000:])
        assert {d for (d,) in days}.isdisjoint(dips), (days, dips)
    assert (tmp_path / "airflow_home" / "dags" / "ctxprec_nightly.py").exists()
