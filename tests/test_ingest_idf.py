"""ingest_sphinx_xml end to end: fixture builds, bad input, checkers that fail on broken input, and
(with IDF_XML_PATH) a real chip's build, (with IDF_VERSIONS_PATH) real builds of other releases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

import ingest_sphinx_xml
import rebuild
from chip_vocab import chip_ids
from dedup_chunks import dedup
from provenance import Provenance
from releases import release_series
from schema import content_hash, read_jsonl, validate_row, write_jsonl
from sphinx_xml import doc_path_for

FIXTURES = Path(__file__).parent / "fixtures" / "idf"
COMMIT = "102122904ade11fd1ae373848f34ffd7dfb18aeb"
VERSION = "v6.1-dev-6734-g102122904ad"


def _run(xml_dir: Path, out: Path, *extra: str) -> int:
    return ingest_sphinx_xml.main([str(xml_dir), "--out-path", str(out), "--no-progress", *extra])


def _rows(xml_dir: Path, chip: str = "esp32c3") -> list[dict[str, Any]]:
    return ingest_sphinx_xml.ingest(xml_dir, chip, Provenance(VERSION, COMMIT), progress=False).rows


def _copy_fixture(tmp_path: Path, chip: str = "esp32c3") -> Path:
    target = tmp_path / chip
    shutil.copytree(FIXTURES / chip, target)
    shutil.copy(FIXTURES / "SOURCE.md", target)
    return target


def test_fixture_build_gives_valid_idf_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chunks.jsonl"
    assert _run(FIXTURES / "esp32c3", out, "--chip", "ESP32-C3") == 0
    rows = list(read_jsonl(out))
    by_file: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        validate_row(row)
        assert row["doc_type"] == "idf" and row["chips"] == ["esp32c3"] and row["revisions"] == []
        assert (row["source_version"], row["source_commit"]) == (VERSION, COMMIT)
        assert row["text"].startswith(row["section_path"] + "\n\n")
        assert row["section_path"].split(" > ")[0] == row["source_doc"]
        by_file[row["file_path"]].append(row["chunk_index"])
    assert set(by_file) == {
        "api-guides/bootloader",
        "api-reference/kconfig-reference",
        "api-reference/peripherals/gpio",
    }
    assert all(indexes == list(range(len(indexes))) for indexes in by_file.values())
    gpio = next(r for r in rows if r["file_path"] == "api-reference/peripherals/gpio")
    assert gpio["source_doc"] == "GPIO & RTC GPIO"
    summary = capsys.readouterr().out.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith(
        "esp32c3 v6.1-dev (v6.1-dev-6734-g102122904ad): 3 pages (1 non-Sphinx XML ignored, 0 skipped)"
    )


def test_doc_refs_name_the_section_a_link_lands_on() -> None:
    rows = _rows(FIXTURES / "esp32c3")
    bootloader = next(r for r in rows if r["file_path"] == "api-guides/bootloader")
    option = (
        "Configuration Options Reference > Component config > ESP-STDIO > CONFIG_ESP_CONSOLE_UART_BAUDRATE"
    )
    assert bootloader["doc_refs"] == ["api-reference/kconfig-reference#" + option]
    assert option in {r["section_path"] for r in rows}
    # a :doc: link opens the page (its root section), as does an anchor the page does not have
    gpio = next(r for r in rows if "pin_bit_mask selects the pins" in r["text"])
    assert gpio["doc_refs"] == [
        "api-guides/bootloader#Bootloader",
        "api-reference/kconfig-reference#Configuration Options Reference",
    ]
    for row in rows:  # never a link to the row's own section or one it sits in
        for ref in row["doc_refs"]:
            page, _, section = ref.partition("#")
            assert section and not (
                page == row["file_path"] and (row["section_path"] + " > ").startswith(section + " > ")
            )


def test_links_to_pages_outside_the_build_are_counted_not_kept(tmp_path: Path) -> None:
    build = _copy_fixture(tmp_path)
    (build / "api-guides" / "bootloader.xml").unlink()
    result = ingest_sphinx_xml.ingest(build, "esp32c3", Provenance(VERSION, COMMIT), progress=False)
    assert result.absent_pages["api-guides/bootloader"] >= 1
    assert not any(ref.startswith("api-guides/bootloader#") for r in result.rows for ref in r["doc_refs"])


def test_unknown_chip_is_rejected_with_the_valid_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "chunks.jsonl"
    assert _run(FIXTURES / "esp32c3", out, "--chip", "esp32x9") == 2
    err = capsys.readouterr().err
    assert "esp32x9" in err and ", ".join(chip_ids()) in err
    assert not out.exists()


def test_non_positive_max_words_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chunks.jsonl"
    assert _run(FIXTURES / "esp32c3", out, "--chip", "esp32c3", "--max-words", "0") == 2
    assert "--max-words must be positive, got 0" in capsys.readouterr().err
    assert not out.exists()


def test_directory_without_sphinx_pages_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doxygen_only = tmp_path / "xml"
    doxygen_only.mkdir()
    shutil.copy(FIXTURES / "esp32c3" / "gpio_8h.xml", doxygen_only)
    shutil.copy(FIXTURES / "SOURCE.md", doxygen_only)
    assert _run(doxygen_only, tmp_path / "out.jsonl", "--chip", "esp32c3") == 2
    err = capsys.readouterr().err
    assert "no Sphinx pages" in err and "1 other XML files" in err
    assert _run(tmp_path / "missing", tmp_path / "out.jsonl", "--chip", "esp32c3") == 2
    assert "is not a directory" in capsys.readouterr().err


def test_malformed_page_is_named_and_skipped_and_the_run_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    xml_dir = _copy_fixture(tmp_path)
    (xml_dir / "api-guides" / "broken.xml").write_text("<document><section><title>Half", encoding="utf-8")
    out = tmp_path / "chunks.jsonl"
    assert _run(xml_dir, out, "--chip", "esp32c3") == 1
    captured = capsys.readouterr()
    assert "skipped page:" in captured.err and "broken.xml" in captured.err
    assert "1 skipped" in captured.out
    assert {r["file_path"] for r in read_jsonl(out)} >= {
        "api-guides/bootloader",
        "api-reference/peripherals/gpio",
    }


def test_a_build_labelled_with_the_wrong_chip_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "chunks.jsonl"
    assert _run(FIXTURES / "esp32", out, "--chip", "esp32c3") == 2
    err = capsys.readouterr().err
    assert "--chip esp32c3 does not match the build: its pages name ESP32 most" in err
    assert not out.exists()


def test_a_folder_of_several_builds_is_caught_by_repeated_doc_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "chunks.jsonl"
    assert _run(FIXTURES, out, "--chip", "esp32") == 1
    err = capsys.readouterr().err
    assert "same doc path 'api-guides/bootloader'" in err and "not a folder of several" in err
    rows = list(read_jsonl(out))
    assert len({(r["file_path"], r["chunk_index"]) for r in rows}) == len(rows)


def test_provenance_comes_from_the_builds_source_note_or_a_matching_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other-idf"
    other.mkdir()
    git = ["git", "-C", str(other), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run([*git, "tag", "v5.5.5"], check=True)
    # the fixture's SOURCE.md names 102122904ade: a checkout at another commit is refused
    assert (
        _run(FIXTURES / "esp32c3", tmp_path / "o.jsonl", "--chip", "esp32c3", "--idf-path", str(other)) == 2
    )
    assert "point --idf-path at the checkout the docs were built from" in capsys.readouterr().err
    assert _run(FIXTURES / "esp32c3", tmp_path / "o.jsonl", "--chip", "esp32c3") == 0
    rows = list(read_jsonl(tmp_path / "o.jsonl"))
    assert {(r["source_version"], r["source_commit"]) for r in rows} == {(VERSION, COMMIT)}
    assert {(tuple(r["releases"]), tuple(r["release_sources"])) for r in rows} == {
        (("v6.1-dev",), (f"{VERSION}@{COMMIT}",))
    }
    # without a SOURCE.md the checkout names the release; its commit must still match the page links
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURES / "esp32c3", bare / "esp32c3")
    assert _run(bare / "esp32c3", tmp_path / "o.jsonl", "--chip", "esp32c3", "--idf-path", str(other)) == 2
    assert "does not match the build" in capsys.readouterr().err
    # and with neither, nothing is written: a row without a release could not be filtered by one
    assert _run(bare / "esp32c3", tmp_path / "none.jsonl", "--chip", "esp32c3") == 2
    assert "no provenance" in capsys.readouterr().err and not (tmp_path / "none.jsonl").exists()


# --- checkers: each one passes on the fixture and fails on a deliberately broken input ---------------


def test_capture_checker_lists_a_page_that_lost_its_text() -> None:
    rows = _rows(FIXTURES / "esp32c3")
    capture, _ = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", rows)
    assert capture.ok and not capture.problems
    broken = [dict(r) for r in rows]
    for row in broken:
        if row["file_path"] == "api-guides/bootloader":
            row["text"] = row["text"].split("\n\n", 1)[0] + "\n\nBootloader."
    capture, _ = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", broken)
    assert not capture.ok
    assert [p.split(":")[0] for p in capture.problems] == ["api-guides/bootloader"]


def test_capture_checker_fails_when_a_page_has_no_chunks_at_all() -> None:
    rows = [r for r in _rows(FIXTURES / "esp32c3") if r["file_path"] != "api-reference/kconfig-reference"]
    capture, _ = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", rows)
    assert not capture.ok and capture.problems[0].startswith("api-reference/kconfig-reference: 0.0%")


def test_api_census_fails_when_a_parameter_is_missing_or_split_off() -> None:
    rows = _rows(FIXTURES / "esp32c3")
    _, census = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", rows)
    assert census.ok and census.summary.startswith("2/2 ")
    dropped = [dict(r) for r in rows]
    for row in dropped:
        row["text"] = row["text"].replace("- level -- Output level. 0: low ; 1: high", "")
    _, census = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", dropped)
    assert not census.ok and census.problems == ["api-reference/peripherals/gpio: gpio_set_level"]
    # the parameters in a different chunk than the function do not count
    split = [dict(r) for r in rows]
    gpio = next(r for r in split if r["file_path"] == "api-reference/peripherals/gpio")
    gpio["text"] = gpio["text"].replace("- gpio_num -- GPIO number. If you want to set the output", "")
    split.append(
        {**gpio, "text": "x\n\n- gpio_num -- GPIO number. If you want to set the output", "chunk_index": 99}
    )
    _, census = ingest_sphinx_xml.check_against_xml(FIXTURES / "esp32c3", split)
    assert census.problems == ["api-reference/peripherals/gpio: gpio_set_level"]


def test_placeholder_scan_fails_on_an_unsubstituted_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(FIXTURES / "esp32c3")
    assert ingest_sphinx_xml.scan_placeholders(rows).ok
    xml_dir = _copy_fixture(tmp_path)
    page = xml_dir / "api-guides" / "bootloader.xml"
    page.write_text(
        page.read_text().replace("0x0 in the flash", "{IDF_TARGET_BOOTLOADER_OFFSET} in the flash")
    )
    assert _run(xml_dir, tmp_path / "out.jsonl", "--chip", "esp32c3") == 1
    err = capsys.readouterr().err
    assert "check placeholders: FAILED - 1 {IDF_TARGET_...} placeholders left" in err
    assert "api-guides/bootloader#0 text: {IDF_TARGET_BOOTLOADER_OFFSET}" in err


# --- the real build (IDF_XML_PATH) ----------------------------------------------------------------

IDF_XML_PATH = os.environ.get("IDF_XML_PATH")
needs_corpus = pytest.mark.skipif(
    not IDF_XML_PATH, reason="IDF_XML_PATH is unset (point it at shared/corpus/idf-xml to test a real build)"
)
SPOT_PAGES = (
    "api-guides/bootloader.xml",
    "api-guides/jtag-debugging/index.xml",
    "api-reference/peripherals/gpio.xml",
)


def _corpus_chip(chip: str) -> Path:
    path = Path(IDF_XML_PATH or "") / chip
    if not path.is_dir():
        pytest.skip(f"{path} is not in IDF_XML_PATH")
    return path


@pytest.fixture(scope="session")
def esp32c3_build() -> tuple[Path, list[dict[str, Any]], list[ingest_sphinx_xml.CheckReport]]:
    xml_dir = _corpus_chip("esp32c3")
    rows = _rows(xml_dir)
    return xml_dir, rows, ingest_sphinx_xml.run_checks(xml_dir, rows)


@needs_corpus
@pytest.mark.corpus
def test_real_build_passes_every_checker(esp32c3_build) -> None:  # type: ignore[no-untyped-def]
    xml_dir, rows, reports = esp32c3_build
    failed = {r.name: r.problems[:5] for r in reports if not r.ok}
    assert not failed
    with_rows = {r["file_path"] for r in rows}
    pages = 0
    for xml_file in xml_dir.rglob("*.xml"):
        root = etree.parse(str(xml_file)).getroot()
        if root.tag != "document":
            continue
        pages += 1
        doc_path = doc_path_for(root, xml_file, xml_dir)
        has_text = any(p.strip() for p in ingest_sphinx_xml.page_text_pieces(root, titles=False))
        assert (doc_path in with_rows) == has_text, doc_path  # only a heading-only stub has no rows
    assert pages > 300
    census = next(r for r in reports if r.name == "api-census")
    assert int(census.summary.split("/")[0]) > 1000


@needs_corpus
@pytest.mark.corpus
def test_real_build_spot_checks(esp32c3_build) -> None:  # type: ignore[no-untyped-def]
    _, rows, _ = esp32c3_build
    gpio = [r for r in rows if r["file_path"] == "api-reference/peripherals/gpio"]
    entry = next(
        r for r in gpio if "esp_err_t gpio_set_level(gpio_num_t gpio_num, uint32_t level)" in r["text"]
    )
    assert "- level -- Output level" in entry["text"] and "gpio_set_level" in entry["symbol_refs"]
    assert any("REQUIRES esp_driver_gpio" in r["text"] for r in gpio)
    kconfig = [r for r in rows if "CONFIG_ESP_CONSOLE_UART_BAUDRATE" in r["symbol_refs"]]
    assert any("UART console baud rate" in r["text"] and "115200" in r["text"] for r in kconfig)
    uart = [r for r in rows if r["file_path"] == "api-reference/peripherals/uart"]
    refs = {ref for r in uart for ref in r["doc_refs"]}
    # an API cross-reference into another page lands on the section that declares it
    assert any(ref.startswith("api-reference/system/esp_err#") for ref in refs)
    assert any(f == "examples/peripherals/uart/uart_echo" for r in uart for f in r["file_refs"])


@needs_corpus
@pytest.mark.corpus
def test_real_pages_of_several_chips_keep_their_own_facts_after_dedup(tmp_path: Path) -> None:
    """A few pages of each built chip: substituted constants and only:: blocks stay per chip."""
    files = []
    for chip in ("esp32", "esp32c3", "esp32p4"):
        source = _corpus_chip(chip)
        subset = tmp_path / chip
        for rel in SPOT_PAGES:
            (subset / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / rel, subset / rel)
        out = tmp_path / f"chunks_{chip}.jsonl"
        write_jsonl(out, _rows(subset, chip))
        files.append(out)
    result = dedup(files)
    assert 0 < len(result.rows) < result.chunks_in
    offsets: dict[str, list[str]] = defaultdict(list)
    for row in result.rows:
        assert row["content_hash"] == content_hash(row["text"])
        for offset in ("0x0", "0x1000", "0x2000"):
            if f"bootloader is located at the address {offset} in the flash" in row["text"]:
                offsets[offset].extend(row["chips"])
    assert offsets == {"0x0": ["esp32c3"], "0x1000": ["esp32"], "0x2000": ["esp32p4"]}
    dual = [r for r in result.rows if "The ESP32 has two powerful Xtensa cores" in r["text"]]
    assert dual and all(r["chips"] == ["esp32"] for r in dual)


# --- real builds of other ESP-IDF releases (IDF_VERSIONS_PATH) -------------------------------------

IDF_VERSIONS_PATH = os.environ.get("IDF_VERSIONS_PATH")
# master's builds have 320-382 pages per chip, v5.5.5 esp32c3 305; far below that, pages were lost
MIN_RELEASE_PAGES = 250


def release_builds() -> list[tuple[str, str, Path]]:
    """(tag, chip, archive or folder) for every ``<tag>/<chip>.tar.xz`` (or unpacked ``<tag>/<chip>/``)
    under IDF_VERSIONS_PATH, the layout of shared/corpus/idf-versions; read at collection time so
    each build is one test case."""
    root = Path(IDF_VERSIONS_PATH or "")
    if not IDF_VERSIONS_PATH or not root.is_dir():
        return []
    found = []
    for tag in sorted(p for p in root.iterdir() if p.is_dir()):
        for entry in sorted(tag.iterdir()):
            chip = entry.name.removesuffix(".tar.xz")
            if chip in chip_ids() and (entry.is_dir() or entry.name.endswith(".tar.xz")):
                found.append((tag.name, chip, entry))
    return found


def _no_release_builds() -> str:
    if not IDF_VERSIONS_PATH:
        return "IDF_VERSIONS_PATH is unset (point it at shared/corpus/idf-versions to test other releases)"
    return f"IDF_VERSIONS_PATH={IDF_VERSIONS_PATH} holds no <tag>/<chip>.tar.xz builds"


def _source_note(xml_dir: Path) -> tuple[str, str]:
    """Version and commit from the build's SOURCE.md, read here on their own: the test must not
    trust the provenance code it checks."""
    text = (xml_dir / "SOURCE.md").read_text(encoding="utf-8")
    version = re.search(r"^- Version: `?(\S+?)`?$", text, re.M)
    commit = re.search(r"^- Commit: `?([0-9a-f]{40})`?$", text, re.M)
    assert version and commit, f"{xml_dir}/SOURCE.md lacks its Version:/Commit: lines"
    return version.group(1), commit.group(1)


@pytest.mark.corpus
@pytest.mark.parametrize(
    "build",
    release_builds() or [pytest.param(None, marks=pytest.mark.skip(reason=_no_release_builds()))],
    ids=lambda build: f"{build[0]}-{build[1]}" if build else "none",
)
def test_a_release_build_ingests_under_its_own_release(build: tuple[str, str, Path], tmp_path: Path) -> None:
    """Every row of another release's build names that release and its exact build, and the build
    passes the checks a master build passes."""
    tag, chip, source = build
    if source.is_dir():
        xml_dir = source
    else:  # unpacked as rebuild.py unpacks a reused <chip>.tar.xz: its <chip>/ folder, whole
        xml_dir = tmp_path / chip
        rebuild.copy_xml(rebuild.XmlSource("archive", source, "IDF_VERSIONS_PATH"), chip, xml_dir)
    version, commit = _source_note(xml_dir)
    series = release_series(tag)
    assert series is not None and release_series(version) == series, f"{tag}/{chip} is a build of {version}"
    provenance = ingest_sphinx_xml.resolve_provenance(xml_dir, None)
    assert (provenance.version, provenance.commit) == (version, commit)
    result = ingest_sphinx_xml.ingest(xml_dir, chip, provenance, progress=False)
    assert not result.failures, result.failures[:5]
    assert MIN_RELEASE_PAGES <= result.pages == rebuild.count_pages(xml_dir)
    # a release build links its files at the tag (blob/v5.5.5/), a development build at the commit
    links = Counter(
        link
        for page in xml_dir.rglob("*.xml")
        for link in rebuild.IDF_LINK.findall(page.read_text(encoding="utf-8", errors="replace"))
    )
    linked = links.most_common(1)[0][0]
    assert linked == version or commit.startswith(linked), f"pages link to {linked}; SOURCE.md: {version}"
    assert ingest_sphinx_xml.chip_mentions(result.rows).most_common(1)[0][0] == chip
    for row in result.rows:
        validate_row(row)
        assert row["releases"] == [series], row["file_path"]
        assert row["release_sources"] == [f"{version}@{commit}"], row["file_path"]
        assert (row["chips"], row["source_version"], row["source_commit"]) == ([chip], version, commit)
    # capture, placeholders and the API census, as for a master build (v5.5.5 esp32c3: 305 pages,
    # mean capture 99.97%, 2310/2310 functions)
    reports = ingest_sphinx_xml.run_checks(xml_dir, result.rows)
    assert not {r.name: (r.summary, r.problems[:5]) for r in reports if not r.ok}
