"""Recall ranking: the vector pool re-ranked with BM25 (``kaos_memory.storage.ranking``)."""

from __future__ import annotations

import pytest
from kaos_memory.storage.ranking import POOL_MAX, POOL_MIN, bm25, fuse, pool_size, tokens


def test_tokens_drop_case_punctuation_and_stopwords() -> None:
    assert tokens("When did Caroline go to the LGBTQ support-group?") == [
        "caroline",
        "go",
        "lgbtq",
        "support",
        "group",
    ]


def test_bm25_scores_only_shared_words_and_prefers_rare_ones() -> None:
    docs = ["Melanie painted a sunset", "Caroline went hiking", "Caroline and Melanie talked"]
    scores = bm25("What did Melanie paint after hiking?", docs)
    assert scores[0] > 0 and scores[1] > 0
    # "hiking" is in one document and "melanie" in two: the rarer word weighs more.
    assert scores[1] > scores[2]
    assert bm25("the of and", docs) == [0.0, 0.0, 0.0]
    assert bm25("anything", []) == []


def test_a_fact_naming_the_query_words_rises_above_closer_vectors() -> None:
    texts = ["a nice evening together", "we talked for hours", "I adopted a puppy named Oscar"]
    scores = [0.90, 0.85, 0.60]  # the vector store's order: nearest first
    ranked = fuse("What is the name of the puppy Caroline adopted?", texts, scores)
    assert ranked[0][0] == 2
    assert sorted(i for i, _ in ranked) == [0, 1, 2]
    fused = [s for _, s in ranked]
    assert fused == sorted(fused, reverse=True)


def test_without_shared_words_the_vector_order_stands() -> None:
    texts = ["alpha beta", "gamma delta", "epsilon zeta"]
    ranked = fuse("unrelated question", texts, [0.9, 0.8, 0.7])
    assert [i for i, _ in ranked] == [0, 1, 2]
    # Equal scores everywhere: ties keep the pool's order.
    assert [i for i, _ in fuse("unrelated", texts, [0.5, 0.5, 0.5])] == [0, 1, 2]
    assert fuse("anything", [], []) == []


@pytest.mark.parametrize(
    ("top_k", "expected"), [(1, POOL_MIN), (10, POOL_MIN), (20, 120), (100, POOL_MAX)]
)
def test_pool_size_is_bounded(top_k: int, expected: int) -> None:
    assert pool_size(top_k) == expected
