"""Load and fault figures for the team server over streamable HTTP, with the bearer token on.

    uv run load_bench.py --db STORE [--clients 1,2,4,8] [--calls 500]
    uv run load_bench.py --db COPY --clients 8 --refresh-chunks EDITED.jsonl --refresh-source-repo DIR
    uv run load_bench.py --db COPY --clients 8 --kill9

Each client runs a mix: search without and with chip/doc_type filters, find_symbol, register, read,
list_chips, and every 10th call a malformed one that must come back as a tool error. Reported per
client count: throughput of good calls, p50/p95/p99 latency, errors (must be 0) and server RSS
before and after. --refresh-chunks commits a doc_type replace (embed_and_store.py) halfway through:
every list_chips must show the old or the new row total, nothing between, and no call may fail.
--kill9 kills the server with SIGKILL under load, runs validate_store.py on the store, restarts the
server and checks it answers. A benchmark, not a test: it prints figures and exits 1 on a failure.
Loopback only; every loop is bounded by --calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

REPO = Path(__file__).resolve().parent
HOST = "127.0.0.1"
DEFAULT_QUERIES = REPO.parent / "shared" / "eval" / "dev_queries.jsonl"
BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("esp32_docs_search", {"query": "uart", "chip": "esp32zz"}),
    ("esp32_docs_search", {"query": "", "k": 5}),
    ("esp32_docs_search", {"query": "x", "k": 0}),
    ("esp32_docs_find_symbol", {"symbol": "'; DROP TABLE chunks; --"}),
    ("esp32_docs_register", {"chip": "esp32c3", "address": "0xZZ"}),
    ("esp32_docs_read", {"file_path": "../../etc/passwd", "chunk_index": 0}),
]
SYMBOLS = [
    "uart_driver_install",
    "GPIO_PIN_MUX_REG",
    "LEDC_CH*_CONF0_REG",
    "esp_wifi_init",
    "UART_CLKDIV_REG",
]
REGISTERS = [("esp32c3", "UART_CLKDIV_REG"), ("esp32", "PCNT_CTRL_REG"), ("esp32s3", "LEDC_CONF_REG")]


def rss_mib(pid: int) -> float:
    """Resident memory of the server process tree (uv starts python as a child)."""
    out = subprocess.run(["ps", "-o", "pid=,ppid=,rss=", "-e"], capture_output=True, text=True).stdout
    rows = [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]
    tree = {pid}
    for _ in range(4):
        tree |= {p for p, parent, _ in rows if parent in tree}
    return sum(r for p, _, r in rows if p in tree) / 1024


class Server:
    """The real server as a subprocess in its own session, so SIGKILL reaches uv and python alike."""

    def __init__(self, db: str, port: int, token_file: Path, log: Path, refresh: float) -> None:
        self.args = [
            *("uv", "run", "mcp_server.py", "--db", db, "--transport", "http", "--host", HOST),
            *("--port", str(port), "--token-file", str(token_file), "--refresh-seconds", str(refresh)),
        ]
        self.port, self.log = port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> None:
        with self.log.open("ab") as sink:
            self.proc = subprocess.Popen(
                self.args, cwd=REPO, stdout=sink, stderr=sink, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited ({self.proc.returncode}); see {self.log}")
            with socket.socket() as probe:
                if probe.connect_ex((HOST, self.port)) == 0:
                    return
            time.sleep(0.3)
        raise SystemExit(f"server did not listen within {timeout} s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)


class Run:
    """Latencies and failures of one load run."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.totals: list[int] = []


def good_calls(queries: list[dict[str, Any]], reads: list[tuple[str, int]], i: int) -> tuple[str, dict]:
    """The i-th good call of the mix: searches (plain and filtered), symbol, register, read, listing."""
    q = queries[i % len(queries)]
    match i % 9:
        case 0 | 1 | 2:
            return "esp32_docs_search", {"query": q["query"], "chip": "any", "k": 5}
        case 3 | 4:
            filters = {
                key: value for key, value in q.get("filters", {}).items() if key in ("chip", "doc_type")
            }
            return "esp32_docs_search", {"query": q["query"], "chip": "any", **filters, "k": 5}
        case 5:
            return "esp32_docs_find_symbol", {"symbol": SYMBOLS[i % len(SYMBOLS)], "chip": "any"}
        case 6:
            chip, name = REGISTERS[i % len(REGISTERS)]
            return "esp32_docs_register", {"chip": chip, "name": name}
        case 7:
            file_path, chunk = reads[i % len(reads)]
            return "esp32_docs_read", {"file_path": file_path, "chunk_index": chunk, "chip": "any"}
        case _:
            return "esp32_docs_list_chips", {}


async def client(url: str, token: str, calls: int, offset: int, mix: Any, run: Run) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(*streams[:2]) as session,
    ):
        await session.initialize()
        for i in range(calls):
            if i % 10 == 9:
                name, arguments = BAD_CALLS[(offset + i) % len(BAD_CALLS)]
                result = await session.call_tool(name, arguments)
                crashed = result.is_error and result.content[0].text.strip() == f"Error executing tool {name}"
                if not result.is_error or crashed:
                    run.errors.append(f"malformed call not refused cleanly: {name} {arguments}")
                continue
            name, arguments = mix(offset * 131 + i)
            started = time.perf_counter()
            try:
                result = await session.call_tool(name, arguments)
            except Exception as error:  # a transport failure is an error of the run, not a crash of it
                run.errors.append(f"{name}: {type(error).__name__}: {error}")
                continue
            run.latencies.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                run.errors.append(f"{name} {arguments}: {result.content[0].text[:200]}")
            elif name == "esp32_docs_list_chips":
                run.totals.append(result.structured_content["total_rows"])


async def one_call(url: str, token: str, name: str, arguments: dict[str, Any]) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(*streams[:2]) as session,
    ):
        await session.initialize()
        return await session.call_tool(name, arguments)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(label: str, run: Run, wall: float, rss: tuple[float, float]) -> str:
    lat = run.latencies
    return (
        f"{label}: good={len(lat)} errors={len(run.errors)} wall={wall:.1f}s "
        f"throughput={len(lat) / wall:.1f}/s p50={percentile(lat, 0.5):.0f}ms "
        f"p95={percentile(lat, 0.95):.0f}ms p99={percentile(lat, 0.99):.0f}ms "
        f"rss={rss[0]:.0f}->{rss[1]:.0f}MiB"
    )


async def main_async(args: argparse.Namespace) -> int:
    queries = [json.loads(line) for line in args.queries.read_text().splitlines() if line.strip()]
    token = secrets.token_urlsafe(32)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    token_file = Path(args.workdir) / "load_bench.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    server = Server(
        args.db, args.port, token_file, Path(args.workdir) / "load_bench_server.log", args.refresh
    )
    url = f"http://{HOST}:{args.port}/mcp"
    failed = False
    server.start()
    try:
        probe = await one_call(
            url, token, "esp32_docs_search", {"query": "UART FIFO", "chip": "any", "k": 10}
        )
        reads = [(hit["file_path"], hit["chunk_index"]) for hit in probe.structured_content["results"]]
        old_total = (await one_call(url, token, "esp32_docs_list_chips", {})).structured_content["total_rows"]
        for clients in args.clients:
            run = Run()
            rss_before = rss_mib(server.proc.pid)
            writer = None
            started = time.perf_counter()
            load = asyncio.gather(
                *(
                    client(url, token, args.calls, c, lambda i: good_calls(queries, reads, i), run)
                    for c in range(clients)
                )
            )
            if args.refresh_chunks or args.kill9:
                task = asyncio.ensure_future(load)
                await asyncio.sleep(args.fault_after)
                if args.refresh_chunks:
                    writer = await asyncio.create_subprocess_exec(
                        *("uv", "run", "embed_and_store.py", str(args.refresh_chunks), "--doc-type"),
                        *(
                            args.refresh_doc_type,
                            "--source-repo",
                            str(args.refresh_source_repo),
                            "--db",
                            args.db,
                        ),
                        cwd=REPO,
                    )
                    print(f"refresh committed: exit {await writer.wait()}")
                    await task
                else:
                    server.stop(signal.SIGKILL)
                    print(f"server killed with SIGKILL under load after {len(run.latencies)} good calls")
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    return await after_kill(args, server, url, token)
            else:
                await load
            wall = time.perf_counter() - started
            print(
                report(
                    f"clients={clients} calls={clients * args.calls}",
                    run,
                    wall,
                    (rss_before, rss_mib(server.proc.pid)),
                )
            )
            for error in run.errors[:5]:
                print("  error:", error)
            failed |= bool(run.errors)
            if writer is not None:
                await asyncio.sleep(args.refresh + 5)
                new_total = (await one_call(url, token, "esp32_docs_list_chips", {})).structured_content[
                    "total_rows"
                ]
                seen = sorted(set(run.totals))
                whole = set(seen) <= {old_total, new_total}
                print(f"refresh: row totals seen {seen}, old {old_total}, new {new_total}, whole={whole}")
                failed |= not whole or writer.returncode != 0
        return 1 if failed else 0
    finally:
        server.stop()


async def after_kill(args: argparse.Namespace, server: Server, url: str, token: str) -> int:
    """After SIGKILL: the store validates, and a restarted server answers."""
    check = subprocess.run(["uv", "run", "validate_store.py", "--db", args.db, "--sample", "50"], cwd=REPO)
    print(f"validate_store after kill -9: exit {check.returncode}")
    server.start()
    result = await one_call(
        url, token, "esp32_docs_find_symbol", {"symbol": "uart_driver_install", "chip": "any"}
    )
    print(f"restarted server answers: {not result.is_error}")
    return 1 if check.returncode or result.is_error else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the store (a copy when refreshing into it)")
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES, help="gold-format JSONL queries")
    parser.add_argument("--clients", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--calls", type=int, default=500, help="calls per client (default 500)")
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--refresh", type=float, default=5.0, help="the server's --refresh-seconds")
    parser.add_argument("--refresh-chunks", type=Path, help="chunks JSONL to commit halfway through")
    parser.add_argument("--refresh-doc-type", default="trm")
    parser.add_argument("--refresh-source-repo", type=Path)
    parser.add_argument(
        "--kill9", action="store_true", help="SIGKILL the server under load, validate, restart"
    )
    parser.add_argument("--fault-after", type=float, default=10.0, help="seconds of load before the fault")
    parser.add_argument("--workdir", default="/tmp", help="where the token file and server log go")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
