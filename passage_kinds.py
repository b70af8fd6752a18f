"""What a passage is and what it states, decided once at ingest into typed columns (DESIGN §6).

The reranker asks of every candidate whether it is a register block, a capability line, an API
entry, a Kconfig option, a migration note or a page's root, and whether it states a default, names
pins or counts something. Reading that from the text at query time meant a regex per question per
candidate, repeated in several modules; here each ingest's rows get it once, through
``schema.make_row``, and the store holds it as columns (``schema.FACT_FIELDS``).
"""

from __future__ import annotations

import re
from typing import Any

from chunk_format import DEFINED_NAME, PATH_SEPARATOR, REGISTER_DEFINITION, REGISTER_HEADING, parameter_ranges
from terms import content_stems

# The kinds, one per row. ``validate_store.py`` counts them; the reranker reads them as a category.
KINDS = (
    "register",  # a TRM "Register X / Address:" block, or a header card's "X_REG = base + offset" lines
    "capability",  # a SoC capability header (soc_caps.h): one macro per line
    "header",  # any other SoC header passage
    "feature_list",  # a manual chapter's features, overview or introduction
    "table",  # a manual passage that is mostly a table
    "manual",  # any other manual prose
    "kconfig_option",  # one option of the Kconfig reference
    "api_function",
    "api_struct",
    "api_enum",
    "api_macro",
    "api_type",
    "api_other",  # the API reference's header-file lines and section roots
    "migration",  # a migration-guide passage
    "page_root",  # the first section of an ESP-IDF page (its title alone in the section path)
    "guide",  # any other ESP-IDF guide section
)
KIND_IDS = {kind: number for number, kind in enumerate(KINDS)}


STATES_DEFAULT = re.compile(
    r"^Default value:|\bdefaults? (?:value|is|to)\b|\(default[: ]|\bDefault:", re.MULTILINE | re.IGNORECASE
)
FEATURE_SECTION = re.compile(r"(?:^|> )(?:Features|Feature List|Overview|Introduction)$")
FEATURE_HEADING = re.compile(r"^#+ (?:Features|Feature List)$", re.MULTILINE)
GPIO_NUMBER = re.compile(r"\bGPIO ?(\d+)\b")
# "Up to three public keys", "64 bytes in length": a number, then the (up to three) words of what it counts.
_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|sixteen|thirty-two)"
COUNTED = re.compile(rf"\b{_NUMBER}\b((?:[\s\-]+[A-Za-z][A-Za-z0-9\-]*){{1,3}})")
_INSTANCE = re.compile(r"(?:^|[A-Za-z])(\d+)$")
# Instance numbers a question can name are one or two digits; a heading's spans are read that far.
_LAST_INSTANCE = 99
MAX_LISTED = 64
KCONFIG_REFERENCE = "api-reference/kconfig-reference"
API_SECTIONS = {
    "Functions": "api_function",
    "Structures": "api_struct",
    "Unions": "api_struct",
    "Enumerations": "api_enum",
    "Macros": "api_macro",
    "Type Definitions": "api_type",
}
TABLE_LINE = re.compile(r"^[^\n|]*\|[^\n]*$", re.MULTILINE)
TABLE_SHARE = 0.5


def passage_facts(text: str, doc_type: str, section_path: str, file_path: str) -> dict[str, Any]:
    """The typed columns of one row (``schema.FACT_FIELDS``)."""
    names = defined_names(text)
    return {
        "kind": passage_kind(text, doc_type, section_path, file_path),
        "section_depth": section_path.count(PATH_SEPARATOR) + 1 if section_path else 0,
        "gpio_count": min(len(set(GPIO_NUMBER.findall(text))), MAX_LISTED),
        "states_default": bool(STATES_DEFAULT.search(text)),
        "defined_names": names[:MAX_LISTED],
        "instance_numbers": sorted(instance_numbers(text, names))[:MAX_LISTED],
        "counted_terms": counted_terms(text),
    }


def counted_terms(text: str) -> list[str]:
    """Stems of what the passage counts: the (up to three) words after a number."""
    found = {term for match in COUNTED.finditer(text) for term in content_stems(match[1])}
    return sorted(found)[:MAX_LISTED]


def passage_kind(text: str, doc_type: str, section_path: str, file_path: str) -> str:
    """One of ``KINDS``: the first that applies, corpus by corpus."""
    if doc_type in ("trm", "src") and REGISTER_DEFINITION.search(text):
        return "register"
    if doc_type == "src":
        return "capability" if file_path.endswith("_caps.h") else "header"
    if doc_type == "trm":
        if FEATURE_SECTION.search(section_path) or FEATURE_HEADING.search(text):
            return "feature_list"
        lines = [line for line in text.splitlines()[1:] if line.strip()]
        if lines and len(TABLE_LINE.findall(text)) >= TABLE_SHARE * len(lines):
            return "table"
        return "manual"
    if file_path.startswith(KCONFIG_REFERENCE):
        return "kconfig_option" if section_path.count(PATH_SEPARATOR) >= 1 else "page_root"
    if file_path.startswith("migration-guides/"):
        return "migration"
    last = section_path.rsplit(PATH_SEPARATOR, 1)[-1]
    if "API Reference" in section_path:
        return API_SECTIONS.get(last, "api_other")
    return "page_root" if PATH_SEPARATOR not in section_path else "guide"


def defined_names(text: str) -> list[str]:
    """The register and field names the passage defines, in order, once each."""
    found = (next(group for group in match.groups() if group) for match in DEFINED_NAME.finditer(text))
    return list(dict.fromkeys(found))


def instance_numbers(text: str, names: list[str]) -> set[int]:
    """The instance numbers of the defined names (ERR0, TIMING_0, CH1; not the 2 of I2C) and those a
    parameterised register's heading lists ("(n: 0-3)", "(m = 2, 3)")."""
    numbers = set()
    for name in names:
        for part in name.split("_"):
            if (digits := _INSTANCE.search(part)) is not None:
                numbers.add(int(digits.group(1)))
    for heading in REGISTER_HEADING.finditer(text):
        for listed in parameter_ranges(heading.group("note") or "").values():
            if listed is None:  # a range the heading does not spell in numbers
                continue
            for low, high in listed.spans:
                numbers.update(range(low, min(high, _LAST_INSTANCE) + 1))
    return {number for number in numbers if number <= _LAST_INSTANCE}
