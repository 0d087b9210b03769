"""A verdict's confidence from the token log-probabilities of the judge's answer.

The parser is checked on token lists built by hand (a leading space, a bare value after a space
token, a value split over tokens, a value glued to punctuation, a reason that looks like a verdict,
multi-byte text given as ``bytes``), then end to end against the local judge server, which returns
``logprobs`` with each verdict value its own token(s) at a known probability.
"""

from __future__ import annotations

import json
import math

import pytest

from ctxprec_ops.errors import JudgeConfigurationError
from ctxprec_ops.judge.calls import JudgeRun
from ctxprec_ops.judge.limiter import AdaptiveLimiter
from ctxprec_ops.judge.logprobs import tokens_of, value_confidences
from ctxprec_ops.judge.models import OpenAIJudge
from ctxprec_ops.judge.nodes import judge_nodes
from ctxprec_ops.scoring.confidence import ConfidentVerdict
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate
from tests.fixtures.cheap_judge import VALUE_PROBABILITY, CheapModel, logprob_tokens


def _tokens(pieces: list[tuple[str, float]]) -> list[tuple[bytes, float]]:
    return [(t.encode(), math.log(p)) for t, p in pieces]


def _answer(*verdicts: tuple[int, bool, str]) -> str:
    return json.dumps({"verdicts": [{"node": k, "relevant": r, "reason": why} for k, r, why in verdicts]})


@pytest.mark.parametrize("style", ["spaced", "bare", "split"])
def test_the_value_probability_is_read_whatever_its_tokens(style):
    content = _answer((1, True, "states the fact"), (2, False, "off topic"), (3, True, "close"))
    tokens = tokens_of(logprob_tokens(content, [0.91, 0.64, 0.77], style))
    assert tokens is not None and b"".join(t for t, _ in tokens) == content.encode()
    got = value_confidences(tokens, [1, 2, 3])
    assert got == pytest.approx({1: 0.91, 2: 0.64, 3: 0.77})


def test_a_value_glued_to_punctuation_counts_its_token():
    content = '{"verdicts":[{"node":4,"relevant":true},{"node":7,"relevant":false}]}'
    pieces = [
        ('{"verdicts":[{"node":4,"relevant":', 0.99),
        ("true},", 0.7),
        ('{"node":7,"relevant":', 0.99),
        ("fa", 0.9),
        ("lse", 0.5),
        ("}]}", 0.99),
    ]
    assert "".join(t for t, _ in pieces) == content
    assert value_confidences(_tokens(pieces), [4, 7]) == pytest.approx({4: 0.7, 7: 0.45})


def test_a_reason_that_looks_like_a_verdict_is_text():
    content = _answer((1, False, 'the node says "relevant": true} but {it} is not'), (2, True, "ok"))
    tokens = tokens_of(logprob_tokens(content, [0.6, 0.95]))
    assert value_confidences(tokens, [1, 2]) == pytest.approx({1: 0.6, 2: 0.95})


def test_multibyte_text_is_matched_by_the_tokens_bytes():
    """A token may end inside a multi-byte character: its ``bytes`` are exact, its text is not."""
    content = json.dumps(
        {"verdicts": [{"node": 1, "relevant": True, "reason": "café ☕ near"}, {"node": 2, "relevant": False}]},
        ensure_ascii=False,
    )
    items = []
    for item in logprob_tokens(content, [0.8, 0.7]):
        raw = bytes(item["bytes"])
        if len(raw) > 1 and len(raw) != len(item["token"]):  # holds a multi-byte character: cut inside it
            cut = raw.index("☕".encode()) + 1 if "☕".encode() in raw else 1
            for part in (raw[:cut], raw[cut:]):
                items.append({"token": part.decode("utf-8", "replace"), "bytes": list(part), "logprob": -0.01})
        else:
            items.append(item)
    assert any("\ufffd" in i["token"] for i in items)  # the text of a cut token is lossy
    tokens = tokens_of(items)
    assert tokens is not None and b"".join(t for t, _ in tokens) == content.encode()
    assert value_confidences(tokens, [1, 2]) == pytest.approx({1: 0.8, 2: 0.7})


def test_in_order_yes_no_answers_are_mapped_by_position():
    content = '{"verdicts": [{"verdict": "yes", "reason": "a"}, {"verdict": "no", "reason": "b"}]}'
    at = content.index('"yes"') + 1
    pieces = [(content[:at], 0.99), ("yes", 0.8), (content[at + 3 : content.index('"no"') + 1], 0.99), ("no", 0.6)]
    pieces.append((content[content.index('"no"') + 3 :], 0.99))
    assert "".join(t for t, _ in pieces) == content
    assert value_confidences(_tokens(pieces), [5, 9]) == pytest.approx({5: 0.8, 9: 0.6})


def test_no_usable_tokens_are_no_tokens():
    assert tokens_of(None) is None
    assert tokens_of([{"token": "x"}]) is None  # no logprob
    assert value_confidences(_tokens([("not json", 0.9)]), [1]) == {}


@pytest.mark.parametrize("style", ["spaced", "bare", "split"])
def test_confidences_from_the_judge_servers_logprobs(judge_server, style):
    judge_server.cheap_models["cheap-model"] = cheap = CheapModel(error_rate=0.3, seed=7)
    judge_server.logprob_style = style
    texts = [f"node {k} {'RELEVANT' if k % 2 else 'filler'} of the style test" for k in range(1, 9)]
    run = JudgeRun(limiter=AdaptiveLimiter(4), max_retries=0)
    for model in ("cheap-model", "strong-model"):
        judge = OpenAIJudge(model, base_url=judge_server.base_url, api_key="k")
        verdicts, _ = _judge(judge, texts, run)
        assert all(isinstance(v, ConfidentVerdict) for v in verdicts)
        want = [cheap.draw(t)[1] if model == "cheap-model" else VALUE_PROBABILITY for t in texts]
        assert [v.confidence for v in verdicts] == pytest.approx(want)
    asked = judge_server.requests[-1]["json"]
    assert asked["logprobs"] is True


def _judge(judge, texts, run):
    from ctxprec_ops._async import run_sync

    async def go():
        try:
            return await judge_nodes(
                judge, ContextualPrecisionTemplate, "v", "q?", "a.", texts, run, confidence="logprobs"
            )
        finally:
            await judge.aclose()

    return run_sync(go)


@pytest.mark.parametrize(("mode", "said"), [("ignore", "answered without them"), ("reject", "refused them")])
def test_an_endpoint_without_logprobs_is_a_clear_configuration_error(judge_server, mode, said):
    judge_server.logprobs_mode = mode
    judge = OpenAIJudge("m", base_url=judge_server.base_url, api_key="k")
    run = JudgeRun(limiter=AdaptiveLimiter(2), max_retries=0)
    with pytest.raises(JudgeConfigurationError, match=f"cannot be the cheap stage of a cascade.*{said}"):
        _judge(judge, ["a RELEVANT node"], run)
    assert judge_server.calls == 1  # not retried: another request would be refused the same way
