"""Collapse per-chip chunk files into one corpus: identical chunks become one row listing every chip.

    uv run dedup_chunks.py chunks_esp32c3.jsonl chunks_esp32.jsonl ... --out-path idf_chunks.jsonl

The key is exact, ``(file_path, text)`` (DESIGN §3): two chips whose builds differ by one
substituted constant keep two rows, each narrowed to its chips, so a chip filter never returns the
other chip's number. Chips are listed in chips.yaml order. ``chunk_index`` is renumbered per
``file_path`` in a document order that respects every chip's own order as far as they agree, so
"the chunk after this one" still reads on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from chip_vocab import chip_ids
from schema import make_row, read_jsonl, validate_row, write_jsonl

Key = tuple[str, str]


@dataclass
class DedupResult:
    rows: list[dict[str, Any]]
    chunks_in: int

    @property
    def collapse_rate(self) -> float:
        """Share of input chunks that were folded into another chip's identical row."""
        return 1 - len(self.rows) / self.chunks_in if self.chunks_in else 0.0


def _merge_into(kept: dict[str, Any], row: dict[str, Any]) -> None:
    """Fold ``row`` into the identical ``kept`` row, refusing rows whose metadata disagree."""
    for name in ("doc_type", "source_doc", "section_path", "source_version", "source_commit"):
        if kept[name] != row[name]:
            raise ValueError(
                f"{row['file_path']}: identical text with different {name} "
                f"({kept[name]!r} vs {row[name]!r}); were these built from the same source?"
            )
    for name in ("chips", "revisions", "symbol_refs", "doc_refs", "file_refs"):
        kept[name] = list(dict.fromkeys([*kept[name], *row[name]]))


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
    per_file_chip: dict[str, dict[str, list[tuple[int, Key]]]] = {}
    chunks_in = 0
    for path in paths:
        for row in tqdm(read_jsonl(path), desc=path.name, unit="row", file=sys.stderr):
            try:
                validate_row(row)
            except ValueError as exc:
                raise ValueError(f"{path}: row {chunks_in + 1}: {exc}") from exc
            chunks_in += 1
            key = (row["file_path"], row["text"])
            if key in kept:
                _merge_into(kept[key], row)
            else:
                kept[key] = dict(row)
            for chip in row["chips"]:
                per_file_chip.setdefault(row["file_path"], {}).setdefault(chip, []).append(
                    (row["chunk_index"], key)
                )
    rows: list[dict[str, Any]] = []
    for file_path in sorted(per_file_chip):
        chips_here = sorted(per_file_chip[file_path], key=lambda c: order.get(c, len(order)))
        sequences = [[key for _, key in sorted(per_file_chip[file_path][chip])] for chip in chips_here]
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
                    symbol_refs=row["symbol_refs"],
                    doc_refs=row["doc_refs"],
                    file_refs=row["file_refs"],
                    source_version=row["source_version"],
                    source_commit=row["source_commit"],
                )
            )
    return DedupResult(rows=rows, chunks_in=chunks_in)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chunks", nargs="+", type=Path, help="per-chip chunk JSONL files")
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
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
