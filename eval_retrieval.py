"""Score retrieval on gold queries: hit@1/5/10 and MRR@10 per category, through the server's own search.

    uv run eval_retrieval.py ../shared/eval/dev_queries.jsonl [--db DIR] [--mode hybrid|vector|fts|all]
                             [--doc-type trm] [--show-misses]

A case is answered at rank r when the r-th result's text (as the agent receives it) contains every
``must_contain`` string, case-insensitively, and one ``any_of`` string where any are given
(../shared/eval/README.md). ``--mode all`` prints hybrid, vector-only and full-text-only side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from chip_vocab import DOC_TYPES
from embed_and_store import StoreError, resolve_db_uri
from search import MODES, SearchEngine, SearchInputError, open_engine

DEPTH = 10
FILTER_KEYS = ("chip", "doc_type", "revision")


class CaseFileError(ValueError):
    """The queries file is malformed; the message names the line."""


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    query: str
    filters: dict[str, str]
    must_contain: tuple[str, ...]
    any_of: tuple[str, ...]


def load_cases(path: Path, doc_type: str | None = None) -> list[Case]:
    """Read gold cases; with ``doc_type``, keep those whose filter names that corpus."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            case = Case(
                id=raw["id"],
                category=raw["category"],
                query=raw["query"],
                filters={k: v for k, v in (raw.get("filters") or {}).items() if k in FILTER_KEYS and v},
                must_contain=tuple(raw.get("must_contain") or ()),
                any_of=tuple(raw.get("any_of") or ()),
            )
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise CaseFileError(f"{path}:{number}: not a gold case ({exc})") from exc
        if not case.must_contain and not case.any_of:
            raise CaseFileError(f"{path}:{number}: case {case.id} has neither must_contain nor any_of")
        if doc_type is None or case.filters.get("doc_type") == doc_type:
            cases.append(case)
    return cases


def answers(text: str, case: Case) -> bool:
    lowered = text.lower()
    if not all(needle.lower() in lowered for needle in case.must_contain):
        return False
    return not case.any_of or any(option.lower() in lowered for option in case.any_of)


def first_answer_rank(results: list[dict[str, Any]], case: Case) -> int | None:
    """1-based rank of the first result that answers the case, or None within the depth."""
    for rank, result in enumerate(results[:DEPTH], 1):
        if answers(result["text"], case):
            return rank
    return None


@dataclass
class Scores:
    ranks: list[int | None] = field(default_factory=list)

    def hit(self, cutoff: int) -> float:
        return sum(1 for r in self.ranks if r is not None and r <= cutoff) / len(self.ranks)

    def mrr(self) -> float:
        return sum(1.0 / r for r in self.ranks if r is not None) / len(self.ranks)


def evaluate(engine: SearchEngine, cases: list[Case], mode: str) -> dict[str, tuple[Case, int | None]]:
    """Run every case through SearchEngine.search, exactly as the server would."""
    outcome: dict[str, tuple[Case, int | None]] = {}
    for case in tqdm(cases, desc=f"eval {mode}", unit="query", file=sys.stderr):
        found = engine.search(case.query, k=DEPTH, mode=mode, **case.filters)
        outcome[case.id] = (case, first_answer_rank(found["results"], case))
    return outcome


def by_category(outcome: dict[str, tuple[Case, int | None]]) -> dict[str, Scores]:
    groups: dict[str, Scores] = defaultdict(Scores)
    for case, rank in outcome.values():
        groups[case.category].ranks.append(rank)
        groups["OVERALL"].ranks.append(rank)
    return dict(sorted(groups.items(), key=lambda item: (item[0] == "OVERALL", item[0])))


def format_table(results: dict[str, dict[str, Scores]]) -> str:
    """One row per category; for each mode hit@1, hit@5, hit@10 and MRR@10."""
    modes = list(results)
    categories = list(next(iter(results.values())))
    header = f"{'category':<14} {'n':>3} " + " | ".join(
        f"{m + ' h@1':>10} {'h@5':>5} {'h@10':>5} {'MRR':>5}" for m in modes
    )
    lines = [header, "-" * len(header)]
    for category in categories:
        cells = []
        for mode in modes:
            s = results[mode][category]
            cells.append(f"{s.hit(1):>10.2f} {s.hit(5):>5.2f} {s.hit(10):>5.2f} {s.mrr():>5.2f}")
        lines.append(f"{category:<14} {len(results[modes[0]][category].ranks):>3} " + " | ".join(cells))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Score retrieval on gold queries (hit@k, MRR@10).")
    parser.add_argument("queries", type=Path, help="gold queries JSONL (../shared/eval format)")
    parser.add_argument("--db", help="LanceDB URI (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    parser.add_argument("--mode", choices=(*MODES, "all"), default="hybrid")
    parser.add_argument("--doc-type", choices=DOC_TYPES, help="only cases filtered to this corpus")
    parser.add_argument("--show-misses", action="store_true", help="list cases not answered in the top 10")
    parser.add_argument(
        "--full-text",
        action="store_true",
        help="match against whole chunks instead of the shortened text agents receive",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = load_cases(args.queries, args.doc_type)
    except (OSError, CaseFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print(f"error: no cases in {args.queries} for doc_type {args.doc_type}", file=sys.stderr)
        return 2
    try:
        engine = open_engine(resolve_db_uri(args.db))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.full_text:
        engine.result_chars = sys.maxsize
    modes = list(MODES) if args.mode == "all" else [args.mode]
    results: dict[str, dict[str, Scores]] = {}
    misses: dict[str, list[str]] = {}
    try:
        for mode in modes:
            outcome = evaluate(engine, cases, mode)
            results[mode] = by_category(outcome)
            misses[mode] = [
                f"{c.id} [{c.category}] {c.query!r} {c.filters}" for c, r in outcome.values() if r is None
            ]
    except SearchInputError as exc:
        print(f"error: a case's filters are invalid: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.show_misses:
        for mode in modes:
            print(f"\nmisses ({mode}):")
            print("\n".join(f"  {line}" for line in misses[mode]) or "  none")
    overall = ", ".join(
        f"{mode}: hit@1 {s.hit(1):.2f} hit@10 {s.hit(10):.2f} MRR@10 {s.mrr():.2f}"
        for mode, s in ((mode, scores["OVERALL"]) for mode, scores in results.items())
    )
    print(f"eval_retrieval: {len(cases)} cases from {args.queries} — {overall}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
