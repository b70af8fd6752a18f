"""The HTTP server as a team would expose it: bearer token, DNS-rebinding checks, body limit.

Everything runs against the real server process on loopback; raw requests go through httpx so the
HTTP status the SDK's middleware answers is what is checked, and the MCP client checks the happy path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp_types import CallToolResult
from test_mcp_server import free_port, wait_listening
from test_search import build_fixture_store

import http_security

REPO = Path(__file__).resolve().parent.parent
TOKEN = "team-secret-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "mcp_server.py", *args], cwd=REPO, env=env, stderr=sink, stdout=sink
        )


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One token-protected server on loopback for the module; yields its URL and its log file."""
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    log = tmp_path_factory.mktemp("log") / "server.log"
    env = {k: v for k, v in os.environ.items() if k != http_security.TOKEN_ENV_VAR}
    args = ["--db", str(store), "--transport", "http", "--port", str(port), "--token-file", str(token_file)]
    server = start(args, env, log)
    try:
        wait_listening(server, port)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        server.terminate()
        server.wait(timeout=30)


def post(url: str, headers: dict[str, str] | None = None, body: bytes | None = None) -> httpx.Response:
    merged = {**MCP_HEADERS, **(headers or {})}
    if body is None:
        return httpx.post(url, json=INITIALIZE, headers=merged, timeout=30)
    return httpx.post(url, content=body, headers=merged, timeout=30)


async def find_symbol(url: str, token: str) -> CallToolResult:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        streamable_http_client(url, http_client=client) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        return await session.call_tool("esp32_docs_find_symbol", {"symbol": "uart_driver_install"})


def test_requests_without_the_right_token_get_401(token_server: tuple[str, Path]) -> None:
    url, _ = token_server
    assert post(url).status_code == 401
    assert post(url, {"Authorization": "Bearer " + TOKEN[:-1] + "x"}).status_code == 401
    assert post(url, {"Authorization": "Bearer " + TOKEN + "extra"}).status_code == 401
    assert post(url, {"Authorization": "Basic " + TOKEN}).status_code == 401
    assert httpx.get(url, timeout=30).status_code == 401
    assert post(url, {"Authorization": "Bearer " + TOKEN}).status_code == 200


def test_the_mcp_client_with_the_token_gets_answers(token_server: tuple[str, Path]) -> None:
    url, _ = token_server
    with start_blocking_portal() as portal:
        result = portal.call(find_symbol, url, TOKEN)
    assert not result.is_error and result.structured_content["totals_by_doc_type"]["idf"] == 2


def test_dns_rebinding_and_oversized_bodies_are_refused(token_server: tuple[str, Path]) -> None:
    url, _ = token_server
    auth = {"Authorization": "Bearer " + TOKEN}
    assert post(url, {**auth, "Host": "evil.example:80"}).status_code == 421
    assert post(url, {**auth, "Origin": "http://evil.example"}).status_code == 403
    assert post(url, {**auth, "Origin": "http://localhost:3000"}).status_code == 200
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * 100_000 + b'"}}'
    assert post(url, auth, huge).status_code == 413


def test_the_token_never_reaches_the_log(token_server: tuple[str, Path]) -> None:
    url, log = token_server
    post(url, {"Authorization": "Bearer " + TOKEN})
    post(url, {"Authorization": "Bearer wrong-token-0123456789"})
    text = log.read_text()
    assert "bearer token required" in text and TOKEN not in text and "wrong-token" not in text


@pytest.mark.parametrize(
    ("args", "env_token", "message"),
    [
        (["--host", "0.0.0.0"], None, "--host 0.0.0.0 is reachable from other machines"),
        (["--host", "192.168.1.20"], None, "give a bearer token with --token-file"),
        (["--host", "0.0.0.0"], "short", "at least 16 characters"),
        (["--token-file", "/nonexistent/token"], None, "cannot read --token-file"),
        (["--refresh-seconds", "0"], None, "--refresh-seconds must be a positive number"),
    ],
)
def test_the_server_refuses_to_start_exposed_without_a_token(
    args: list[str], env_token: str | None, message: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != http_security.TOKEN_ENV_VAR}
    if env_token is not None:
        env[http_security.TOKEN_ENV_VAR] = env_token
    done = subprocess.run(
        [sys.executable, "mcp_server.py", "--db", "/x", "--transport", "http", "--port", "9", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and message in done.stderr
    assert env_token is None or env_token not in done.stderr


def test_loopback_and_explicit_names_pass_the_host_check() -> None:
    wildcard = http_security.transport_security("0.0.0.0", ["buildbox.lan"])
    assert "buildbox.lan:*" in wildcard.allowed_hosts and "0.0.0.0:*" not in wildcard.allowed_hosts
    assert "http://buildbox.lan:*" in wildcard.allowed_origins
    assert "[::1]:*" in http_security.transport_security("::1", []).allowed_hosts
    specific = http_security.transport_security("10.0.0.5", [])
    assert "10.0.0.5:*" in specific.allowed_hosts and specific.enable_dns_rebinding_protection
    assert http_security.is_loopback("127.0.0.2") and not http_security.is_loopback("0.0.0.0")
