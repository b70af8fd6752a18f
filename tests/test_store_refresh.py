"""A store refreshed, deleted and restored under a running server (real server over stdio).

embed_and_store replaces the trm corpus in a copy of the fixture store while a thread of this test
keeps calling the server: every answer must be wholly the old corpus or wholly the new one, none an
error, and the new one must arrive within a bounded time. Then the store is moved away (a clear error
naming it) and back (answers again), all without restarting the server.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal
from test_mcp_server import connected
from test_search import FIXTURES, build_fixture_store

import embed_and_store
from embedder import get_embedder
from schema import content_hash
from search import open_engine

REFRESH_SECONDS = 0.5
BOUND_SECONDS = 10.0
MARKER = "ZORBLEFROB"


def refreshed_trm_rows(tmp: Path) -> Path:
    """The fixture TRM corpus with one row's text marked and the last chunk of its file dropped."""
    rows = [json.loads(line) for line in (FIXTURES / "trm_fixture_rows.jsonl").read_text().splitlines()]
    rows[0]["text"] += f" {MARKER} marks the refreshed corpus."
    rows[0]["content_hash"] = content_hash(rows[0]["text"])
    last = max(
        (row for row in rows if row["file_path"] == rows[-1]["file_path"]), key=lambda r: r["chunk_index"]
    )
    rows.remove(last)
    path = tmp / "trm_refreshed.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_refresh_delete_and_restore_under_a_running_server(tmp_path: Path) -> None:
    fixture = build_fixture_store(tmp_path.parent / "refresh-fixture")
    db = tmp_path / "store.lancedb"
    shutil.copytree(fixture, db)
    chunks = refreshed_trm_rows(tmp_path)
    source = tmp_path / "source"
    source.mkdir()
    args = ["--db", str(db), "--refresh-seconds", str(REFRESH_SECONDS)]
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(connected(args)) as session:

        def call(name: str, arguments: dict[str, Any]) -> Any:
            return portal.call(session.call_tool, name, arguments)

        def corpus() -> tuple[str, str]:
            """'old' or 'new' from one list_chips and one search, each of which must be whole."""
            listing = call("esp32_docs_list_chips", {})
            found = call("esp32_docs_search", {"query": MARKER, "chip": "esp32c3", "doc_type": "trm"})
            assert not listing.is_error and not found.is_error, (listing.content, found.content)
            total = listing.structured_content["total_rows"]
            assert total in (old_total, old_total - 1), total
            marked = any(MARKER in hit["text"] for hit in found.structured_content["results"])
            return "new" if total == old_total - 1 else "old", "new" if marked else "old"

        old_total = call("esp32_docs_list_chips", {}).structured_content["total_rows"]
        assert corpus() == ("old", "old")
        committed: list[float] = []
        failed: list[BaseException] = []

        def refresh() -> None:
            try:
                embed_and_store.build([chunks], "trm", source, str(db), get_embedder)
            except BaseException as error:  # surfaced by the main thread's loop below
                failed.append(error)
                raise
            committed.append(time.monotonic())

        writer = threading.Thread(target=refresh)
        writer.start()
        seen: list[tuple[str, str]] = []
        deadline = time.monotonic() + 300
        while not committed or time.monotonic() < committed[0] + BOUND_SECONDS:
            seen.append(corpus())
            if seen[-1] == ("new", "new") and committed:
                break
            assert not failed and time.monotonic() < deadline, f"the refresh never committed: {failed}"
        writer.join()
        assert seen[-1] == ("new", "new"), f"still old {BOUND_SECONDS} s after the commit"
        # each answer is whole; two calls may straddle the swap, so the calls in order must read as
        # old ... old new ... new, never going back
        answers = [state for pair in seen for state in pair]
        first_new = answers.index("new")
        assert set(answers[:first_new]) == {"old"} and set(answers[first_new:]) == {"new"}, seen

        moved = tmp_path / "away.lancedb"
        db.rename(moved)
        deadline = time.monotonic() + BOUND_SECONDS
        while not (gone := call("esp32_docs_search", {"query": "uart"})).is_error:
            assert time.monotonic() < deadline, "a deleted store still answers"
            time.sleep(0.1)
        message = gone.content[0].text
        assert str(db) in message and "embed_and_store.py" in message, message

        moved.rename(db)
        deadline = time.monotonic() + BOUND_SECONDS
        while (back := call("esp32_docs_search", {"query": "uart"})).is_error:
            assert time.monotonic() < deadline, f"no recovery: {back.content[0].text}"
            time.sleep(0.1)
        assert corpus() == ("new", "new")


def test_a_refresh_reuses_the_loaded_model_instead_of_loading_another(tmp_path: Path) -> None:
    fixture = build_fixture_store(tmp_path.parent / "refresh-fixture")
    first = open_engine(str(fixture))
    again = open_engine(str(fixture), reuse=first)
    assert again.embedder is first.embedder and again is not first
    assert open_engine(str(fixture)).embedder is not first.embedder, "without reuse a model is loaded"
