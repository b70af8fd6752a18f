"""register_census.py: an independent count of TRM registers that fails loudly on lost ones.

The fixture tree (tests/fixtures/trm_checks/trm) holds each trap in small: a case-mismatched include
with three registers behind it, an unbalanced register environment inside `\\iftagged`, a wrapped
parameterised header, ESP32-P4's two manuals with `\\tagged`/`\\untagged` registers, and an ESP8684
register file named `_en.tex`. good_chunks.jsonl is what a correct ingest of it looks like; the
broken variants below are derived from it one fault at a time.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import register_census as rc
from schema import read_jsonl, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "trm_checks"
TRM = FIXTURES / "trm"
GOOD_CHUNKS = FIXTURES / "good_chunks.jsonl"


@pytest.fixture(scope="module")
def census() -> rc.Census:
    return rc.take_census(TRM)


def good_rows() -> list[dict[str, Any]]:
    return list(read_jsonl(GOOD_CHUNKS))


def manual(census: rc.Census, chip: str, revision: str = "mainline") -> rc.ManualCensus:
    return next(mc for mc in census.manuals if mc.manual.chip == chip and mc.manual.revision == revision)


# ----------------------------------------------------------------------------- scanning units


def test_comments_are_stripped_but_escaped_percent_and_listings_survive() -> None:
    text = (
        'keep 50\\% % drop \\input{x}\n\\begin{lstlisting}\nprintf("%d");\n\\end{lstlisting}\n% \\subfile{y}'
    )
    stripped = rc.strip_comments(text)
    assert "50\\%" in stripped and "drop" not in stripped and "\\subfile" not in stripped
    assert 'printf("%d");' in stripped


def test_unbalanced_register_in_iftagged_branches_selects_one_begin() -> None:
    text = (
        "\\iftagged{ESP32-C61}{\\begin{register}{H}{A\\_REG}{0x0}}{\\begin{register}{H}{B\\_REG}{0x0}}"
        "\nbody\n\\end{register}"
    )
    assert rc.select_tags(text, frozenset({"ESP32-C61"})).count("\\begin{register}") == 1
    assert "B\\_REG" in rc.select_tags(text, frozenset({"ESP32-P4"}))
    assert "A\\_REG" not in rc.select_tags(text, frozenset({"ESP32-P4"}))


def test_tag_lists_with_spaces_and_nested_branches() -> None:
    text = (
        "\\tagged{ESP32-H4, ESP32-P4-latest}{new \\untagged{ESP32-P4}{never}}\\untagged{ESP32-P4-latest}{old}"
    )
    assert rc.select_tags(text, frozenset({"ESP32-P4", "ESP32-P4-latest"})).split() == ["new"]
    assert rc.select_tags(text, frozenset({"ESP32-P4"})).split() == ["old"]


def test_register_names_render_like_the_chunk_contract() -> None:
    name = rc.latex_name_to_text("I2C\\_COMD\\regindex{n}\\_REG\n(\\regindex{n}: 0-7)")
    assert name == "I2C_COMDn_REG (n: 0-7)"
    assert rc.register_name_key(name) == "I2C_COMDn_REG"
    assert rc.register_name_key("TWAI_ARB LOST CAP_REG") == "TWAI_ARBLOSTCAP_REG"
    mid_note = rc.latex_name_to_text("mhpmcounter\\regindex{n}(\\regindex{n}: 3-12)h")
    assert rc.register_name_key(mid_note) == "mhpmcounternh" != rc.register_name_key("mhpmcountern (n: 3-12)")


def test_prose_starting_with_register_is_not_a_split_header() -> None:
    found = rc.registers_in_chunk(
        "AES\n\nRegister AES_AAD_BLOCK_NUM_REG stores the block number.\nMore prose."
    )
    assert found.headers_without_address == [] and found.complete == []
    cut = rc.registers_in_chunk("AES\n\nRegister AES_KEY_n_REG (n: 0-7)")
    assert cut.headers_without_address == ["AES_KEY_n_REG"]


# ----------------------------------------------------------------------------- source census


def test_fixture_census_per_manual(census: rc.Census) -> None:
    assert set(manual(census, "esp32c3").names()) == {
        "I2C_SCL_LOW_PERIOD_REG",
        "I2C_SCL_HIGH_PERIOD_REG",
        "I2C_COMDn_REG",
        "UART_FIFO_REG",
        "UART_CLKDIV_REG",
    }
    assert set(manual(census, "esp32c2").names()) == {"SPI_CMD_REG"}  # reached through a _en.tex file
    assert set(manual(census, "esp32p4", "mainline").names()) == {
        "AES_KEY_n_REG",
        "AES_PSEUDO_REG",
        "GPIO_OUT_REG",
        "GPIO_FILTER_CTRL_REG",
    }
    assert set(manual(census, "esp32p4", "v1.3").names()) == {
        "AES_KEY_n_REG",
        "GPIO_OUT_REG",
        "GPIO_STRAP_REG",
    }
    assert census.revision_splits()["esp32p4"] == {"common": 2, "v1.3-only": 1, "mainline-only": 2}


def test_tag_selection_drops_the_other_branch_and_iffalse_blocks(census: rc.Census) -> None:
    c3 = manual(census, "esp32c3")
    # the \iftagged header holds two \begin{register}; UART_WITHDRAWN_REG sits in \iffalse ... \fi
    assert len(c3.before) == len(c3.after) + 2
    assert not {"I2C_SCL_HIGH_PERIOD_C61_REG", "UART_WITHDRAWN_REG"} & set(c3.names())


def test_iffalse_keeps_its_else_part_and_counts_nested_conditionals() -> None:
    text = "a \\iffalse b \\ifglobal c \\else d \\fi e \\else f \\fi g \\iffalse h \\fi i"
    assert rc.drop_iffalse(text).split() == ["a", "f", "g", "i"]


def test_case_mismatched_include_is_counted_and_reported(census: rc.Census) -> None:
    [mismatch] = census.case_mismatches()
    assert mismatch["include"] == "\\modulefiles/01-i2c-reg__EN"
    assert mismatch["resolved"] == "ESP32-C3/01-I2C/01-I2C-reg__EN.tex"
    assert mismatch["registers"] == ["I2C_COMDn_REG", "I2C_SCL_HIGH_PERIOD_REG", "I2C_SCL_LOW_PERIOD_REG"]
    assert census.unresolved() == []  # the commented-out include is not a broken one


def test_unresolved_include_is_listed_and_fails_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "trm"
    shutil.copytree(TRM, broken)
    (broken / "ESP32-C3/02-UART/02-UART-reg__EN.tex").unlink()
    result = rc.take_census(broken)
    assert [(p.from_file, p.include) for p in result.unresolved()] == [
        ("ESP32-C3/02-UART__EN.tex", "\\modulefiles/02-UART-reg__EN")
    ]
    assert rc.main(["source", "--trm-path", str(broken)]) == 1
    assert "ESP32-C3/02-UART__EN.tex includes" in capsys.readouterr().out


@pytest.mark.parametrize("make_bad", ["missing", "not-a-tree"])
def test_bad_trm_path_exits_2_saying_what_was_expected(
    make_bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "absent"
    if make_bad == "not-a-tree":
        path.mkdir()
        (path / "README.md").write_text("no chips here")
    assert rc.main(["source", "--trm-path", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and ("not a directory" in err or "expected chip folders" in err)


# ----------------------------------------------------------------------------- check against chunks


def run_check(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "chunks.jsonl"
    write_jsonl(path, rows)
    results = rc.check_chunks(rc.take_census(TRM), rows)
    return rc.main(["check", str(path), "--trm-path", str(TRM)]), rc.check_json(results)


def by_manual(report: dict[str, Any], chip: str, revision: str = "mainline") -> dict[str, Any]:
    return next(m for m in report["manuals"] if m["chip"] == chip and m["revision"] == revision)


def test_check_passes_on_a_correct_ingest(tmp_path: Path) -> None:
    status, report = run_check(tmp_path, good_rows())
    assert status == 0
    assert all(m["source"] == m["in_chunks"] and not m["split"] and not m["extra"] for m in report["manuals"])


def test_check_names_registers_a_case_sensitive_parser_lost(tmp_path: Path) -> None:
    rows = [r for r in good_rows() if not (r["file_path"] == "ESP32-C3/01-I2C__EN" and r["chunk_index"] >= 2)]
    status, report = run_check(tmp_path, rows)
    assert status == 1
    missing = by_manual(report, "esp32c3")["missing"]
    assert {m["name"] for m in missing} == {
        "I2C_SCL_LOW_PERIOD_REG",
        "I2C_SCL_HIGH_PERIOD_REG",
        "I2C_COMDn_REG (n: 0-7)",
    }
    assert {m["file"] for m in missing} == {"ESP32-C3/01-I2C/01-I2C-reg__EN.tex"}


def test_register_named_only_in_symbol_refs_is_still_missing(tmp_path: Path) -> None:
    rows = good_rows()
    spi = next(r for r in rows if r["chips"] == ["esp32c2"])
    spi["text"] = spi["text"].split("\n\nRegister")[0]  # symbol_refs still list SPI_CMD_REG
    status, report = run_check(tmp_path, rows)
    assert status == 1
    assert [m["name"] for m in by_manual(report, "esp32c2")["missing"]] == ["SPI_CMD_REG"]


def test_check_flags_a_register_split_across_chunks(tmp_path: Path) -> None:
    rows = good_rows()
    uart = next(r for r in rows if "Register UART_CLKDIV_REG" in r["text"])
    head, tail = uart["text"].split("Register UART_CLKDIV_REG\n")
    uart["text"] = head + "Register UART_CLKDIV_REG"
    rows.append({**uart, "text": "UART Controller (UART) > Registers\n\n" + tail, "chunk_index": 2})
    status, report = run_check(tmp_path, rows)
    assert status == 1
    split = by_manual(report, "esp32c3")["split"]
    problems = [p for entry in split for p in entry["problems"]]
    assert any("UART_CLKDIV_REG" in p for p in problems)
    assert any("Address line without its Register header" in p for p in problems)
    assert "UART_CLKDIV_REG" in {m["name"] for m in by_manual(report, "esp32c3")["missing"]}


def test_check_names_fields_a_register_lost(tmp_path: Path) -> None:
    rows = good_rows()
    uart = next(r for r in rows if "Register UART_CLKDIV_REG" in r["text"])
    uart["text"] = "\n".join(
        line for line in uart["text"].split("\n") if not line.startswith("- UART_CLKDIV_FRAG")
    )
    status, report = run_check(tmp_path, rows)
    assert status == 1
    assert by_manual(report, "esp32c3")["incomplete"] == [
        {
            "name": "UART_CLKDIV_REG",
            "file": "ESP32-C3/02-UART/02-UART-reg__EN.tex",
            "missing_fields": ["UART_CLKDIV_FRAG"],
        }
    ]
    assert by_manual(report, "esp32c3")["missing"] == []


def test_check_keeps_p4_revisions_apart(tmp_path: Path) -> None:
    rows = good_rows()
    strap = next(r for r in rows if "Register GPIO_STRAP_REG" in r["text"])
    strap["revisions"] = ["mainline"]  # a v1.3-only register filed under the wrong manual
    status, report = run_check(tmp_path, rows)
    assert status == 1
    assert [m["name"] for m in by_manual(report, "esp32p4", "v1.3")["missing"]] == ["GPIO_STRAP_REG"]
    assert by_manual(report, "esp32p4", "mainline")["extra"] == ["GPIO_STRAP_REG"]


def test_check_rejects_a_chunks_file_without_trm_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"doc_type": "idf", "text": "x"}) + "\n")
    assert rc.main(["check", str(path), "--trm-path", str(TRM)]) == 2
    assert "no rows with doc_type 'trm'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the real corpus

TRM_PATH = os.environ.get("TRM_PATH")


@pytest.fixture(scope="module")
def real_census() -> rc.Census:
    if not TRM_PATH:
        pytest.skip("TRM_PATH is not set: point it at the TRM LaTeX tree (e.g. ../shared/corpus/trm-latex)")
    return rc.take_census(TRM_PATH)


@pytest.mark.corpus
def test_real_census_totals_match_the_design_ranges(real_census: rc.Census) -> None:
    # DESIGN §4: ~14,000 \begin{register} before tag selection; ~11,500 would mean _en.tex files were lost.
    assert 13_500 <= real_census.raw_begin_total <= 15_000
    assert 13_000 <= real_census.selected_total <= real_census.raw_begin_total
    # ~1,000 of those are the PDF's "Continued from the previous page" repeats of a register
    assert 12_500 <= real_census.selected_whole_total < real_census.selected_total - 500
    assert real_census.unresolved() == []
    labels = {mc.manual.label for mc in real_census.manuals}
    assert {"esp32p4@mainline", "esp32p4@v1.3", "esp32c2@mainline", "esp32@mainline"} <= labels
    assert len(real_census.manuals) == 11  # ten TRM folders, ESP32-P4 twice


@pytest.mark.corpus
def test_real_census_counts_registers_outside_en_named_files(real_census: rc.Census) -> None:
    # ESP32, ESP32-S2 and ESP8684 include lowercase *_en.tex (and unsuffixed) register files: a `__EN`
    # filename filter below the chapter root would silently drop ~1,500 of their registers.
    outside = {
        chip: sum(1 for hit in manual(real_census, chip).after if not hit.file.endswith("__EN.tex"))
        for chip in ("esp32", "esp32s2", "esp32c2")
    }
    assert all(count > 50 for count in outside.values()), outside
    assert sum(outside.values()) >= 1_400


@pytest.mark.corpus
def test_real_case_mismatched_includes_hold_the_efuse_rtc_and_i2c_registers(real_census: rc.Census) -> None:
    mismatches = real_census.case_mismatches()
    assert len(mismatches) == 13
    with_registers = {(m["chip"], m["resolved"].split("/")[-1]): m for m in mismatches if m["registers"]}
    assert set(with_registers) == {
        ("esp32c2", "23-I2C-reg__EN.tex"),
        ("esp32c5", "06-EFUSE-reg__EN.tex"),
        ("esp32p4", "09-EFUSE-reg__EN.tex"),
        ("esp32p4", "20-RTCTIMER-reg__EN.tex"),
    }
    assert 140 <= sum(m["begin_register"] for m in with_registers.values()) <= 170


@pytest.mark.corpus
def test_real_p4_manuals_differ_both_ways(real_census: rc.Census) -> None:
    split = real_census.revision_splits()["esp32p4"]
    assert split["common"] > 2000 and split["mainline-only"] > 0 and split["v1.3-only"] > 0


@pytest.mark.corpus
def test_real_c61_manual_includes_chapters_from_other_chip_folders(real_census: rc.Census) -> None:
    c61 = manual(real_census, "esp32c61")
    borrowed = {root.parent.name for root in c61.manual.chapter_roots} - {"ESP32-C61"}
    assert {"ESP32-C5", "ESP32-H2", "ESP32-P4"} <= borrowed
    assert any(hit.chapter == "ESP32-P4/56-LEDPWM__EN" for hit in c61.after)


def test_a_field_listed_under_its_parameterised_name_counts_only_when_it_names_the_drawn_field() -> None:
    block = (
        "Register LEDC_CHn_CONF0_REG (n: 0-5)\nAddress: 0x0000+0x14*n\nReset value: 0x00000000\nFields:\n"
        "- LEDC_TIMER_SEL_CHn [1:0] (R/W) reset 0x0: Selects the timer of channel n. "
        "(the register drawing labels it LEDC_TIMER_SEL_CH0)\n"
        "- LEDC_PARA_UP_CHn [4] (WT) reset 0x0: Updates the duty of channel n."
    )
    (fields,) = rc.registers_in_chunk(block).fields.values()
    assert "LEDC_TIMER_SEL_CH0" in fields  # accounted for by the explicit drawn name
    assert "LEDC_PARA_UP_CH0" not in fields  # a bare parameterised name does not stand in for it
