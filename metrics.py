"""Retrieval figures with their uncertainty: hit@k and MRR@10 over a set of answer ranks, each with a
95% bootstrap confidence interval, so that a difference between two runs is read against the spread
a set of that size gives on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEPTH = 10
BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


def reciprocal_ranks(ranks: Sequence[int | None], depth: int = DEPTH) -> np.ndarray:
    return np.array([1.0 / rank if rank is not None and rank <= depth else 0.0 for rank in ranks])


def hits(ranks: Sequence[int | None], k: int) -> np.ndarray:
    return np.array([1.0 if rank is not None and rank <= k else 0.0 for rank in ranks])


@dataclass(frozen=True)
class Figure:
    """A mean and its confidence interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"


def bootstrap(values: np.ndarray, seed: int = 0) -> Figure:
    """The mean of per-question values with a percentile bootstrap interval over the questions."""
    if not len(values):
        return Figure(0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(BOOTSTRAP_SAMPLES, len(values)), replace=True).mean(axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Figure(float(values.mean()), float(low), float(high))


@dataclass(frozen=True)
class Report:
    """hit@1, hit@5, hit@10 and MRR@10 of one set of questions, each with its interval."""

    n: int
    hit1: Figure
    hit5: Figure
    hit10: Figure
    mrr: Figure

    @classmethod
    def of(cls, ranks: Sequence[int | None]) -> Report:
        return cls(
            n=len(ranks),
            hit1=bootstrap(hits(ranks, 1)),
            hit5=bootstrap(hits(ranks, 5)),
            hit10=bootstrap(hits(ranks, 10)),
            mrr=bootstrap(reciprocal_ranks(ranks)),
        )

    def line(self, name: str) -> str:
        return (
            f"{name:<24} n={self.n:<4} hit@1 {self.hit1}  hit@5 {self.hit5}  "
            f"hit@10 {self.hit10}  MRR@10 {self.mrr}"
        )
