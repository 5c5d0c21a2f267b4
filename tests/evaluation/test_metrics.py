"""Metric functions against cases computed by hand (ALGORITHM.md §6)."""

from __future__ import annotations

import math

import pytest

from a2x_local.evaluation.metrics import (
    complete_at_k,
    dedupe,
    f1,
    hit_at_k,
    ndcg_at_k,
    percent_k,
    percentile,
    recall_at_k,
    reciprocal_rank,
    score_query,
)


def test_score_query_partial_answer() -> None:
    # correct {a, b, c}; returned [a, x, b, y]: 2 found of 3 correct, 2 correct of 4 returned
    score = score_query(["a", "x", "b", "y"], {"a", "b", "c"})
    assert score.hit is True
    assert score.recall == pytest.approx(2 / 3)
    assert score.precision == pytest.approx(2 / 4)
    assert (score.found, score.returned) == (2, 4)


def test_empty_answer_scores_zero_precision_not_an_error() -> None:
    score = score_query([], {"a"})
    assert (score.hit, score.recall, score.precision, score.returned) == (False, 0.0, 0.0, 0)


def test_duplicates_count_once() -> None:
    # [a, a, x] is the answer {a, x}: precision 1/2, not 2/3
    score = score_query(["a", "a", "x"], ["a", "b"])
    assert score.precision == pytest.approx(0.5)
    assert score.recall == pytest.approx(0.5)
    assert dedupe(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    # and a duplicate must not push a correct service out of the top k
    assert hit_at_k(["x", "x", "a"], {"a"}, 2) == 1.0
    assert recall_at_k(["x", "x", "a"], {"a"}, 2) == 1.0


def test_miss() -> None:
    score = score_query(["x", "y"], {"a"})
    assert (score.hit, score.recall, score.precision) == (False, 0.0, 0.0)


def test_no_correct_services_is_refused() -> None:
    with pytest.raises(ValueError):
        score_query(["a"], set())


def test_hit_and_recall_at_k() -> None:
    ranking = ["x", "a", "y", "b", "z"]
    correct = {"a", "b"}
    assert hit_at_k(ranking, correct, 1) == 0.0
    assert hit_at_k(ranking, correct, 2) == 1.0
    assert recall_at_k(ranking, correct, 2) == 0.5
    assert recall_at_k(ranking, correct, 4) == 1.0
    assert recall_at_k(ranking, correct, 100) == 1.0


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(["x", "y", "a"], {"a"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a"], {"a", "b"}) == 1.0
    assert reciprocal_rank(["x"], {"a"}) == 0.0
    assert reciprocal_rank(["x", "x", "a"], {"a"}) == pytest.approx(1 / 2)


def test_ndcg_hand_computed() -> None:
    # correct {a, b}; ranking [a, x, b]: DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3)
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)
    # only the top k counts: b at rank 3 is outside k = 2; ideal at k = 2 is 1 + 1/log2(3)
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k([], {"a"}, 10) == 0.0


def test_f1_from_averages() -> None:
    assert f1(0.5, 1.0) == pytest.approx(2 / 3)
    assert f1(0.0, 0.0) == 0.0


def test_percent_k_rounds_up_and_is_at_least_one() -> None:
    assert percent_k(0.01, 1839) == 19
    assert percent_k(0.05, 1839) == 92
    assert percent_k(0.10, 1839) == 184
    assert percent_k(0.10, 100) == 10
    assert percent_k(0.01, 10) == 1


def test_percentile() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90) == pytest.approx(9.1)
    assert percentile([], 50) == 0.0


def test_comp_needs_the_whole_correct_set() -> None:
    # correct {a, b}: [a, x, b] is complete at 3, not at 2; one of two is never complete
    assert complete_at_k(["a", "x", "b"], {"a", "b"}, 3) == 1.0
    assert complete_at_k(["a", "x", "b"], {"a", "b"}, 2) == 0.0
    assert complete_at_k(["a", "x"], {"a", "b"}, 10) == 0.0
    assert complete_at_k(["b", "b", "a"], {"a", "b"}, 2) == 1.0    # a repeat does not push a out of the top 2
    assert score_query(["a", "b", "y"], {"a", "b"}).complete is True
    assert score_query(["a", "y"], {"a", "b"}).complete is False
    assert score_query(["a"], {"a"}).complete is True              # one correct service: comp is hit
