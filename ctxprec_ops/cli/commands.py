"""The sub-commands: which module registers each, and its one-line help (``ctxprec --help``
lists them from here, without importing any command module); and ``Parser``, the argument parser
of ``ctxprec`` and of every sub-command, which names a mistyped flag or command and the closest
real one before anything else is reported."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

__all__ = ["COMMANDS", "Command", "Parser"]


class Command(NamedTuple):
    module: str
    help: str


#: name -> (module of ``ctxprec_ops.cli`` whose ``register`` adds it, one-line help), in display order
COMMANDS: dict[str, Command] = {
    "score": Command("score", "score one partition (UTC day) and write scores back"),
    "estimate": Command("estimate", "tokens and cost a score run would spend, without calling the judge"),
    "demo": Command("demo", "generate a sample warehouse, score every day, print the trend and alerts, write a report"),
    "trend": Command("monitor", "recent partitions with their figures, alerts and a compact trend"),
    "check": Command("monitor", "check one partition; exit 3 when an alert fires"),
    "report": Command("monitor", "write a self-contained HTML report"),
    "compare": Command("compare", "compare two values of a segment column (e.g. retriever v1 vs v2), paired or not"),
    "calibrate": Command("calibrate", "measure judges against labelled node judgments"),
    "labels": Command("labels", "draw rows to label (sample) and store the labels (import) that correct the figures"),
    "audit": Command("audit", "audit the judge: does a verdict change with where the node is shown? (position)"),
    "batches": Command("batches", "list, collect or cancel Batch API batches"),
}


#: argparse's message for a value outside an option's choices
_INVALID_CHOICE = re.compile(r"^argument (.+?): invalid choice: '(.*?)' \(choose from (.*)\)$")


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that checks the words it is given before parsing them: an option
    this parser does not have, or a sub-command that does not exist, is reported first, in two
    lines, with the closest real name (``difflib``), and exit code 2 — instead of the usage and
    "the following arguments are required: --partition" a typo of ``--partition`` gives argparse.
    Sub-command parsers are of this class too (``add_subparsers`` uses the parent's)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        self._check_words(words)
        return super().parse_known_args(words, namespace)

    def _commands(self) -> dict[str, Any] | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices
        return None

    def _check_words(self, words: list[str]) -> None:
        commands = self._commands()
        for word in words:
            if word == "--":
                return
            if word.startswith("-") and len(word) > 1 and not self._negative_number_matcher.match(word):
                if not self._known_option(word):
                    self._unknown("option", word.split("=", 1)[0], list(self._option_string_actions))
            elif commands is not None:  # the first word that is no option names the sub-command
                if word not in commands:
                    self._unknown("command", word, list(commands))
                return  # the rest is the sub-command's to check

    def _known_option(self, word: str) -> bool:
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name in self._option_string_actions:
            return True
        if not name.startswith("--"):  # -xVALUE: a short option with its value attached
            return name[:2] in self._option_string_actions
        # an unambiguous abbreviation is argparse's to accept (an ambiguous one, argparse's to refuse)
        return self.allow_abbrev and any(o.startswith(name) for o in self._option_string_actions)

    def error(self, message: str) -> NoReturn:
        """argparse's errors; a value that is not one of an option's choices gets the closest one
        in two lines too (the choices are in the message)."""
        found = _INVALID_CHOICE.search(message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(3))
            close = difflib.get_close_matches(found.group(2), choices, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else f" (choose from {', '.join(choices)})"
            self.exit(2, f"{self.prog}: error: {found.group(1)}: invalid value {found.group(2)!r}{hint}\n"
                      f"see `{self.prog} --help`\n")  # fmt: skip
        super().error(message)

    def _unknown(self, what: str, word: str, names: list[str]) -> NoReturn:
        close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        self.exit(2, f"{self.prog}: error: unknown {what} {word}{hint}\nsee `{self.prog} --help`\n")
