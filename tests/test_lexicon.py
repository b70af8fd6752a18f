"""lexicon.py: abbreviations learned from name/description pairs, and the Terms line they write."""

from __future__ import annotations

from lexicon import (
    Lexicon,
    acronym_readings,
    annotate_register_terms,
    is_abbreviation,
    mine,
    name_parts,
    register_pairs,
    with_terms,
)
from schema import content_hash

BLOCK = """UART > Registers

Register UART_CONF1_REG
Address: 0x0024
Reset value: 0x00018060
Summary: Configuration register 1
Fields:
- UART_RXFIFO_FULL_THRHD [9:0] (R/W) reset 0x60: An interrupt is generated above this threshold.
- UART_RX_TOUT_EN [23] (R/W) reset 0x0: This is the enable bit for the receiver's timeout function."""


def test_name_parts_drop_instance_digits_and_non_words() -> None:
    assert name_parts("LEDC_CH0_CONF0_REG") == ["LEDC", "CH", "CONF", "REG"]
    assert name_parts("I2C_SCL_LOW_PERIOD") == ["SCL", "LOW", "PERIOD"], "I2C is a name, not a word"


def test_is_abbreviation_keeps_letter_order_and_first_letter() -> None:
    assert is_abbreviation("thrhd", "threshold")
    assert is_abbreviation("ovf", "overflow")
    assert not is_abbreviation("ovf", "flow"), "must start with the same letter"
    assert not is_abbreviation("thrhd", "third"), "letters must all appear in order"
    assert not is_abbreviation("en", "en"), "a word is not its own abbreviation"


def test_acronyms_are_runs_of_content_words() -> None:
    tokens = ["set", "the", "watchdog", "timer", "stage", "before", "it", "has", "been", "fed"]
    assert acronym_readings("wt", tokens) == {"watchdog timer"}
    assert acronym_readings("hb", tokens) == set(), "'has been' is made of stopwords"


def test_mine_needs_recurring_evidence_and_leaves_words_alone() -> None:
    pairs = [
        ("UART_RXFIFO_FULL_THRHD", "Interrupt when the FIFO holds more than this threshold."),
        ("UART_TXFIFO_EMPTY_THRHD", "Interrupt when the FIFO holds less than this threshold."),
        ("I2C_RXFIFO_WM_THRHD", "The watermark threshold of the RX FIFO."),
        ("LEDC_OVF_NUM", "Overflow count."),  # one piece of evidence only
        ("UART_FIFO_DATA", "The FIFO data."),
    ]
    learned = mine(pairs).words
    assert learned["thrhd"] == "threshold"
    assert "ovf" not in learned, "a single pairing is not evidence"
    assert "fifo" not in learned and "data" not in learned, "parts the descriptions use as words stay"


def test_terms_skip_words_the_passage_already_uses() -> None:
    lexicon = Lexicon({"thrhd": "threshold", "reg": "register", "tout": "timeout"})
    assert lexicon.terms(["UART_CONF1_REG", "UART_RX_TOUT_EN"], "Register UART_CONF1_REG") == [
        "tout = timeout"
    ]


def test_register_pairs_and_terms_line_before_the_fields() -> None:
    assert register_pairs(BLOCK) == [
        ("UART_CONF1_REG", "Configuration register 1"),
        ("UART_RXFIFO_FULL_THRHD", "An interrupt is generated above this threshold."),
        ("UART_RX_TOUT_EN", "This is the enable bit for the receiver's timeout function."),
    ]
    text = with_terms(BLOCK, ["thrhd = threshold"])
    assert "Summary: Configuration register 1\nTerms: thrhd = threshold\nFields:\n" in text
    assert with_terms(BLOCK, []) == BLOCK


def test_annotate_rewrites_text_and_hash_of_register_chunks_only() -> None:
    fields = "\n".join(f"- UART_F{i}_THRHD [{i}] (R/W) reset 0x0: Fill threshold {i}." for i in range(4))
    register = BLOCK.replace("Summary: Configuration register 1\n", "") + "\n" + fields
    prose = "UART > Overview\n\nThe THRHD fields set thresholds."
    rows = [
        {"text": text, "symbol_refs": refs, "content_hash": content_hash(text)}
        for text, refs in (
            (register.replace("threshold", "level"), ["UART_CONF1_REG", "UART_RXFIFO_FULL_THRHD"]),
            (register, []),
            (prose, ["THRHD"]),
        )
    ]
    lexicon = annotate_register_terms(rows)
    assert lexicon.words.get("thrhd") == "threshold"
    first = rows[0]
    assert "\nTerms: thrhd = threshold\nFields:" in first["text"]
    assert first["content_hash"] == content_hash(first["text"])
    assert rows[2]["text"] == prose, "only register blocks get a Terms line"


def test_terms_line_goes_before_an_empty_field_list_too() -> None:
    block = "Register X_MAP_REG\nAddress: 0x01C0\nReset value: see fields\nFields:"
    assert with_terms(block, ["map = mapping"]).splitlines()[-2:] == ["Terms: map = mapping", "Fields:"]
