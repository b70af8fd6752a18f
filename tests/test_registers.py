"""registers.py against a real LanceDB table built in tmp_path from fixture rows.

The register tool filters exactly on symbol_refs/doc_type/chips and never searches by vector, so
the table is created with 4-wide zero vectors: their values cannot influence any answer here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import lancedb
import pytest

import chunk_format
import dedup_chunks
import ingest_source
import register_bases
import register_index
import register_views
import registers
from schema import arrow_schema, make_row, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "src"


def _trm_rows() -> list[dict[str, Any]]:
    rows = []
    for index, spec in enumerate(json.loads((FIXTURES / "trm_registers.json").read_text())):
        rows.append(
            make_row(
                text=spec["text"],
                doc_type="trm",
                chips=[spec["chip"]],
                revisions=spec["revisions"],
                source_doc=spec["source_doc"],
                section_path=spec["section_path"],
                file_path=spec["file_path"],
                chunk_index=index,
                symbol_refs=[
                    line.split()[1] for line in spec["text"].splitlines() if line.startswith("Register ")
                ],
                source_version="trm-fixture",
                source_commit="0" * 40,
            )
        )
    return rows


def _src_rows() -> list[dict[str, Any]]:
    headers, _ = ingest_source.discover_headers(FIXTURES / "idf")
    scripts = ingest_source.discover_linker_scripts(FIXTURES / "idf")
    return [row for h in headers for row in ingest_source.header_rows(h, "v0-fixture", "1" * 40).rows] + [
        row for s in scripts for row in ingest_source.linker_rows(s, "v0-fixture", "1" * 40).rows
    ]


def _zero_vector_table(path: Path, rows: list[dict[str, Any]]) -> Any:
    """A real table of ``rows`` in ``path`` with zero vectors: the register tool never reads them."""
    rows = [{**row, "vector": [0.0] * 4, "windows": [[0.0] * 4]} for row in rows]
    return lancedb.connect(path).create_table("chunks", rows, schema=arrow_schema(4))


def _fixture_table(path: Path) -> Any:
    """A real table of the fixture rows in ``path``; a fresh one has no chip index built yet."""
    return _zero_vector_table(path, _trm_rows() + _src_rows())


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _fixture_table(tmp_path_factory.mktemp("store"))


def test_parse_register_block_reads_every_field_line() -> None:
    text = (
        "Register I2C_SCL_HIGH_PERIOD_REG\nAddress: 0x0038\nReset value: 0x00000000\nFields:\n"
        "- I2C_SCL_WAIT_HIGH_PERIOD [15:9] (R/W) reset 0x0: waiting period\n"
        "- I2C_SCL_HIGH_PERIOD [8:0] (R/W) reset 0x0: how long SCL remains high\n"
        "- I2C_SCL_FLAG [16] reset 0x1: no access suffix\n"
        "- (reserved) [31:17] reset 0x0\n\nAfter the block: not a field"
    )
    register = chunk_format.parse_register_block(text)
    assert register["name"] == "I2C_SCL_HIGH_PERIOD_REG"
    assert register["address"] == "0x0038"
    assert register["reset"] == "0x00000000"
    assert [f["name"] for f in register["fields"]] == [
        "I2C_SCL_WAIT_HIGH_PERIOD",
        "I2C_SCL_HIGH_PERIOD",
        "I2C_SCL_FLAG",
        "(reserved)",
    ]
    assert register["fields"][0] == {
        "name": "I2C_SCL_WAIT_HIGH_PERIOD",
        "bits": "15:9",
        "access": "R/W",
        "reset": "0x0",
        "description": "waiting period",
    }
    assert register["fields"][2]["access"] is None and register["fields"][2]["bits"] == "16"


def test_parse_register_block_reads_parameter_ranges_and_rejects_other_text() -> None:
    register = chunk_format.parse_register_block("Register AES_KEY_n_REG (n: 0-7)\nAddress: 0x0000+4*n")
    assert register["parameters"] == {"n": chunk_format.ParameterRange(((0, 7),))}
    assert register["address"] == "0x0000+4*n"
    with pytest.raises(ValueError, match="Register NAME"):
        chunk_format.parse_register_block("Address: 0x0000")


@pytest.mark.parametrize(
    ("note", "parameters"),
    [
        ("n: 0-21, 26-48", {"n": chunk_format.ParameterRange(((0, 21), (26, 48)))}),  # pads past a gap
        ("x: 0-1, 20^1, 32-33", {"x": chunk_format.ParameterRange(((0, 1), (20, 20), (32, 33)))}),  # footnote
        ("n: GPIO0-GPIO21, GPIO26-GPIO46", {"n": chunk_format.ParameterRange(((0, 21), (26, 46)), "GPIO")}),
        (
            "n: 0-1, m: 0-3",
            {"n": chunk_format.ParameterRange(((0, 1),)), "m": chunk_format.ParameterRange(((0, 3),))},
        ),
        ("n: see the table", {"n": None}),
        ("m = 4, 5", {"m": chunk_format.ParameterRange(((4, 4), (5, 5)))}),  # a few manuals write "="
    ],
)
def test_parameter_notes_keep_every_span_and_a_named_prefix(note: str, parameters: dict[str, Any]) -> None:
    assert chunk_format.parameter_ranges(note) == parameters


def test_an_instance_past_a_gap_or_spelled_with_a_prefix_is_the_manuals_register() -> None:
    index = registers.ChipIndex("esp32s2", None)
    for text in (
        "IO MUX > Registers\n\nRegister IO_MUX_n_REG (n: GPIO0-GPIO21, GPIO26-GPIO46)\nAddress: 0x0004+4*n",
        "GPIO > Registers\n\nRegister GPIO_PINn_REG (n: 0-21, 26-46)\nAddress: 0x0074+4*n",
    ):
        for register in chunk_format.register_blocks(text):
            index.add_trm_register(register, {})
    assert registers._find_trm(index, "IO_MUX_GPIO30_REG")[1] == {"n": "30"}
    assert registers._find_trm(index, "GPIO_PIN30_REG")[1] == {"n": "30"}, "26-46: not only the first span"
    assert registers._find_trm(index, "GPIO_PIN23_REG") is None, "in the gap"
    assert registers._find_trm(index, "IO_MUX_30_REG") is None, "the manual spells it GPIO30"
    names = [name for name, _ in register_bases.manual_instances(index.trm["IO_MUX_n_REG"][0].register)]
    assert names[:2] == ["IO_MUX_GPIO0_REG", "IO_MUX_GPIO1_REG"] and "IO_MUX_GPIO26_REG" in names
    assert len(names) == 22 + 21


def test_a_parameter_note_written_with_equals_keeps_channels_apart() -> None:
    # ESP32-C3's RMT documents channels 0-1 and 2-3 as two registers, "(n = 0, 1)" and "(m = 2, 3)":
    # unread, the second matched any instance and channel 2 was answered with channel 0's address
    index = registers.ChipIndex("esp32c3", None)
    text = (
        "RMT > Registers\n\nRegister RMT_CHnCONF0_REG (n = 0, 1)\nAddress: 0x0010, 0x0014\n\n"
        "Register RMT_CHmCONF0_REG (m = 2, 3)\nAddress: 0x0018, 0x0020"
    )
    for register in chunk_format.register_blocks(text):
        index.add_trm_register(register, {})
    found = registers._find_trm(index, "RMT_CH2CONF0_REG")
    assert found is not None and found[0].register["name"] == "RMT_CHmCONF0_REG"
    found = registers._find_trm(index, "RMT_CH1CONF0_REG")
    assert found is not None and found[0].register["name"] == "RMT_CHnCONF0_REG"


def test_register_blocks_splits_a_chunk_and_ignores_prose() -> None:
    text = (
        "UART > Registers\n\nRegister A_REG\nAddress: 0x0000\nFields:\n- A [0] (RO) reset 0x0: a\n\n"
        "Register B_REG\nAddress: 0x0004\nFields:\n- B [1:0] (R/W) reset 0x1: b"
    )
    blocks = chunk_format.register_blocks(text)
    assert [(b["name"], b["address"], [f["name"] for f in b["fields"]]) for b in blocks] == [
        ("A_REG", "0x0000", ["A"]),
        ("B_REG", "0x0004", ["B"]),
    ]
    assert chunk_format.register_blocks("Prose that mentions the Register A_REG in passing.") == []


def test_parameter_regex_matches_instances_only() -> None:
    pattern = chunk_format.parameter_regex("AES_KEY_n_REG", {"n": chunk_format.ParameterRange(((0, 7),))})
    assert pattern is not None
    match = pattern.match("AES_KEY_3_REG")
    assert match is not None and match.group("p_n") == "3"
    assert pattern.match("AES_KEY_X_REG") is None
    assert chunk_format.parameter_regex("UART_CLKDIV_REG", {}) is None


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("DR_REG_UART_BASE + 0x14", 0x60000014),
        ("REG_UART_BASE(1) + 0x4", 0x60010004),
        ("(BIT(3))", 8),
        ("0x10U << 4", 0x100),
        ("UNKNOWN_MACRO + 1", None),
        ("(DR_REG_UART_BASE + (2) * 0x10000 + ( (2) > 1 ? 0xe000 : 0 ) )", 0x6002E000),
        ("(1 > 1 ? 0xe000 : 1 ? 0x10 : 0)", 0x10),
        ("X > 1 ? 2 : 3", None),
        ("__import__('os')", None),
    ],
)
def test_evaluate_expands_macros_and_refuses_what_it_cannot_compute(
    expression: str, value: int | None
) -> None:
    macros = {
        "DR_REG_UART_BASE": registers.Macro("DR_REG_UART_BASE", None, "0x60000000", "reg_base.h", ()),
        "REG_UART_BASE": registers.Macro(
            "REG_UART_BASE", ("i",), "(DR_REG_UART_BASE + (i) * 0x10000)", "soc.h", ()
        ),
    }
    assert registers.evaluate(expression, macros) == value


def test_lookup_by_name_joins_manual_and_header(table: Any) -> None:
    answer = registers.lookup_register(table, "ESP32-C3", name="UART_CLKDIV_REG")
    assert answer["chip"] == "esp32c3" and answer["revision"] is None and answer["revision_scope"] is None
    assert answer["address"] == "0x0014"
    assert answer["address_absolute"] == "0x60000014"
    assert answer["reset"] == "0x000002B6"
    assert [f["name"] for f in answer["fields"]] == ["UART_CLKDIV", "UART_CLKDIV_FRAG", "(reserved)"]
    assert answer["chapter"] == "UART Controller (UART)"
    assert answer["header_defines"][0]["name"] == "UART_CLKDIV_REG(i)"
    assert answer["header_defines"][0]["expression"] == "REG_UART_BASE(i) + 0x14"
    assert answer["header_defines"][0]["file_path"] == "components/soc/esp32c3/register/soc/uart_reg.h"


def test_the_chip_index_keeps_a_manual_register_citation_without_its_chunk_text(table: Any) -> None:
    """The index is held per chip for the server's life: the chunk text it parsed stays in the store."""
    index = register_index.chip_index(table, "esp32c3", None)
    (entry,) = index.trm["UART_CLKDIV_REG"]
    assert set(entry.row) == set(register_index.CITED_COLUMNS)
    assert entry.row["file_path"] and entry.row["section_path"] and entry.row["source_doc"]


def test_a_server_keeps_the_most_recently_used_chip_indexes_and_lets_older_ones_go(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays bounded however many chips a team server is asked about; a chip let go is
    rebuilt on its next lookup, with the same answer."""
    monkeypatch.setattr(register_index, "INDEXES_KEPT", 2)
    monkeypatch.setattr(register_index, "_INDEX_CACHE", register_index.OrderedDict())
    first = register_index.chip_index(table, "esp32c3", None)
    register_index.chip_index(table, "esp32", None)
    assert register_index.chip_index(table, "esp32c3", None) is first, "a cached index is reused"
    register_index.chip_index(table, "esp32s3", None)
    held = [key[2] for key in register_index._INDEX_CACHE]
    assert held == ["esp32c3", "esp32s3"], "the least recently used (esp32) went"
    register_index.chip_index(table, "esp32", None)
    rebuilt = register_index.chip_index(table, "esp32c3", None)
    assert [key[2] for key in register_index._INDEX_CACHE] == ["esp32", "esp32c3"]
    assert rebuilt is not first and rebuilt.trm.keys() == first.trm.keys()


def test_field_lines_of_different_registers_share_their_repeated_strings() -> None:
    """A server holds the fields of every chip asked about: equal parts are stored once."""
    first = chunk_format.parse_register_block(
        "Register A_REG\nAddress: 0x0000\nFields:\n- EN [0] (R/W) reset 0x0: Enables the unit."
    )["fields"][0]
    second = chunk_format.parse_register_block(
        "Register B_REG\nAddress: 0x0004\nFields:\n- " + "EN" + " [0] (R/W) reset 0x0: Enables the unit."
    )["fields"][0]
    assert first == second
    assert all(first[key] is second[key] for key in ("name", "bits", "access", "reset", "description"))


def test_lookup_infers_absolute_address_from_the_chapter_base(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_ID_REG")
    assert answer["header_defines"] == []
    assert answer["address_absolute"] == "0x60000080"
    assert "REG_UART_BASE" in answer["absolute_from"]


def test_parameterised_name_answers_an_instance(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="aes_key_3_reg")
    assert answer["name"] == "AES_KEY_3_REG"
    assert answer["documented_as"] == "AES_KEY_n_REG (n: 0-7)"
    assert answer["instance"] == {"n": "3"}
    assert answer["address"] == "0x000C"
    assert answer["address_absolute"] == "0x6003A00C"
    assert answer["header_defines"][0]["name"] == "AES_KEY_3_REG"


def test_parameterised_name_outside_its_range_is_unknown(table: Any) -> None:
    with pytest.raises(ValueError, match=r"no register 'AES_KEY_9_REG' on esp32c3; closest names: .*AES_KEY"):
        registers.lookup_register(table, "esp32c3", name="AES_KEY_9_REG")


def test_field_name_answers_with_its_register(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_CLKDIV_FRAG")
    assert answer["name"] == "UART_CLKDIV_REG" and answer["matched_field"] == "UART_CLKDIV_FRAG"


def test_unknown_name_lists_closest_names(table: Any) -> None:
    with pytest.raises(ValueError, match=r"closest names: UART_CLKDIV_REG"):
        registers.lookup_register(table, "esp32c3", name="UART_CLKDIF_REG")


def test_address_lookup_absolute_offset_and_other_instance(table: Any) -> None:
    assert registers.lookup_register(table, "esp32c3", address="0x60000014")["name"] == "UART_CLKDIV_REG"
    by_offset = registers.lookup_register(table, "esp32c3", address=0x14, peripheral="UART")
    assert by_offset["name"] == "UART_CLKDIV_REG" and by_offset["queried_address"] == "0x14 in UART"
    uart1 = registers.lookup_register(table, "esp32c3", address="0x6001_0014")
    assert uart1["name"] == "UART_CLKDIV_REG" and uart1["queried_instance"] == 1
    assert uart1["address_absolute"] == "0x60010014" and uart1["absolute_from"].endswith("(instance 1)")


def test_instances_stop_at_another_peripherals_base(table: Any) -> None:
    # REG_UART_BASE(2) would be 0x60020000, which is the I2C block, not a third UART
    with pytest.raises(
        ValueError, match=r"no register at 0x60020014 on esp32c3; it lies at DR_REG_I2C_EXT_BASE"
    ):
        registers.lookup_register(table, "esp32c3", address="0x60020014")


def test_absolute_address_names_the_macro_chain(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_CLKDIV_REG")
    assert answer["absolute_from"] == (
        "UART_CLKDIV_REG(i) = REG_UART_BASE(i) + 0x14 (uart_reg.h); "
        "REG_UART_BASE(i) = (DR_REG_UART_BASE + (i) * 0x10000) (soc.h); "
        "DR_REG_UART_BASE = 0x60000000 (reg_base.h) (instance 0)"
    )


def test_address_without_register_names_the_peripheral(table: Any) -> None:
    with pytest.raises(
        ValueError, match=r"no register at 0x60000044 on esp32c3; it lies at DR_REG_UART_BASE"
    ):
        registers.lookup_register(table, "esp32c3", address="0x60000044")
    with pytest.raises(ValueError, match="pass peripheral"):
        registers.lookup_register(table, "esp32c3", address="0x44")


def test_esp32p4_revisions_are_kept_apart_and_compared(table: Any) -> None:
    mainline = registers.lookup_register(table, "esp32p4", name="LEDC_CH0_CONF0_REG")
    assert mainline["revision"] == "mainline"
    assert mainline["revision_scope"].startswith("ONLY revision mainline")
    assert mainline["header_defines"][0]["file_path"].endswith("hw_ver3/soc/ledc_reg.h")
    assert mainline["address_absolute"] == "0x500D3000"
    diff = registers.lookup_register(table, "esp32p4", name="LEDC_CH0_CONF0_REG", compare_with="v1.3")[
        "compare"
    ]
    assert diff["with"] == "esp32p4 v1.3" and diff["present"] is True
    assert diff["added"] == ["LEDC_PARA_UP_CH0"]
    assert diff["removed"] == ["LEDC_OVF_CNT_EN_CH0"]
    assert diff["changed"] == [{"name": "LEDC_IDLE_LV_CH0", "bits": {"from": "3", "to": "2"}}]
    old = registers.lookup_register(table, "esp32p4", name="LEDC_CH0_CONF0_REG", revision="v1.3")
    assert old["header_defines"][0]["file_path"].endswith("hw_ver1/soc/ledc_reg.h")


def test_compare_with_another_chip(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_CLKDIV_REG", compare_with="ESP32-C6")
    assert answer["compare"]["added"] == ["UART_CLKDIV_SYNC_EN"]
    assert answer["compare"]["removed"] == []
    missing = registers.lookup_register(table, "esp32c3", name="UART_ID_REG", compare_with="esp32c6")
    assert missing["compare"]["present"] is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chip": "esp33", "name": "UART_CLKDIV_REG"}, "valid chips: esp32, "),
        ({"chip": "esp32c3", "name": "UART_CLKDIV_REG", "revision": "v9"}, "valid revisions: mainline"),
        ({"chip": "esp32c3", "name": "X' OR 1=1 --"}, "must be a C identifier"),
        ({"chip": "esp32c3"}, "exactly one of name"),
        ({"chip": "esp32c3", "name": "A_REG", "address": "0x0"}, "exactly one of name"),
        ({"chip": "esp32c3", "address": "sixty"}, "address must be a number"),
        ({"chip": "esp32c3", "name": "UART_CLKDIV_REG", "compare_with": "nothing"}, "neither a chip"),
        ({"chip": "esp32p4", "name": "LEDC_CH0_CONF0_REG", "compare_with": "mainline"}, "being looked up"),
        ({"chip": "esp32s2", "name": "UART_CLKDIV_REG"}, "no TRM registers or SoC headers for esp32s2"),
    ],
)
def test_bad_input_raises_value_error_naming_the_fix(
    table: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        registers.lookup_register(table, **kwargs)


def test_header_only_register_answers_with_fields_and_composed_reset(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_DATE_REG")
    assert answer["note"].startswith("not in the Technical Reference Manual; fields and reset from")
    assert [(f["name"], f["bits"], f["access"], f["reset"], f["sources"]) for f in answer["fields"]] == [
        ("UART_DATE", "27:0", "R/W", "0x2108270", ["headers"]),
        ("UART_DATE_FLAG", "31", "RO", "0x1", ["headers"]),
    ]
    # 0x2108270 in bits 27:0 plus 1 in bit 31
    assert answer["reset"] == "0x82108270"
    assert answer["reset_from"] == "composed from the header's field defaults"
    assert answer["sources"] == {"manual": None, "headers": "components/soc/esp32c3/register/soc/uart_reg.h"}
    assert answer["disagreements"] == []


def test_manual_and_header_disagreements_are_listed_not_hidden(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_CONF0_REG")
    assert answer["reset"] == "0x1000001C" and answer["reset_from"] == "manual (Reset value)"
    assert answer["reset_by_source"] == {"manual": "0x1000001C", "headers": "0x0000001C"}
    found = {(d["kind"], d.get("field") or d.get("manual")) for d in answer["disagreements"]}
    assert found == {
        ("reset differs", "0x1000001C"),
        ("field renamed", "UART_TXFIFO_RST"),
        ("field only in manual", "UART_PARITY_EN"),
        ("access differs", "UART_STOP_BIT_NUM"),
        ("bits differ", "UART_SW_RTS"),
    }
    renamed = next(d for d in answer["disagreements"] if d["kind"] == "field renamed")
    assert renamed == {
        "kind": "field renamed",
        "manual": "UART_TXFIFO_RST",
        "headers": "UART_TXFIFO_RESET",
        "bits": "18",
    }
    sources = {f["name"]: f["sources"] for f in answer["fields"]}
    assert sources["UART_BIT_NUM"] == ["manual", "headers"] and sources["UART_PARITY_EN"] == ["manual"]
    assert sources["UART_TXFIFO_RESET"] == ["headers"]


def test_agreeing_sources_report_no_disagreement(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="UART_CLKDIV_REG")
    assert answer["disagreements"] == []
    assert answer["reset_by_source"] == {"manual": "0x000002B6", "headers": "0x000002B6"}


def test_a_whole_register_field_named_after_its_register_is_the_same_field() -> None:
    manual = {
        "name": "AES_KEY_n_REG",
        "reset": "0x00000000",
        "fields": [
            {
                "name": "AES_KEY_3_REG(3:0-7)",
                "bits": "31:0",
                "access": "R/W",
                "reset": "0x0",
                "description": "",
            }
        ],
    }
    header = [{"name": "AES_KEY_3", "bits": "31:0", "access": "WO", "reset": "0x0", "description": "Key."}]
    merged = registers.merge_views(manual, header, "aes_reg.h")
    assert [(f["name"], f["sources"]) for f in merged["fields"]] == [
        ("AES_KEY_3_REG(3:0-7)", ["manual", "headers"])
    ]
    # the pair is still compared: only the access differs
    assert [d["kind"] for d in merged["disagreements"]] == ["access differs"]
    renamed = [{**header[0], "name": "AES_KEY_WORD"}]
    other = {**manual, "fields": [{**manual["fields"][0], "name": "AES_KEY"}]}
    assert [d["kind"] for d in registers.merge_views(other, renamed, "aes_reg.h")["disagreements"]] == [
        "field renamed"
    ]


def test_compose_reset_names_every_field_that_blocks_it() -> None:
    fields = [
        {"name": "A", "bits": "3:0", "reset": "0xF"},
        {"name": "B", "bits": "8", "reset": "0x1"},
    ]
    assert register_views.compose_reset(fields) == (0x10F, "")
    undefined = [{"name": "C", "bits": "9", "reset": "x"}, {"name": "E", "bits": "11:10", "reset": None}]
    assert register_views.compose_reset([*fields, *undefined]) == (
        None,
        "no reset: undefined (x) upstream for C [9]; no default for E [11:10]",
    )
    assert register_views.compose_reset(undefined[:1]) == (
        None,
        "no reset: every field's default is undefined (x) upstream",
    )
    assert register_views.compose_reset([{"name": "D", "bits": "?", "reset": "0x0"}])[1] == (
        "no reset: no bit range for D"
    )
    # the bits that do have a default still reset to a known value
    assert register_views.partial_reset([*fields, *undefined]) == {
        "value": "0x0000010F",
        "undefined_bits": "0x00000E00",
    }
    assert register_views.partial_reset(fields) is None


def test_base_plus_zero_and_every_instance_of_a_parameterised_register_resolve(table: Any) -> None:
    # AES_KEY_n_REG (n: 0-7) at 0x0000+4*n: the headers only define AES_KEY_3_REG
    first = registers.lookup_register(table, "esp32c3", address="0x6003A000")
    assert first["name"] == "AES_KEY_0_REG" and first["instance"] == {"n": "0"}
    assert first["address_absolute"] == "0x6003A000"
    assert first["absolute_from"] == "documented offset + DR_REG_AES_BASE (0x6003A000)"
    assert registers.lookup_register(table, "esp32c3", address="0x6003A01C")["name"] == "AES_KEY_7_REG"
    header = registers.lookup_register(table, "esp32c3", address="0x6003A00C")
    assert header["name"] == "AES_KEY_3_REG" and header["header_defines"][0]["name"] == "AES_KEY_3_REG"
    # a manual-only register answers in every instance of its peripheral
    uart1_id = registers.lookup_register(table, "esp32c3", address="0x60010080")
    assert uart1_id["name"] == "UART_ID_REG" and uart1_id["address_absolute"] == "0x60010080"


@pytest.mark.parametrize(
    ("address", "message"),
    [
        (
            "0x60000016",
            "not 32-bit aligned: registers sit at multiples of 4; 0x60000014 holds UART_CLKDIV_REG",
        ),
        (-4, "must lie in 0x0-0xFFFFFFFF"),
        ("0x1_0000_0000", "must lie in 0x0-0xFFFFFFFF"),
        ("0x6000zz14", "address must be a number such as 0x60004000"),
        ("0x60000050", "a reserved gap between UART_CONF0_REG (0x60000020) and UART_DATE_REG (0x6000007C)"),
        (
            "0x30000000",
            "below every peripheral base in reg_base.h; the lowest peripheral base is DR_REG_UART_BASE",
        ),
        ("0x6003A100", "past the last register of that block (AES_MODE_REG at 0x6003A040)"),
        ("0x60019000", "a block in which neither the manual nor the headers place any register"),
    ],
)
def test_bad_addresses_say_what_is_valid(table: Any, address: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        registers.lookup_register(table, "esp32c3", address=address)


def test_a_name_from_another_chip_says_which_chips_have_it(table: Any) -> None:
    with pytest.raises(
        ValueError, match=r"no register 'LEDC_CH0_CONF0_REG' on esp32c3.*; it exists on esp32p4$"
    ):
        registers.lookup_register(table, "esp32c3", name="LEDC_CH0_CONF0_REG")


# ---- the fake esp32h2 of the fixtures: one register block per way a base can be missing upstream


def test_a_base_only_the_linker_script_places_answers_at_each_instance(table: Any) -> None:
    """DR_REG_I2C_BASE is in no header; i2c_struct.h declares I2C0 and I2C1 and the chip's
    .peripherals.ld places them."""
    answer = registers.lookup_register(table, "esp32h2", name="I2C_CTR_REG")
    assert answer["address_absolute"] == "0x60004004"
    assert answer["base_from"] == {
        "macro": "DR_REG_I2C_BASE",
        "value": "0x60004000",
        "instance": "I2C0",
        "kind": "linker instance",
        "source": "esp32h2.peripherals.ld PROVIDE(I2C0, I2C1), the instances of i2c_dev_t that "
        "i2c_struct.h declares",
        "file_path": "components/soc/esp32h2/ld/esp32h2.peripherals.ld",
        "agrees_with": [],
    }
    assert answer["instances"] == [
        {"instance": "I2C0", "address": "0x60004004"},
        {"instance": "I2C1", "address": "0x60005004"},
    ]
    second = registers.lookup_register(table, "esp32h2", address="0x60005004")
    assert second["name"] == "I2C_CTR_REG" and second["base_from"]["instance"] == "I2C1"
    assert "DR_REG_I2C_BASE = 0x60005000 (instance I2C1): esp32h2.peripherals.ld" in second["absolute_from"]


def test_a_function_like_base_used_bare_takes_the_linker_instance(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32h2", name="UHCI_CONF0_REG")
    assert answer["address_absolute"] == "0x60006000"
    assert answer["base_from"]["kind"] == "linker instance" and answer["base_from"]["instance"] == "UHCI0"
    assert answer["base_from"]["agrees_with"] == ["reg_base.h DR_REG_UHCI0_BASE"]


def test_a_base_spelled_otherwise_in_reg_base_resolves_and_says_so(table: Any) -> None:
    lp_intr = registers.lookup_register(table, "esp32h2", name="LPINTR_SW_INT_RAW_REG")
    assert lp_intr["address_absolute"] == "0x600B1400"
    assert lp_intr["base_from"]["kind"] == "base renamed"
    assert lp_intr["base_from"]["source"].startswith("reg_base.h defines it as DR_REG_LP_INTR_BASE")
    assert lp_intr["base_from"]["agrees_with"] == ["esp32h2.peripherals.ld LP_INTR"]
    # DR_REG_RTCLOCKCALI_BASE: reg_base.h numbers it, one base per instance
    second = registers.lookup_register(table, "esp32h2", address="0x600B1C00")
    assert second["name"] == "RTCLOCKCALI_TIMER_CTRL_REG"
    assert second["base_from"]["instance"] == "DR_REG_RTCLOCKCALI1_BASE"


def test_a_base_only_the_manual_address_map_names_resolves(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32h2", name="MEM_MONITOR_LOG_SETTING_REG")
    assert answer["address_absolute"] == "0x60092000"
    assert answer["base_from"]["kind"] == "manual memory map"
    assert "'Memory Monitor (MEM_MONITOR)' at 0x60092000" in answer["base_from"]["source"]


def test_a_map_row_naming_what_the_block_is_places_its_base() -> None:
    """ "H264 Encoder" is the block DR_REG_H264_BASE names; "H264 DMA" is another block."""
    assert register_bases._map_keys("H264 Encoder") == {"H264ENCODER", "H264"}
    assert register_bases._map_keys("H264 DMA") == {"H264DMA"}
    assert register_bases._map_keys("UART Controller 0 (UART0)") == {"UARTCONTROLLER0", "UART0"}


def test_a_base_the_map_names_with_its_block_noun_resolves(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32h2", name="H264_SYS_CTRL_REG")
    assert answer["address_absolute"] == "0x60094000"
    assert answer["base_from"]["kind"] == "manual memory map"
    assert "'H264 Encoder' at 0x60094000" in answer["base_from"]["source"]
    assert registers.lookup_register(table, "esp32h2", address="0x60094000")["name"] == "H264_SYS_CTRL_REG"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("LPPERI_RNG_DATA_REG", "LPPERI_REG_OFFSET (lpperi_reg.h) reads a register with REG_GET_FIELD"),
        ("INTERRUPT_CORE0_CPU_INT_THRESH_REG", "calls rv_utils_get_core_id(), so the register is chosen"),
    ],
)
def test_an_address_chosen_at_run_time_stays_unresolved_and_says_why(table: Any, name: str, why: str) -> None:
    answer = registers.lookup_register(table, "esp32h2", name=name)
    assert answer["address_absolute"] is None and why in answer["absolute_from"]


def test_vote_keeps_two_bases_of_one_chapter_apart() -> None:
    """ESP32-P4's H264 chapter documents the encoder's registers and the H264 DMA's."""
    votes = {(0x500A7000, "DR_REG_H264_DMA_BASE"): 300, (0x50084000, "DR_REG_H264_BASE"): 60}
    assert register_bases._vote(votes, "H264_DMA_OUT_CONF0_CH0_REG") == (0x500A7000, "DR_REG_H264_DMA_BASE")
    assert register_bases._vote(votes, "H264_SYS_CTRL_REG") == (0x50084000, "DR_REG_H264_BASE")
    assert register_bases._vote({(0x500A7000, "DR_REG_H264_DMA_BASE"): 3}, "UART_ID_REG")[0] == 0x500A7000
    # only the DMA's registers are placed, but the chapter's header registers use two bases
    assert (
        register_bases._vote({(0x500A7000, "DR_REG_H264_DMA_BASE"): 3}, "H264_SYS_CTRL_REG", several=True)
        is None
    )
    assert register_bases._vote(votes, "JPEG_CONFIG_REG") is None


def test_a_register_without_field_comments_says_where_its_layout_comes_from(table: Any) -> None:
    # an alias: another header register at the same address documents the fields
    alias = registers.lookup_register(table, "esp32h2", name="INTERRUPT_CORE0_CPU_INT_ENABLE_REG")
    assert alias["same_register_as"] == "INTPRI_CORE0_CPU_INT_ENABLE_REG"
    assert [f["name"] for f in alias["fields"]] == ["INTPRI_CORE0_CPU_INT_ENABLE"]
    assert alias["reset"] == "0x00000000"
    assert alias["note"].startswith(
        "the ESP-IDF headers document no fields of this register (interrupt_reg.h has no "
        "'FIELD : access; bitpos; default' comment for it upstream)"
    )
    # by address, the register with fields of its own answers; the alias is listed
    at = registers.lookup_register(table, "esp32h2", address="0x60010000")
    assert at["name"] == "INTPRI_CORE0_CPU_INT_ENABLE_REG"
    assert at["also_at_this_address"] == ["INTERRUPT_CORE0_CPU_INT_ENABLE_REG"]
    # the manual documents the same address under another name
    rsa = registers.lookup_register(table, "esp32h2", name="RSA_M_DASH_REG")
    assert rsa["same_register_as"] == "RSA_M_PRIME_REG" and rsa["reset_from"].startswith(
        "manual (Reset value)"
    )
    assert rsa["sources"]["manual"] == "Technical Reference Manual"
    # ... or under another peripheral prefix, at the same offset
    sdmmc = registers.lookup_register(table, "esp32h2", name="SDMMC_CTRL_REG")
    assert sdmmc["same_register_as"] == "SDHOST_CTRL_REG" and sdmmc["reset"] == "0x01000000"
    assert "same offset 0x0 from the block's base" in sdmmc["note"]
    # documented nowhere: said, not a silent null
    radio = registers.lookup_register(table, "esp32h2", name="IEEE802154_COMMAND_REG")
    assert radio["fields"] == [] and radio["reset"] is None
    assert radio["note"].endswith(
        "the Technical Reference Manual has no register of this name, and none the tool places at "
        "0x600A3000; fields and reset unknown"
    )


def test_a_hand_written_headers_mask_macros_give_bit_ranges_only(table: Any) -> None:
    """ieee802154_reg.h defines fields as ``X`` / ``X_S`` pairs: a bit range each, nothing more."""
    answer = registers.lookup_register(table, "esp32h2", name="IEEE802154_RADIO_CFG_REG")
    assert [(f["name"], f["bits"], f["access"], f["reset"]) for f in answer["fields"]] == [
        ("IEEE802154_RX_ABORT_EN", "31", None, None),  # BIT(31), shift 31: already in place
        ("IEEE802154_ARB_WINDOW", "23:16", None, None),  # 0xFF, shift 16: a width
        ("IEEE802154_TX_DELAY", "7:4", None, None),  # 0xF0, shift 4: already in place
    ], "0x5 is no run of ones: left out rather than guessed"
    assert answer["reset"] is None and "reset_partial" not in answer
    assert answer["reset_from"] == "unknown: headers: no reset: no field has a default"
    assert answer["sources"]["headers"].endswith(
        "(mask and shift macros: bit ranges only, no access or default upstream)"
    )
    assert "access, defaults and so the reset are unknown upstream" in answer["note"]
    # a register with no masks under it still says that nothing documents its fields
    bare = registers.lookup_register(table, "esp32h2", name="IEEE802154_COMMAND_REG")
    assert bare["fields"] == [] and "fields and reset unknown" in bare["note"]


def test_a_pad_the_summary_lists_answers_from_the_block_that_spells_its_number_bare(tmp_path: Path) -> None:
    """ESP32's manual lists IO_MUX_GPIO5_REG in its register summary (and GPIO1's pad as
    IO_MUX_U0TXD_REG) but describes the pads once, as IO_MUX_x_REG (x: 0-5, 32-33); a name only the
    headers spell so, with no summary row at its name or address, stays apart."""
    chapter = {
        "doc_type": "trm",
        "chips": ["esp32"],
        "source_doc": "IO MUX",
        "file_path": "ESP32/06-IOMUX__EN",
    }
    summary = (
        "IO_MUX_PIN_CTRL | Clock output | 0x3FF49000 | R/W\nIO_MUX_GPIO5_REG | Pad GPIO5 | 0x3FF4906C | R/W\n"
    )
    summary += "IO_MUX_U0TXD_REG | Pad U0TXD | 0x3FF49088 | R/W"  # GPIO1's pad, named after its function
    block = (
        "IO MUX > Registers\n\nRegister IO_MUX_x_REG (x: 0-5, 32-33)\n"
        "Address: See Table pads for the addresses\n"
        "Reset value: 0x00000800\nFields:\n- MCU_SEL [14:12] (R/W) reset 0x0: Function select.\n"
        "- FUN_DRV [11:10] (R/W) reset 0x2: Drive strength."
    )
    header = "#define DR_REG_IO_MUX_BASE 0x3ff49000\n#define IO_MUX_GPIO5_REG (DR_REG_IO_MUX_BASE + 0x6c)\n"
    header += "#define IO_MUX_GPIO4_REG (DR_REG_IO_MUX_BASE + 0x48)\n"
    header += "#define IO_MUX_SEL5_REG (DR_REG_IO_MUX_BASE + 0x90)\n"
    header += "#define IO_MUX_GPIO1_REG (DR_REG_IO_MUX_BASE + 0x88)"
    rows = [
        make_row(
            text=f"IO MUX > Register Summary\n\n{summary}",
            section_path="IO MUX > Register Summary",
            chunk_index=0,
            **chapter,
        ),
        make_row(
            text=block,
            section_path="IO MUX > Registers",
            chunk_index=1,
            symbol_refs=["IO_MUX_x_REG"],
            **chapter,
        ),
        make_row(
            text=header,
            doc_type="src",
            chips=["esp32"],
            source_doc="io_mux_reg.h",
            section_path="io_mux_reg.h",
            file_path="components/soc/esp32/register/soc/io_mux_reg.h",
            chunk_index=0,
        ),
    ]
    table = _zero_vector_table(tmp_path, rows)
    pad = registers.lookup_register(table, "esp32", name="IO_MUX_GPIO5_REG")
    assert pad["documented_as"] == "IO_MUX_x_REG (x: 0-5, 32-33)" and pad["reset"] == "0x00000800"
    assert [f["name"] for f in pad["fields"]] == ["MCU_SEL", "FUN_DRV"]
    assert pad["address_absolute"] == "0x3FF4906C"
    # the summary lists GPIO1's address under its function's name: the header's number answers
    assert registers.lookup_register(table, "esp32", name="IO_MUX_GPIO1_REG")["reset"] == "0x00000800"
    # 4 and 5 are in the note's range, but no summary row names these or lists their address
    for unlisted in ("IO_MUX_GPIO4_REG", "IO_MUX_SEL5_REG"):
        assert registers.lookup_register(table, "esp32", name=unlisted)["documented_as"] is None


@pytest.mark.parametrize(
    ("mask", "shift", "bits"),
    [
        (1 << 31, 31, "31"),
        (0xFF, 16, "23:16"),
        (0xF0, 4, "7:4"),
        (0x7F, 0, "6:0"),
        (0x5, 0, None),
        (0xFFFF, 24, None),
    ],
)
def test_mask_bits_reads_widths_and_placed_masks(mask: int, shift: int, bits: str | None) -> None:
    assert register_index._mask_bits(mask, shift) == bits


def test_an_undefined_default_gives_the_known_bits(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32h2", name="GPIO_SIGMADELTA0_REG")
    assert answer["reset"] is None
    assert answer["reset_from"] == (
        "unknown: headers: no reset: undefined (x) upstream for GPIO_SD0_PRESCALE [15:8]"
    )
    assert answer["reset_partial"] == {
        "value": "0x00000000",
        "undefined_bits": "0x0000FF00",
        "from": "headers",
    }


@pytest.mark.corpus
def test_real_esp32c3_headers_give_absolute_addresses(tmp_path: Path) -> None:
    """The header side on a real ESP-IDF (IDF_PATH): esp32c3 and shared headers only, kept lean."""
    idf = os.environ.get("IDF_PATH")
    if not idf:
        pytest.skip("IDF_PATH is not set (an ESP-IDF checkout)")
    headers, _ = ingest_source.discover_headers(Path(idf))
    chosen = [h for h in headers if "/esp32c3/" in h.rel_path or len(h.chips) > 1]
    src = [row for h in chosen for row in ingest_source.header_rows(h, "v", "c").rows]
    real = _zero_vector_table(tmp_path, _trm_rows() + src)
    answer = registers.lookup_register(real, "esp32c3", name="UART_CLKDIV_REG")
    assert answer["address_absolute"] == "0x60000014"
    assert answer["header_defines"][0]["file_path"] == "components/soc/esp32c3/register/soc/uart_reg.h"
    uart1 = registers.lookup_register(real, "esp32c3", address="0x60010014")
    assert uart1["name"] == "UART_CLKDIV_REG" and uart1["queried_instance"] == 1
    gpio = registers.lookup_register(real, "esp32c3", name="GPIO_PIN5_REG")
    assert gpio["address_absolute"] == "0x60004088"
    assert gpio["note"] == "not in the Technical Reference Manual; fields and reset from the SoC header"
    assert gpio["reset"] is not None and gpio["fields"] and gpio["fields"][0]["sources"] == ["headers"]
    # the cache controller is in no manual chapter: the header's field comments are all there is
    cache = registers.lookup_register(real, "esp32c3", name="EXTMEM_ICACHE_CTRL_REG")
    assert cache["reset_from"] == "composed from the header's field defaults" and cache["fields"]


# ---- the release axis: one chip's headers in two ESP-IDF releases (docs/releases.md)

DEV = ("v6.1-dev-6734-g102122904ad", "a" * 40)
V55 = ("v5.5.5", "b" * 40)
V55_UART = FIXTURES / "releases" / "uart_reg_v5.5.h"  # what the v5.5 build has: see its comment


def _release_src_rows(root: Path, version: tuple[str, str], chips: set[str] | None) -> list[dict[str, Any]]:
    headers, _ = ingest_source.discover_headers(root)
    scripts = ingest_source.discover_linker_scripts(root)
    rows = [row for h in headers for row in ingest_source.header_rows(h, *version).rows]
    rows += [row for s in scripts for row in ingest_source.linker_rows(s, *version).rows]
    return [row for row in rows if chips is None or set(row["chips"]) <= chips]


@pytest.fixture(scope="module")
def release_table(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The fixture headers as v6.1-dev for every chip, and edited as v5.5 for esp32c3 alone,
    folded by dedup_chunks as the real build does (identical cards become one row of both)."""
    work = tmp_path_factory.mktemp("releases")
    old = work / "idf-v5.5"
    shutil.copytree(FIXTURES / "idf", old)
    shutil.copyfile(V55_UART, old / "components/soc/esp32c3/register/soc/uart_reg.h")
    write_jsonl(work / "dev.jsonl", _release_src_rows(FIXTURES / "idf", DEV, None))
    write_jsonl(work / "v55.jsonl", _release_src_rows(old, V55, {"esp32c3"}))
    src = dedup_chunks.dedup([work / "dev.jsonl", work / "v55.jsonl"]).rows
    return _zero_vector_table(work / "store", _trm_rows() + src)


def test_compare_release_lists_the_field_changes_between_releases(release_table: Any) -> None:
    answer = registers.lookup_register(
        release_table, "esp32c3", name="UART_CLKDIV_REG", release="v6.1-dev", compare_release="5.5"
    )
    diff = answer["compare_release"]
    assert (diff["idf_version"], diff["exact_version"], diff["commit"]) == ("v5.5", "v5.5.5", "b" * 40)
    assert diff["answering"] == {"idf_version": "v6.1-dev", "exact_version": DEV[0], "commit": DEV[1]}
    assert diff["present"] is True and diff["present_in_answering_release"] is True
    assert diff["added"] == [] and diff["removed"] == [] and diff["identical"] is False
    assert diff["changed"] == [
        {"name": "UART_CLKDIV", "bits": {"from": "11:0", "to": "19:0"}},
        {"name": "UART_CLKDIV_FRAG", "access": {"from": "R/W", "to": "RO"}},
    ]
    assert "expression_changed" not in diff and "address_absolute_changed" not in diff
    assert "manual holds for every ESP-IDF release" in diff["note"]
    # the answer itself stays the answering release's: the manual's fields, v6.1-dev's header
    assert [f["bits"] for f in answer["fields"]][:2] == ["11:0", "23:20"]

    conf0 = registers.lookup_register(
        release_table, "esp32c3", name="UART_CONF0_REG", release="v6.1-dev", compare_release="release/v5.5"
    )["compare_release"]
    assert conf0["removed"] == ["UART_SW_RTS"] and conf0["added"] == []
    assert conf0["changed"] == [{"name": "UART_STOP_BIT_NUM", "reset": {"from": "0x1", "to": "0x3"}}]
    assert conf0["reset_changed"] == {"from": "0x0000001C", "to": "0x0000003C"}

    same = registers.lookup_register(
        release_table, "esp32c3", name="UART_FIFO_REG", release="v5.5", compare_release="master"
    )["compare_release"]
    assert same["idf_version"] == "v6.1-dev" and same["identical"] is True and same["changed"] == []
    patch = registers.lookup_register(
        release_table, "esp32c3", name="UART_FIFO_REG", release="v6.1-dev", compare_release="v5.5.2"
    )["compare_release"]
    assert patch["notes"] == ["v5.5.2 asked; the store holds v5.5.5 for series v5.5"]


def test_a_register_only_one_release_defines_says_so(release_table: Any) -> None:
    gone = registers.lookup_register(
        release_table, "esp32c3", name="UART_DATE_REG", release="v6.1-dev", compare_release="v5.5"
    )["compare_release"]
    assert gone["present"] is False and "changed" not in gone
    assert gone["message"] == (
        "UART_DATE_REG is not defined in the ESP-IDF v5.5 (v5.5.5) SoC headers for esp32c3; "
        "v6.1-dev's define it"
    )
    with pytest.raises(
        registers.UnknownRegister,
        match=re.escape("the ESP-IDF v6.1-dev SoC headers define it for esp32c3 (pass idf_version=v6.1-dev)"),
    ):
        registers.lookup_register(release_table, "esp32c3", name="UART_DATE_REG", release="v5.5")
    with pytest.raises(registers.UnknownRegister, match=re.escape("SoC headers define it for esp32c3")):
        registers.lookup_register(release_table, "esp32c3", name="UART_LEGACY_REG", release="v6.1-dev")
    legacy = registers.lookup_register(
        release_table, "esp32c3", name="UART_LEGACY_REG", release="v5.5", compare_release="master"
    )
    assert legacy["compare_release"]["present"] is False
    assert "not defined in the ESP-IDF v6.1-dev" in legacy["compare_release"]["message"]
    # a manual register v6.1-dev's headers leave out and v5.5's define: its fields there are added
    card = registers.lookup_register(
        release_table, "esp32c3", name="UART_ID_REG", release="v6.1-dev", compare_release="5.5"
    )["compare_release"]
    assert card["present"] is True and card["present_in_answering_release"] is False
    assert card["added"] == ["UART_ID"] and card["removed"] == [] and "identical" not in card
    assert card["message"] == (
        "UART_ID_REG is defined in the ESP-IDF v5.5 SoC headers for esp32c3 but not in v6.1-dev's "
        "(the manual documents it for every release); its fields there are listed as added"
    )


def test_a_default_answer_notes_releases_whose_header_card_differs(release_table: Any) -> None:
    changed = registers.lookup_register(
        release_table, "esp32c3", name="UART_CLKDIV_REG", release="v6.1-dev", note_other_releases=True
    )
    assert changed["other_releases"] == {
        "differs_in": ["v5.5"],
        "note": "the SoC header card of UART_CLKDIV_REG differs in v5.5 (v5.5.5); "
        "pass compare_release=v5.5 to list the changes",
    }
    same = registers.lookup_register(
        release_table, "esp32c3", name="UART_FIFO_REG", release="v6.1-dev", note_other_releases=True
    )
    assert "other_releases" not in same, "an identical card in both releases is one row naming both"
    by_address = registers.lookup_register(
        release_table, "esp32c3", address="0x60000020", release="v6.1-dev", note_other_releases=True
    )
    assert by_address["other_releases"]["differs_in"] == ["v5.5"]
    manual = registers.lookup_register(
        release_table, "esp32c3", name="UART_ID_REG", release="v6.1-dev", note_other_releases=True
    )
    assert manual["other_releases"]["note"] == (
        "the SoC header card of UART_ID_REG is not in v6.1-dev's headers but is in v5.5 (v5.5.5); "
        "pass compare_release=v5.5 to list the changes"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compare_release": "4.4"}, "the store holds no ESP-IDF v4.4 docs or headers; it holds: v6.1-dev"),
        (
            {"compare_release": "banana"},
            "compare_release 'banana' is not an ESP-IDF release; valid: v6.1-dev, v5.5",
        ),
        ({"compare_release": "v5.5'; DROP TABLE chunks --"}, "compare_release must be a release like 5.5"),
        ({"compare_release": "../../etc/passwd"}, "is not an ESP-IDF release"),
        (
            {"compare_release": "all"},
            "compare_release names one release, not 'all'; esp32c3 is held in: v6.1-dev, v5.5",
        ),
        (
            {"compare_release": "6.1"},
            "compare_release '6.1' is v6.1-dev, the release answering; name another: v5.5",
        ),
        ({"compare_release": "master"}, "is v6.1-dev, the release answering; name another: v5.5"),
        ({"compare_release": "5.5", "release": None}, "idf_version='all' names none: pass one idf_version"),
        (
            {"compare_release": "5.5", "chip": "esp32h2"},
            "the store's ESP-IDF v5.5 covers esp32c3, not esp32h2; esp32h2 is held in: v6.1-dev",
        ),
        ({"compare_release": 5.5}, "compare_release must be a release like 5.5"),
    ],
)
def test_bad_compare_release_names_the_valid_values(
    release_table: Any, kwargs: dict[str, Any], message: str
) -> None:
    arguments = {"chip": "esp32c3", "name": "UART_CLKDIV_REG", "release": "v6.1-dev", **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        registers.lookup_register(release_table, **arguments)


def test_compare_release_needs_a_store_with_releases(table: Any) -> None:
    with pytest.raises(
        ValueError, match="the store holds no ESP-IDF release, so there is nothing to compare"
    ):
        registers.lookup_register(table, "esp32c3", name="UART_CLKDIV_REG", compare_release="5.5")


def test_register_facts_walk_one_releases_headers(release_table: Any) -> None:
    """A store of two releases: the address check and the census read the headers of the release the
    tool answers by default (mixing both would walk v5.5's UART_LEGACY_REG next to v6.1-dev's cards)."""
    import register_facts

    assert registers.held_releases(release_table).default("esp32c3") == "v6.1-dev"
    walked = {
        release: register_facts.address_coverage(release_table, "esp32c3", None, release)
        for release in ("v6.1-dev", "v5.5")
    }
    assert walked["v6.1-dev"].checked != walked["v5.5"].checked
    assert all(coverage.resolved == coverage.checked for coverage in walked.values())
    counted = {r: register_facts.census(release_table, "esp32c3", None, r).header_registers for r in walked}
    assert counted["v6.1-dev"] != counted["v5.5"]


def test_a_struct_headers_instances_come_from_the_answering_release(tmp_path: Path) -> None:
    """v5.5's i2c_struct.h (edited here) declares I2C0 alone; a lookup answers each release with its
    own header's instances, never the union of both."""
    old = tmp_path / "idf-v5.5"
    shutil.copytree(FIXTURES / "idf", old)
    struct_h = old / "components/soc/esp32h2/register/soc/i2c_struct.h"
    struct_h.write_text(struct_h.read_text().replace("extern i2c_dev_t I2C1;\n", ""))
    write_jsonl(tmp_path / "dev.jsonl", _release_src_rows(FIXTURES / "idf", DEV, {"esp32h2"}))
    write_jsonl(tmp_path / "v55.jsonl", _release_src_rows(old, V55, {"esp32h2"}))
    src = dedup_chunks.dedup([tmp_path / "dev.jsonl", tmp_path / "v55.jsonl"]).rows
    store = _zero_vector_table(tmp_path / "store", src)

    answers = {
        release: registers.lookup_register(store, "esp32h2", name="I2C_CTR_REG", release=release)
        for release in ("v6.1-dev", "v5.5")
    }
    assert [i["instance"] for i in answers["v6.1-dev"]["instances"]] == ["I2C0", "I2C1"]
    assert "instances" not in answers["v5.5"] and answers["v5.5"]["address_absolute"] == "0x60004004"
    assert answers["v5.5"]["base_from"]["source"] == (
        "esp32h2.peripherals.ld PROVIDE(I2C0), the instance of i2c_dev_t that i2c_struct.h declares"
    )


def _names_from_threads(table: Any, addresses: list[str], threads: int) -> list[list[str] | BaseException]:
    """Each thread looks up every address; threads are switched every microsecond."""
    answers: list[list[str] | BaseException] = [[] for _ in range(threads)]

    def ask(worker: int) -> None:
        try:
            answers[worker] = [
                registers.lookup_register(table, "esp32c3", address=a)["name"] for a in addresses
            ]
        except BaseException as error:
            answers[worker] = error

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=ask, args=(k,)) for k in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(switch)
    return answers


def test_concurrent_address_lookups_answer_as_one_caller_does(tmp_path: Path) -> None:
    """The server answers on several threads, and a chip's address map is built on first use: every
    thread must read a finished map."""
    addresses = ["0x60000014", "0x60010014", "0x6003A000", "0x6003A01C", "0x6003A00C", "0x60010080"]
    reference = _fixture_table(tmp_path / "reference")
    expected = [registers.lookup_register(reference, "esp32c3", address=a)["name"] for a in addresses]
    for attempt in range(3):
        fresh = _fixture_table(tmp_path / f"s{attempt}")
        registers.lookup_register(fresh, "esp32c3", name="UART_CLKDIV_REG")  # index built, no address map
        assert _names_from_threads(fresh, addresses, threads=6) == [expected] * 6


def test_a_header_only_register_answers_with_its_struct_typedefs_fields(table: Any) -> None:
    answer = registers.lookup_register(table, "esp32c3", name="IO_MUX_GPIO1_REG")
    assert [(f["name"], f["bits"], f["reset"]) for f in answer["fields"]] == [
        ("MCU_OE", "0", "0x0"),
        ("FUN_IE", "9", "0x1"),
        ("FUN_DRV", "11:10", "0x2"),
    ]
    assert answer["reset"] == "0x00000A00" and "composed" in answer["reset_from"]
    source = answer["sources"]["headers"]
    assert source.startswith("components/soc/esp32c3/register/soc/io_mux_struct.h (io_mux_gpio_reg_t;")
    assert registers.lookup_register(table, "esp32c3", address="0x60009008")["name"] == "IO_MUX_GPIO1_REG"
    # the shared pad layout (FUN_IE) written before the first pad register is not that register's
    first = registers.lookup_register(table, "esp32c3", name="IO_MUX_GPIO0_REG")
    assert [f["name"] for f in first["fields"]] == ["MCU_OE", "FUN_IE", "FUN_DRV"]
    assert first["reset"] == "0x00000A00"


def test_field_lines_after_a_break_belong_to_no_register() -> None:
    index = registers.ChipIndex("esp32c3", None)
    text = (
        "components/soc/esp32c3/register/soc/x_reg.h\n\nX_CONF_REG = DR_REG_X_BASE + 0x0\n"
        "- X_EN [0] (R/W) reset 0x1\n\nField macros:\n- SLP_OE [0]\n"
    )
    register_index._collect_macros({"text": text, "revisions": [], "file_path": "x_reg.h"}, index)
    assert [f["name"] for f in index.header_fields["X_CONF_REG"]] == ["X_EN"]


def test_a_low_first_bit_range_composes_like_the_high_first_one() -> None:
    fields = [{"name": "DRV", "bits": "5:6", "reset": "0x2"}, {"name": "EN", "bits": "0", "reset": "0x1"}]
    assert register_views.compose_reset(fields) == (0x41, "")


@pytest.fixture(scope="module")
def manual_only(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A store of the manuals alone, as the demo is: no SoC headers, and no esp32c6 at all."""
    rows = [row for row in _trm_rows() if row["chips"] != ["esp32c6"]]
    return _zero_vector_table(tmp_path_factory.mktemp("manual-only"), rows)


def test_address_lookup_without_headers_names_what_the_store_lacks(manual_only: Any) -> None:
    with pytest.raises(ValueError) as error:
        registers.lookup_register(manual_only, "esp32c3", address="0x30000000")
    message = str(error.value)
    assert "holds no ESP-IDF SoC headers for esp32c3" in message
    assert "uv run just rebuild --chips esp32c3" in message
    assert "below every peripheral base" not in message


def test_compare_with_a_chip_the_store_lacks_is_unknown_not_absent(manual_only: Any) -> None:
    answer = registers.lookup_register(manual_only, "esp32c3", name="UART_CLKDIV_REG", compare_with="esp32c6")
    compare = answer["compare"]
    assert compare["present"] is None, "nothing of esp32c6 is held: absence cannot be claimed"
    assert "holds neither the manual nor the SoC headers of esp32c6" in compare["message"]
    assert "uv run just rebuild --chips esp32c6" in compare["message"]
