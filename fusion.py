"""Fuse: the retrievers' lists become one candidate pool for the reranker.

Every candidate keeps where each leg ranked it and how strongly, read relative to that leg's own list
(cosine similarity spread between the list's best and worst, BM25 over its best, the symbol leg's
definition tier), so no calibration across retrievers is needed: the reranker learns what each is
worth. The pool's order before reranking is plain reciprocal-rank fusion, which the ``vector`` /
``fts`` modes and a store served without a ranker never see either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RRF_K = 60
LEGS = ("vector", "fts", "symbol")
# A leg's rank for a candidate it did not return: just past the deepest list.
ABSENT_RANK = 201
# The symbol leg's definition rank opens with minus the strength: -2 where a line defines the symbol.
DEFINES = -2

RankedList = list[dict[str, Any]]
SymbolHits = list[tuple[tuple[int, int, int, int], dict[str, Any]]]


@dataclass(frozen=True)
class Leg:
    """One retriever's list, best first, how to read a row's score, and whether to read it spread
    between the list's worst (0) and best (1) rather than over its best alone: MiniLM's cosine
    similarities sit in a narrow band, where over the best alone the top hardly differs from the tail.
    """

    name: str
    rows: RankedList
    relevance: Callable[[dict[str, Any]], float]
    spread: bool = False


def by_score(ranked: RankedList) -> RankedList:
    """Best first; Python's sort is stable, so equal scores keep their order."""
    return sorted(ranked, key=lambda row: -row["score"])


def gather(legs: list[Leg], symbol_hits: SymbolHits, symbol_pool: int) -> RankedList:
    """One entry per distinct row, in reciprocal-rank-fused order.

    Each entry carries ``legs``: leg name -> (rank, normalised score, raw score), ``symbol_tier``:
    0 for a hit whose passage defines the symbol in the best tier, 1 for the next tier, ... and
    ``ABSENT_RANK`` for a row that merely mentions it or was not a hit; ``matched_by`` names the legs
    that found it, and ``score`` is its fused score.
    """
    pool: dict[int, dict[str, Any]] = {}

    def entry(row: dict[str, Any]) -> dict[str, Any]:
        return pool.setdefault(
            row["_rowid"], {**row, "legs": {}, "matched_by": [], "score": 0.0, "symbol_tier": ABSENT_RANK}
        )

    for leg in legs:
        # Rows of equal relevance (one section's identical per-chip copies) come back from LanceDB in
        # no fixed order; ranking them by row id keeps one question's answer the same on every call.
        scored = sorted(
            ((row, leg.relevance(row)) for row in leg.rows), key=lambda p: (-p[1], p[0]["_rowid"])
        )
        scores = [score for _, score in scored]
        best = max(scores, default=0.0)
        floor = min(scores, default=0.0) if leg.spread else 0.0
        for rank, (row, score) in enumerate(scored, 1):
            share = (max(score - floor, 0.0) / (best - floor)) if best > floor else 1.0
            candidate = entry(row)
            candidate["legs"][leg.name] = (rank, share, score)
            candidate["matched_by"].append(leg.name)
            candidate["score"] += 1.0 / (RRF_K + rank)
    hits = symbol_hits[:symbol_pool]
    tiers = sorted({rank[:2] for rank, _ in hits if rank[0] == DEFINES})
    for rank, (definition, row) in enumerate(hits, 1):
        candidate = entry(row)
        candidate["legs"]["symbol"] = (rank, -definition[0], 0.0)
        candidate["matched_by"].append("symbol")
        candidate["score"] += 1.0 / (RRF_K + rank)
        if definition[0] == DEFINES:
            candidate["symbol_tier"] = min(candidate["symbol_tier"], tiers.index(definition[:2]))
    return by_score(list(pool.values()))
