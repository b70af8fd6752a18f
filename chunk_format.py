"""The text format of chunks: what ingest writes and what the readers recognise afterwards.

A TRM register renders as a block (``Register NAME (note)``, ``Address:``, ``Reset value:``,
``Fields:`` and one ``- FIELD [bits] ...`` line per field, notes/REGISTER_FORMAT.md); a SoC header
register renders as a card line (``NAME = value  // description``). Ingest builds these texts and
the register tool, fusion, the lexicon and the embedding stage read them back; keeping both sides
here means a change to the format is made in one place.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- every chunk: its section path

# a chunk's first line is its section path, headings joined by this, then a blank line, then the body
PATH_SEPARATOR = " > "

# ---------------------------------------------------------------- TRM register blocks

# the register summary's absolute address, a line of a register block under its Address line
ABSOLUTE_ADDRESS_PREFIX = "Absolute address (register summary): "
# below this a documented address is an offset from its peripheral's base
OFFSET_LIMIT = 0x10000
# the lexicon's expansions of a register's names, a line of its block before "Fields:"
TERMS_PREFIX = "Terms: "
FIELDS_LINE = "Fields:"
# a field line as the register tool parses it: name, bits, then optional access, reset, description
FIELD_LINE = re.compile(
    r"^- (?P<name>.+?) \[(?P<bits>\d+(?::\d+)?|\?)\]"
    r"(?: \((?P<access>[^)]*)\))?(?: reset (?P<reset>[^:\s]+))?(?:: (?P<description>.*))?$"
)
# a field line that describes its field (the lexicon mines these words): the name, then the description
DESCRIBED_FIELD_LINE = re.compile(
    r"^- (?P<name>[A-Za-z]\w+)(?: \[[^\]]*\])?(?: \([^)]*\))?(?: reset [^:]*)?: (?P<desc>.+)$"
)
# a register summary table's row: its Name cell, and its Address cell when the manual prints one
SUMMARY_ROW = re.compile(r"^([A-Z][A-Z0-9_]*) \| (?:[^|\n]* \| (0x[0-9A-Fa-f_]+) \|)?", re.MULTILINE)
# a register block's heading line; MULTILINE so that fusion can find every heading in a chunk
REGISTER_HEADING = re.compile(r"^Register (?P<name>\S+)(?: \((?P<note>.*)\))?[ \t]*$", re.MULTILINE)
# the start of a register block anywhere in a chunk: its heading line, then its Address line
REGISTER_BLOCK_START = re.compile(r"^Register \S+.*\nAddress: ", re.MULTILINE)
# a register heading line's name only, as the lexicon reads a block line by line
REGISTER_NAME_LINE = re.compile(r"^Register (?P<name>[A-Za-z]\w+)")
SUMMARY_LINE = re.compile(r"^Summary: (?P<desc>.+)$")
# A chunk that is one register block: the chunk's section-path line, then the block's heading,
# Address, optional absolute address, Reset value and Summary lines (its fields follow).
REGISTER_CHUNK_HEAD = re.compile(
    r"(?P<head>[^\n]*\n\n?Register \S+[^\n]*)\nAddress: [^\n]*\n"
    rf"(?:{re.escape(ABSOLUTE_ADDRESS_PREFIX)}[^\n]*\n)?(?:Reset value: [^\n]*\n)?"
    r"(?:Summary: [^\n]*\n)?"
)
# "n: 0-7", "n: 0-21, 26-48", "x: 0-19, 20^1, 21-23" (a footnote mark), "n: GPIO0-GPIO21, GPIO26-GPIO46"
# "n: 0-7", and as a few manuals write it, "m = 2, 3"
_PARAM_SPEC = re.compile(r"([A-Za-z]\w*)\s*[:=]\s*(.*?)(?=,\s*[A-Za-z]\w*\s*[:=]|$)")
_PARAM_SPAN = re.compile(r"([A-Za-z]*)(\d+)(?:\^\d+)?(?:\s*[-~–]\s*([A-Za-z]*)(\d+)(?:\^\d+)?)?")

# ---------------------------------------------------------------- SoC header register cards

# one register of a header card: ``NAME = value`` or ``NAME(i) = value``, then ``  // description``
CARD_LINE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)(?P<params>\([^)]*\))? = (?P<value>.+?)(?:  // (?P<desc>.*))?$"
)
CARD_DESCRIPTION = "  // "
# the note on a card line whose field lines come from a ``*_struct.h`` typedef
STRUCT_FIELDS_NOTE = re.compile(r"\[fields from (\S+) (\w+)\]")

# ---------------------------------------------------------------- what a passage defines

# a register definition: a TRM block (heading, then Address) or a header card line of an ``X_REG``
REGISTER_DEFINITION = re.compile(r"^Register \S+.*\nAddress:|^\w+_REG\b\S*\s*=", re.MULTILINE)
# The register and field names a passage defines: a TRM "Register X" heading, a header card's
# "X = ..." or "X(i) = ..." line, or a "- FIELD [bits]" field line (manual or header card).
DEFINED_NAME = re.compile(r"^(?:Register (\w+)|(\w+)\s*(?:\([^)]*\))?\s*=\s|- (\w+) \[)", re.MULTILINE)


@functools.lru_cache(maxsize=4096)
def definition_regexes(ref: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The lines that define ``ref`` in any corpus's chunk text (a register heading, a ``#define``, a
    card line, a heading, the section path's last heading, a field line, a prototype) as one regex,
    and the table-row line as another; compiled once per ref: every symbol hit is tested for every
    ref it matched."""
    name = re.escape(ref)
    strong = (
        rf"^\s*Register\s+{name}\b",
        rf"^\s*#define\s+{name}\b",
        rf"^\s*{name}\s*(?:\([^)]*\))?\s*=",
        rf"^\s*#+\s*{name}\s*$",
        rf"\A(?:[^\n]* > )?{name}[ \t]*$",
        rf"^\s*-\s+{name}\s+\[\d",
        rf"^\s*(?:[\w*]+\s+){{1,4}}\**{name}\s*\([^()]*\)\s*;?\s*$",
    )
    flags = re.IGNORECASE | re.MULTILINE
    weak = rf"^\s*(?:[-*]\s+)?{name}\b"
    return re.compile("|".join(f"(?:{p})" for p in strong), flags), re.compile(weak, flags)


# ---------------------------------------------------------------- building the texts (ingest)


def chunk_text(path: Sequence[str], body: str) -> str:
    """A chunk's text: its section path on the first line, a blank line, then the body."""
    return PATH_SEPARATOR.join(path) + "\n\n" + body


def subheading(level: int, title: str) -> str:
    """A heading inside a chunk body for a section deeper than the chunk's path (level 1 = one down)."""
    return "#" * min(level, 6) + " " + title


def section_path_of(text: str) -> list[str]:
    """The section path a chunk's text starts with, one heading per item."""
    return text.split("\n\n", 1)[0].split(PATH_SEPARATOR)


def chunk_body(text: str) -> str:
    """A chunk's text without its section-path prefix line."""
    return text.split("\n\n", 1)[1] if "\n\n" in text else text


def register_head_lines(
    name: str,
    param_note: str | None,
    address: str,
    absolute_address: str | None,
    reset: int | None,
    summary: str | None,
) -> list[str]:
    """A TRM register block up to its field lines (notes/REGISTER_FORMAT.md): name line first."""
    return [
        f"Register {name}" + (f" ({param_note})" if param_note else ""),
        f"Address: {address}",
        *([f"{ABSOLUTE_ADDRESS_PREFIX}{absolute_address}"] if absolute_address else []),
        f"Reset value: 0x{reset:08X}" if reset is not None else "Reset value: see fields",
        *([f"Summary: {summary}"] if summary else []),
        FIELDS_LINE,
    ]


def field_text(
    name: str,
    bits: str | None = None,
    access: str | None = None,
    reset: str | None = None,
    description: str | None = None,
) -> str:
    """``- NAME [hi:lo] (ACCESS) reset 0xV: description``, each part after the name only when given:
    the field line of a manual's register block and of a header card alike, so one parser reads both."""
    return (
        f"- {name}"
        + (f" [{bits}]" if bits is not None else "")
        + (f" ({access})" if access else "")
        + (f" reset {reset}" if reset is not None else "")
        + (f": {description}" if description is not None else "")
    )


def with_terms(text: str, terms: list[str]) -> str:
    """Insert the ``Terms:`` line before a register block's field list (early, where the embedder reads)."""
    if not terms:
        return text
    lines = text.split("\n")
    at = lines.index(FIELDS_LINE) if FIELDS_LINE in lines else len(lines)
    return "\n".join([*lines[:at], TERMS_PREFIX + "; ".join(terms), *lines[at:]])


def card_text(name: str, params: str, value: str, description: str | None) -> str:
    """One header register's card line: ``NAME(params) = value  // description``."""
    line = f"{name}{params} = {value}"
    return line + f"{CARD_DESCRIPTION}{description}" if description else line


def with_struct_fields_note(card: str, struct_name: str, typedef: str) -> str:
    """A card line noting that its field lines come from ``typedef`` of ``struct_name``
    (STRUCT_FIELDS_NOTE reads it back)."""
    note = f"[fields from {struct_name} {typedef}]"
    return card + (" " if CARD_DESCRIPTION in card else CARD_DESCRIPTION) + note


# ---------------------------------------------------------------- parsing the TRM rendering


def parse_register_block(text: str) -> dict[str, Any]:
    """Parse one register as rendered by the TRM chunks (notes/REGISTER_FORMAT.md).

    ``text`` starts with its ``Register NAME`` line; parsing stops at the first line outside the
    format, so a whole chunk tail may be passed.
    """
    lines = text.strip().splitlines()
    head = REGISTER_HEADING.match(lines[0]) if lines else None
    if head is None:
        raise ValueError(f"not a register block: expected 'Register NAME' first, got {lines[:1]!r}")
    register: dict[str, Any] = {
        "name": head.group("name"),
        "parameters": parameter_ranges(head.group("note") or ""),
        "parameter_note": head.group("note"),
        "address": None,
        "reset": None,
        "fields": [],
    }
    for line in lines[1:]:
        if line.startswith("Address: "):
            register["address"] = line.removeprefix("Address: ").strip()
        elif line.startswith("Reset value: "):
            register["reset"] = line.removeprefix("Reset value: ").strip()
        elif line.startswith("Summary: "):
            register["summary"] = line.removeprefix("Summary: ").strip()
        elif line.startswith((TERMS_PREFIX, ABSOLUTE_ADDRESS_PREFIX)):
            # the lexicon's expansions of the names, and the summary table's absolute addresses:
            # search aids (the register tool derives the absolute address itself: _absolute_answer)
            continue
        elif line.strip() == "Fields:":
            continue
        elif (match := FIELD_LINE.match(line)) is not None:
            register["fields"].append(_field(match))
        else:
            break
    return register


def register_blocks(text: str) -> list[dict[str, Any]]:
    """Every register rendered in one chunk's text, in order."""
    lines = text.splitlines()
    starts = [
        i for i, line in enumerate(lines) if line.startswith("Register ") and REGISTER_HEADING.match(line)
    ]
    ends = [*starts[1:], len(lines)][: len(starts)]
    return [parse_register_block("\n".join(lines[i:end])) for i, end in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class ParameterRange:
    """The instances a manual register's parameter takes: one or more spans of numbers, written with
    a prefix when the manual names them so (``n: GPIO0-GPIO21, GPIO26-GPIO46``: prefix ``GPIO``)."""

    spans: tuple[tuple[int, int], ...]
    prefix: str = ""

    def holds(self, value: int) -> bool:
        return any(low <= value <= high for low, high in self.spans)

    def values(self) -> list[int]:
        return [value for low, high in self.spans for value in range(low, high + 1)]


def parameter_ranges(note: str) -> dict[str, ParameterRange | None]:
    """``n: 0-7`` -> {"n": spans ((0, 7),)}; ``n: 0-21, 26-48`` keeps both spans. A parameter whose
    values are not all numbers (or spans of them) under one prefix maps to None: range unknown."""
    ranges: dict[str, ParameterRange | None] = {}
    for name, spec in _PARAM_SPEC.findall(note):
        spans: list[tuple[int, int]] = []
        prefixes: set[str] = set()
        for item in (part.strip() for part in spec.split(",")):
            match = _PARAM_SPAN.fullmatch(item)
            if match is None:
                spans = []
                break
            first_prefix, low, second_prefix, high = match.groups()
            prefixes |= {first_prefix, second_prefix if high else first_prefix}
            spans.append((int(low), int(high or low)))
        ranges[name] = ParameterRange(tuple(spans), prefixes.pop()) if spans and len(prefixes) == 1 else None
    return ranges


def parameter_regex(
    name: str, parameters: dict[str, ParameterRange | None], any_prefix: bool = False
) -> re.Pattern[str] | None:
    """``AES_KEY_n_REG`` with parameter n -> a regex whose named groups capture the instance numbers.

    Without a parameter note, lower-case tokens (``_n_``, ``CHx``) are taken as the parameters.
    ``any_prefix``: a number the note gives bare may be written after letters (``IO_MUX_x_REG``,
    x: 0-39, as ``IO_MUX_GPIO0_REG``).
    """
    letters = list(parameters) or sorted(set(re.findall(r"(?<![a-z])([a-z]{1,2})(?![a-z])", name)))
    if not letters:
        return None
    alternation = "|".join(sorted(map(re.escape, letters), key=len, reverse=True))
    pieces: list[str] = []
    seen: set[str] = set()
    position = 0
    for match in re.finditer(rf"(?<![a-z])({alternation})(?![a-z])", name):
        pieces.append(re.escape(name[position : match.start()]))
        letter = match.group(1)
        group = f"p_{letter}"
        declared = parameters.get(letter)
        prefix = (
            re.escape(declared.prefix) if declared and declared.prefix else "[A-Z]+" if any_prefix else ""
        )
        pieces.append(f"{prefix}(?P={group})" if letter in seen else rf"{prefix}(?P<{group}>\d+)")
        seen.add(letter)
        position = match.end()
    if not seen:
        return None
    pieces.append(re.escape(name[position:]))
    return re.compile("^" + "".join(pieces) + "$")


def _field(match: re.Match[str]) -> dict[str, Any]:
    """One field line's parts. The strings are interned: a server holds the fields of every chip it
    was asked about, and their bit ranges, access codes, resets, names and even descriptions repeat
    across registers and across chips sharing a peripheral."""
    access, reset = match.group("access"), match.group("reset")
    return {
        "name": sys.intern(match.group("name")),
        "bits": sys.intern(match.group("bits")),
        "access": access and sys.intern(access),
        "reset": reset and sys.intern(reset),
        "description": sys.intern((match.group("description") or "").strip()),
    }
