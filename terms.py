"""The one tokenizer and stemmer of the read path: query analysis, the passage facts written at ingest
and the reranker's overlap features split words the same way, so a word the question says is the same
key wherever it is counted.

Words are runs of lower-case letters and digits ("i2c", "gpio19", "0x3ff4"); identifiers keep their
underscores as separators, so ``UART_CLKDIV_REG`` reads as "uart", "clkdiv", "reg".
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[a-z0-9]+")
# The words of two characters or more: the same runs as _WORD, the one-letter ones skipped by the regex.
_LONG_WORD = re.compile(r"[a-z0-9]{2,}")

# fmt: off
# Words that say nothing about which passage answers: question scaffolding and the vocabulary every
# passage shares. Domain words ("register", "address") stay: the reranker learns what they are worth.
STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "for", "of", "to", "in", "on", "at", "by", "is", "are", "be", "it",
    "how", "what", "which", "where", "does", "do", "did", "with", "from", "that", "this", "these",
    "into", "can", "could", "its", "i", "my", "me", "we", "you", "your", "there", "when", "who", "why",
    "will", "would", "should", "about", "if", "so", "but", "not", "no", "as", "any", "all", "some",
    "have", "has", "had", "was", "were", "been", "get", "use", "using", "used", "need", "want", "way",
    "like", "just", "also", "then", "than", "only", "one", "there", "here", "please", "thanks", "hi",
    "esp32", "esp", "idf", "esp-idf",
))
# fmt: on


def words(text: str) -> list[str]:
    """Every word of ``text``, lower case, in order."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """``text``'s content words (two characters or more, no stopword), lower case, in order."""
    return [word for word in _LONG_WORD.findall(text.lower()) if word not in STOPWORDS]


def content_stems(text: str) -> list[str]:
    """The stems of ``text``'s content words, in order."""
    return [stem(word) for word in content_words(text)]


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude key folding plural and verb endings, so 'enables'/'enabled'/'enable' vote together.

    Cached: ranking stems every word of the first candidates' texts for each question, and a
    corpus repeats the same few thousand words."""
    for suffix in ("ing", "ed", "es", "e", "s"):
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            continue
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


# fmt: off
# Excerpt placement reads fewer stopwords than ranking: "set", "get", "use" often name the very call a
# long chunk's window should open on.
EXCERPT_STOPWORDS = frozenset((
    "the", "and", "for", "how", "what", "which", "where", "does", "with", "from", "that", "this",
    "into", "are", "can", "its", "use", "set", "get", "there", "when", "who", "why", "will",
    "about",
))
# fmt: on
_EXCERPT_TERM = re.compile(r"[a-z0-9_]{3,}")


def query_terms(query: str) -> list[str]:
    """Content words of a query (identifiers whole, three characters or more), which place the
    excerpt window of a long chunk."""
    return [w for w in dict.fromkeys(_EXCERPT_TERM.findall(query.lower())) if w not in EXCERPT_STOPWORDS]
