"""The real server over stdio, driven by the mcp client: what an agent actually receives."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from test_search import build_fixture_store

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"esp32_docs_search", "esp32_docs_find_symbol", "esp32_docs_list_chips", "esp32_docs_read"}
Call = Callable[[str, dict[str, Any]], CallToolResult]


@asynccontextmanager
async def connected(args: list[str], env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["mcp_server.py", *args], cwd=REPO, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientSession, Call]]:
    """One server for the module, driven from sync tests through a blocking portal."""
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(store)])) as session,
    ):
        yield session, lambda name, arguments: portal.call(session.call_tool, name, arguments)


@pytest.fixture
def call(server_session: tuple[ClientSession, Call]) -> Call:
    return server_session[1]


def error_text(result: CallToolResult) -> str:
    assert result.is_error, f"expected an error, got {result.structured_content}"
    return result.content[0].text


def test_tools_are_listed_read_only_with_output_schemas(tmp_path_factory: pytest.TempPathFactory) -> None:
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(store)])) as s,
    ):
        listed = portal.call(s.list_tools).tools
    assert {tool.name for tool in listed} == TOOLS
    for tool in listed:
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert tool.output_schema is not None and tool.description
    search = next(t for t in listed if t.name == "esp32_docs_search")
    assert search.input_schema["properties"]["k"]["maximum"] == 20


def test_search_returns_structured_results(call: Call) -> None:
    result = call(
        "esp32_docs_search", {"query": "UART_CLKDIV_REG", "chip": "ESP32-C3", "doc_type": "trm", "k": 2}
    )
    assert not result.is_error
    payload = result.structured_content
    assert payload["filters"] == {"chip": "esp32c3", "doc_type": "trm"}
    assert payload["returned"] == 2 and "Register UART_CLKDIV_REG" in payload["results"][0]["text"]
    assert "symbol" in payload["results"][0]["matched_by"]
    assert "corpus_note" not in payload


def test_find_symbol_read_and_list_chips_over_mcp(call: Call) -> None:
    found = call("esp32_docs_find_symbol", {"symbol": "aes_key_3_reg", "chip": "esp32c3"}).structured_content
    assert found["totals_by_doc_type"] == {"idf": 0, "trm": 1, "src": 1}
    hit = next(r for r in found["results"] if r["doc_type"] == "trm")
    page = call("esp32_docs_read", {"file_path": hit["file_path"], "chunk_index": hit["chunk_index"]})
    assert [c["chunk_index"] for c in page.structured_content["chunks"]] == [0, 1]
    listing = call("esp32_docs_list_chips", {}).structured_content
    assert listing["total_rows"] == 29 and len(listing["chips"]) == 13


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("esp32_docs_search", {"query": "x", "chip": "esp99"}, "valid chips: esp32, esp32s2"),
        ("esp32_docs_search", {"query": "x", "chip": "esp32'; DROP TABLE chunks; --"}, "valid chips:"),
        ("esp32_docs_search", {"query": "x", "doc_type": "manual"}, "valid doc_types: idf, trm, src"),
        ("esp32_docs_search", {"query": "x", "revision": "v2.0"}, "valid revisions: mainline, v1.3"),
        (
            "esp32_docs_search",
            {"query": "x", "chip": "esp32c3", "revision": "v1.3"},
            "valid revisions: mainline",
        ),
        ("esp32_docs_search", {"query": "x", "k": 0}, "greater than or equal to 1"),
        ("esp32_docs_search", {"query": "x", "k": 21}, "less than or equal to 20"),
        ("esp32_docs_search", {"query": ""}, "query is empty"),
        ("esp32_docs_search", {"query": "a" * 100_000}, "the limit is 2000"),
        ("esp32_docs_search", {"query": "x", "doc_type": "trm' OR '1'='1"}, "valid doc_types"),
        ("esp32_docs_find_symbol", {"symbol": "UART' OR 1=1 --"}, "is not an identifier"),
        ("esp32_docs_find_symbol", {"symbol": "UART_CLKDIV_REG", "doc_type": "pdf"}, "valid doc_types"),
        ("esp32_docs_read", {"file_path": "x' OR '1'='1", "chunk_index": 0}, "not a document path"),
        ("esp32_docs_read", {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 99}, "from 0 to 5"),
    ],
)
def test_bad_input_reaches_the_client_naming_valid_values(
    call: Call, tool: str, arguments: dict[str, Any], message: str
) -> None:
    assert message in error_text(call(tool, arguments))


def test_without_a_store_every_tool_says_how_to_get_one(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.lancedb"
    calls = [
        ("esp32_docs_search", {"query": "uart"}),
        ("esp32_docs_find_symbol", {"symbol": "UART_CONF0_REG"}),
        ("esp32_docs_list_chips", {}),
        ("esp32_docs_read", {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 0}),
    ]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(missing)])) as s,
    ):
        texts = [error_text(portal.call(s.call_tool, name, arguments)) for name, arguments in calls]
    for text in texts:
        assert str(missing) in text and "embed_and_store.py" in text and "--demo" in text


def test_demo_builds_on_first_use_and_labels_results(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--demo"], env)) as s,
    ):
        result = portal.call(s.call_tool, "esp32_docs_search", {"query": "LEDC_CH2_CONF0_REG", "k": 3})
    payload = result.structured_content
    assert payload["corpus_note"].startswith("DEMO SAMPLE")
    assert "Register LEDC_CHn_CONF0_REG" in payload["results"][0]["text"]
    assert payload["results"][0]["source_commit"] == "805f2ea20bbaa7670803b3b512ab611640fdf9a9"
    assert list((tmp_path / "cache" / "esp32-docs-mcp").glob("demo-*.lancedb"))


async def find_symbol_over_http(url: str) -> CallToolResult:
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await session.call_tool("esp32_docs_find_symbol", {"symbol": "uart_driver_install"})


def test_http_transport_serves_on_localhost(tmp_path_factory: pytest.TempPathFactory) -> None:
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "mcp_server.py", "--db", str(store), "--transport", "http", "--port", str(port)],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "HTTP server did not come up"
                time.sleep(0.5)
        with start_blocking_portal() as portal:
            result = portal.call(find_symbol_over_http, f"http://127.0.0.1:{port}/mcp")
        assert not result.is_error and result.structured_content["totals_by_doc_type"]["idf"] == 2
    finally:
        server.terminate()
        server.wait(timeout=30)
