"""What an agent receives: a result per passage, shortened to fit its context, with provenance.

Each result says which chips and silicon revisions it holds for (``revision_scope`` in words, so an
agent cannot miss an "ONLY v1.3" passage), where it came from (file, section, upstream commit) and,
for ESP-IDF pages, the public docs URL for the chip asked about.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from chip_vocab import chips
from chunk_format import FIELDS_LINE, REGISTER_CHUNK_HEAD
from follow_refs import follow_up

RESULT_TEXT_CHARS = 2400
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


def excerpt(
    text: str, focus: list[str], budget: int = RESULT_TEXT_CHARS, terms: list[str] | None = None
) -> tuple[str, bool]:
    """Shorten ``text`` to ``budget`` characters, keeping its lead and the part that matters: the
    first line naming a focus symbol, else the line where the query's rarer words meet.

    The lead is the heading line, and for a register block every line before its field list (name,
    address, reset value, summary): a register answer without its address or reset is no answer.
    """
    if len(text) <= budget:
        return text, False
    lead = _lead(text)
    room = max(budget - len(lead) - 5, 200)  # "\n…\n" after the lead and " …" at the end
    lowered = text.lower()
    positions = [p for p in (lowered.find(s.lower(), len(lead)) for s in focus) if p >= 0]
    if positions:
        start = text.rfind("\n", 0, min(positions)) + 1
    else:
        # the best line with a third of the window before it: what leads up to an answer matters too
        best = _best_line_start(text, len(lead), terms or [])
        start = max(text.rfind("\n", 0, max(best - room // 3, len(lead))) + 1, len(lead))
    chosen = start
    start = min(chosen, _tail_start(text, len(lead), room))
    if start + room <= budget:
        return text[: budget - 2].rstrip() + " …", True
    owner = _enclosing_declaration(text, len(lead), start)
    if owner:  # make room for the owner line; the later start may open under another declaration
        start = min(chosen, _tail_start(text, len(lead), room - len(owner) - 3))
        owner = _enclosing_declaration(text, len(lead), start)
    if owner:
        room = max(room - len(owner) - 3, 200)
    window = text[start : start + room].rstrip() + (" …" if start + room < len(text) else "")
    if owner:
        return f"{lead}\n…\n{owner}\n…\n{window}", True
    return f"{lead}\n…\n{window}", True


def _tail_start(text: str, lead_end: int, room: int) -> int:
    """The first line start from which ``room`` characters reach the end of ``text``: a window
    placed later would run past the end and waste its budget on nothing (a 2,600-character guide
    chunk showed only its last 950 characters, without the sentence that answered)."""
    return max(text.find("\n", len(text) - room) + 1, lead_end)


def _lead(text: str) -> str:
    register = REGISTER_CHUNK_HEAD.match(text)
    if register is None:
        return text.split("\n", 1)[0]
    fields = text.find("\n" + FIELDS_LINE, register.start())
    return text[: fields if fields >= 0 else register.end()].rstrip()


# An API reference chunk lists several declarations, each an unindented line (``struct httpd_config
# (typedef httpd_config_t)``, a prototype) followed by its indented members and their descriptions.
DECLARATION_LINE = re.compile(r"^\S[^\n]{0,158}$", re.MULTILINE)


def _enclosing_declaration(text: str, lead_end: int, start: int) -> str | None:
    """The unindented declaration line that owns the window starting at ``start``, when the window
    opens on its indented members: ``uint16_t max_open_sockets`` is no answer without the struct
    it belongs to. None when the window starts at a declaration or nothing is indented there."""
    if start >= len(text) or not text[start].isspace():
        return None
    owners = list(DECLARATION_LINE.finditer(text, lead_end, start))
    return owners[-1].group(0).rstrip() if owners else None


def _best_line_start(text: str, after: int, terms: list[str]) -> int:
    """Where the line holding the most query words starts, each word weighted by how few of the
    chunk's lines use it (a word on every field line says little); the first such line wins."""
    starts = [after] + [m.end() for m in re.finditer("\n", text) if m.end() > after]
    lines = [text[a:b].lower() for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    weight = {t: math.log(1 + len(lines) / (1 + sum(t in line for line in lines))) for t in terms}
    scores = [sum(w for t, w in weight.items() if t in line) for line in lines]
    best = max(range(len(lines)), key=lambda i: (scores[i], -i)) if lines else 0
    return starts[best] if lines and scores[best] > 0 else after


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


def with_variant_note(text: str, row: dict[str, Any]) -> str:
    """``text`` (a row's text or its excerpt) followed by the note on its folded copies, if any."""
    variants = row.get("chip_variants")
    return text + variant_note(variants) if variants else text


def variant_note(variants: list[dict[str, Any]]) -> str:
    """The other chips' copies in a few lines: their chips, chunk, and the lines only they have."""
    lines = ["", "Other chips' copies of this section (esp32_docs_read with one of their chips) differ:"]
    used = 0
    for shown, variant in enumerate(variants):
        differs = " | ".join(variant["differs"]) or "no lines of their own (a shorter copy)"
        if len(differs) > VARIANT_LINE_CHARS:
            differs = differs[:VARIANT_LINE_CHARS].rstrip() + " …"
        line = f"- {', '.join(variant['chips'])} (chunk {variant['chunk_index']}): {differs}"
        if used + len(line) > VARIANT_NOTE_CHARS:
            lines.append(f"- … {len(variants) - shown} more copies")
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def format_result(
    row: dict[str, Any], chip: str | None, focus: list[str], terms: list[str] | None, budget: int
) -> dict[str, Any]:
    """One passage as the agent sees it: the excerpt plus every provenance field."""
    text, truncated = excerpt(row["text"], focus, budget, terms)
    variants = row.get("chip_variants", [])
    result = {
        "text": with_variant_note(text, row),
        "text_truncated": truncated,
        "doc_type": row["doc_type"],
        "chips": row["chips"],
        "revisions": row["revisions"],
        "revision_scope": revision_scope(row["revisions"], row["chips"]),
        "source_doc": row["source_doc"],
        "section_path": row["section_path"],
        "file_path": row["file_path"],
        "chunk_index": row["chunk_index"],
        "releases": row["releases"],
        "source_version": row["source_version"],
        "source_commit": row["source_commit"],
        "release_sources": row["release_sources"],
        "score": None if row["score"] is None else round(row["score"], 5),
        "matched_by": row["matched_by"],
        "symbol_refs": row["symbol_refs"][:24],
        "url": docs_url(row, chip) or row.get("url") or None,
        **follow_up(row),
    }
    if variants:
        result["chip_variants"] = [{"chips": v["chips"], "chunk_index": v["chunk_index"]} for v in variants]
    return without_empty(result, ALWAYS_SHOWN)


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
