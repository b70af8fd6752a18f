"""The retrieval engine behind the MCP server and the eval: hybrid search, exact symbols, reading.

Dense vectors miss exact identifiers and BM25 misses paraphrase, so a query runs three retrievers
(vector, LanceDB full-text, exact symbol match over ``symbol_refs``) and fuses them by reciprocal
rank. Every caller-supplied value is validated (vocabulary, identifier charset, known file paths)
before a filter string is built: nothing a client sends reaches LanceDB's SQL unchecked.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# LanceDB logs a deprecation warning on stderr for every hybrid sub-query (it projects a score
# column that a hybrid query cannot select); read before lancedb loads, so set it first.
os.environ.setdefault("LANCEDB_LOG", "error")

from lancedb.rerankers import RRFReranker

from chip_vocab import (
    DOC_TYPES,
    chips,
    validate_chip,
    validate_doc_type,
    validate_revision,
)
from embed_and_store import open_store, store_model_id
from embedder import get_embedder
from schema import CHUNK_FIELDS

MODES = ("hybrid", "vector", "fts")
MAX_K = 20
MAX_QUERY_CHARS = 2000
RRF_K = 60
# The symbol retriever ranks hits with a line defining the symbol in tiers (exact name before a
# parameterised or wildcard match); hits in one tier share a rank. With a small constant, one tier
# step (1/2 vs 1/3) outweighs anything vector and full-text can add together (at most 2/61), so a
# query that is just an identifier returns its definition first, and within a tier the vector +
# full-text fusion decides. Table rows and mere mentions are fused with the ordinary constant.
SYMBOL_RRF_K = 1
CANDIDATE_POOL = 40
SYMBOL_POOL = 200
# Rows fetched to count a symbol's hits per corpus; totals at this cap are reported as lower bounds.
SYMBOL_COUNT_CAP = 5000
# embed_and_store's whitespace-tokenised, lower-cased FTS index over symbol_refs: exact identifiers in
# a few milliseconds, where a regex scan of every row's symbols takes ~100 ms on the full store.
SYMBOL_FTS_COLUMN = "symbol_refs"
MAX_PLACEHOLDER_RUNS = 3
RESULT_TEXT_CHARS = 2400
READ_DEFAULT_CHARS = 8000
READ_MAX_CHARS = 50000
IDF_DOCS_URL = "https://docs.espressif.com/projects/esp-idf/en/latest/{chip}/{path}.html"

# Every chunk field an agent's result carries; refs to other docs/files and the hash stay in the store.
RESULT_COLUMNS = [f for f in CHUNK_FIELDS if f not in ("doc_refs", "file_refs", "content_hash")]
INDEX_COLUMNS = ["file_path", "chunk_index", "doc_type", "chips", "revisions", "section_path"]

# A symbol as callers may send it: identifier characters, plus ``*`` as a wildcard.
SYMBOL_CHARSET = re.compile(r"[A-Za-z0-9_*]{1,128}")
QUERY_TOKEN = re.compile(r"[A-Za-z0-9_*]+")
# Placeholders the manuals use for a register's index: AES_KEY_n_REG, DMA_CHx_..., so the digits
# of a concrete name (AES_KEY_3_REG) also match them.
INDEX_PLACEHOLDERS = ("n", "x", "m")
# A question about a register's address, offset, bits or fields wants the passage that defines the
# register (a TRM "Register X / Address:" block or a header card line), not the prose around it.
REGISTER_INTENT = re.compile(r"\b(?:registers?|address|offset|bits?|fields?|reset value)\b", re.IGNORECASE)
REGISTER_DEFINITION = re.compile(r"^Register \S+.*\nAddress:|^\w+_REG\b\S*\s*=", re.MULTILINE)
FILE_PATH_CHARSET = re.compile(r"[A-Za-z0-9_./+\-]{1,300}")


class SearchInputError(ValueError):
    """Bad input from a caller; the message names the valid values."""


@dataclass(frozen=True)
class Filters:
    """Validated filter values; the only source of filter strings."""

    chip: str | None = None
    doc_type: str | None = None
    revision: str | None = None

    def where(self) -> str | None:
        """SQL predicate for LanceDB; built only from vocabulary-checked values."""
        clauses = []
        if self.chip:
            clauses.append(f"array_has(chips, '{self.chip}')")
        if self.doc_type:
            clauses.append(f"doc_type = '{self.doc_type}'")
        if self.revision:
            # Content without a revision axis holds for every revision, so it stays.
            clauses.append(f"(cardinality(revisions) = 0 OR array_has(revisions, '{self.revision}'))")
        return " AND ".join(clauses) or None

    def as_dict(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("chip", self.chip), ("doc_type", self.doc_type), ("revision", self.revision))
            if v
        }


def validate_filters(chip: str | None, doc_type: str | None, revision: str | None) -> Filters:
    """Map each filter to its vocabulary value, or raise SearchInputError listing the valid ones."""
    try:
        chip_id = validate_chip(chip) if _given(chip) else None
        doc = validate_doc_type(doc_type.strip().lower()) if _given(doc_type) else None
        rev = validate_revision(revision, chip_id) if _given(revision) else None
    except ValueError as exc:
        raise SearchInputError(str(exc)) from exc
    return Filters(chip=chip_id, doc_type=doc, revision=rev)


def _given(value: str | None) -> bool:
    if value is not None and not isinstance(value, str):
        raise SearchInputError(f"filter values must be strings, got {type(value).__name__}")
    return bool(value)


def validate_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise SearchInputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return k


def validate_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise SearchInputError("query is empty: ask a question or give an identifier")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchInputError(
            f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}: ask a shorter question"
        )
    return query.strip()


def validate_symbol(symbol: str) -> str:
    """An identifier (letters, digits, underscore) with optional ``*`` wildcards."""
    if not isinstance(symbol, str) or not SYMBOL_CHARSET.fullmatch(symbol.strip()):
        raise SearchInputError(
            f"symbol {symbol!r} is not an identifier: use letters, digits and underscores "
            "(1-128 characters), with * as a wildcard, e.g. LEDC_CH*_CONF0_REG"
        )
    symbol = symbol.strip()
    if len(symbol.replace("*", "")) < 2:
        raise SearchInputError(f"symbol {symbol!r} is too vague: give at least two identifier characters")
    return symbol


def looks_like_identifier(token: str) -> bool:
    """Tokens an agent means as a symbol: snake/SCREAMING case, camelCase, or a wildcard pattern."""
    core = token.strip("*")
    if len(core) < 3 or core.isdigit() or ("*" in token and len(token.replace("*", "")) < 4):
        return False
    return "_" in core or "*" in token or bool(re.search(r"[a-z][A-Z]", core))


def query_symbols(query: str) -> list[str]:
    """The identifier-like tokens of a free-text query, in order, without duplicates."""
    found = [t for t in QUERY_TOKEN.findall(query) if looks_like_identifier(t)]
    return list(dict.fromkeys(t.strip("_") if t.strip("_") else t for t in found))[:8]


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


def _matched_refs(symbol_refs: list[str], symbols: list[str]) -> list[str]:
    patterns = [_symbol_regex(s) for s in symbols]
    return [ref for ref in symbol_refs if any(p.fullmatch(ref) for p in patterns)]


def definition_strength(text: str, ref: str) -> int:
    """2 where a line defines ``ref`` (register header, register field bullet, #define, card address,
    prototype, Kconfig heading, or the chunk's own section named after it, as a Kconfig option chunk's
    path ends in the option), 1 where a line starts with it (table row), 0 for a passing mention."""
    strong, weak = _definition_regexes(ref)
    if strong.search(text):
        return 2
    return 1 if weak.search(text) else 0


@functools.lru_cache(maxsize=4096)
def _definition_regexes(ref: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The defining-line alternatives as one regex, and the table-row one, compiled once per ref:
    every symbol hit is tested for every ref it matched."""
    name = re.escape(ref)
    strong = (
        rf"^\s*Register\s+{name}\b",
        rf"^\s*#define\s+{name}\b",
        rf"^\s*{name}\s*(?:\([^)]*\))?\s*=",
        rf"^\s*#+\s*{name}\s*$",
        rf"\A(?:[^\n]* > )?{name}[ \t]*$",
        rf"^\s*-\s+{name}\s+\[\d",
        rf"^\s*(?:[\w*]+\s+){{1,4}}\**{name}\s*\([^()]*\)\s*;?\s*$",
    )
    flags = re.IGNORECASE | re.MULTILINE
    weak = rf"^\s*(?:[-*]\s+)?{name}\b"
    return re.compile("|".join(f"(?:{p})" for p in strong), flags), re.compile(weak, flags)


def _definition_rank(row: dict[str, Any], symbols: list[str]) -> tuple[int, int, int, int]:
    """Sort key for symbol hits: the defining passage, then exact name, primary symbol, specificity."""
    matched = _matched_refs(row["symbol_refs"], symbols)
    wanted = {s.lower() for s in symbols}
    exact = any(ref.lower() in wanted for ref in matched)
    strength = max((definition_strength(row["text"], ref) for ref in matched), default=0)
    primary = bool(row["symbol_refs"]) and row["symbol_refs"][0] in matched
    return (-strength, not exact, not primary, len(row["symbol_refs"]))


def revision_scope(row_revisions: list[str], row_chips: list[str]) -> str | None:
    """A sentence on which silicon revisions a passage holds for (None without a revision axis)."""
    if not row_revisions:
        return None
    published = list(dict.fromkeys(r for c in row_chips if c in chips() for r in chips()[c].revisions))
    if all(r in row_revisions for r in published):
        return f"all published revisions ({', '.join(published)})"
    others = [r for r in published if r not in row_revisions]
    only = ", ".join(row_revisions)
    return (
        f"ONLY revision {only} — not documented this way for {', '.join(others)}; check your chip's revision"
    )


def docs_url(row: dict[str, Any], chip: str | None) -> str | None:
    """Public ESP-IDF docs page for an idf row, for the chip asked about when the row covers it."""
    if row["doc_type"] != "idf" or not row["chips"]:
        return None
    target = chip if chip in row["chips"] else row["chips"][0]
    return IDF_DOCS_URL.format(chip=target, path=row["file_path"])


# fmt: off
STOPWORDS = frozenset((
    "the", "and", "for", "how", "what", "which", "where", "does", "with", "from", "that", "this",
    "into", "are", "can", "its", "use", "set", "get", "there", "when", "who", "why", "will",
    "about", "register", "address",
))
# fmt: on


def query_terms(query: str) -> list[str]:
    """Content words of a query, used to place the excerpt window of a long chunk."""
    return [w for w in dict.fromkeys(re.findall(r"[a-z0-9_]{3,}", query.lower())) if w not in STOPWORDS]


def excerpt(
    text: str, focus: list[str], budget: int = RESULT_TEXT_CHARS, terms: list[str] | None = None
) -> tuple[str, bool]:
    """Shorten ``text`` to ``budget`` characters, keeping the heading line and the part that matters:
    the first line naming a focus symbol, else the line-aligned window holding most query terms."""
    if len(text) <= budget:
        return text, False
    heading = text.split("\n", 1)[0]
    room = max(budget - len(heading) - 4, 200)
    lowered = text.lower()
    positions = [p for p in (lowered.find(s.lower()) for s in focus) if p >= 0]
    if positions:
        start = text.rfind("\n", 0, min(positions)) + 1
    else:
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        start = max(starts, key=lambda p: (sum(t in lowered[p : p + room] for t in terms or ()), -p))
    if start + room <= budget:
        return text[:budget].rstrip() + " …", True
    return f"{heading}\n…\n{text[start : start + room].rstrip()} …", True


@dataclass
class StoreIndex:
    """Per-row metadata read once at start-up: coverage for list_chips and the known file paths."""

    coverage: dict[str, Counter[str]] = field(default_factory=dict)
    doc_type_rows: Counter[str] = field(default_factory=Counter)
    revisions_seen: dict[str, set[str]] = field(default_factory=dict)
    file_chunks: dict[str, int] = field(default_factory=dict)
    rows: int = 0

    @classmethod
    def build(cls, table: Any) -> StoreIndex:
        count = table.count_rows()
        meta = table.search().select(INDEX_COLUMNS).limit(max(count, 1)).to_arrow()
        index = cls(rows=count)
        for row in meta.to_pylist():
            index.doc_type_rows[row["doc_type"]] += 1
            for chip in row["chips"]:
                index.coverage.setdefault(chip, Counter())[row["doc_type"]] += 1
                index.revisions_seen.setdefault(chip, set()).update(row["revisions"])
            path = row["file_path"]
            index.file_chunks[path] = max(index.file_chunks.get(path, -1), row["chunk_index"])
        return index


def open_engine(db_uri: str, *, demo_note: str | None = None) -> SearchEngine:
    """Open the store and the model it was built with (raises StoreError when there is none)."""
    table = open_store(db_uri)
    return SearchEngine(table, get_embedder(store_model_id(table)), demo_note=demo_note)


def _candidates(builder: Any, where: str | None, score_column: str) -> list[dict[str, Any]]:
    """The candidate pool of one retriever within validated filters, with its score column."""
    builder = builder.select([*RESULT_COLUMNS, score_column]).with_row_id(True).limit(CANDIDATE_POOL)
    if where:
        builder = builder.where(where, prefilter=True)
    return builder.to_arrow().to_pylist()


class SearchEngine:
    """Hybrid retrieval over one opened LanceDB table; model and table are loaded once."""

    def __init__(
        self,
        table: Any,
        embedder: Any,
        *,
        demo_note: str | None = None,
        result_chars: int = RESULT_TEXT_CHARS,
    ) -> None:
        self.table = table
        self.embedder = embedder
        self.demo_note = demo_note
        self.result_chars = result_chars  # the eval raises it to measure what shortening costs
        self.index = StoreIndex.build(table)

    # -- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        doc_type: str | None = None,
        chip: str | None = None,
        revision: str | None = None,
        k: int = 5,
        mode: str = "hybrid",
    ) -> dict[str, Any]:
        """Top-k passages for ``query`` within the filters, with which retrievers found each."""
        query = validate_query(query)
        filters = validate_filters(chip, doc_type, revision)
        k = validate_k(k)
        if mode not in MODES:
            raise SearchInputError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
        where = filters.where()
        symbols = query_symbols(query) if mode == "hybrid" else []

        if mode == "fts":
            ranked = self._fts_only(query, where)
        elif mode == "vector":
            ranked = self._vector_only(query, where)
        else:
            ranked = self._hybrid(query, where)
        if symbols:
            ranked = self._fuse_symbols(ranked, self._symbol_hits(symbols, where))
        if mode == "hybrid" and REGISTER_INTENT.search(query):
            ranked = _fuse_register_definitions(ranked)

        terms = query_terms(query)
        results = [self._result(row, filters.chip, symbols, terms) for row in ranked[:k]]
        payload = {
            "query": query,
            "mode": mode,
            "filters": filters.as_dict(),
            "symbols_in_query": symbols,
            "results": results,
            "returned": len(results),
            "more_results": max(len(ranked) - k, 0),
            "note": self._more_note(len(ranked), k) if results else self._empty_note(filters),
        }
        return self._envelope(payload)

    def _empty_note(self, filters: Filters) -> str:
        """Explain an empty answer: usually the filters leave nothing of that corpus."""
        in_scope = self.table.count_rows(filters.where()) if filters.where() else self.index.rows
        return (
            f"nothing matched; {in_scope} chunk(s) lie within the filters {filters.as_dict() or '(none)'}"
            " — widen the filters (esp32_docs_list_chips shows coverage per chip and corpus)"
        )

    def _more_note(self, candidates: int, k: int) -> str:
        if candidates <= k:
            return "no further candidates matched"
        capped = "at least " if candidates >= CANDIDATE_POOL else ""
        return (
            f"{capped}{candidates - k} more candidates ranked below these; raise k (max {MAX_K}), "
            "narrow with chip/doc_type/revision, or read around a hit with esp32_docs_read"
        )

    def _hybrid(self, query: str, where: str | None) -> list[dict[str, Any]]:
        builder = (
            self.table.search(query_type="hybrid", fts_columns="text")
            .vector(self.embedder.embed_query(query))
            .text(query)
            .distance_type("cosine")
            .rerank(RRFReranker(K=RRF_K, return_score="all"))
            .select(RESULT_COLUMNS)
            .with_row_id(True)
            .limit(CANDIDATE_POOL)
        )
        if where:
            builder = builder.where(where, prefilter=True)
        rows = builder.to_arrow().to_pylist()
        for row in rows:
            row["matched_by"] = [
                name for name, col in (("vector", "_distance"), ("fts", "_score")) if row.get(col) is not None
            ]
            row["score"] = float(row["_relevance_score"])
        return rows

    def _vector_only(self, query: str, where: str | None) -> list[dict[str, Any]]:
        builder = self.table.search(self.embedder.embed_query(query), query_type="vector").distance_type(
            "cosine"
        )
        rows = _candidates(builder, where, "_distance")
        for row in rows:
            row["matched_by"] = ["vector"]
            row["score"] = 1.0 - float(row["_distance"])
        return rows

    def _fts_only(self, query: str, where: str | None) -> list[dict[str, Any]]:
        rows = _candidates(self.table.search(query, query_type="fts", fts_columns="text"), where, "_score")
        for row in rows:
            row["matched_by"] = ["fts"]
            row["score"] = float(row["_score"])
        return rows

    def _symbol_rows(self, symbols: list[str], where: str | None, limit: int) -> list[dict[str, Any]]:
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
            builder = (
                self.table.search(tokens, query_type="fts", fts_columns=SYMBOL_FTS_COLUMN)
                .select([*RESULT_COLUMNS, "_score"])
                .with_row_id(True)
                .limit(limit)
            )
            if where:
                builder = builder.where(where, prefilter=True)
            rows.update((row["_rowid"], row) for row in builder.to_arrow().to_pylist())
        if wildcards:
            predicate = _symbols_where(wildcards) + (f" AND {where}" if where else "")
            scan = self.table.search().where(predicate).select(RESULT_COLUMNS).with_row_id(True).limit(limit)
            rows.update((row["_rowid"], row) for row in scan.to_arrow().to_pylist())
        return [row for row in rows.values() if _matched_refs(row["symbol_refs"], symbols)]

    def _symbol_hits(
        self, symbols: list[str], where: str | None
    ) -> list[tuple[tuple[int, int, int, int], dict[str, Any]]]:
        """Rows whose symbol_refs match with their definition rank, definitions first (no embedding)."""
        hits = [
            (_definition_rank(row, symbols), row) for row in self._symbol_rows(symbols, where, SYMBOL_POOL)
        ]
        hits.sort(key=lambda hit: (hit[0], hit[1]["file_path"], hit[1]["chunk_index"]))
        return hits

    def _fuse_symbols(
        self, ranked: list[dict[str, Any]], hits: list[tuple[tuple[int, int, int, int], dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Add the symbol retriever's reciprocal-rank contribution to the vector + full-text fusion.

        Hits where a line defines the symbol are ranked by tier with a small constant, so they lead;
        hits that only list or mention it (a module name like LCD_CAM in a question, a clock table
        row) count like any other retriever's list, so they never outrank what the question is about.
        """
        by_id = {row["_rowid"]: row for row in ranked}
        pool = hits[:CANDIDATE_POOL]
        tiers = sorted({rank[:2] for rank, _ in pool if rank[0] == -2})
        for position, (rank, hit) in enumerate(pool, 1):
            if rank[0] == -2:
                contribution = 1.0 / (SYMBOL_RRF_K + tiers.index(rank[:2]) + 1)
            else:
                contribution = 1.0 / (RRF_K + position)
            row = by_id.setdefault(hit["_rowid"], {**hit, "matched_by": [], "score": 0.0})
            row["score"] += contribution
            row["matched_by"].append("symbol")
        return sorted(by_id.values(), key=lambda row: -row["score"])

    # -- find_symbol ----------------------------------------------------------------------------

    def find_symbol(
        self, symbol: str, *, chip: str | None = None, doc_type: str | None = None, k: int = 10
    ) -> dict[str, Any]:
        """Exact (case-insensitive) symbol lookup, interleaved across corpora, with per-corpus totals."""
        symbol = validate_symbol(symbol)
        filters = validate_filters(chip, doc_type, None)
        k = validate_k(k)
        rows = self._symbol_rows([symbol], filters.where(), SYMBOL_COUNT_CAP)
        per_corpus: dict[str, list[dict[str, Any]]] = {
            doc: [] for doc in ([filters.doc_type] if filters.doc_type else DOC_TYPES)
        }
        for row in rows:
            per_corpus[row["doc_type"]].append(row)
        for hits in per_corpus.values():
            hits.sort(key=lambda row: (_definition_rank(row, [symbol]), row["file_path"], row["chunk_index"]))
        totals = {doc: len(hits) for doc, hits in per_corpus.items()}
        interleaved = _round_robin(list(per_corpus.values()))[:k]
        results = []
        for row in interleaved:
            result = self._result({**row, "matched_by": ["symbol"], "score": None}, filters.chip, [symbol])
            result["matched_symbols"] = _matched_refs(row["symbol_refs"], [symbol])
            results.append(result)
        total = sum(totals.values())
        payload = {
            "symbol": symbol,
            "filters": filters.as_dict(),
            "results": results,
            "returned": len(results),
            "totals_by_doc_type": totals,
            "totals_are_lower_bounds": len(rows) >= SYMBOL_COUNT_CAP,
            "more_results": max(total - len(results), 0),
        }
        if not total:
            payload["note"] = self._symbol_miss_hint(symbol, filters)
        return self._envelope(payload)

    def _symbol_miss_hint(self, symbol: str, filters: Filters) -> str:
        """Say why nothing matched instead of returning a bare empty list."""
        scope = f" within {filters.as_dict()}" if filters.as_dict() else ""
        message = f"no chunk names the symbol {symbol!r}{scope}"
        if filters.as_dict():
            anywhere = len(self._symbol_rows([symbol], None, SYMBOL_COUNT_CAP))
            if anywhere:
                message += f"; {anywhere} chunk(s) name it without those filters"
        return message + "; try a wildcard (e.g. UART_*_REG) or esp32_docs_search for free text"

    # -- read ---------------------------------------------------------------------------------

    def read(
        self,
        file_path: str,
        chunk_index: int,
        *,
        before: int = 1,
        after: int = 1,
        max_chars: int = READ_DEFAULT_CHARS,
        whole_section: bool = False,
        chip: str | None = None,
    ) -> dict[str, Any]:
        """The chunks around a hit (or its whole section) in document order, within a budget."""
        path = self._validate_file_path(file_path)
        last = self.index.file_chunks[path]
        for name, value, top in (
            ("chunk_index", chunk_index, last),
            ("before", before, 50),
            ("after", after, 50),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise SearchInputError(
                    f"{name} must be an integer from 0 to {top} for {path!r}, got {value!r}"
                )
        if (
            isinstance(max_chars, bool)
            or not isinstance(max_chars, int)
            or not 500 <= max_chars <= READ_MAX_CHARS
        ):
            raise SearchInputError(
                f"max_chars must be an integer from 500 to {READ_MAX_CHARS}, got {max_chars!r}"
            )
        filters = validate_filters(chip, None, None)
        where = f"file_path = '{_sql_quote(path)}'"
        if filters.chip:
            where += f" AND {filters.where()}"
        rows = (
            self.table.search()
            .where(where)
            .select(RESULT_COLUMNS)
            .limit(last + 1 + 64)
            .to_arrow()
            .to_pylist()
        )
        rows.sort(key=lambda row: (row["chunk_index"], row["chips"]))
        anchors = [r for r in rows if r["chunk_index"] == chunk_index]
        if not anchors:
            raise SearchInputError(
                f"{path!r} has no chunk {chunk_index}" + (f" for chip {filters.chip}" if chip else "")
            )
        anchor = anchors[0]
        if whole_section:
            section = anchor["section_path"]
            window = [
                r
                for r in rows
                if r["section_path"] == section or r["section_path"].startswith(section + " > ")
            ]
        else:
            window = [r for r in rows if chunk_index - before <= r["chunk_index"] <= chunk_index + after]
        picked, truncated = _within_budget(window, anchor, max_chars)
        first, last_picked = picked[0]["chunk_index"], picked[-1]["chunk_index"]
        return self._envelope(
            {
                "file_path": path,
                "source_doc": anchor["source_doc"],
                "chunks": [
                    {
                        "chunk_index": r["chunk_index"],
                        "section_path": r["section_path"],
                        "chips": r["chips"],
                        "revisions": r["revisions"],
                        "text": r["text"],
                    }
                    for r in picked
                ],
                "more_before": first > 0,
                "more_after": last_picked < last,
                "chunks_in_file": last + 1,
                "truncated_by_budget": truncated,
                "source_version": anchor["source_version"],
                "source_commit": anchor["source_commit"],
                "url": docs_url(anchor, filters.chip),
            }
        )

    def _validate_file_path(self, file_path: str) -> str:
        if not isinstance(file_path, str) or not FILE_PATH_CHARSET.fullmatch(file_path):
            raise SearchInputError(
                f"file_path {file_path!r} is not a document path: copy file_path from a search result"
            )
        if file_path not in self.index.file_chunks:
            raise SearchInputError(
                f"unknown file_path {file_path!r}: copy file_path from a search or find_symbol result"
            )
        return file_path

    # -- list_chips ---------------------------------------------------------------------------

    def list_chips(self) -> dict[str, Any]:
        """The chip vocabulary, each chip's rows per corpus, and its revisions."""
        listing = []
        for chip_id, chip in chips().items():
            coverage = self.index.coverage.get(chip_id, Counter())
            listing.append(
                {
                    "chip": chip_id,
                    "name": chip.name,
                    "revisions": list(chip.revisions),
                    "revisions_in_store": sorted(self.index.revisions_seen.get(chip_id, set())),
                    "rows_by_doc_type": {doc: coverage.get(doc, 0) for doc in DOC_TYPES},
                    "idf_docs_built": chip.docs_built,
                    "has_trm": chip.trm_folder is not None,
                }
            )
        return self._envelope(
            {
                "chips": listing,
                "doc_types": list(DOC_TYPES),
                "rows_by_doc_type": {doc: self.index.doc_type_rows.get(doc, 0) for doc in DOC_TYPES},
                "total_rows": self.index.rows,
                "model": getattr(self.embedder, "model_id", None),
            }
        )

    # -- shared -------------------------------------------------------------------------------

    def _result(
        self, row: dict[str, Any], chip: str | None, focus: list[str], terms: list[str] | None = None
    ) -> dict[str, Any]:
        text, truncated = excerpt(row["text"], focus, self.result_chars, terms)
        return {
            "text": text,
            "text_truncated": truncated,
            "doc_type": row["doc_type"],
            "chips": row["chips"],
            "revisions": row["revisions"],
            "revision_scope": revision_scope(row["revisions"], row["chips"]),
            "source_doc": row["source_doc"],
            "section_path": row["section_path"],
            "file_path": row["file_path"],
            "chunk_index": row["chunk_index"],
            "source_version": row["source_version"],
            "source_commit": row["source_commit"],
            "score": None if row["score"] is None else round(row["score"], 5),
            "matched_by": row["matched_by"],
            "symbol_refs": row["symbol_refs"][:24],
            "url": docs_url(row, chip),
        }

    def _envelope(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.demo_note:
            payload["corpus_note"] = self.demo_note
        return payload


def _fuse_register_definitions(ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One more reciprocal-rank vote, for passages that define registers, in their fused order.

    Used when the question asks for a register, address, offset, bit or field: it lifts the register
    block above the functional description that talks about the same peripheral (on the dev queries'
    TRM cases hit@1 rose from 0.34 to 0.53), keeping the fused order among register blocks.
    """
    defining = [row for row in ranked if REGISTER_DEFINITION.search(row["text"])]
    for position, row in enumerate(defining, 1):
        row["score"] += 1.0 / (RRF_K + position)
    return sorted(ranked, key=lambda row: -row["score"])


def _round_robin(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Take one from each corpus in turn, so no corpus crowds the others out."""
    out: list[dict[str, Any]] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def _within_budget(
    window: list[dict[str, Any]], anchor: dict[str, Any], max_chars: int
) -> tuple[list[dict[str, Any]], bool]:
    """Grow outward from the anchor chunk, alternating after/before, until the budget is spent."""
    position = window.index(anchor)
    picked = [anchor]
    used = len(anchor["text"])
    lo, hi = position - 1, position + 1
    while lo >= 0 or hi < len(window):
        for side in ("after", "before"):
            if side == "after" and hi < len(window):
                candidate, hi = window[hi], hi + 1
            elif side == "before" and lo >= 0:
                candidate, lo = window[lo], lo - 1
            else:
                continue
            if used + len(candidate["text"]) > max_chars:
                return sorted(picked, key=lambda r: r["chunk_index"]), True
            picked.append(candidate)
            used += len(candidate["text"])
    return sorted(picked, key=lambda r: r["chunk_index"]), False


def _sql_quote(value: str) -> str:
    return value.replace("'", "''")
