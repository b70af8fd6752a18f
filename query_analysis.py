"""The first step of the read path: a query becomes one typed record, once, that every later step
reads (retrievers, features, presentation) instead of re-splitting the text its own way.

What it holds: the identifiers and error codes the query names; the chips, silicon revisions and
ESP-IDF releases it mentions; the numbers it gives, with their units; what kind of answer it asks
for (intent flags); and its content words weighted by how rare they are in the store
(``TermStats``), so that in a long question pasted with logs the rare words (a peripheral, an error
name) outweigh "build", "run" and "output".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from chip_vocab import chips
from term_stats import NO_STATS, TermStats
from terms import STOPWORDS, content_stems, stem, words

# ---------------------------------------------------------------------------------------------
# Intent: what kind of passage holds the answer. Each flag is a feature of the reranker, whose
# weights are learned; the patterns only say what the question's words are.

_REGISTER_WORDS = r"registers?|address|offset|fields?|reset value"
REGISTER_NAMED = re.compile(rf"\b(?:{_REGISTER_WORDS})\b", re.IGNORECASE)
BITS = re.compile(r"\bbits?\b", re.IGNORECASE)
CAPABILITY = re.compile(
    r"\b(?:how many|number of|max(?:imum)?|min(?:imum)?|largest|smallest|how (?:much|large|big|long|wide)"
    r"|does (?:it|the chip|\w+) (?:have|support)|supports?|capabilit(?:y|ies)|count)\b",
    re.IGNORECASE,
)
FIELD = re.compile(
    r"\b(?:set|sets|select|selects|choose|enable|enables|disable|disables|configure|configures|invert"
    r"|power(?:s|ed)? (?:up|down|on|off)|clear|trigger|mask|after (?:a )?reset)\b",
    re.IGNORECASE,
)
API = re.compile(r"\b(?:callback|typedef|enum|arguments?|parameters?|returns?|function|api)\b", re.IGNORECASE)
STRUCT = re.compile(r"\b(?:struct|structure|fields?|members?|config)\b", re.IGNORECASE)
OPTION = re.compile(r"\b(?:options?|menuconfig|kconfig|sdkconfig|config_\w+)\b", re.IGNORECASE)
DEFAULT = re.compile(r"\bdefaults?\b|\bby default\b", re.IGNORECASE)
PINS = re.compile(r"\b(?:gpios?|pins?|pads?|pinout|strapping)\b", re.IGNORECASE)
EXPLANATION = re.compile(
    r"^(?:can|could|is|are|does|do|did|why|will|should)\b|\bwhat happens\b|\bhow (?:do|can|should) i\b",
    re.IGNORECASE,
)
MIGRATION = re.compile(
    r"\b(?:migrat\w*|deprecated|removed|renamed|no longer|legacy|upgrad\w*|v[456]\.\d)\b", re.IGNORECASE
)
BUILD = re.compile(
    r"\b(?:idf\.py|cmake|build|compile|flash(?:ing)?|menuconfig|partition|linker|component)\b", re.IGNORECASE
)
# Error text as firmware prints it: ESP-IDF log lines "E (1234) tag: ...", panics, error codes.
ERROR_TEXT = re.compile(
    r"\b[EW] \(\d+\)|Guru Meditation|\b[A-Z][A-Za-z]+Prohibited\b|abort\(\)|assert(?:ion)? failed"
    r"|\bESP_ERR_\w+|\berror:|Brownout|rst:0x[0-9a-f]+|Backtrace:",
    re.IGNORECASE,
)
INTENTS = (
    "register",
    "field",
    "capability",
    "api",
    "struct",
    "option",
    "default",
    "pins",
    "explanation",
    "migration",
    "build",
    "error_text",
)

# Numbers with their units ("32 kHz", "16 bits", "64-bit"), and bare instance numbers ("timer 0").
_UNITS = r"bits?|bytes?|[kmg]?hz|ms|us|ns|seconds?|s|v|mv|ma|words?|kb|mb|kib|mib|times|px|%"
QUANTITY = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?)[\s-]?({_UNITS})(?![\w])", re.IGNORECASE)
BARE_NUMBER = re.compile(r"(?<![\w.\-])(\d{1,2})(?![\w.\-])")
REVISION = re.compile(r"\b(?:rev(?:ision)?\.?\s*|v)(\d\.\d)\b", re.IGNORECASE)
RELEASE = re.compile(r"\b(?:idf|esp-idf)\s*v?(\d\.\d(?:\.\d+)?)\b|\bv(\d\.\d\.\d+)\b", re.IGNORECASE)

QUERY_TOKEN = re.compile(r"[A-Za-z0-9_*]+")

# A long question is searched by its rarest words: beyond this many, common ones only dilute BM25.
SEARCH_TERMS = 16


@dataclass(frozen=True)
class QueryAnalysis:
    """One query, analysed: every later step of the read path reads this."""

    text: str
    identifiers: tuple[str, ...]
    stems: tuple[str, ...]  # content-word stems, in order, once each
    weights: Mapping[str, float]  # stem -> rarity weight, summing to 1 over ``stems``
    intents: frozenset[str]
    chips: tuple[str, ...]
    revisions: tuple[str, ...]
    releases: tuple[str, ...]
    quantities: tuple[tuple[float, str], ...]
    instance_numbers: frozenset[int]
    words: int  # the query's length in words
    search_text: str  # what the full-text leg searches: the whole query, or its rarest words

    def has(self, intent: str) -> bool:
        return intent in self.intents


def analyse(query: str, stats: TermStats = NO_STATS) -> QueryAnalysis:
    """The typed record of ``query``; ``stats`` weighs its words by rarity in the store."""
    identifiers = tuple(query_symbols(query))
    stems = tuple(dict.fromkeys(content_stems(query)))
    raw = {term: stats.idf(term) for term in stems}
    total = sum(raw.values()) or 1.0
    weights = {term: value / total for term, value in raw.items()}
    quantities = tuple((float(number), unit.lower()) for number, unit in QUANTITY.findall(query))
    without_quantities = QUANTITY.sub(" ", query)
    return QueryAnalysis(
        text=query,
        identifiers=identifiers,
        stems=stems,
        weights=weights,
        intents=frozenset(_intents(query)),
        chips=_chip_mentions(query),
        revisions=tuple(dict.fromkeys(match[1] for match in REVISION.finditer(query))),
        releases=tuple(dict.fromkeys(a or b for a, b in RELEASE.findall(query))),
        quantities=quantities,
        instance_numbers=frozenset(int(n) for n in BARE_NUMBER.findall(without_quantities)),
        words=len(words(query)),
        search_text=_search_text(query, identifiers, raw),
    )


def looks_like_identifier(token: str) -> bool:
    """Tokens an agent means as a symbol: snake/SCREAMING case, camelCase, or a wildcard pattern."""
    core = token.strip("*")
    if len(core) < 3 or core.isdigit() or ("*" in token and len(token.replace("*", "")) < 4):
        return False
    return "_" in core or "*" in token or bool(re.search(r"[a-z][A-Z]", core))


def query_symbols(query: str) -> list[str]:
    """The identifier-like tokens of a free-text query, in order, without duplicates."""
    found = [t for t in QUERY_TOKEN.findall(query) if looks_like_identifier(t)]
    return list(dict.fromkeys(t.strip("_") if t.strip("_") else t for t in found))[:8]


def _intents(query: str) -> set[str]:
    found = {
        name
        for name, pattern in (
            ("capability", CAPABILITY),
            ("field", FIELD),
            ("api", API),
            ("struct", STRUCT),
            ("option", OPTION),
            ("default", DEFAULT),
            ("pins", PINS),
            ("explanation", EXPLANATION),
            ("migration", MIGRATION),
            ("build", BUILD),
            ("error_text", ERROR_TEXT),
        )
        if pattern.search(query)
    }
    if REGISTER_NAMED.search(query) or (BITS.search(query) and "capability" not in found):
        found.add("register")
    return found


def _chip_mentions(query: str) -> tuple[str, ...]:
    """Chip ids the query names, however spaced ("ESP32-S3", "esp32 s3", "ESP32S3"); a bare "ESP32"
    only where no suffix follows it."""
    lowered = query.lower()
    return tuple(chip_id for chip_id, pattern in _CHIP_PATTERNS.items() if pattern.search(lowered))


def _chip_pattern(chip_id: str) -> re.Pattern[str]:
    suffix = chip_id.removeprefix("esp32")
    tail = rf"[\s_-]?{suffix}" if suffix else r"(?![\s_-]?[a-z]\d)"
    return re.compile(rf"\besp32{tail}(?![a-z0-9])")


_CHIP_PATTERNS = {chip_id: _chip_pattern(chip_id) for chip_id in chips()}


def _search_text(query: str, identifiers: tuple[str, ...], idf: Mapping[str, float]) -> str:
    """The query itself, or for a long one its identifiers and rarest words (surface forms)."""
    surface: dict[str, str] = {}
    for word in words(query):
        if len(word) >= 2 and word not in STOPWORDS:
            surface.setdefault(stem(word), word)
    if len(surface) <= SEARCH_TERMS:
        return query
    rarest = sorted(surface, key=lambda term: -idf.get(term, 0.0))[:SEARCH_TERMS]
    return " ".join([*identifiers, *(surface[term] for term in rarest)])
