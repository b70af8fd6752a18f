"""Capability headers (``soc_caps.h``): each ``SOC_*`` macro with a gloss in words (``SOC_UART_NUM 3``
-> "number of UART: 3"), grouped by peripheral, so a question in words finds a value written as a
macro; acronyms are spelled as the ESP-IDF docs spell them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from chip_vocab import chips
from chunking import Block, Section
from header_scan import IDENT, HeaderFile, Item, _strip_comments, _with_comment
from lexicon import Lexicon, is_abbreviation

# ---------------------------------------------------------------- capability headers

# The naming conventions of capability macros, read as words; the abbreviations inside the names
# (MEM, INTR, CHAN, ...) come from the lexicon mined from the register headers' field comments.
CAPABILITY_COUNT_WORDS = frozenset(("num", "nums", "count", "cnt", "number"))
CAPABILITY_CONVENTIONS = {
    "max": "maximum",
    "min": "minimum",
    "len": "length",
    "caps": "capabilities",
    "periph": "peripheral",
}
CAPABILITY_DEFINES_PER_CHUNK = 8
_FIELD_COMMENT = re.compile(rf"^/\*\*?\s*({IDENT})\s*:[^\n]*\n?(.*?)\*/(.*)$", re.S)


def is_capability_header(file_name: str) -> bool:
    return file_name.endswith("_caps.h")


def comment_pairs(items: list[Item]) -> list[tuple[str, str]]:
    """(field, description) from generated register headers' field comments, for the lexicon:
    ``/** UART_RXFIFO_FULL_THRHD : R/W; bitpos: [9:0]; default: 96;`` then the words."""
    pairs = []
    for item in items:
        match = _FIELD_COMMENT.match(item.comment) if item.kind == "define" and item.comment else None
        if match is None or match.group(1) != item.names[0]:
            continue
        description = re.sub(
            r"/\*+|\*+/|^\s*\*|description\s*:", " ", match.group(2) + match.group(3), flags=re.M
        )
        if description.strip():
            pairs.append((item.names[0], " ".join(description.split())))
    return pairs


def capability_gloss(name: str, value: str, params: str, lexicon: Lexicon, group: str = "") -> str:
    """``SOC_RMT_MEM_WORDS_PER_CHANNEL 48`` read as "RMT memory words per channel: 48"; a peripheral
    outside its own group is spelled out: ``SOC_EMAC_SUPPORTED`` "supports EMAC (Ethernet MAC): yes"."""
    # digits kept: in I2S, SHA256, AES_128 or EXT1_WAKEUP they are the meaning, not an instance
    # number as in a register's CH0 (lexicon.name_parts drops those)
    parts = [piece for piece in name.removeprefix("SOC_").split("_") if piece]
    words = [
        CAPABILITY_CONVENTIONS.get(part.lower()) or lexicon.expand_part(part) or _gloss_word(part)
        for part in parts[1:]
    ]
    peripheral = parts[0] if parts else name  # the peripheral keeps its acronym
    spelled = lexicon.spell_out(peripheral) if peripheral.upper() != group.upper() else None
    words.insert(0, f"{peripheral} ({spelled})" if spelled else peripheral)
    shown = _plain_value(value) + (f" (for each {params.strip('()')})" if params else "")
    flag = {"1": "yes", "0": "no"}.get(shown, shown)
    lowered = [w.lower() for w in words]
    for verb in ("supported", "support", "supports", "has"):
        if verb in lowered[1:]:
            rest = [w for w, low in zip(words, lowered, strict=True) if low != verb]
            return f"{'has' if verb == 'has' else 'supports'} {' '.join(rest)}: {flag}"
    if lowered[-1] in CAPABILITY_COUNT_WORDS:
        return f"number of {' '.join(words[:-1])}: {shown}"
    return f"{' '.join(words)}: {shown}"


def _gloss_word(part: str) -> str:
    """A part as a word: ``10BIT`` -> "10-bit"; acronyms with digits (I2S, SHA256) stay as written."""
    bits = re.fullmatch(r"(\d+)BITS?", part)
    if bits:
        return f"{bits.group(1)}-bit"
    return part if re.search(r"\d", part) else part.lower()


# Peripheral acronyms spelled out where the ESP-IDF docs introduce them ("LED Control (LEDC)",
# "Ethernet MAC (EMAC)"): questions say "LED PWM" or "Ethernet", the capability macros say LEDC
# and EMAC. Read from the same checkout's docs sources, so they move with its commit.
DOCS_SOURCES = Path("docs/en")
_SPELLED_ACRONYM = re.compile(
    r"\b([A-Z][\w/-]*(?: (?:[A-Z][\w/-]*|to|of|and|for|the|in|on|with))*) \(([A-Z][A-Z0-9_]{1,15})\)"
)
MAX_SPELLING_WORDS = 6
MAX_SPELLINGS = 2


def acronym_spellings(idf_path: Path) -> dict[str, str]:
    """Acronym -> its one or two commonest spellings in the docs (``RMT`` -> "Remote Control
    Transceiver"). A spelling starts with the acronym's first letter, holds its letters in order
    ("USB-to-Serial (UART)" is no spelling of UART) and does not repeat it ("UART Controller");
    words before that letter ("See Pulse Counter (PCNT)") are dropped."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for source in sorted((idf_path / DOCS_SOURCES).rglob("*.rst")):
        for phrase, acronym in _SPELLED_ACRONYM.findall(source.read_text(encoding="utf-8", errors="replace")):
            words = phrase.split()
            while words and words[0][0] != acronym[0]:
                words.pop(0)
            if (
                words
                and len(words) <= MAX_SPELLING_WORDS
                and acronym not in (w.upper() for w in words)
                and "_" not in phrase  # an eFuse field list (BLOCK3 (BLOCK_KEY0)) is no spelling
                and is_abbreviation("".join(filter(str.isalpha, acronym.lower())), " ".join(words).lower())
            ):
                counts[acronym][" ".join(words)] += 1
    spellings = {}
    for acronym, phrases in counts.items():
        distinct: dict[str, str] = {}
        for phrase, _ in phrases.most_common():
            distinct.setdefault(phrase.lower(), phrase)
        spellings[acronym] = ", ".join(list(distinct.values())[:MAX_SPELLINGS])
    return spellings


def _plain_value(value: str) -> str:
    """``(1U)`` -> ``1``; expressions and masks stay as written."""
    bare = _strip_comments(value).strip()
    while bare.startswith("(") and bare.endswith(")"):
        bare = bare[1:-1].strip()
    number = re.fullmatch(r"(0x[0-9A-Fa-f]+|\d+)[uUlL]*", bare)
    return number.group(1) if number else bare


def capability_sections(header: HeaderFile, items: list[Item], lexicon: Lexicon) -> Section:
    """One small chunk per peripheral's capabilities, each macro followed by what it counts in words.

    A capability question ("how many RMT channels") is answered by one ``#define`` line; inside a
    400-word run of unrelated macros it ranked below other chunks. Each banner (``RMT CAPS``) is a
    group; the ``SOC_X_SUPPORTED`` flags listed together at the top join their peripheral's group.
    """
    groups: dict[str, list[Item]] = {}
    current = "general"
    for item in items:
        if item.kind == "banner":
            current = re.sub(r"\s*CAPS?$", "", item.text.strip(), flags=re.I) or item.text.strip()
            continue
        groups.setdefault(current, []).append(item)
    _regroup_support_flags(groups)
    chip_name = chips()[header.chips[0]].name if len(header.chips) == 1 else "every chip"
    root = Section(header.rel_path)
    for group, members in groups.items():
        pieces = [
            members[i : i + CAPABILITY_DEFINES_PER_CHUNK]
            for i in range(0, len(members), CAPABILITY_DEFINES_PER_CHUNK)
        ]
        section = Section(group)
        spelled = lexicon.spell_out(group)
        named = f"{group} = {spelled}" if spelled else group
        for piece in pieces:
            lines = [f"{chip_name} capabilities: {named} ({header.path.name})"]
            for item in piece:
                lines.append(_with_comment(item))
                if item.kind == "define":
                    gloss = capability_gloss(item.names[0], item.value, item.params, lexicon, group)
                    lines.append(f"  = {gloss}")
            names = [name for item in piece for name in item.names]
            section.blocks.append(Block("\n".join(lines), atomic=True, standalone=True, symbol_refs=names))
        root.children.append(section)
    return root


def _names_start(items: list[Item], prefix: str) -> bool:
    return any(name.startswith(prefix) for item in items for name in item.names)


def _regroup_support_flags(groups: dict[str, list[Item]]) -> None:
    """Move ``SOC_<X>_SUPPORTED`` flags into the group whose macros share the ``SOC_<X>_`` prefix."""
    for group, members in list(groups.items()):
        for item in list(members):
            name = item.names[0] if item.kind == "define" and item.names else ""
            if not name.endswith("_SUPPORTED"):
                continue
            prefix = name.removesuffix("SUPPORTED")
            target = next(
                (
                    g
                    for g, ms in groups.items()
                    if g != group and any(n.startswith(prefix) for m in ms for n in m.names)
                ),
                None,
            )
            if target is not None:
                members.remove(item)
                groups[target].insert(0, item)
    for group in [g for g, ms in groups.items() if not ms]:
        del groups[group]
