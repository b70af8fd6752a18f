"""Output checks for the TRM chunks beyond the register census: per-chapter word capture and macro coverage.

Why: totals hide silent loss (DESIGN §9). A chapter whose second half was swallowed by an unbalanced
environment still yields chunks; only comparing its words with the LaTeX shows the hole. The source
side is read with register_census's own scanner (includes, comments, tag selection), never with
latex_parser, so the two cannot share a blind spot.

    uv run trm_verify.py words trm_chunks.jsonl [--trm-path DIR] [--fail-below 0.5] [--json]
    uv run trm_verify.py registers trm_chunks.jsonl [--trm-path DIR] [--fail-below 0.5] [--json]
    uv run trm_verify.py macros trm_chunks.jsonl [--trm-path DIR] [--top 40] [--json]

Word capture of a chapter = sum over words of min(source count, chunk count) / source words, where
words are lower-cased tokens with at least two letters (numbers, hex values and bit ranges are left
to the register census). The source text is de-LaTeXed crudely: command names dropped, their text
arguments kept, non-text arguments (labels, refs, file names, colours, column specs, lengths) and
`\\regfield` bit boxes dropped. Measured on the real corpus with a healthy ingest: median ~99%, the
lowest chapter ~81% (interrupt-matrix tables, repeated "continued from previous page" table heads).
Chapters under 80% are listed; a chapter under --fail-below (default 65%, i.e. roughly a third of the
chapter gone, which crude de-LaTeXing alone never explains on this corpus) fails the run.

Register capture applies the same measure to each register of each manual (its LaTeX from
`\\begin{register}` to `\\end{register}` against its REGISTER_FORMAT block(s) in chunks of that chip and
revision). A chapter hides a lost value list ("0: Disable / 1: Enable") in a few percent; a register
loses half its words. A register under --fail-below (default 50%) fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from register_census import (
    REGISTER_LINE_RE,
    ManualLabelled,
    TrmTreeError,
    discover_manuals,
    load_trm_rows,
    read_group,
    register_blocks,
    register_name_key,
    require_trm_tree,
    row_in_manual,
    scan_chapter,
    skip_optional,
)

FLAG_BELOW = 0.80
DEFAULT_FAIL_BELOW = 0.65
DEFAULT_REGISTER_FAIL_BELOW = 0.5
WORD_RE = re.compile(r"[A-Za-z0-9_]+")
MACRO_RE = re.compile(r"\\([A-Za-z]+)")
# command -> how many leading brace arguments are not prose (dropped with the command).
NON_TEXT_ARGS: dict[str, int] = {
    "label": 1,
    "ref": 1,
    "pageref": 1,
    "nameref": 1,
    "autoref": 1,
    "cref": 1,
    "Cref": 1,
    "eqref": 1,
    "cite": 1,
    "url": 1,
    "href": 1,
    "hypertarget": 1,
    "hyperlink": 1,
    "includegraphics": 1,
    "input": 1,
    "subfile": 1,
    "subfileinclude": 1,
    "include": 1,
    "InputIfFileExists": 3,
    "vspace": 1,
    "hspace": 1,
    "setlength": 2,
    "addtolength": 2,
    "setcounter": 2,
    "addtocounter": 2,
    "color": 1,
    "cellcolor": 1,
    "rowcolor": 1,
    "columncolor": 1,
    "multicolumn": 2,
    "multirow": 2,
    "regfield": 4,
    "reglabel": 1,
    "fontsize": 2,
    "selectlanguage": 1,
    "documentclass": 1,
    "usepackage": 1,
    "pagestyle": 1,
    "thispagestyle": 1,
    "newcommand": 2,
    "renewcommand": 2,
    "def": 1,
    "rotatebox": 1,
    "scalebox": 1,
    "resizebox": 2,
}
# Commands that render inside a word: their argument is glued to the text around them
# (`INTERRUPT\\_CORE0\\_\\textit{SOURCE}\\_INT\\_MAP\\_REG` is one identifier).
INLINE_COMMANDS = frozenset(
    {"regindex", "textcolor", "textit", "textbf", "texttt", "emph", "textsc", "textsf", "textrm"}
    | {"text", "mbox", "it", "bf", "tt"}
)
# Environments whose first brace arguments are layout, not text.
ENV_LAYOUT_ARGS = {"tabular": 1, "tabularx": 2, "tabulary": 2, "longtable": 1, "register": 1, "minipage": 1}
# A `[` after a command or `\\` opens an optional argument only if it closes this soon; else it is prose.
OPTIONAL_ARG_SPAN = 200
BEGIN_END_RE = re.compile(r"\\(begin|end)\s*\{([^{}]*)\}")
COMMAND_RE = re.compile(r"\\([A-Za-z]+)\*?|\\(.)", re.S)


def delatex(text: str) -> str:
    """Crude LaTeX-to-text: keep the words a reader sees, drop markup and non-text arguments."""
    # `0x{}00CC` and `\\hexprefix{}00CC` both print 0x00CC: one token
    text = re.sub(r"\\hexprefix\s*(\{\})?", "0x", _drop_environment_markers(text)).replace("{}", "")
    out: list[str] = []
    pos = 0
    length = len(text)
    while pos < length:
        ch = text[pos]
        if ch != "\\":
            out.append(" " if ch in "{}$&~^" else ch)
            pos += 1
            continue
        match = COMMAND_RE.match(text, pos)
        if match is None:
            pos += 1
            continue
        pos = match.end()
        name = match.group(1)
        if name is None:  # control symbol: \_ \% \& \\ ...
            symbol = match.group(2)
            out.append(symbol if symbol in "_%&#$" else " ")
            if symbol == "\\":
                pos = skip_optional(text, pos, OPTIONAL_ARG_SPAN)
            continue
        if name in INLINE_COMMANDS:  # I2C\_COMD\regindex{n}\_REG reads as one word
            if name == "textcolor" and (colour := read_group(text, pos)):
                pos = colour[1]
            group = read_group(text, pos)
            if group is not None:
                out.append(delatex(group[0]).strip())
                pos = group[1]
            continue
        if name != "item":
            pos = skip_optional(text, pos, OPTIONAL_ARG_SPAN)
        for _ in range(NON_TEXT_ARGS.get(name, 0)):
            group = read_group(text, pos)
            if group is None:
                break
            pos = group[1]
        if name in ("newcommand", "renewcommand", "def") and (group := read_group(text, pos)):
            pos = group[1]  # a definition body is not prose at its definition
        out.append(" ")
    return "".join(out)


def _drop_environment_markers(text: str) -> str:
    """Remove `\\begin{env}` / `\\end{env}` and, for layout environments, their spec arguments."""
    out: list[str] = []
    pos = 0
    for match in BEGIN_END_RE.finditer(text):
        if match.start() < pos:
            continue
        out.append(text[pos : match.start()])
        pos = skip_optional(text, match.end(), OPTIONAL_ARG_SPAN)
        env = match.group(2).strip().rstrip("*")
        if match.group(1) == "begin":
            for _ in range(ENV_LAYOUT_ARGS.get(env, 0)):
                group = read_group(text, pos)
                if group is None:
                    break
                pos = group[1]
        out.append(" ")
    out.append(text[pos:])
    return "".join(out)


def word_bag(text: str) -> Counter[str]:
    """Lower-cased tokens with at least two letters (identifiers such as i2c_scl_reg included)."""
    return Counter(token.lower() for token in WORD_RE.findall(text) if sum(c.isalpha() for c in token) >= 2)


def capture(source: Counter[str], chunks: Counter[str]) -> float:
    total = sum(source.values())
    if total == 0:
        return 1.0
    return sum(min(count, chunks.get(word, 0)) for word, count in source.items()) / total


def lost_words(source: Counter[str], chunks: Counter[str], top: int = 8) -> tuple[str, ...]:
    """The source words the chunks are most short of: examples that say what kind of text was lost."""
    return tuple(word for word, _ in (source - chunks).most_common(top))


@dataclass(frozen=True)
class ChapterCapture(ManualLabelled):
    chip: str
    revision: str
    chapter: str
    source_words: int
    chunk_rows: int
    ratio: float
    lost_examples: tuple[str, ...]


@dataclass(frozen=True)
class ChapterSource:
    """One chapter as one manual prints it."""

    chip: str
    revision: str
    chapter: str  # file_path of the chapter root, e.g. "ESP32-C3/01-I2C__EN"
    multi_revision: bool  # the chip publishes several manuals (rows must name the revision)
    text: str


def chapter_sources(trm_path: str | os.PathLike[str] | None, progress: bool) -> list[ChapterSource]:
    """Every chapter of every manual with its tag-selected LaTeX (all included files joined)."""
    trm_root = require_trm_tree(trm_path)
    manuals = discover_manuals(trm_root)
    manuals_per_chip = Counter(m.chip for m in manuals)
    sources: list[ChapterSource] = []
    jobs = [(m, r) for m in manuals for r in m.chapter_roots]
    for manual, root in tqdm(
        jobs, desc="source chapters", unit="chapter", disable=not progress, file=sys.stderr
    ):
        scan = scan_chapter(root, manual, trm_root, tags=manual.tags)
        text = "\n".join(body for _, body in scan.texts)
        multi = manuals_per_chip[manual.chip] > 1
        sources.append(ChapterSource(manual.chip, manual.revision, scan.chapter, multi, text))
    return sources


def edition_key(file_path: str) -> str:
    """ESP32-P4's `NN-NAME-latest` chapter is the mainline edition of `NN-NAME`: a chunk identical in
    both editions may be filed under either path, so both paths count for either edition."""
    return re.sub(r"-latest(?=__EN$)", "", file_path)


def word_capture(sources: list[ChapterSource], rows: Iterable[dict[str, Any]]) -> list[ChapterCapture]:
    """Capture per chapter of each manual, against the chunks that chip and revision can see."""
    by_edition: dict[tuple[str, str], list[tuple[dict[str, Any], Counter[str]]]] = defaultdict(list)
    for row in rows:
        if row.get("doc_type") != "trm":
            continue
        bag = word_bag(row.get("text", ""))
        for chip in row.get("chips", []):
            by_edition[(chip, edition_key(row.get("file_path", "")))].append((row, bag))
    results: list[ChapterCapture] = []
    for source in sources:
        wanted = word_bag(delatex(source.text))
        chunks: Counter[str] = Counter()
        matched = 0
        for row, bag in by_edition.get((source.chip, edition_key(source.chapter)), []):
            if row_in_manual(row, source.chip, source.revision, source.multi_revision):
                chunks.update(bag)
                matched += 1
        results.append(
            ChapterCapture(
                source.chip,
                source.revision,
                source.chapter,
                sum(wanted.values()),
                matched,
                capture(wanted, chunks),
                lost_words(wanted, chunks),
            )
        )
    return results


@dataclass(frozen=True)
class RegisterCapture(ManualLabelled):
    chip: str
    revision: str
    name: str
    source_words: int
    ratio: float
    lost_examples: tuple[str, ...]


def chunk_register_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(register key, block text) for each REGISTER_FORMAT block in a chunk: header to next header."""
    lines = text.split("\n")
    starts = [
        i
        for i, line in enumerate(lines)
        if REGISTER_LINE_RE.match(line) and i + 1 < len(lines) and lines[i + 1].startswith("Address:")
    ]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        header = REGISTER_LINE_RE.match(lines[start])
        assert header is not None
        yield register_name_key(header.group(1)), "\n".join(lines[start:end])


def register_capture(sources: list[ChapterSource], rows: Iterable[dict[str, Any]]) -> list[RegisterCapture]:
    """Word capture of each register (name, address, field descriptions) in each manual.

    Finer than a chapter: a field description that loses its value list ("0: Disable, 1: Enable")
    costs a chapter a few percent but a register half its words.
    """
    wanted: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    names: dict[tuple[str, str, str], str] = {}
    multi: dict[str, bool] = {}
    for source in sources:
        multi[source.chip] = source.multi_revision
        for name, _, latex in register_blocks(source.text):
            key = (source.chip, source.revision, register_name_key(name))
            wanted[key].update(word_bag(delatex(latex)))
            names.setdefault(key, name)
    found: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    revisions_of: dict[str, set[str]] = defaultdict(set)
    for chip, revision, _ in wanted:
        revisions_of[chip].add(revision)
    for row in rows:
        if row.get("doc_type") != "trm":
            continue
        blocks = list(chunk_register_blocks(row.get("text", "")))
        if not blocks:
            continue
        for chip in row.get("chips", []):
            for revision in revisions_of.get(chip, ()):
                if row_in_manual(row, chip, revision, multi[chip]):
                    for key, block in blocks:
                        found[(chip, revision, key)].update(word_bag(block))
    results = []
    for key, bag in wanted.items():
        got = found.get(key, Counter())
        results.append(
            RegisterCapture(
                key[0],
                key[1],
                names[key],
                sum(bag.values()),
                capture(bag, got),
                lost_words(bag, got),
            )
        )
    return results


def macro_coverage(
    sources: list[ChapterSource], rows: Iterable[dict[str, Any]]
) -> list[tuple[str, int, int]]:
    """(macro, uses in the sources, raw `\\name` left in chunk text), most used in the sources first.

    Only names the sources use count as survivors, so a C string's `\\n` in a code listing is not one.
    """
    used: Counter[str] = Counter()
    seen: set[str] = set()
    for source in sources:  # a chapter printed in two manuals counts once
        if source.chapter not in seen:
            seen.add(source.chapter)
            used.update(MACRO_RE.findall(source.text))
    raw: Counter[str] = Counter()
    for row in rows:
        if row.get("doc_type") == "trm":
            raw.update(m for m in MACRO_RE.findall(row.get("text", "")) if m in used)
    return sorted(
        ((name, count, raw.get(name, 0)) for name, count in used.items()), key=lambda t: (-t[1], t[0])
    )


def _capture_summary(command: str, unit: str, ratios: list[float], fail_below: float) -> int:
    """Print a capture run's one-line summary; the exit status is 1 when any ratio is under fail_below."""
    median = statistics.median(ratios) if ratios else 1.0
    flagged = sum(ratio < FLAG_BELOW for ratio in ratios)
    failing = sum(ratio < fail_below for ratio in ratios)
    print(
        f"{command}: {len(ratios)} {unit}, median capture {median:.1%}, {flagged} under {FLAG_BELOW:.0%}, "
        f"{failing} under {fail_below:.0%} (failing)",
        file=sys.stderr,
    )
    return 1 if failing else 0


def _run_words(args: argparse.Namespace) -> int:
    rows = load_trm_rows(args.chunks)
    results = word_capture(chapter_sources(args.trm_path, progress=not args.json), rows)
    flagged = sorted((r for r in results if r.ratio < FLAG_BELOW), key=lambda r: r.ratio)
    if args.json:
        median = statistics.median(r.ratio for r in results) if results else 1.0
        print(json.dumps({"median": median, "chapters": [r.__dict__ for r in results]}, indent=1))
    else:
        print(f"chapters under {FLAG_BELOW:.0%} word capture:")
        for r in flagged:
            print(
                f"  {r.ratio:6.1%} {r.label:17} {r.chapter}  ({r.source_words} words, {r.chunk_rows} chunks; "
                f"lost e.g. {', '.join(r.lost_examples[:5])})"
            )
    return _capture_summary("words", "chapters", [r.ratio for r in results], args.fail_below)


def _run_registers(args: argparse.Namespace) -> int:
    rows = load_trm_rows(args.chunks)
    results = register_capture(chapter_sources(args.trm_path, progress=not args.json), rows)
    flagged = sorted((r for r in results if r.ratio < FLAG_BELOW), key=lambda r: (r.ratio, r.label, r.name))
    if args.json:
        print(json.dumps([r.__dict__ for r in flagged], indent=1))
    else:
        print(f"registers under {FLAG_BELOW:.0%} word capture (worst first):")
        for r in flagged[: args.show]:
            print(
                f"  {r.ratio:6.1%} {r.label:17} {r.name}  ({r.source_words} words; "
                f"lost e.g. {', '.join(r.lost_examples[:6])})"
            )
        if len(flagged) > args.show:
            print(f"  ... and {len(flagged) - args.show} more (use --json for all)")
    return _capture_summary("registers", "registers", [r.ratio for r in results], args.fail_below)


def _run_macros(args: argparse.Namespace) -> int:
    rows = load_trm_rows(args.chunks)
    coverage = macro_coverage(chapter_sources(args.trm_path, progress=not args.json), rows)
    surviving = sorted((c for c in coverage if c[2]), key=lambda c: (-c[2], c[0]))
    if args.json:
        print(
            json.dumps([{"macro": n, "source_uses": s, "raw_in_chunks": r} for n, s, r in coverage], indent=1)
        )
    else:
        print(f"{'macro':24} {'source uses':>11} {'raw in chunks':>13}")
        for name, source_uses, raw in coverage[: args.top]:
            mark = "  <- left raw" if raw else ""
            print(f"\\{name:23} {source_uses:11d} {raw:13d}{mark}")
        if surviving:
            print("\nmacros left raw in chunk text, most frequent first:")
            for name, source_uses, raw in surviving:
                print(f"  \\{name}: {raw} raw in chunks ({source_uses} uses in sources)")
    print(
        f"macros: {len(coverage)} distinct macros in the sources, {len(surviving)} left raw in chunk text "
        f"({sum(c[2] for c in surviving)} occurrences)",
        file=sys.stderr,
    )
    return 1 if surviving and args.fail_on_raw else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    words = sub.add_parser("words", help="per-chapter word capture of the chunks against the LaTeX")
    words.add_argument(
        "--fail-below",
        type=float,
        default=DEFAULT_FAIL_BELOW,
        help=f"fail when a chapter captures less than this fraction (default {DEFAULT_FAIL_BELOW})",
    )
    registers = sub.add_parser("registers", help="word capture of each register's name, address and fields")
    registers.add_argument(
        "--fail-below",
        type=float,
        default=DEFAULT_REGISTER_FAIL_BELOW,
        help=f"fail when a register captures less than this fraction (default {DEFAULT_REGISTER_FAIL_BELOW})",
    )
    registers.add_argument("--show", type=int, default=40, help="flagged registers printed")
    macros = sub.add_parser("macros", help="LaTeX macros in the sources and those left raw in chunk text")
    macros.add_argument("--top", type=int, default=40, help="rows of the frequency table to print")
    macros.add_argument("--fail-on-raw", action="store_true", help="exit 1 when any macro is left raw")
    for p in (words, registers, macros):
        p.add_argument("chunks", help="trm_chunks.jsonl written by ingest_trm.py")
        p.add_argument(
            "--trm-path", default=os.environ.get("TRM_PATH"), help="TRM LaTeX tree (default: $TRM_PATH)"
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    if args.command in ("words", "registers") and not 0 < args.fail_below <= 1:
        print("error: --fail-below must be a fraction in (0, 1]", file=sys.stderr)
        return 2
    runners = {"words": _run_words, "registers": _run_registers, "macros": _run_macros}
    try:
        return runners[args.command](args)
    except (TrmTreeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
