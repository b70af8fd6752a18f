"""dedup_chunks.py: exact cross-chip collapse, chips merged in vocabulary order, indexes renumbered."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import dedup_chunks
import ingest_sphinx_xml
from chip_vocab import chip_ids
from provenance import Provenance
from schema import content_hash, make_row, read_jsonl, validate_row, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "idf"
PROVENANCE = Provenance("v6.1-dev-6734-g102122904ad", "102122904ade11fd1ae373848f34ffd7dfb18aeb")


def _chip_file(tmp_path: Path, chip: str, max_words: int = 60) -> tuple[Path, list[dict[str, Any]]]:
    """The fixture build of ``chip`` ingested with a small budget, so a page spans several chunks."""
    rows = ingest_sphinx_xml.ingest(
        FIXTURES / chip, chip, PROVENANCE, max_words=max_words, progress=False
    ).rows
    path = tmp_path / f"chunks_{chip}.jsonl"
    write_jsonl(path, rows)
    return path, rows


def _row(text: str, chip: str, index: int, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "text": text,
        "doc_type": "idf",
        "chips": [chip],
        "source_doc": "Page",
        "section_path": "Page",
        "file_path": "page",
        "chunk_index": index,
    }
    fields.update(overrides)
    return make_row(**fields)


def test_identical_chunks_collapse_and_chip_specific_ones_stay_apart(tmp_path: Path) -> None:
    c3_file, c3_rows = _chip_file(tmp_path, "esp32c3")
    esp32_file, esp32_rows = _chip_file(tmp_path, "esp32")
    result = dedup_chunks.dedup([c3_file, esp32_file])  # esp32c3 first on purpose
    assert result.chunks_in == len(c3_rows) + len(esp32_rows)
    shared = {(r["file_path"], r["text"]) for r in c3_rows} & {
        (r["file_path"], r["text"]) for r in esp32_rows
    }
    assert shared, "the fixture builds share most of their text"
    assert len(result.rows) == result.chunks_in - len(shared)
    assert result.collapse_rate == pytest.approx(len(shared) / result.chunks_in)
    for row in result.rows:
        validate_row(row)
        assert row["content_hash"] == content_hash(row["text"])
        if (row["file_path"], row["text"]) in shared:
            assert row["chips"] == ["esp32", "esp32c3"]  # chips.yaml order, not input order
        else:
            assert len(row["chips"]) == 1
    boot = {
        chip
        for row in result.rows
        for chip in row["chips"]
        if "located at the address 0x0 in the flash" in row["text"]
    }
    assert boot == {"esp32c3"}
    assert [r["chips"] for r in result.rows if "address 0x1000 in the flash" in r["text"]] == [["esp32"]]
    assert [r["chips"] for r in result.rows if "dual-core chip" in r["text"]] == [["esp32"]]


def test_chunk_index_is_a_document_order_that_keeps_each_chips_order(tmp_path: Path) -> None:
    c3_file, c3_rows = _chip_file(tmp_path, "esp32c3")
    esp32_file, esp32_rows = _chip_file(tmp_path, "esp32")
    result = dedup_chunks.dedup([c3_file, esp32_file])
    merged: dict[str, list[str]] = defaultdict(list)
    for row in sorted(result.rows, key=lambda r: (r["file_path"], r["chunk_index"])):
        merged[row["file_path"]].append(row["text"])
    for file_path, texts in merged.items():
        indexes = [r["chunk_index"] for r in result.rows if r["file_path"] == file_path]
        assert sorted(indexes) == list(range(len(texts)))
        for rows in (c3_rows, esp32_rows):
            own = [
                r["text"] for r in sorted(rows, key=lambda r: r["chunk_index"]) if r["file_path"] == file_path
            ]
            positions = [texts.index(text) for text in own]
            assert positions == sorted(positions), f"{file_path} reorders a chip's chunks"


def test_document_order_places_a_chips_own_chunk_after_its_predecessor() -> None:
    a, b, c, x, y, z = (("p", t) for t in "abcxyz")
    assert dedup_chunks._document_order([[a, b, c], [z, a, x, c, y]]) == [z, a, x, b, c, y]


def test_refs_are_united_and_conflicting_provenance_is_refused(tmp_path: Path) -> None:
    first, second, third = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_jsonl(first, [_row("Page\n\nSame text.", "esp32c3", 0, symbol_refs=["A"])])
    write_jsonl(second, [_row("Page\n\nSame text.", "esp32", 0, symbol_refs=["B", "A"])])
    result = dedup_chunks.dedup([first, second])
    assert [(r["chips"], r["symbol_refs"]) for r in result.rows] == [(["esp32", "esp32c3"], ["A", "B"])]
    write_jsonl(third, [_row("Page\n\nSame text.", "esp32p4", 0, source_commit="f" * 40)])
    with pytest.raises(ValueError, match="different source_commit"):
        dedup_chunks.dedup([first, third])


def test_cli_reports_counts_and_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c3_file, _ = _chip_file(tmp_path, "esp32c3")
    esp32_file, _ = _chip_file(tmp_path, "esp32")
    out = tmp_path / "idf_chunks.jsonl"
    assert dedup_chunks.main([str(c3_file), str(esp32_file), "--out-path", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    rows = list(read_jsonl(out))
    assert f"-> {len(rows)} rows out" in line and "collapse rate" in line and "chunks in from 2 files" in line
    assert {c for r in rows for c in r["chips"]} <= set(chip_ids())

    assert dedup_chunks.main([str(tmp_path / "missing.jsonl"), "--out-path", str(out)]) == 2
    assert "no such chunk file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "chips": ["esp32x9"]}) + "\n")
    assert dedup_chunks.main([str(bad), "--out-path", str(tmp_path / "x.jsonl")]) == 2
    assert "esp32x9" in capsys.readouterr().err
    assert dedup_chunks.main([str(c3_file), "--out-path", str(c3_file)]) == 2
    assert "is also an input" in capsys.readouterr().err


V55 = ("v5.5", "v5.5.5@" + "5" * 40)
V61 = ("v6.1-dev", "v6.1-dev-6734-g102122904ad@" + "6" * 40)


def _released(text: str, chip: str, index: int, release: tuple[str, str]) -> dict[str, Any]:
    version, commit = release[1].split("@")
    return _row(
        text,
        chip,
        index,
        releases=[release[0]],
        release_sources=[release[1]],
        source_version=version,
        source_commit=commit,
    )


def test_identical_chunks_of_two_releases_become_one_row_naming_both(tmp_path: Path) -> None:
    old = tmp_path / "chunks_v5.5_esp32.jsonl"
    new = tmp_path / "chunks_v6.1-dev_esp32.jsonl"
    write_jsonl(old, [_released("Intro", "esp32", 0, V55), _released("adc1_get_raw reads", "esp32", 1, V55)])
    write_jsonl(
        new, [_released("Intro", "esp32", 0, V61), _released("adc_oneshot_read reads", "esp32", 1, V61)]
    )
    result = dedup_chunks.dedup([old, new])
    by_text = {row["text"]: row for row in result.rows}
    shared = by_text["Intro"]
    # newest first, each release with its exact build; the row cites the newest
    assert shared["releases"] == ["v6.1-dev", "v5.5"]
    assert shared["release_sources"] == [V61[1], V55[1]]
    assert (shared["source_version"], shared["source_commit"]) == tuple(V61[1].split("@"))
    assert by_text["adc1_get_raw reads"]["releases"] == ["v5.5"]
    assert by_text["adc_oneshot_read reads"]["releases"] == ["v6.1-dev"]
    assert result.release_summary() == "v5.5: 2 rows, 1 only in it; v6.1-dev: 2 rows, 1 only in it"
    for row in result.rows:
        validate_row(row)


def test_a_folded_row_names_the_release_chip_builds_it_came_from(tmp_path: Path) -> None:
    """Chips and releases are united separately, so only release_chips can say that v5.5 was built
    for esp32 alone: the folded row must not claim v5.5 for esp32c3."""
    files = []
    for name, chip, release in (("a", "esp32", V61), ("b", "esp32c3", V61), ("c", "esp32", V55)):
        files.append(tmp_path / f"{name}.jsonl")
        write_jsonl(files[-1], [_released("Intro", chip, 0, release)])
    (row,) = dedup_chunks.dedup(files).rows
    assert row["chips"] == ["esp32", "esp32c3"] and row["releases"] == ["v6.1-dev", "v5.5"]
    assert row["release_chips"] == ["v6.1-dev:esp32", "v6.1-dev:esp32c3", "v5.5:esp32"]
    validate_row(row)


def test_rows_whose_release_chips_disagree_with_their_lists_are_refused() -> None:
    row = _released("Intro", "esp32", 0, V55)
    for pairs, message in (
        (["v5.5:esp32c3"], "name a release or chip the row does not list"),
        (["v6.1-dev:esp32"], "name a release or chip the row does not list"),
        ([], "listed without a build"),
    ):
        with pytest.raises(ValueError, match=message):
            validate_row({**row, "release_chips": pairs})
    manual = _row("Intro", "esp32", 0, doc_type="trm")
    with pytest.raises(ValueError, match="on a row that lists no release"):
        validate_row({**manual, "release_chips": ["v5.5:esp32"]})
    with pytest.raises(ValueError, match=r"lacks fields: release_chips.*re-run the ingests"):
        validate_row({k: v for k, v in row.items() if k != "release_chips"})


def test_two_builds_of_one_release_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = ("v5.5", "v5.5.4@" + "4" * 40)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(first, [_released("Intro", "esp32", 0, V55)])
    write_jsonl(second, [_released("Intro", "esp32c3", 0, other)])
    assert dedup_chunks.main([str(first), str(second), "--out-path", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "release v5.5 comes from several builds" in err and "v5.5.4@" in err and "v5.5.5@" in err
