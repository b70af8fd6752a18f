"""Check a built store end to end, so a silently broken one fails loudly (DESIGN §9).

Counts alone hide loss, so besides rows per doc_type and chip this re-embeds a random sample of
chunks and searches the store with them: a chunk must find itself (or a chunk with identical text)
at rank 1, which catches vectors shuffled against their rows, a wrong model, or stale vectors. The
full-text indices are exercised the same way, by each sampled chunk's own symbols and words.

    uv run validate_store.py [--db URI] [--sample 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from embed_and_store import INDEXES, ROW_KEY, embedding_texts, row_key
from provenance import UNKNOWN
from schema import ROW_FIELDS, WINDOWS_COLUMN, content_hash, validate_row
from store import (
    DB_ENV_VAR,
    DEFAULT_DB_URI,
    StoreError,
    open_store,
    resolve_db_uri,
    store_model_id,
    store_vector_dim,
)

VECTOR_ROUND_TRIP_MIN = 0.95  # share of sampled chunks whose own text finds them at rank 1
FTS_ROUND_TRIP_MIN = 0.95  # share found in the top 10 by their own symbol / their own words
# A stored vector must be the embedding of its row's text; re-embedding differs only by float noise.
MIN_SELF_COSINE = 0.98
# Cosine-distance slack under which another chunk's vector counts as the same as the chunk's own.
TIE_TOLERANCE = 1e-5
FTS_QUERY_WORDS = 30


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    checks: int = 0

    def check(self, ok: bool, message: str) -> None:
        """Print one check's outcome; a failed one also makes the exit status non-zero."""
        self.checks += 1
        print(f"  [{'ok' if ok else 'FAIL'}] {message}")
        if not ok:
            self.failures.append(message)


def check_rows(rows: list[dict[str, Any]], vectors: np.ndarray, report: Report) -> None:
    """Every row still satisfies the data model, its hash, its provenance and a unit-length vector."""
    invalid: list[str] = []
    for row in rows:
        try:
            validate_row(row)
        except ValueError as error:
            invalid.append(f"{row['file_path']} #{row['chunk_index']}: {error}")
    report.check(not invalid, f"rows satisfy schema.validate_row ({len(invalid)} invalid){_first(invalid)}")
    bad_hash = [r["file_path"] for r in rows if r["content_hash"] != content_hash(r["text"])]
    report.check(not bad_hash, f"content_hash is sha256(text) on every row ({len(bad_hash)} wrong)")
    unknown = sum(1 for r in rows if r["source_commit"] == UNKNOWN)
    report.check(unknown == 0, f"every row names its source commit ({unknown} unknown)")
    releaseless = sum(1 for r in rows if r["doc_type"] != "trm" and not r["releases"])
    report.check(releaseless == 0, f"every ESP-IDF row names its release ({releaseless} do not)")
    builds: dict[str, set[str]] = {}
    for row in rows:
        for series, source in zip(row["releases"], row["release_sources"], strict=False):
            builds.setdefault(series, set()).add(source)
    mixed = sorted(series for series, sources in builds.items() if len(sources) > 1)
    report.check(not mixed, f"one build per ESP-IDF release ({', '.join(mixed) or 'none'} mixed)")
    keys = Counter(row_key(r) for r in rows)
    duplicates = sum(count - 1 for count in keys.values() if count > 1)
    report.check(duplicates == 0, f"row keys {'/'.join(ROW_KEY)} are unique ({duplicates} duplicates)")
    norms = np.linalg.norm(vectors, axis=1) if len(vectors) else np.ones(0)
    off = int(np.sum(~np.isfinite(norms) | (np.abs(norms - 1.0) > 1e-3)))
    report.check(off == 0, f"vectors are finite and L2-normalised ({off} are not)")


def _first(items: Sequence[str]) -> str:
    return f"; first: {items[0]}" if items else ""


def print_counts(rows: list[dict[str, Any]]) -> None:
    by_doc_type = Counter(r["doc_type"] for r in rows)
    print(f"rows: {len(rows)} ({', '.join(f'{d} {n}' for d, n in sorted(by_doc_type.items()))})")
    chips = sorted({chip for r in rows for chip in r["chips"]})
    print("rows per chip (a row counts for every chip it lists):")
    print(f"  {'chip':<10}" + "".join(f"{d:>8}" for d in sorted(by_doc_type)))
    for chip in chips:
        counts = Counter(r["doc_type"] for r in rows if chip in r["chips"])
        print(f"  {chip:<10}" + "".join(f"{counts.get(d, 0):>8}" for d in sorted(by_doc_type)))
    revisions = Counter(rev for r in rows for rev in r["revisions"])
    if revisions:
        print(f"rows per revision: {', '.join(f'{rev} {n}' for rev, n in sorted(revisions.items()))}")
    versions = Counter((r["doc_type"], r["source_version"]) for r in rows)
    print(f"source versions: {', '.join(f'{d}@{v} ({n})' for (d, v), n in sorted(versions.items()))}")
    kinds = Counter((r["doc_type"], r["kind"]) for r in rows)
    print("rows per passage kind: " + ", ".join(f"{d} {k} {n}" for (d, k), n in sorted(kinds.items())))
    stated = Counter(
        fact
        for r in rows
        for fact, holds in (("default", r["states_default"]), ("pins", r["gpio_count"] >= 2))
        if holds
    )
    print(f"rows that state a default: {stated['default']}; that name two GPIOs or more: {stated['pins']}")
    releases = Counter((r["doc_type"], series) for r in rows for series in r["releases"])
    shared = Counter(r["doc_type"] for r in rows if len(r["releases"]) > 1)
    if releases:
        print(
            "rows per ESP-IDF release: "
            + ", ".join(f"{d} {s} {n}" for (d, s), n in sorted(releases.items()))
            + f"; in more than one release: {', '.join(f'{d} {n}' for d, n in sorted(shared.items())) or '0'}"
        )


def print_samples(rows: list[dict[str, Any]], picks: Sequence[int]) -> None:
    print("sample rows:")
    for index in picks:
        row = rows[index]
        snippet = " ".join(row["text"].split())[:110]
        print(
            f"  {row['doc_type']} {','.join(row['chips'])} {row['file_path']} #{row['chunk_index']} "
            f"revisions={row['revisions'] or '-'} symbols={len(row['symbol_refs'])}: {snippet}"
        )


def check_indices(table: lancedb.table.Table, report: Report) -> None:
    present = {index.name: index for index in table.list_indices()}
    missing = [name for name in INDEXES if name not in present]
    report.check(
        not missing,
        f"indices present: {', '.join(sorted(present))}" + (f"; MISSING {missing}" if missing else ""),
    )
    unindexed = {
        name: index.num_unindexed_rows for name, index in present.items() if index.num_unindexed_rows
    }
    if unindexed:  # still searched (flat), only slower: worth seeing, not a failure
        print(f"  note: rows not yet folded into indices: {unindexed}")


def vector_round_trip(
    table: lancedb.table.Table,
    rows: list[dict[str, Any]],
    vectors: np.ndarray,
    picks: Sequence[int],
    embedder: Any,
    report: Report,
) -> None:
    """Each sampled chunk's re-embedded text must retrieve it (or an identical text) at rank 1."""
    fresh = embedder.embed_documents([embedding_texts(rows[i])[0] for i in picks])
    self_cosines = np.sum(fresh * vectors[list(picks)], axis=1)
    stale = [
        rows[i]["file_path"] for i, cos in zip(picks, self_cosines, strict=True) if cos < MIN_SELF_COSINE
    ]
    report.check(
        not stale,
        f"stored vectors are their text's embedding (min cosine {self_cosines.min():.4f}, "
        f"{len(stale)} below {MIN_SELF_COSINE}){_first(stale)}",
    )
    itself = same_text = tied = 0
    missed: list[str] = []
    for index, query in zip(picks, fresh, strict=True):
        top = (
            table.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .select([*ROW_KEY, "text", "_distance"])
            .limit(1)
            .to_list()
        )
        own = rows[index]
        own_distance = 1.0 - float(np.dot(query, vectors[index]))
        if top and row_key(top[0]) == row_key(own):
            itself += 1
        elif top and top[0]["text"] == own["text"]:
            same_text += 1
        elif top and top[0]["_distance"] >= own_distance - TIE_TOLERANCE:
            # Another chunk with the very same vector: texts that differ only past the model's
            # token limit (per-chip variants of a long section). Equal scores rank arbitrarily.
            tied += 1
        else:
            missed.append(f"{own['file_path']} #{own['chunk_index']}")
    share = (itself + same_text + tied) / len(picks)
    report.check(
        share >= VECTOR_ROUND_TRIP_MIN,
        f"vector round trip: {itself + same_text + tied}/{len(picks)} at rank 1 ({share:.1%}; itself "
        f"{itself}, identical text {same_text}, identical vector {tied}, missed {len(missed)}; "
        f"need {VECTOR_ROUND_TRIP_MIN:.0%}){_first(missed)}",
    )
    if tied:
        print(
            f"  note: {tied} sampled chunks share their vector with another chunk (text differs only "
            f"past {getattr(embedder, 'max_tokens', '?')} tokens); strictly itself or identical text: "
            f"{(itself + same_text) / len(picks):.1%}"
        )


def body_words(row: dict[str, Any]) -> list[str]:
    """Words of the chunk after its section-path prefix, which neighbouring chunks share."""
    prefix = row["section_path"]
    body = row["text"][len(prefix) :] if row["text"].startswith(prefix) else row["text"]
    words = body.split()
    return (words or row["text"].split())[:FTS_QUERY_WORDS]


def fts_round_trip(
    table: lancedb.table.Table, rows: list[dict[str, Any]], picks: Sequence[int], report: Report
) -> None:
    """The text index must find a chunk by its own words, the symbol index by its own symbol."""
    found_by_words = 0
    for index in picks:
        own = rows[index]
        words = " ".join(body_words(own))
        # Scoped to the chunk's chips, as the server's chip filter does: without it, boilerplate
        # shared by ten manuals ("The addresses in this section are relative to ...") crowds the top 10.
        chips = ", ".join("'" + chip.replace("'", "''") + "'" for chip in own["chips"])
        hits = (
            table.search(words, query_type="fts", fts_columns="text")
            .where(f"array_has_any(chips, [{chips}])", prefilter=True)
            .select([*ROW_KEY, "text", "_score"])
            .limit(10)
            .to_list()
        )
        # The same text in another chip's manual scores the same: it counts, as in the vector check.
        found_by_words += any(row_key(hit) == row_key(own) or hit["text"] == own["text"] for hit in hits)
    share = found_by_words / len(picks)
    report.check(
        share >= FTS_ROUND_TRIP_MIN,
        f"full-text (text_fts) round trip: {found_by_words}/{len(picks)} find themselves (or their "
        f"identical text) in the top 10 of their chips by {FTS_QUERY_WORDS} words of their body "
        f"({share:.1%}; need {FTS_ROUND_TRIP_MIN:.0%})",
    )
    with_symbols = [i for i in picks if rows[i]["symbol_refs"]]
    if not with_symbols:
        report.check(False, "symbol index round trip: no sampled row has symbol_refs")
        return
    rng = random.Random(len(with_symbols))
    found_by_symbol = 0
    for index in with_symbols:
        own = rows[index]
        symbol = rng.choice(own["symbol_refs"])
        hits = (
            table.search(symbol.lower(), query_type="fts", fts_columns="symbol_refs")
            .select([*ROW_KEY, "symbol_refs", "_score"])
            .limit(10_000)
            .to_list()
        )
        top_names_it = bool(hits) and symbol.lower() in {s.lower() for s in hits[0]["symbol_refs"]}
        found_by_symbol += top_names_it and any(row_key(hit) == row_key(own) for hit in hits)
    share = found_by_symbol / len(with_symbols)
    report.check(
        share >= FTS_ROUND_TRIP_MIN,
        f"symbol index (symbol_refs_fts) round trip: {found_by_symbol}/{len(with_symbols)} found by a "
        f"lower-cased symbol of their own, the top hit naming it "
        f"({share:.1%}; need {FTS_ROUND_TRIP_MIN:.0%})",
    )


def check_windows(table: lancedb.table.Table, report: Report) -> None:
    """Each row's windows start with its own vector, and long chunks of windowed corpora have the
    windows their text calls for: a stale or migrated-only store would silently lose them."""
    if WINDOWS_COLUMN not in table.schema.names:
        report.check(False, f"store has the {WINDOWS_COLUMN} column (built before window vectors: rebuild)")
        return
    data = (
        table.search()
        .select(["doc_type", "text", "file_path", "vector", WINDOWS_COLUMN])
        .limit(None)
        .to_arrow()
    )
    dim = table.schema.field("vector").type.list_size
    windows = data.column(WINDOWS_COLUMN).combine_chunks()
    counts = pc.list_value_length(windows).to_numpy(zero_copy_only=False)
    flat = windows.flatten().flatten().to_numpy().reshape(-1, dim)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    own = data.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim)
    first_off = int((counts < 1).sum()) or int((~np.isclose(flat[starts], own).all(axis=1)).sum())
    fields = (data.column(name).to_pylist() for name in ("doc_type", "text", "file_path"))
    short = [
        doc_type
        for doc_type, text, path, count in zip(*fields, counts, strict=True)
        if count != len(embedding_texts({"doc_type": doc_type, "text": text, "file_path": path}))
    ]
    report.check(
        not first_off and not short,
        f"window vectors: {int(counts.sum())} for {len(counts)} rows, the first being the row's vector "
        f"({first_off} differ); every row holds the windows its text calls for ({len(short)} do not)",
    )


def load_all(table: lancedb.table.Table) -> tuple[list[dict[str, Any]], np.ndarray]:
    data: pa.Table = table.search().select([*ROW_FIELDS, "vector"]).limit(None).to_arrow()
    dim = table.schema.field("vector").type.list_size
    vectors = data.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim)
    return data.drop_columns(["vector"]).to_pylist(), vectors


def validate(db_uri: str, sample: int, seed: int) -> Report:
    report = Report()
    table = open_store(db_uri)
    model_id, dim = store_model_id(table), store_vector_dim(table)
    print(f"store: {db_uri} (table version {table.version})")
    print(f"model: {model_id}, {dim}-d vectors")
    rows, vectors = load_all(table)
    report.check(bool(rows), f"store holds rows ({len(rows)})")
    if not rows:
        return report
    print_counts(rows)
    rng = random.Random(seed)
    picks = rng.sample(range(len(rows)), min(sample, len(rows)))
    print_samples(rows, picks[:5])
    print("checks:")
    check_rows(rows, vectors, report)
    check_indices(table, report)
    check_windows(table, report)
    fts_round_trip(table, rows, picks, report)
    from embedder import get_embedder

    try:
        embedder = get_embedder(model_id)
    except Exception as error:  # any backend failure: the round trip cannot run, which is a failure
        report.check(False, f"load embedding model {model_id}: {type(error).__name__}: {error}")
        return report
    vector_round_trip(table, rows, vectors, picks, embedder, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Validate an esp32-docs LanceDB store.")
    parser.add_argument("--db", help=f"LanceDB URI (default ${DB_ENV_VAR} or {DEFAULT_DB_URI})")
    parser.add_argument("--sample", type=int, default=200, help="chunks to round-trip (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    args = parser.parse_args(argv)
    if args.sample < 1:
        parser.error("--sample must be at least 1")
    db_uri = resolve_db_uri(args.db)
    try:
        report = validate(db_uri, args.sample, args.seed)
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    verdict = "PASS" if not report.failures else f"FAIL ({len(report.failures)} failed)"
    print(f"validate_store: {verdict}: {report.checks} checks on {db_uri}")
    return 0 if not report.failures else 1


if __name__ == "__main__":
    sys.exit(main())
