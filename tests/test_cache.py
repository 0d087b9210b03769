"""Judgment-cache keys and the in-memory cache."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxprec_ops.judge.cache import KEY_BYTES, KEY_HEAD_BYTES, DictVerdictCache, judgment_key, judgment_keys, key_range
from ctxprec_ops.scoring.verdicts import NodeVerdict

text = st.text(max_size=40)


@given(text, text, text, text, st.lists(text, min_size=1, max_size=6))
def test_batch_keys_equal_single_keys(model, version, q, a, nodes):
    keys = judgment_keys(model, version, q, a, nodes)
    assert keys == [judgment_key(model, version, q, a, n) for n in nodes]
    assert all(isinstance(k, bytes) and len(k) == KEY_BYTES == 23 for k in keys)


@given(st.tuples(text, text, text, text, text), st.tuples(text, text, text, text, text))
def test_distinct_tuples_get_distinct_keys(t1, t2):
    assert (judgment_key(*t1) == judgment_key(*t2)) == (t1 == t2)


def test_fields_are_not_confused_by_concatenation():
    assert judgment_key("m", "v", "ab", "c", "n") != judgment_key("m", "v", "a", "bc", "n")
    assert judgment_key("m", "v", "q", "a", "n") != judgment_key("m", "vq", "", "a", "n")


def test_keys_of_one_question_sort_together():
    """The nodes of one (judge, prompt, input, expected output) are adjacent in key order, so
    the judgments index stores a case's entries side by side (one page per case, not per node)."""
    cases = [(f"question {i}", f"answer {i}", [f"node {i}-{k}" for k in range(5)]) for i in range(300)]
    owner = {}
    for i, (q, a, nodes) in enumerate(cases):
        for key in judgment_keys("gpt-4.1-mini", "v1-abc", q, a, nodes):
            owner[key] = i
    assert len(owner) == 1500
    in_order = [owner[k] for k in sorted(owner)]
    runs = [in_order[0]] + [b for a, b in zip(in_order, in_order[1:]) if a != b]
    assert len(runs) == len(cases)  # each case is one contiguous run of keys


def test_key_range_holds_exactly_the_keys_of_one_question():
    keys = judgment_keys("m", "v1", "q", "a", ["x", "y", "z"])
    lo, hi = key_range(keys[0][:KEY_HEAD_BYTES])
    assert all(lo <= k <= hi for k in keys)
    others = judgment_keys("m", "v1", "another q", "a", ["x", "y", "z"])
    assert not any(lo <= k <= hi for k in others)


def test_keys_are_stable_across_versions():
    """Keys are persisted: the same tuple must give the same bytes in every release (and the
    former hex keys convert to these, warehouse/migrate.py)."""
    assert judgment_key("gpt-4o-mini", "v1", "How do I reset?", "Use the link.", "node one").hex() == (
        "62ca404139ce3f3e1984d2dbea5a2c80299a9d9c1076ab"
    )


def test_a_changed_judge_or_prompt_changes_every_key():
    base = judgment_keys("m1", "v1", "q", "a", ["x", "y"])
    assert set(base).isdisjoint(judgment_keys("m2", "v1", "q", "a", ["x", "y"]))
    assert set(base).isdisjoint(judgment_keys("m1", "v2", "q", "a", ["x", "y"]))


def test_dict_cache_records_only_new_entries():
    seen = NodeVerdict(node=0, relevant=True, reason="old")
    cache = DictVerdictCache({"k1": seen})
    assert cache.get("k1") is seen and cache.get("k2") is None
    assert cache.hits == 1
    cache.put("k1", NodeVerdict(node=0, relevant=False, reason="again"))
    cache.put("k2", NodeVerdict(node=1, relevant=False, reason="new"))
    assert set(cache.added) == {"k2"}
    assert len(cache) == 2


def test_remembered_keys_are_computed_once_and_equal_fresh_ones():
    from ctxprec_ops.judge.cache import remembered_keys

    nodes = ["first node", "second node"]
    memo: dict = {}
    with remembered_keys(memo):
        first = judgment_keys("m", "v1", "q", "a", nodes)
        again = judgment_keys("m", "v1", "q", "a", list(nodes))  # equal arguments: found, not recomputed
        other = judgment_keys("m", "v1", "q", "b", nodes)
    assert again is first and len(memo) == 2
    assert first == judgment_keys("m", "v1", "q", "a", nodes) and other == judgment_keys("m", "v1", "q", "b", nodes)
    judgment_keys("m", "v1", "q", "c", nodes)  # outside the block nothing is remembered
    assert len(memo) == 2
