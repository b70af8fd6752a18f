"""Where a server's memory goes: the resident size after each thing it loads, in one process.

    uv run memory_bench.py --db DIR_OR_URI [--chip esp32c3] [--queries QUERIES.jsonl]

Steps, in the order the server takes them: the imports, the embedding model, the table and the
engine's per-row index (StoreIndex), the first searches (LanceDB's index and metadata caches fill),
the register index of one chip (what the server prepares for the project's chip), then those of
every chip (what a team server holds once every chip has been asked about). Each line is the RSS
after the step and what the step added. RSS is read from /proc (Linux); freed memory that the
allocator keeps shows as held, as it does in the server.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench import load_queries
from process_memory import limit_arenas


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Steps:
    def __init__(self) -> None:
        self.last = rss_mib()
        self.started = time.monotonic()
        print(f"{'step':<44} {'RSS MiB':>8} {'added':>8} {'s':>6}")
        print(f"{'interpreter':<44} {self.last:8.0f} {'':>8} {0:6.2f}")

    def mark(self, name: str) -> None:
        now = rss_mib()
        print(f"{name:<44} {now:8.0f} {now - self.last:+8.0f} {time.monotonic() - self.started:6.2f}")
        self.last = now


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Resident memory per server component.")
    parser.add_argument("--db", required=True, help="store directory or LanceDB URI")
    parser.add_argument("--chip", default="esp32c3", help="the project's chip (default esp32c3)")
    parser.add_argument("--queries", type=Path, help="gold-format JSONL to search (default bench.py's)")
    args = parser.parse_args(argv)
    limit_arenas()  # as the server does before loading anything
    steps = Steps()
    import lancedb

    import mcp_server  # everything the server imports
    import registers
    from chip_vocab import chip_ids
    from embedder import get_embedder, resolve_model_id
    from rerank import Ranker
    from search import SearchEngine
    from store import open_store, store_model_id
    from term_stats import read_term_stats

    steps.mark("imports (mcp, lancedb, onnxruntime, ...)")
    table = open_store(args.db)
    embedder = get_embedder(resolve_model_id(store_model_id(table)))
    embedder.embed_query("warm the session")
    steps.mark(f"embedding model ({embedder.model_id})")
    ranker = Ranker.load()
    steps.mark("learned ranker")
    stats = read_term_stats(lancedb.connect(args.db))
    engine = SearchEngine(table, embedder, ranker=ranker, term_stats=stats)
    steps.mark(f"table + StoreIndex ({engine.index.rows} rows)")
    queries = load_queries(args.queries)
    engine.search(queries[0]["query"], **queries[0]["filters"])
    steps.mark("first search (start to first answer)")
    for case in queries:
        engine.search(case["query"], **case["filters"])
    steps.mark(f"{len(queries)} searches (LanceDB caches)")
    series = engine.release_for(None, args.chip, None).series
    registers.prepare_chip(engine.table, args.chip, None, series)
    steps.mark(f"register index of {args.chip}")
    prepared: list[Any] = []
    for chip in chip_ids():
        try:
            release = engine.release_for(None, chip, None).series
            prepared.append(registers.prepare_chip(engine.table, chip, None, release))
        except Exception as error:  # a chip the store does not hold, or one without registers
            print(f"  {chip}: not prepared ({type(error).__name__}: {str(error)[:80]})", file=sys.stderr)
    steps.mark(f"register indexes of all {len(prepared)} chips")
    del mcp_server
    print(f"memory_bench: {steps.last:.0f} MiB resident after every step on {args.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
