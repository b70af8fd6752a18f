"""The content words of a question: what is left when the words every question uses are dropped.

The read path's first step: fusion weighs a question by them and results place a long chunk's
excerpt window where they meet, so both stages read the same list from here.
"""

from __future__ import annotations

import re

# fmt: off
STOPWORDS = frozenset((
    "the", "and", "for", "how", "what", "which", "where", "does", "with", "from", "that", "this",
    "into", "are", "can", "its", "use", "set", "get", "there", "when", "who", "why", "will",
    "about", "register", "address",
))
# fmt: on


def query_terms(query: str) -> list[str]:
    """Content words of a query, used to place the excerpt window of a long chunk."""
    return [w for w in dict.fromkeys(re.findall(r"[a-z0-9_]{3,}", query.lower())) if w not in STOPWORDS]
