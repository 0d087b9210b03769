"""A test-only upstream DAG: the production RAG system's log loader. It writes one day of
retrieval logs into the warehouse and reports that day as a partition of the logs table's Asset,
as a real loader DAG would (``outlets=[source_asset()]`` + ``add_partitions``)."""

from airflow.sdk import DAG, task

from ctxprec_ops.airflow import source_asset

LOGS = source_asset("contextual_precision")

with DAG(dag_id="upstream_retrieval_logs", schedule=None, catchup=False, tags=["test"]):

    @task(outlets=[LOGS])
    def load_logs(dag_run=None, outlet_events=None) -> int:
        from ctxprec_ops.airflow import CtxPrecWarehouseHook
        from tests.test_airflow_dags import GOOD, seed_day

        conf = dag_run.conf
        url = CtxPrecWarehouseHook().get_url().render_as_string(hide_password=False)
        seed_day(url, conf["day"], int(conf["rows"]), GOOD)
        # Airflow's partition key format (what CronPartitionTimetable emits): the day at 00:00
        outlet_events[LOGS].add_partitions(f"{conf['day']}T00:00:00")
        outlet_events[LOGS].extra = {"rows": int(conf["rows"])}
        return int(conf["rows"])

    load_logs()
