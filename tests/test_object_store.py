"""Serving from object storage: a real S3-compatible server (moto's server mode) on loopback.

The store is published with `bundle.py pack --to s3://...` and served with `mcp_server.py --db
s3://...`; LanceDB reaches the bucket itself, configured by the standard AWS_* variables. Checked:
every tool answers from the bucket as from local disk; a wrong secret, an unreachable endpoint and a
missing table at start are clear tool errors, never a traceback; the S3 server stopped under a
running server makes each call an error that says so, and the server recovers without a restart
once the bucket is back; two HTTP replicas over one bucket answer identically, and a republished
store reaches both, each answer wholly the old store or wholly the new one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from s3_server import S3Server
from test_mcp_server import connected, free_port, wait_listening
from test_search import FIXTURES, build_fixture_store
from test_store_refresh import MARKER, refreshed_trm_rows

import embed_and_store
from embedder import get_embedder

REPO = Path(__file__).resolve().parent.parent
BOUND_SECONDS = 20.0
QUESTIONS = [line for line in (FIXTURES / "queries.jsonl").read_text().splitlines() if line]


def publish(store: Path, uri: str, env: dict[str, str]) -> None:
    """`bundle.py pack --to URI`, as a team publishes a store it built."""
    done = subprocess.run(
        [sys.executable, "bundle.py", "pack", "--db", str(store), "--to", uri],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("s3") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def published(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    uri = s3.uri("fixture")
    publish(store, uri, s3.env())
    return store, uri


def tool_calls(first_hit: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """One call of every tool that reads the store, the fixture questions as searches."""
    import json

    calls = [
        ("esp32_docs_search", {"query": json.loads(q)["query"], "k": 5, **json.loads(q)["filters"]})
        for q in QUESTIONS
    ]
    calls += [
        ("esp32_docs_find_symbol", {"symbol": "uart_driver_install"}),
        ("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG"}),
        ("esp32_docs_list_chips", {}),
    ]
    if first_hit:
        calls.append(("esp32_docs_read", {"file_path": first_hit["file_path"], "chunk_index": 0}))
    return calls


def answers(call: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for name, arguments in calls:
        result = call(name, arguments)
        assert not result.is_error, (name, result.content[0].text)
        payload = dict(result.structured_content)
        payload.pop("bundle", None)  # only an installed or published store carries one
        out.append(payload)
    return out


def test_every_tool_answers_from_the_bucket_as_from_local_disk(
    published: tuple[Path, str], s3: S3Server
) -> None:
    store, uri = published
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(connected(["--db", str(store)])) as local:
            hit = portal.call(local.call_tool, "esp32_docs_search", {"query": "uart", "chip": "any"})
            calls = tool_calls(hit.structured_content["results"][0])
            expected = answers(lambda n, a: portal.call(local.call_tool, n, a), calls)
        with portal.wrap_async_context_manager(connected(["--db", uri], env=s3.env())) as remote:
            got = answers(lambda n, a: portal.call(remote.call_tool, n, a), calls)
            listing = portal.call(remote.call_tool, "esp32_docs_list_chips", {}).structured_content
    assert got == expected
    assert listing["bundle"]["rows"] == {"idf": 11, "src": 7, "trm": 18}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("wrong secret", "refused the credentials"),
        ("unreachable endpoint", "cannot be reached"),
        ("missing table", "there is no table at"),
    ],
)
def test_a_bad_object_store_at_start_is_a_clear_error(
    published: tuple[Path, str], s3: S3Server, tmp_path: Path, case: str, message: str
) -> None:
    _, uri = published
    env = s3.env()
    if case == "wrong secret":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    elif case == "unreachable endpoint":
        env["AWS_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    else:
        uri = s3.uri("nothing-published-here")
    log = tmp_path / "server.log"
    with (
        log.open("w") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", uri], env=env, errlog=errlog)) as session,
    ):
        result = portal.call(session.call_tool, "esp32_docs_list_chips", {})
    assert result.is_error
    text = result.content[0].text
    assert message in text and uri in text and "AWS_ENDPOINT" in text, text
    assert "RetryError" not in text and "Traceback" not in log.read_text()


def test_the_bucket_going_away_is_an_error_per_call_and_its_return_is_served_without_restart(
    tmp_path: Path,
) -> None:
    s3 = S3Server(tmp_path / "moto.log", auth=False).start()  # its key survives a restart
    try:
        store = build_fixture_store(tmp_path.parent / "search-store")
        uri = s3.uri("going-away")
        publish(store, uri, s3.env())
        args = ["--db", uri, "--refresh-seconds", "0.5"]
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(connected(args, env=s3.env())) as session,
        ):

            def search() -> Any:
                return portal.call(session.call_tool, "esp32_docs_search", {"query": "uart", "chip": "any"})

            before = search()
            assert not before.is_error
            s3.stop()
            deadline = time.monotonic() + BOUND_SECONDS
            while not (gone := search()).is_error:
                assert time.monotonic() < deadline, "a stopped object store still answers"
                time.sleep(0.2)
            for result in [gone, search(), search()]:
                assert result.is_error and "cannot be reached" in result.content[0].text, result.content
            s3.start()
            publish(store, uri, s3.env())  # moto kept the objects in memory only: restore the bucket
            deadline = time.monotonic() + BOUND_SECONDS
            while (back := search()).is_error:
                assert time.monotonic() < deadline, f"no recovery: {back.content[0].text}"
                time.sleep(0.2)
            assert back.structured_content["results"] == before.structured_content["results"]
    finally:
        s3.stop()


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def start_replica(uri: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = ["--db", uri, "--transport", "http", "--port", str(port), "--refresh-seconds", "0.5"]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "mcp_server.py", *args], cwd=REPO, env=env, stderr=sink, stdout=sink
        )
    wait_listening(process, port)
    return process, f"http://127.0.0.1:{port}/mcp"


def test_two_replicas_over_one_bucket_answer_alike_and_both_follow_a_republish(
    published: tuple[Path, str], s3: S3Server, tmp_path: Path
) -> None:
    fixture, _ = published
    store = tmp_path / "store.lancedb"
    shutil.copytree(fixture, store)
    uri = s3.uri("replicas")
    publish(store, uri, s3.env())
    started = [start_replica(uri, s3.env(), tmp_path / f"replica{i}.log") for i in range(2)]
    try:
        with start_blocking_portal() as portal:
            sessions = [portal.wrap_async_context_manager(http_session(url)) for _, url in started]
            a, b = (stack.__enter__() for stack in sessions)
            try:
                calls = tool_calls()
                first = answers(lambda n, args: portal.call(a.call_tool, n, args), calls)
                second = answers(lambda n, args: portal.call(b.call_tool, n, args), calls)
                assert first == second
                follow_republish(portal, [a, b], store, uri, s3, tmp_path)
            finally:
                for stack in reversed(sessions):
                    stack.__exit__(None, None, None)
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=30)


def follow_republish(
    portal: Any, sessions: list[ClientSession], store: Path, uri: str, s3: S3Server, tmp_path: Path
) -> None:
    """Republish a store with one TRM row marked and one dropped while both replicas keep answering."""

    def corpus(session: ClientSession) -> tuple[str, str]:
        listing = portal.call(session.call_tool, "esp32_docs_list_chips", {})
        found = portal.call(
            session.call_tool, "esp32_docs_search", {"query": MARKER, "chip": "esp32c3", "doc_type": "trm"}
        )
        assert not listing.is_error and not found.is_error, (listing.content, found.content)
        total = listing.structured_content["total_rows"]
        assert total in (old_total, old_total - 1), total
        marked = any(MARKER in hit["text"] for hit in found.structured_content["results"])
        return "new" if total == old_total - 1 else "old", "new" if marked else "old"

    old_total = portal.call(sessions[0].call_tool, "esp32_docs_list_chips", {}).structured_content[
        "total_rows"
    ]
    source = tmp_path / "source"
    source.mkdir()
    embed_and_store.build([refreshed_trm_rows(tmp_path)], "trm", source, str(store), get_embedder)
    done: list[float] = []
    writer = threading.Thread(target=lambda: (publish(store, uri, s3.env()), done.append(time.monotonic())))
    writer.start()
    seen: list[list[str]] = [[], []]
    deadline = time.monotonic() + 300
    while True:
        for index, session in enumerate(sessions):
            seen[index].extend(corpus(session))
        if done and all(states[-2:] == ["new", "new"] for states in seen):
            break
        assert time.monotonic() < deadline, "the republish never reached both replicas"
        assert not done or time.monotonic() < done[0] + BOUND_SECONDS, f"not followed: {seen}"
    writer.join()
    for states in seen:  # old ... old new ... new: each answer whole, never back to the old store
        first_new = states.index("new")
        assert set(states[:first_new]) <= {"old"} and set(states[first_new:]) == {"new"}, states


@pytest.mark.parametrize(
    ("raw", "cause"),
    [
        # the shapes LanceDB 0.40 raised against the loopback server (abridged)
        (
            'Failed to connect to namespace: IO { source: Generic { store: "S3", source: ListRequest { '
            "source: RetryError(RetryErrorImpl { retries: 3, max_retries: 3, retry_timeout: 180s, inner: "
            'Http(HttpError { kind: Connect, source: ConnectError("tcp connect error", ConnectionRefused',
            "cannot be reached",
        ),
        (
            "RetryError(RetryErrorImpl { retries: 0, max_retries: 3, retry_timeout: 180s, inner: Status { "
            'status: 403, body: Some("<Error><Code>SignatureDoesNotMatch</Code>',
            "refused the credentials",
        ),
        ("Table 'chunks' was not found", "there is no table at"),
    ],
)
def test_object_store_errors_become_one_sentence(raw: str, cause: str) -> None:
    from object_store import describe_failure

    message = describe_failure("s3://b/p/esp_docs.lancedb", ValueError(raw))
    assert cause in message and "AWS_ENDPOINT" in message and "RetryError" not in message
