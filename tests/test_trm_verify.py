"""trm_verify.py: per-chapter word capture and macro coverage, proven to fail on a broken ingest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import trm_verify as tv
from schema import read_jsonl, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "trm_checks"
TRM = FIXTURES / "trm"
GOOD_CHUNKS = FIXTURES / "good_chunks.jsonl"


def good_rows() -> list[dict[str, Any]]:
    return list(read_jsonl(GOOD_CHUNKS))


def write(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    path = tmp_path / "chunks.jsonl"
    write_jsonl(path, rows)
    return str(path)


def captures(rows: list[dict[str, Any]]) -> dict[str, float]:
    results = tv.word_capture(tv.chapter_sources(TRM, progress=False), rows)
    return {f"{r.label}:{r.chapter}": r.ratio for r in results}


def test_delatex_keeps_text_arguments_and_drops_markup() -> None:
    text = tv.delatex(
        "\\label{sec:x}See \\hyperref[regdesc:A]{I2C\\_COMD\\regindex{n}\\_REG} in Table \\ref{tab:y}, "
        "\\textcolor{red}{Note} \\textbf{bold}. \\includegraphics[width=1cm]{fig/a}"
        "\\begin{tabular}{|l|p{3cm}|} A & B \\\\[2pt] \\end{tabular}"
    )
    words = tv.word_bag(text)
    assert {"see", "i2c_comdn_reg", "in", "table", "note", "bold"} <= set(words)
    assert not {"sec", "regdesc", "tab", "red", "fig", "width", "cm", "textbf", "tabular"} & set(words)


def test_word_bag_ignores_numbers_and_bit_values() -> None:
    assert tv.word_bag("Address: 0x0038 [15:9] reset 0x0 I2C_SCL ok") == {
        "address": 1,
        "reset": 1,
        "i2c_scl": 1,
        "ok": 1,
    }


def test_correct_ingest_captures_every_chapter(tmp_path: Path) -> None:
    assert min(captures(good_rows()).values()) >= 0.95
    assert tv.main(["words", write(tmp_path, good_rows()), "--trm-path", str(TRM)]) == 0


def test_tag_selected_text_is_not_expected_in_chunks() -> None:
    # 02-UART holds a \tagged{ESP32-C61} sentence the C3 manual does not print; the good chunks omit it.
    assert captures(good_rows())["esp32c3@mainline:ESP32-C3/02-UART__EN"] == 1.0


def test_chapter_with_half_its_text_missing_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        r
        for r in good_rows()
        if not (r["file_path"] == "ESP32-C3/01-I2C__EN" and r["chunk_index"] in (0, 2, 3))
    ]
    ratio = captures(rows)["esp32c3@mainline:ESP32-C3/01-I2C__EN"]
    assert ratio < tv.DEFAULT_FAIL_BELOW
    assert tv.main(["words", write(tmp_path, rows), "--trm-path", str(TRM)]) == 1
    assert "ESP32-C3/01-I2C__EN" in capsys.readouterr().out


def test_chapter_with_no_chunks_captures_nothing(tmp_path: Path) -> None:
    rows = [r for r in good_rows() if r["file_path"] != "ESP8684/01-SPI__EN"]
    assert captures(rows)["esp32c2@mainline:ESP8684/01-SPI__EN"] == 0.0
    assert tv.main(["words", write(tmp_path, rows), "--trm-path", str(TRM)]) == 1


def test_truncated_register_descriptions_lower_capture_but_within_tolerance(tmp_path: Path) -> None:
    rows = good_rows()
    uart = next(r for r in rows if "UART_CLKDIV_REG" in r["text"])
    uart["text"] = uart["text"].replace(
        ": Configures the integral part of the divisor for baud rate generation.", ""
    )
    ratio = captures(rows)["esp32c3@mainline:ESP32-C3/02-UART__EN"]
    assert tv.FLAG_BELOW < ratio < 1.0
    path = write(tmp_path, rows)
    assert tv.main(["words", path, "--trm-path", str(TRM)]) == 0
    # a stricter threshold than the 80% flag line fails the run too, not only flagged chapters
    assert tv.main(["words", path, "--trm-path", str(TRM), "--fail-below", "0.9"]) == 1


def test_macros_left_raw_are_reported_most_frequent_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = good_rows()
    rows[0]["text"] += " \\textbf{high} \\regindex{n} \\regindex{n}"
    coverage = {
        name: (uses, raw) for name, uses, raw in tv.macro_coverage(tv.chapter_sources(TRM, False), rows)
    }
    assert coverage["regindex"][1] == 2 and coverage["textbf"][1] == 1
    assert coverage["chapter"][1] == 0
    path = write(tmp_path, rows)
    assert tv.main(["macros", path, "--trm-path", str(TRM), "--fail-on-raw"]) == 1
    out = capsys.readouterr().out
    assert out.index("\\regindex: 2 raw") < out.index("\\textbf: 1 raw")
    assert tv.main(["macros", write(tmp_path, good_rows()), "--trm-path", str(TRM), "--fail-on-raw"]) == 0


def test_bad_threshold_and_missing_chunks_exit_2(tmp_path: Path) -> None:
    assert tv.main(["words", str(GOOD_CHUNKS), "--trm-path", str(TRM), "--fail-below", "7"]) == 2
    assert tv.main(["words", str(tmp_path / "none.jsonl"), "--trm-path", str(TRM)]) == 2


TRM_PATH = os.environ.get("TRM_PATH")


@pytest.mark.corpus
def test_real_chapter_delatex_yields_prose_and_register_names() -> None:
    if not TRM_PATH:
        pytest.skip("TRM_PATH is not set: point it at the TRM LaTeX tree (e.g. ../shared/corpus/trm-latex)")
    from register_census import discover_manuals, scan_chapter

    c3 = next(m for m in discover_manuals(Path(TRM_PATH)) if m.chip == "esp32c3")
    root = next(r for r in c3.chapter_roots if r.name == "01-I2C__EN.tex")
    scan = scan_chapter(root, c3, Path(TRM_PATH), tags=c3.tags)
    words = tv.word_bag(tv.delatex("\n".join(body for _, body in scan.texts)))
    assert {"i2c_scl_high_period_reg", "master", "slave", "clock"} <= set(words)
    assert not {"regdesc", "fielddesc", "modulefiles", "hline", "textwidth"} & set(words)
    assert sum(words.values()) > 5_000


def test_p4_chunk_shared_by_both_editions_counts_for_each() -> None:
    rows = good_rows()
    v13 = next(r for r in rows if r["file_path"] == "ESP32-P4/01-AES__EN")
    latest = next(r for r in rows if r["file_path"] == "ESP32-P4/01-AES-latest__EN")
    # what the ingest's merge produces: the common text once, under the first edition's path
    v13["revisions"] = ["v1.3", "mainline"]
    latest["text"] = "AES Accelerator (AES)\n\n" + latest["text"].split("\n\n", 2)[2].split("\n\n", 1)[1]
    result = captures(rows)
    assert result["esp32p4@mainline:ESP32-P4/01-AES-latest__EN"] == 1.0
    v13["revisions"] = ["v1.3"]  # without the mainline label the mainline edition loses that text
    assert captures(rows)["esp32p4@mainline:ESP32-P4/01-AES-latest__EN"] < 0.6


def register_ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {f"{r.label}:{r.name}": r.ratio for r in tv.register_capture(tv.chapter_sources(TRM, False), rows)}


def test_every_register_of_a_correct_ingest_is_captured(tmp_path: Path) -> None:
    ratios = register_ratios(good_rows())
    assert len(ratios) == 13 and min(ratios.values()) >= 0.95
    assert tv.main(["registers", write(tmp_path, good_rows()), "--trm-path", str(TRM)]) == 0


def test_register_that_lost_its_field_descriptions_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # what a parser that drops text after a nested list does: the field lines keep only their names
    rows = good_rows()
    i2c = next(r for r in rows if "Register I2C_COMDn_REG" in r["text"])
    i2c["text"] = "\n".join(
        line.split(":")[0] if line.startswith("- ") else line for line in i2c["text"].split("\n")
    )
    ratios = register_ratios(rows)
    assert ratios["esp32c3@mainline:I2C_COMDn_REG (n: 0-7)"] < tv.DEFAULT_REGISTER_FAIL_BELOW
    assert ratios["esp32c3@mainline:UART_FIFO_REG"] == 1.0
    assert tv.main(["registers", write(tmp_path, rows), "--trm-path", str(TRM)]) == 1
    assert "I2C_COMDn_REG" in capsys.readouterr().out


def test_chunk_register_blocks_split_at_each_header() -> None:
    text = (
        "P\n\nRegister A_REG\nAddress: 0x0\nFields:\n- A [0] reset 0x0: a.\n\n"
        "Register B_REG (n: 0-1)\nAddress: 0x4"
    )
    assert [key for key, _ in tv.chunk_register_blocks(text)] == ["A_REG", "B_REG"]
