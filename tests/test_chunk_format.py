"""chunk_format.py: each kind of chunk text is built the way ingest builds it, then recognised by the
readers that the register tool, fusion, the lexicon, the embedding stage and the retrievers use."""

from __future__ import annotations

import pytest

import chunk_format as cf


def _register_chunk(**overrides: object) -> tuple[str, str]:
    """A register block as latex_parser renders it, and the chunk text that carries it."""
    head = {
        "name": "AES_KEY_n_REG",
        "param_note": "n: 0-7",
        "address": "0x0000+4*n",
        "absolute_address": "0x6003A000",
        "reset": 0,
        "summary": "AES key data",
    } | overrides
    block = "\n".join(
        [
            *cf.register_head_lines(**head),  # type: ignore[arg-type]
            cf.field_text("AES_KEY", "31:0", "R/W", "0x0", "Stores the AES key"),
            cf.field_text("AES_KEY_LOCK", "0", None, "0x0", None),
        ]
    )
    return block, cf.chunk_text(["AES Accelerator", "Register Summary"], block)


def test_section_path_round_trips() -> None:
    text = cf.chunk_text(["Peripherals", "UART", "Configuration"], "Body text.\n\nMore body.")
    assert cf.section_path_of(text) == ["Peripherals", "UART", "Configuration"]
    assert cf.chunk_body(text) == "Body text.\n\nMore body."
    assert cf.chunk_body("no path line") == "no path line"
    strong, _ = cf.definition_regexes("Configuration")
    assert strong.search(text), "the path's last heading names what the chunk defines"


def test_subheading_is_a_defining_heading() -> None:
    text = cf.chunk_text(["API"], cf.subheading(2, "uart_driver_install") + "\n\nInstalls the driver.")
    assert text.splitlines()[2] == "## uart_driver_install"
    assert cf.subheading(9, "deep").startswith("###### "), "markdown stops at six levels"
    strong, _ = cf.definition_regexes("uart_driver_install")
    assert strong.search(text)


def test_register_block_round_trips() -> None:
    block, text = _register_chunk()
    parsed = cf.parse_register_block(block)
    assert parsed["name"] == "AES_KEY_n_REG"
    assert parsed["parameters"] == {"n": cf.ParameterRange(((0, 7),))}
    assert parsed["parameter_note"] == "n: 0-7"
    assert parsed["address"] == "0x0000+4*n"
    assert parsed["reset"] == "0x00000000"
    assert parsed["summary"] == "AES key data"
    assert [(f["name"], f["bits"], f["access"], f["reset"], f["description"]) for f in parsed["fields"]] == [
        ("AES_KEY", "31:0", "R/W", "0x0", "Stores the AES key"),
        ("AES_KEY_LOCK", "0", None, "0x0", ""),  # a field without a description reads as ""
    ]
    assert [b["name"] for b in cf.register_blocks(text)] == ["AES_KEY_n_REG"]
    assert cf.REGISTER_BLOCK_START.search(text) and cf.REGISTER_DEFINITION.search(text)
    assert [m.group("name") for m in cf.REGISTER_HEADING.finditer(text)] == ["AES_KEY_n_REG"]
    head = cf.REGISTER_CHUNK_HEAD.match(text)
    assert head is not None
    assert head.group("head") == "AES Accelerator > Register Summary\n\nRegister AES_KEY_n_REG (n: 0-7)"
    assert text[head.end() :].startswith(cf.FIELDS_LINE)
    names = {n for m in cf.DEFINED_NAME.finditer(text) for n in m.groups() if n}
    assert names == {"AES_KEY_n_REG", "AES_KEY", "AES_KEY_LOCK"}
    strong, _ = cf.definition_regexes("AES_KEY_LOCK")
    assert strong.search(text), "a field line defines its field"


def test_register_block_without_reset_or_summary() -> None:
    block, _ = _register_chunk(param_note=None, absolute_address=None, reset=None, summary=None)
    assert block.splitlines()[:3] == [
        "Register AES_KEY_n_REG",
        "Address: 0x0000+4*n",
        "Reset value: see fields",
    ]
    parsed = cf.parse_register_block(block)
    assert parsed["reset"] == "see fields" and "summary" not in parsed and parsed["parameters"] == {}


def test_terms_line_is_read_past() -> None:
    block, _ = _register_chunk()
    with_terms = cf.with_terms(block, ["key = key", "aes = advanced encryption standard"])
    lines = with_terms.splitlines()
    assert (
        lines[lines.index(cf.FIELDS_LINE) - 1]
        == cf.TERMS_PREFIX + "key = key; aes = advanced encryption standard"
    )
    assert cf.parse_register_block(with_terms) == cf.parse_register_block(block)
    assert cf.with_terms(block, []) == block


def test_lexicon_lines_are_recognised() -> None:
    block, _ = _register_chunk()
    lines = block.splitlines()
    assert cf.REGISTER_NAME_LINE.match(lines[0]).group("name") == "AES_KEY_n_REG"  # type: ignore[union-attr]
    summaries = [m.group("desc") for line in lines if (m := cf.SUMMARY_LINE.match(line))]
    assert summaries == ["AES key data"]
    described = [m.group("name") for line in lines if (m := cf.DESCRIBED_FIELD_LINE.match(line))]
    assert described == ["AES_KEY"], "a field line without a description gives the lexicon no words"


def test_card_line_round_trips() -> None:
    card = cf.card_text("UART_CLKDIV_REG", "(i)", "REG_UART_BASE(i) + 0x14", "Clock divider configuration")
    match = cf.CARD_LINE.match(card)
    assert match is not None
    assert match.group("name", "params", "value", "desc") == (
        "UART_CLKDIV_REG",
        "(i)",
        "REG_UART_BASE(i) + 0x14",
        "Clock divider configuration",
    )
    assert cf.card_text("X_REG", "", "0x1", "") == "X_REG = 0x1"
    assert cf.REGISTER_DEFINITION.search(card)
    assert {n for m in cf.DEFINED_NAME.finditer(card) for n in m.groups() if n} == {"UART_CLKDIV_REG"}
    strong, _ = cf.definition_regexes("UART_CLKDIV_REG")
    assert strong.search(card)


@pytest.mark.parametrize("description", ["Clock divider", ""])
def test_struct_fields_note_round_trips(description: str) -> None:
    card = cf.with_struct_fields_note(
        cf.card_text("UART_CLKDIV_REG", "", "DR_REG_UART_BASE + 0x14", description),
        "uart_struct.h",
        "uart_clkdiv_reg_t",
    )
    match = cf.CARD_LINE.match(card)
    assert match is not None and match.group("value") == "DR_REG_UART_BASE + 0x14"
    note = cf.STRUCT_FIELDS_NOTE.search(match.group("desc"))
    assert note is not None and note.groups() == ("uart_struct.h", "uart_clkdiv_reg_t")
    assert match.group("desc").startswith(description)


def test_header_field_line_round_trips() -> None:
    """ingest_source writes a header field with unknown bits as ``[?]`` and an undefined reset as x."""
    line = cf.field_text("UART_CLKDIV", "?", None, "x", None)
    assert line == "- UART_CLKDIV [?] reset x"
    match = cf.FIELD_LINE.match(line)
    assert match is not None and match.group("name", "bits", "reset") == ("UART_CLKDIV", "?", "x")
    assert cf.field_text("A", "3:0") == "- A [3:0]"
    assert cf.field_text("B", access="RO", description="") == "- B (RO): "


def test_summary_row_is_recognised() -> None:
    row = "UART_CLKDIV_REG | Clock divider | 0x0014 | R/W |"
    match = cf.SUMMARY_ROW.match(row)
    assert match is not None and match.groups() == ("UART_CLKDIV_REG", "0x0014")
