"""The offline judge: relevance from content-word overlap, no network, deterministic.

It is a cheap proxy, not an LLM: a node counts as relevant when it shares enough key terms with
the expected output (the question's terms count half). It cannot see paraphrase, negation or
reasoning; use it for demos, smoke tests and CI, and an LLM judge for real measurements.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from ...scoring.verdicts import NodeVerdict
from .base import JudgeModel

__all__ = ["LexicalJudge"]

#: every byte but an ASCII letter or digit becomes a space: the words of ``[a-z0-9]+`` (a UTF-8
#: character past ASCII is bytes >= 0x80 only, so it parts words as it does in the pattern)
_WORD_BYTES = bytes(c if (97 <= c <= 122 or 48 <= c <= 57) else 32 for c in range(256))
_STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    get got use used using via per may might must shall one two new""".split()
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


#: words remembered by ``_Stems`` at most (then it starts again)
_STEMS_MAX = 131_072


class _Stems(dict[str, str]):
    """word -> its stem, or ``""`` for a word that is no term (shorter than 3 letters, a stop
    word), worked out the first time a word is met: a known word is one dict access in C, not a
    Python loop step with a call to a cache."""

    def __missing__(self, word: str) -> str:
        if len(self) >= _STEMS_MAX:
            self.clear()
        stem = _stem(word) if len(word) >= 3 and word not in _STOP else ""
        self[word] = stem
        return stem


_stems = _Stems()


@lru_cache(maxsize=4096)
def _terms(text: str) -> dict[str, str]:
    """stem -> the first surface word with that stem (for readable reasons)."""
    # ``re.findall("[a-z0-9]+", ...)``, ~3x faster: the text's bytes translated, then split
    words = text.lower().encode("utf-8", "surrogatepass").translate(_WORD_BYTES).decode("ascii").split()
    words.reverse()  # built back to front: the first word of each stem is written last, and stays
    out = dict(zip(map(_stems.__getitem__, words), words))
    out.pop("", None)
    return out


_BLOCK = re.compile(r'<node id="(\d+)">\n?(.*?)\n?</node>', re.DOTALL)


def _section(prompt: str, *tags: str) -> str:
    for tag in tags:
        m = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.DOTALL)
        if m:
            return html.unescape(m.group(1))
    return ""


class LexicalJudge(JudgeModel):
    """Deterministic offline judge (model name ``"lexical"``)."""

    offline = True
    deterministic = True
    answers_inline = True  # word overlap, computed in process
    price_per_million = (0.0, 0.0)

    def __init__(self, min_overlap: float = 0.25, min_shared: int = 2) -> None:
        self.min_overlap = min_overlap
        self.min_shared = min_shared

    def get_model_name(self) -> str:
        return "lexical"

    def judge_node(self, input: str, expected_output: str, node: str) -> tuple[bool, str]:
        expected = _terms(expected_output).keys()
        question = _terms(input).keys()
        node_terms = _terms(node)
        terms = node_terms.keys()
        shared = sorted(terms & expected)
        shared_q = terms & question - expected
        weight = len(shared) + 0.5 * len(shared_q)
        basis = max(1, len(expected))
        overlap = weight / basis
        need = min(self.min_shared, len(expected)) if expected else 1
        relevant = bool(expected) and len(shared) >= need and overlap >= self.min_overlap
        if shared:
            shown = ", ".join(repr(node_terms[t]) for t in shared[:5])
            more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
            reason = (
                f"shares {shown}{more} with the expected output "
                f"({overlap:.0%} term overlap; {'enough' if relevant else 'not enough'} to count)"
            )
        else:
            reason = "shares no key terms with the expected output"
        return relevant, reason

    def judge_nodes(self, input: str, expected_output: str, nodes: Sequence[tuple[int, str]]) -> dict[int, NodeVerdict]:
        out: dict[int, NodeVerdict] = {}
        for node_id, text in nodes:
            relevant, reason = self.judge_node(input, expected_output, text)
            out[node_id] = NodeVerdict(node=node_id, relevant=relevant, reason=reason)
        return out

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        """Judge a prompt in the default template's layout (for use as a generic JudgeModel)."""
        expected = _section(prompt, "expected_answer", "expected_outcome")
        question = _section(prompt, "question", "user_messages")
        nodes = [(int(k), html.unescape(t)) for k, t in _BLOCK.findall(prompt)]
        verdicts = self.judge_nodes(question, expected, nodes)
        return json.dumps({"verdicts": [v.model_dump() for v in verdicts.values()]})

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        return self.generate(prompt, schema)
