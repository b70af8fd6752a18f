"""add_release.py's choices and errors, run for real up to rebuild.py's source check (no network:
`--offline` with no checkout makes rebuild.py stop before any build, after add_release has chosen
the release and chips and printed the rebuild command)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

import add_release
from add_release import StoreSize, added_chunk_files, growth_lines
from rebuild import idf_chunk_file, src_chunk_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def pins_file(tmp_path: Path) -> Path:
    releases = {
        "master": {"commit": "1" * 40, "describe": "v9.9-dev-5-g1111111", "targets": ["esp32", "esp32c3"]},
        "v9.8.3": {"commit": "2" * 40, "describe": "v9.8.3", "targets": ["esp32", "esp32c3", "esp32s3"]},
        "v8.1.2": {"commit": "3" * 40, "describe": "v8.1.2", "targets": ["esp32"]},
    }
    path = tmp_path / "sources.yaml"
    document = {
        "trm": {"url": "https://example.invalid/trm", "commit": "7" * 40},
        "idf": {"url": "https://example.invalid/esp-idf", "releases": releases},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run(pins_file: Path, tmp_path: Path, *args: str) -> int:
    trm = tmp_path / "trm"
    if not trm.exists():
        shutil.copytree(FIXTURES / "trm", trm)
        (trm / "SOURCE.md").write_text(f"- Commit: {'7' * 40}\n")
    return add_release.main(
        [
            *args,
            "--sources",
            str(pins_file),
            "--work-dir",
            str(tmp_path / "work"),
            "--db",
            str(tmp_path / "store.lancedb"),
            "--offline",
            "--trm-path",
            str(trm),
        ]
    )


def test_an_unpinned_tag_lists_the_pinned_releases_and_how_to_pin_one(
    pins_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(pins_file, tmp_path, "v7.0.1", "--chips", "esp32") == 2
    err = capsys.readouterr().err
    assert "ESP-IDF 'v7.0.1' is not pinned; pinned releases: master (v9.9-dev-5-g1111111), v9.8.3" in err
    assert "under idf.releases: commit (`git rev-parse TAG^{commit}`), describe (the tag)" in err


def test_a_chip_the_release_has_no_docs_for_names_its_targets(
    pins_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(pins_file, tmp_path, "8.1.2", "--chips", "esp32c3") == 2
    assert "ESP-IDF v8.1.2 has no docs target esp32c3; its targets: esp32" in capsys.readouterr().err


def test_without_chips_and_without_a_project_the_choice_is_asked_for(
    pins_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(pins_file, tmp_path, "v9.8", "--project-dir", str(empty)) == 2
    assert "pass --chips, one or more of: esp32, esp32c3, esp32s3" in capsys.readouterr().err


def test_the_projects_chip_is_added_beside_everything_the_store_holds(
    pins_file: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    stamps = tmp_path / "work" / "stamps"
    stamps.mkdir(parents=True)
    for name, params in {
        "ingest-idf--master--esp32": {"release": "master", "chip": "esp32"},
        "ingest-idf--master--esp32c3": {"release": "master", "chip": "esp32c3"},
        "ingest-src--master": {"release": "master"},
        "ingest-trm": {"commit": "7" * 40},
    }.items():
        (stamps / f"{name}.json").write_text(json.dumps({"stage": name, "parts": {"params": params}}))
    code = run(pins_file, tmp_path, "v9.8", "--project-dir", str(FIXTURES / "projects" / "esp32c3"))
    out, err = capfd.readouterr()
    assert code == 2  # rebuild.py stops at the missing checkouts, before building anything
    assert "--releases master,v9.8.3 --chips master:esp32,master:esp32c3,v9.8.3:esp32c3" in out
    assert "no checkout of ESP-IDF" in err


def test_growth_reports_rows_disk_and_the_share_dedup_folded() -> None:
    before = StoreSize({"idf": 1000, "src": 500, "trm": 10}, 3 * 2**20)
    after = StoreSize({"idf": 1300, "src": 600, "trm": 10}, 5 * 2**20)
    lines = growth_lines("v9.8.3", before, after, new_chunks=2000)
    assert (
        lines[0]
        == "store growth for v9.8.3: rows and vectors idf 1,000 -> 1,300 (+300), src 500 -> 600 (+100)"
    )
    assert lines[1] == "disk 3.0 MiB -> 5.0 MiB (+2.0 MiB)"
    assert (
        lines[2]
        == "dedup: 2,000 chunks of v9.8.3 became 400 new rows (80.0% folded into rows the store held)"
    )


def test_the_folded_share_counts_only_what_the_run_adds(tmp_path: Path) -> None:
    """Adding a chip to a release the store holds adds that chip's docs, not the release's headers
    or its other chips' docs again; a release new to the store adds its headers too."""
    held = {"master": {"esp32"}, "v9.8.3": {"esp32"}}
    files = added_chunk_files(tmp_path, "v9.8.3", held, {"esp32", "esp32s3"})
    assert files == [idf_chunk_file(tmp_path, "v9.8.3", "esp32s3")]
    files = added_chunk_files(tmp_path, "v9.7.1", held, {"esp32"})
    assert files == [src_chunk_file(tmp_path, "v9.7.1"), idf_chunk_file(tmp_path, "v9.7.1", "esp32")]
