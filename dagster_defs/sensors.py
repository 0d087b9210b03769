"""The sensors: the automation sensor of the scores assets (stopped unless
``CTXPREC_AUTOMATION_RUNNING=1``) and the run-failure / check-failure alert sensors (running when
``CTXPREC_ALERT_WEBHOOK`` is set)."""

from ctxprec_ops.dagster import build_alert_sensors, build_automation_sensor

from .assets import scores_assets

automation_sensor = build_automation_sensor(list(scores_assets.values()))
alert_sensors = build_alert_sensors([a.key for a in scores_assets.values()])
