"""The pure formula: hand-computed values and properties (hypothesis)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxprec_ops.scoring.formula import apply_strict, contextual_precision, is_success, precision_steps

rankings = st.lists(st.booleans(), min_size=0, max_size=40)


@pytest.mark.parametrize(
    "relevance, expected",
    [
        ([True], 1.0),
        ([False], 0.0),
        ([], 0.0),
        ([True, True, False], 1.0),
        ([False, True], 0.5),
        ([True, False, True], (1 / 1 + 2 / 3) / 2),
        ([False, True, False, True], (1 / 2 + 2 / 4) / 2),
        ([False, False, False, True], 0.25),
        ([True, False, False, False, True], (1 + 2 / 5) / 2),
    ],
)
def test_hand_computed(relevance, expected):
    assert contextual_precision(relevance) == pytest.approx(expected, abs=1e-15)


def test_perfect_ranking_is_exactly_one_no_epsilon():
    for n_rel in range(1, 30):
        assert contextual_precision([True] * n_rel + [False] * 7) == 1.0


@given(rankings)
def test_score_in_unit_interval(rel):
    s = contextual_precision(rel)
    assert 0.0 <= s <= 1.0


@given(rankings)
def test_all_irrelevant_is_zero_and_any_relevant_positive(rel):
    s = contextual_precision(rel)
    if not any(rel):
        assert s == 0.0
    else:
        assert s > 0.0


@given(rankings, st.data())
def test_moving_relevant_node_earlier_never_lowers_score(rel, data):
    if not any(rel) or all(rel):
        return
    i = data.draw(st.sampled_from([k for k, r in enumerate(rel) if r]))
    earlier = [k for k in range(i) if not rel[k]]
    if not earlier:
        return
    j = data.draw(st.sampled_from(earlier))
    swapped = list(rel)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    assert contextual_precision(swapped) >= contextual_precision(rel) - 1e-12


@given(rankings)
def test_sorted_ranking_is_perfect(rel):
    best = sorted(rel, reverse=True)
    assert contextual_precision(best) == (1.0 if any(rel) else 0.0)


@given(rankings)
def test_steps_sum_to_score(rel):
    steps = precision_steps(rel)
    hits = sum(rel)
    if hits:
        assert sum(s.contribution for s in steps) / hits == pytest.approx(contextual_precision(rel))


def test_strict_mode_and_success():
    assert apply_strict(0.99, True) == 0.0
    assert apply_strict(1.0, True) == 1.0
    assert apply_strict(0.4, False) == 0.4
    assert is_success(0.5, 0.5) and not is_success(0.49, 0.5) and not is_success(None, 0.0)
