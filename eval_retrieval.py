"""Score retrieval on gold queries: hit@1/5/10 and MRR@10 per category, through the server's own search.

    uv run eval_retrieval.py ../shared/eval/dev_queries.jsonl [--db DIR] [--mode hybrid|vector|fts|all]
                             [--doc-type trm] [--show-misses] [--explain]

A case is answered at rank r when the r-th result's section path and text (as the agent receives
them) hold every ``must_contain`` string, case-insensitively, and one ``any_of`` string where any are
given (../shared/eval/README.md). ``--mode all`` prints hybrid, vector-only and full-text-only side by side.
``--explain`` is the error analysis: for every case not answered first, where the answer ranked in
each retriever's own list (vector, full-text, symbol) and in the fusion, what outranked it, and which
failure class that makes, with the share of misses per class.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tqdm import tqdm

from chip_vocab import DOC_TYPES
from metrics import Report, bootstrap, reciprocal_ranks
from query_analysis import query_symbols
from releases import release_series
from results import fold_chip_variants, with_variant_note
from search import MODES, SearchEngine, SearchInputError, open_engine, validate_filters
from store import StoreError, resolve_db_uri

DEPTH = 10
FILTER_KEYS = ("chip", "doc_type", "revision", "idf_version")
# How deep --explain looks into each retriever's own list for the answer.
EXPLAIN_POOL = 200
# The dense leg embeds a chunk's first 256 tokens; past about this many characters of ESP text the
# vector has not read the answer.
DENSE_READ_CHARS = 900


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
    # the held series the case's idf_version means in the store under test ("6.1" -> v6.1-dev)
    release: str | None = None


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
    """1-based rank of the first result that answers the case, or None within the depth.

    A case asked for one ESP-IDF release is answered only by a passage true for that release: the
    v6.0 migration guide names ``ledc_timer_set`` too, but it does not document it for v5.5.
    """
    for rank, result in enumerate(results[:DEPTH], 1):
        if answers(seen_text(result), case) and in_case_release(result, case):
            return rank
    return None


def seen_text(result: dict[str, Any]) -> str:
    """What an agent reads of a result: its section path and its text (which no longer repeats the
    section path as its first line, as the stored chunk does)."""
    return f"{result.get('section_path', '')}\n{result['text']}"


def in_case_release(result: dict[str, Any], case: Case) -> bool:
    wanted = case.release or release_series(case.filters.get("idf_version") or "")
    return wanted is None or not result.get("releases") or wanted in result["releases"]


def with_releases(engine: SearchEngine, cases: list[Case]) -> list[Case]:
    """Each case's idf_version as the series the store holds (aliases like master, 6.1 resolved)."""
    return [
        replace(case, release=engine.release_for(case.filters["idf_version"], None).series)
        if case.filters.get("idf_version")
        else case
        for case in cases
    ]


def unheld_reason(engine: SearchEngine, case: Case) -> str | None:
    """Why the store cannot answer a release case (None when it can): its release is not held, or
    the release holds no programming guide for the case's chip while the case asks the guide."""
    asked = case.filters.get("idf_version")
    if not asked:
        return None
    try:
        series = engine.release_for(asked, None).series
    except SearchInputError:
        return f"release {asked} not held"
    chip = case.filters.get("chip")
    held = engine.index.releases.held.get(series or "")
    guide = case.filters.get("doc_type") in (None, "idf")
    if held is not None and chip and guide and chip not in held.docs_chips:
        return f"{series} holds no {chip} guide"
    return None


def held_cases(engine: SearchEngine, cases: list[Case]) -> tuple[list[Case], Counter[str]]:
    """The cases the store can answer, and how many of the others were left out, by reason."""
    kept: list[Case] = []
    left: Counter[str] = Counter()
    for case in cases:
        reason = unheld_reason(engine, case)
        if reason is None:
            kept.append(case)
        else:
            left[reason] += 1
    return kept, left


@dataclass
class Scores:
    ranks: list[int | None] = field(default_factory=list)

    def hit(self, cutoff: int) -> float:
        return sum(1 for r in self.ranks if r is not None and r <= cutoff) / len(self.ranks)

    def mrr(self) -> float:
        return sum(1.0 / r for r in self.ranks if r is not None) / len(self.ranks)


@dataclass
class ReleaseReport:
    """Release cases asked with and without idf_version: what the filter buys, and how often a
    passage from another release comes first when the agent does not say which release."""

    with_filter: Scores = field(default_factory=Scores)
    without_filter: Scores = field(default_factory=Scores)
    wrong_first_with: int = 0
    wrong_first_without: int = 0

    def lines(self) -> list[str]:
        n = len(self.with_filter.ranks)
        return [
            f"release cases ({n}): with idf_version hit@1 {self.with_filter.hit(1):.2f} "
            f"hit@5 {self.with_filter.hit(5):.2f}, wrong release first {self.wrong_first_with}/{n}",
            f"release cases ({n}): without idf_version hit@1 {self.without_filter.hit(1):.2f} "
            f"hit@5 {self.without_filter.hit(5):.2f}, wrong release first {self.wrong_first_without}/{n}",
        ]


def release_report(engine: SearchEngine, cases: list[Case]) -> ReleaseReport | None:
    """Score the cases that name a release twice: as asked, and with idf_version dropped."""
    released = [c for c in cases if c.filters.get("idf_version")]
    if not released:
        return None
    report = ReleaseReport()
    for case in released:
        for filters, scores, flag in (
            (case.filters, report.with_filter, "wrong_first_with"),
            (
                {k: v for k, v in case.filters.items() if k != "idf_version"},
                report.without_filter,
                "wrong_first_without",
            ),
        ):
            results = engine.search(case.query, k=DEPTH, **filters)["results"]
            scores.ranks.append(first_answer_rank(results, case))
            if results and not in_case_release(results[0], case):
                setattr(report, flag, getattr(report, flag) + 1)
    return report


def evaluate(engine: SearchEngine, cases: list[Case], mode: str) -> dict[str, tuple[Case, int | None]]:
    """Run every case through SearchEngine.search, exactly as the server would."""
    outcome: dict[str, tuple[Case, int | None]] = {}
    for case in tqdm(cases, desc=f"eval {mode}", unit="query", file=sys.stderr):
        found = engine.search(case.query, k=DEPTH, mode=mode, **case.filters)
        outcome[case.id] = (case, first_answer_rank(found["results"], case))
    return outcome


async def _evaluate_via_mcp(
    db_uri: str, cases: list[Case], k: int | None = DEPTH
) -> tuple[dict[str, tuple[Case, int | None]], list[dict[str, Any]]]:
    params = StdioServerParameters(
        command=sys.executable, args=["mcp_server.py", "--db", db_uri], cwd=Path(__file__).resolve().parent
    )
    outcome: dict[str, tuple[Case, int | None]] = {}
    answers_seen: list[dict[str, Any]] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for case in tqdm(cases, desc="eval via MCP", unit="query", file=sys.stderr):
            arguments = {"query": case.query, **case.filters} | ({"k": k} if k else {})
            answer = await session.call_tool("esp32_docs_search", arguments)
            if answer.is_error:
                raise SearchInputError(f"{case.id}: {answer.content[0].text}")
            outcome[case.id] = (case, first_answer_rank(answer.structured_content["results"], case))
            size = sum(len((getattr(block, "text", "") or "").encode()) for block in answer.content)
            answers_seen.append({"bytes": size, "answer": answer.structured_content})
    return outcome, answers_seen


def evaluate_via_mcp(db_uri: str, cases: list[Case]) -> dict[str, tuple[Case, int | None]]:
    """The same cases through the real server over stdio, as an agent calls esp32_docs_search."""
    return anyio.run(_evaluate_via_mcp, db_uri, cases)[0]


def answer_size(db_uri: str, cases: list[Case]) -> str:
    """What the default answer (no k given) costs an agent: its bytes as the client receives them,
    where they go, and the hit@1/hit@5/MRR@5 of those same answers, so a smaller answer is read
    against what it still answers."""
    outcome, seen = anyio.run(_evaluate_via_mcp, db_uri, cases, None)
    sizes = sorted(entry["bytes"] for entry in seen)
    by_field: Counter[str] = Counter()
    for entry in seen:
        answer = entry["answer"]
        for result in answer["results"]:
            for key, value in result.items():
                by_field[key] += len(_compact({key: value})) - 2
        by_field["(envelope)"] += len(_compact({k: v for k, v in answer.items() if k != "results"}))
    n = len(seen)
    top = ", ".join(f"{key} {total / n:.0f}" for key, total in by_field.most_common(12))
    report = Report.of([rank for _, rank in outcome.values()])
    return "\n".join(
        [
            f"default answer over {n} cases: bytes mean {statistics.mean(sizes):.0f}, "
            f"median {statistics.median(sizes):.0f}, max {sizes[-1]}",
            f"bytes per answer by field: {top}",
            f"the same answers: hit@1 {report.hit1}  hit@5 {report.hit5}  MRR@5 "
            f"{bootstrap(reciprocal_ranks([r for _, r in outcome.values()], 5))}",
        ]
    )


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def by_category(outcome: dict[str, tuple[Case, int | None]]) -> dict[str, Scores]:
    groups: dict[str, Scores] = defaultdict(Scores)
    for case, rank in outcome.values():
        groups[case.category].ranks.append(rank)
        groups["OVERALL"].ranks.append(rank)
    return dict(sorted(groups.items(), key=lambda item: (item[0] == "OVERALL", item[0])))


@dataclass
class Diagnosis:
    """Where one case's answer stood in each retriever's list and the fusion, and why it lost."""

    case: Case
    fused: int | None
    legs: dict[str, int | None]
    failure: str
    above: list[str]
    lowered_by: list[tuple[str, int, int | None]] = field(default_factory=list)

    def lines(self) -> list[str]:
        legs = "  ".join(f"{name} {rank or '-'}" for name, rank in self.legs.items())
        head = f"{self.case.id} [{self.case.category}] fused {self.fused or '-'} | {legs} | {self.failure}"
        lowered = ", ".join(f"{name} ({was} -> {now or '-'})" for name, was, now in self.lowered_by)
        return [
            head,
            f"    {self.case.query!r} {self.case.filters}",
            *(f"    above: {a}" for a in self.above),
            *([f"    lowered by: {lowered}"] if lowered else []),
        ]


def _leg_rank(rows: list[dict[str, Any]], case: Case) -> int | None:
    return next((rank for rank, row in enumerate(rows, 1) if answers(row["text"], case)), None)


def lowering_steps(steps: list[tuple[str, int | None]]) -> list[tuple[str, int, int | None]]:
    """The fusion steps after which the answer stood lower than before, with its rank before and
    after (``steps``: each step's name and the answer's rank after it, the fused lists first)."""
    return [
        (name, before, after)
        for (_, before), (name, after) in itertools.pairwise(steps)
        if before is not None and (after is None or after > before)
    ]


def _row_label(row: dict[str, Any]) -> str:
    matched = ",".join(row.get("matched_by", ()))
    return f"{row['file_path']}#{row['chunk_index']} [{matched}] {row['text'][:70]!r}"


def failure_class(
    case: Case, fused: list[dict[str, Any]], rank: int | None, legs: dict[str, int | None]
) -> str:
    """The issue's failure classes, decided from the evidence rather than from the category alone."""
    answer = next((row for row in fused if answers(row["text"], case)), None)
    if answer is None and not any(legs.values()):
        return "not-retrieved"
    if case.filters.get("doc_type") == "src" and not query_symbols(case.query):
        return "capability"
    lowered = answer["text"].lower() if answer else ""
    depth = max((lowered.find(n.lower()) for n in case.must_contain), default=0)
    if answer is not None and depth > DENSE_READ_CHARS:
        return "deep-in-chunk"
    above = fused[: (rank or DEPTH) - 1]
    name = case.must_contain[0].lower() if case.must_contain else ""
    if answer is not None and name and any(name in row["text"].lower() for row in above):
        return "near-duplicate"  # a passage naming the same thing (summary row, prose) ranked higher
    if case.category.startswith("trm-") and not query_symbols(case.query):
        return "named-by-function"
    return "outranked"


def diagnose(engine: SearchEngine, case: Case) -> Diagnosis:
    """Re-run one case retriever by retriever, deeper than the fusion looks."""
    filters = validate_filters(*(case.filters.get(key) for key in ("chip", "doc_type", "revision")))
    release = engine.release_for(case.filters.get("idf_version"), filters.chip)
    where = filters.with_release(release).where()
    legs_rows = {
        "vector": engine.retrievers.vector(engine.embedder.embed_query(case.query), where, EXPLAIN_POOL),
        "fts": engine.retrievers.fts(case.query, where, EXPLAIN_POOL),
    }
    symbols = query_symbols(case.query)
    if symbols:
        legs_rows["symbol"] = [row for _, row in engine.retrievers.symbol_hits(symbols, where, EXPLAIN_POOL)]
    legs = {name: _leg_rank(rows, case) for name, rows in legs_rows.items()}
    # ranked as search() ranks, each folded copy's own lines matched as the agent reads them; each
    # fusion step's order is read before folding
    steps: list[tuple[str, int | None]] = []
    ranked = engine.rank(
        case.query,
        where,
        doc_type=filters.doc_type,
        observe=lambda name, rows: steps.append((name, _leg_rank(rows, case))),
    )
    fused = [row | {"text": with_variant_note(row["text"], row)} for row in fold_chip_variants(ranked)]
    rank = first_answer_rank(fused, case)
    above = [_row_label(row) for row in fused[: min((rank or DEPTH) - 1, 3)]]
    return Diagnosis(case, rank, legs, failure_class(case, fused, rank, legs), above, lowering_steps(steps))


def explain(engine: SearchEngine, cases: list[Case]) -> str:
    """The error analysis report: one block per case not answered first, then misses per class."""
    diagnoses = [
        diagnose(engine, case) for case in tqdm(cases, desc="explain", unit="query", file=sys.stderr)
    ]
    misses = [d for d in diagnoses if d.fused != 1]
    lines = [line for d in misses for line in d.lines()]
    classes = Counter(d.failure for d in misses)
    at5 = Counter(d.failure for d in misses if d.fused is None or d.fused > 5)
    lines.append(
        f"not first: {len(misses)}/{len(cases)} — "
        + ", ".join(f"{name} {count} ({at5[name]} beyond 5)" for name, count in classes.most_common())
    )
    lowered = Counter(name for d in misses for name, _, _ in d.lowered_by)
    if lowered:
        lines.append(
            "fusion steps that lowered a miss's answer: "
            + ", ".join(f"{name} {count}" for name, count in lowered.most_common())
        )
    return "\n".join(lines)


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
    parser.add_argument(
        "--via-mcp", action="store_true", help="also score hybrid through the real MCP server over stdio"
    )
    parser.add_argument(
        "--answer-size",
        action="store_true",
        help="the default (k=5) answer's bytes through the real MCP server, and what those answers hit",
    )
    parser.add_argument("--show-misses", action="store_true", help="list cases not answered in the top 10")
    parser.add_argument(
        "--explain", action="store_true", help="error analysis of every case not answered first"
    )
    parser.add_argument(
        "--held-only",
        action="store_true",
        help="score only the cases whose release (and, for guide cases, chip) the store holds; "
        "the others are counted by reason",
    )
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
    if args.held_only:
        cases, left = held_cases(engine, cases)
        reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(left.items()))
        print(f"held-only: {len(cases)} cases scored, {sum(left.values())} left out ({reasons or 'none'})")
        if not cases:
            print("error: the store holds none of the cases' releases", file=sys.stderr)
            return 2
    try:
        cases = with_releases(engine, cases)
    except SearchInputError as exc:
        print(f"error: a case's idf_version is not held by the store: {exc}", file=sys.stderr)
        return 2
    modes = list(MODES) if args.mode == "all" else [args.mode]
    results: dict[str, dict[str, Scores]] = {}
    misses: dict[str, list[str]] = {}
    try:
        outcomes = {mode: evaluate(engine, cases, mode) for mode in modes}
        if args.via_mcp:
            outcomes["mcp"] = evaluate_via_mcp(resolve_db_uri(args.db), cases)
        for mode, outcome in outcomes.items():
            results[mode] = by_category(outcome)
            misses[mode] = [
                f"{c.id} [{c.category}] {c.query!r} {c.filters}" for c, r in outcome.values() if r is None
            ]
    except SearchInputError as exc:
        print(f"error: a case's filters are invalid: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    for mode, scores in results.items():
        print(Report.of(scores["OVERALL"].ranks).line(f"{mode}, 95% intervals"))
    if args.answer_size:
        print(answer_size(resolve_db_uri(args.db), cases))
    report = release_report(engine, cases)
    if report:
        print("\n".join(report.lines()))
    if args.explain:
        print(explain(engine, cases))
    if args.show_misses:
        for mode in results:
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
