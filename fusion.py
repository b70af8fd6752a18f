"""How the retrievers' lists become one ranking: score fusion of the vector and full-text lists, then
the symbol retriever's tiers and the extra votes.

Each list's scores are read relative to that list alone (cosine similarity spread between the list's
best and worst, BM25 over its best), so no calibration across retrievers is needed; a row earns its
normalised score from every list holding it, times the list's weight for this kind of question.
On top, the symbol retriever votes with a small constant so a passage that defines a queried
identifier leads, and each kind of question gets one more reciprocal-rank vote for the passages
that hold its kind of answer: register blocks, capability lines, API structures, stated defaults,
counts, pin lists; last, the first rows gain by how many of the question's words they say close
together. docs/retrieval.md records what each one bought on the eval sets.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chunk_format import DEFINED_NAME, REGISTER_DEFINITION, REGISTER_HEADING, parameter_ranges
from lexicon import is_abbreviation, name_parts, stem
from query_words import STOPWORDS, query_terms

RRF_K = 60
# The symbol retriever ranks hits with a line defining the symbol in tiers (exact name before a
# parameterised or wildcard match); hits in one tier share a rank. With a small constant, one tier
# step (1/2 vs 1/3) outweighs anything vector and full-text can add together (at most 2.6/61), so a
# query that is just an identifier returns its definition first, and within a tier the vector +
# full-text fusion decides. Table rows and mere mentions are fused with the ordinary constant.
SYMBOL_RRF_K = 1
# A question about a register's address, offset, bits or fields wants the passage that defines the
# register (a TRM "Register X / Address:" block or a header card line), not the prose around it.
_REGISTER_WORDS = r"registers?|address|offset|fields?|reset value"
REGISTER_INTENT = re.compile(rf"\b(?:{_REGISTER_WORDS}|bits?)\b", re.IGNORECASE)
# "Bits" alone leaves a question about a width ("maximum duty resolution in bits") a capability one.
REGISTER_NAMED = re.compile(rf"\b(?:{_REGISTER_WORDS})\b", re.IGNORECASE)

# What a question asks decides how much each retriever's list counts (docs/retrieval.md has the
# per-kind measurements): identifiers go to the symbol retriever, register questions get the
# register-definition vote, capability questions ("how many", "maximum", "does it support") are
# answered by one macro line that full-text search matches on its words.
CAPABILITY_INTENT = re.compile(
    r"\b(?:how many|number of|max(?:imum)?|min(?:imum)?|largest|smallest|how (?:much|large|big|long|wide)"
    r"|does (?:it|the chip|\w+) (?:have|support)|supports?|capabilit(?:y|ies))\b",
    re.IGNORECASE,
)
QUERY_KINDS = ("symbol", "register", "capability", "prose")


@dataclass(frozen=True)
class LegWeights:
    """What the vector and full-text lists' best rows earn for one kind of question."""

    vector: float = 0.6
    fts: float = 1.0


# Measured on the eval sets (docs/retrieval.md): full-text counts more for capability questions (the
# macro line's words) and for prose questions (a guide's exact phrases); the vector list's spread
# scores (below) carry 0.6 of a full-text list's best for every kind.
LEG_WEIGHTS = {
    "symbol": LegWeights(),
    "register": LegWeights(),
    "capability": LegWeights(fts=1.5),
    "prose": LegWeights(fts=2.0),
}

RankedList = list[dict[str, Any]]


def by_score(ranked: RankedList) -> RankedList:
    """Best first; Python's sort is stable, so equal scores keep their order."""
    return sorted(ranked, key=lambda row: -row["score"])


# "how many general purpose registers does the ULP have" counts a CPU's registers: a capability, not
# a question about which register (the register vote sent its answer from 2nd to 7th).
COUNTED_REGISTERS = re.compile(r"\b(?:how many|number of) (?:[\w-]+ ){0,3}registers\b", re.IGNORECASE)
# "What address modes does the trace encoder have", "supported bit rates and receive FIFO size": the
# register words there name a property of the hardware, not where a register is or which bit to
# set (the register vote sent both answers, the chapter's feature text, below the first ten).
PROPERTY_COMPOUNDS = re.compile(
    r"\b(?:bit ?rates?|bit resolution|address (?:modes?|spaces?|ranges?))\b", re.IGNORECASE
)


def names_register(query: str) -> bool:
    """Whether the question names a register, field, address, offset or reset value (the compounds
    that only look like register words left out)."""
    return bool(REGISTER_NAMED.search(PROPERTY_COMPOUNDS.sub(" ", query)))


def asks_register(query: str) -> bool:
    """A question about a register, address, offset, bit, field or reset value; not one that counts
    in bits without naming any of the others ("maximum LEDC timer bit width", "what operand bit
    lengths does the RSA accelerator support"): that asks for a capability, and the register vote
    sent the register blocks that merely hold such fields above the line or feature list that
    states the width."""
    if COUNTED_REGISTERS.search(query):
        return False
    if names_register(query):
        return True
    wording = PROPERTY_COMPOUNDS.sub(" ", query)
    return bool(REGISTER_INTENT.search(wording)) and not CAPABILITY_INTENT.search(wording)


# A question of more content words than this besides its identifiers is about something else than
# the identifier's definition ("priority of the task that runs app_main"): its symbol hits then vote
# like any other list instead of leading by tier.
SYMBOL_LED_WORDS = 2


def symbol_led(query: str, symbols: list[str]) -> bool:
    """Whether the question is a lookup of the identifiers it names (``symbols``): it says at most
    ``SYMBOL_LED_WORDS`` other content words."""
    if not symbols:
        return False
    named = {symbol.lower() for symbol in symbols}
    return len([word for word in query_terms(query) if word not in named]) <= SYMBOL_LED_WORDS


def query_kind(query: str, led_by_symbols: bool) -> str:
    """symbol, register (``asks_register``: one that counts in bits is a capability question),
    capability or prose: the first that applies, in that order.

    Only a lookup of identifiers is a symbol question. A sentence that merely names one ("skip
    periodic esp_timer callbacks missed during light sleep") is asked in its words: weighted as a
    symbol question, full text counted half of what it counts for prose, and the guide both lists
    held first fell to 8th under passages that mention the identifier."""
    if led_by_symbols:
        return "symbol"
    if asks_register(query):
        return "register"
    if CAPABILITY_INTENT.search(query):
        return "capability"
    return "prose"


# A list's best row earns what first place earns in a reciprocal-rank vote (1 / 61), so the symbol
# tiers and the answer-kind votes below keep their weight against the two retrievers.
LEG_SCALE = 1.0 / (RRF_K + 1)


@dataclass(frozen=True)
class Leg:
    """One retriever's list, best first, how to read a row's score, and the list's weight.

    ``spread``: read scores between the list's worst (0) and best (1) instead of over its best.
    MiniLM's cosine similarities sit in a narrow band (the 40th candidate often scores 0.6 of the
    first), so over the best alone the vector list hardly tells its top from its tail; BM25 scores
    already fall off steeply and keep their proportions."""

    name: str
    rows: RankedList
    relevance: Callable[[dict[str, Any]], float]
    weight: float = 1.0
    spread: bool = False


def fuse_legs(legs: list[Leg]) -> RankedList:
    """Fuse the lists: each row earns weight x LEG_SCALE x its normalised score from every list
    holding it (a list whose rows all score alike gives each of them the full share).

    Rank alone heard no gap: a row far above its list's next one gained no more than a row a hair
    above it, and a question worded unlike the manual, whose answer only the vector list finds,
    lost to passages both lists hold at middling ranks. Rows keep the first list's copy;
    ``matched_by`` names every list that found the row; ties keep the order of first appearance.
    """
    fused: dict[int, dict[str, Any]] = {}
    for leg in legs:
        scores = [leg.relevance(row) for row in leg.rows]
        best = max(scores, default=0.0)
        floor = min(scores, default=0.0) if leg.spread else 0.0
        for row, score in zip(leg.rows, scores, strict=True):
            entry = fused.setdefault(row["_rowid"], {**row, "matched_by": [], "score": 0.0})
            share = (max(score - floor, 0.0) / (best - floor)) if best > floor else 1.0
            entry["score"] += leg.weight * LEG_SCALE * share
            entry["matched_by"].append(leg.name)
    return by_score(list(fused.values()))


def vote_for(
    ranked: RankedList, holds_answer: Callable[[dict[str, Any]], bool], weight: float = 1.0
) -> RankedList:
    """One more reciprocal-rank vote, scaled by ``weight``, for the rows that hold the kind of answer
    asked for, in their fused order (the first earns weight / 61, the next weight / 62, ...); best
    first again. The shape of every extra vote below."""
    for position, row in enumerate((row for row in ranked if holds_answer(row)), 1):
        row["score"] += weight / (RRF_K + position)
    return by_score(ranked)


def fuse_symbols(
    ranked: RankedList,
    hits: list[tuple[tuple[int, int, int, int], dict[str, Any]]],
    pool_size: int,
    tiered: bool = True,
) -> RankedList:
    """Add the symbol retriever's reciprocal-rank contribution to the vector + full-text fusion.

    With ``tiered``, hits where a line defines the symbol are ranked by tier with a small constant,
    so they lead; hits that only list or mention it (a module name like LCD_CAM in a question, a
    clock table row) count like any other retriever's list, so they never outrank what the question
    is about. Without it (a sentence that merely names an identifier) every hit counts that way.
    """
    by_id = {row["_rowid"]: row for row in ranked}
    pool = hits[:pool_size]
    tiers = sorted({rank[:2] for rank, _ in pool if rank[0] == -2})
    for position, (rank, hit) in enumerate(pool, 1):
        if tiered and rank[0] == -2:
            contribution = 1.0 / (SYMBOL_RRF_K + tiers.index(rank[:2]) + 1)
        else:
            contribution = 1.0 / (RRF_K + position)
        row = by_id.setdefault(hit["_rowid"], {**hit, "matched_by": [], "score": 0.0})
        row["score"] += contribution
        row["matched_by"].append("symbol")
    return by_score(list(by_id.values()))


# The passages that state a chip's capabilities: one macro per line in words (ingest_source.py).
CAPABILITY_SOURCE = re.compile(r"_caps\.h$")


def fuse_capability_definitions(ranked: RankedList) -> RankedList:
    """One more reciprocal-rank vote for capability-header passages, for capability questions.

    "How many LED PWM channels" is answered by one ``SOC_LEDC_CHANNEL_NUM`` line, but register
    cards and structs that describe every channel's fields match its words more often; the
    capability chunks keep their fused order among themselves.
    """
    return vote_for(ranked, lambda row: bool(CAPABILITY_SOURCE.search(row["file_path"])))


def fuse_register_definitions(ranked: RankedList) -> RankedList:
    """One more reciprocal-rank vote, for passages that define registers, in their fused order.

    Used when the question asks for a register, address, offset, bit or field: it lifts the register
    block above the functional description that talks about the same peripheral (on the dev queries'
    TRM cases hit@1 rose from 0.34 to 0.53), keeping the fused order among register blocks.
    """
    return vote_for(ranked, lambda row: bool(REGISTER_DEFINITION.search(row["text"])))


# Asking how to make the hardware do something ("select the clock source", "enable mono mode", "bit to
# power up the sensor") or what it does by default ("default error warning limit after reset") is,
# within the manuals or the headers, asking for a register field: its name and its reset value. So is
# an order to the hardware in other verbs ("skip blending and output the background layer", "let one
# channel borrow the next channels' RAM", "how do I force the pad high"), but only as an order: as
# mere description ("how many cards can the host connect") they belong to concept questions. And
# within them "where do I read a hardware random number from" asks which register holds it. A
# question that opens by asking about the hardware ("how many mask filters does it have", "at what
# voltage does it trigger", "can I set and clear the outputs with CPU instructions") uses even the
# configuring words to describe it.
_FIELD_WORDS = (
    r"set|sets|select|selects|choose|enable|enables|disable|disables|configure|configures|invert"
    r"|power(?:s|ed)? (?:up|down|on|off)|make|clear|trigger|mask|setting|defaults?|after (?:a )?reset"
)
_CONTROL_VERBS = (
    r"let|put|switch|stop|start|divide|turn|keep|force|reset|hold|ignore|skip|change|limit|route"
    r"|connect|generate|swap|reverse|delay"
)
FIELD_WORDS = re.compile(rf"\b(?:{_FIELD_WORDS})\b", re.IGNORECASE)
FIELD_ORDER = re.compile(
    rf"(?:^|\bto |\bhow (?:do|can|should) i )(?:{_CONTROL_VERBS})\b|^where (?:do|can|should) i\b",
    re.IGNORECASE,
)
DESCRIBING_OPENING = re.compile(
    r"^(?:how (?:many|much|often|long)|at what|what|can|could|does|do|is|are|why|when)\b", re.IGNORECASE
)


# A topic the question opens with ("GPIO via ETM: how many task channels ...") comes before its opening.
TOPIC_PREFIX = re.compile(r"^[^:?]{1,60}:\s+")


def question_opening(query: str) -> str:
    """The question (stripped) from its opening on, past any topic it names first: what the tests
    anchored at the start of a question read."""
    return TOPIC_PREFIX.sub("", query)


def asks_field(query: str) -> bool:
    """Whether the question (stripped) asks how to configure the hardware or what it does by default."""
    query = question_opening(query)
    if FIELD_ORDER.search(query):
        return True
    return bool(FIELD_WORDS.search(query)) and not DESCRIBING_OPENING.match(query)


# Parts every register name shares say nothing about which register is meant.
GENERIC_NAME_PARTS = frozenset(("reg",))
# How much a name wholly spelled out by the question adds: about one list's vote at rank ~40, so it
# reorders sibling register blocks that the lists rank close together, not far-apart ones (measured
# in docs/retrieval.md).
NAME_VOTE_WEIGHT = 0.01


# Name parts abbreviating two words at once (CLKDIV, PCNT) are matched against word pairs from this length.
COMPOUND_PART_LETTERS = 4
# Name parts that are no letters-in-order abbreviation of their words: the X of TX and RX, XTAL.
# Word beginnings, so "receiver", "received" and "transmission" count.
IRREGULAR_PARTS = {"tx": ("transmit", "send"), "rx": ("receiv", "reception"), "xtal": ("crystal",)}


class QuestionWords:
    """The question's content words, lower case (identifier pieces too: "i2c", "p256"), with their
    stems computed once and each name part's verdict remembered: one query tests the same parts
    (LEDC, CH, INT) in every field of ~60 candidate blocks, and stemming them anew cost ~65 ms."""

    def __init__(self, query: str) -> None:
        tokens = re.findall(r"[a-z0-9]+", query.lower())
        self.words = [w for w in tokens if len(w) >= 2 and w not in STOPWORDS]
        self.stems = [stem(w) for w in self.words]
        self._pairs = [first + second for first, second in itertools.pairwise(self.words)]
        self._spelled: dict[str, bool] = {}

    def spell(self, part: str) -> bool:
        """Whether a name part is one of the question's words, or their abbreviation (ctrl/control,
        thrhd/threshold, ena/enable, conf/configuration, rx/receiver), or at four letters or more the
        abbreviation of two words in a row (clkdiv/"clock divider"; a shorter part fits too many pairs)."""
        if part not in self._spelled:
            part_stem = stem(part)
            self._spelled[part] = any(
                word.startswith(IRREGULAR_PARTS.get(part, ()))
                or part == word
                or part_stem == word_stem
                or (len(part) >= 3 and word.startswith(part))
                or is_abbreviation(part, word)
                for word, word_stem in zip(self.words, self.stems, strict=True)
            ) or (
                len(part) >= COMPOUND_PART_LETTERS
                and any(is_abbreviation(part, pair) for pair in self._pairs)
            )
        return self._spelled[part]


def name_coverage(text: str, words: QuestionWords) -> float:
    """The largest share of one defined name's parts that the question spells out (0 to 1).

    Sibling register blocks share their peripheral's words in every description, so BM25 and the
    embedder rank them close together; the name itself (PCNT_CTRL_REG, TSENS_POWER_UP) is what
    differs, and the question usually says its parts in full words.
    """
    best = 0.0
    for match in DEFINED_NAME.finditer(text):
        name = next(group for group in match.groups() if group)
        parts = [p.lower() for p in name_parts(name) if len(p) >= 2 and p.lower() not in GENERIC_NAME_PARTS]
        if parts:
            best = max(best, sum(words.spell(part) for part in parts) / len(parts))
    return best


def fuse_register_names(ranked: RankedList, words: QuestionWords) -> RankedList:
    """Raise each register-defining passage by how fully the question spells out one of its names."""
    for row in ranked:
        if REGISTER_DEFINITION.search(row["text"]):
            row["score"] += NAME_VOTE_WEIGHT * name_coverage(row["text"], words)
    return by_score(ranked)


# A question about a driver's struct, its fields or a config ("SPI device config struct: clock speed
# and chip select pin") is answered by the API reference, whose member lists the guide prose around
# them paraphrase in the same words. So is one about a function's argument or parameter ("start an
# esp_timer that fires repeatedly - what unit is the period argument in?"): the reference lists each
# prototype's parameters, the guide shows the call.
_STRUCT_WORDS = r"struct|structure|fields?|members?|config"
API_INTENT = re.compile(
    rf"\b(?:{_STRUCT_WORDS}|callback|typedef|enum|arguments?|parameters?)\b", re.IGNORECASE
)
API_REFERENCE_SECTION = "API Reference"
# ... and of those, the ones about a struct's members are answered by a Structures section
STRUCT_INTENT = re.compile(rf"\b(?:{_STRUCT_WORDS})\b", re.IGNORECASE)
# Half a list's vote: it settles near-ties between a guide section and the reference (measured in
# docs/retrieval.md), without carrying a reference passage that no list ranks high.
API_VOTE_WEIGHT = 0.5


def fuse_api_reference(ranked: RankedList, query: str) -> RankedList:
    """One more (half) reciprocal-rank vote for ESP-IDF API-reference passages, in their fused order,
    and for a question about a struct's fields or a config another half for the reference's
    ``Structures`` sections: the ``Functions`` section next to them names the same struct in every
    prototype that takes it ("ESP-NOW peer info ... fields" is ``esp_now_peer_info``'s member list,
    not ``esp_now_get_peer``)."""
    ranked = vote_for(ranked, _in_reference, API_VOTE_WEIGHT)
    if STRUCT_INTENT.search(query):
        ranked = vote_for(
            ranked,
            lambda row: _in_reference(row) and row["section_path"].endswith(" > Structures"),
            API_VOTE_WEIGHT,
        )
    return ranked


def _in_reference(row: dict[str, Any]) -> bool:
    return API_REFERENCE_SECTION in row["section_path"]


# A question about a default ("interrupt watchdog timeout option and its default") is answered by a
# passage that states one: a Kconfig option's "Default value:" list, a struct member's "default is",
# "(default: 5000)". The guide prose that names the same option ranks above it on every other word.
DEFAULT_INTENT = re.compile(r"\bdefaults?\b", re.IGNORECASE)
# ... but not the word inside the name of a thing: "post an event to the default event loop", "give
# different sdkconfig defaults for each target" ask about the loop and the file, and the vote sent
# their answers below the options that state some default (4th and 9th).
NAMED_DEFAULTS = re.compile(r"\b(?:default event loops?|sdkconfig[. ]defaults(?:\.\w+)?)\b", re.IGNORECASE)


def asks_default(query: str) -> bool:
    """Whether the question asks for a default value (or what happens by default)."""
    return bool(DEFAULT_INTENT.search(NAMED_DEFAULTS.sub(" ", query)))


STATES_DEFAULT = re.compile(
    r"^Default value:|\bdefaults? (?:value|is|to)\b|\(default[: ]|\bDefault:", re.MULTILINE | re.IGNORECASE
)


def fuse_default_statements(ranked: RankedList) -> RankedList:
    """One more reciprocal-rank vote for passages that state a default value, in their fused order."""
    return vote_for(ranked, lambda row: bool(STATES_DEFAULT.search(row["text"])))


# A question that counts ("how many secure boot keys can be stored", "maximum transaction length of
# the SPI slave driver") is answered by a passage that counts what it names ("Up to three public
# keys", "up to 64 bytes in length"): half a vote, in fused order, for passages where a number is
# followed within two words by one of the question's nouns. Not for the headers: their capability
# lines have a vote of their own.
_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|sixteen|thirty-two)"
_COUNTING_WORDS = frozenset(
    ("many", "much", "maximum", "minimum", "number", "does", "have", "support", "supports")
)
COUNT_GAP_WORDS = 2
COUNT_VOTE_WEIGHT = 0.5
# A count the question says something sets or holds ("the register that sets how many blocks
# DMA-SHA processes", "write the number of message blocks") is a field's value, not a count to
# state: the counting vote went to sibling register blocks where a number merely precedes one of
# the question's nouns ("Write 1 to start DMA").
CONFIGURED_COUNT = re.compile(
    r"\b(?:sets?|setting|holds?|configures?|writes?|selects?|chooses?|controls?|determines?|programs?|limits?)"
    r"\s+(?:how (?:many|much|long)|the (?:number|count|maximum|minimum|max|min) of)\b",
    re.IGNORECASE,
)
# A count the program finds out at run time ("how do I find out how many free entries are left",
# "find out how big a stored string is before reading it") is answered by the function that returns
# it, whose description counts nothing; the vote went to passages stating fixed sizes and limits.
QUERIED_COUNT = re.compile(
    r"\b(?:find out|get|gets|read|reads|query|check|tell|know)\s+"
    r"(?:how (?:many|much|long|big|large)|the (?:number|count) of)\b",
    re.IGNORECASE,
)


def asks_stated_count(query: str) -> bool:
    """Whether a counting question asks for a count the documents state, not one that a register
    is set to or that code reads at run time."""
    return bool(CAPABILITY_INTENT.search(query)) and not (
        CONFIGURED_COUNT.search(query) or QUERIED_COUNT.search(query)
    )


def counted_nouns(query: str) -> re.Pattern[str] | None:
    """A pattern for "<number> [up to two words] <one of the question's nouns>", or None."""
    nouns = {
        stem(word)
        for word in re.findall(r"[a-z][a-z0-9]+", query.lower())
        if len(word) >= 3 and word not in STOPWORDS and word not in _COUNTING_WORDS
    }
    if not nouns:
        return None
    alternation = "|".join(sorted(map(re.escape, nouns), key=len, reverse=True))
    return re.compile(
        rf"\b{_NUMBER}\b(?:[\s\-]+[\w\-]+){{0,{COUNT_GAP_WORDS}}}?[\s\-]+(?:{alternation})\w*", re.IGNORECASE
    )


def fuse_counted_nouns(ranked: RankedList, query: str) -> RankedList:
    """Half a reciprocal-rank vote for passages that count what the question asks about."""
    pattern = counted_nouns(query)
    if pattern is None:
        return ranked
    return vote_for(ranked, lambda row: bool(pattern.search(row["text"])), COUNT_VOTE_WEIGHT)


# Within a manual, a capability question about a peripheral ("how many capacitive touch pins and
# proximity channels", "MIPI CSI number of data lanes and per-lane data rate") is answered where the
# chapter states its counts and limits: its Features / Feature List, Overview or Introduction. The
# functional description and the register blocks around it use the same words for one detail each.
# Half a vote, in fused order, for those sections.
FEATURE_SECTION = re.compile(r"(?:^|> )(?:Features|Feature List|Overview|Introduction)$")
# A short chapter's introduction and feature list are merged into the chapter's first chunk, whose
# section path is the chapter title alone ("ECC Hardware Accelerator (ECC)": Introduction, Features,
# Terminology); its "# Features" heading inside the text says it holds them. Overview and
# Introduction headings are not read there: they open chunks that hold much else besides.
FEATURE_HEADING = re.compile(r"^#+ (?:Features|Feature List)$", re.MULTILINE)
FEATURE_VOTE_WEIGHT = 0.5


def holds_feature_list(row: dict[str, Any]) -> bool:
    """Whether a passage is, or holds, a manual chapter's feature list, overview or introduction."""
    return bool(FEATURE_SECTION.search(row["section_path"]) or FEATURE_HEADING.search(row["text"]))


def fuse_feature_lists(ranked: RankedList) -> RankedList:
    """Half a reciprocal-rank vote for a manual chapter's feature list, overview or introduction."""
    return vote_for(ranked, holds_feature_list, FEATURE_VOTE_WEIGHT)


# "Which pins does the USB-JTAG use", "which GPIOs are strapping pins": the answer names pins. One
# more vote, in fused order, for the candidates that name two GPIOs or more ("GPIO19 and GPIO20 are
# used by USB-JTAG by default"); the prose about the same peripheral names none.
PIN_INTENT = re.compile(r"\b(?:which|what) (?:\w+ )?(?:gpios?|pins?|pads?)\b", re.IGNORECASE)
_GPIO_NUMBER = re.compile(r"\bGPIO ?(\d+)\b")
PINS_NAMED = 2


def fuse_pin_lists(ranked: RankedList) -> RankedList:
    """One more reciprocal-rank vote for passages that name several GPIOs, for "which pins" questions."""
    return vote_for(ranked, lambda row: len(set(_GPIO_NUMBER.findall(row["text"]))) >= PINS_NAMED)


# "TWAI bus timing register 0", "error record register 0 for BLOCK1-10": sibling registers differ
# by an instance number (TIMING_0 / TIMING_1, ERR0 / ERR1) that every list scores alike, because
# their descriptions differ by that one digit too. A standalone number in the question that is no
# quantity (not "32 kHz", "16 bits", "30 seconds") is matched against the instance numbers of the
# names a passage defines (a name part's trailing digits: ERR0, TIMING_0, CH1; not the 2 of I2C).
_UNITS = r"(?:bits?|bytes?|[kmg]?hz|ms|us|ns|seconds?|s|v|mv|ma|words?|kb|mb|times|px)"
QUERY_NUMBER = re.compile(rf"(?<![\w.\-])(\d{{1,2}})(?![\w.])(?!\s*(?:{_UNITS}\b|%))", re.IGNORECASE)
_INSTANCE = re.compile(r"(?:^|[A-Za-z])(\d+)$")
# A parameterised register stands for every instance its heading lists: DMA2D_OUT_SCRAMBLE_CHn_REG
# (n: 0-3) is TX channel 0's register too, and lost to DMA2D_OUT_CONF0_CHn_REG, whose 0 is no channel.
# QUERY_NUMBER reads one or two digits, so a heading's spans are read only that far.
_LAST_QUERY_NUMBER = 99


def instance_numbers(text: str) -> set[int]:
    """The instance numbers of the register and field names a passage defines, and those its
    parameterised registers' headings list ("(n: 0-3)", "(m = 2, 3)")."""
    numbers = set()
    for match in DEFINED_NAME.finditer(text):
        name = next(group for group in match.groups() if group)
        for part in name.split("_"):
            if (digits := _INSTANCE.search(part)) is not None:
                numbers.add(int(digits.group(1)))
    for heading in REGISTER_HEADING.finditer(text):
        for listed in parameter_ranges(heading.group("note") or "").values():
            if listed is None:  # a range the heading does not spell in numbers
                continue
            for low, high in listed.spans:
                numbers.update(range(low, min(high, _LAST_QUERY_NUMBER) + 1))
    return numbers


def fuse_instance_numbers(ranked: RankedList, query: str) -> RankedList:
    """One more reciprocal-rank vote, for a register question that gives an instance number, for the
    register-defining passages whose names carry that number."""
    wanted = {int(number) for number in QUERY_NUMBER.findall(query)}
    if not wanted:
        return ranked
    return vote_for(
        ranked,
        lambda row: bool(REGISTER_DEFINITION.search(row["text"]) and instance_numbers(row["text"]) & wanted),
    )


# In ESP-IDF's words an "option" is a Kconfig option ("esp_timer callback task stack size option"):
# the guide prose that mentions the same setting matches the question's other words as well.
OPTION_INTENT = re.compile(r"\boptions?\b", re.IGNORECASE)
KCONFIG_REFERENCE = "api-reference/kconfig-reference"


def fuse_kconfig_options(ranked: RankedList) -> RankedList:
    """One more reciprocal-rank vote for Kconfig option passages, for a question about an option."""
    return vote_for(ranked, lambda row: row["file_path"].startswith(KCONFIG_REFERENCE))


# A question asked for an explanation, yes or no ("can ADC2 be used in oneshot mode", "are task stack
# sizes given in bytes or words"), why, what happens, or how do I, is answered by the guide that
# explains the behaviour; a Kconfig option's help names the switch in the same few words and ranked
# above it. Half a vote, in fused order, for every passage but the options: their order among
# themselves stays, the options fall behind near-ties.
EXPLANATION_INTENT = re.compile(
    r"^(?:can|could|is|are|does|do|did|why|will|should)\b|\bwhat happens\b|^how (?:do|can|should) i\b",
    re.IGNORECASE,
)
EXPLANATION_VOTE_WEIGHT = 0.5


def fuse_explanations(ranked: RankedList) -> RankedList:
    """Half a reciprocal-rank vote for the passages that are no Kconfig option, for a question that
    asks for an explanation."""
    return vote_for(
        ranked, lambda row: not row["file_path"].startswith(KCONFIG_REFERENCE), EXPLANATION_VOTE_WEIGHT
    )


Vote = Callable[[RankedList], RankedList]


def answer_kind_votes(
    query: str, words: QuestionWords, kind: str, doc_type: str | None
) -> list[tuple[str, Vote]]:
    """The votes for passages that hold the kind of answer the question asks for, named, in the
    order ``SearchEngine.rank`` applies them (the error analysis watches each one's effect).

    ``doc_type`` is the caller's corpus filter: within the manuals or the headers, a question about
    configuring the hardware or its defaults is a question about register fields; the headers'
    capability lines have a vote of their own, so counts are voted for outside them."""
    votes: list[tuple[str, Vote]] = []
    register_question = asks_register(query)
    field_question = doc_type in ("trm", "src") and asks_field(query)
    if register_question or field_question:
        votes.append(("register definitions", fuse_register_definitions))
    # the headers hold registers and capabilities: a question there that names no register or
    # field ("bit resolution of the DAC", "longest wake-up sequence the UART matches") asks for one
    register_named = names_register(query)
    counts = kind == "capability"
    if counts or (doc_type == "src" and not register_named and not field_question):
        votes.append(("capability definitions", fuse_capability_definitions))
    if doc_type == "trm" and counts and not register_named:
        votes.append(("feature lists", fuse_feature_lists))
    if register_question or field_question:
        votes.append(("register names", lambda ranked: fuse_register_names(ranked, words)))
        votes.append(("instance numbers", lambda ranked: fuse_instance_numbers(ranked, query)))
    if API_INTENT.search(query) and (doc_type == "idf" or not register_question):
        votes.append(("API reference", lambda ranked: fuse_api_reference(ranked, query)))
    if OPTION_INTENT.search(query) and (doc_type == "idf" or (doc_type is None and not register_question)):
        votes.append(("Kconfig options", fuse_kconfig_options))
    if asks_default(query):
        votes.append(("default statements", fuse_default_statements))
    if doc_type != "src" and asks_stated_count(query):
        votes.append(("counted nouns", lambda ranked: fuse_counted_nouns(ranked, query)))
    if PIN_INTENT.search(query):
        votes.append(("pin lists", fuse_pin_lists))
    if EXPLANATION_INTENT.search(question_opening(query)) and doc_type in ("idf", None):
        votes.append(("explanations", fuse_explanations))
    return votes


# A passage that answers says the question's words together: one field bullet, one sentence of the
# guide, one option's help line. BM25 and the embedder score a chunk as a whole, so a sibling that
# spreads the same words over many functions or fields ranks beside it. Each of the fused list's
# first rows earns, on top, a share of one list's vote: the most distinct question words (stemmed)
# found within SPAN_WORDS consecutive words of its text, over all the question's words.
# Measured in docs/retrieval.md: windows of 12-25 words and weights 0.8-1.2 gain; wider windows,
# sentences or lines as the unit, or words weighted by rarity among the candidates gain less.
SPAN_WORDS = 15
SPAN_VOTE_WEIGHT = 0.8
# Rows further down are not read: reading every candidate moved none of the 489 eval questions.
SPAN_CANDIDATES = 20
_TEXT_WORD = re.compile(r"[a-z0-9]+")


def densest_span(text: str, wanted: set[str]) -> int:
    """The most distinct ``wanted`` stems within any SPAN_WORDS consecutive words of ``text``."""
    hits = [
        (position, word_stem)
        for position, word in enumerate(_TEXT_WORD.findall(text.lower()))
        if (word_stem := stem(word)) in wanted
    ]
    in_span: Counter[str] = Counter()
    best = start = 0
    for position, word_stem in hits:
        in_span[word_stem] += 1
        while hits[start][0] <= position - SPAN_WORDS:
            leaving = hits[start][1]
            in_span[leaving] -= 1
            if not in_span[leaving]:
                del in_span[leaving]
            start += 1
        best = max(best, len(in_span))
    return best


def fuse_word_spans(ranked: RankedList, words: QuestionWords) -> RankedList:
    """Raise each of the first SPAN_CANDIDATES rows by how many of the question's words its text
    says within one span; a question of fewer than two content words is left as it is."""
    wanted = set(words.stems)
    if len(wanted) < 2:
        return ranked
    for row in ranked[:SPAN_CANDIDATES]:
        row["score"] += SPAN_VOTE_WEIGHT * LEG_SCALE * densest_span(row["text"], wanted) / len(wanted)
    return by_score(ranked)
