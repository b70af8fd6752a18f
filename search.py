"""The retrieval engine behind the MCP server and the eval: input validation and orchestration.

A query runs the retrievers of ``retrievers.py`` (vector, full-text, exact symbol), which
``fusion.py`` combines by their scores and ranks; ``results.py`` shapes what the agent receives. Every
caller-supplied value is validated here (vocabulary, identifier charset, known file paths) before a
filter string is built: nothing a client sends reaches LanceDB's SQL unchecked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import fusion
from chip_vocab import (
    DOC_TYPES,
    chips,
    validate_chip,
    validate_doc_type,
    validate_revision,
)
from embedder import get_embedder, resolve_model_id
from follow_refs import section_rows
from lancedb_client import lancedb
from process_memory import trim
from query_analysis import QueryAnalysis, analyse, query_symbols
from releases import ReleaseChoice, ReleaseError, ReleaseIndex, chips_in, choose, holds, releases_of
from rerank import Ranker
from results import (
    FIRST_RESULT_SHARE,
    RESULT_TEXT_CHARS,
    docs_url,
    drop_repeated_refs,
    fold_chip_variants,
    format_result,
    round_robin,
    within_budget,
)
from retrievers import (
    CANDIDATE_POOL,
    RESULT_COLUMNS,
    Retrievers,
    definition_rank,
    matched_refs,
    meant_symbols,
)
from store import open_store, store_model_id
from term_stats import NO_STATS, TermStats, read_term_stats
from terms import query_terms

MODES = ("hybrid", "vector", "fts")
# The query's meant identifiers and the symbol retriever's (definition rank, row) hits for them.
Identifiers = tuple[list[str], list[tuple[tuple[int, int, int, int], dict[str, Any]]]]
MAX_K = 20
MAX_QUERY_CHARS = 2000
# The characters of text a caller may ask for per result (excerpt_chars); the default is the engine's.
MIN_EXCERPT_CHARS = 200
MAX_EXCERPT_CHARS = 4000
# Rows fetched to count a symbol's hits per corpus; totals at this cap are reported as lower bounds.
SYMBOL_COUNT_CAP = 5000
READ_DEFAULT_CHARS = 8000
READ_MAX_CHARS = 50000
INDEX_COLUMNS = [
    "file_path",
    "chunk_index",
    "doc_type",
    "chips",
    "revisions",
    "releases",
    "release_sources",
    "release_chips",
]
# The list columns the store index groups rows by, each joined into one string per row with a
# separator no chip, revision or release name holds.
_GROUPED_LISTS = ["chips", "revisions", "releases", "release_sources", "release_chips"]
_LIST_SEPARATOR = "\x1f"

# The pages that say what changed between releases (docs/en/migration-guides/...).
MIGRATION_GUIDES = "doc_type = 'idf' AND file_path LIKE 'migration-guides/%'"
# The project's ESP-IDF release series and where the scope read it, when a project states one.
ProjectRelease = tuple[str, str] | None

# A symbol as callers may send it: identifier characters, plus ``*`` as a wildcard.
SYMBOL_CHARSET = re.compile(r"[A-Za-z0-9_*]{1,128}")
FILE_PATH_CHARSET = re.compile(r"[A-Za-z0-9_./+\-]{1,300}")


class SearchInputError(ValueError):
    """Bad input from a caller; the message names the valid values."""


@dataclass(frozen=True)
class Filters:
    """Validated filter values; the only source of filter strings."""

    chip: str | None = None
    doc_type: str | None = None
    revision: str | None = None
    release: ReleaseChoice | None = None

    def where(self) -> str | None:
        """SQL predicate for LanceDB; built only from vocabulary-checked values."""
        # with a chip, the release clause keeps only the rows that release's build of that chip made
        release = self.release.where(self.chip) if self.release else None
        clauses = [release] if release else []
        if self.chip:
            clauses.append(f"array_has(chips, '{self.chip}')")
        if self.doc_type:
            clauses.append(f"doc_type = '{self.doc_type}'")
        if self.revision:
            # Content without a revision axis holds for every revision, so it stays.
            clauses.append(f"(cardinality(revisions) = 0 OR array_has(revisions, '{self.revision}'))")
        return " AND ".join(clauses) or None

    def as_dict(self) -> dict[str, str]:
        """The caller-facing filters; the release has its own envelope entry (ReleaseChoice)."""
        return {
            k: v
            for k, v in (("chip", self.chip), ("doc_type", self.doc_type), ("revision", self.revision))
            if v
        }

    @property
    def series(self) -> str | None:
        """The one ESP-IDF release this call answers from (None: every release, or not chosen)."""
        return self.release.series if self.release is not None else None

    def with_release(self, release: ReleaseChoice) -> Filters:
        return replace(self, release=release)


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


def validate_excerpt_chars(excerpt_chars: int | None) -> int | None:
    if excerpt_chars is None:
        return None
    if (
        isinstance(excerpt_chars, bool)
        or not isinstance(excerpt_chars, int)
        or not MIN_EXCERPT_CHARS <= excerpt_chars <= MAX_EXCERPT_CHARS
    ):
        raise SearchInputError(
            f"excerpt_chars must be an integer from {MIN_EXCERPT_CHARS} to {MAX_EXCERPT_CHARS}, "
            f"got {excerpt_chars!r}"
        )
    return excerpt_chars


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


@dataclass
class StoreIndex:
    """Per-row metadata read once at start-up: coverage for list_chips and the known file paths."""

    coverage: dict[str, Counter[str]] = field(default_factory=dict)
    doc_type_rows: Counter[str] = field(default_factory=Counter)
    revisions_seen: dict[str, set[str]] = field(default_factory=dict)
    file_chunks: dict[str, int] = field(default_factory=dict)
    releases: ReleaseIndex = field(default_factory=ReleaseIndex)
    rows: int = 0

    @classmethod
    def build(cls, table: Any) -> StoreIndex:
        """Counted per group of rows alike in corpus, chips, revisions and releases (a few hundred
        groups on the full store) instead of row by row: turning 50,000 rows into Python dicts cost
        ~2 s of every start and ~40 MiB of heap the allocator kept."""
        count = table.count_rows()
        meta = table.search().select(INDEX_COLUMNS).limit(max(count, 1)).to_arrow()
        index = cls(rows=count)
        keys = {name: pc.binary_join(meta[name], _LIST_SEPARATOR) for name in _GROUPED_LISTS}
        keyed = pa.table({"doc_type": meta["doc_type"], **keys, "row": np.arange(meta.num_rows)})
        groups = (
            keyed.group_by(["doc_type", *_GROUPED_LISTS], use_threads=False)
            .aggregate([("row", "min"), ("row", "count")])
            .sort_by("row_min")  # first-seen order, as a row-by-row pass would meet them
        )
        for group in groups.to_pylist():
            row = {name: _split_list(group[name]) for name in _GROUPED_LISTS}
            row["doc_type"] = doc_type = group["doc_type"]
            rows = group["row_count"]
            index.doc_type_rows[doc_type] += rows
            for chip in row["chips"]:
                index.coverage.setdefault(chip, Counter())[doc_type] += rows
                index.revisions_seen.setdefault(chip, set()).update(row["revisions"])
            index.releases.add_row(row, rows)
        last_chunks = meta.group_by("file_path", use_threads=False).aggregate([("chunk_index", "max")])
        index.file_chunks = dict(
            zip(last_chunks["file_path"].to_pylist(), last_chunks["chunk_index_max"].to_pylist(), strict=True)
        )
        return index


def _split_list(joined: str | None) -> list[str]:
    """A list cell back from its joined string (an empty or null list gives no items)."""
    return joined.split(_LIST_SEPARATOR) if joined else []


def open_engine(
    db_uri: str, *, demo_note: str | None = None, reuse: SearchEngine | None = None, rerank: bool = True
) -> SearchEngine:
    """Open the store and the model it was built with (raises StoreError when there is none).

    ``reuse``: the engine being replaced after a refresh; its loaded model serves the new table too
    when the store's model is the same, so a refresh does not load (and hold) a second model.
    ``rerank=False``: no ranker is loaded and candidates keep their fused order (``train_ranker.py``
    computes the features a ranker is trained on); the server always loads one, and stops without.
    """
    table = open_store(db_uri)
    model_id = resolve_model_id(store_model_id(table))
    if reuse is not None and getattr(reuse.embedder, "model_id", None) == model_id:
        embedder, ranker = reuse.embedder, reuse.ranker
    else:
        embedder, ranker = get_embedder(model_id), Ranker.load() if rerank else None
    stats = read_term_stats(lancedb.connect(db_uri))
    engine = SearchEngine(table, embedder, ranker=ranker, term_stats=stats, demo_note=demo_note)
    trim()  # the model's load and the index's column reads leave freed heap behind
    return engine


class SearchEngine:
    """Hybrid retrieval over one opened LanceDB table; model and table are loaded once."""

    def __init__(
        self,
        table: Any,
        embedder: Any,
        *,
        ranker: Ranker | None,
        term_stats: TermStats = NO_STATS,
        demo_note: str | None = None,
        result_chars: int = RESULT_TEXT_CHARS,
    ) -> None:
        self.table = table
        self.embedder = embedder
        self.ranker = ranker
        self.term_stats = term_stats
        self.demo_note = demo_note
        self.result_chars = result_chars  # the eval raises it to measure what shortening costs
        self.first_result_share = FIRST_RESULT_SHARE
        self.index = StoreIndex.build(table)
        self.retrievers = Retrievers(table)

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
        idf_version: str | None = None,
        project_release: ProjectRelease = None,
        excerpt_chars: int | None = None,
    ) -> dict[str, Any]:
        """Top-k passages for ``query`` within the filters, with which retrievers found each; each
        text shortened to ``excerpt_chars`` (default: the engine's ``result_chars``)."""
        query = validate_query(query)
        filters = validate_filters(chip, doc_type, revision)
        filters = filters.with_release(self.release_for(idf_version, filters.chip, project_release))
        k = validate_k(k)
        budget = validate_excerpt_chars(excerpt_chars)
        if mode not in MODES:
            raise SearchInputError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
        where = filters.where()
        identifiers = self.query_identifiers(query, where) if mode == "hybrid" else ([], [])
        symbols = identifiers[0]
        ranked = fold_chip_variants(
            self.rank(query, where, mode, doc_type=filters.doc_type, identifiers=identifiers)
        )
        terms = query_terms(query)
        results = drop_repeated_refs(
            [
                self._result(
                    row, filters.chip, symbols, terms, budget or self.excerpt_budget(rank), filters.series
                )
                for rank, row in enumerate(ranked[:k])
            ]
        )
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
        if not symbols:
            del payload["symbols_in_query"]  # named only when identifiers steered the ranking
        return self._envelope(payload, filters)

    def _empty_note(self, filters: Filters) -> str:
        """Explain an empty answer: usually the filters leave nothing of that corpus, and when the
        chip has none of it in the whole store, say why (no docs build or no manual upstream) and
        what it has. (A chip missing from the chosen release is refused before this, naming its
        releases.)"""
        in_scope = self.table.count_rows(filters.where()) if filters.where() else self.index.rows
        note = f"nothing matched; {in_scope} chunk(s) lie within the filters {filters.as_dict() or '(none)'}"
        if in_scope == 0 and filters.chip:
            note += self._chip_gap(filters.chip, filters.doc_type)
        return note + " — widen the filters (esp32_docs_list_chips shows coverage per chip and corpus)"

    def _chip_gap(self, chip_id: str, doc_type: str | None) -> str:
        """Why a chip has no rows of a corpus anywhere in the store, and which corpora it has; empty
        when it does have some (under other filters)."""
        coverage = self.index.coverage.get(chip_id, Counter())
        if coverage.get(doc_type) if doc_type else coverage.total():
            return ""
        chip = chips()[chip_id]
        if doc_type == "idf" and not chip.docs_built:
            built = ", ".join(c.id for c in chips().values() if c.docs_built)
            why = (
                f": ESP-IDF master builds no programming guide for {chip.name} (its docs targets: {built});"
                " the guide's chip-neutral text is found without the chip filter, but check each result's"
                f" chips: it was written for those, not for {chip.name}"
            )
        elif doc_type == "trm" and chip.trm_folder is None:
            why = (
                f": Espressif publishes no Technical Reference Manual for {chip.name};"
                " its register headers (src) describe its registers"
            )
        else:
            why = f": this store was built without {chip.name}'s {doc_type or 'documents'}"
        held = ", ".join(f"{doc} {coverage[doc]}" for doc in DOC_TYPES if coverage.get(doc))
        return why + (f"; {chip.name} has here: {held} chunk(s)" if held else "")

    def _more_note(self, candidates: int, k: int) -> str:
        if candidates <= k:
            return "no further candidates matched"
        capped = "at least " if candidates >= CANDIDATE_POOL else ""
        more = candidates - k
        return f"{capped}{more} more below; raise k (max {MAX_K}) or narrow with chip/doc_type/revision"

    def release_for(
        self, idf_version: str | None, chip: str | None, project_release: ProjectRelease = None
    ) -> ReleaseChoice:
        """The ESP-IDF release one call answers from (releases.choose); bad input names the valid ones."""
        if idf_version is not None and not isinstance(idf_version, str):
            raise SearchInputError(f"idf_version must be a string, got {type(idf_version).__name__}")
        series, source = project_release or (None, None)
        try:
            return choose(
                self.index.releases, idf_version or None, chip=chip, scope_series=series, scope_from=source
            )
        except ReleaseError as error:
            raise SearchInputError(str(error)) from error

    def rank(
        self,
        query: str,
        where: str | None,
        mode: str = "hybrid",
        *,
        doc_type: str | None = None,
        identifiers: Identifiers | None = None,
        observe: Callable[[str, list[dict[str, Any]]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Every candidate within ``where``, best first: one retriever alone, or all of them fused.

        ``doc_type`` is the caller's corpus filter, one of the reranker's features;
        ``identifiers``: ``query_identifiers`` already looked up by the caller (looked up here if not);
        ``observe``: called with each step's name ("fused", "reranked") and the order after it (the
        error analysis asks which step lowered an answer)."""
        if mode == "fts":
            return self._scored(self.retrievers.fts(query, where), "fts", "_score", lambda s: s)
        vector = self.retrievers.vector(self.embedder.embed_query(query), where)
        if mode == "vector":
            return self._scored(vector, "vector", "_distance", lambda d: 1.0 - d)
        analysis, pool = self.candidates(query, where, vector, identifiers)
        if observe:
            observe("fused", pool)
        ranked = self.ranker.rerank(analysis, pool, doc_type) if self.ranker else pool
        if observe:
            observe("reranked", ranked)
        return ranked

    def candidates(
        self,
        query: str,
        where: str | None,
        vector: list[dict[str, Any]] | None = None,
        identifiers: Identifiers | None = None,
    ) -> tuple[QueryAnalysis, list[dict[str, Any]]]:
        """The analysed query and the fused candidate pool the reranker orders (``train_ranker.py``
        computes its features from the same pool)."""
        analysis = analyse(query, self.term_stats)
        if vector is None:
            vector = self.retrievers.vector(self.embedder.embed_query(query), where)
        symbols, hits = identifiers or self.query_identifiers(query, where)
        fts = self.retrievers.fts(analysis.search_text, where)
        legs = [
            fusion.Leg("vector", vector, lambda row: 1.0 - row["_distance"], spread=True),
            fusion.Leg("fts", fts, lambda row: row["_score"]),
        ]
        return analysis, fusion.gather(legs, hits if symbols else [], CANDIDATE_POOL)

    def query_identifiers(self, query: str, where: str | None) -> Identifiers:
        """The identifiers the query means (``retrievers.meant_symbols``) and their symbol hits,
        looked up once: the ranking and the answer's ``symbols_in_query`` read the same ones."""
        symbols = query_symbols(query)
        hits = self.retrievers.symbol_hits(symbols, where) if symbols else []
        return meant_symbols(symbols, hits), hits

    @staticmethod
    def _scored(rows: list[dict[str, Any]], name: str, column: str, score: Any) -> list[dict[str, Any]]:
        """A single retriever's list as results: its own score, and its name as the only match."""
        for row in rows:
            row["matched_by"] = [name]
            row["score"] = float(score(row[column]))
        return rows

    # -- find_symbol ----------------------------------------------------------------------------

    def find_symbol(
        self,
        symbol: str,
        *,
        chip: str | None = None,
        doc_type: str | None = None,
        k: int = 10,
        idf_version: str | None = None,
        project_release: ProjectRelease = None,
        excerpt_chars: int | None = None,
    ) -> dict[str, Any]:
        """Exact (case-insensitive) symbol lookup, interleaved across corpora, with per-corpus totals,
        and in which ESP-IDF releases the symbol exists."""
        symbol = validate_symbol(symbol)
        unreleased = validate_filters(chip, doc_type, None)
        filters = unreleased.with_release(self.release_for(idf_version, unreleased.chip, project_release))
        k = validate_k(k)
        budget = validate_excerpt_chars(excerpt_chars) or self.result_chars
        rows = self.retrievers.symbols([symbol], filters.where(), SYMBOL_COUNT_CAP)
        per_corpus: dict[str, list[dict[str, Any]]] = {
            doc: [] for doc in ([filters.doc_type] if filters.doc_type else DOC_TYPES)
        }
        for row in rows:
            per_corpus[row["doc_type"]].append(row)
        for hits in per_corpus.values():
            hits.sort(key=lambda row: (definition_rank(row, [symbol]), row["file_path"], row["chunk_index"]))
        totals = {doc: len(hits) for doc, hits in per_corpus.items()}
        interleaved = round_robin(list(per_corpus.values()))[:k]
        results = []
        for row in interleaved:
            result = self._result(
                {**row, "matched_by": ["symbol"]},
                filters.chip,
                [symbol],
                budget=budget,
                series=filters.series,
            )
            result["matched_symbols"] = matched_refs(row["symbol_refs"], [symbol])
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
        payload.update(self._symbol_releases(symbol, unreleased))
        if not total:
            payload["note"] = self._symbol_miss_hint(symbol, filters)
        return self._envelope(payload, filters)

    def _symbol_releases(self, symbol: str, filters: Filters) -> dict[str, Any]:
        """How many chunks name the symbol in each held release (within the chip and doc_type), and,
        when some release lacks it, the migration-guide passages that name it."""
        held = self.index.releases
        series = [s for s in held.series if filters.chip is None or filters.chip in held.held[s].chips]
        if not series:
            return {}
        counts = {}
        for one in series:
            where = filters.with_release(ReleaseChoice(one, {}, held.releaseless_doc_types)).where()
            hits = self.retrievers.symbols([symbol], where, SYMBOL_COUNT_CAP)
            # TRM rows hold for every release; a migration guide naming it says it changed, not that it exists
            counts[one] = sum(
                1 for row in hits if row["releases"] and not row["file_path"].startswith("migration-guides/")
            )
        answer: dict[str, Any] = {"by_release": counts}
        if len(series) > 1 and any(counts.values()) and not all(counts.values()):
            guides = self.retrievers.symbols([symbol], MIGRATION_GUIDES, 5)
            answer["release_note"] = (
                f"{symbol} is named in {', '.join(s for s in series if counts[s])} but not in "
                f"{', '.join(s for s in series if not counts[s])}"
            )
            answer["migration_guides"] = [
                {**self._result({**row, "matched_by": ["symbol"]}, None, [symbol])} for row in guides
            ]
        return answer

    def _symbol_miss_hint(self, symbol: str, filters: Filters) -> str:
        """Say why nothing matched instead of returning a bare empty list."""
        scope = f" within {filters.as_dict()}" if filters.as_dict() else ""
        message = f"no chunk names the symbol {symbol!r}{scope}"
        if filters.as_dict():
            anywhere = len(self.retrievers.symbols([symbol], None, SYMBOL_COUNT_CAP))
            if anywhere:
                message += f"; {anywhere} chunk(s) name it without those filters"
        return message + "; try a wildcard (e.g. UART_*_REG) or esp32_docs_search for free text"

    # -- read ---------------------------------------------------------------------------------

    def read(
        self,
        file_path: str,
        chunk_index: int | None = None,
        *,
        section_path: str | None = None,
        before: int = 1,
        after: int = 1,
        max_chars: int = READ_DEFAULT_CHARS,
        whole_section: bool = False,
        chip: str | None = None,
        idf_version: str | None = None,
        project_release: ProjectRelease = None,
    ) -> dict[str, Any]:
        """The chunks around a hit (or its whole section) in document order, within a budget; with
        ``section_path`` (a doc_refs entry) instead of ``chunk_index``, that section."""
        path = self._validate_file_path(file_path)
        last = self.index.file_chunks[path]
        if (chunk_index is None) == (section_path is None):
            raise SearchInputError(
                "give chunk_index (from a result) or section_path (from a doc_refs entry), not both"
                if section_path is not None
                else "chunk_index is required (or section_path from a doc_refs entry)"
            )
        if section_path is not None and (
            not isinstance(section_path, str) or not 0 < len(section_path) <= 1000
        ):
            raise SearchInputError("section_path must be a non-empty string of at most 1000 characters")
        for name, value, top in (
            ("chunk_index", 0 if chunk_index is None else chunk_index, last),
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
        release = self.release_for(idf_version, filters.chip, project_release)
        where = f"file_path = '{_sql_quote(path)}'"
        if filters.where():
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
        section_window: list[dict[str, Any]] = []
        landed = None
        if section_path is not None:
            section_window, opened = section_rows(rows, section_path)
            if not section_window:
                scope = " and ".join(f"{k} {v}" for k, v in filters.as_dict().items() if v)
                heads = list(dict.fromkeys(r["section_path"] for r in rows))[:4]
                raise SearchInputError(
                    f"{path!r} has no section {section_path!r}"
                    + (f" for {scope}" if scope else "")
                    + (f"; its sections include {heads}" if heads else "")
                )
            chunk_index = section_window[0]["chunk_index"]
            if opened != section_path:  # say where the read landed, so a mistyped path is seen
                landed = f"{path!r} has no section {section_path!r}; this is the section that encloses it"
            section_path = opened
        anchors = [r for r in rows if r["chunk_index"] == chunk_index]
        chip = filters.chip
        if anchors and not idf_version and release.series and not holds(anchors[0], release.series, chip):
            # a hit from another release (found with idf_version=): read it in its own release
            own = releases_of(anchors[0], chip)[0]
            release = self.release_for(own, filters.chip)
            release.envelope["how"] = f"the chunk's own release ({own}): it is not in the default"
        filters = filters.with_release(release)
        rows = [r for r in rows if holds(r, release.series, chip)]
        if not anchors or not holds(anchors[0], release.series, chip):
            named = {**filters.as_dict(), "idf_version": release.series}
            scope = " and ".join(f"{key} {value}" for key, value in named.items() if value)
            what = f"section {section_path!r}" if section_path is not None else f"chunk {chunk_index}"
            raise SearchInputError(f"{path!r} has no {what}" + (f" for {scope}" if scope else ""))
        anchor = anchors[0]
        if section_window:
            held = {id(r) for r in section_window}
            window = [r for r in rows if id(r) in held]
        elif whole_section:
            section = anchor["section_path"]
            window = [
                r
                for r in rows
                if r["section_path"] == section or r["section_path"].startswith(section + " > ")
            ]
        else:
            window = [r for r in rows if chunk_index - before <= r["chunk_index"] <= chunk_index + after]
        picked, truncated = within_budget(window, anchor, max_chars)
        first, last_picked = picked[0]["chunk_index"], picked[-1]["chunk_index"]
        return self._envelope(
            {
                "file_path": path,
                "source_doc": anchor["source_doc"],
                "chunks": [
                    {
                        "chunk_index": r["chunk_index"],
                        "section_path": r["section_path"],
                        "chips": chips_in(r, release.series),
                        "revisions": r["revisions"],
                        "releases": releases_of(r, chip),
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
                "release_sources": anchor["release_sources"],
                "url": docs_url(anchor, filters.chip) or anchor["url"] or None,
                **({"note": landed} if landed else {}),
            },
            filters,
        )

    def _validate_file_path(self, file_path: str) -> str:
        if not isinstance(file_path, str) or not FILE_PATH_CHARSET.fullmatch(file_path):
            raise SearchInputError(
                f"file_path {file_path!r} is not a document path: copy file_path from a search result"
            )
        if file_path not in self.index.file_chunks:
            raise SearchInputError(
                f"the store holds no {file_path!r}: esp32_docs_read opens the pages, TRM chapters and "
                "SoC headers the store holds (file_path from a search or find_symbol result, or a "
                "doc_refs entry); a file_refs path it lacks is read at the url given with it"
            )
        return file_path

    # -- list_chips ---------------------------------------------------------------------------

    def list_chips(self) -> dict[str, Any]:
        """The chip vocabulary, each chip's rows per corpus, and its revisions."""
        series, held = self.index.releases.series, self.index.releases.held
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
                    "idf_releases_in_store": [s for s in series if chip_id in held[s].chips],
                    # the releases whose programming guide covers the chip (the others: headers only)
                    "idf_docs_releases": [s for s in series if chip_id in held[s].docs_chips],
                    "has_trm": chip.trm_folder is not None,
                }
            )
        return self._envelope(
            {
                "chips": listing,
                "doc_types": list(DOC_TYPES),
                "rows_by_doc_type": {doc: self.index.doc_type_rows.get(doc, 0) for doc in DOC_TYPES},
                "total_rows": self.index.rows,
                "idf_releases": [self.index.releases.held[s].as_dict() for s in self.index.releases.series],
                "idf_release_default": self.index.releases.default(None),
                "model": getattr(self.embedder, "model_id", None),
            }
        )

    # -- shared -------------------------------------------------------------------------------

    def excerpt_budget(self, rank: int) -> int:
        """The default excerpt of the result at 0-based ``rank``: the first result, the likeliest
        answer, gets ``first_result_share`` times the others' length, so an answer stays small
        without starving its best passage."""
        return self.result_chars * (self.first_result_share if rank == 0 else 1)

    def _result(
        self,
        row: dict[str, Any],
        chip: str | None,
        focus: list[str],
        terms: list[str] | None = None,
        budget: int | None = None,
        series: str | None = None,
    ) -> dict[str, Any]:
        return format_result(row, chip, focus, terms, budget or self.result_chars, series)

    def _envelope(self, payload: dict[str, Any], filters: Filters | None = None) -> dict[str, Any]:
        # the manuals and their rows hold for every release: a TRM-only answer names none
        if filters is not None and filters.release is not None and filters.doc_type != "trm":
            payload["release"] = filters.release.envelope
        if self.demo_note:
            payload["corpus_note"] = self.demo_note
        return payload


def _sql_quote(value: str) -> str:
    return value.replace("'", "''")
