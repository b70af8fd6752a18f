"""The store: build, incremental re-embedding, atomic replacement, kill -9 and resume, validation.

Every test uses a real LanceDB in a temp dir. The real MiniLM model embeds the fixtures, except in
the kill/resume test, where a deterministic stand-in keeps the subprocess runs short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pytest

import validate_store
from embed_and_store import (
    CACHE_TABLE_NAME,
    EMBED_BATCH,
    INDEXES,
    LEAD_WORDS,
    WINDOW_OVERLAP,
    WINDOW_WORDS,
    embedding_texts,
    ensure_table,
    main,
    row_key,
    window_texts,
)
from embedder import get_embedder
from schema import FACT_FIELDS, WINDOWS_COLUMN, make_row, read_jsonl, write_jsonl
from store import MODEL_ID_KEY, TABLE_NAME, VECTOR_DIM_KEY, StoreError, open_store, store_model_id

FIXTURES = Path(__file__).parent / "fixtures" / "store"
TRM_COMMIT = "805f2ea20bbaa7670803b3b512ab611640fdf9a9"
IDF_COMMIT = "102122904ad0000000000000000000000000abcd"  # the commit the idf fixture rows carry


@pytest.fixture(scope="module")
def embedder() -> Any:
    return get_embedder()


def pinned_tree(path: Path, commit: str) -> Path:
    """A source tree outside git whose commit comes from a SOURCE.md pin (like shared/corpus)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "SOURCE.md").write_text(f"- Commit: `{commit}`\n", encoding="utf-8")
    return path


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    return {
        "trm": pinned_tree(tmp_path / "trm-src", TRM_COMMIT),
        "idf": pinned_tree(tmp_path / "idf-src", IDF_COMMIT),
    }


def run(
    capsys: pytest.CaptureFixture[str],
    embedder: Any,
    chunks: Path,
    doc_type: str,
    tree: Path,
    db: Path,
) -> tuple[int, str, str]:
    """embed_and_store's CLI in-process with the shared real model: (exit code, stdout, stderr)."""
    code = main(
        [str(chunks), "--doc-type", doc_type, "--source-repo", str(tree), "--db", str(db)],
        embedder_factory=lambda _model: embedder,
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows_by_key(table: lancedb.table.Table, doc_type: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    data = table.search().where(f"doc_type = '{doc_type}'").limit(None).to_arrow().to_pylist()
    return {row_key(row): row for row in data}


def build_trm_and_idf(
    db: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store holding both fixture corpora, each built by its own CLI run."""
    for doc_type in ("trm", "idf"):
        chunks = FIXTURES / f"{doc_type}_fixture_rows.jsonl"
        code, _, err = run(capsys, embedder, chunks, doc_type, trees[doc_type], db)
        assert code == 0, err


def test_build_records_model_provenance_and_indices(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    code, out, _ = run(capsys, embedder, FIXTURES / "trm_fixture_rows.jsonl", "trm", trees["trm"], db)
    assert code == 0
    assert "doc_type=trm rows=16 embedded=16 cached=0" in out

    table = open_store(str(db), model_id=embedder.model_id)
    assert store_model_id(table) == "all-MiniLM-L6-v2"
    assert table.schema.metadata[MODEL_ID_KEY] == b"all-MiniLM-L6-v2"
    assert table.schema.metadata[VECTOR_DIM_KEY] == b"384"
    assert table.schema.field("vector").type.list_size == 384
    assert {index.name for index in table.list_indices()} == set(INDEXES)

    rows = rows_by_key(table, "trm")
    assert len(rows) == 16
    # The fixture rows carry no provenance: it comes from the --source-repo pin.
    assert {(r["source_version"], r["source_commit"]) for r in rows.values()} == {
        (TRM_COMMIT[:12], TRM_COMMIT)
    }

    # The symbol index matches an identifier whatever its case, as one token.
    hits = table.search("uart_clkdiv_reg", query_type="fts", fts_columns="symbol_refs").limit(5).to_list()
    assert sorted(hit["section_path"].rsplit(" > ", 1)[1] for hit in hits) == [
        "Baud Rate Generation",
        "UART_CLKDIV_REG",
    ]
    # The stored vector is the model's embedding of the row's text.
    row = next(r for r in rows.values() if r["section_path"].endswith("UART_CONF0_REG"))
    assert float(np.dot(row["vector"], embedder.embed_documents([row["text"]])[0])) > 0.999


def test_rerun_on_unchanged_input_embeds_and_writes_nothing(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    run(capsys, embedder, FIXTURES / "trm_fixture_rows.jsonl", "trm", trees["trm"], db)
    version = open_store(str(db)).version
    code, out, _ = run(capsys, embedder, FIXTURES / "trm_fixture_rows.jsonl", "trm", trees["trm"], db)
    assert code == 0
    assert "rows=16 embedded=0 cached=16 (unchanged, nothing written)" in out
    assert open_store(str(db)).version == version


def edited_trm(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The trm fixture after an upstream refresh: one text edited, one dropped, one new, one retagged."""
    rows = list(read_jsonl(FIXTURES / "trm_fixture_rows.jsonl"))
    edited = {**rows[0], "text": rows[0]["text"] + " Write it only while the UART is idle."}
    edited = make_row(**{k: v for k, v in edited.items() if k not in ("content_hash", *FACT_FIELDS)})
    retagged = {**rows[2], "source_doc": "UART Controller (retitled)"}
    new = make_row(
        text="UART Controller > RS485\n\nIn RS485 mode the transmitter drives DE while sending and the "
        "receiver ignores its own echo unless UART_RS485_RXBY_TX_EN is set.",
        doc_type="trm",
        chips=["esp32c3"],
        source_doc="UART Controller",
        section_path="UART Controller > RS485",
        file_path="ESP32-C3/26-UART__EN",
        chunk_index=16,
        symbol_refs=["UART_RS485_RXBY_TX_EN"],
    )
    kept = [edited, rows[1], retagged, *rows[3:-1], new]  # rows[-1] (LEDC) is dropped upstream
    write_jsonl(path, kept)
    return {"kept": kept, "dropped": [rows[-1]], "fresh": [edited, new]}


def test_refresh_embeds_only_changed_text_and_leaves_other_doc_types_alone(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    build_trm_and_idf(db, trees, embedder, capsys)
    idf_before = rows_by_key(open_store(str(db)), "idf")
    assert len(idf_before) == 8

    refreshed = edited_trm(tmp_path / "trm_refreshed.jsonl")
    code, out, _ = run(capsys, embedder, tmp_path / "trm_refreshed.jsonl", "trm", trees["trm"], db)
    assert code == 0
    # Only the edited and the new text are embedded; the retagged row's text is cached.
    assert "rows=16 embedded=2 cached=14 (+2 -2 ~1 =13)" in out

    table = open_store(str(db))
    trm_after = rows_by_key(table, "trm")
    expected = {row_key(row) for row in refreshed["kept"]}
    assert set(trm_after) == expected
    assert not any(r["file_path"] == "ESP32-C3/18-LEDC__EN" for r in trm_after.values())
    retitled = [r for r in trm_after.values() if r["source_doc"] == "UART Controller (retitled)"]
    assert len(retitled) == 1
    idf_after = rows_by_key(table, "idf")
    assert idf_after.keys() == idf_before.keys()
    for key, row in idf_before.items():
        assert idf_after[key] == row  # metadata and vector untouched


def test_one_chapter_file_in_two_chips_manuals_gives_two_rows(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """ESP32-C61's manual includes chapters from the ESP32-C5 folder: same file and text, two chips."""
    first = next(iter(read_jsonl(FIXTURES / "trm_fixture_rows.jsonl")))
    chunks = write_rows(tmp_path / "shared.jsonl", [first, {**first, "chips": ["esp32c6"]}])
    code, out, _ = run(capsys, embedder, chunks, "trm", trees["trm"], tmp_path / "db")
    assert code == 0
    assert "rows=2 embedded=1 cached=0" in out  # one text, embedded once
    stored = rows_by_key(open_store(str(tmp_path / "db")), "trm")
    assert sorted(row["chips"][0] for row in stored.values()) == ["esp32c3", "esp32c6"]


def test_open_store_errors_say_what_to_do(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys
) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(
        StoreError, match=r"no store at .*nowhere.*embed_and_store\.py.*mcp_server\.py --demo"
    ):
        open_store(str(missing))
    assert not missing.exists()  # opening must not create an empty store

    db = tmp_path / "db"
    run(capsys, embedder, FIXTURES / "idf_fixture_rows.jsonl", "idf", trees["idf"], db)
    with pytest.raises(
        StoreError, match=r"built with embedding model 'all-MiniLM-L6-v2', not 'Qwen/Qwen3-Embedding-0.6B'"
    ):
        open_store(str(db), model_id="Qwen/Qwen3-Embedding-0.6B")
    with pytest.raises(StoreError, match=r"'all-MiniLM-L6-v2', not 'Qwen/Qwen3-Embedding-0.6B'"):
        ensure_table(lancedb.connect(str(db)), str(db), "Qwen/Qwen3-Embedding-0.6B", 1024)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """write_jsonl, returning the path so a case can name the file inline."""
    write_jsonl(path, rows)
    return path


def bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (CLI args, expected error text)."""
    trm = list(read_jsonl(FIXTURES / "trm_fixture_rows.jsonl"))
    unpinned = tmp / "unpinned-src"
    unpinned.mkdir()
    other_commit = pinned_tree(tmp / "other-src", "f" * 40)
    pinned = pinned_tree(tmp / "pinned-src", TRM_COMMIT)
    idf_file = str(FIXTURES / "idf_fixture_rows.jsonl")

    def case(rows: list[dict[str, Any]], name: str, tree: Path = pinned, doc_type: str = "trm") -> list[str]:
        return [
            str(write_rows(tmp / f"{name}.jsonl", rows)),
            "--doc-type",
            doc_type,
            "--source-repo",
            str(tree),
        ]

    (tmp / "broken.jsonl").write_text('{"text": "x"\n', encoding="utf-8")
    return {
        "unknown doc_type": (case(trm, "a", doc_type="pdf"), "valid doc_types: idf, trm, src"),
        "doc_type mismatch": (
            [idf_file, "--doc-type", "trm", "--source-repo", str(pinned)],
            "row 1: doc_type 'idf' but --doc-type is 'trm'",
        ),
        "unknown chip": (case([{**trm[0], "chips": ["esp8266"]}], "b"), "valid chips: esp32"),
        "hash not of text": (
            case([{**trm[0], "text": trm[0]["text"] + "!"}], "c"),
            "content_hash is not sha256",
        ),
        "duplicate chunk": (
            case([trm[0], trm[1], trm[0]], "d"),
            "row 3: same doc_type/file_path/chunk_index",
        ),
        "empty input": (case([], "e"), "refusing to replace doc_type 'trm' with nothing"),
        "missing file": (
            [str(tmp / "absent.jsonl"), "--doc-type", "trm", "--source-repo", str(pinned)],
            "not found",
        ),
        "malformed JSON": (
            [str(tmp / "broken.jsonl"), "--doc-type", "trm", "--source-repo", str(pinned)],
            "broken.jsonl:1: not valid JSON",
        ),
        "no provenance anywhere": (
            case(trm, "f", tree=unpinned),
            "source_commit is unknown and --source-repo",
        ),
        "stale chunks": (
            [idf_file, "--doc-type", "idf", "--source-repo", str(other_commit)],
            f"made from commit {IDF_COMMIT} but --source-repo is at {'f' * 40}",
        ),
        "missing source repo": (case(trm, "g", tree=tmp / "no-such-tree"), "does not exist"),
        "unknown model": ([*case(trm, "h"), "--model", "bert-huge"], "valid model ids: all-MiniLM-L6-v2"),
    }


BAD_INPUT_CASES = [
    "unknown doc_type",
    "doc_type mismatch",
    "unknown chip",
    "hash not of text",
    "duplicate chunk",
    "empty input",
    "missing file",
    "malformed JSON",
    "no provenance anywhere",
    "stale chunks",
    "missing source repo",
    "unknown model",
]


@pytest.mark.parametrize("name", BAD_INPUT_CASES)
def test_bad_input_exits_2_with_a_clear_message_and_leaves_no_store(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = bad_inputs(tmp_path)
    assert sorted(cases) == sorted(BAD_INPUT_CASES)
    args, expected = cases[name]
    db = tmp_path / "db"
    code = main([*args, "--db", str(db)])  # the real get_embedder: an unknown --model must be named
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err
    assert "Traceback" not in err
    assert not (db / f"{TABLE_NAME}.lance").exists()


def test_replacing_a_doc_type_is_atomic_for_readers(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    build_trm_and_idf(db, trees, embedder, capsys)
    table = open_store(str(db))
    old_trm = set(rows_by_key(table, "trm"))
    idf = set(rows_by_key(table, "idf"))
    first_new_version = table.version + 1

    refreshed = edited_trm(tmp_path / "trm_refreshed.jsonl")
    new_trm = {row_key(row) for row in refreshed["kept"]}
    assert old_trm != new_trm

    # A reader that sees every commit as soon as it lands, polling while the replace runs.
    seen: list[frozenset[tuple[Any, ...]]] = []
    done = threading.Event()

    def reader() -> None:
        live = lancedb.connect(str(db), read_consistency_interval=timedelta(0)).open_table(TABLE_NAME)
        while not done.is_set():
            seen.append(frozenset(rows_by_key(live, "trm")))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        code, _, _ = run(capsys, embedder, tmp_path / "trm_refreshed.jsonl", "trm", trees["trm"], db)
    finally:
        done.set()
        thread.join()
    assert code == 0
    assert seen and all(state in (old_trm, new_trm) for state in seen)

    # Stronger than polling: every version the replace committed holds the old or the new corpus
    # whole, the other doc_type untouched, and the full-text index.
    table = open_store(str(db))
    last = table.version
    assert last >= first_new_version
    for version in range(first_new_version, last + 1):
        table.checkout(version)
        assert set(rows_by_key(table, "trm")) in (old_trm, new_trm), f"version {version} mixes corpora"
        assert set(rows_by_key(table, "idf")) == idf
        assert "text_fts" in {index.name for index in table.list_indices()}
    table.checkout_latest()
    assert set(rows_by_key(table, "trm")) == new_trm


def crash_rows(count: int) -> list[dict[str, Any]]:
    return [
        make_row(
            text=f"Crash Test > Register {n}\n\nREG_{n}_CONF (0x{4 * n:04x}) holds setting number {n}.",
            doc_type="trm",
            chips=["esp32c3"],
            source_doc="Crash Test",
            section_path=f"Crash Test > Register {n}",
            file_path="ESP32-C3/99-CRASH__EN",
            chunk_index=n,
            symbol_refs=[f"REG_{n}_CONF"],
        )
        for n in range(count)
    ]


CRASH_DRIVER = Path(__file__).parent / "store_crash_driver.py"


def driver_command(log: Path, chunks: Path, doc_type: str, tree: Path, db: Path) -> list[str]:
    """embed_and_store's CLI for a subprocess, with the cheap embedder that logs what it embeds."""
    store_args = ["--doc-type", doc_type, "--source-repo", str(tree), "--db", str(db)]
    return [sys.executable, str(CRASH_DRIVER), str(log), "--", str(chunks), *store_args]


def cached_hashes(db: Path) -> list[str]:
    if not (db / f"{CACHE_TABLE_NAME}.lance").exists():
        return []
    cache = lancedb.connect(str(db)).open_table(CACHE_TABLE_NAME)
    return cache.search().select(["content_hash"]).limit(None).to_arrow().column("content_hash").to_pylist()


def test_kill_9_mid_embedding_then_resume_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    total = 12 * EMBED_BATCH
    everything = crash_rows(total)
    old_corpus = tmp_path / "old.jsonl"
    write_jsonl(old_corpus, everything[: 2 * EMBED_BATCH])
    chunks = tmp_path / "crash.jsonl"
    write_jsonl(chunks, everything)
    db = tmp_path / "db"
    tree = pinned_tree(tmp_path / "src", TRM_COMMIT)
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    def driven(log: Path, chunk_file: Path) -> list[str]:
        return driver_command(log, chunk_file, "trm", tree, db)

    subprocess.run(driven(tmp_path / "old.log", old_corpus), check=True, capture_output=True, timeout=120)
    old_keys = set(rows_by_key(open_store(str(db)), "trm"))
    assert len(old_keys) == 2 * EMBED_BATCH

    process = subprocess.Popen(driven(first_log, chunks), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(cached_hashes(db)) < 5 * EMBED_BATCH:
        assert process.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline, "embedding never started"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL

    at_kill = cached_hashes(db)
    assert len(at_kill) == len(set(at_kill)) and len(at_kill) % EMBED_BATCH == 0  # whole batches only
    assert 2 * EMBED_BATCH < len(at_kill) < total
    # Readers still see the old corpus, whole.
    assert set(rows_by_key(open_store(str(db)), "trm")) == old_keys

    resumed = subprocess.run(driven(second_log, chunks), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"rows={total} embedded={total - len(at_kill)} cached={len(at_kill)}" in resumed.stdout
    embedded_again = set(second_log.read_text().split())
    assert not embedded_again & set(at_kill), "a cached text was embedded again"
    all_hashes = {row["content_hash"] for row in everything}
    assert embedded_again | set(at_kill) == all_hashes

    table = open_store(str(db))
    assert store_model_id(table) == "test-hash-embedder"
    assert set(rows_by_key(table, "trm")) == {row_key(row) for row in everything}
    assert sorted(cached_hashes(db)) == sorted(all_hashes)


def test_kill_9_during_the_replace_leaves_the_old_or_the_new_corpus(tmp_path: Path) -> None:
    """Kills swept across a run whose texts are all cached: start-up, merge, index, compaction."""
    everything = crash_rows(8 * EMBED_BATCH)
    old_rows, new_rows = everything[: 3 * EMBED_BATCH], everything[EMBED_BATCH:]
    old_file, new_file = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write_jsonl(old_file, old_rows)
    write_jsonl(new_file, new_rows)
    db = tmp_path / "db"
    tree = pinned_tree(tmp_path / "src", TRM_COMMIT)

    def driven(chunk_file: Path) -> list[str]:
        return driver_command(tmp_path / "embed.log", chunk_file, "trm", tree, db)

    subprocess.run(driven(old_file), check=True, capture_output=True, timeout=120)
    old_version = open_store(str(db)).version
    subprocess.run(driven(new_file), check=True, capture_output=True, timeout=120)  # fills the cache
    old_keys = {row_key(row) for row in old_rows}
    new_keys = {row_key(row) for row in new_rows}

    def back_to_old_corpus() -> None:
        table = open_store(str(db))
        table.restore(old_version)  # a new version whose content is the old corpus
        assert set(rows_by_key(table, "trm")) == old_keys

    back_to_old_corpus()
    started = time.monotonic()
    subprocess.run(driven(new_file), check=True, capture_output=True, timeout=120)
    run_seconds = time.monotonic() - started
    # The replace is the tail of the run; sweep the kill moment over its last ~0.8 s.
    for step in range(9):
        back_to_old_corpus()
        process = subprocess.Popen(driven(new_file), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(max(0.0, run_seconds - 0.8 + 0.1 * step))
        process.kill()  # SIGKILL; a no-op if the run already finished
        process.wait()
        state = set(rows_by_key(open_store(str(db)), "trm"))
        assert state in (old_keys, new_keys), f"killed {step}: readers would see a mix of corpora"
    finished = subprocess.run(driven(new_file), capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "embedded=0" in finished.stdout
    assert set(rows_by_key(open_store(str(db)), "trm")) == new_keys


def test_runs_for_different_doc_types_at_once_all_land(tmp_path: Path) -> None:
    """Concurrent commits conflict in Lance; the runs retry and every corpus ends up whole."""
    db = tmp_path / "db"
    tree = pinned_tree(tmp_path / "src", TRM_COMMIT)
    sizes = {"trm": 2 * EMBED_BATCH, "idf": 2 * EMBED_BATCH, "src": 3 * EMBED_BATCH}

    def driven(doc_type: str) -> list[str]:
        rows = [
            make_row(
                text=f"{doc_type} passage {n}",
                doc_type=doc_type,
                chips=["esp32c3"],
                source_doc="Concurrency",
                section_path="Concurrency",
                file_path=f"{doc_type}/{n}",
                chunk_index=n,
            )
            for n in range(sizes[doc_type])
        ]
        chunks = tmp_path / f"{doc_type}.jsonl"
        write_jsonl(chunks, rows)
        return driver_command(tmp_path / f"{doc_type}.log", chunks, doc_type, tree, db)

    subprocess.run(driven("src"), check=True, capture_output=True, timeout=120)  # the table exists
    sizes["src"] += EMBED_BATCH
    runs = [subprocess.Popen(driven(d), stdout=subprocess.PIPE, stderr=subprocess.PIPE) for d in sizes]
    for run_ in runs:
        _, err = run_.communicate(timeout=120)
        assert run_.returncode == 0, err.decode()
        assert b"Traceback" not in err
    table = open_store(str(db))
    assert {d: table.count_rows(f"doc_type = '{d}'") for d in sizes} == sizes


def test_open_store_refuses_an_empty_table(tmp_path: Path) -> None:
    db = tmp_path / "db"
    ensure_table(lancedb.connect(str(db)), str(db), "all-MiniLM-L6-v2", 384)  # a table, no rows yet
    with pytest.raises(StoreError, match=r"holds no chunks; build one with"):
        open_store(str(db))


def test_validate_store_passes_a_good_store_and_fails_a_corrupted_one(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    build_trm_and_idf(db, trees, embedder, capsys)
    assert validate_store.main(["--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "rows: 24 (idf 8, trm 16)" in out
    assert "model: all-MiniLM-L6-v2, 384-d vectors" in out
    assert "vector round trip: 24/24 at rank 1" in out
    assert "validate_store: PASS" in out

    # Shuffle the vectors against their rows, as a buggy writer would: the round trip must catch it.
    table = open_store(str(db))
    data = table.to_arrow()
    vectors = data.column("vector").to_pylist()
    shuffled = data.set_column(data.schema.get_field_index("vector"), "vector", [vectors[1:] + vectors[:1]])
    table.add(shuffled, mode="overwrite")
    assert validate_store.main(["--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] stored vectors are their text's embedding" in out
    assert "[FAIL] vector round trip" in out
    assert "validate_store: FAIL" in out

    assert validate_store.main(["--db", str(tmp_path / "none")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_window_texts_cover_a_long_chunk_past_its_first_read() -> None:
    words = [f"w{i}" for i in range(300)]
    text = "Guide > Sleep modes\n" + " ".join(words)
    windows = window_texts(text)
    step = WINDOW_WORDS - WINDOW_OVERLAP
    assert [w.split("\n", 1)[0] for w in windows] == ["Guide > Sleep modes"] * len(windows)
    assert windows[0].split("\n", 1)[1].split()[0] == f"w{step}", (
        "the first window starts after the first read"
    )
    assert windows[-1].split()[-1] == "w299", "the last word is in a window"
    assert window_texts("Guide > Short\n" + " ".join(words[:WINDOW_WORDS])) == []


def test_long_idf_chunk_is_found_by_a_late_window_and_old_stores_migrate(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    filler = " ".join(["The heap allocator keeps free blocks in lists sorted by size."] * 30)
    late = "To keep a variable across deep sleep, place it in RTC memory with RTC_DATA_ATTR."
    row = make_row(
        text=f"Sleep Modes > Overview\n{filler} {late}",
        doc_type="idf",
        chips=["esp32c3"],
        source_doc="Sleep Modes",
        section_path="Sleep Modes > Overview",
        file_path="api-reference/system/sleep_modes",
        chunk_index=0,
        symbol_refs=["RTC_DATA_ATTR"],
        releases=["v6.1-dev"],
        release_sources=[f"v6.1-dev@{IDF_COMMIT}"],
        source_version="v6.1-dev",
        source_commit=IDF_COMMIT,
    )
    chunks = write_rows(tmp_path / "idf.jsonl", [row])
    db = tmp_path / "db"
    # A store from before window vectors: build it, then drop the column as an old build had it.
    assert run(capsys, embedder, chunks, "idf", trees["idf"], db)[0] == 0
    table = open_store(str(db))
    table.drop_columns([WINDOWS_COLUMN])
    assert WINDOWS_COLUMN not in open_store(str(db)).schema.names

    code, out, _ = run(capsys, embedder, chunks, "idf", trees["idf"], db)
    assert code == 0 and "~1" in out, "the migrated row gains its windows: rewritten, not unchanged"
    table = open_store(str(db))
    (stored,) = table.search().select(["vector", WINDOWS_COLUMN]).limit(None).to_list()
    assert len(stored[WINDOWS_COLUMN]) == 1 + len(window_texts(row["text"])) > 2
    assert np.allclose(stored[WINDOWS_COLUMN][0], stored["vector"])
    query = embedder.embed_query("how to keep a variable across deep sleep")
    best_window = max(float(np.dot(query, w)) for w in stored[WINDOWS_COLUMN])
    assert best_window > float(np.dot(query, stored["vector"])) + 0.1, "the late window matches better"
    assert validate_store.main(["--db", str(db), "--sample", "1"]) == 0


def one_idf_and_one_trm_row() -> tuple[dict[str, Any], dict[str, Any]]:
    """An ESP-IDF v5.5.5 row and a manual row of one chip: the two shapes a migration must tell apart."""
    common = {"chips": ["esp32c3"], "source_doc": "Doc", "section_path": "Doc", "chunk_index": 0}
    idf = make_row(
        text="Doc\nThe UART driver.",
        doc_type="idf",
        file_path="api-reference/uart",
        releases=["v5.5"],
        release_sources=[f"v5.5.5@{IDF_COMMIT}"],
        source_version="v5.5.5",
        source_commit=IDF_COMMIT,
        **common,
    )
    trm = make_row(
        text="Doc\nUART registers.",
        doc_type="trm",
        file_path="ESP32-C3/uart",
        source_version="805f2ea20bba",
        source_commit=IDF_COMMIT,
        **common,
    )
    return idf, trm


def test_a_store_from_before_the_release_axis_gains_the_release_columns(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    idf, trm = one_idf_and_one_trm_row()
    db = tmp_path / "db"
    for row, doc_type in ((idf, "idf"), (trm, "trm")):
        chunks = write_rows(tmp_path / f"{doc_type}.jsonl", [row])
        assert run(capsys, embedder, chunks, doc_type, trees["idf"], db)[0] == 0
    open_store(str(db)).drop_columns(["releases", "release_sources"])  # as a pre-axis build had it

    # writing any corpus migrates the whole table in one commit: idf rows from their provenance
    assert run(capsys, embedder, write_rows(tmp_path / "t.jsonl", [trm]), "trm", trees["idf"], db)[0] == 0
    stored = open_store(str(db)).search().select(["doc_type", "releases", "release_sources"]).to_list()
    by_type = {row["doc_type"]: row for row in stored}
    assert by_type["idf"]["releases"] == ["v5.5"]
    assert by_type["idf"]["release_sources"] == [f"v5.5.5@{IDF_COMMIT}"]
    assert by_type["trm"]["releases"] == [] and by_type["trm"]["release_sources"] == []


def test_a_store_without_release_chips_is_refused_until_every_corpus_is_embedded_again(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without release_chips a release filter with a chip cannot tell the builds a row came from:
    the server refuses the store until each corpus's rows are written with the column."""
    idf, trm = one_idf_and_one_trm_row()
    db = tmp_path / "db"
    chunks = {
        doc_type: write_rows(tmp_path / f"{doc_type}.jsonl", [row])
        for doc_type, row in (("idf", idf), ("trm", trm))
    }
    for doc_type, path in chunks.items():
        assert run(capsys, embedder, path, doc_type, trees["idf"], db)[0] == 0
    open_store(str(db)).drop_columns(["release_chips"])  # as a build from before the column had it
    with pytest.raises(StoreError, match=r"predates the \(release, chip\) builds.*just rebuild"):
        open_store(str(db))
    assert run(capsys, embedder, chunks["trm"], "trm", trees["idf"], db)[0] == 0
    with pytest.raises(StoreError, match="predates the"):
        open_store(str(db))  # the idf rows still lack it
    assert run(capsys, embedder, chunks["idf"], "idf", trees["idf"], db)[0] == 0
    stored = open_store(str(db)).search().select(["doc_type", "release_chips"]).to_list()
    assert {row["doc_type"]: row["release_chips"] for row in stored} == {"idf": ["v5.5:esp32c3"], "trm": []}


def test_a_store_from_before_upstream_links_is_refused_until_an_embed_adds_the_column(
    tmp_path: Path, trees: dict[str, Path], embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    trm = make_row(
        text="Doc\nUART registers.",
        doc_type="trm",
        chips=["esp32c3"],
        source_doc="Doc",
        section_path="Doc",
        file_path="ESP32-C3/uart",
        chunk_index=0,
        doc_refs=["register:UART_CONF0_REG"],
        source_version="805f2ea20bba",
        source_commit=IDF_COMMIT,
        url="https://example.invalid/ESP32-C3/uart.tex",
    )
    db = tmp_path / "db"
    chunks = write_rows(tmp_path / "trm.jsonl", [trm])
    assert run(capsys, embedder, chunks, "trm", trees["idf"], db)[0] == 0
    open_store(str(db)).drop_columns(["url"])  # as a build from before upstream links had it
    with pytest.raises(StoreError, match="predates follow-up references"):
        open_store(str(db))
    assert run(capsys, embedder, chunks, "trm", trees["idf"], db)[0] == 0
    (stored,) = open_store(str(db)).search().select(["url", "doc_refs"]).to_list()
    assert stored == {"url": trm["url"], "doc_refs": ["register:UART_CONF0_REG"]}


def test_struct_header_rows_are_embedded_by_their_lead_only() -> None:
    members = " ".join(f"uint32_t field_{i} : 1;" for i in range(200))
    row = {"doc_type": "src", "file_path": "components/soc/esp32c3/register/soc/uart_struct.h"}
    texts = embedding_texts(
        {**row, "text": f"components/soc/esp32c3/register/soc/uart_struct.h\n\n{members}"}
    )
    assert len(texts) == 1 and len(texts[0].split()) == LEAD_WORDS
    caps = {"doc_type": "src", "file_path": "components/soc/esp32c3/include/soc/soc_caps.h", "text": members}
    assert embedding_texts(caps) == [members], "other headers are embedded whole"
    guide = {"doc_type": "idf", "file_path": "api-guides/x", "text": "Guide\n" + members}
    assert embedding_texts(guide) == [guide["text"], *window_texts(guide["text"])]


def test_register_blocks_get_windows_over_their_later_fields_led_by_name_and_summary() -> None:
    fields = "\n".join(
        f"- UART_F{i} [{i}] (R/W) reset 0x0: Field {i} of the configuration." for i in range(40)
    )
    text = (
        "UART > Registers\n\nRegister UART_CONF0_REG\nAddress: 0x0020\nReset value: 0x1000001C\n"
        f"Summary: Configuration register 0\nFields:\n{fields}"
    )
    texts = embedding_texts({"doc_type": "trm", "file_path": "ESP32-C3/10-UART__EN", "text": text})
    windows = [w for w in texts[1:] if w.startswith("UART > Registers\n\n")]
    assert texts[0] == text and len(windows) > 1
    assert all(
        w.startswith("UART > Registers\n\nRegister UART_CONF0_REG\nSummary: Configuration register 0\n")
        for w in windows
    )
    assert "UART_F39" in windows[-1], "the last field is in a window"
    assert len(texts) == 1 + len(windows) + 40, "then one text per field"
    prose = {"doc_type": "trm", "file_path": "ESP32-C3/10-UART__EN", "text": "UART > Overview\n" + fields}
    assert embedding_texts(prose) == [prose["text"]], "TRM prose is not windowed"


def test_register_blocks_get_one_text_per_described_field() -> None:
    text = (
        "I2C Controller (I2C) > Registers\n\nRegister I2C_CTR_REG\nAddress: 0x0004\nReset value: 0x0000020B\n"
        "Summary: Transmission configuration register\nFields:\n"
        "- (reserved) [31:15] reset 0x0\n"
        "- I2C_CONF_UPGATE [11] (WT) reset 0x0\n"
        "- I2C_MS_MODE [4] (R/W) reset 0x0: Set this bit to configure the I2C controller as an I2C Master.\n"
        "- I2C_SDA_FORCE_OUT [0] (R/W) reset 0x1: Configures the SDA output mode."
    )
    texts = embedding_texts({"doc_type": "trm", "file_path": "ESP32-C3/01-I2C__EN", "text": text})
    lead = "I2C Controller (I2C) register I2C_CTR_REG: Transmission configuration register\n"
    assert texts == [
        text,
        lead + "Field I2C_MS_MODE: Set this bit to configure the I2C controller as an I2C Master.",
        lead + "Field I2C_SDA_FORCE_OUT: Configures the SDA output mode.",
    ], "reserved bits and a field without a description get none; a bare line never takes the next's"
