"""What differs between warehouses lives in their classes (``ctxprec_ops/warehouse/dialects/``):
no code outside that package branches on a dialect's name — ``dialect.name ==``, a URL's backend
or driver name, a capability compared as a stand-in for the name, a per-dialect type variant."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("ctxprec_ops", "dagster_defs", "dags")
ALLOWED = ROOT / "ctxprec_ops" / "warehouse" / "dialects"

_COMPARE = r"\s*(==|!=|\bnot\s+in\b|\bin\b)"
BRANCH = re.compile(
    "|".join(
        [
            r"\bdialect\.name" + _COMPARE,  # engine.dialect.name == "sqlite"
            r"(==|!=)\s*[\w.()]*\bdialect\.name\b",  # "sqlite" == conn.dialect.name
            r"\bget_backend_name\(\)" + _COMPARE,  # make_url(url).get_backend_name() == "sqlite"
            r"\.drivername" + _COMPARE,  # url.drivername in ("postgresql", "postgres")
            r"\b(for_dialect|dialect_of)\([^()]*(\([^()]*\))?[^()]*\)\.\w+" + _COMPARE,  # a capability as a name
            r"\.with_variant\(",  # String(255).with_variant(Text(), "postgresql")
            r"\.startswith\(\s*[\"'](sqlite|postgres|mysql|mariadb|duckdb|snowflake)",  # url.startswith("sqlite")
        ]
    )
)


def _branches() -> list[str]:
    found = []
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            if ALLOWED in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if BRANCH.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_dialect_name_branch_outside_the_dialect_classes():
    assert _branches() == [], "move the behaviour into the warehouse family's class (warehouse/dialects/)"


def test_the_search_finds_each_form_of_branch():
    """The pattern catches the branches it is for (and not a dialect's name merely mentioned)."""
    branches = [
        'if engine.dialect.name == "sqlite":',
        'self._sqlite = engine.dialect.name == "sqlite"',
        'if conn.dialect.name != "postgresql":',
        'if conn.dialect.name in ("mysql", "mariadb"):',
        'if "sqlite" == conn.dialect.name:',
        'if make_url(url).get_backend_name() == "sqlite":',
        'if u.drivername in ("postgresql", "postgres"):',
        'if for_dialect(conn.dialect.name).claims == "lease":',
        'if dialect_of(engine).id_binding != "expanding":',
        '_KEYTEXT = String(255).with_variant(Text(), "postgresql", "sqlite")',
        'if config.warehouse.startswith("sqlite") and ":memory:" in config.warehouse:',
    ]
    assert [b for b in branches if not BRANCH.search(b)] == []
    mentions = [
        'log.debug("write conflict on %s", engine.dialect.name)',
        "return self._choose(for_dialect(dialect.name))",
        "if dialect_of(engine).keys_enforced:",
        'raise ValueError("expected e.g. sqlite:///ctxprec.db")',
    ]
    assert [m for m in mentions if BRANCH.search(m)] == []
