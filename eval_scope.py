"""Does the project scope close the gap a forgotten chip= opens? hit@k three ways, and detection time.

    uv run eval_scope.py ../shared/eval/dev_queries.jsonl --projects DIR [--db DIR]

DIR holds one configured ESP-IDF project per chip (any folder names; two esp32p4 projects, one with
revisions below v3.0 for the v1.3 cases). Every case that names a chip runs three ways through
SearchEngine.search, as the server would:

- explicit: the case's own filters (chip, revision, doc_type), as eval_retrieval.py runs it;
- scoped: no chip and no revision from the caller; project_scope detects them from the chip's
  project and applies them exactly as the server's tools do (doc_type is still the caller's);
- none: no chip and no revision at all (the agent forgot chip= and nothing scopes the call).

Cases without a chip are the same three ways and are left out. Detection time is measured per
project: cold (first read in this process) and cached (files unchanged since).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from eval_retrieval import Case, Scores, by_category, first_answer_rank, format_table, load_cases
from project_scope import Scope, apply, detect
from search import SearchEngine, open_engine
from store import StoreError, resolve_db_uri

DEPTH = 10
CACHED_ROUNDS = 20


def project_for(case: Case, scopes: dict[tuple[str, str | None], Scope]) -> Scope | None:
    """The project a developer on this chip (and ESP32-P4 revision) would have open."""
    chip = case.filters["chip"]
    revision = case.filters.get("revision")
    if (chip, revision) in scopes:
        return scopes[(chip, revision)]
    return scopes.get((chip, "mainline")) or scopes.get((chip, None))


def run(
    engine: SearchEngine, cases: list[Case], scopes: dict[tuple[str, str | None], Scope]
) -> dict[str, dict[str, Scores]]:
    """Per way of filtering, hit@k per category over the cases whose chip has a project."""
    outcomes: dict[str, dict[str, tuple[Case, int | None]]] = {"explicit": {}, "scoped": {}, "none": {}}
    missing = set()
    for case in cases:
        doc_type = case.filters.get("doc_type")
        scope = project_for(case, scopes)
        if scope is None:
            missing.add(case.filters["chip"])
            continue
        applied = apply(scope, None, None)
        runs = {
            "explicit": case.filters,
            "scoped": {"doc_type": doc_type, "chip": applied.chip, "revision": applied.revision},
            "none": {"doc_type": doc_type},
        }
        for way, filters in runs.items():
            found = engine.search(case.query, k=DEPTH, **filters)
            outcomes[way][case.id] = (case, first_answer_rank(found["results"], case))
    if missing:
        print(f"no project for {', '.join(sorted(missing))}: those cases are left out", file=sys.stderr)
    return {way: by_category(outcome) for way, outcome in outcomes.items()}


def detection_times(projects: list[Path]) -> tuple[list[float], list[float]]:
    """Milliseconds per detect(): the first call per project, then the median of repeated calls."""
    cold, cached = [], []
    for project in projects:
        start = time.perf_counter()
        detect(str(project), "eval", Path.cwd())
        cold.append((time.perf_counter() - start) * 1000)
        rounds = []
        for _ in range(CACHED_ROUNDS):
            start = time.perf_counter()
            detect(str(project), "eval", Path.cwd())
            rounds.append((time.perf_counter() - start) * 1000)
        cached.append(statistics.median(rounds))
    return cold, cached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hit@k with explicit chip vs project scope vs none")
    parser.add_argument("queries", type=Path)
    parser.add_argument("--projects", type=Path, required=True, help="one ESP-IDF project per chip")
    parser.add_argument("--db", help="LanceDB URI (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    args = parser.parse_args(argv)
    projects = sorted(p for p in args.projects.iterdir() if p.is_dir())
    cold, cached = detection_times(projects)
    try:
        engine = open_engine(resolve_db_uri(args.db))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    scopes: dict[tuple[str, str | None], Scope] = {}
    for project in projects:
        scope = detect(str(project), "eval", Path.cwd())
        if scope.chip:
            scopes.setdefault((scope.chip, scope.revision), scope)
    cases = [c for c in load_cases(args.queries) if c.filters.get("chip")]
    results = run(engine, cases, scopes)
    print(format_table(results))
    print(
        f"detection over {len(projects)} projects: cold median {statistics.median(cold):.2f} ms "
        f"(max {max(cold):.2f}), cached median {statistics.median(cached):.2f} ms (max {max(cached):.2f})"
    )
    overall = ", ".join(
        f"{mode}: hit@1 {s['OVERALL'].hit(1):.2f} hit@5 {s['OVERALL'].hit(5):.2f}"
        for mode, s in results.items()
    )
    print(f"eval_scope: {len(results['explicit']['OVERALL'].ranks)} chip cases — {overall}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
