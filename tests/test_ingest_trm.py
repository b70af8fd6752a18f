"""ingest_trm end to end: the fixture tree, bad input, and (with TRM_PATH) the real manuals."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

import chunk_format
import ingest_trm
from schema import read_jsonl, validate_row

FIXTURES = Path(__file__).parent / "fixtures" / "trm"
REGISTER_LINE = re.compile(r"^Register (\S+)(?: \([^)]*\))?\nAddress: ", re.MULTILINE)
CONTRACT_HEADER = re.compile(r"^Register \S+( \(.*\))?$")


def _run(tmp_path: Path, trm: Path, *extra: str) -> tuple[int, list[dict]]:
    out = tmp_path / "trm.jsonl"
    code = ingest_trm.main(["--out-path", str(out), "--trm-path", str(trm), "--no-progress", *extra])
    rows = list(read_jsonl(out)) if out.exists() else []
    return code, rows


def _registers(rows: list[dict], chip: str) -> Counter:
    return Counter(name for r in rows if chip in r["chips"] for name in REGISTER_LINE.findall(r["text"]))


def test_fixture_tree_ingests_every_chip_with_valid_rows(tmp_path: Path) -> None:
    code, rows = _run(tmp_path, FIXTURES)
    assert code == 0
    for row in rows:
        validate_row(row)
        assert row["doc_type"] == "trm" and len(row["chips"]) == 1
        assert row["text"].startswith(row["section_path"] + "\n\n")
    assert {r["chips"][0] for r in rows} == {"esp32", "esp32c2", "esp32c3", "esp32c6", "esp32p4"}
    ecc = [r for r in rows if r["file_path"] == "ESP8684/01-ECC__EN"]
    assert ecc and ecc[0]["chips"] == ["esp32c2"] and ecc[0]["source_doc"] == "ECC Accelerator (ECC)"


def test_lowercase_en_includes_of_esp32_reach_chunks(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES, "--chips", "esp32")
    assert _registers(rows, "esp32") == Counter({"PCNT_CTRL_REG": 1})
    assert "0x00b0" in next(r["text"] for r in rows if "PCNT_CTRL_REG" in r["text"])


def test_every_register_is_one_block_in_exactly_one_chunk(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES, "--chips", "esp32c3")
    counts = _registers(rows, "esp32c3")
    assert set(counts.values()) == {1}
    assert "CASE_HIDDEN_REG" in counts  # only reachable through the case-insensitive include
    for row in rows:
        for block in row["text"].split("\n\n"):
            if block.startswith("Register "):
                assert block.splitlines()[1].startswith("Address: ")
                assert REGISTER_LINE.match(block).group(1) in row["symbol_refs"], block


def test_chunk_index_runs_in_document_order_per_file(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES)
    per_file: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        per_file.setdefault((row["chips"][0], row["file_path"]), []).append(row["chunk_index"])
    for indexes in per_file.values():
        assert indexes == list(range(len(indexes)))


def test_p4_manuals_are_merged_with_revisions(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES, "--chips", "esp32p4")
    assert all(r["revisions"] for r in rows)
    common = [r for r in rows if r["revisions"] == ["mainline", "v1.3"]]
    assert common and all("TIMER_NEW_REG" not in r["text"] for r in common)
    mainline_only = [r for r in rows if r["revisions"] == ["mainline"]]
    v13_only = [r for r in rows if r["revisions"] == ["v1.3"]]
    assert any("TIMER_NEW_REG" in r["text"] for r in mainline_only)
    assert not any("TIMER_NEW_REG" in r["text"] for r in v13_only)
    mintstatus = {r["revisions"][0]: r for r in rows if "Register mintstatus" in r["text"]}
    assert "Address: 0xFB1" in mintstatus["mainline"]["text"]
    assert mintstatus["mainline"]["file_path"] == "ESP32-P4/01-CPU-latest__EN"
    assert "Address: 0x346" in mintstatus["v1.3"]["text"]
    assert mintstatus["v1.3"]["file_path"] == "ESP32-P4/01-CPU__EN"


def test_single_manual_chips_have_no_revision_axis(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES, "--chips", "esp32c3,esp32")
    assert rows and all(r["revisions"] == [] for r in rows)


def test_source_version_comes_from_the_source_pin(tmp_path: Path) -> None:
    trm = tmp_path / "trm"
    shutil.copytree(FIXTURES, trm)
    (trm / "SOURCE.md").write_text("Commit: " + "a" * 40 + "\n")
    _code, rows = _run(tmp_path, trm, "--chips", "esp32")
    assert rows[0]["source_commit"] == "a" * 40 and rows[0]["source_version"] == "a" * 12


def test_summary_counts_register_blocks_not_table_rows_starting_with_register(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trm = tmp_path / "trm"
    shutil.copytree(FIXTURES, trm)
    chapter = trm / "ESP32" / "01-PCNT__EN.tex"
    summary_table = (
        "\\begin{tabular}{ll}\nRegister & Address \\\\\nPCNT\\_CTRL\\_REG & 0x00b0 \\\\\n\\end{tabular}\n"
    )
    chapter.write_text(
        chapter.read_text().replace("\\section{Registers}", summary_table + "\\section{Registers}")
    )
    code, rows = _run(tmp_path, trm, "--chips", "esp32")
    assert code == 0 and any("Register | Address" in r["text"] for r in rows)
    assert "1 registers [esp32 1]" in capsys.readouterr().out


@pytest.mark.parametrize("make_path", ["missing", "empty", "not-trm"])
def test_bad_trm_path_exits_2_saying_what_was_expected(
    tmp_path: Path, make_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trm = tmp_path / "trm"
    if make_path != "missing":
        trm.mkdir()
    if make_path == "not-trm":
        (trm / "README.md").write_text("hello")
        (trm / "docs").mkdir()
    code, rows = _run(tmp_path, trm)
    assert code == 2 and rows == []
    err = capsys.readouterr().err
    assert "expected a TRM LaTeX tree" in err and "NN-NAME__EN.tex" in err


def test_unknown_chip_exits_2_listing_valid_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _rows = _run(tmp_path, FIXTURES, "--chips", "esp99")
    assert code == 2
    assert "valid chips: esp32" in capsys.readouterr().err


def test_no_trm_path_at_all_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRM_PATH", raising=False)
    code = ingest_trm.main(["--out-path", str(tmp_path / "x.jsonl")])
    assert code == 2 and "TRM_PATH" in capsys.readouterr().err


def test_broken_chapter_is_named_the_rest_ingested_and_the_run_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trm = tmp_path / "trm"
    shutil.copytree(FIXTURES, trm)
    (trm / "ESP32-C3" / "03-BROKEN__EN.tex").write_text(
        "\\begin{document}\\chapter{Broken}\nText.\n\\subfile{./03-BROKEN/03-BROKEN-reg__EN}\n\\end{document}\n"
    )
    aggregator = trm / "ESP32-C3" / "ESP32-C3-main__EN.tex"
    aggregator.write_text(
        aggregator.read_text().replace(
            "\\end{document}",
            "\\subfileinclude{03-BROKEN__EN}\n\\subfileinclude{04-GONE__EN}\n\\end{document}",
        )
    )
    code, rows = _run(tmp_path, trm, "--chips", "esp32c3")
    err = capsys.readouterr().err
    assert code == 1
    assert "ESP32-C3/03-BROKEN__EN" in err and "03-BROKEN-reg__EN" in err
    assert "04-GONE__EN" in err
    assert "DEMO_CONF_REG" in _registers(rows, "esp32c3")


# --- the real manuals (TRM_PATH) ------------------------------------------------------------------

TRM_PATH = os.environ.get("TRM_PATH")
needs_corpus = pytest.mark.skipif(
    not TRM_PATH, reason="TRM_PATH is not set: point it at the TRM LaTeX tree (shared/corpus/trm-latex)"
)


@pytest.fixture(scope="session")
def corpus_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[dict]]:
    """One ingest of the two chips with the most traps: lowercase includes (ESP32) and two
    revisions (ESP32-P4); chapters borrowed across chip folders are covered by the fixtures."""
    out = tmp_path_factory.mktemp("trm") / "trm.jsonl"
    chips = "esp32,esp32p4"
    args = ["--out-path", str(out), "--trm-path", str(TRM_PATH), "--chips", chips, "--no-progress"]
    code = ingest_trm.main(args)
    return code, list(read_jsonl(out))


@needs_corpus
def test_corpus_ingest_is_clean(corpus_rows: tuple[int, list[dict]]) -> None:
    code, rows = corpus_rows
    assert code == 0
    assert {r["chips"][0] for r in rows} == {"esp32", "esp32p4"}


@needs_corpus
def test_corpus_registers_are_whole_and_not_duplicated(corpus_rows: tuple[int, list[dict]]) -> None:
    _code, rows = corpus_rows
    for chip in ("esp32", "esp32p4"):
        assert len(_registers(rows, chip)) > 300, f"{chip}: only {len(_registers(rows, chip))} registers"
    esp32_blocks: Counter = Counter()
    for row in rows:
        for block in row["text"].split("\n\n"):
            lines = block.splitlines()
            if len(lines) > 3 and CONTRACT_HEADER.match(lines[0]) and lines[1].startswith("Address: "):
                absolute = int(lines[2].startswith(chunk_format.ABSOLUTE_ADDRESS_PREFIX))
                reset_at = 2 + absolute
                optional = [
                    line
                    for line in lines[reset_at + 1 : reset_at + 3]
                    if line.startswith(("Summary: ", "Terms: "))
                ]
                assert lines[reset_at].startswith("Reset value: "), lines[:7]
                assert lines[reset_at + 1 + len(optional)] == "Fields:", lines[:7]
                if row["chips"] == ["esp32"]:
                    esp32_blocks[(row["file_path"], lines[0])] += 1
    # a register split or duplicated by the chunker would show up twice in its chapter (ESP32 has
    # one manual; the same register may still be documented by two chapters, e.g. ULP and SENSOR)
    assert esp32_blocks and max(esp32_blocks.values()) == 1, esp32_blocks.most_common(3)


@needs_corpus
def test_corpus_p4_revisions(corpus_rows: tuple[int, list[dict]]) -> None:
    _code, rows = corpus_rows
    p4 = [r for r in rows if r["chips"] == ["esp32p4"]]
    mix = Counter(tuple(r["revisions"]) for r in p4)
    assert set(mix) == {("mainline", "v1.3"), ("mainline",), ("v1.3",)}
    assert mix[("mainline", "v1.3")] > mix[("mainline",)] > 0
    mainline_mint = [r for r in p4 if "mintstatus" in r["text"] and "0xFB1" in r["text"]]
    v13_mint = [r for r in p4 if "mintstatus" in r["text"] and "0x346" in r["text"]]
    assert all("v1.3" not in r["revisions"] for r in mainline_mint) and mainline_mint
    assert all("mainline" not in r["revisions"] for r in v13_mint) and v13_mint
    aximon = [r for r in p4 if "Register AXI_PERF_MON_AGENT_SELECT_REG" in r["text"]]
    assert aximon and all(r["revisions"] == ["mainline"] for r in aximon)


@needs_corpus
def test_corpus_esp32_lowercase_includes_and_values(corpus_rows: tuple[int, list[dict]]) -> None:
    _code, rows = corpus_rows
    pcnt = [r for r in rows if r["chips"] == ["esp32"] and "Register PCNT_CTRL_REG" in r["text"]]
    assert len(pcnt) == 1 and "Address: 0x00b0" in pcnt[0]["text"]
    assert any("eight independent units" in r["text"] for r in rows if r["chips"] == ["esp32"])


@needs_corpus
def test_corpus_rows_have_no_latex_left(corpus_rows: tuple[int, list[dict]]) -> None:
    _code, rows = corpus_rows
    leftovers = [r["file_path"] for r in rows if re.search(r"\\(begin|end|regfield|item)\b", r["text"])]
    # listings keep their text verbatim; nothing else may carry LaTeX environments through
    assert len(leftovers) <= len(rows) // 100, leftovers[:10]


def test_chapter_borrowed_from_another_chip_folder_uses_the_borrowing_chips_tags(tmp_path: Path) -> None:
    _code, rows = _run(tmp_path, FIXTURES, "--chips", "esp32c6,esp32c3")
    c6 = [r for r in rows if r["chips"] == ["esp32c6"]]
    assert c6 and {r["file_path"] for r in c6} == {"ESP32-C3/01-DEMO__EN"}
    assert "DEMO_NEW_REG" in _registers(rows, "esp32c6") and "DEMO_OLD_REG" not in _registers(rows, "esp32c6")
    assert "DEMO_OLD_REG" in _registers(rows, "esp32c3")
    assert any("The ESP32-C6 demo controller" in r["text"] for r in c6)
