"""The reranker's features of one (query, candidate) pair, declared in one place (``FEATURES``).

Three families: how each retriever ranked the candidate (``fusion.gather``); what the passage is and
states (its ingest-time columns, ``passage_kinds``) beside what the query asks (``query_analysis``),
which the model crosses; and how much of the query the passage says (rare-word overlap in text and
headings, the densest span, how fully it spells out a register name the question describes). Nothing
here reads passage text with a pattern: the text is only split into words by the shared tokenizer.

``FEATURE_VERSION`` names the set: a model trained on another set is refused at start (rerank.py).
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np

from fusion import ABSENT_RANK
from lexicon import is_abbreviation, name_parts
from passage_kinds import KIND_IDS
from query_analysis import INTENTS, QueryAnalysis
from terms import STOPWORDS, content_stems, content_words, stem, words

FEATURE_VERSION = "passage-kinds-2"
DOC_TYPE_IDS = {None: 0, "idf": 1, "trm": 2, "src": 3}

# fmt: off
FEATURES: tuple[str, ...] = (
    # how the retrievers ranked it
    "vector_rank", "vector_share", "vector_similarity",
    "fts_rank", "fts_share",
    "symbol_rank", "symbol_strength", "symbol_tier", "legs",
    "fused_rank",
    # what the passage is
    "kind", "doc_type", "section_depth", "gpio_count", "states_default", "text_chars", "chips",
    # what the query asks
    *(f"asks_{intent}" for intent in INTENTS),
    "query_words", "query_identifiers", "identifier_led", "filter_doc_type",
    # how much of the query the passage says
    "rare_overlap", "heading_overlap", "span_cover", "name_cover", "instance_match", "counted_match",
    "chip_mention",
)
# fmt: on
CATEGORICAL = ("kind", "doc_type", "filter_doc_type")
INDEX = {name: number for number, name in enumerate(FEATURES)}

# Words a span must hold the query's words within (a field bullet, one sentence, one option's help).
SPAN_WORDS = 15
# An identifier lookup names at most this many other content words.
IDENTIFIER_LED_WORDS = 2
GENERIC_NAME_PARTS = frozenset(("reg",))
COMPOUND_PART_LETTERS = 4
# Name parts that are no letters-in-order abbreviation of their words: the X of TX and RX, XTAL.
IRREGULAR_PARTS = {"tx": ("transmit", "send"), "rx": ("receiv", "reception"), "xtal": ("crystal",)}


def feature_matrix(
    analysis: QueryAnalysis, candidates: list[dict[str, Any]], filter_doc_type: str | None
) -> np.ndarray:
    """One row of ``FEATURES`` per candidate, in the candidates' order."""
    matrix = np.zeros((len(candidates), len(FEATURES)), dtype=np.float32)
    speller = Speller(analysis)
    query_side = _query_features(analysis, filter_doc_type)
    for row_number, candidate in enumerate(candidates):
        values = matrix[row_number]
        for name, value in query_side.items():
            values[INDEX[name]] = value
        _leg_features(values, candidate, row_number)
        _passage_features(values, candidate)
        _overlap_features(values, candidate, analysis, speller)
    return matrix


def identifier_led(analysis: QueryAnalysis) -> bool:
    """Whether the query is a lookup of the identifiers it names: at most ``IDENTIFIER_LED_WORDS``
    other content words."""
    named = set(content_stems(" ".join(analysis.identifiers)))
    other_words = [term for term in analysis.stems if term not in named]
    return bool(analysis.identifiers) and len(other_words) <= IDENTIFIER_LED_WORDS


def _query_features(analysis: QueryAnalysis, filter_doc_type: str | None) -> dict[str, float]:
    values = {f"asks_{intent}": float(analysis.has(intent)) for intent in INTENTS}
    values.update(
        query_words=float(analysis.words),
        query_identifiers=float(len(analysis.identifiers)),
        identifier_led=float(identifier_led(analysis)),
        filter_doc_type=float(DOC_TYPE_IDS.get(filter_doc_type, 0)),
    )
    return values


def _leg_features(values: np.ndarray, candidate: dict[str, Any], fused_rank: int) -> None:
    legs = candidate.get("legs", {})
    rank, share, raw = legs.get("vector", (ABSENT_RANK, 0.0, 0.0))
    values[INDEX["vector_rank"]], values[INDEX["vector_share"]] = rank, share
    values[INDEX["vector_similarity"]] = raw
    rank, share, _ = legs.get("fts", (ABSENT_RANK, 0.0, 0.0))
    values[INDEX["fts_rank"]], values[INDEX["fts_share"]] = rank, share
    rank, strength, _ = legs.get("symbol", (ABSENT_RANK, 0.0, 0.0))
    values[INDEX["symbol_rank"]], values[INDEX["symbol_strength"]] = rank, strength
    values[INDEX["symbol_tier"]] = candidate.get("symbol_tier", ABSENT_RANK)
    values[INDEX["legs"]] = len(legs)
    values[INDEX["fused_rank"]] = fused_rank + 1


def _passage_features(values: np.ndarray, candidate: dict[str, Any]) -> None:
    values[INDEX["kind"]] = KIND_IDS[candidate["kind"]]
    values[INDEX["doc_type"]] = DOC_TYPE_IDS[candidate["doc_type"]]
    values[INDEX["section_depth"]] = candidate["section_depth"]
    values[INDEX["gpio_count"]] = candidate["gpio_count"]
    values[INDEX["states_default"]] = float(candidate["states_default"])
    values[INDEX["text_chars"]] = len(candidate["text"])
    values[INDEX["chips"]] = len(candidate["chips"])


def _overlap_features(
    values: np.ndarray, candidate: dict[str, Any], analysis: QueryAnalysis, speller: Speller
) -> None:
    weights = analysis.weights
    wanted = set(weights)
    present, hits = wanted_stems(candidate["text"], wanted)
    values[INDEX["rare_overlap"]] = sum(weight for term, weight in weights.items() if term in present)
    heading = set(content_stems(candidate["section_path"]))
    values[INDEX["heading_overlap"]] = sum(weight for term, weight in weights.items() if term in heading)
    values[INDEX["span_cover"]] = densest_hits(hits) / max(len(weights), 1)
    values[INDEX["name_cover"]] = max(
        (speller.coverage(name) for name in candidate["defined_names"]), default=0
    )
    values[INDEX["instance_match"]] = float(
        bool(analysis.instance_numbers & set(candidate["instance_numbers"]))
    )
    values[INDEX["counted_match"]] = float(bool(set(weights) & set(candidate["counted_terms"])))
    if analysis.chips:
        values[INDEX["chip_mention"]] = 1.0 if set(analysis.chips) & set(candidate["chips"]) else -1.0


def wanted_stems(text: str, wanted: set[str]) -> tuple[set[str], list[tuple[int, str]]]:
    """The ``wanted`` stems ``text`` holds, and each one's (position, stem) among its content words,
    as ``content_stems`` would place them. Only the distinct words are stemmed and only the wanted
    ones are placed: a candidate's text runs to hundreds of words, and the features are computed
    for every candidate of every question."""
    text_words = content_words(text)
    stem_of = {word: stem(word) for word in set(text_words)}
    wanted_words = {word: term for word, term in stem_of.items() if term in wanted}
    if not wanted_words:
        return set(), []
    hits = [(place, wanted_words[word]) for place, word in enumerate(text_words) if word in wanted_words]
    return set(wanted_words.values()), hits


def densest_hits(hits: list[tuple[int, str]]) -> int:
    """The most distinct stems among ``hits`` ((position, stem), in position order) within any
    ``SPAN_WORDS`` consecutive positions."""
    in_span: Counter[str] = Counter()
    best = start = 0
    for position, term in hits:
        in_span[term] += 1
        while hits[start][0] <= position - SPAN_WORDS:
            leaving = hits[start][1]
            in_span[leaving] -= 1
            if not in_span[leaving]:
                del in_span[leaving]
            start += 1
        best = max(best, len(in_span))
    return best


class Speller:
    """Whether the query spells out a register or field name's parts: sibling register blocks share
    their peripheral's words in every description, and the name (PCNT_CTRL_REG) is what differs,
    which a question says in full words (control, pulse counter). Verdicts are remembered: one query
    tests the same parts in every field of ~60 candidates."""

    def __init__(self, analysis: QueryAnalysis) -> None:
        self.words = [word for word in words(analysis.text) if len(word) >= 2 and word not in STOPWORDS]
        self.stems = [stem(word) for word in self.words]
        self._pairs = [first + second for first, second in itertools.pairwise(self.words)]
        self._spelled: dict[str, bool] = {}

    def spell(self, part: str) -> bool:
        """A name part is one of the query's words, their stem or abbreviation (ctrl/control), or at
        four letters or more the abbreviation of two words in a row (clkdiv/"clock divider")."""
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

    def coverage(self, name: str) -> float:
        """The share of ``name``'s parts the query spells out (0 to 1)."""
        parts = [p.lower() for p in name_parts(name) if len(p) >= 2 and p.lower() not in GENERIC_NAME_PARTS]
        return sum(self.spell(part) for part in parts) / len(parts) if parts else 0.0
