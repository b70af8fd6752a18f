"""Bundles on local disk: pack, verify, install; every refusal names its check and leaves the store alone.

Real LanceDB stores built from the fixture rows, the real embedder, validate_store.py and the real
server over stdio; nothing is mocked. Faults are made by editing real bundle files (cut short, a byte
flipped, the manifest's embedder rewritten).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from test_mcp_server import connected
from test_search import FIXTURES, build_fixture_store

import bundle
from embedder import sha256_file
from search import open_engine
from store import open_store

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = FIXTURES / "queries.jsonl"


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """The fixture store, and a bundle of a copy of it scored on the fixture questions."""
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    out = tmp_path_factory.mktemp("bundle") / "fixture.bundle.tar"
    manifest = bundle.pack(str(store), out, QUESTIONS)
    return store, out, manifest


def tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def rewritten(source: Path, target: Path, edit_manifest=None, drop: str | None = None) -> Path:
    """A copy of a bundle with its manifest edited or one member left out."""
    with tarfile.open(source) as old, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as new:
        for member in old:
            data = old.extractfile(member).read()
            if member.name == bundle.MANIFEST_NAME and edit_manifest is not None:
                manifest = json.loads(data)
                edit_manifest(manifest)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            if member.name == drop:
                continue
            new.addfile(member, bundle._BytesReader(data))
    return target


def test_the_manifest_records_what_the_store_holds(packed: tuple[Path, Path, dict]) -> None:
    store, out, manifest = packed
    table = open_store(str(store))
    assert sum(manifest["rows"].values()) == table.count_rows()
    assert set(manifest["rows"]) == {"idf", "src", "trm"}
    assert all(manifest["vectors"][doc] >= manifest["rows"][doc] for doc in manifest["rows"])
    assert "esp32c3" in manifest["chips"] and manifest["releases"]
    assert manifest["embedder"]["model_id"] == "all-MiniLM-L6-v2" and len(manifest["embedder"]["files"]) == 3
    assert manifest["project"]["version"] and manifest["sources"]["idf"]
    figures = manifest["dev_figures"]
    assert figures["cases"] > 0 and 0 < figures["by_category"]["OVERALL"]["mrr@10"] <= 1
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert names[0] == bundle.MANIFEST_NAME and sorted(names[1:]) == sorted(manifest["files"])
    tables = (f"{bundle.STORE_DIR}/chunks.lance/", f"{bundle.STORE_DIR}/term_stats.lance/")
    assert all(name.startswith(tables) for name in manifest["files"])
    assert any(name.startswith(tables[1]) for name in manifest["files"]), "the term statistics travel along"


def test_an_installed_bundle_answers_like_its_source_and_shows_its_manifest(
    packed: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    store, out, manifest = packed
    target = tmp_path / "installed.lancedb"
    placed = bundle.install(out, str(target), QUESTIONS)  # re-scores: the figures must match
    assert "new directory" in placed
    source, installed = open_engine(str(store)), open_engine(str(target))
    for line in QUESTIONS.read_text().splitlines():
        case = json.loads(line)
        ours = installed.search(case["query"], k=5, **case["filters"])["results"]
        theirs = source.search(case["query"], k=5, **case["filters"])["results"]
        assert [(r["file_path"], r["chunk_index"]) for r in ours] == [
            (r["file_path"], r["chunk_index"]) for r in theirs
        ]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(target)])) as session,
    ):
        listing = portal.call(session.call_tool, "esp32_docs_list_chips", {}).structured_content
    shown = listing["bundle"]
    assert shown["rows"] == manifest["rows"] and shown["file_count"] == len(manifest["files"])
    assert shown["dev_figures"] == manifest["dev_figures"] and "note" not in shown

    again = bundle.install(out, str(target), None)  # over an existing store: one commit
    assert "one commit" in again and open_store(str(target)).count_rows() == sum(manifest["rows"].values())


@pytest.mark.parametrize("fault", ["truncated", "tampered", "missing file", "embedder"])
def test_a_bad_bundle_is_refused_naming_the_check_and_the_store_is_untouched(
    packed: tuple[Path, Path, dict], tmp_path: Path, fault: str
) -> None:
    store, out, manifest = packed
    target = tmp_path / "served.lancedb"
    shutil.copytree(store, target)
    before = tree_hashes(target)
    bad = tmp_path / "bad.bundle.tar"
    if fault == "truncated":
        bad.write_bytes(out.read_bytes()[: out.stat().st_size // 2])
        expected = ["check 'archive' failed", "truncated"]
    elif fault == "tampered":
        data = bytearray(out.read_bytes())
        with tarfile.open(out) as tar:
            member = next(m for m in tar if m.name.endswith(".lance") and "/data/" in m.name)
        data[member.offset_data + member.size // 2] ^= 0xFF
        bad.write_bytes(bytes(data))
        expected = ["check 'sha256' failed", member.name]
    elif fault == "missing file":
        dropped = sorted(manifest["files"])[0]
        rewritten(out, bad, drop=dropped)
        expected = ["check 'file list' failed", dropped]
    else:

        def other_weights(m: dict) -> None:
            m["embedder"]["files"]["model.safetensors"] = "0" * 64

        rewritten(out, bad, edit_manifest=other_weights)
        here = manifest["embedder"]["files"]["model.safetensors"][:12]
        expected = ["check 'embedder' failed", "model.safetensors=000000000000", f"model.safetensors={here}"]
    done = subprocess.run(
        [sys.executable, "bundle.py", "install", str(bad), "--db", str(target)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "bundle: refused:" in done.stderr and "Traceback" not in done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr
    assert tree_hashes(target) == before
    assert not list(tmp_path.glob(".install-*")), "the staging directory was left behind"
