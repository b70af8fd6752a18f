"""memory_bench.py and process_memory.py on the fixture store: the bench loads what the server loads,
through the same constructors, so a changed signature fails here rather than in a bench run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_search import FIXTURES, build_fixture_store

import memory_bench
import process_memory

STEPS = (
    "imports",
    "embedding model (all-MiniLM-L6-v2)",
    "learned ranker",
    "table + StoreIndex",
    "first search (start to first answer)",
    "searches (LanceDB caches)",
    "register index of esp32c3",
    "register indexes of all",
)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")


def test_memory_bench_reports_every_step_with_its_resident_size(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = memory_bench.main(["--db", str(store_path), "--queries", str(FIXTURES / "queries.jsonl")])
    out = capsys.readouterr().out
    assert code == 0, out
    for step in STEPS:
        line = next((line for line in out.splitlines() if step in line), None)
        assert line is not None, f"no line for step {step!r} in:\n{out}"
        resident = float(line[44:].split()[0])
        assert resident > 50, line  # an interpreter with numpy and lancedb loaded is never smaller
    rows = re.search(r"table \+ StoreIndex \((\d+) rows\)", out)
    assert rows and int(rows.group(1)) > 0
    assert re.search(r"memory_bench: \d+ MiB resident after every step", out)


def test_allocator_settings_are_taken_on_linux_glibc() -> None:
    """The server relies on them for its resident size; on glibc both must report success."""
    if process_memory._glibc() is None:
        pytest.skip("not glibc: the allocator settings do nothing here")
    assert process_memory.limit_arenas()
    process_memory.trim()  # True or False by what was free; it must not raise
