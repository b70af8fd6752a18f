"""ingest_source.py on small headers written for the purpose, plus a lean pass over a real ESP-IDF."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import capability_headers
import header_checks
import header_scan
import ingest_source
from chip_vocab import chip_ids
from lexicon import NO_LEXICON, Lexicon
from schema import make_row, read_jsonl, validate_row

FIXTURES = Path(__file__).parent / "fixtures" / "src"
IDF = FIXTURES / "idf"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("src") / "src_chunks.jsonl"
    assert ingest_source.main(["--idf-path", str(IDF), "--out-path", str(out)]) == 0
    return list(read_jsonl(out))


def _by_path(rows: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    found = [r for r in rows if r["file_path"].endswith(suffix)]
    assert found, f"no rows for {suffix}"
    return found


def test_a_register_without_field_comments_takes_its_struct_typedefs_fields(
    rows: list[dict[str, Any]],
) -> None:
    (card,) = _by_path(rows, "esp32c3/register/soc/io_mux_reg.h")
    lines = card["text"].splitlines()
    at = lines.index(
        "IO_MUX_GPIO1_REG = PERIPHS_IO_MUX_U_PAD_GPIO1  // [fields from io_mux_struct.h io_mux_gpio_reg_t]"
    )
    # IO_MUX_GPIO1_REG's typedef is io_mux_gpio_reg_t: the pad number dropped
    assert lines[at + 1 : at + 4] == [
        "- MCU_OE [0] (R/W) reset 0x0: Whether the pad drives its output in sleep mode.",
        "- FUN_IE [9] (R/W) reset 0x1: Input enable of the pad.",
        "- FUN_DRV [11:10] (R/W) reset 0x2: Drive strength of the pad.",
    ]
    assert (
        "IO_MUX_DATE_REG = DR_REG_IO_MUX_BASE + 0x1fc  // Version control register "
        "[fields from io_mux_struct.h io_mux_date_reg_t]"
    ) in lines
    # the pad layout written before the first pad register is every pad's, not IO_MUX_GPIO0_REG's:
    # it stays a block of its own, and GPIO0 takes its typedef's fields like the others
    assert lines[lines.index("Field macros:") + 1] == "- FUN_IE [9]"
    gpio0 = lines.index(
        "IO_MUX_GPIO0_REG = PERIPHS_IO_MUX_U_PAD_GPIO0  // [fields from io_mux_struct.h io_mux_gpio_reg_t]"
    )
    assert lines[gpio0 + 1].startswith("- MCU_OE [0] (R/W) reset 0x0")
    # the borrowed names are no macros of the header: find_symbol must not claim they are defined there
    assert "MCU_OE" not in card["symbol_refs"] and "IO_MUX_GPIO1_REG" in card["symbol_refs"]
    # a register with field comments of its own keeps them (uart_struct.h documents clkdiv too)
    (uart,) = _by_path(rows, "esp32c3/register/soc/uart_reg.h")
    assert "fields from" not in uart["text"]


def test_struct_field_lines_reads_only_whole_register_typedefs() -> None:
    text = (
        "typedef struct { uint32_t a; } not_a_register_t;\n"
        "typedef union { struct {\n /** en : R/W; bitpos: [0]; default: 1;\n * Enable. */\n"
        " uint32_t en:1; uint32_t reserved_1:4;\n"
        # ESP32-P4 writes some ranges low first; the member layout decides
        " /** drv : R/W; bitpos: [5:6]; default: 2;\n * Drive. */\n uint32_t drv:2;\n"
        " uint32_t reserved_7:25; }; uint32_t val; } x_conf_reg_t;\n"
        "typedef union { struct { uint32_t undocumented:32; }; uint32_t val; } x_bare_reg_t;\n"
    )
    assert ingest_source.struct_field_lines(text) == {
        "x_conf_reg_t": ["- EN [0] (R/W) reset 0x1: Enable.", "- DRV [6:5] (R/W) reset 0x2: Drive."]
    }


def test_a_field_comments_low_first_range_is_written_high_first() -> None:
    comment = "/** X_DRV : R/W; bitpos: [5:6]; default: 2;\n *  drive */"
    assert ingest_source.field_line("X_DRV", comment, {}) == "- X_DRV [6:5] (R/W) reset 0x2: drive"


def test_rows_are_valid_src_rows_with_provenance(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        validate_row(row)
        assert row["doc_type"] == "src"
        assert row["text"].startswith(row["file_path"])
        assert row["source_doc"] == Path(row["file_path"]).name
        assert row["source_version"] and row["source_commit"]


def test_register_header_becomes_a_card_with_address_expressions(rows: list[dict[str, Any]]) -> None:
    (card,) = _by_path(rows, "esp32c3/register/soc/uart_reg.h")
    body = card["text"].split("\n\n", 1)[1]
    lines = body.splitlines()
    assert lines[:5] == [
        "UART_FIFO_REG(i) = REG_UART_BASE(i) + 0x0  // FIFO data register",
        "- UART_RXFIFO_RD_BYTE [7:0] (RO) reset 0x0: UART $n accesses FIFO via this register.",
        "UART_CLKDIV_REG(i) = REG_UART_BASE(i) + 0x14  // Clock divider configuration",
        "- UART_CLKDIV [11:0] (R/W) reset 0x2B6: The integral part of the frequency divider factor.",
        "- UART_CLKDIV_FRAG [23:20] (R/W) reset 0x0: The decimal part of the frequency divider factor.",
    ]
    # defaults in decimal (34636400) become hex; bits come from _S/_V (BIT(31) -> [31])
    assert "- UART_DATE [27:0] (R/W) reset 0x2108270: Version control register." in lines
    assert "- UART_DATE_FLAG [31] (RO) reset 0x1: Set on production silicon." in lines
    assert "_M" not in card["text"] and "bitpos" not in card["text"]
    # field names stay findable through symbol_refs, each after its register
    assert card["symbol_refs"][:5] == [
        "UART_FIFO_REG",
        "UART_RXFIFO_RD_BYTE",
        "UART_CLKDIV_REG",
        "UART_CLKDIV",
        "UART_CLKDIV_FRAG",
    ]
    assert card["symbol_refs"][-3:] == ["UART_DATE_REG", "UART_DATE", "UART_DATE_FLAG"]
    # the include as the repository path it means for the card's chip
    assert card["file_refs"] == ["components/soc/esp32c3/include/soc/soc.h"]


def test_old_layout_register_header_under_include_soc(rows: list[dict[str, Any]]) -> None:
    (card,) = _by_path(rows, "esp32/include/soc/ledc_reg.h")
    assert card["chips"] == ["esp32"]
    assert "Older layout: register headers under include/soc" in card["text"]
    assert "LEDC_HSCH0_HPOINT_REG = DR_REG_LEDC_BASE + 0x0004" in card["text"]
    assert "LEDC_HPOINT_HSCH0" in card["symbol_refs"]
    # old comment style (``/* X : R/W ;bitpos:[3] ;default: 1'b0 ; */`` + ``/*description: ...*/``)
    assert "- LEDC_IDLE_LV_HSCH0 [3] (R/W) reset 0x0: This bit is used to control" in card["text"]


@pytest.mark.parametrize(
    ("default", "value"),
    [
        ("694", "0x2B6"),
        ("12'h2B6", "0x2B6"),
        ("1'b1", "0x1"),
        ("~22'b0", "0x3FFFFF"),
        ("32'h0_1", "0x1"),
        ("36732976 (0x2308030)", "0x2308030"),
        ("x", None),
        ("", None),
        ("6'b32", None),
        ("35684752 (0x21FFB30) for rev 0.0", None),
    ],
)
def test_parse_default_reads_every_header_notation(default: str, value: str | None) -> None:
    assert ingest_source.parse_default(default) == value


def test_field_line_takes_bits_from_the_macros_and_caps_the_description() -> None:
    comment = "/** F : R/W; bitpos: [3:0]; default: x;\n *  " + "word " * 60 + "\n */"
    line = ingest_source.field_line("F", comment, {"F_S": "4", "F_V": "0xFU"})
    assert line.startswith("- F [7:4] (R/W) reset x: word word")  # _S/_V win: code uses them
    assert line.endswith("…") and len(line.split(": ", 1)[1]) <= ingest_source.DESCRIPTION_CHARS
    assert ingest_source.field_line("G", "", {}) == "- G [?]"
    # a placeholder description is dropped, and its asterisks do not make the comment a banner
    placeholder = "/** P : R/W; bitpos: [7:0]; default: 39;\n *  ******* Description ***********\n */"
    code = f"{placeholder}\n#define P 0xFF\n#define P_M (P_V << P_S)\n#define P_V 0xFF\n#define P_S 0\n"
    (item,) = [i for i in header_scan.scan_header(code) if i.kind == "define" and i.names == ["P"]]
    assert (
        ingest_source.field_line("P", item.comment, {"P_S": "0", "P_V": "0xFF"})
        == "- P [7:0] (R/W) reset 0x27"
    )
    # upstream typos and per-revision notes still yield access and default
    assert (
        ingest_source.field_line("H", "/* H : R/W ;bitpos:4] ;default: 1'b1 ; */", {})
        == "- H [4] (R/W) reset 0x1"
    )


def test_capability_header_is_a_small_chunk_per_peripheral(rows: list[dict[str, Any]]) -> None:
    path = "components/soc/esp32c3/include/soc/soc_caps.h"
    caps = {row["section_path"].rsplit(" > ", 1)[-1]: row for row in _by_path(rows, path)}
    assert sorted(caps) == ["COMMON", "UART"], "one chunk per banner; a flag joins its peripheral's banner"
    uart = caps["UART"]["text"]
    heading = "ESP32-C3 capabilities: UART = Universal Asynchronous Receiver/Transmitter (soc_caps.h)"
    assert uart.startswith(f"{path} > UART\n\n{heading}\n"), "the same checkout's docs spell it out"
    assert "// ESP32-C3 has 2 UARTs\n#define SOC_UART_NUM                (2)\n  = number of UART: 2" in uart
    assert "#define SOC_UART_FIFO_LEN           (128)      /*!< The UART hardware FIFO length */" in uart
    assert "  = UART fifo length: 128" in uart
    assert "#if SOC_UART_NUM > 1\n#define SOC_UART_SUPPORT_WAKEUP_INT" in uart
    assert "  = supports UART wakeup int: yes" in uart, "too few fixture comments to learn INT"
    assert "#define SOC_UART_SUPPORTED              1\n  = supports UART: yes" in uart
    assert caps["COMMON"]["symbol_refs"] == ["SOC_AES_SUPPORTED"], "no AES banner: the flag stays"
    assert "SPDX" not in uart and "pragma once" not in uart


def test_capability_gloss_reads_counts_flags_and_parameters() -> None:
    gloss = capability_headers.capability_gloss
    assert gloss("SOC_CPU_CORES_NUM", "(1U)", "", NO_LEXICON) == "number of CPU cores: 1"
    assert gloss("SOC_RMT_SUPPORT_TX_LOOP_COUNT", "1", "", NO_LEXICON) == ("supports RMT tx loop count: yes")
    assert gloss("SOC_ADC_CHANNEL_NUM", "(7)", "(PERIPH_NUM)", NO_LEXICON) == (
        "number of ADC channel: 7 (for each PERIPH_NUM)"
    )
    lexicon = Lexicon({"mem": "memory"})
    assert gloss("SOC_RMT_MEM_WORDS_PER_CHANNEL", "48 /*!< words */", "", lexicon) == (
        "RMT memory words per channel: 48"
    )


def test_capability_gloss_keeps_digits_that_carry_the_meaning() -> None:
    gloss = capability_headers.capability_gloss
    assert gloss("SOC_I2S_SUPPORTED", "1", "", NO_LEXICON) == "supports I2S: yes"
    assert gloss("SOC_I2C_NUM", "(2U)", "", NO_LEXICON) == "number of I2C: 2"
    assert gloss("SOC_I2C_SUPPORT_10BIT_ADDR", "(1)", "", NO_LEXICON) == "supports I2C 10-bit addr: yes"
    assert gloss("SOC_SHA_SUPPORT_SHA256", "(1)", "", NO_LEXICON) == "supports SHA SHA256: yes"


def test_capability_gloss_spells_out_a_peripheral_outside_its_own_group() -> None:
    lexicon = Lexicon({}, acronyms={"EMAC": "Ethernet MAC"})
    gloss = capability_headers.capability_gloss
    assert gloss("SOC_EMAC_SUPPORTED", "1", "", lexicon, "COMMON") == "supports EMAC (Ethernet MAC): yes"
    assert gloss("SOC_EMAC_SUPPORTED", "1", "", lexicon, "EMAC") == "supports EMAC: yes", (
        "the heading says it"
    )


def test_acronym_spellings_come_from_the_docs_sources() -> None:
    spellings = capability_headers.acronym_spellings(IDF)
    assert spellings["UART"] == "Universal Asynchronous Receiver/Transmitter", (
        "'USB-to-Serial' lacks the letters A, R, T and 'UART Controller' repeats the acronym"
    )
    assert spellings["RMT"] == "Remote Control Transceiver", "leading words before the acronym's letter go"


def test_full_text_headers_keep_each_macro_with_its_comment(rows: list[dict[str, Any]]) -> None:
    (hand_written,) = _by_path(rows, "esp32c3/include/soc/hwcrypto_reg.h")
    assert (
        "/* AES key words: eight consecutive 32-bit registers */\n#define AES_KEY_BASE"
        in hand_written["text"]
    )


def test_structs_stay_whole_and_declare_their_names(rows: list[dict[str, Any]]) -> None:
    (struct,) = _by_path(rows, "esp32c3/register/soc/uart_struct.h")
    assert "typedef union {\n    struct {" in struct["text"] and "} uart_clkdiv_reg_t;" in struct["text"]
    assert struct["symbol_refs"] == ["uart_clkdiv_reg_t", "uart_dev_s", "uart_dev_t", "UART0"]
    (shared,) = _by_path(rows, "components/soc/include/soc/chip_revision.h")
    supported = [chip for chip in chip_ids() if (IDF / "components/soc" / chip).is_dir()]
    assert shared["chips"] == supported and shared["revisions"] == []
    assert shared["symbol_refs"] == ["SOC_REVISION_ENCODE", "soc_chip_revision_t", "soc_revision_decode"]
    assert "extern" not in shared["text"] and "__cplusplus" not in shared["text"]


def test_documentation_only_header_still_gets_a_chunk() -> None:
    doc = "/*\n * @file regi2c_x.h\n * @brief Analog register map notes.\n */"
    items = header_scan.scan_header("/* SPDX-License-Identifier: MIT */\n#pragma once\n" + doc)
    assert [(i.kind, i.text) for i in items] == [("pp", doc)]
    assert header_scan.scan_header("/* SPDX-License-Identifier: MIT */\n#pragma once\n") == []


def test_reg_base_is_kept_in_full(rows: list[dict[str, Any]]) -> None:
    (base,) = _by_path(rows, "esp32c3/register/soc/reg_base.h")
    assert "#define DR_REG_UART1_BASE                       0x60010000" in base["text"]


def test_peripherals_linker_script_is_kept_with_every_provided_instance(rows: list[dict[str, Any]]) -> None:
    (script,) = _by_path(rows, "esp32h2/ld/esp32h2.peripherals.ld")
    assert script["chips"] == ["esp32h2"] and script["revisions"] == []
    assert script["source_doc"] == "esp32h2.peripherals.ld"
    assert "PROVIDE ( I2C1                = 0x60005000 );" in script["text"]
    assert "SPDX" not in script["text"]
    assert script["symbol_refs"] == ["UART0", "I2C0", "I2C1", "UHCI0", "GPIO", "SDM", "LP_INTR", "LPPERI"]
    assert ingest_source.provided_symbols("/* PROVIDE ( X = 1 ); */\nPROVIDE(Y=0x10);\n") == {"Y": 0x10}


def test_census_command_checks_linker_scripts_too(
    tmp_path: Path, rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "no_ld.jsonl"
    kept.write_text("".join(json.dumps(r) + "\n" for r in rows if not r["file_path"].endswith(".ld")))
    assert ingest_source.main(["census", "--idf-path", str(IDF), "--src-chunks", str(kept)]) == 2
    assert "no chunk at all: components/soc/esp32h2/ld/esp32h2.peripherals.ld" in capsys.readouterr().out


def test_silicon_revision_folders_map_to_revisions(rows: list[dict[str, Any]]) -> None:
    revisions = {r["file_path"]: r["revisions"] for r in rows if "/esp32p4/" in r["file_path"]}
    assert revisions["components/soc/esp32p4/register/hw_ver1/soc/ledc_reg.h"] == ["v1.3"]
    assert revisions["components/soc/esp32p4/register/hw_ver3/soc/ledc_reg.h"] == ["mainline"]
    h21 = [r["file_path"] for r in rows if "/esp32h21/" in r["file_path"]]
    assert h21 == ["components/soc/esp32h21/register/hw_ver_mp/soc/lp_apm_reg.h"]


NEW_REVISIONS = FIXTURES / "idf-v6-revisions"


def test_a_newer_releases_sample_and_production_folders_go_by_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ESP32-H4's hw_ver_mp/hw_ver_beta5 (new in v6.0) are ingested without a mapping of their own:
    the production silicon with the chip's one revision, the engineering samples left out, named."""
    out = tmp_path / "src.jsonl"
    assert ingest_source.main(["--idf-path", str(NEW_REVISIONS), "--out-path", str(out)]) == 0
    rows = list(read_jsonl(out))
    h4 = {r["file_path"]: r["revisions"] for r in rows if "/esp32h4/" in r["file_path"]}
    assert h4 == {
        "components/soc/esp32h4/include/hw_ver_mp/soc/interrupts.h": [],
        "components/soc/esp32h4/register/hw_ver_mp/soc/tee_reg.h": [],
    }
    card = next(r["text"] for r in rows if r["file_path"].endswith("hw_ver_mp/soc/tee_reg.h"))
    assert "reset 0x0" in card and "reset 0x3" not in card
    err = capsys.readouterr().err
    assert "left out 2 headers of esp32h4/hw_ver_beta5 (not a revision chips.yaml names)" in err


def _tree_with(tmp_path: Path, folder: str) -> Path:
    tree = tmp_path / "idf"
    shutil.copytree(NEW_REVISIONS, tree)
    soc = tree / "components/soc" / folder / "soc"
    soc.mkdir(parents=True)
    (soc / "x_reg.h").write_text("#define X_REG 1\n")
    return tree


@pytest.mark.parametrize(
    "folder",
    ["esp32p4/register/hw_ver9", "esp32p4/register/hw_ver_mp"],
    ids=["numbered", "production-of-a-two-revision-chip"],
)
def test_a_revision_folder_no_rule_covers_is_refused_by_name_before_reading(
    tmp_path: Path, folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A numbered folder means a chip-specific revision, and hw_ver_mp of a chip with two manuals
    could be either: a guess would put a wrong revision on registers."""
    tree = _tree_with(tmp_path, folder)
    out = tmp_path / "src.jsonl"
    assert ingest_source.main(["--idf-path", str(tree), "--out-path", str(out)]) == 2
    err = capsys.readouterr().err
    name = f"esp32p4/{folder.rsplit('/', 1)[1]}"
    assert f"  {name} (1 headers); chips.yaml revisions of esp32p4: mainline, v1.3" in err
    assert f"--skip-revision-folder {name}" in err
    assert "scan" not in err  # refused before the first header is read
    assert not out.exists()


def test_a_skipped_revision_folder_lets_the_ingest_finish_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree_with(tmp_path, "esp32p4/register/hw_ver9")
    out = tmp_path / "src.jsonl"
    argv = ["--idf-path", str(tree), "--out-path", str(out), "--skip-revision-folder", "esp32p4/hw_ver9"]
    assert ingest_source.main(argv) == 0
    paths = {r["file_path"] for r in read_jsonl(out)}
    assert "components/soc/esp32h4/register/hw_ver_mp/soc/tee_reg.h" in paths
    assert not any("hw_ver9" in p for p in paths)
    assert "left out 1 headers of esp32p4/hw_ver9" in capsys.readouterr().err


def test_skipping_a_folder_the_tree_lacks_names_the_folders_it_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--idf-path", str(NEW_REVISIONS), "--out-path", str(tmp_path / "o.jsonl")]
    assert ingest_source.main([*argv, "--skip-revision-folder", "esp32h4/hw_ver_beta6"]) == 2
    err = capsys.readouterr().err
    assert "--skip-revision-folder esp32h4/hw_ver_beta6: no such folder" in err
    assert "its revision folders: esp32h4/hw_ver_beta5, esp32h4/hw_ver_mp" in err


@pytest.mark.parametrize("make_tree", ["missing", "not_idf"])
def test_bad_idf_path_exits_2(tmp_path: Path, make_tree: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nowhere"
    if make_tree == "not_idf":
        path.mkdir()
    assert ingest_source.main(["--idf-path", str(path), "--out-path", str(tmp_path / "o.jsonl")]) == 2
    assert "is not an ESP-IDF tree: components/soc is missing" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_census_counts_every_declared_symbol_and_catches_a_loss(rows: list[dict[str, Any]]) -> None:
    headers, _ = ingest_source.discover_headers(IDF)
    results = {h.rel_path: ingest_source.header_rows(h, "v", "c") for h in headers}
    declared, reached, gaps = header_checks.census(results)
    assert declared == reached and gaps == [] and declared > 30
    card = results["components/soc/esp32c3/register/soc/uart_reg.h"]
    card.rows[0]["symbol_refs"].remove("UART_CLKDIV_FRAG")
    declared, reached, gaps = header_checks.census(results)
    assert reached == declared - 1
    assert gaps == [("components/soc/esp32c3/register/soc/uart_reg.h", ["UART_CLKDIV_FRAG"])]


def test_census_command_fails_on_a_truncated_corpus(
    tmp_path: Path, rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    complete = tmp_path / "complete.jsonl"
    complete.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert ingest_source.main(["census", "--idf-path", str(IDF), "--src-chunks", str(complete)]) == 0
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(json.dumps(r) + "\n" for r in rows if "soc_caps" not in r["file_path"]))
    assert ingest_source.main(["census", "--idf-path", str(IDF), "--src-chunks", str(truncated)]) == 2
    out = capsys.readouterr()
    assert "no chunk at all: components/soc/esp32c3/include/soc/soc_caps.h" in out.out


def _trm_row(chip: str, text: str) -> dict[str, Any]:
    return make_row(
        text=text,
        doc_type="trm",
        chips=[chip],
        source_doc="d",
        section_path="d",
        file_path="f",
        chunk_index=0,
    )


def test_check_registers_classifies_each_trm_name(rows: list[dict[str, Any]]) -> None:
    trm = [
        _trm_row(
            "esp32c3",
            "UART > Registers\n\nRegister UART_CLKDIV_REG\nAddress: 0x0014\n\n"
            "Register AES_KEY_n_REG (n: 0-7)\nAddress: 0x0000+4*n\n\n"
            "Register LP_UART_FIFO_REG\nAddress: 0x0000\n\nRegister UART_MISSING_REG\nAddress: 0x0090",
        )
    ]
    report = header_checks.check_registers(trm, rows)
    assert list(report) == ["esp32c3"]
    facts = report["esp32c3"]
    assert facts["categories"] == {"exact": 1, "parameterised": 1, "prefix-differs": 1, "absent": 1}
    assert facts["resolved"] == 2 and facts["share"] == 0.5
    assert facts["samples"]["absent"] == ["UART_MISSING_REG"]


def test_check_registers_command_enforces_min_share(
    tmp_path: Path, rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trm = tmp_path / "trm.jsonl"
    trm.write_text(json.dumps(_trm_row("esp32c3", "Register UART_CLKDIV_REG\n\nRegister NOPE_REG")) + "\n")
    args = ["check-registers", "--trm-chunks", str(trm), "--src-chunks", str(src)]
    assert ingest_source.main(args) == 0
    assert "1/2 TRM registers (50.0%)" in capsys.readouterr().out
    assert ingest_source.main([*args, "--min-share", "0.75"]) == 2
    assert (
        ingest_source.main(["check-registers", "--trm-chunks", str(tmp_path / "x"), "--src-chunks", str(src)])
        == 2
    )


@pytest.mark.corpus
def test_real_idf_chip_headers_fully_reach_chunks() -> None:
    """One chip of a real ESP-IDF (IDF_PATH): every declared symbol reaches a chunk, cards stay small."""
    idf = os.environ.get("IDF_PATH")
    if not idf:
        pytest.skip("IDF_PATH is not set (an ESP-IDF checkout)")
    headers, _ = ingest_source.discover_headers(Path(idf))
    c3 = [h for h in headers if "/esp32c3/" in h.rel_path]
    assert len(c3) > 50
    results = {h.rel_path: ingest_source.header_rows(h, "v", "c") for h in c3}
    declared, reached, gaps = header_checks.census(results)
    assert gaps == [] and declared == reached > 5000
    card = results["components/soc/esp32c3/register/soc/uart_reg.h"]
    assert card.card and any("UART_CLKDIV_REG(i) = REG_UART_BASE(i) + 0x14" in r["text"] for r in card.rows)
    assert all(len(r["text"].split()) <= ingest_source.CARD_WORDS for r in card.rows)
    assert "- UART_CLKDIV [11:0] (R/W) reset 0x2B6: " in "\n".join(r["text"] for r in card.rows)
    caps = results["components/soc/esp32c3/include/soc/soc_caps.h"]
    assert any("#define SOC_UART_NUM" in r["text"] for r in caps.rows)


def test_oversized_struct_is_cut_between_members_only() -> None:
    members = [f"    volatile uint32_t reg{n}; /* {'word ' * 40}*/" for n in range(40)]
    code = "typedef struct big_dev_s {\n" + "\n".join(members) + "\n} big_dev_t;"
    root = ingest_source.text_sections("big_struct.h", header_scan.scan_header(code))
    (section,) = root.children
    assert section.title == "big_dev_s / big_dev_t"
    text = "\n".join(b.text for b in section.blocks)
    assert text == code
    assert section.blocks[0].text.startswith("typedef struct big_dev_s {\n    volatile uint32_t reg0;")
    assert section.blocks[-1].text.endswith("reg39; /* " + "word " * 40 + "*/\n} big_dev_t;")
    assert all(b.symbol_refs == ["big_dev_s", "big_dev_t"] for b in section.blocks)
    small = ingest_source.text_sections("s.h", header_scan.scan_header("typedef struct { int a; } s_t;"))
    assert small.children == [] and small.blocks[0].text == "typedef struct { int a; } s_t;"


def test_a_field_comment_wrapped_before_its_default_keeps_the_default() -> None:
    """Long field names push ``default:`` onto the comment's next `` *`` line (ESP32-P4, ESP32-S31)."""
    comment = (
        "/** AXI_PERF_MON_SEL_AG0_RD_BANDW_DATA_CNT_VALID_STROBE_NUM : R/W; bitpos: [15:8];\n"
        " *  default: 3;\n *  data valid scaling multiplier\n */"
    )
    line = ingest_source.field_line("AXI_PERF_MON_SEL_AG0_RD_BANDW_DATA_CNT_VALID_STROBE_NUM", comment, {})
    assert line.endswith("[15:8] (R/W) reset 0x3: data valid scaling multiplier")
    value_wrapped = "/** X_EN : R/W; bitpos: [0]; default:\n *  1;\n *  enable\n */"
    assert ingest_source.field_line("X_EN", value_wrapped, {}) == "- X_EN [0] (R/W) reset 0x1: enable"


def test_shared_headers_hold_for_the_chips_the_release_supports(tmp_path: Path) -> None:
    """soc/include is shared by the chips with a folder of their own in that tree; an older release
    must not claim chips it predates."""
    out = tmp_path / "src.jsonl"
    assert ingest_source.main(["--idf-path", str(NEW_REVISIONS), "--out-path", str(out)]) == 0
    shared = [r for r in read_jsonl(out) if r["file_path"].startswith("components/soc/include/")]
    present = sorted(p.name for p in (NEW_REVISIONS / "components/soc").iterdir() if p.name != "include")
    assert shared and all(sorted(r["chips"]) == present for r in shared)
