"""Ingest the Technical Reference Manual LaTeX sources into TRM chunk rows (DESIGN §4).

Usage: uv run ingest_trm.py --out-path trm_chunks.jsonl [--trm-path DIR] [--chips esp32c3,...]

Each chip folder publishes one manual per aggregator file (ESP32-P4 two: mainline and
"chip revision v1.3"). The aggregator is not parsed as content: it only says which numbered
chapter roots the manual holds and which tags it sets. Every chapter root is parsed once per
manual with that manual's tags; a chip with several manuals has its chunks merged, identical
text kept once and tagged with every revision it holds for.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from chip_vocab import chip_for_trm_folder, trm_chips, validate_chip, validate_revision
from chunk_format import REGISTER_BLOCK_START
from chunking import Chunk, chunk_tree
from latex_parser import ParsedChapter, parse_chapter
from latex_source import INCLUDE_COMMAND, IncludeResolver, document_body, read_group, strip_comments
from lexicon import annotate_register_terms
from provenance import source_provenance
from releases import COMMIT
from schema import make_row, write_jsonl
from sources import load_pins
from trm_refs import LabelIndex, LabelTarget, summary

CHAPTER_ROOT = re.compile(r"^\d{2}-.+__EN\.tex$")
REVISION_IN_NAME = re.compile(r"chip-revision-(v\d+(?:\.\d+)*)", re.IGNORECASE)
MAINLINE = "mainline"
# a rendered register block's first two lines; a table row may also start with "Register"
EXPECTED_TREE = (
    "a TRM LaTeX tree: chip folders named like ESP32-C3 or ESP8684, each holding numbered "
    "chapter roots NN-NAME__EN.tex and a <chip>-main__EN.tex manual"
)


class TrmTreeError(ValueError):
    """The TRM path is missing or does not look like the TRM LaTeX repository."""


@dataclass
class Manual:
    """One published manual: a chip folder, its revision label, tags in force, chapter roots."""

    chip: str
    folder: Path
    aggregator: Path
    revision: str
    tags: frozenset[str]
    chip_name: str
    chapters: list[Path] = field(default_factory=list)
    missing_chapters: list[str] = field(default_factory=list)


@dataclass
class ChapterChunks:
    """Chunks of one chapter root in one manual."""

    manual: Manual
    file_path: str
    key: str
    title: str
    chunks: list[Chunk]
    labels: dict[str, LabelTarget] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Discovering manuals
# ---------------------------------------------------------------------------------------------


def _chip_name(folder: Path) -> str:
    """``\\chipname`` from the chip's settings package: the tag every chapter of it tests."""
    settings = folder / "00-chip-spec-content" / "chip-spec-settings.sty"
    if settings.is_file():
        text = strip_comments(settings.read_text(encoding="utf-8", errors="replace"))
        match = re.search(r"\\newcommand\s*\{?\\chipname\}?\s*\{([^{}]+)\}", text)
        if match:
            return match.group(1).strip()
    return folder.name


def _aggregator_includes(text: str) -> list[str]:
    targets: list[str] = []
    for match in INCLUDE_COMMAND.finditer(text):
        group = read_group(text, match.end() - 1, skip_space=False)
        if group:
            targets.append(group[0].strip())
    return targets


def discover_manuals(trm_root: Path, only_chips: list[str] | None = None) -> list[Manual]:
    """Every manual in the tree (restricted to ``only_chips``), chapters in aggregator order."""
    if not trm_root.is_dir():
        raise TrmTreeError(f"TRM path {trm_root} is not a directory; expected {EXPECTED_TREE}")
    manuals: list[Manual] = []
    for folder in sorted(p for p in trm_root.iterdir() if p.is_dir()):
        chip = chip_for_trm_folder(folder.name)
        if chip is None or (only_chips is not None and chip not in only_chips):
            continue
        roots = sorted(p for p in folder.iterdir() if p.is_file() and CHAPTER_ROOT.match(p.name))
        aggregators = sorted(
            p
            for p in folder.iterdir()
            if p.is_file() and p.name.endswith("__EN.tex") and not CHAPTER_ROOT.match(p.name)
        )
        if not roots and not aggregators:
            continue
        chip_name = _chip_name(folder)
        resolver = IncludeResolver([folder])
        chip_manuals: list[Manual] = []
        for aggregator in aggregators:
            source = strip_comments(aggregator.read_text(encoding="utf-8", errors="replace"))
            text = document_body(source)
            tags = {chip_name}
            tags.update(t.strip() for t in re.findall(r"\\usetag\{([^{}\\]+)\}", source))
            chapters: list[Path] = []
            missing: list[str] = []
            for target in _aggregator_includes(text):
                found = resolver.resolve(target, [folder])
                if found is not None and CHAPTER_ROOT.match(found.name):
                    chapters.append(found)
                elif found is None and re.match(r"\d{2}-", Path(target).name):
                    missing.append(target)  # a chapter the manual lists but the tree lacks
            if not chapters and not missing:
                continue
            revision_match = REVISION_IN_NAME.search(aggregator.name)
            revision = revision_match.group(1) if revision_match else MAINLINE
            manual = Manual(chip, folder, aggregator, revision, frozenset(tags), chip_name, chapters, missing)
            chip_manuals.append(manual)
        if not chip_manuals:
            # no aggregator: every numbered root is a chapter of the one manual
            placeholder = folder / f"{folder.name}-main__EN.tex"
            tags = frozenset({chip_name})
            chip_manuals.append(Manual(chip, folder, placeholder, MAINLINE, tags, chip_name, roots))
        elif len(chip_manuals) == 1:
            listed = {p.resolve() for p in chip_manuals[0].chapters}
            chip_manuals[0].chapters.extend(p for p in roots if p.resolve() not in listed)
        if len(chip_manuals) > 1:
            for manual in chip_manuals:
                validate_revision(manual.revision, chip)
            chip_manuals.sort(key=lambda m: (m.revision != MAINLINE, m.revision))
        manuals.extend(chip_manuals)
    if not manuals:
        raise TrmTreeError(f"no TRM chapters found under {trm_root}; expected {EXPECTED_TREE}")
    return manuals


# ---------------------------------------------------------------------------------------------
# Parsing and merging
# ---------------------------------------------------------------------------------------------


def chapter_key(root: Path) -> str:
    """Chapters of different manuals that are the same chapter: ``01-RISCVCPU-latest`` is the
    mainline edition of ``01-RISCVCPU``."""
    return re.sub(r"-latest(?=__EN$)", "", root.stem)


def split_registers(parsed: ParsedChapter, chunks: list[Chunk]) -> list[str]:
    """Registers whose whole rendered block is in no chunk (the chunker must never cut one)."""
    return [
        r.name
        for r in parsed.tree.registers
        if r.block is not None and not any(r.block.text in c.text for c in chunks)
    ]


@dataclass
class MergedChunk:
    chunk: Chunk
    file_path: str
    title: str
    revisions: list[str]


def merge_manuals(editions: list[ChapterChunks]) -> list[MergedChunk]:
    """One sequence from the editions of a chapter: identical chunks once, with every revision
    they hold for; differing ones where they fall, with the one revision they hold for."""
    merged: list[MergedChunk] = []
    for edition in editions:
        revision = edition.manual.revision
        incoming = [MergedChunk(c, edition.file_path, edition.title, [revision]) for c in edition.chunks]
        if not merged:
            merged = incoming
            continue
        matcher = difflib.SequenceMatcher(
            a=[m.chunk.text for m in merged], b=[m.chunk.text for m in incoming], autojunk=False
        )
        result: list[MergedChunk] = []
        for op, a0, a1, b0, b1 in matcher.get_opcodes():
            if op == "equal":
                for item in merged[a0:a1]:
                    item.revisions.append(revision)
                    result.append(item)
            else:
                result.extend(merged[a0:a1])
                result.extend(incoming[b0:b1])
        merged = result
    return merged


@dataclass
class IngestReport:
    rows: list[dict] = field(default_factory=list)
    lexicon_size: int = 0
    chapters: int = 0
    parses: int = 0
    failures: list[str] = field(default_factory=list)
    registers_per_chip: Counter = field(default_factory=Counter)
    revision_mix: Counter = field(default_factory=Counter)
    case_fixed: list[str] = field(default_factory=list)
    labels: list[LabelIndex] = field(default_factory=list)


def ingest(trm_root: Path, manuals: list[Manual], progress: bool = True) -> IngestReport:
    """Parse every chapter of every manual and build validated rows, failures collected."""
    report = IngestReport()
    provenance = source_provenance(trm_root)
    # the chapter's .tex upstream at the commit the rows came from (none for an unpinned tree)
    pinned = COMMIT.fullmatch(provenance.commit)
    tex_url = f"{load_pins().trm_url}/blob/{provenance.commit}/{{}}.tex" if pinned else ""
    by_chip: dict[str, list[Manual]] = {}
    for manual in manuals:
        by_chip.setdefault(manual.chip, []).append(manual)
    total = sum(len(m.chapters) for m in manuals)
    bar = tqdm(total=total, desc="TRM chapters", unit="chapter", disable=not progress, file=sys.stderr)
    for manual in manuals:
        for target in manual.missing_chapters:
            message = f"{manual.aggregator.name} lists chapter {target!r}, which is not in the tree"
            report.failures.append(message)
            print(f"error: {message}", file=sys.stderr)
    for chip, chip_manuals in by_chip.items():
        editions: dict[str, list[ChapterChunks]] = {}
        order: list[str] = []
        for manual in chip_manuals:
            for root in manual.chapters:
                file_path = root.resolve().relative_to(trm_root.resolve()).with_suffix("").as_posix()
                bar.set_postfix_str(f"{manual.chip} {manual.revision} {root.stem}", refresh=False)
                edition = _parse_one(trm_root, manual, root, file_path, report)
                bar.update(1)
                if edition is None:
                    continue
                if edition.key not in editions:
                    order.append(edition.key)
                editions.setdefault(edition.key, []).append(edition)
        report.chapters += len(order)
        labels = LabelIndex()
        for key in order:
            for edition in editions[key]:
                labels.define(edition.file_path, edition.labels)
        report.labels.append(labels)
        multi = len(chip_manuals) > 1
        indexes: Counter = Counter()
        for key in order:
            for item in merge_manuals(editions[key]):
                revisions = item.revisions if multi else []
                report.revision_mix["+".join(revisions) if revisions else "none"] += 1
                report.registers_per_chip[chip] += len(REGISTER_BLOCK_START.findall(item.chunk.text))
                report.rows.append(
                    make_row(
                        text=item.chunk.text,
                        doc_type="trm",
                        chips=[chip],
                        source_doc=item.title,
                        section_path=item.chunk.section_path_text,
                        file_path=item.file_path,
                        chunk_index=indexes[item.file_path],
                        revisions=revisions,
                        symbol_refs=item.chunk.symbol_refs,
                        doc_refs=labels.resolve(
                            item.chunk.doc_refs, item.chunk.text, item.file_path, item.chunk.section_path_text
                        ),
                        file_refs=item.chunk.file_refs,
                        source_version=provenance.version,
                        source_commit=provenance.commit,
                        url=tex_url.format(item.file_path) if tex_url else "",
                    )
                )
                indexes[item.file_path] += 1
    bar.close()
    report.lexicon_size = len(annotate_register_terms(report.rows).words)
    return report


def _parse_one(
    trm_root: Path, manual: Manual, root: Path, file_path: str, report: IngestReport
) -> ChapterChunks | None:
    label = f"{file_path} ({manual.chip_name} {manual.revision})"
    report.parses += 1
    builtin = {"chipname": manual.chip_name, "chipseries": manual.chip_name}
    try:
        parsed = parse_chapter(root, trm_root, manual.folder, manual.tags, builtin)
        chunks = chunk_tree(parsed.tree.root)
    except (OSError, ValueError, RecursionError) as exc:
        report.failures.append(f"{label}: could not be parsed: {exc}")
        print(f"error: chapter {label} could not be parsed: {exc}", file=sys.stderr)
        return None
    for problem in parsed.include_problems:
        message = f"{label}: unresolved include {problem.target!r} in {problem.source} ({problem.reason})"
        report.failures.append(message)
        print(f"error: {message}", file=sys.stderr)
    for target, found in parsed.case_fixed_includes:
        report.case_fixed.append(f"{label}: {target} -> {found.name}")
    for warning in parsed.tree.warnings:
        print(f"warning: {label}: {warning}", file=sys.stderr)
    lost = split_registers(parsed, chunks)
    if lost:
        report.failures.append(f"{label}: registers split across chunks: {', '.join(lost)}")
        print(f"error: {label}: registers split across chunks: {', '.join(lost)}", file=sys.stderr)
    return ChapterChunks(
        manual=manual,
        file_path=file_path,
        key=chapter_key(root),
        title=parsed.tree.title,
        chunks=chunks,
        labels=parsed.tree.labels,
    )


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _parse_chip_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    chosen = [validate_chip(name.strip()) for name in value.split(",") if name.strip()]
    missing = [c for c in chosen if c not in trm_chips()]
    if missing:
        with_trm = ", ".join(trm_chips())
        raise ValueError(f"chips without a TRM: {', '.join(missing)}; chips with one: {with_trm}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-path", required=True, type=Path, help="JSONL file to write the chunk rows to")
    parser.add_argument("--trm-path", type=Path, help="TRM LaTeX tree (default: $TRM_PATH)")
    parser.add_argument("--chips", help="comma-separated chips to ingest (default: every chip with a TRM)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    trm_value = args.trm_path or (Path(os.environ["TRM_PATH"]) if os.environ.get("TRM_PATH") else None)
    if trm_value is None:
        print(f"error: no TRM path: pass --trm-path or set TRM_PATH to {EXPECTED_TREE}", file=sys.stderr)
        return 2
    try:
        only_chips = _parse_chip_list(args.chips)
        manuals = discover_manuals(trm_value, only_chips)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    report = ingest(trm_value, manuals, progress=not args.no_progress)
    count = write_jsonl(args.out_path, report.rows)
    seconds = time.monotonic() - started
    references, resolved, unresolved = summary(report.labels)
    if unresolved:
        listed = ", ".join(f"{label} ({n})" for label, n in unresolved.most_common(20))
        print(
            f"note: {len(unresolved)} labels referenced but defined in no chapter of their manual "
            f"(left out of doc_refs; most referenced first): {listed}",
            file=sys.stderr,
        )
    per_chip = ", ".join(f"{chip} {n}" for chip, n in sorted(report.registers_per_chip.items()))
    mix = ", ".join(f"{k} {v}" for k, v in sorted(report.revision_mix.items()))
    for fixed in report.case_fixed:
        print(f"note: include resolved case-insensitively: {fixed}", file=sys.stderr)
    print(
        f"trm: {report.chapters} chapters ({report.parses} parses) -> {count} chunks, "
        f"{sum(report.registers_per_chip.values())} registers [{per_chip}], revisions [{mix}], "
        f"{len(report.case_fixed)} case-fixed includes, {report.lexicon_size} name abbreviations mined, "
        f"cross-references {resolved}/{references} resolved ({len(unresolved)} labels unresolved), "
        f"{len(report.failures)} failures, {seconds:.1f}s -> {args.out_path}"
    )
    if report.failures:
        print(f"error: {len(report.failures)} chapter problems (listed above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
