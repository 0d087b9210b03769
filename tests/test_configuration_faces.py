"""Every setting through every face resolves to the same run configuration.

For each setting of ``ctxprec_ops.config.Settings`` that configures a run (a ``PipelineConfig``
field) or the alert rules, a value is given through each face — the environment, the CLI flag
(where the command has one), an Airflow operator argument (or its ``settings`` mapping), a Dagster
resource field, and the ``ContextualPrecisionComponent``'s YAML attributes — and the resolved
``PipelineConfig`` (or the alert rules) must hold it. Real objects throughout: the CLI's parser and
``config_from_args``, the real operators' ``pipeline_config``, ``resources_for`` and the asset's
``build_pipeline_config``, a Component built from its attributes. Also: the faces' fields are the
declaration's (names, types, defaults), and a bad value is refused by every face with one rule.
"""

from __future__ import annotations

import json
import sqlite3
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctxprec_ops.cli import build_parser
from ctxprec_ops.cli._flags import FLAGS
from ctxprec_ops.config import Settings
from ctxprec_ops.pipeline import PipelineConfig

DAY = "2026-11-28"
SPANS = {"CTXPREC_SOURCE_FORMAT": "openinference"}


@dataclass(frozen=True)
class Case:
    setting: str
    value: Any
    #: what the resolved configuration holds for it (default: ``getattr(config, <its run field>)``)
    seen: Callable[[Any], Any] | None = None
    expected: Any = None
    metric: str = "contextual_precision"
    #: other settings the case needs (given as variables)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def rule(self) -> bool:
        return "rule" in Settings.extra(self.setting)

    def observed(self, resolved: Any) -> Any:
        if self.rule:
            return resolved[self.setting]
        if self.seen is not None:
            return self.seen(resolved)
        return getattr(resolved, Settings.extra(self.setting)["run"])

    @property
    def want(self) -> Any:
        return self.value if self.expected is None else self.expected

    def text(self) -> str:
        """The value as a variable (or a rendered template) holds it."""
        v = self.value
        if isinstance(v, bool):
            return "yes" if v else "off"
        if isinstance(v, (dict, list)):
            return json.dumps(v)
        return str(v)


CASES = [
    # the value is the test's warehouse file (the Airflow operator resolves its connection to an engine)
    Case("warehouse_url", None, lambda c: str(getattr(c.warehouse, "url", c.warehouse))),
    Case("source_table", "my_logs", lambda c: c.source_table),
    Case("conversation_table", "my_chats", lambda c: c.source_table, metric="turn_contextual_precision"),
    Case("source_columns", {"input": "question"}, lambda c: c.source_columns.input, "question"),
    Case(
        "conversation_columns",
        {"turns": "dialogue"},
        lambda c: c.source_columns.turns,
        "dialogue",
        metric="turn_contextual_precision",
    ),
    Case("segments", ["tenant"], lambda c: list(c.segments)),
    Case("claim_lease_seconds", 30.0),
    Case("source_format", "openinference"),
    Case("stage", "rerank", env=SPANS),
    Case("span_table", "my_spans", lambda c: c.source_table, env=SPANS),
    Case(
        "span_columns",
        {"attributes": "SpanAttributes"},
        lambda c: c.source_columns.attributes,
        "SpanAttributes",
        env=SPANS,
    ),  # fmt: skip
    Case("expected_attribute", "eval.reference", env=SPANS),
    Case("gold_table", "gold_answers", env=SPANS),
    Case("documents_table", "documents", env=SPANS),
    Case("judge", "gpt-4o", lambda c: c.judge),
    Case("judge_timeout", 5.0),
    Case("judge_max_retries", 2),
    Case("concurrency", 3),
    Case("chunk_size", 7),
    Case("max_nodes_per_call", 5),
    Case("judge_samples", 3),
    Case("judge_multimodal", True),
    Case("prices", {"my-model": [1.0, 2.0]}, expected={"my-model": (1.0, 2.0)}),
    Case("openai_base_url", "http://127.0.0.1:9/v1", lambda c: c.judge_base_url),
    Case("max_rpm", 120.0),
    Case("max_tpm", 5000.0),
    Case("sample_rate", 0.5),
    Case("max_rows", 9),
    Case("max_cost", 2.5),
    Case("retry_initial_wait", 0.1),
    Case("retry_max_wait", 2.0),
    Case("outage_tolerance", 7.0),
    Case("judge_mode", "batch"),
    Case("batch_poll_seconds", 5.0),
    Case("batch_retry", "sync"),
    Case("threshold", 0.7),
    Case("min_mean", 0.6),
    Case("min_pass_rate", 0.65),
    Case("min_drop", 0.1),
    Case("alpha", 0.05),
    Case("baseline_partitions", 3),
    Case("volume_ratio", 0.3),
    Case("max_failure_rate", 0.4),
    Case("phoenix_url", "http://127.0.0.1:6006"),
    Case("phoenix_project", "rag-app", env={"CTXPREC_PHOENIX_URL": "http://127.0.0.1:6006"}),
    Case("phoenix_api_key", "phx-test-key"),
    Case("phoenix_document_annotation", "relevance", env={"CTXPREC_PHOENIX_URL": "http://127.0.0.1:6006"}),
    Case("phoenix_span_annotation", "cp", env={"CTXPREC_PHOENIX_URL": "http://127.0.0.1:6006"}),
    Case("write_back", "phoenix", env={"CTXPREC_PHOENIX_URL": "http://127.0.0.1:6006"}),
    Case("escalate_to", "gpt-4o", env={"CTXPREC_ESCALATE_BELOW": "0.8"}),
    Case("escalate_below", 0.8, env={"CTXPREC_ESCALATE_TO": "gpt-4o"}),
    Case("target_agreement", 0.95, env={"CTXPREC_ESCALATE_TO": "gpt-4o"}),
    Case("calibration_nodes", 120),
    Case("recalibrate", True),
    Case("use_corrected", True),
    Case("label_set", "support-team"),
]
BY_SETTING = {c.setting: c for c in CASES}
#: the settings that shape a run or its alerts: every one must have a case
RUN_AND_RULE_SETTINGS = {
    name for name in Settings.model_fields if {"run", "rule"} & set(Settings.extra(name))
} | {"judge", "openai_base_url", "source_table", "conversation_table", "source_columns", "conversation_columns",
     "span_table", "span_columns"}  # fmt: skip


def test_every_setting_of_a_run_or_its_alerts_has_a_case():
    assert set(BY_SETTING) == RUN_AND_RULE_SETTINGS


@pytest.fixture
def warehouse(tmp_path) -> str:
    path = tmp_path / "w.db"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}"


def _value(case: Case, warehouse: str) -> Case:
    if case.setting == "warehouse_url":
        return Case("warehouse_url", warehouse, case.seen)
    return case


# -- the faces ----------------------------------------------------------------------------------


def through_env(case: Case, warehouse: str, monkeypatch) -> Any:
    monkeypatch.setenv(Settings.variable(case.setting), case.text())
    if case.setting != "warehouse_url":
        monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", warehouse)
    s = Settings.from_env()
    if case.rule:
        return {case.setting: getattr(s, case.setting)}
    return s.pipeline_config(metric=case.metric)


def _cli_flag(case: Case, command: str) -> str | None:
    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    given = set(sub._option_string_actions)
    return next((f for f, spec in FLAGS.items() if spec.setting == case.setting and f in given), None)


def through_cli(case: Case, warehouse: str, monkeypatch) -> Any:
    command = "check" if case.rule else "score"
    flag = _cli_flag(case, command)
    table_flag = case.setting in ("source_table", "conversation_table", "span_table")
    if flag is None and not table_flag:
        pytest.skip(f"ctxprec {command} has no flag for {case.setting}")
    from ctxprec_ops.cli._args import config_from_args
    from ctxprec_ops.cli.monitor import _settings

    if table_flag:
        flags = ["--source-table", case.value]
    elif isinstance(case.value, list):  # a repeatable flag: one value each time
        flags = [part for item in case.value for part in (flag, item)]
    else:
        flags = [flag, case.text()]
    if case.setting != "warehouse_url":
        flags += ["--warehouse", warehouse]
    argv = [command, *flags, "--partition", DAY, "--metric", case.metric]
    args = build_parser(argv).parse_args(argv)
    if case.rule:
        _url, rules = _settings(args)
        return {case.setting: getattr(rules, case.setting)}
    return config_from_args(args)


#: settings an operator takes through an argument of its own (besides ``setting_arguments``)
AIRFLOW_ARGUMENTS = {
    "warehouse_url": "warehouse_url",
    "judge": "judge",
    "openai_base_url": "judge_base_url",
    "segments": "segments",
    "source_table": "source_table",
    "conversation_table": "source_table",
    "span_table": "source_table",
    "source_columns": "columns",
    "conversation_columns": "columns",
    "span_columns": "columns",
}


def through_airflow(case: Case, warehouse: str, monkeypatch) -> Any:
    pytest.importorskip("airflow")
    from ctxprec_ops.airflow.operators import ContextualPrecisionAlertOperator, ContextualPrecisionOperator

    op_cls = ContextualPrecisionAlertOperator if case.rule else ContextualPrecisionOperator
    by_setting = {setting: arg for arg, setting in op_cls.setting_arguments.items()}
    arg = by_setting.get(case.setting) or AIRFLOW_ARGUMENTS.get(case.setting)
    # as a template renders it (numbers and mappings become text), or in ``settings`` by name
    given = {arg: case.text()} if arg else {"settings": json.dumps({case.setting: case.value})}
    if case.setting != "warehouse_url":
        given.setdefault("warehouse_url", warehouse)
    op = op_cls(task_id="t", warehouse_conn_id=None, judge_conn_id=None, metric=case.metric, **given)
    if case.rule:
        return {case.setting: getattr(op.resolved_settings(), case.setting)}
    return op.pipeline_config()


def _field_of(case: Case, classes: dict[str, type]) -> tuple[str, str]:
    from ctxprec_ops.config.fields import setting_names

    for role, cls in classes.items():
        for name, setting in setting_names(cls).items():
            if setting == case.setting:
                return role, name
    raise AssertionError(f"no field of {list(classes)} sets {case.setting}")


def through_dagster(case: Case, warehouse: str, monkeypatch) -> Any:
    pytest.importorskip("dagster")
    from ctxprec_ops.dagster.assets import build_pipeline_config
    from ctxprec_ops.dagster.resources import (
        AlertThresholdsResource,
        JudgeResource,
        WarehouseResource,
        resources_for,
    )

    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", warehouse)
    res = resources_for("local")
    classes = {"warehouse": WarehouseResource, "judge": JudgeResource, "thresholds": AlertThresholdsResource}
    role, name = _field_of(case, classes)
    res[role] = type(res[role])(**{**res[role]._get_non_default_public_field_values(), name: case.value})
    if case.rule:
        return res["thresholds"].rule_kwargs()
    return build_pipeline_config(case.metric, res["warehouse"], res["judge"], res["thresholds"])


def through_component(case: Case, warehouse: str, monkeypatch) -> Any:
    pytest.importorskip("dagster")
    from ctxprec_ops.dagster.assets import build_pipeline_config
    from ctxprec_ops.dagster.component import ContextualPrecisionComponent, JudgeModel, ThresholdsModel, WarehouseModel
    from ctxprec_ops.pipeline.kinds import metric_kind

    kind = metric_kind(case.metric)
    attributes: dict[str, Any] = {"metric": case.metric, "warehouse": {"url": warehouse}}
    if case.setting == kind.table_setting:
        attributes["source_table"] = case.value  # the metric's own table: a top-level attribute
    elif case.setting == kind.columns_setting:
        attributes["columns"] = case.value
    elif case.setting == "segments":
        attributes["segments"] = case.value
    elif case.setting == "warehouse_url":
        attributes["warehouse"] = {"url": case.value}
    else:
        blocks = {"warehouse": WarehouseModel, "judge": JudgeModel, "thresholds": ThresholdsModel}
        block, name = _field_of(case, blocks)
        attributes.setdefault(block, {})[name] = case.value
    component = ContextualPrecisionComponent(**attributes)
    settings = component.settings(kind)
    res = component._resources(kind, settings)
    if case.rule:
        return res["thresholds"].rule_kwargs()
    segments = component.segments or None
    return build_pipeline_config(kind.name, res["warehouse"], res["judge"], res["thresholds"], segments)


FACES = {
    "env": through_env,
    "cli": through_cli,
    "airflow": through_airflow,
    "dagster": through_dagster,
    "component": through_component,
}


@pytest.mark.parametrize("face", list(FACES))
@pytest.mark.parametrize("case", CASES, ids=[c.setting for c in CASES])
def test_a_setting_given_through_a_face_is_in_the_resolved_configuration(case, face, warehouse, monkeypatch):
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    case = _value(case, warehouse)
    resolved = FACES[face](case, warehouse, monkeypatch)
    assert case.observed(resolved) == case.want


def test_the_cli_has_a_flag_for_most_run_settings():
    """The run settings without a ``score`` flag are the ones an environment sets for a deployment."""
    without = sorted(c.setting for c in CASES if not c.rule and _cli_flag(c, "score") is None)
    assert without == [
        "batch_poll_seconds",
        "claim_lease_seconds",
        "conversation_columns",
        "conversation_table",
        "judge_max_retries",
        "judge_mode",  # --batch
        "judge_multimodal",
        "judge_timeout",
        "phoenix_api_key",  # a secret: set by the environment, never on a command line
        "phoenix_document_annotation",
        "phoenix_span_annotation",
        "prices",
        "retry_initial_wait",
        "retry_max_wait",
        "source_columns",  # --column NAME=COLUMN, merged on top
        "source_table",  # --source-table: the metric's own table
        "span_columns",
        "span_table",
    ]


# -- the faces' fields are the declaration's ------------------------------------------------------


def _plain(annotation: Any) -> Any:
    """``T | None`` -> ``(T, optional)`` with tuples of floats read as lists (Dagster config)."""
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = len(args) < len(typing.get_args(annotation)), args[0]
    if typing.get_origin(annotation) is dict and typing.get_args(annotation)[1] == tuple[float, float]:
        annotation = dict[str, list[float]]
    return annotation, optional


@pytest.mark.parametrize("resource", ["WarehouseResource", "JudgeResource", "AlertThresholdsResource"])
def test_dagster_resource_fields_are_the_settings(resource):
    pytest.importorskip("dagster")
    from ctxprec_ops.config.fields import setting_names
    from ctxprec_ops.dagster import resources

    cls = getattr(resources, resource)
    names = setting_names(cls)
    assert names, resource
    for field_name, setting in names.items():
        info, declared = cls.model_fields[field_name], Settings.model_fields[setting]
        mine, optional = _plain(info.annotation)
        theirs, may_be_unset = _plain(declared.annotation)
        assert mine == theirs, (resource, field_name)
        assert optional or not may_be_unset, (resource, field_name)  # an unset setting fits the field
        if not info.is_required() and info.default is not None:
            assert info.get_default(call_default_factory=True) == Settings.default(setting), (resource, field_name)
        assert Settings.variable(setting) in (info.description or ""), (resource, field_name)
    unnamed = set(cls.model_fields) - set(names) - {"api_key", "samples"}
    assert not unnamed, f"{resource} fields that are no setting: {unnamed}"


def test_dagster_resources_cover_every_run_and_rule_setting():
    pytest.importorskip("dagster")
    from ctxprec_ops.config.fields import setting_names
    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource

    covered = {
        s for cls in (WarehouseResource, JudgeResource, AlertThresholdsResource) for s in setting_names(cls).values()
    }
    assert RUN_AND_RULE_SETTINGS | {"warehouse_url"} <= covered


def test_the_component_schema_is_the_resources():
    pytest.importorskip("dagster")
    from ctxprec_ops.dagster.component import JudgeModel, ThresholdsModel, WarehouseModel
    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource

    assert set(JudgeModel.model_fields) == set(JudgeResource.model_fields) - {"api_key"} | {"api_key_env"}
    assert set(ThresholdsModel.model_fields) == set(AlertThresholdsResource.model_fields) | {"blocking"}
    assert set(WarehouseModel.model_fields) == set(WarehouseResource.model_fields) | {"url_env"}
    assert JudgeModel.model_fields["concurrency"].default == Settings.default("concurrency")


def test_cli_flags_are_the_settings():
    """Each setting flag names a real setting; its variable, type, choices and default (in --help)
    are the declaration's."""
    for flag, spec in FLAGS.items():
        assert spec.setting in Settings.model_fields, flag
        assert spec.env == Settings.variable(spec.setting), flag
        if spec.declared is not None:
            default = spec.default
            assert (list(default) if isinstance(default, tuple) else default) == Settings.default(spec.setting), flag
            assert spec.bounds == Settings.bounds(spec.setting) or (
                Settings.bounds(spec.setting) is None and spec.bounds.describe() == ""
            ), flag
        assert spec.env in spec.full_help() or spec.default_text, flag


def test_airflow_arguments_and_params_are_the_settings():
    pytest.importorskip("airflow")
    from ctxprec_ops.airflow.dag_params import ALERT_PARAMS, SETTING_PARAMS, dag_params, templated_arguments
    from ctxprec_ops.airflow.operators import ContextualPrecisionAlertOperator, ContextualPrecisionOperator

    for cls in (ContextualPrecisionOperator, ContextualPrecisionAlertOperator):
        for arg, setting in cls.setting_arguments.items():
            assert setting in Settings.model_fields and arg in cls.template_fields, (cls.__name__, arg)
    settings = Settings.from_env({"CTXPREC_CONCURRENCY": "5"})
    params = dag_params(settings, None)
    for name in (*SETTING_PARAMS, *ALERT_PARAMS):
        schema = params[name].schema
        assert params[name].value == getattr(settings, name)
        assert Settings.variable(name) in params[name].description
        bounds = Settings.bounds(name)
        for key, value in (bounds.json_schema() if bounds else {}).items():
            assert schema[key] == value, (name, key)
    assert params["concurrency"].value == 5 and params["concurrency"].schema["minimum"] == 1
    assert set(templated_arguments("{{ ds }}")) == {"partition_key", *SETTING_PARAMS}


# -- one rule, on every face -------------------------------------------------------------------


def test_max_rpm_0_is_refused_by_every_face_with_the_same_rule(warehouse, monkeypatch, capsys):
    """``max_rpm`` must be > 0: the variable, the flag, the operator argument, the resource field and
    ``PipelineConfig`` itself all refuse 0 (each naming where it came from)."""
    from ctxprec_ops.cli import main
    from ctxprec_ops.config import SettingsError

    with pytest.raises(SettingsError, match="CTXPREC_MAX_RPM must be > 0, got '0'"):
        Settings.from_env({"CTXPREC_MAX_RPM": "0"})
    with pytest.raises(ValueError, match="max_rpm must be > 0"):
        PipelineConfig(max_rpm=0)
    assert main(["score", "--warehouse", warehouse, "--partition", DAY, "--max-rpm", "0"]) == 2
    assert "--max-rpm must be > 0, got 0.0" in capsys.readouterr().err
    pytest.importorskip("airflow")
    from airflow.sdk.exceptions import AirflowFailException

    from ctxprec_ops.airflow.operators import ContextualPrecisionOperator

    op = ContextualPrecisionOperator(task_id="t", warehouse_conn_id=None, warehouse_url=warehouse, max_rpm="0")
    with pytest.raises(AirflowFailException, match="max_rpm must be > 0"):
        op.pipeline_config()
    pytest.importorskip("dagster")
    from ctxprec_ops.dagster.assets import build_pipeline_config
    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource

    with pytest.raises(SettingsError, match="max_rpm must be > 0"):
        build_pipeline_config(
            "contextual_precision",
            WarehouseResource(url=warehouse),
            JudgeResource(max_rpm=0),
            AlertThresholdsResource(),
        )
