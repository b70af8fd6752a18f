"""Collapse per-chip, per-release chunk files into one corpus: identical chunks become one row.

    uv run dedup_chunks.py chunks_*.jsonl --out-path idf_chunks.jsonl
    uv run dedup_chunks.py src_chunks_*.jsonl --out-path src_chunks.jsonl

A row identical in several chips and ESP-IDF releases lists all of them (docs/releases.md), and in
``release_chips`` the (release, chip) builds it came from: a page the same in master's esp32 and
esp32s3 builds and in v6.0's esp32 build lists both chips and both releases, yet holds for v6.0 on
esp32 only.

The key is exact, ``(file_path, text)`` (DESIGN §3): two chips whose builds differ by one
substituted constant keep two rows, each narrowed to its chips, so a chip filter never returns the
other chip's number. Chips are listed in chips.yaml order. ``chunk_index`` is renumbered per
``file_path`` in a document order that respects every chip's own order as far as they agree, so
"the chunk after this one" still reads on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from chip_vocab import chip_ids
from releases import newest_first, split_release_chip, split_source
from schema import make_row, read_jsonl, validate_row, write_jsonl

Key = tuple[str, str]
# one page's chunk order as a build saw it: per chip and release
Sequence = tuple[str, str]


@dataclass
class DedupResult:
    rows: list[dict[str, Any]]
    chunks_in: int

    def release_summary(self) -> str:
        """Rows per release, and how many of them no other release shares."""
        per: dict[str, list[int]] = {}
        for row in self.rows:
            for series in row["releases"]:
                counts = per.setdefault(series, [0, 0])
                counts[0] += 1
                counts[1] += len(row["releases"]) == 1
        return "; ".join(
            f"{series}: {total} rows, {own} only in it" for series, (total, own) in sorted(per.items())
        )

    @property
    def collapse_rate(self) -> float:
        """Share of input chunks that were folded into another chip's identical row."""
        return 1 - len(self.rows) / self.chunks_in if self.chunks_in else 0.0


def _merge_into(kept: dict[str, Any], row: dict[str, Any]) -> None:
    """Fold ``row`` into the identical ``kept`` row, refusing rows whose metadata disagree."""
    names = ["doc_type", "source_doc", "section_path"]
    if not kept["releases"] and not row["releases"]:
        names += ["source_version", "source_commit"]  # releases are checked once, over all files
    for name in names:
        if kept[name] != row[name]:
            raise ValueError(
                f"{row['file_path']}: identical text with different {name} "
                f"({kept[name]!r} vs {row[name]!r}); were these built from the same source?"
            )
    for name in ("chips", "revisions", "symbol_refs", "doc_refs", "file_refs"):
        kept[name] = list(dict.fromkeys([*kept[name], *row[name]]))
    sources = dict(zip(kept["releases"], kept["release_sources"], strict=True))
    for series, source in zip(row["releases"], row["release_sources"], strict=True):
        sources.setdefault(series, source)
    ordered = newest_first(sources)
    kept["releases"] = ordered
    kept["release_sources"] = [sources[series] for series in ordered]
    kept["release_chips"] = list(dict.fromkeys([*kept["release_chips"], *row["release_chips"]]))
    if ordered:  # the row cites its newest build; release_sources keeps every other one
        kept["source_version"], kept["source_commit"] = split_source(kept["release_sources"][0])
    if row["source_commit"] == kept["source_commit"]:
        kept["url"] = row["url"]  # the link goes with the build the row cites


def _build_order(release_rank: dict[str, int], chip_rank: dict[str, int]) -> Callable[[str], tuple[int, int]]:
    """Sort key of ``release_chips``: newest release first, then chips.yaml order."""

    def key(pair: str) -> tuple[int, int]:
        series, chip = split_release_chip(pair)
        return release_rank.get(series, len(release_rank)), chip_rank.get(chip, len(chip_rank))

    return key


def check_one_build_per_series(builds: dict[str, set[str]]) -> None:
    """A store holds one build per series: two versions of v6.1-dev in one corpus are a mix-up."""
    for series, sources in sorted(builds.items()):
        if len(sources) > 1:
            raise ValueError(
                f"release {series} comes from several builds ({', '.join(sorted(sources))}); "
                "rebuild every chip of a release from one ESP-IDF commit"
            )


def _document_order(sequences: list[list[Key]]) -> list[Key]:
    """One order for a page's chunks from several chips' orders.

    The first chip's sequence is taken whole; each later chip's unseen chunk is placed right after
    the chunk that precedes it in that chip's own sequence (or first, if it opens the page).
    """
    merged: list[Key] = []
    for sequence in sequences:
        seen = set(merged)
        anchor: Key | None = None
        for key in sequence:
            if key not in seen:
                at = merged.index(anchor) + 1 if anchor is not None else 0
                merged.insert(at, key)
                seen.add(key)
            anchor = key
    return merged


def dedup(paths: Iterable[Path]) -> DedupResult:
    """Exact collapse of every row in ``paths`` on (file_path, text); see the module docstring."""
    order = {chip: index for index, chip in enumerate(chip_ids())}
    kept: dict[Key, dict[str, Any]] = {}
    per_file_chip: dict[str, dict[Sequence, list[tuple[int, Key]]]] = {}
    builds: dict[str, set[str]] = {}
    chunks_in = 0
    for path in paths:
        for row in tqdm(read_jsonl(path), desc=path.name, unit="row", file=sys.stderr):
            try:
                validate_row(row)
            except ValueError as exc:
                raise ValueError(f"{path}: row {chunks_in + 1}: {exc}") from exc
            chunks_in += 1
            for series, source in zip(row["releases"], row["release_sources"], strict=True):
                builds.setdefault(series, set()).add(source)
            key = (row["file_path"], row["text"])
            if key in kept:
                _merge_into(kept[key], row)
            else:
                kept[key] = dict(row)
            for chip in row["chips"]:
                for series in row["releases"] or [""]:
                    per_file_chip.setdefault(row["file_path"], {}).setdefault((chip, series), []).append(
                        (row["chunk_index"], key)
                    )
    check_one_build_per_series(builds)
    release_rank = {series: rank for rank, series in enumerate(newest_first(builds))}
    rows: list[dict[str, Any]] = []
    for file_path in sorted(per_file_chip):
        # newest release first, then chips.yaml order: the newest docs set the page's order
        seen_here = sorted(
            per_file_chip[file_path],
            key=lambda cs: (release_rank.get(cs[1], len(release_rank)), order.get(cs[0], len(order))),
        )
        sequences = [[key for _, key in sorted(per_file_chip[file_path][cs])] for cs in seen_here]
        for index, key in enumerate(_document_order(sequences)):
            row = kept[key]
            rows.append(
                make_row(
                    text=row["text"],
                    doc_type=row["doc_type"],
                    chips=sorted(row["chips"], key=lambda c: order.get(c, len(order))),
                    source_doc=row["source_doc"],
                    section_path=row["section_path"],
                    file_path=file_path,
                    chunk_index=index,
                    revisions=row["revisions"],
                    releases=row["releases"],
                    release_sources=row["release_sources"],
                    release_chips=sorted(row["release_chips"], key=_build_order(release_rank, order)),
                    symbol_refs=row["symbol_refs"],
                    doc_refs=row["doc_refs"],
                    file_refs=row["file_refs"],
                    source_version=row["source_version"],
                    source_commit=row["source_commit"],
                    url=row["url"],
                )
            )
    return DedupResult(rows=rows, chunks_in=chunks_in)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chunks", nargs="+", type=Path, help="per-chip, per-release chunk JSONL files")
    parser.add_argument("--out-path", type=Path, required=True, help="deduplicated JSONL to write")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.chunks if not p.is_file()]
    if missing:
        print(f"error: no such chunk file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.out_path.resolve() in {p.resolve() for p in args.chunks}:
        print(f"error: --out-path {args.out_path} is also an input", file=sys.stderr)
        return 2
    try:
        result = dedup(args.chunks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not result.rows:
        print(f"error: the input files hold no rows: {', '.join(map(str, args.chunks))}", file=sys.stderr)
        return 2
    write_jsonl(args.out_path, result.rows)
    print(
        f"{result.chunks_in} chunks in from {len(args.chunks)} files -> {len(result.rows)} rows out "
        f"in {args.out_path}; collapse rate {result.collapse_rate:.1%}"
        + (f"; {result.release_summary()}" if result.release_summary() else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
