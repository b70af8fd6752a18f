"""Ingest one chip's ESP-IDF docs build (docutils XML) into chunk rows, then check nothing was lost.

    uv run ingest_sphinx_xml.py XML_DIR --chip esp32c3 --out-path chunks_v6.1-dev_esp32c3.jsonl \
        [--idf-path /path/to/esp-idf]

The ESP-IDF release comes from the build's SOURCE.md (or --idf-path's git describe): every row
names its release series and exact build (docs/releases.md).

Sphinx pages are the files whose root element is ``<document>``; doxygen's own XML shares the tree
and is ignored. A page that cannot be read is named and skipped, and the run exits 1 at the end.
After writing, three checkers compare the output against the XML itself (DESIGN §9); they read
the XML again on their own and share no rendering code with the ingest, so a text the walker
drops is a text the checkers still count:
  - word capture per page (pages under 80% are listed and fail the run);
  - a scan for any ``{IDF_TARGET_`` placeholder left in the text;
  - an API census: every function ``desc`` reached one chunk with its name and its parameters.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree
from tqdm import tqdm

from chip_vocab import chips, validate_chip
from chunk_format import PATH_SEPARATOR, chunk_body, section_path_of
from chunking import chunk_tree
from provenance import UNKNOWN, Provenance, build_provenance, source_provenance
from releases import release_series, release_source, require_series
from schema import SECTION_REF_SEPARATOR, make_row, write_jsonl
from sphinx_xml import (
    DEFAULT_MAX_WORDS,
    Page,
    PageError,
    doc_path_for,
    iter_pages,
    page_tree,
    section_anchors,
)

CAPTURE_THRESHOLD = 0.80
PLACEHOLDER = "{IDF_TARGET_"
# What the checker leaves out of a page's own text: build metadata and navigation, not content.
# Deliberately a short list written here, not the walker's skip list, so the two cannot agree on
# a blind spot by construction.
NON_CONTENT_TAGS = frozenset({"comment", "substitution_definition", "raw", "todo_node", "system_message"})
_TOKEN = re.compile(r"\w+")
_IDF_LINK_REVISION = re.compile(r"github\.com/espressif/esp-idf/(?:blob|tree|raw)/([0-9a-f]{7,40})/")


# --- checkers ------------------------------------------------------------------------------------


@dataclass
class CheckReport:
    """One checker's verdict: a one-line summary and the offending items."""

    name: str
    ok: bool
    summary: str
    problems: list[str] = field(default_factory=list)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def page_text_pieces(root: etree._Element, titles: bool = True) -> Iterator[str]:
    """Every text node of the page that a reader sees, element boundaries kept as breaks."""

    def walk(elem: etree._Element) -> Iterator[str]:
        skip = (
            elem.tag in NON_CONTENT_TAGS
            or (elem.tag == "topic" and "contents" in (elem.get("classes") or "").split())
            or (not titles and elem.tag == "title")
        )
        if not skip:
            yield elem.text or ""
            for child in elem:
                if isinstance(child.tag, str):
                    yield from walk(child)
                yield child.tail or ""

    yield from walk(root)


def page_capture(root: etree._Element, page_rows: Iterable[dict[str, Any]]) -> tuple[float, int]:
    """(fraction of the page's words found in its chunks, page word count; 0 for a page with only
    headings). A word counts as often as it occurs in both, so one mention in a heading cannot
    stand for a dropped paragraph."""
    if not tokens(" ".join(page_text_pieces(root, titles=False))):
        return 1.0, 0  # a heading with no text under it (a stub page) has nothing to capture
    reference = Counter(tokens(" ".join(page_text_pieces(root))))
    total = sum(reference.values())
    got: Counter[str] = Counter()
    headed: set[str] = set()
    for row in page_rows:
        path = section_path_of(row["text"])
        for depth in range(1, len(path) + 1):
            # a section title is page text once, though every chunk below it repeats it
            prefix = PATH_SEPARATOR.join(path[:depth])
            if prefix not in headed:
                headed.add(prefix)
                got.update(tokens(path[depth - 1]))
        got.update(tokens(chunk_body(row["text"])))
    kept = sum(min(count, got[word]) for word, count in reference.items())
    return kept / total, total


def function_requirements(root: etree._Element) -> Iterator[tuple[str, list[list[str]]]]:
    """(function name, token runs that must share one chunk) for every function ``desc``: the name,
    each parameter name of the signature, and each item of its Parameters field."""
    for desc in root.iter("desc"):
        if desc.get("objtype") != "function":
            continue
        signature = desc.find("desc_signature")
        name_elem = desc.find("desc_signature//desc_name")
        if signature is None or name_elem is None:
            continue
        name = "".join(name_elem.itertext()).strip()
        needed = [tokens(name)]
        for sig_name in signature.iter("desc_sig_name"):
            if "sig-param" in (sig_name.get("classes") or "").split():
                needed.append(tokens("".join(sig_name.itertext())))
        content = desc.find("desc_content")
        for field_elem in content.iter("field") if content is not None else ():
            if field_elem.getparent().getparent() is not content:
                continue  # a nested entry's fields belong to that entry
            label = "".join(field_elem.find("field_name").itertext()).strip()
            if label != "Parameters":
                continue
            body = field_elem.find("field_body")
            items = body.findall("bullet_list/list_item") or [body]
            needed.extend(tokens(" ".join(item.itertext())) for item in items)
        yield name, [run for run in needed if run]


def _contains_run(haystack: str, run: list[str]) -> bool:
    return f" {' '.join(run)} " in haystack


def page_api_census(root: etree._Element, page_rows: Iterable[dict[str, Any]]) -> tuple[int, list[str]]:
    """(functions documented on the page, names of those no single chunk holds with its parameters)."""
    haystacks = [f" {' '.join(tokens(row['text']))} " for row in page_rows]
    total = 0
    missing: list[str] = []
    for name, runs in function_requirements(root):
        total += 1
        if not any(all(_contains_run(h, run) for run in runs) for h in haystacks):
            missing.append(name)
    return total, missing


def scan_placeholders(rows: Iterable[dict[str, Any]]) -> CheckReport:
    """Fail on any ``{IDF_TARGET_`` left in a row: the build substitutes every one per chip."""
    problems = []
    for row in rows:
        for name in ("text", "source_doc", "section_path"):
            at = row[name].find(PLACEHOLDER)
            if at >= 0:
                excerpt = row[name][at : at + 40].split("}")[0] + "}"
                problems.append(f"{row['file_path']}#{row['chunk_index']} {name}: {excerpt}")
    return CheckReport(
        name="placeholders",
        ok=not problems,
        summary=f"{len(problems)} {PLACEHOLDER}...}} placeholders left",
        problems=problems,
    )


def check_against_xml(
    xml_dir: Path, rows: list[dict[str, Any]], threshold: float = CAPTURE_THRESHOLD
) -> list[CheckReport]:
    """Word capture and API census of ``rows`` against every readable Sphinx page under ``xml_dir``.

    The XML is parsed again here, one page at a time, independently of the ingest's walker.
    """
    by_page: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_page.setdefault(row["file_path"], []).append(row)
    low_pages: list[str] = []
    captures: list[float] = []
    functions = empty = 0
    missing_functions: list[str] = []
    for xml_file in sorted(xml_dir.rglob("*.xml")):
        try:
            root = etree.parse(str(xml_file)).getroot()
        except etree.XMLSyntaxError:
            continue  # the ingest already named and skipped it
        if root.tag != "document":
            continue
        doc_path = doc_path_for(root, xml_file, xml_dir)
        page_rows = by_page.get(doc_path, [])
        capture, words = page_capture(root, page_rows)
        if not words:
            empty += 1
        else:
            captures.append(capture)
            if capture < threshold:
                low_pages.append(f"{doc_path}: {capture:.1%} of {words} words")
        total, missing = page_api_census(root, page_rows)
        functions += total
        missing_functions.extend(f"{doc_path}: {name}" for name in missing)
    mean = sum(captures) / len(captures) if captures else 0.0
    capture_report = CheckReport(
        name="capture",
        ok=bool(captures) and not low_pages,
        summary=(
            f"{len(captures)} pages ({empty} without text skipped), mean capture {mean:.2%}, "
            f"min {min(captures, default=0):.1%}, {len(low_pages)} under {threshold:.0%}"
        ),
        problems=low_pages,
    )
    census_report = CheckReport(
        name="api-census",
        ok=not missing_functions,
        summary=f"{functions - len(missing_functions)}/{functions} function entries reached a chunk "
        "with their parameters",
        problems=missing_functions,
    )
    return [capture_report, census_report]


def run_checks(xml_dir: Path, rows: list[dict[str, Any]]) -> list[CheckReport]:
    return [*check_against_xml(xml_dir, rows), scan_placeholders(rows)]


# --- ingest ---------------------------------------------------------------------------------------


def page_rows(page: Page, chip: str, provenance: Provenance, max_words: int) -> list[dict[str, Any]]:
    """The chunk rows of one page, numbered in reading order."""
    chunks = chunk_tree(page_tree(page, max_words=max_words), max_words=max_words)
    return [
        make_row(
            text=chunk.text,
            doc_type="idf",
            chips=[chip],
            source_doc=page.title,
            section_path=chunk.section_path_text,
            file_path=page.doc_path,
            chunk_index=index,
            revisions=(),
            symbol_refs=chunk.symbol_refs,
            doc_refs=chunk.doc_refs,
            file_refs=chunk.file_refs,
            releases=[release_series(provenance.version) or ""],
            release_sources=[release_source(provenance.version, provenance.commit)],
            source_version=provenance.version,
            source_commit=provenance.commit,
        )
        for index, chunk in enumerate(chunks)
    ]


def link_revisions(page: Page) -> Counter[str]:
    """ESP-IDF revisions the page's GitHub file links point at: the build's own commit, abbreviated."""
    found: Counter[str] = Counter()
    for ref in page.root.iter("reference"):
        match = _IDF_LINK_REVISION.search(ref.get("refuri") or "")
        if match:
            found[match.group(1)] += 1
    return found


def chip_mentions(rows: Iterable[dict[str, Any]]) -> Counter[str]:
    """How often the text names each chip (``ESP32-C3``; ``ESP32`` not followed by ``-S3``...).

    A build substitutes its own chip's name throughout, so the chip named most is the chip built.
    """
    patterns = {chip.id: re.compile(re.escape(chip.name) + r"(?![-\w])") for chip in chips().values()}
    counts: Counter[str] = Counter()
    for row in rows:
        for chip_id, pattern in patterns.items():
            counts[chip_id] += len(pattern.findall(chunk_body(row["text"])))
    return +counts


def resolve_provenance(xml_dir: Path, idf_path: Path | None) -> Provenance:
    """The build's SOURCE.md, else the ``git describe`` of --idf-path; both must agree when both exist.

    The release is read from provenance, never typed: a wrong hand-typed version would file a whole
    build under another ESP-IDF release (docs/releases.md).
    """
    noted = build_provenance(xml_dir)
    checkout = source_provenance(idf_path) if idf_path else None
    if noted and checkout and checkout.commit != UNKNOWN and noted.commit != checkout.commit:
        raise ValueError(
            f"the build's SOURCE.md names commit {noted.commit}, but --idf-path {idf_path} is at "
            f"{checkout.commit}: point --idf-path at the checkout the docs were built from"
        )
    found = noted or checkout
    if found is None or found.commit == UNKNOWN:
        raise ValueError(
            f"no provenance for {xml_dir}: no SOURCE.md (Version:/Commit: lines) in it or above it, and "
            "no --idf-path checkout; build with build_idf_docs.sh (it writes SOURCE.md) or pass --idf-path"
        )
    require_series(found.version, f"the build {xml_dir}")
    return found


@dataclass
class IngestResult:
    rows: list[dict[str, Any]]
    pages: int
    other_xml: int
    failures: list[str]
    revisions: Counter[str]
    # doc_refs by outcome: "section" (the anchor's section), "page" (the page, its anchor unknown),
    # "absent" (a page this build does not have: left out, its targets listed in the summary)
    doc_refs: Counter[str] = field(default_factory=Counter)
    absent_pages: Counter[str] = field(default_factory=Counter)


def resolve_doc_refs(
    rows: list[dict[str, Any]], anchors: dict[str, dict[str, str]], titles: dict[str, str]
) -> Counter[str]:
    """Rewrite every row's ``page#anchor`` references into ``page#section path`` that
    esp32_docs_read opens; counts the outcomes, with ``absent:<page>`` for pages not in the build."""
    outcomes: Counter[str] = Counter()
    for row in rows:
        resolved: list[str] = []
        for ref in row["doc_refs"]:
            page, _, anchor = ref.partition("#")
            if page not in titles:
                outcomes[f"absent:{page}"] += 1
                continue
            section = anchors[page].get(anchor) if anchor else None
            outcomes["section" if section else "page"] += 1
            target = page + SECTION_REF_SEPARATOR + (section or titles[page])
            own = row["section_path"] + " > "
            if page != row["file_path"] or not own.startswith((section or titles[page]) + " > "):
                resolved.append(target)  # not the row's own section nor one it sits in (a breadcrumb)
        row["doc_refs"] = list(dict.fromkeys(resolved))
    return outcomes


def ingest(
    xml_dir: Path,
    chip: str,
    provenance: Provenance,
    max_words: int = DEFAULT_MAX_WORDS,
    progress: bool = True,
) -> IngestResult:
    """Rows for every readable Sphinx page; unreadable pages are collected, not fatal."""
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    revisions: Counter[str] = Counter()
    pages = other = 0
    seen: dict[str, Path] = {}
    anchors: dict[str, dict[str, str]] = {}
    titles: dict[str, str] = {}
    files = tqdm(iter_pages(xml_dir), desc=f"{chip} pages", unit="file", disable=not progress)
    for xml_file, loaded in files:
        if isinstance(loaded, PageError):
            failures.append(str(loaded))
            continue
        if loaded is None:
            other += 1
            continue
        if loaded.doc_path in seen:
            failures.append(
                f"{xml_file}: same doc path {loaded.doc_path!r} as {seen[loaded.doc_path]}; "
                "XML_DIR must be one chip's build, not a folder of several"
            )
            continue
        seen[loaded.doc_path] = xml_file
        try:
            rows.extend(page_rows(loaded, chip, provenance, max_words))
        except (ValueError, TypeError, AttributeError) as exc:
            failures.append(f"{xml_file}: could not chunk the page ({type(exc).__name__}: {exc})")
            continue
        pages += 1
        revisions += link_revisions(loaded)
        anchors[loaded.doc_path] = section_anchors(loaded)
        titles[loaded.doc_path] = loaded.title
    outcomes = resolve_doc_refs(rows, anchors, titles)
    absent = Counter({key.partition(":")[2]: n for key, n in outcomes.items() if key.startswith("absent:")})
    return IngestResult(
        rows=rows,
        pages=pages,
        other_xml=other,
        failures=failures,
        revisions=revisions,
        doc_refs=Counter({k: n for k, n in outcomes.items() if not k.startswith("absent:")})
        + Counter({"absent": sum(absent.values())}),
        absent_pages=absent,
    )


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml_dir", type=Path, help="a chip's XML build (.../_build/en/<chip>/xml)")
    parser.add_argument("--chip", required=True, help="ESP-IDF target the build is for, e.g. esp32c3")
    parser.add_argument("--out-path", type=Path, required=True, help="JSONL file to write")
    parser.add_argument(
        "--idf-path",
        type=Path,
        help="ESP-IDF checkout the docs were built from (only needed when the build has no SOURCE.md)",
    )
    parser.add_argument("--max-words", type=int, default=DEFAULT_MAX_WORDS, help="chunk word budget")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, tests)")
    return parser.parse_args(argv)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.monotonic()
    try:
        chip = validate_chip(args.chip)
    except ValueError as exc:
        return _fail(str(exc))
    if not args.xml_dir.is_dir():
        return _fail(f"{args.xml_dir} is not a directory (expected a chip's docs build in XML)")
    if args.idf_path and not args.idf_path.is_dir():
        return _fail(f"--idf-path {args.idf_path} is not a directory")
    if args.max_words < 1:
        return _fail(f"--max-words must be positive, got {args.max_words}")
    try:
        provenance = resolve_provenance(args.xml_dir, args.idf_path)
    except ValueError as exc:
        return _fail(str(exc))
    result = ingest(args.xml_dir, chip, provenance, args.max_words, progress=not args.no_progress)
    for failure in result.failures:
        print(f"skipped page: {failure}", file=sys.stderr)
    if result.pages == 0:
        return _fail(
            f"no Sphinx pages (XML files whose root element is <document>) under {args.xml_dir}: "
            f"{result.other_xml} other XML files, {len(result.failures)} unreadable"
        )
    mentions = chip_mentions(result.rows)
    if mentions and mentions.most_common(1)[0][0] != chip:
        named, times = mentions.most_common(1)[0]
        return _fail(
            f"--chip {chip} does not match the build: its pages name {chips()[named].name} most "
            f"({times} times) and {chips()[chip].name} {mentions[chip]} times"
        )
    if result.revisions:
        linked = result.revisions.most_common(1)[0][0]
        if not provenance.commit.startswith(linked):
            return _fail(
                f"source commit {provenance.commit} does not match the build: its pages link to "
                f"esp-idf revision {linked}"
            )

    write_jsonl(args.out_path, result.rows)
    reports = run_checks(args.xml_dir, result.rows)
    for report in reports:
        print(f"check {report.name}: {'ok' if report.ok else 'FAILED'} - {report.summary}", file=sys.stderr)
        for problem in report.problems[:50]:
            print(f"  {problem}", file=sys.stderr)
        if len(report.problems) > 50:
            print(f"  ... and {len(report.problems) - 50} more", file=sys.stderr)
    ok = all(r.ok for r in reports) and not result.failures
    checks = ", ".join(f"{r.name} {'ok' if r.ok else 'FAILED'}" for r in reports)
    if result.absent_pages:
        listed = ", ".join(f"{page} ({n})" for page, n in result.absent_pages.most_common(10))
        print(
            f"note: links to pages this build does not have, left out of doc_refs: {listed}", file=sys.stderr
        )
    links = result.doc_refs
    print(
        f"{chip} {release_series(provenance.version)} ({provenance.version}): {result.pages} pages "
        f"({result.other_xml} non-Sphinx XML ignored, "
        f"{len(result.failures)} skipped) -> {len(result.rows)} chunks in {args.out_path}; "
        f"doc links {links['section']} to a section, {links['page']} to a page, {links['absent']} to "
        f"pages not in the build; {checks}; "
        f"{time.monotonic() - started:.1f}s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
