"""What an agent receives: a result per passage, shortened to fit its context, with provenance.

Each result says which chips and silicon revisions it holds for (``revision_scope`` in words, so an
agent cannot miss an "ONLY v1.3" passage), where it came from (file, section, upstream commit) and,
for ESP-IDF pages, the public docs URL for the chip asked about.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from chip_vocab import chips
from chunk_format import PATH_SEPARATOR
from excerpts import excerpt
from follow_refs import follow_up
from releases import chips_in, release_series, releases_of, split_source

# A result's default excerpt, in characters; the first result's is FIRST_RESULT_SHARE times as
# long. The largest that keeps question answers in sight: shorter defaults lost answers from the
# top five on the short-question pool (docs/retrieval.md); a caller short of context passes
# excerpt_chars, and esp32_docs_read gives a whole section.
RESULT_TEXT_CHARS = 1200
FIRST_RESULT_SHARE = 2
# The symbols a result names for find_symbol beyond those its excerpt shows: the first few are the
# passage's own.
SYMBOL_REFS_SHOWN = 2
# The fields every client reads, shown even when empty (the smoke client, the eval and agents' prompts
# rely on them); any other field appears only when it holds something, so no answer pays for empties.
ALWAYS_SHOWN = frozenset(
    (
        "text",
        "doc_type",
        "chips",
        "revisions",
        "revision_scope",
        "section_path",
        "file_path",
        "chunk_index",
        "source_version",
        "source_commit",
    )
)
IDF_DOCS_URL = "https://docs.espressif.com/projects/esp-idf/en/latest/{chip}/{path}.html"


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


# ESP-IDF's docs are built once per chip and dedup merges only identical chunks, so a section whose text
# names the chip or a per-chip value is stored once per chip: unfiltered by chip, nine copies of one
# debugging walk-through filled the top ten. Copies of one section for other chips (same page,
# section and releases, no chip in common, most words shared) fold into the best-ranked copy, which
# then shows the lines each other copy has of its own: a default that differs per chip stays in
# sight. (With idf_version='all' a copy of another release is never folded: its release would be lost.)
# A page with one section per chip names the chip in the heading ("Overview > ESP32-C6 Wi-Fi
# Configuration > Wi-Fi Country Code"), so the section is compared with the chip's name set aside.
VARIANT_SHARED_WORDS = 0.5
VARIANT_NOTE_CHARS = 900
VARIANT_LINE_CHARS = 300
_WORD = re.compile(r"[a-z0-9_]+")
_CHIP_NAME = re.compile(
    r"\b(?:"
    + "|".join(re.escape(c.name) for c in sorted(chips().values(), key=lambda c: -len(c.name)))
    + r")\b"
)


def section_of_any_chip(section_path: str) -> str:
    """The section path with chip names replaced, so one chip's per-chip section matches another's."""
    return _CHIP_NAME.sub("<chip>", section_path)


def fold_chip_variants(ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in rank order, each other chip's copy of a section folded into the first copy ranked
    (as ``chip_variants``: its chips, chunk and the lines only it has)."""
    kept: list[dict[str, Any]] = []
    firsts: dict[tuple[str, str, str, tuple[str, ...]], list[dict[str, Any]]] = {}
    words: dict[int, set[str]] = {}

    def words_of(row: dict[str, Any]) -> set[str]:
        return words.setdefault(id(row), set(_WORD.findall(row["text"].lower())))

    for row in ranked:
        section = section_of_any_chip(row["section_path"])
        key = (row["doc_type"], row["file_path"], section, tuple(row.get("releases") or ()))
        first = next((f for f in firsts.get(key, []) if _is_variant(f, row, words_of)), None)
        if first is None:
            firsts.setdefault(key, []).append(row)
            kept.append(row)
            continue
        own_lines = {line.strip() for line in first["text"].splitlines()} | {""}
        differs = [line.strip() for line in row["text"].splitlines() if line.strip() not in own_lines]
        variant = {"chips": row["chips"], "chunk_index": row["chunk_index"]}
        first.setdefault("chip_variants", []).append(variant | {"differs": list(dict.fromkeys(differs))})
    return kept


def _is_variant(
    first: dict[str, Any], row: dict[str, Any], words_of: Callable[[dict[str, Any]], set[str]]
) -> bool:
    covered = set(first["chips"]).union(*(v["chips"] for v in first.get("chip_variants", [])))
    if not row["chips"] or covered.intersection(row["chips"]):
        return False  # the same chip's next chunk of a long section is no copy
    mine, theirs = words_of(first), words_of(row)
    return len(mine & theirs) >= VARIANT_SHARED_WORDS * len(mine | theirs)


def with_variant_note(text: str, row: dict[str, Any], budget: int | None = None) -> str:
    """``text`` (a row's text or its excerpt) followed by the note on its folded copies, if any;
    the note takes at most half the excerpt's ``budget``, so a short excerpt stays short."""
    variants = row.get("chip_variants")
    if not variants:
        return text
    return text + (variant_note(variants) if budget is None else variant_note(variants, budget // 2))


def variant_note(variants: list[dict[str, Any]], note_chars: int = VARIANT_NOTE_CHARS) -> str:
    """The other chips' copies in a few lines: their chips, chunk, and the lines only they have."""
    note_chars = min(note_chars, VARIANT_NOTE_CHARS)
    line_chars = min(VARIANT_LINE_CHARS, max(note_chars // 3, 60))
    lines = ["", "Other chips' copies of this section (esp32_docs_read with one of their chips) differ:"]
    used = 0
    for shown, variant in enumerate(variants):
        differs = " | ".join(variant["differs"]) or "no lines of their own (a shorter copy)"
        if len(differs) > line_chars:
            differs = differs[:line_chars].rstrip() + " …"
        line = f"- {', '.join(variant['chips'])} (chunk {variant['chunk_index']}): {differs}"
        if used + len(line) > note_chars:
            lines.append(f"- … {len(variants) - shown} more copies")
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def format_result(
    row: dict[str, Any],
    chip: str | None,
    focus: list[str],
    terms: list[str] | None,
    budget: int,
    series: str | None = None,
) -> dict[str, Any]:
    """One passage as the agent sees it: the excerpt plus every provenance field. A passage that
    several releases share cites the source of the release the answer is for (``series``), and
    lists every release's source only when no one release was chosen."""
    # the budget is the body's: the section-path line every chunk opens with is dropped below
    heading = len(row["section_path"]) + 1
    text, truncated = excerpt(row["text"], focus, budget + heading, terms, row.get("kind"))
    text = without_heading(text, row["section_path"])
    version, commit, sources = cited_source(row, series)
    variants = row.get("chip_variants", [])
    result = {
        "text": with_variant_note(text, row, budget),
        "text_truncated": truncated,
        "doc_type": row["doc_type"],
        "chips": chips_in(row, series),
        "revisions": row["revisions"],
        "revision_scope": revision_scope(row["revisions"], row["chips"]),
        "source_doc": None if _restates(row["source_doc"], row) else row["source_doc"],
        "section_path": row["section_path"],
        "file_path": row["file_path"],
        "chunk_index": row["chunk_index"],
        "releases": releases_of(row, chip),
        "source_version": version,
        "source_commit": commit,
        "release_sources": sources,
        "matched_by": row["matched_by"],
        "symbol_refs": unseen_symbols(row["symbol_refs"], text)[:SYMBOL_REFS_SHOWN],
        "url": docs_url(row, chip) or row.get("url") or None,
        **follow_up(row, text),
    }
    if variants:
        result["chip_variants"] = [{"chips": v["chips"], "chunk_index": v["chunk_index"]} for v in variants]
    return without_empty(result, ALWAYS_SHOWN)


def without_heading(text: str, section_path: str) -> str:
    """``text`` without the section-path line a chunk opens with (it is embedded with the chunk so
    the vector knows where the text stands): ``section_path`` already says it, and a k=5 answer
    would pay for it twice."""
    if not section_path or not text.startswith(section_path + "\n"):
        return text
    return text[len(section_path) :].lstrip("\n")


def unseen_symbols(symbol_refs: list[str], text: str) -> list[str]:
    """The passage's symbols the excerpt does not show: the ones an agent could not have read off
    the text, and may want to look up with find_symbol."""
    return [symbol for symbol in symbol_refs if symbol not in text]


def cited_source(row: dict[str, Any], series: str | None) -> tuple[str, str, list[str] | None]:
    """The version and commit a result cites, and the release sources it still lists: a row of one
    release cites its own; a shared row answered for one release cites that release's source
    (``version@commit`` in ``release_sources``); a shared row answered for all lists them all."""
    sources = row.get("release_sources") or []
    if len(sources) <= 1:
        return row["source_version"], row["source_commit"], None
    for source in sources:
        version, commit = split_source(source)
        if series is not None and release_series(version) == series:
            return version, commit, None
    return row["source_version"], row["source_commit"], sources


def _restates(source_doc: str, row: dict[str, Any]) -> bool:
    """Whether the document's name is already in the result: the head of its section path (a
    chapter or page title) or its file's name (a header)."""
    page = row["section_path"].split(PATH_SEPARATOR, 1)[0]
    return source_doc in (page, row["file_path"].rsplit("/", 1)[-1])


def drop_repeated_refs(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``results`` with each follow-up reference shown once per answer, at the best-ranked result
    that has it: passages of one chapter share their links, and an agent needs each only once."""
    seen: set[str] = set()
    for result in results:
        for key in ("doc_refs", "file_refs", "symbol_refs"):
            if key not in result:
                continue
            kept = [ref for ref in result[key] if _ref_key(key, ref) not in seen]
            seen.update(_ref_key(key, ref) for ref in result[key])
            if kept:
                result[key] = kept
            else:
                del result[key]
    return results


def _ref_key(kind: str, ref: Any) -> str:
    return f"{kind}:{ref}" if isinstance(ref, str) else f"{kind}:{sorted(ref.items())}"


def without_empty(fields: dict[str, Any], keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``fields`` without the ones that say nothing (None, False, empty) unless named in ``keep``:
    an agent reads ``text_truncated`` only when it is true and ``url`` only where there is one."""
    return {key: value for key, value in fields.items() if key in keep or not _empty(value)}


def _empty(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list, dict)) and not value)


def round_robin(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Take one from each corpus in turn, so no corpus crowds the others out."""
    out: list[dict[str, Any]] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def within_budget(
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
