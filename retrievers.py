"""The retrievers behind search: dense vector, full-text (BM25) and exact symbol match.

Each one returns its own ranked candidate list within a validated filter; ``fusion.py`` decides how
the lists combine. Dense vectors miss exact identifiers and BM25 misses paraphrase, which is why
there are several. The symbol helpers here also rank a symbol's hits by how strongly each passage
*defines* it (a register block or ``#define`` before a table row or a passing mention).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from typing import Any

# LanceDB logs a deprecation warning on stderr for every sub-query that projects a score column;
# read before lancedb loads, so set it first.
os.environ.setdefault("LANCEDB_LOG", "error")

from chunk_format import definition_regexes
from schema import CHUNK_FIELDS, FACT_FIELDS, WINDOWS_COLUMN

CANDIDATE_POOL = 40
SYMBOL_POOL = 200
# embed_and_store's whitespace-tokenised, lower-cased FTS index over symbol_refs: exact identifiers in
# a few milliseconds, where a regex scan of every row's symbols takes ~100 ms on the full store.
SYMBOL_FTS_COLUMN = "symbol_refs"
TEXT_FTS_COLUMN = "text"
MAX_PLACEHOLDER_RUNS = 3
# Placeholders the manuals use for a register's index: AES_KEY_n_REG, DMA_CHx_..., so the digits
# of a concrete name (AES_KEY_3_REG) also match them.
INDEX_PLACEHOLDERS = ("n", "x", "m")

# Every chunk field an agent's result is made from, and the passage facts the reranker reads; the
# content hash stays in the store.
RESULT_COLUMNS = [*(f for f in CHUNK_FIELDS if f != "content_hash"), *FACT_FIELDS]


# -- identifiers in a query ---------------------------------------------------------------------


def meant_symbols(symbols: list[str], hits: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """The query's identifier-like tokens an agent means as identifiers: a camelCase word that no
    symbol within the filters matches (``kHz``, ``FreeRTOS``, ``SoftAP``) is a unit or a name, and a
    question that says it is prose. snake_case and wildcard tokens stay without a hit (a misspelt
    register is still asked for by name)."""
    return [
        symbol
        for symbol in symbols
        if "_" in symbol
        or "*" in symbol
        or any(matched_refs(row["symbol_refs"], [symbol]) for _, row in hits)
    ]


def symbol_pattern(symbol: str) -> str:
    """Regex (lower case, identifier chars only) matching one symbol_refs entry for ``symbol``.

    ``*`` matches any identifier characters; every run of digits also matches the manuals' index
    placeholders, so AES_KEY_3_REG finds AES_KEY_n_REG.
    """
    parts = []
    for piece in re.split(r"(\d+|\*)", symbol.lower()):
        if not piece:
            continue
        if piece == "*":
            parts.append("[a-z0-9_]*")
        elif piece.isdigit():
            parts.append("(?:" + "|".join((piece, *INDEX_PLACEHOLDERS)) + ")")
        else:
            parts.append(re.escape(piece))
    return "".join(parts)


def symbol_variants(symbol: str) -> list[str]:
    """Lower-case exact tokens ``symbol`` may be stored as: itself, and each digit run as a placeholder."""
    pieces = re.split(r"(\d+)", symbol.lower())
    variants = [""]
    runs = 0
    for piece in pieces:
        if piece.isdigit() and runs < MAX_PLACEHOLDER_RUNS:
            runs += 1
            variants = [v + option for v in variants for option in (piece, *INDEX_PLACEHOLDERS)]
        else:
            variants = [v + piece for v in variants]
    return variants


def _symbols_where(symbols: Iterable[str]) -> str:
    """SQL predicate: any symbol_refs entry matches any of ``symbols`` (already charset-validated)."""
    alternatives = "|".join(symbol_pattern(s) for s in symbols)
    return f"regexp_like(array_to_string(symbol_refs, ' '), '(?i)(^| )({alternatives})( |$)')"


@functools.lru_cache(maxsize=1024)
def _symbol_regex(symbol: str) -> re.Pattern[str]:
    """``symbol_pattern`` compiled once per symbol: it is matched against every hit's refs."""
    return re.compile(symbol_pattern(symbol), re.IGNORECASE)


def matched_refs(symbol_refs: list[str], symbols: list[str]) -> list[str]:
    patterns = [_symbol_regex(s) for s in symbols]
    return [ref for ref in symbol_refs if any(p.fullmatch(ref) for p in patterns)]


# -- how strongly a passage defines a symbol ----------------------------------------------------


def definition_strength(text: str, ref: str) -> int:
    """2 where a line defines ``ref`` (register header, register field bullet, #define, card address,
    prototype, Kconfig heading, or the chunk's own section named after it, as a Kconfig option chunk's
    path ends in the option), 1 where a line starts with it (table row), 0 for a passing mention."""
    strong, weak = definition_regexes(ref)
    if strong.search(text):
        return 2
    return 1 if weak.search(text) else 0


def definition_rank(row: dict[str, Any], symbols: list[str]) -> tuple[int, int, int, int]:
    """Sort key for symbol hits: the defining passage, then exact name, primary symbol, specificity."""
    matched = matched_refs(row["symbol_refs"], symbols)
    wanted = {s.lower() for s in symbols}
    exact = any(ref.lower() in wanted for ref in matched)
    strength = max((definition_strength(row["text"], ref) for ref in matched), default=0)
    primary = bool(row["symbol_refs"]) and row["symbol_refs"][0] in matched
    return (-strength, not exact, not primary, len(row["symbol_refs"]))


# -- the retrievers -----------------------------------------------------------------------------


def _run(builder: Any, where: str | None, score_column: str, limit: int) -> list[dict[str, Any]]:
    """One retriever's candidates within the validated filter, with its score column."""
    builder = builder.select([*RESULT_COLUMNS, score_column]).with_row_id(True).limit(limit)
    if where:
        builder = builder.where(where, prefilter=True)
    return builder.to_arrow().to_pylist()


class Retrievers:
    """The three candidate generators over one opened LanceDB table."""

    def __init__(self, table: Any) -> None:
        self.table = table
        # Stores built before window vectors have only the chunk vector; they still answer.
        self.vector_column = WINDOWS_COLUMN if WINDOWS_COLUMN in table.schema.names else "vector"

    def vector(
        self, query_vector: Any, where: str | None, limit: int = CANDIDATE_POOL
    ) -> list[dict[str, Any]]:
        """Nearest chunks by cosine distance of the query embedding to a chunk's best window (the
        whole-chunk vector or a later window of a long chunk; flat scan, filter applied first)."""
        builder = self.table.search(
            query_vector, query_type="vector", vector_column_name=self.vector_column
        ).distance_type("cosine")
        return _run(builder, where, "_distance", limit)

    def fts(self, query: str, where: str | None, limit: int = CANDIDATE_POOL) -> list[dict[str, Any]]:
        """BM25 over the chunk text (English stemming)."""
        builder = self.table.search(query, query_type="fts", fts_columns=TEXT_FTS_COLUMN)
        return _run(builder, where, "_score", limit)

    def symbols(self, symbols: list[str], where: str | None, limit: int) -> list[dict[str, Any]]:
        """Rows with a symbol_refs entry matching any of ``symbols`` (charset-validated identifiers).

        Exact and parameterised names go through the symbol_refs FTS index (one OR query of every
        stored spelling); only ``*`` patterns need a regex scan. Each row is re-checked against the
        pattern, so a token that merely shares the index's spelling never counts as a hit.
        """
        rows: dict[int, dict[str, Any]] = {}
        exact = [s for s in symbols if "*" not in s]
        wildcards = [s for s in symbols if "*" in s]
        if exact:
            tokens = " ".join(dict.fromkeys(v for s in exact for v in symbol_variants(s)))
            builder = self.table.search(tokens, query_type="fts", fts_columns=SYMBOL_FTS_COLUMN)
            rows.update((row["_rowid"], row) for row in _run(builder, where, "_score", limit))
        if wildcards:
            predicate = _symbols_where(wildcards) + (f" AND {where}" if where else "")
            scan = self.table.search().where(predicate).select(RESULT_COLUMNS).with_row_id(True).limit(limit)
            rows.update((row["_rowid"], row) for row in scan.to_arrow().to_pylist())
        return [row for row in rows.values() if matched_refs(row["symbol_refs"], symbols)]

    def symbol_hits(
        self, symbols: list[str], where: str | None, limit: int = SYMBOL_POOL
    ) -> list[tuple[tuple[int, int, int, int], dict[str, Any]]]:
        """Rows whose symbol_refs match, with their definition rank, definitions first (no embedding)."""
        hits = [(definition_rank(row, symbols), row) for row in self.symbols(symbols, where, limit)]
        hits.sort(key=lambda hit: (hit[0], hit[1]["file_path"], hit[1]["chunk_index"]))
        return hits
