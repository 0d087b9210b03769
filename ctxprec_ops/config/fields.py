"""The faces' own pydantic models (the Dagster resources, the Component's YAML) declared from the
settings: ``setting_field(name)`` is a field with the setting's default and description (and its
variable), marked with the setting it sets; ``settings_of(model)`` reads the values back by setting
and ``values_for(cls, settings)`` fills such a model from ``Settings``. A face names the setting,
never its default or meaning: ``tests/test_configuration_faces.py`` checks each field's type too.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, Field

from .settings import Settings

__all__ = ["setting_field", "setting_names", "settings_of", "values_for"]

_MARK = "ctxprec_setting"
_SAME: Any = object()


def setting_field(name: str, *, default: Any = _SAME, description: str | None = None, required: bool = False) -> Any:
    """A field declared as the setting ``name`` (``default``: another default, e.g. None for "the
    configured one"; ``required``: no default)."""
    info = Settings.model_fields[name]
    text = description or f"{info.description} ({Settings.variable(name)})."
    extra: dict[str, Any] = {_MARK: name}
    if required:
        return Field(description=text, json_schema_extra=extra)
    value = Settings.default(name) if default is _SAME else default
    if isinstance(value, (dict, list)):
        return Field(default_factory=lambda: copy.deepcopy(value), description=text, json_schema_extra=extra)
    return Field(value, description=text, json_schema_extra=extra)


def setting_names(cls: type[BaseModel]) -> dict[str, str]:
    """``{field: setting}`` of the fields of ``cls`` declared with ``setting_field``."""
    out = {}
    for field, info in cls.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get(_MARK), str):
            out[field] = str(extra[_MARK])
    return out


def settings_of(model: BaseModel, *, given_only: bool = False) -> dict[str, Any]:
    """``{setting: value}`` of ``model``'s setting fields that hold a value (``given_only``: only
    those given explicitly, e.g. written in a YAML file)."""
    out = {}
    for field, setting in setting_names(type(model)).items():
        if given_only and field not in model.model_fields_set:
            continue
        value = getattr(model, field)
        if value is not None:
            out[setting] = value
    return out


def values_for(cls: type[BaseModel], settings: Settings) -> dict[str, Any]:
    """``{field: value}`` filling ``cls``'s setting fields from ``settings``."""
    return {field: getattr(settings, setting) for field, setting in setting_names(cls).items()}
