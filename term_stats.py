"""How many rows of the store hold each word stem: the rarity weights of query analysis.

Written by the embed stage after every replace, over the whole table, into its own small table
(``term_stats``) beside the chunks, so a server reads it in one scan instead of tokenizing the
corpus at start, and a store served from object storage carries it along. Stems held by a single row
are left out (query analysis weighs an unknown stem as such a rare one): they are most of the
vocabulary and none of the signal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from terms import content_stems


@dataclass(frozen=True)
class TermStats:
    """Document frequencies of word stems in the store (``term_stats`` table): rarity weights."""

    rows: int
    frequencies: Mapping[str, int] = field(default_factory=dict)

    def idf(self, term_stem: str) -> float:
        """Smoothed inverse document frequency; a stem the store never holds weighs like one seen once."""
        count = self.frequencies.get(term_stem, 1)
        return math.log(1.0 + (self.rows - count + 0.5) / (count + 0.5))


NO_STATS = TermStats(rows=1)


TABLE_NAME = "term_stats"
ROWS_KEY = b"rows"
MIN_ROWS = 2
BATCH_ROWS = 4096


def count_stems(texts: Any) -> tuple[int, Counter[str]]:
    """(rows, stem -> rows holding it) over an iterable of texts."""
    frequencies: Counter[str] = Counter()
    rows = 0
    for text in texts:
        rows += 1
        frequencies.update(set(content_stems(text)))
    return rows, frequencies


def write_term_stats(db: Any, chunks: Any) -> int:
    """Recount every row of the ``chunks`` table and replace the stats table in one commit; the
    number of stems kept."""
    scanner = chunks.search().select(["text"]).limit(None).to_batches(BATCH_ROWS)
    rows, frequencies = count_stems(text for batch in scanner for text in batch.column("text").to_pylist())
    kept = sorted((term, count) for term, count in frequencies.items() if count >= MIN_ROWS)
    schema = pa.schema([("stem", pa.string()), ("rows", pa.int32())], metadata={ROWS_KEY: str(rows).encode()})
    data = pa.table({"stem": [term for term, _ in kept], "rows": [count for _, count in kept]}, schema=schema)
    db.create_table(TABLE_NAME, data, mode="overwrite")
    return len(kept)


def has_term_stats(db: Any) -> bool:
    """Whether the store holds the stats table (opening it is the one check every backend answers)."""
    try:
        db.open_table(TABLE_NAME)
    except (ValueError, FileNotFoundError):
        return False
    return True


def read_term_stats(db: Any) -> TermStats:
    """The store's stats (``embed_and_store.open_store`` has refused a store without them)."""
    table = db.open_table(TABLE_NAME)
    data = table.to_arrow()
    rows = int((table.schema.metadata or {}).get(ROWS_KEY, b"1"))
    return TermStats(
        rows=rows,
        frequencies=dict(zip(data.column("stem").to_pylist(), data.column("rows").to_pylist(), strict=True)),
    )
