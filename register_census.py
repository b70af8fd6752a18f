"""Independent register census of the TRM LaTeX, and a check that every register reached a chunk.

Why a second reader: a checker that shared latex_parser's include logic would share its blind spots
(DESIGN §4, §9), so this module never imports the parser. It does its own crude scanning: one manual
per aggregator file (`<chip>-main__EN.tex`, ESP32-P4's `-chip-revision-v1.3__EN.tex`) whose chapters
are the numbered roots it includes (ESP32-C61's include chapters of the C5/H2/P4 folders), recursive
includes with path macros, comment stripping, `\\iffalse` blocks dropped, and tag selection with the
manual's tags (its `\\chipname`, plus the aggregator's `\\usetag`). Include names whose letter case
differs from the file on disk are resolved case-insensitively *and reported*, so a parser that misses
them shows up as a shortfall instead of hiding behind a shared omission.

    uv run register_census.py source [--trm-path DIR] [--json]   # exit 1 on an unresolved include
    uv run register_census.py check trm_chunks.jsonl [--trm-path DIR] [--json]
        # exit 1 when a selected register is missing from the chunks, lacks one of its named bit
        # fields, is split across chunks, or when a chunk holds a register this chip/revision's
        # manual does not print; exit 2 on bad input
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tqdm import tqdm

from chip_vocab import chips

CHAPTER_ROOT_RE = re.compile(r"^\d{2}-.+__EN\.tex$")
MAINLINE_AGGREGATOR_SUFFIX = "-main__EN.tex"
REVISION_AGGREGATOR_RE = re.compile(r"-chip-revision-(v[\d.]+)__EN\.tex$")
# Folders LaTeX finds files in besides the chip folder (the repository's TEXINPUTS equivalents).
SHARED_INCLUDE_DIRS = ("00-shared/config", "00-shared/front-end-matter", "00-trm-shared")
INCLUDE_RE = re.compile(
    r"\\(input|subfileinclude|subfile|include|InputIfFileExists)(?![A-Za-z])\s*\{([^{}]*)\}"
)
PATH_MACRO_RE = re.compile(
    r"\\def\s*\\([A-Za-z]+)\s*\{([^{}\\]*)\}|\\(?:re)?newcommand\s*\{?\\([A-Za-z]+)\}?\s*\{([^{}\\]*)\}"
)
TAG_COMMAND_RE = re.compile(r"\\(iftagged|tagged|untagged)(?![A-Za-z])")
REGISTER_BEGIN_RE = re.compile(r"\\begin\s*\{register\}")
VERBATIM_ENVS = ("lstlisting", "verbatim")
PARAMETER_NOTE_RE = re.compile(r"\([^()]*:[^()]*\)")
REGFIELD_RE = re.compile(r"\\regfield(?:rotate)?(?![A-Za-z])")
CONDITIONAL_RE = re.compile(r"\\(if[A-Za-z]*|fi|else)(?![A-Za-z])")
WHITESPACE_RE = re.compile(r"\s+")
# In a register-name argument: colour and rotation commands with their arguments, then other commands.
NAME_DECORATION_RE = re.compile(r"\\(?:textcolor|rotatebox)\s*(?:\[[^]]*\])?\s*\{[^{}]*\}")
NAME_COMMAND_RE = re.compile(r"\\[A-Za-z]+\*?")


class TrmTreeError(ValueError):
    """The given path is not a TRM LaTeX tree (CLI exit 2)."""


# ----------------------------------------------------------------------------- LaTeX scanning


def strip_comments(text: str) -> str:
    """Drop `%` comments (keeping line breaks) except inside verbatim-like environments.

    Commented-out includes and registers are common in the TRM; left in, they look like hundreds
    of broken includes and phantom registers.
    """
    out: list[str] = []
    verbatim_env: str | None = None
    for line in text.split("\n"):
        if verbatim_env:
            out.append(line)
            if f"\\end{{{verbatim_env}}}" in line:
                verbatim_env = None
            continue
        cut = _comment_start(line)
        kept = line if cut is None else line[:cut]
        out.append(kept)
        for env in VERBATIM_ENVS:
            begin = kept.rfind(f"\\begin{{{env}}}")
            if begin >= 0 and f"\\end{{{env}}}" not in kept[begin:]:
                verbatim_env = env
                out[-1] = line  # a comment char on the \begin line of a listing is listing text
    return "\n".join(out)


def _comment_start(line: str) -> int | None:
    """Index of the first `%` not escaped by an odd run of backslashes (found by `find`: hot path)."""
    percent = line.find("%")
    while percent >= 0:
        run_start = percent
        while run_start > 0 and line[run_start - 1] == "\\":
            run_start -= 1
        if (percent - run_start) % 2 == 0:
            return percent
        percent = line.find("%", percent + 1)
    return None


def read_group(text: str, pos: int) -> tuple[str, int] | None:
    """Read a `{...}` group starting at or after whitespace from `pos`; None if there is none.

    Escaped braces do not count; an unclosed group returns None rather than swallowing the file.
    """
    i = pos
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    j = i
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
        j += 1
    return None


def skip_optional(text: str, pos: int, max_span: int | None = None) -> int:
    """Skip one `[...]` optional argument (and leading whitespace) if present.

    `max_span` caps how far the closing `]` may be, for text where a lone `[` is prose.
    """
    i = pos
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == "[":
        close = text.find("]", i)
        if close > 0 and (max_span is None or close < i + max_span):
            return close + 1
    return pos


def tag_list(arg: str) -> list[str]:
    """Tag names of a `\\tagged{A, B}` argument (the tagging package compares names, trimmed)."""
    return [t.strip() for t in arg.split(",") if t.strip()]


def select_tags(text: str, tags: frozenset[str]) -> str:
    """Evaluate `\\iftagged{T}{yes}{no}`, `\\tagged{T}{text}`, `\\untagged{T}{text}` for `tags`.

    Works on brace groups, not environments, so a branch holding an unbalanced `\\begin{register}`
    (two begins, one end across the branches) is selected correctly.
    """
    out: list[str] = []
    pos = 0
    while True:
        match = TAG_COMMAND_RE.search(text, pos)
        if not match:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos : match.start()])
        command = match.group(1)
        arity = 3 if command == "iftagged" else 2
        args: list[str] = []
        cursor = match.end()
        for _ in range(arity):
            group = read_group(text, cursor)
            if group is None:
                break
            args.append(group[0])
            cursor = group[1]
        if len(args) < arity:  # malformed: keep the command text, move on
            out.append(match.group(0))
            pos = match.end()
            continue
        active = any(t in tags for t in tag_list(args[0]))
        if command == "iftagged":
            chosen = args[1] if active else args[2]
        elif command == "tagged":
            chosen = args[1] if active else ""
        else:
            chosen = "" if active else args[1]
        out.append(select_tags(chosen, tags))
        pos = cursor


def drop_iffalse(text: str) -> str:
    """Remove `\\iffalse ... \\fi` blocks (keeping an `\\else` part): the manual never prints them.

    The TRM parks withdrawn registers this way (ESP32-C3 AES_ENDIAN_REG). Nested TeX conditionals
    are counted; `\\iftagged` is a macro with brace arguments, not a conditional, so it is not.
    """
    out: list[str] = []
    pos = 0
    while (start := text.find("\\iffalse", pos)) >= 0:
        out.append(text[pos:start])
        depth, cursor, else_at = 1, start + len("\\iffalse"), None
        for match in CONDITIONAL_RE.finditer(text, cursor):
            word = match.group(1)
            if word == "fi":
                depth -= 1
            elif word == "else":
                if depth == 1:
                    else_at = match.end()
            elif word != "iftagged":
                depth += 1
            if depth == 0:
                if else_at is not None:
                    out.append(text[else_at : match.start()])
                pos = match.end()
                break
        else:  # no closing \fi: TeX would skip to the end of the file
            return "".join(out)
    out.append(text[pos:])
    return "".join(out)


def document_body(text: str) -> str:
    """The text between `\\begin{document}` and `\\end{document}`, or all of it for a bare subfile."""
    begin = text.find("\\begin{document}")
    if begin < 0:
        return text
    end = text.find("\\end{document}", begin)
    return text[begin + len("\\begin{document}") : end if end >= 0 else len(text)]


def register_name_key(name: str) -> str:
    """Comparison key of a register name: parameter notes dropped, whitespace removed, case kept.

    The note can sit mid-name (`mhpmcounter\\regindex{n}(\\regindex{n}: 3-12)h` is mhpmcounternh,
    not mhpmcountern, which is another register), so notes are cut out, not cut off.
    """
    without_notes = PARAMETER_NOTE_RE.sub("", name)
    return WHITESPACE_RE.sub("", without_notes.split("(", 1)[0])


def latex_name_to_text(arg: str) -> str:
    """Render a register-name argument as text: `I2C\\_X\\regindex{n}` -> `I2C_Xn`."""
    text = arg.replace("\\_", "_")
    text = NAME_DECORATION_RE.sub("", text)
    text = NAME_COMMAND_RE.sub("", text)
    text = text.replace("{", "").replace("}", "")
    return WHITESPACE_RE.sub(" ", text).strip()


# ----------------------------------------------------------------------------- the TRM tree


class ManualLabelled:
    """Mixin for records of one chip's one manual: `label` names it as reports print it."""

    chip: str
    revision: str

    @property
    def label(self) -> str:
        return f"{self.chip}@{self.revision}"


@dataclass(frozen=True)
class Manual(ManualLabelled):
    """One published manual: a chip, a revision label, its chapter roots and active tags."""

    chip: str
    revision: str
    folder: Path
    tags: frozenset[str]
    chapter_roots: tuple[Path, ...]


@dataclass(frozen=True)
class RegisterHit:
    """One `\\begin{register}` reached from a chapter root."""

    name: str
    key: str
    address: str
    file: str  # relative to the TRM tree
    chapter: str  # chapter file_path, e.g. "ESP32-C3/01-I2C__EN"
    case_include: tuple[str, str] | None  # (file, include) of a case-mismatched include on its path
    continuation: bool = False  # the PDF's "Continued from the previous page" repeat of a register
    fields: frozenset[str] = frozenset()  # keys of its named \\regfield bit fields (not reserved)


@dataclass(frozen=True)
class IncludeProblem:
    """An include whose name does not match a file exactly (case) or at all (unresolved)."""

    kind: str  # "case" or "unresolved"
    chip: str
    from_file: str
    include: str
    resolved: str | None


@dataclass
class ChapterScan:
    """What one chapter root holds under one tag selection (or none)."""

    chapter: str
    registers: list[RegisterHit] = field(default_factory=list)
    problems: list[IncludeProblem] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)  # (relative file, body text)


def require_trm_tree(trm_path: str | os.PathLike[str] | None) -> Path:
    """Return the TRM tree root or raise TrmTreeError saying what was expected."""
    if not trm_path:
        raise TrmTreeError("no TRM tree given: pass --trm-path DIR or set TRM_PATH")
    root = Path(trm_path)
    if not root.is_dir():
        raise TrmTreeError(f"TRM path {root} is not a directory")
    folders = [c.trm_folder for c in chips().values() if c.trm_folder and (root / c.trm_folder).is_dir()]
    if not folders:
        expected = ", ".join(c.trm_folder for c in chips().values() if c.trm_folder)
        raise TrmTreeError(f"{root} is not a TRM LaTeX tree: expected chip folders such as {expected}")
    return root


def chip_tag(folder: Path) -> str:
    """The chip's own tag: `\\chipname` from its chip-spec-settings.sty (`\\usetag{\\chipseries}`)."""
    settings = folder / "00-chip-spec-content" / "chip-spec-settings.sty"
    if settings.is_file():
        match = re.search(
            r"\\newcommand\s*\{?\\chipname\}?\s*\{([^{}]*)\}", strip_comments(settings.read_text())
        )
        if match:
            return match.group(1).strip()
    return folder.name


def discover_manuals(trm_root: Path) -> list[Manual]:
    """Every manual in the tree, one per aggregator file, in chips.yaml order.

    Chapter roots are the numbered `NN-NAME__EN.tex` files (English filter at the root only). When a
    chip publishes more than one manual (ESP32-P4), a root belongs to the manuals whose aggregator
    includes it; each aggregator's `\\usetag` adds to the chip tag.
    """
    manuals: list[Manual] = []
    for chip in chips().values():
        if not chip.trm_folder or not (trm_root / chip.trm_folder).is_dir():
            continue
        folder = trm_root / chip.trm_folder
        roots = sorted(p for p in folder.iterdir() if p.is_file() and CHAPTER_ROOT_RE.match(p.name))
        base_tag = chip_tag(folder)
        aggregators = _aggregators(folder)
        if not aggregators:
            manuals.append(Manual(chip.id, chip.revisions[0], folder, frozenset({base_tag}), tuple(roots)))
            continue
        for revision, aggregator in aggregators:
            if revision not in chip.revisions:
                raise TrmTreeError(
                    f"{aggregator} names revision {revision!r}, which chips.yaml does not list for "
                    f"{chip.id} (valid: {', '.join(chip.revisions)})"
                )
            text = strip_comments(aggregator.read_text(errors="replace"))
            tags = {base_tag} | {
                t for m in re.finditer(r"\\usetag\s*\{([^{}\\]*)\}", text) for t in tag_list(m.group(1))
            }
            included = _aggregated_chapters(text, aggregator, folder, trm_root)
            if len(aggregators) == 1:  # every numbered root is a chapter, listed or not
                included += [r for r in roots if r not in included]
            manuals.append(Manual(chip.id, revision, folder, frozenset(tags), tuple(included)))
    if not manuals:
        raise TrmTreeError(f"{trm_root} holds no chip folder with chapter roots")
    return manuals


def _aggregated_chapters(text: str, aggregator: Path, folder: Path, trm_root: Path) -> list[Path]:
    """Chapter roots an aggregator includes, in order; some live in another chip's folder.

    ESP32-C61's manual, for one, takes UART, SYSTIMER, LEDPWM... from the ESP32-C5/H2/P4 folders
    and selects its own text in them with its tag, so those chapters belong to its census.
    """
    chapters: list[Path] = []
    for match in INCLUDE_RE.finditer(text):
        target, _ = resolve_include(match.group(2).strip(), aggregator, folder, trm_root)
        if target is not None and CHAPTER_ROOT_RE.match(target.name) and target not in chapters:
            chapters.append(target)
    return chapters


def _aggregators(folder: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for path in sorted(folder.glob("*__EN.tex")):
        if CHAPTER_ROOT_RE.match(path.name):
            continue
        if path.name.endswith(MAINLINE_AGGREGATOR_SUFFIX):
            found.append(("mainline", path))
        elif match := REVISION_AGGREGATOR_RE.search(path.name):
            found.append((match.group(1), path))
    return found


@cache
def _listing(directory: Path) -> dict[str, str]:
    """Lower-cased name -> real name for one directory (for case-insensitive resolution)."""
    try:
        return {entry.lower(): entry for entry in os.listdir(directory)}
    except OSError:
        return {}


def _resolve_case_insensitive(base: Path, relative: str) -> Path | None:
    current = base
    for part in Path(relative).parts:
        if part in (".", ""):
            continue
        if part == "..":
            current = current.parent
            continue
        real = _listing(current).get(part.lower())
        if real is None:
            return None
        current = current / real
    return current if current.is_file() else None


def resolve_include(
    name: str, including: Path, chip_folder: Path, trm_root: Path
) -> tuple[Path | None, bool]:
    """Find an include's file as LaTeX would from the chip folder; (path, needed_case_folding)."""
    bases = [chip_folder, including.parent, chip_folder / "00-chip-spec-content"]
    bases += [trm_root / d for d in SHARED_INCLUDE_DIRS]
    names = [name] if name.endswith((".tex", ".sty")) else [name + ".tex", name]
    for base in bases:
        for candidate in names:
            path = Path(os.path.normpath(base / candidate))
            if path.is_file():
                return path, False
    for base in bases:
        for candidate in names:
            path = _resolve_case_insensitive(Path(os.path.normpath(base)), os.path.normpath(candidate))
            if path is not None:
                return path, True
    return None, False


def scan_chapter(root: Path, manual: Manual, trm_root: Path, tags: frozenset[str] | None) -> ChapterScan:
    """Walk one chapter root's include tree; `tags=None` keeps every tag branch (pre-selection count)."""
    chapter = f"{root.parent.name}/{root.stem}"
    scan = ChapterScan(chapter)
    macros: dict[str, str] = {}
    _walk(root, manual, trm_root, tags, scan, macros, stack=[], case_include=None)
    return scan


def _walk(
    path: Path,
    manual: Manual,
    trm_root: Path,
    tags: frozenset[str] | None,
    scan: ChapterScan,
    macros: dict[str, str],
    stack: list[Path],
    case_include: tuple[str, str] | None,
) -> None:
    rel = path.relative_to(trm_root).as_posix()
    text = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
    if tags is not None:
        text = select_tags(drop_iffalse(text), tags)
    body_start = text.find("\\begin{document}")
    scan.texts.append((rel, document_body(text)))
    scan.registers.extend(_registers_in(text, rel, scan.chapter, case_include))
    events = sorted(
        [(m.start(), "macro", m) for m in PATH_MACRO_RE.finditer(text)]
        + [(m.start(), "include", m) for m in INCLUDE_RE.finditer(text)],
        key=lambda e: e[0],
    )
    for position, kind, match in events:
        if kind == "macro":
            name = match.group(1) or match.group(3)
            macros[name] = (match.group(2) if match.group(1) else match.group(4)).strip()
            continue
        command, raw = match.group(1), match.group(2).strip()
        if command == "InputIfFileExists" or (0 <= position < body_start and command == "input"):
            continue  # optional by definition / preamble inputs are style files, not content
        name = re.sub(r"\\([A-Za-z]+)\s*", lambda m: macros.get(m.group(1), m.group(0)), raw)
        target, case_folded = resolve_include(name, path, manual.folder, trm_root)
        if target is None:
            scan.problems.append(IncludeProblem("unresolved", manual.chip, rel, raw, None))
            continue
        if case_folded:
            scan.problems.append(
                IncludeProblem("case", manual.chip, rel, raw, target.relative_to(trm_root).as_posix())
            )
        if target in stack or target == path:
            continue
        origin = case_include or ((rel, raw) if case_folded else None)
        _walk(target, manual, trm_root, tags, scan, macros, [*stack, path], origin)


def register_blocks(text: str) -> Iterator[tuple[str, str, str]]:
    """(name, address, LaTeX from `\\begin{register}` to its `\\end{register}`) for each register."""
    for match in REGISTER_BEGIN_RE.finditer(text):
        cursor = skip_optional(text, match.end())
        placement = read_group(text, cursor)
        name_group = read_group(text, placement[1]) if placement else None
        if name_group is None:
            name, address = "?", ""
        else:
            name = latex_name_to_text(name_group[0])
            address_group = read_group(text, name_group[1])
            address = latex_name_to_text(address_group[0]) if address_group else ""
        end = text.find("\\end{register}", match.end())
        yield name, address, text[match.start() : end if end >= 0 else len(text)]


def _registers_in(
    text: str, rel: str, chapter: str, case_include: tuple[str, str] | None
) -> Iterator[RegisterHit]:
    for name, address, latex in register_blocks(text):
        continuation = "continued from the previous page" in latex.lower()
        fields = frozenset(field_names(latex))
        yield RegisterHit(
            name, register_name_key(name), address, rel, chapter, case_include, continuation, fields
        )


def field_names(latex: str) -> Iterator[str]:
    """Keys of the named bit fields of one register's LaTeX (`\\regfield{NAME}{width}{lsb}{reset}`)."""
    for match in REGFIELD_RE.finditer(latex):
        group = read_group(latex, match.end())
        name = latex_name_to_text(group[0]) if group else ""
        if name and "reserved" not in name.lower():
            yield WHITESPACE_RE.sub("", name)


# ----------------------------------------------------------------------------- the census


@dataclass
class ManualCensus:
    """Registers of one manual before and after tag selection."""

    manual: Manual
    before: list[RegisterHit]
    after: list[RegisterHit]

    def fields(self) -> dict[str, set[str]]:
        """Register key -> named bit fields over all its occurrences (continuations add none)."""
        union: dict[str, set[str]] = defaultdict(set)
        for hit in self.after:
            union[hit.key] |= hit.fields
        return union

    def names(self) -> dict[str, RegisterHit]:
        """Distinct register keys after tag selection -> first occurrence (for file attribution)."""
        first: dict[str, RegisterHit] = {}
        for hit in self.after:
            first.setdefault(hit.key, hit)
        return first


@dataclass
class Census:
    manuals: list[ManualCensus]
    problems: list[IncludeProblem]
    raw_begin_total: int  # \begin{register} in every file reached, each file once, no tag selection
    selected_total: int  # register occurrences after tag selection, shared P4 chapters counted once
    selected_whole_total: int  # the same without page-continuation repeats of a register

    def case_mismatches(self) -> list[dict[str, Any]]:
        """Each case-mismatched include once, with the registers its file tree holds (selected)."""
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        for problem in self.problems:
            if problem.kind != "case":
                continue
            key = (problem.chip, problem.from_file, problem.include)
            seen.setdefault(key, {**problem.__dict__, "registers": set(), "begin_register": 0})
        for mc in self.manuals:
            per_include: dict[tuple[str, str, str], int] = defaultdict(int)
            for hit in mc.after:
                key = (mc.manual.chip, *hit.case_include) if hit.case_include else None
                if key in seen:
                    seen[key]["registers"].add(hit.key)
                    per_include[key] += 1
            for key, count in per_include.items():  # P4 manuals share chapters: count each once
                seen[key]["begin_register"] = max(seen[key]["begin_register"], count)
        return [{**e, "registers": sorted(e["registers"])} for e in seen.values()]

    def revision_splits(self) -> dict[str, dict[str, int]]:
        """For chips with several manuals: distinct registers common to all and only in each."""
        by_chip: dict[str, list[ManualCensus]] = defaultdict(list)
        for mc in self.manuals:
            by_chip[mc.manual.chip].append(mc)
        splits: dict[str, dict[str, int]] = {}
        for chip, group in by_chip.items():
            if len(group) < 2:
                continue
            sets = {mc.manual.revision: set(mc.names()) for mc in group}
            common = set.intersection(*sets.values())
            splits[chip] = {"common": len(common)} | {
                f"{rev}-only": len(keys - set().union(*(v for r, v in sets.items() if r != rev)))
                for rev, keys in sets.items()
            }
        return splits

    def unresolved(self) -> list[IncludeProblem]:
        return sorted(
            {p for p in self.problems if p.kind == "unresolved"}, key=lambda p: (p.chip, p.from_file)
        )


def take_census(trm_path: str | os.PathLike[str], progress: bool = False) -> Census:
    """Count registers per manual in the LaTeX, before and after tag selection."""
    trm_root = require_trm_tree(trm_path)
    manuals = discover_manuals(trm_root)
    results: list[ManualCensus] = []
    problems: list[IncludeProblem] = []
    raw_by_file: dict[str, int] = {}
    selected_ids: set[tuple[str, str, str, int, bool]] = set()
    jobs = [(m, r) for m in manuals for r in m.chapter_roots]
    bar = tqdm(total=len(jobs), desc="census", unit="chapter", disable=not progress, file=sys.stderr)
    for manual in manuals:
        before: list[RegisterHit] = []
        after: list[RegisterHit] = []
        for root in manual.chapter_roots:
            raw = scan_chapter(root, manual, trm_root, tags=None)
            selected = scan_chapter(root, manual, trm_root, tags=manual.tags)
            before.extend(raw.registers)
            after.extend(selected.registers)
            problems.extend(selected.problems)
            for rel, body in raw.texts:
                raw_by_file.setdefault(rel, len(REGISTER_BEGIN_RE.findall(body)))
            ordinal: dict[tuple[str, str, str], int] = defaultdict(int)
            for hit in selected.registers:
                ident = (hit.file, hit.key, hit.address)
                ordinal[ident] += 1
                selected_ids.add((*ident, ordinal[ident], hit.continuation))
            bar.update()
        results.append(ManualCensus(manual, before, after))
    bar.close()
    whole = sum(1 for ident in selected_ids if not ident[-1])
    return Census(
        results, sorted(set(problems), key=str), sum(raw_by_file.values()), len(selected_ids), whole
    )


def census_json(census: Census) -> dict[str, Any]:
    return {
        "manuals": [
            {
                "chip": mc.manual.chip,
                "revision": mc.manual.revision,
                "folder": mc.manual.folder.name,
                "tags": sorted(mc.manual.tags),
                "chapters": len(mc.manual.chapter_roots),
                "begin_register_before_tags": len(mc.before),
                "begin_register_after_tags": len(mc.after),
                "distinct_registers": len(mc.names()),
                "registers": {
                    k: {"file": h.file, "chapter": h.chapter} for k, h in sorted(mc.names().items())
                },
            }
            for mc in census.manuals
        ],
        "raw_begin_register_total": census.raw_begin_total,
        "selected_register_total": census.selected_total,
        "selected_register_total_without_continuations": census.selected_whole_total,
        "revision_splits": census.revision_splits(),
        "case_mismatched_includes": census.case_mismatches(),
        "unresolved_includes": [p.__dict__ for p in census.unresolved()],
    }


def print_census(census: Census) -> None:
    print(f"{'chip':10} {'revision':9} {'chapters':>8} {'before':>7} {'after':>7} {'distinct':>8}")
    for mc in census.manuals:
        print(
            f"{mc.manual.chip:10} {mc.manual.revision:9} {len(mc.manual.chapter_roots):8d} "
            f"{len(mc.before):7d} {len(mc.after):7d} {len(mc.names()):8d}"
        )
    for chip, split in census.revision_splits().items():
        print(
            f"{chip}: "
            + ", ".join(f"{label} {count}" for label, count in split.items())
            + " distinct registers"
        )
    mismatches = census.case_mismatches()
    print(f"\ncase-mismatched includes: {len(mismatches)}")
    for entry in mismatches:
        print(
            f"  {entry['chip']}: {entry['from_file']} includes {entry['include']!r} -> {entry['resolved']} "
            f"({len(entry['registers'])} registers, {entry['begin_register']} \\begin{{register}})"
        )
    unresolved = census.unresolved()
    print(f"unresolved includes: {len(unresolved)}")
    for problem in unresolved:
        print(f"  {problem.chip}: {problem.from_file} includes {problem.include!r}")


# ----------------------------------------------------------------------------- reading chunks

REGISTER_LINE_RE = re.compile(r"^Register (\S.*?)\s*$")
FIELD_LINE_RE = re.compile(r"^- (.+?) \[\d+(?::\d+)?\]")
# A parameterised register's field listed under its described name (``LEDC_TIMER_SEL_CHn``) names the
# drawn one (``LEDC_TIMER_SEL_CH0``) at the end of its line: that line accounts for the drawn field.
DRAWN_AS_RE = re.compile(r"\(the register drawing labels it (\S+)\)$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*_[A-Za-z0-9_]*$")


@dataclass
class ChunkRegisters:
    """Registers found in one chunk, and signs that a register was split across chunks."""

    complete: list[str] = field(default_factory=list)  # keys with a header and an Address line
    fields: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # key -> field lines
    headers_without_address: list[str] = field(default_factory=list)
    orphan_address: bool = False
    orphan_fields: bool = False


def registers_in_chunk(text: str) -> ChunkRegisters:
    """Parse REGISTER_FORMAT.md blocks out of one chunk's text."""
    found = ChunkRegisters()
    lines = text.split("\n")
    first_header: int | None = None
    current: str | None = None
    for i, line in enumerate(lines):
        header = REGISTER_LINE_RE.match(line)
        next_line = lines[i + 1] if i + 1 < len(lines) else ""
        if (field_line := FIELD_LINE_RE.match(line)) and current is not None:
            found.fields[current].add(WHITESPACE_RE.sub("", field_line.group(1)))
            if drawn := DRAWN_AS_RE.search(line):
                found.fields[current].add(drawn.group(1))
        if header:
            key = register_name_key(header.group(1))
            if next_line.startswith("Address:"):
                found.complete.append(key)
                current = key
                first_header = i if first_header is None else first_header
            elif IDENTIFIER_RE.match(header.group(1).split(" (", 1)[0]):  # not prose "Register X does..."
                found.headers_without_address.append(key)
        elif line.startswith("Address:") and not (i > 0 and REGISTER_LINE_RE.match(lines[i - 1])):
            found.orphan_address = True
        elif FIELD_LINE_RE.match(line) and first_header is None:
            found.orphan_fields = True
    return found


def row_in_manual(row: dict[str, Any], chip: str, revision: str, multi_revision: bool) -> bool:
    """Whether a chunk row is part of the chip's `revision` manual.

    A chip with one manual accepts rows without revision labels; when the chip publishes several
    (ESP32-P4), a row must name the revision, or its text would count for a manual that lacks it.
    """
    if chip not in row.get("chips", []):
        return False
    revisions = row.get("revisions", [])
    return revision in revisions or (not multi_revision and not revisions)


def load_trm_rows(chunks_path: str) -> list[dict[str, Any]]:
    """The `trm` rows of a chunks JSONL; ValueError (CLI exit 2) when the file is absent or has none."""
    from schema import read_jsonl

    if not Path(chunks_path).is_file():
        raise ValueError(f"chunks file {chunks_path} does not exist (write it with ingest_trm.py --out-path)")
    rows = [r for r in read_jsonl(chunks_path) if r.get("doc_type") == "trm"]
    if not rows:
        raise ValueError(f"{chunks_path} holds no rows with doc_type 'trm'")
    return rows


@dataclass
class ManualCheck:
    manual: Manual
    source: dict[str, RegisterHit]
    found: set[str]
    missing: list[RegisterHit]
    extra: list[str]
    split: list[dict[str, Any]]
    incomplete: list[tuple[RegisterHit, list[str]]]  # registers that reached a chunk without some fields


def check_chunks(census: Census, rows: Iterable[dict[str, Any]]) -> list[ManualCheck]:
    """Compare, per manual, the source register set with registers that reached a chunk whole."""
    trm_rows = [r for r in rows if r.get("doc_type") == "trm"]
    parsed = [(row, registers_in_chunk(row.get("text", ""))) for row in trm_rows]
    revisions_per_chip: dict[str, int] = defaultdict(int)
    for mc in census.manuals:
        revisions_per_chip[mc.manual.chip] += 1
    results: list[ManualCheck] = []
    for mc in census.manuals:
        manual = mc.manual
        multi = revisions_per_chip[manual.chip] > 1
        found: set[str] = set()
        found_fields: dict[str, set[str]] = defaultdict(set)
        split: list[dict[str, Any]] = []
        for row, regs in parsed:
            if not row_in_manual(row, manual.chip, manual.revision, multi):
                continue
            found.update(regs.complete)
            for key, names in regs.fields.items():
                found_fields[key] |= names
            reasons = []
            if regs.headers_without_address:
                reasons.append("header without Address line: " + ", ".join(regs.headers_without_address))
            if regs.orphan_address:
                reasons.append("Address line without its Register header")
            if regs.orphan_fields:
                reasons.append("field lines without their Register header")
            if reasons:
                split.append(
                    {
                        "file_path": row.get("file_path"),
                        "chunk_index": row.get("chunk_index"),
                        "problems": reasons,
                    }
                )
        source = mc.names()
        missing = [hit for key, hit in sorted(source.items()) if key not in found]
        extra = sorted(found - set(source))
        incomplete = [
            (source[key], sorted(wanted - found_fields[key]))
            for key, wanted in sorted(mc.fields().items())
            if key in found and wanted - found_fields[key]
        ]
        results.append(ManualCheck(manual, source, found, missing, extra, split, incomplete))
    return results


def check_json(results: list[ManualCheck]) -> dict[str, Any]:
    return {
        "manuals": [
            {
                "chip": r.manual.chip,
                "revision": r.manual.revision,
                "source": len(r.source),
                "in_chunks": len(r.source) - len(r.missing),
                "missing": [{"name": h.name, "file": h.file, "chapter": h.chapter} for h in r.missing],
                "extra": r.extra,
                "split": r.split,
                "incomplete": [
                    {"name": h.name, "file": h.file, "missing_fields": fields} for h, fields in r.incomplete
                ],
            }
            for r in results
        ]
    }


def print_check(results: list[ManualCheck], show: int | None) -> None:
    for r in results:
        limit = len(r.missing) + len(r.split) + len(r.incomplete) if show is None else show
        for hit in r.missing[:limit]:
            print(f"MISSING {r.manual.label} {hit.name}  ({hit.file})")
        for hit, fields in r.incomplete[:limit]:
            print(f"FIELDS  {r.manual.label} {hit.name} lacks {', '.join(fields)}  ({hit.file})")
        if len(r.missing) > limit:
            print(f"MISSING {r.manual.label} ... and {len(r.missing) - limit} more (use --json for all)")
        for entry in r.split[:limit]:
            print(
                f"SPLIT   {r.manual.label} {entry['file_path']}#{entry['chunk_index']}: "
                + "; ".join(entry["problems"])
            )
        if r.extra:
            shown = ", ".join(r.extra if show is None else r.extra[:show])
            print(
                f"EXTRA   {r.manual.label} {len(r.extra)} registers in chunks but not selected in source: "
                + shown
            )
    print(
        f"\n{'chip':10} {'revision':9} {'source':>7} {'chunks':>7} {'missing':>7} {'fields':>6} "
        f"{'extra':>6} {'split':>6}"
    )
    for r in results:
        print(
            f"{r.manual.chip:10} {r.manual.revision:9} {len(r.source):7d} "
            f"{len(r.source) - len(r.missing):7d} {len(r.missing):7d} {len(r.incomplete):6d} "
            f"{len(r.extra):6d} {len(r.split):6d}"
        )


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    source = sub.add_parser("source", help="count registers per chip/revision in the LaTeX sources")
    check = sub.add_parser("check", help="compare the source census with the registers in a chunks JSONL")
    check.add_argument("chunks", help="trm_chunks.jsonl written by ingest_trm.py")
    check.add_argument(
        "--show", type=int, default=None, help="missing/split entries printed per manual (default: all)"
    )
    for p in (source, check):
        p.add_argument(
            "--trm-path", default=os.environ.get("TRM_PATH"), help="TRM LaTeX tree (default: $TRM_PATH)"
        )
        p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    args = parser.parse_args(argv)
    try:
        census = take_census(args.trm_path, progress=not args.json)
        if args.command == "source":
            return _run_source(census, args.json)
        return _run_check(census, args.chunks, args.json, args.show)
    except (TrmTreeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run_source(census: Census, as_json: bool) -> int:
    if as_json:
        print(json.dumps(census_json(census), indent=1))
    else:
        print_census(census)
    unresolved = census.unresolved()
    after = sum(len(mc.after) for mc in census.manuals)
    print(
        f"census: {len(census.manuals)} manuals, "
        f"{census.raw_begin_total} \\begin{{register}} before tag selection, "
        f"{census.selected_total} after ({census.selected_whole_total} without page-continuation repeats, "
        f"{after} counting each P4 manual), "
        f"{len(census.case_mismatches())} case-mismatched includes, {len(unresolved)} unresolved",
        file=sys.stderr,
    )
    return 1 if unresolved else 0


def _run_check(census: Census, chunks_path: str, as_json: bool, show: int | None) -> int:
    results = check_chunks(census, load_trm_rows(chunks_path))
    if as_json:
        print(json.dumps(check_json(results), indent=1))
    else:
        print_check(results, show)
    missing = sum(len(r.missing) for r in results)
    split = sum(len(r.split) for r in results)
    extra = sum(len(r.extra) for r in results)
    incomplete = sum(len(r.incomplete) for r in results)
    source = sum(len(r.source) for r in results)
    print(
        f"check: {source - missing - incomplete}/{source} registers reached a chunk whole; "
        f"{missing} missing, {incomplete} without some fields, {split} chunks with split registers, "
        f"{extra} unexpected",
        file=sys.stderr,
    )
    return 1 if missing or split or extra or incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
