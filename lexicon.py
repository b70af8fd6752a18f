"""An abbreviation lexicon mined from the corpus: the parts of register and field names, and the words
the manuals use for them (``THRHD`` threshold, ``OVF`` overflow, ``INT_ENA`` interrupt enable).

Register and field names are compressed abbreviations, and neither BM25 nor a general embedder links
``RXFIFO_FULL_THRHD`` to "threshold". The manuals pair every name with its words (a field's
description, a register's summary line), so the pairing is learned from them: a name part is an
abbreviation of a description word when its letters appear in that word in order, starting with the
same letter, and that pairing recurs across many names. Ingest stages then write the expansions into
the chunk (a ``Terms:`` line), where full-text search and the embedder both read them.

    uv run lexicon.py trm_chunks.jsonl      # the mined lexicon with its evidence counts
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunk_format import (
    DESCRIBED_FIELD_LINE,
    REGISTER_BLOCK_START,
    REGISTER_NAME_LINE,
    SUMMARY_LINE,
    with_terms,
)
from schema import content_hash, read_jsonl
from terms import stem

# A pairing must recur this often, and win this share of the part's appearances, to be believed.
MIN_SUPPORT = 3
MIN_SHARE = 0.03
CLEAR_WIN = 1.5
# Acronym readings are runs of content words: "has been", "the wfi", "master n" are not expansions.
ACRONYM_STOPWORDS = frozenset(("the", "and", "for", "has", "not", "are", "was", "its", "this", "that"))
MAX_TERMS_PER_CHUNK = 24
_TOKEN = re.compile(r"[a-z]+")
# Names inside a description (UART_RXFIFO_FULL_INT, CHn) are not the words that explain a name.
_IDENTIFIER = re.compile(r"\b\w*(?:_|\d|[a-z][A-Z])\w*\b")


@dataclass(frozen=True)
class Lexicon:
    """Abbreviation -> the word it stands for (both lower case); peripheral acronyms -> their names
    as the ESP-IDF docs spell them out (``LEDC`` -> "LED Control, LED PWM Controller")."""

    words: dict[str, str]
    acronyms: dict[str, str] = field(default_factory=dict)

    def expand_part(self, part: str) -> str | None:
        return self.words.get(part.lower())

    def spell_out(self, acronym: str) -> str | None:
        return self.acronyms.get(acronym.upper())

    def terms(self, identifiers: Iterable[str], text: str = "") -> list[str]:
        """``abbrev = word`` for every name part the lexicon expands, in first-seen order, leaving out
        words ``text`` already uses (``REG`` in a passage that says "Register")."""
        present = set(_TOKEN.findall(text.lower()))
        seen: dict[str, str] = {}
        for identifier in identifiers:
            for part in name_parts(identifier):
                word = self.expand_part(part)
                if word and part.lower() not in seen and not present.issuperset(word.split()):
                    seen[part.lower()] = word
        return [f"{abbrev} = {word}" for abbrev, word in list(seen.items())[:MAX_TERMS_PER_CHUNK]]


NO_LEXICON = Lexicon({})


def name_parts(identifier: str) -> list[str]:
    """Alphabetic parts of an identifier, with trailing instance digits dropped (``CH0`` -> ``CH``)."""
    parts = []
    for piece in identifier.split("_"):
        core = re.sub(r"\d+$", "", piece)
        if core.isalpha():
            parts.append(core)
    return parts


def is_abbreviation(part: str, word: str) -> bool:
    """``part``'s letters appear in ``word`` in order, starting with its first letter (thrhd/threshold)."""
    if len(part) < 2 or len(word) <= len(part) or part[0] != word[0]:
        return False
    position = 1
    for letter in part[1:]:
        position = word.find(letter, position) + 1
        if position == 0:
            return False
    return True


def mine(pairs: Iterable[tuple[str, str]]) -> Lexicon:
    """Learn abbreviation -> word (or acronym -> phrase) from (identifier, description) pairs.

    A part that the descriptions themselves use as a word about as often is a word, not an
    abbreviation (``FIFO``, ``DATA``), and is left alone; a part with two plausible readings keeps
    the one that clearly wins.
    """
    together: dict[str, Counter[str]] = defaultdict(Counter)
    appearances: Counter[str] = Counter()
    as_word: Counter[str] = Counter()
    vocabulary: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = defaultdict(Counter)
    for identifier, description in pairs:
        tokens = _TOKEN.findall(_IDENTIFIER.sub(" ", description).lower())
        vocabulary.update(tokens)
        stems = {t: stem(t) for t in tokens if len(t) >= 3}
        for word, word_stem in stems.items():
            surface[word_stem][word] += 1
        initials = "".join(t[0] for t in tokens)
        for part in {p.lower() for p in name_parts(identifier)}:
            appearances[part] += 1
            if part in stems:
                as_word[part] += 1
                continue
            part_stem = stem(part)
            readings = {
                word_stem
                for word, word_stem in stems.items()
                if is_abbreviation(part, word) and word_stem != part_stem
            }
            readings.update(acronym_readings(part, tokens, initials))
            if readings:
                together[part].update(readings)
    lexicon: dict[str, str] = {}
    for part, counts in together.items():
        ranked = counts.most_common(2)
        reading, support = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else 0
        if (
            vocabulary[part] < support  # in, to, of, up, core: English words, not abbreviations
            and support >= MIN_SUPPORT
            and support >= MIN_SHARE * appearances[part]
            and support > as_word[part]
            and support >= CLEAR_WIN * runner_up
        ):
            # a reading is a stem key (or an acronym's phrase): spell it as the manuals most often do
            lexicon[part] = surface[reading].most_common(1)[0][0] if reading in surface else reading
    return Lexicon(lexicon)


def acronym_readings(part: str, tokens: list[str], initials: str | None = None) -> set[str]:
    """Runs of consecutive description words whose initials spell ``part`` (WDT: watchdog timer).

    ``initials`` (each token's first letter, joined) is found once per description by the caller;
    the runs are where ``part`` occurs in it."""
    if not 2 <= len(part) <= 4:
        return set()
    if initials is None:
        initials = "".join(t[0] for t in tokens)
    readings = set()
    start = initials.find(part)
    while start != -1:
        run = tokens[start : start + len(part)]
        if all(len(t) >= 3 and t not in ACRONYM_STOPWORDS for t in run):
            readings.add(" ".join(run))
        start = initials.find(part, start + 1)
    return readings


def register_pairs(text: str) -> list[tuple[str, str]]:
    """(name, words) pairs in a rendered TRM register block: its summary line and each field's description."""
    pairs = []
    register = None
    for line in text.splitlines():
        if (head := REGISTER_NAME_LINE.match(line)) is not None:
            register = head.group("name")
        elif register and (summary := SUMMARY_LINE.match(line)) is not None:
            pairs.append((register, summary.group("desc")))
        elif (field := DESCRIBED_FIELD_LINE.match(line)) is not None:
            pairs.append((field.group("name"), field.group("desc")))
    return pairs


def annotate_register_terms(rows: list[dict[str, Any]]) -> Lexicon:
    """Mine the lexicon from every register block in ``rows``, then give each register chunk the
    ``Terms:`` line of its own names (rewriting its content hash). Returns the lexicon mined."""
    lexicon = mine(pair for row in rows for pair in register_pairs(row["text"]))
    for row in rows:
        if not REGISTER_BLOCK_START.search(row["text"]):
            continue
        text = with_terms(row["text"], lexicon.terms(row["symbol_refs"], row["text"]))
        if text != row["text"]:
            row["text"] = text
            row["content_hash"] = content_hash(text)
    return lexicon


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Mine and print the abbreviation lexicon of TRM chunks.")
    parser.add_argument("chunks", type=Path, help="TRM chunk JSONL")
    args = parser.parse_args(argv)
    pairs = [pair for row in read_jsonl(args.chunks) for pair in register_pairs(row["text"])]
    lexicon = mine(pairs)
    for abbrev, word in sorted(lexicon.words.items()):
        print(f"{abbrev:>12} = {word}")
    print(f"lexicon: {len(lexicon.words)} abbreviations from {len(pairs)} name/description pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
