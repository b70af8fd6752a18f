"""Serving benchmark over MCP stdio, as an agent sees it: cold start, warm latency, server memory,
and the bytes of a k=5 answer as the client receives them (what each search costs an agent's context).

    uv run bench.py [--db DIR | --demo] [--queries QUERIES.jsonl] [--rounds 5] [--cold-runs 2]

Cold start is spawn-to-first-answer (interpreter, imports, model and table load, first query).
Warm latency is the client-side round trip of esp32_docs_search after a warm-up pass, so it includes
JSON-RPC over the pipe. RSS is read from /proc for the server process (Linux).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tqdm import tqdm

REPO = Path(__file__).resolve().parent
# Representative agent questions: identifiers and prose, with and without filters.
DEFAULT_QUERIES: list[dict[str, Any]] = [
    {"query": "how do I set the UART baud rate", "filters": {"chip": "esp32c3"}},
    {"query": "GPIO_PIN_MUX_REG", "filters": {}},
    {"query": "LEDC_CH0_CONF0_REG", "filters": {"chip": "esp32c3", "doc_type": "trm"}},
    {"query": "uart_driver_install", "filters": {"doc_type": "idf"}},
    {"query": "CONFIG_ESP_TASK_WDT_TIMEOUT_S", "filters": {}},
    {"query": "AES_KEY_3_REG", "filters": {"chip": "esp32c3"}},
    {
        "query": "system timer alarm comparator configuration",
        "filters": {"chip": "esp32c3", "doc_type": "trm"},
    },
    {"query": "what does bit 3 of LEDC_CH0_CONF0_REG do", "filters": {"chip": "esp32p4", "revision": "v1.3"}},
    {"query": "UART hardware flow control RTS CTS threshold", "filters": {}},
    {
        "query": "how many UART controllers does the chip have",
        "filters": {"chip": "esp32c6", "doc_type": "idf"},
    },
]


def load_queries(path: Path | None) -> list[dict[str, Any]]:
    if path is None:
        return DEFAULT_QUERIES
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"query": c["query"], "filters": c.get("filters") or {}} for c in cases]


def server_pids() -> list[int]:
    """Our own mcp_server.py children (stdio_client spawns the interpreter directly)."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and any(part.endswith(b"mcp_server.py") for part in cmdline):
            pids.append(int(entry.name))
    return pids


def memory_mb(pid: int) -> dict[str, float]:
    """Resident (VmRSS) and peak resident (VmHWM) memory of ``pid`` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


@asynccontextmanager
async def connected(server_args: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["mcp_server.py", *server_args], cwd=REPO, env=dict(os.environ)
    )
    with open(os.devnull, "w") as quiet:  # the server's stderr (progress, warnings) is not the result
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def ask(session: ClientSession, case: dict[str, Any]) -> tuple[float, int]:
    """Seconds for one k=5 search and the bytes of its text content."""
    started = time.perf_counter()
    result = await session.call_tool("esp32_docs_search", {"query": case["query"], **case["filters"], "k": 5})
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(f"search failed for {case['query']!r}: {result.content[0].text}")
    return elapsed, sum(len(getattr(block, "text", "").encode()) for block in result.content)


async def cold_start(server_args: list[str], first: dict[str, Any]) -> float:
    started = time.perf_counter()
    async with connected(server_args) as session:
        await ask(session, first)
    return time.perf_counter() - started


async def warm(server_args: list[str], queries: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    async with connected(server_args) as session:
        # warm-up: page cache, index and model first-call costs; the answers' sizes are measured here
        sizes = [(await ask(session, case))[1] for case in queries]
        latencies = [
            (await ask(session, case))[0] for _ in tqdm(range(rounds), desc="warm rounds") for case in queries
        ]
        pids = server_pids()
        memory = memory_mb(pids[0]) if pids else {}
    return {"latencies": latencies, "memory": memory, "sizes": sizes}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark the MCP server over stdio.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--db", help="LanceDB URI (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    source.add_argument("--demo", action="store_true", help="benchmark the demo sample store")
    parser.add_argument("--queries", type=Path, help="gold-format JSONL whose queries/filters to replay")
    parser.add_argument("--rounds", type=int, default=5, help="passes over the queries (default 5)")
    parser.add_argument("--cold-runs", type=int, default=2, help="cold starts to time (default 2)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.cold_runs < 1:
        parser.error("--rounds and --cold-runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        queries = load_queries(args.queries)
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        print(f"error: cannot read queries: {exc}", file=sys.stderr)
        return 2
    server_args = ["--demo"] if args.demo else (["--db", args.db] if args.db else [])
    try:
        colds = [anyio.run(cold_start, server_args, queries[0]) for _ in range(args.cold_runs)]
        measured = anyio.run(warm, server_args, queries, args.rounds)
    except RuntimeError as exc:  # the server answered with an error: usually no store
        print(f"error: {exc}", file=sys.stderr)
        return 2
    latencies_ms = [s * 1000 for s in measured["latencies"]]
    report = {
        "queries": len(latencies_ms),
        "warm_p50_ms": round(statistics.median(latencies_ms), 1),
        "warm_p95_ms": round(percentile(latencies_ms, 0.95), 1),
        "cold_start_s": [round(c, 2) for c in colds],
        "server_rss_mb": round(measured["memory"].get("VmRSS", float("nan")), 1),
        "server_peak_rss_mb": round(measured["memory"].get("VmHWM", float("nan")), 1),
        "answer_bytes_mean": round(statistics.mean(measured["sizes"])),
        "answer_bytes_max": max(measured["sizes"]),
        "cpus": os.cpu_count(),
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"bench: warm p50 {report['warm_p50_ms']} ms, p95 {report['warm_p95_ms']} ms "
        f"over {report['queries']} queries; cold start to first answer {min(colds):.2f}-{max(colds):.2f} s; "
        f"server RSS {report['server_rss_mb']} MiB (peak {report['server_peak_rss_mb']} MiB); "
        f"k=5 answer {report['answer_bytes_mean']} bytes mean, {report['answer_bytes_max']} max"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
