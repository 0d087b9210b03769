"""How a setting is declared (``setting``, ``run_setting``, ``rule_setting``: a pydantic ``Field``
carrying its section, its bounds and where its default comes from) and where the values are read
(``Environment``: ``os.environ``, or the mapping ``Settings.from_env`` was given)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import MISSING, asdict, fields
from typing import Any

from pydantic import Field
from pydantic_settings import EnvSettingsSource
from pydantic_settings.sources.utils import parse_env_vars

from ..monitoring.rules import AlertRules
from ..pipeline.bounds import Bounds, bounds_of
from ..pipeline.config import PipelineConfig

__all__ = ["Environment", "reading", "rule_setting", "run_setting", "setting"]

_RUN_FIELDS = {f.name: f for f in fields(PipelineConfig)}
_RULE_FIELDS = {f.name: f for f in fields(AlertRules)}


def _default_of(f: Any) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


def setting(
    default: Any,
    description: str,
    section: str,
    *,
    alias: str | None = None,
    secret: bool = False,
    doc_default: str | None = None,
    run: str | None = None,
    rule: str | None = None,
    **bounds: Any,
) -> Any:
    """A setting's declaration (a pydantic ``Field``; ``bounds`` as ``pipeline.bounds.Bounds``)."""
    given = {k: v for k, v in asdict(Bounds(**bounds)).items() if v is not None and v is not False and v != ()}
    b = {k: list(v) if isinstance(v, tuple) else v for k, v in given.items()}
    extra: dict[str, Any] = {"section": section, "bounds": b}
    for key, value in (("doc_default", doc_default), ("run", run), ("rule", rule), ("secret", secret or None)):
        if value is not None:
            extra[key] = value
    kw: dict[str, Any] = dict(description=description, json_schema_extra=extra, repr=not secret)
    if alias:
        kw["validation_alias"] = alias
    if isinstance(default, (dict, list)):
        return Field(default_factory=lambda: type(default)(default), **kw)
    return Field(default, **kw)


def run_setting(name: str, description: str, section: str, **kw: Any) -> Any:
    """A run setting: ``PipelineConfig.<name>``'s default and bounds (``kw`` may give another default)."""
    f = _RUN_FIELDS[name]
    kw.setdefault("default", _default_of(f))
    b = asdict(bounds_of(f))
    return setting(kw.pop("default"), description, section, run=name, **kw, **b)


def rule_setting(name: str, description: str) -> Any:
    """An alert rule's setting: ``AlertRules.<name>``'s default and bounds."""
    f = _RULE_FIELDS[name]
    return setting(_default_of(f), description, "alerts", rule=name, **asdict(bounds_of(f)))


#: the environment ``from_env`` reads instead of ``os.environ`` (a mapping given to it)
_given_env: ContextVar[Mapping[str, str] | None] = ContextVar("ctxprec_settings_env", default=None)


class Environment(EnvSettingsSource):
    """The variables: ``os.environ`` or the mapping given to ``from_env``; a variable holding only
    spaces is unset, as an empty one is."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        given = _given_env.get()
        env = os.environ if given is None else given
        clean = {k: v.strip() for k, v in env.items() if v is not None and v.strip()}
        return parse_env_vars(clean, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


@contextmanager
def reading(env: Mapping[str, str] | None) -> Iterator[None]:
    """Within the block, ``Environment`` reads ``env`` (None: ``os.environ``)."""
    token = _given_env.set(env)
    try:
        yield
    finally:
        _given_env.reset(token)
