"""Chip vocabulary, chunk schema and provenance: the contracts every stage relies on."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chip_vocab
from provenance import source_provenance
from schema import arrow_schema, make_row, read_jsonl, validate_row, write_jsonl


def test_vocabulary_has_the_thirteen_soc_targets_and_their_manuals() -> None:
    ids = chip_vocab.chip_ids()
    assert len(ids) == 13
    assert {"esp32", "esp32c2", "esp32p4", "esp32s31", "esp32h4"} <= set(ids)
    assert chip_vocab.normalize_chip("ESP8684") == "esp32c2"
    assert chip_vocab.normalize_chip("ESP32-C3") == "esp32c3"
    assert chip_vocab.normalize_chip("esp32_c61") == "esp32c61"
    assert chip_vocab.normalize_chip("esp8266") is None
    assert len(chip_vocab.trm_chips()) == 10
    assert chip_vocab.chips()["esp32p4"].revisions == ("mainline", "v1.3")
    built = [c.id for c in chip_vocab.chips().values() if c.docs_built]
    assert sorted(built) == sorted(
        ["esp32", "esp32s2", "esp32s3", "esp32s31", "esp32c3", "esp32c2", "esp32c5", "esp32c6", "esp32p4"]
    )


def test_validation_errors_name_the_valid_values() -> None:
    with pytest.raises(ValueError, match=r"unknown chip 'esp8266'; valid chips: esp32, esp32s2"):
        chip_vocab.validate_chip("esp8266")
    with pytest.raises(ValueError, match="valid doc_types: idf, trm, src"):
        chip_vocab.validate_doc_type("pdf")
    with pytest.raises(ValueError, match=r"valid revisions: mainline$"):
        chip_vocab.validate_revision("v1.3", chip="esp32c3")
    assert chip_vocab.validate_revision("v1.3", chip="ESP32-P4") == "v1.3"


def row(**overrides: Any) -> dict[str, Any]:
    """A valid trm row, with ``overrides`` applied before make_row validates it."""
    base = dict(
        text="UART > Registers\n\nRegister UART_FIFO_REG\nAddress: 0x0000",
        doc_type="trm",
        chips=["esp32c3"],
        source_doc="UART Controller",
        section_path="UART > Registers",
        file_path="ESP32-C3/26-UART__EN",
        chunk_index=0,
        symbol_refs=["UART_FIFO_REG", "UART_FIFO_REG"],
    )
    base.update(overrides)
    return make_row(**base)


def test_make_row_deduplicates_lists_and_hashes_text() -> None:
    r = row()
    assert r["symbol_refs"] == ["UART_FIFO_REG"]
    assert len(r["content_hash"]) == 64
    assert r["revisions"] == [] and r["source_commit"] == "unknown"
    assert row()["content_hash"] == r["content_hash"] != row(text="other")["content_hash"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"doc_type": "pdf"}, "doc_type 'pdf'"),
        ({"chips": []}, "'chips' is empty"),
        ({"chips": ["esp8266"]}, "unknown chips"),
        ({"revisions": ["v1.3"]}, "revision 'v1.3' is not published"),
        ({"text": "  "}, "'text' is empty"),
        ({"chunk_index": -1}, "chunk_index"),
    ],
)
def test_invalid_rows_are_rejected_with_the_field_named(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        row(**overrides)


def test_validate_row_reports_missing_fields() -> None:
    broken = row()
    del broken["file_path"]
    with pytest.raises(ValueError, match="lacks fields: file_path"):
        validate_row(broken)


def test_arrow_schema_takes_its_vector_width_from_the_model() -> None:
    assert arrow_schema(384).field("vector").type.list_size == 384
    assert arrow_schema(1024).field("vector").type.list_size == 1024


def test_jsonl_round_trip_is_atomic_and_names_bad_lines(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "rows.jsonl"
    assert write_jsonl(out, [row(), row(chunk_index=1)]) == 2
    assert [r["chunk_index"] for r in read_jsonl(out)] == [0, 1]
    assert list(out.parent.iterdir()) == [out]  # no temp file left behind

    def exploding() -> Iterator[dict[str, Any]]:
        yield row()
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_jsonl(out, exploding())
    assert len(list(read_jsonl(out))) == 2  # the old file survives an interrupted write

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row()) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        list(read_jsonl(bad))


def test_provenance_of_a_checkout_a_pinned_copy_and_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    subprocess.run([*git, "tag", "v1.0"], check=True)
    clean = source_provenance(repo)
    assert clean.version == "v1.0" and len(clean.commit) == 40
    (repo / "a.txt").write_text("changed")
    assert source_provenance(repo).version == "v1.0-dirty"

    pinned = tmp_path / "pinned"
    pinned.mkdir()
    (pinned / "SOURCE.md").write_text("- Commit: 805f2ea20bbaa7670803b3b512ab611640fdf9a9 (2026-08-21)\n")
    assert source_provenance(pinned).commit == "805f2ea20bbaa7670803b3b512ab611640fdf9a9"

    plain = tmp_path / "plain"
    plain.mkdir()
    assert source_provenance(plain).commit == "unknown"
    assert source_provenance(tmp_path / "absent").version == "unknown"
