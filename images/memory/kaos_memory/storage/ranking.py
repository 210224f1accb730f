"""Recall ranking: the vector store's nearest facts, re-ranked with a lexical signal.

An embedding finds facts that mean what the question means, but it blurs the exact words
a question names: a person, a place, a month, a rare noun. On LoCoMo (hack/bench/locomo,
a real embedder) plain BM25 over the turns beats vector search overall, and vector search
wins where the wording differs. So recall takes a pool of the scope's nearest facts
(several times ``top_k``, from the store's tenant-filtered vector search), scores the
pool with BM25 and ranks by a weighted sum of the two scores, each scaled to [0, 1] over
the pool (min-max), so neither needs calibrating against the other (cosine on pgvector,
``1/(1+d)`` on Chroma). On the benchmark this lifted evidence recall in every category,
more than reciprocal-rank fusion of the same two lists did.

The lexical scores are computed over the pool only (its document frequencies stand in for
the store's): the pool is small (tens of facts), so pure Python over it costs less than
indexing it with a BM25 library (bm25s) on every query. The figures: docs/benchmarks.md,
"Measured figures behind the design". Facts outside the pool are not found lexically; the
pool size bounds that.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence

# BM25's usual constants (Robertson/Zaragoza).
K1 = 1.2
B = 0.75
# Weight of the vector score in the fused score (the lexical one gets the rest), and the
# pool: both chosen on hack/bench/locomo, where their neighbours scored alike (the figures:
# docs/benchmarks.md, "Measured figures behind the design"); Chroma's query time grows with
# the pool, so the smaller.
VECTOR_WEIGHT = 0.4
POOL_FACTOR = 6
POOL_MIN = 60
POOL_MAX = 400


# Facts whose tokens are kept (about 1 KiB each).
BAG_CACHE = 20_000


def pool_size(top_k: int) -> int:
    """How many nearest facts the vector search fetches for a recall of ``top_k``."""
    return min(POOL_MAX, max(POOL_MIN, POOL_FACTOR * top_k))


_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

# English function words: they match everywhere and only add noise to the lexical rank.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


@functools.lru_cache(maxsize=BAG_CACHE)
def _bag(text: str) -> tuple[dict[str, int], int]:
    """A fact's term counts and length. Cached: a tenant's facts come back query after
    query, and tokenising the pool is most of the re-ranking's cost."""
    bag = Counter(tokens(text))
    return dict(bag), sum(bag.values())


def bm25(query: str, docs: Sequence[str]) -> list[float]:
    """BM25 of ``query`` against each of ``docs``, with ``docs`` as the collection."""
    terms = set(tokens(query))
    if not terms or not docs:
        return [0.0] * len(docs)
    bags = [_bag(d) for d in docs]
    n = len(bags)
    avg = sum(length for _, length in bags) / n or 1.0
    df = Counter(t for bag, _ in bags for t in terms if t in bag)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    scores = []
    for bag, length in bags:
        norm = K1 * (1 - B + B * length / avg)
        scores.append(sum(idf[t] * bag[t] * (K1 + 1) / (bag[t] + norm) for t in idf if t in bag))
    return scores


def _unit(values: Sequence[float]) -> list[float]:
    """``values`` scaled to [0, 1] (all equal: all 0)."""
    low, high = min(values), max(values)
    span = high - low
    return [(v - low) / span if span > 0 else 0.0 for v in values]


def fuse(query: str, texts: Sequence[str], scores: Sequence[float]) -> list[tuple[int, float]]:
    """``(index, fused score)`` of the pool ``texts`` with vector ``scores``, best first.

    Ties keep the order of the pool (the vector store's).
    """
    if not texts:
        return []
    vector = _unit(scores)
    lexical = _unit(bm25(query, texts))
    fused = [
        VECTOR_WEIGHT * v + (1 - VECTOR_WEIGHT) * w for v, w in zip(vector, lexical, strict=True)
    ]
    return sorted(enumerate(fused), key=lambda p: (-p[1], p[0]))
