"""docs/cli.md's command reference is what ``scripts/cli_reference.py`` prints: the ``--help`` of
every ``ctxprec`` command, from the parsers the CLI builds (made by the script, not by hand)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cli_reference.py"


def _script():
    spec = importlib.util.spec_from_file_location("cli_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_what_the_script_prints():
    script = _script()
    printed = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True, timeout=120)
    shown = script.page_reference(script.DOC.read_text(encoding="utf-8"))
    assert shown + "\n" == printed.stdout, "run: python scripts/cli_reference.py --write"


def test_the_reference_has_every_command_and_flag():
    """Each command of the CLI has its section, and each of its options appears in it."""
    printed = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True, timeout=120)
    code = (
        "import json\n"
        "from ctxprec_ops.cli import build_parser\n"
        "from ctxprec_ops.cli.commands import COMMANDS\n"
        "out = {}\n"
        "for name in COMMANDS:\n"
        "    sub = next(a for a in build_parser([name])._actions if a.__class__.__name__ == '_SubParsersAction')\n"
        "    out[name] = [s for a in sub.choices[name]._actions for s in a.option_strings]\n"
        "print(json.dumps(out))\n"
    )
    flags = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    sections = printed.stdout.split("### `ctxprec ")[1:]
    by_name = {s.split("`", 1)[0]: s for s in sections}
    assert set(flags) <= set(by_name)
    for name, options in flags.items():
        assert options and all(o in by_name[name] for o in options), name
