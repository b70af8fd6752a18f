"""Embed one corpus's chunk JSONL and swap it into the LanceDB store (DESIGN §2, §8).

Embedding is the slow stage, so it is made cheap to repeat: vectors are cached per
(model id, content hash) in the store's own ``embed_cache`` table, flushed after every batch, so a
re-run embeds only text it has never seen and a ``kill -9`` loses at most the batch in flight.
Replacing a doc_type is one ``merge_insert`` commit: readers see the old corpus or the new one,
never a half-written or empty one. Indices are created on the empty table before any data lands,
so they exist in every version a reader can open.

    uv run embed_and_store.py trm_chunks.jsonl --doc-type trm --source-repo ../shared/corpus/trm-latex
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

# Read once, when lancedb loads: without it every hybrid query logs a deprecation warning about
# score columns a hybrid query cannot select. search.py sets the same for processes that load it first.
os.environ.setdefault("LANCEDB_LOG", "error")

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import FTS, Bitmap, BTree, LabelList
from tqdm import tqdm

from chip_vocab import DOC_TYPES, validate_doc_type
from chunk_format import PATH_SEPARATOR, REGISTER_CHUNK_HEAD, parse_register_block
from provenance import UNKNOWN, Provenance, source_provenance
from releases import split_source
from schema import (
    CHUNK_FIELDS,
    FACT_FIELDS,
    FACT_TYPES,
    ROW_FIELDS,
    WINDOWS_COLUMN,
    arrow_schema,
    content_hash,
    read_jsonl,
    validate_row,
)
from store import (
    DB_ENV_VAR,
    DEFAULT_DB_URI,
    MODEL_ID_KEY,
    TABLE_NAME,
    VECTOR_DIM_KEY,
    StoreError,
    resolve_db_uri,
    store_model_id,
    store_vector_dim,
)
from term_stats import has_term_stats, write_term_stats

T = TypeVar("T")

CACHE_TABLE_NAME = "embed_cache"
# A row's identity within the store: the same text at the same place of the same document, for the
# same chips and revisions (one TRM chapter file can be included by two chips' manuals: two rows).
ROW_KEY = ("doc_type", "file_path", "chunk_index", "content_hash", "chips", "revisions")
_ESP_IDF_ROW = (
    "regexp_replace(concat(doc_type, ':', source_version{extra}), '^(?:idf|src):{pattern}|^.*$', '{out}')"
)
RELEASE_MIGRATION = {
    "releases": "array_remove(make_array("
    + _ESP_IDF_ROW.format(extra="", pattern="v?([0-9]+)[.]([0-9]+)([.][0-9]+)?(-dev)?.*$", out=r"v\1.\2\4")
    + "), 'v.')",
    "release_sources": "array_remove(make_array("
    + _ESP_IDF_ROW.format(extra=", '@', source_commit", pattern="(.*)$", out=r"\1")
    + "), '')",
}
# Compared with the row's fields to tell an unchanged row: the same text may carry other vectors (its
# windows, or a lead-only vector, changed with this code), and then the row must be rewritten.
VECTORS_DIGEST = "vectors_digest"
# Texts per embedding call and per cache commit: a kill loses at most this much work (~3 s).
EMBED_BATCH = 32

# Corpora whose long chunks get a vector per window as well: guide prose, where the answer to a
# question often sits past the first 256 tokens the embedder reads. TRM register blocks get windows
# over their later fields (led by the register's name and summary: the low bits a question is about
# are listed last); TRM prose and header chunks are found by full-text and symbol search, and
# windowing them would cost ~65,000 more embeddings. Words per window (~230 tokens of ESP text) and
# the overlap between neighbours:
WINDOWED_DOC_TYPES = ("idf",)
WINDOW_WORDS = 100
WINDOW_OVERLAP = 20

# Indices the store always carries (name -> (column, config)); the search code relies on the names.
INDEXES: dict[str, tuple[str, Any]] = {
    # BM25 over the chunk text: English stemming, positions kept for phrase queries.
    "text_fts": ("text", FTS(with_position=True)),
    # One token per identifier, lower-cased, never stemmed or length-capped: exact symbol hits
    # whatever case the agent types.
    "symbol_refs_fts": (
        "symbol_refs",
        FTS(base_tokenizer="whitespace", stem=False, remove_stop_words=False, max_token_length=None),
    ),
    "symbol_refs_label": ("symbol_refs", LabelList()),
    "chips_label": ("chips", LabelList()),
    "revisions_label": ("revisions", LabelList()),
    "releases_label": ("releases", LabelList()),
    "release_chips_label": ("release_chips", LabelList()),
    "doc_type_bitmap": ("doc_type", Bitmap()),
    "file_path_btree": ("file_path", BTree()),
}


COMMIT_RETRIES = 5


def is_commit_conflict(error: Exception) -> bool:
    """Lance reports a concurrent writer's commit as a retryable RuntimeError."""
    return isinstance(error, RuntimeError) and "commit conflict" in str(error).lower()


def retry_on_conflict(operation: Callable[[], T], what: str) -> T:
    """Run a commit again when another writer (another doc_type's run) committed first.

    Safe because every commit here is idempotent: the replace carries the doc_type's whole content,
    and compaction only rewrites what is there.
    """
    for attempt in range(1, COMMIT_RETRIES + 1):
        try:
            return operation()
        except RuntimeError as error:
            if not is_commit_conflict(error) or attempt == COMMIT_RETRIES:
                raise
            print(
                f"note: {what} raced another writer; retrying ({attempt}/{COMMIT_RETRIES})", file=sys.stderr
            )
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def compact_best_effort(table: lancedb.table.Table, what: str) -> None:
    """Fold new rows into the indices and merge fragments; content is committed either way."""
    try:
        retry_on_conflict(table.optimize, what)
    except RuntimeError as error:
        if not is_commit_conflict(error):
            raise
        print(f"note: {what} skipped, other writers kept committing; the next run redoes it", file=sys.stderr)


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row's ROW_KEY values, hashable (list columns as tuples)."""
    return tuple(tuple(row[name]) if isinstance(row[name], list) else row[name] for name in ROW_KEY)


class InputError(Exception):
    """The chunk files or arguments are unusable; the message names the file, row and valid values."""


class DocumentEmbedder(Protocol):
    """The part of embedder.Embedder this stage needs."""

    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


# ---------------------------------------------------------------------------------------------
# Input


# Whole-peripheral register structs (``*_struct.h``, 8,900 rows of bitfield members) are found by the
# symbol and full-text legs; embedding all of each spent a quarter of the build on vectors that
# crowded capability answers out of the dense results. Their vector reads only the chunk's lead (the
# file path and the first union's comment), which pays for the windows above.
LEAD_ONLY_SUFFIX = "_struct.h"
LEAD_WORDS = 12


def embedding_texts(row: dict[str, Any]) -> list[str]:
    """The texts whose vectors stand for a row: what the row's own vector reads, then later windows."""
    text = row["text"]
    if row["doc_type"] == "src" and row["file_path"].endswith(LEAD_ONLY_SUFFIX):
        return [" ".join(text.split()[:LEAD_WORDS])]
    if row["doc_type"] in WINDOWED_DOC_TYPES:
        return [text, *window_texts(text)]
    # a chunk that is one TRM register block: its later fields get windows led by its name and
    # summary, and its excerpt keeps those lines (results.py)
    register = REGISTER_CHUNK_HEAD.match(text) if row["doc_type"] == "trm" else None
    if register is not None:
        # a register's later fields, each window led by the register's name and summary
        head = register.group("head")
        block = parse_register_block(text.partition("\n")[2])  # past the chapter heading
        heading = f"{head}\nSummary: {block['summary']}" if block.get("summary") else head
        return [text, *window_texts(text, heading=heading), *field_texts(head, block)]
    return [text]


def field_texts(head: str, block: dict[str, Any]) -> list[str]:
    """One text per described field of a register block (``head``: its chapter heading and
    "Register X" lines; ``block``: it parsed), led by its chapter, name and summary.

    A question about what one field does ("which bit configures the I2C controller as master or
    slave") is one sentence of a 20-field block: the block's own vector and its 100-word windows
    dilute that sentence with its neighbours', so the dense leg ranked a sibling register first.
    """
    head_lines = head.split("\n")
    lead = f"{head_lines[0].split(PATH_SEPARATOR)[0]} register {head_lines[-1].removeprefix('Register ')}"
    if block.get("summary"):
        lead += f": {block['summary']}"
    return [
        f"{lead}\nField {field['name']}: {field['description']}"
        for field in block["fields"]
        if field["description"] and field["name"] != "(reserved)"
    ]


def window_texts(text: str, heading: str | None = None) -> list[str]:
    """The later windows of a long chunk, each led by the chunk's heading line for context.

    The chunk's own vector covers its start; windows begin where that first read ends (about
    ``WINDOW_WORDS`` words in) and overlap their neighbours, so a sentence cut at one window's edge
    is whole in the next.
    """
    first, _, body = text.partition("\n")
    heading = heading or first
    words = body.split()
    step = WINDOW_WORDS - WINDOW_OVERLAP
    return [
        f"{heading}\n{' '.join(words[start : start + WINDOW_WORDS])}"
        for start in range(step, len(words) - WINDOW_OVERLAP, step)
    ]


def load_rows(paths: Iterable[Path], doc_type: str, provenance: Provenance) -> list[dict[str, Any]]:
    """Read and check every row; fill provenance from the source tree where the ingest left it unknown.

    A row whose commit is known but differs from the source tree's means the JSONL is stale or the
    wrong tree was named: that is an error, not something to paper over.
    """
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], str] = {}
    extra_fields: set[str] = set()
    for path in paths:
        if not path.is_file():
            raise InputError(f"chunk file not found: {path}")
        try:
            for number, row in enumerate(read_jsonl(path), 1):
                where = f"{path} row {number}"
                if not isinstance(row, dict):
                    raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
                extra_fields.update(set(row) - set(ROW_FIELDS))
                row = {name: row.get(name) for name in ROW_FIELDS if name in row or name in CHUNK_FIELDS}
                _check_row(row, where, doc_type, provenance)
                key = row_key(row)
                if key in seen:
                    raise InputError(
                        f"{where}: same {'/'.join(ROW_KEY)} as {seen[key]} "
                        f"({row['file_path']} #{row['chunk_index']} {row['chips']}); "
                        "the ingest emitted a duplicate chunk"
                    )
                seen[key] = where
                rows.append(row)
        except (ValueError, UnicodeDecodeError) as error:  # malformed JSON, named by read_jsonl
            raise InputError(str(error)) from error
    if extra_fields:
        print(
            f"note: ignoring fields not in the store schema: {', '.join(sorted(extra_fields))}",
            file=sys.stderr,
        )
    if not rows:
        raise InputError(
            f"no rows in {', '.join(map(str, paths))}; refusing to replace doc_type {doc_type!r} with nothing"
        )
    built_from = {split_source(s)[1] for row in rows for s in row["release_sources"]}
    if built_from and provenance.commit not in (UNKNOWN, *built_from):
        raise InputError(
            f"chunks made from commit {', '.join(sorted(built_from))} but --source-repo is at "
            f"{provenance.commit}; re-run the ingest or pass a tree of one of those releases"
        )
    return rows


def _check_row(row: dict[str, Any], where: str, doc_type: str, provenance: Provenance) -> None:
    if row["url"] is None:
        raise InputError(f"{where}: no url field: the chunk file predates upstream links; re-run its ingest")
    try:
        validate_row(row)
    except ValueError as error:
        raise InputError(f"{where}: {error}") from error
    if row["doc_type"] != doc_type:
        raise InputError(f"{where}: doc_type {row['doc_type']!r} but --doc-type is {doc_type!r}")
    if row["content_hash"] != content_hash(row["text"]):
        raise InputError(f"{where}: content_hash is not sha256 of the text (edited by hand?)")
    if row["source_commit"] == UNKNOWN:
        if provenance.commit == UNKNOWN:
            raise InputError(
                f"{where}: source_commit is unknown and --source-repo has no git commit or SOURCE.md "
                "'Commit:' pin; name the tree the chunks were made from"
            )
        row["source_version"], row["source_commit"] = provenance.version, provenance.commit
    elif row["releases"]:
        return  # each release's build is on the row; load_rows checks the tree against all of them
    elif provenance.commit not in (UNKNOWN, row["source_commit"]):
        raise InputError(
            f"{where}: chunk made from commit {row['source_commit']} but --source-repo is at "
            f"{provenance.commit}; re-run the ingest or pass the tree it read"
        )


# ---------------------------------------------------------------------------------------------
# Embedding cache


class EmbeddingCache:
    """Vectors keyed by (model id, content hash) in a LanceDB table next to ``chunks``.

    Each ``add`` is one LanceDB commit, so the cache holds whole batches only, whatever the moment
    the process dies. Vectors are variable-length lists so models of any width can share it.
    """

    schema = pa.schema(
        [
            pa.field("model_id", pa.string()),
            pa.field("content_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32())),
        ]
    )

    def __init__(self, db: lancedb.DBConnection, model_id: str, dimension: int) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self._table = db.create_table(CACHE_TABLE_NAME, schema=self.schema, exist_ok=True)

    def lookup(self, hashes: set[str]) -> dict[str, np.ndarray]:
        """Cached vectors for those of ``hashes`` this model has embedded before."""
        model = self.model_id.replace("'", "''")
        found = (
            self._table.search()
            .where(f"model_id = '{model}'")
            .select(["content_hash", "vector"])
            .limit(None)
            .to_arrow()
        )
        # Filtered and converted column-wise: the cache holds every corpus's vectors, and turning
        # them all into Python floats took seconds on each run.
        wanted = pc.and_(
            pc.is_in(found.column("content_hash"), value_set=pa.array(list(hashes), pa.string())),
            pc.equal(pc.list_value_length(found.column("vector")), self.dimension),
        )
        found = found.filter(wanted)
        matrix = found.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, self.dimension)
        return dict(zip(found.column("content_hash").to_pylist(), matrix, strict=True))

    def add(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        offsets = pa.array(np.arange(0, len(hashes) * self.dimension + 1, self.dimension, dtype=np.int32))
        batch = pa.table(
            {
                "model_id": pa.array([self.model_id] * len(hashes), pa.string()),
                "content_hash": pa.array(list(hashes), pa.string()),
                "vector": pa.ListArray.from_arrays(offsets, flat),
            },
            schema=self.schema,
        )
        self._table.add(batch)

    def compact(self) -> None:
        """Merge the per-batch fragments the embedding loop wrote."""
        compact_best_effort(self._table, "compacting the embedding cache")


def embed_missing(
    texts_by_hash: dict[str, str], embedder: DocumentEmbedder, cache: EmbeddingCache
) -> tuple[dict[str, np.ndarray], int, int]:
    """Vectors for every text, embedding only those the cache lacks: (vectors, embedded, cached)."""
    vectors = cache.lookup(set(texts_by_hash))
    cached = len(vectors)
    missing = [h for h in texts_by_hash if h not in vectors]
    # Longest first in tokens: neighbours then have the same truncated length and a batch pads
    # little (ordered by characters, 7.5% of a sample's tokens were padding; now 1.7%), and the ETA
    # starts pessimistic.
    tokens = embedder.count_tokens([texts_by_hash[h] for h in missing])
    todo = [h for _, h in sorted(zip(tokens, missing, strict=True), key=lambda pair: -pair[0])]
    with tqdm(total=len(todo), unit="chunk", desc="embedding", disable=not todo, file=sys.stderr) as bar:
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            embedded = np.asarray(
                embedder.embed_documents([texts_by_hash[h] for h in batch]), dtype=np.float32
            )
            if embedded.shape != (len(batch), embedder.dimension) or not np.isfinite(embedded).all():
                raise RuntimeError(
                    f"embedder {embedder.model_id} returned shape {embedded.shape} "
                    f"(expected {(len(batch), embedder.dimension)}) or non-finite values"
                )
            cache.add(batch, embedded)
            vectors.update(zip(batch, embedded, strict=True))
            bar.update(len(batch))
    return vectors, len(todo), cached


# ---------------------------------------------------------------------------------------------
# Store


def existing_table(
    db: lancedb.DBConnection, db_uri: str, model_id: str, dimension: int
) -> lancedb.table.Table | None:
    """The chunks table if there is one, refusing a store built with another model before any work."""
    try:
        table = db.open_table(TABLE_NAME)
    except ValueError:  # LanceDB's "Table 'chunks' was not found"
        return None
    built_with = store_model_id(table)
    if built_with != model_id or store_vector_dim(table) != dimension:
        raise StoreError(
            f"the store at {db_uri} was built with embedding model {built_with!r}, not {model_id!r}; "
            f"use --model {built_with} or build into another --db"
        )
    return table


def ensure_table(db: lancedb.DBConnection, db_uri: str, model_id: str, dimension: int) -> lancedb.table.Table:
    """The chunks table for this model, created empty with every index on first use.

    Called only once every vector exists, so a first build killed while embedding leaves no table
    (the server then says how to build one) rather than an empty one.
    """
    table = existing_table(db, db_uri, model_id, dimension)
    if table is None:
        metadata = {MODEL_ID_KEY: model_id.encode(), VECTOR_DIM_KEY: str(dimension).encode()}
        table = db.create_table(TABLE_NAME, schema=arrow_schema(dimension).with_metadata(metadata))
    if WINDOWS_COLUMN not in table.schema.names:
        # A store from before window vectors: every row's windows start as its own vector, in one
        # commit, so readers see the old table or the migrated one; the replace then adds windows.
        retry_on_conflict(
            lambda: table.add_columns({WINDOWS_COLUMN: "make_array(vector)"}), "adding the windows column"
        )
    if "url" not in table.schema.names:
        # A store from before upstream links: every row starts without one; the doc_type being
        # replaced gets its links now, the others when their chunks are next embedded
        retry_on_conflict(lambda: table.add_columns({"url": "''"}), "adding the url column")
    if "releases" not in table.schema.names:
        # A store from before the release axis (docs/releases.md): ESP-IDF rows get the series of their
        # source_version and that build, TRM rows none, in one commit. Lance's SQL has no CASE, so a
        # TRM row's value is computed to a marker that array_remove then drops.
        retry_on_conflict(lambda: table.add_columns(RELEASE_MIGRATION), "adding the release columns")
    if "release_chips" not in table.schema.names:
        # A store from before the (release, chip) builds: the column arrives empty in one commit and
        # each doc_type's replace fills its rows; the server refuses a store while any row lacks it
        # (the releases and chips it lists cannot say which chip each release was built for).
        retry_on_conflict(
            lambda: table.add_columns([pa.field("release_chips", pa.list_(pa.string()))]),
            "adding the release_chips column",
        )
    missing_facts = [name for name in FACT_FIELDS if name not in table.schema.names]
    if missing_facts:
        # A store from before the passage facts: the columns arrive empty in one commit, and each
        # doc_type's replace fills its rows; the server refuses a store while any row lacks them.
        retry_on_conflict(
            lambda: table.add_columns([pa.field(name, FACT_TYPES[name]) for name in missing_facts]),
            "adding the passage-fact columns",
        )
    existing = {index.name for index in table.list_indices()}
    for name, (column, config) in INDEXES.items():
        if name not in existing:  # only on an empty new table, or one whose creation was killed
            table.create_index(column, config=config, name=name)
    return table


def rows_table(
    rows: list[dict[str, Any]], vectors: np.ndarray, windows: list[np.ndarray], schema: pa.Schema
) -> pa.Table:
    """Columnar build (from_pylist over 10k x 384 Python floats is needlessly slow); ``windows``
    holds each row's window vectors, its own vector first."""
    dim = schema.field("vector").type.list_size
    columns = {
        name: pa.array([row[name] for row in rows], type=schema.field(name).type) for name in ROW_FIELDS
    }
    columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dim)
    flat = np.concatenate(windows) if windows else np.zeros((0, dim), np.float32)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in windows])]).astype(np.int32)
    inner = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel(), pa.float32()), dim)
    columns[WINDOWS_COLUMN] = pa.ListArray.from_arrays(pa.array(offsets), inner)
    # in the table's own column order: a migrated store has its added columns last
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def stored_rows(table: lancedb.table.Table, doc_type: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The doc_type's current rows (a digest of their vectors instead of the vectors), by row key."""
    current = (
        table.search()
        .where(f"doc_type = '{doc_type}'")
        .select([*ROW_FIELDS, WINDOWS_COLUMN])
        .limit(None)
        .to_arrow()
    )
    return {row_key(row): row for row in _with_vectors_digest(current)}


def _with_vectors_digest(table: pa.Table) -> list[dict[str, Any]]:
    """Rows' fields plus a digest of all their window vectors (byte-exact: vectors come from the cache)."""
    windows = table.column(WINDOWS_COLUMN).combine_chunks()
    counts = pc.list_value_length(windows).to_numpy(zero_copy_only=False)
    flat = np.ascontiguousarray(windows.flatten().flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    width = len(flat) // max(int(counts.sum()), 1)
    ends = np.cumsum(counts) * width
    digests = [
        hashlib.sha1(flat[end - count * width : end].tobytes()).hexdigest()
        for end, count in zip(ends, counts, strict=True)
    ]
    return table.select(list(ROW_FIELDS)).append_column(VECTORS_DIGEST, pa.array(digests)).to_pylist()


@dataclass(frozen=True)
class ReplaceResult:
    added: int
    removed: int
    updated: int
    unchanged: int
    wrote: bool


def replace_doc_type(table: lancedb.table.Table, doc_type: str, new: pa.Table) -> ReplaceResult:
    """Make ``new`` the doc_type's whole content in ONE commit; other doc_types are not touched.

    merge_insert on the row key inserts new rows, rewrites matched ones and deletes the doc_type's
    rows absent from ``new`` in a single transaction, and keeps the indices (new rows are searched
    unindexed until ``optimize`` folds them in). An unchanged corpus writes nothing.
    """
    if doc_type not in DOC_TYPES:  # the value is interpolated into a filter
        raise ValueError(f"unknown doc_type {doc_type!r}; valid doc_types: {', '.join(DOC_TYPES)}")
    before = stored_rows(table, doc_type)
    incoming = {row_key(row): row for row in _with_vectors_digest(new)}
    unchanged = sum(1 for key, row in incoming.items() if before.get(key) == row)
    added = sum(1 for key in incoming if key not in before)
    removed = sum(1 for key in before if key not in incoming)
    updated = len(incoming) - added - unchanged
    if not (added or removed or updated):
        return ReplaceResult(0, 0, 0, unchanged, wrote=False)
    retry_on_conflict(
        lambda: (
            table.merge_insert(list(ROW_KEY))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(f"doc_type = '{doc_type}'")
            .execute(new)
        ),
        f"replacing the {doc_type} rows",
    )
    stored = table.count_rows(f"doc_type = '{doc_type}'")
    if stored != len(incoming):
        raise StoreError(
            f"after the replace the store holds {stored} {doc_type} rows, expected {len(incoming)}"
        )
    compact_best_effort(table, "indexing and compacting the store")  # same content, new version
    return ReplaceResult(added, removed, updated, unchanged, wrote=True)


@dataclass(frozen=True)
class BuildSummary:
    doc_type: str
    rows: int
    embedded: int
    cached: int
    result: ReplaceResult
    seconds: float
    db_uri: str

    def line(self) -> str:
        r = self.result
        change = (
            f"+{r.added} -{r.removed} ~{r.updated} ={r.unchanged}"
            if r.wrote
            else "unchanged, nothing written"
        )
        return (
            f"embed_and_store: doc_type={self.doc_type} rows={self.rows} embedded={self.embedded} "
            f"cached={self.cached} ({change}) seconds={self.seconds:.1f} db={self.db_uri}"
        )


def build(
    paths: Sequence[Path],
    doc_type: str,
    source_repo: Path,
    db_uri: str,
    embedder_factory: Callable[[], DocumentEmbedder],
) -> BuildSummary:
    """Validate, embed what is new, and swap the doc_type's rows into the store."""
    started = time.monotonic()
    if not source_repo.exists():
        raise InputError(f"--source-repo {source_repo} does not exist")
    rows = load_rows(paths, doc_type, source_provenance(source_repo))
    embedder = embedder_factory()
    db = lancedb.connect(db_uri)
    existing_table(db, db_uri, embedder.model_id, embedder.dimension)  # fail before an hour of work
    cache = EmbeddingCache(db, embedder.model_id, embedder.dimension)
    texts_by_hash: dict[str, str] = {}
    window_hashes = []
    for row in rows:
        texts = embedding_texts(row)
        hashes = [content_hash(text) for text in texts]
        texts_by_hash.update(zip(hashes, texts, strict=True))
        window_hashes.append(hashes)
    vectors, embedded, cached = embed_missing(texts_by_hash, embedder, cache)
    if embedded:
        cache.compact()
    windows = [np.stack([vectors[h] for h in hashes]) for hashes in window_hashes]
    matrix = np.stack([window[0] for window in windows])
    table = ensure_table(db, db_uri, embedder.model_id, embedder.dimension)
    result = replace_doc_type(table, doc_type, rows_table(rows, matrix, windows, table.schema))
    if result.wrote or not has_term_stats(db):
        write_term_stats(db, table)
    return BuildSummary(doc_type, len(rows), embedded, cached, result, time.monotonic() - started, db_uri)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Embed chunk JSONL and replace one doc_type's rows in the LanceDB store.",
    )
    parser.add_argument("chunks", nargs="+", type=Path, help="chunk JSONL file(s) of one doc_type")
    parser.add_argument("--doc-type", required=True, help=f"one of: {', '.join(DOC_TYPES)}")
    parser.add_argument(
        "--source-repo",
        required=True,
        type=Path,
        help="the tree the chunks were made from; its git describe/commit (or SOURCE.md pin) fills "
        "rows whose source_commit is 'unknown'",
    )
    parser.add_argument("--db", help=f"LanceDB URI (default ${DB_ENV_VAR} or {DEFAULT_DB_URI})")
    parser.add_argument("--model", help="embedding model id (default: embedder.py's default)")
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    embedder_factory: Callable[[str | None], DocumentEmbedder] | None = None,
) -> int:
    """CLI entry; ``embedder_factory`` lets the crash tests substitute a cheap deterministic model."""
    args = parse_args(argv)
    try:
        doc_type = validate_doc_type(args.doc_type)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    usage_errors: tuple[type[Exception], ...] = (InputError, StoreError, ValueError)
    if embedder_factory is None:
        from embedder import EmbedderError, get_embedder

        embedder_factory = get_embedder
        usage_errors = (*usage_errors, EmbedderError)
    db_uri = resolve_db_uri(args.db)
    try:
        summary = build(args.chunks, doc_type, args.source_repo, db_uri, lambda: embedder_factory(args.model))
    except usage_errors as error:  # ValueError: an unknown --model, with the valid ids
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        if not is_commit_conflict(error):
            raise
        print(
            f"error: other writers kept committing to {db_uri} ({error}); re-run: the embedding cache "
            "keeps what was embedded",
            file=sys.stderr,
        )
        return 1
    print(summary.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
