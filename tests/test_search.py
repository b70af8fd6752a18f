"""The retrieval engine against a real LanceDB store built by embed_and_store with the real MiniLM."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import embed_and_store
from embedder import get_embedder
from query_analysis import query_symbols
from results import (
    VARIANT_NOTE_CHARS,
    excerpt,
    fold_chip_variants,
    revision_scope,
    variant_note,
    without_heading,
)
from retrievers import definition_strength, meant_symbols, symbol_pattern
from search import MAX_K, SearchEngine, SearchInputError, open_engine

FIXTURES = Path(__file__).parent / "fixtures" / "search"
DOC_TYPES_BUILT = ("trm", "idf", "src")


def build_fixture_store(root: Path) -> Path:
    """Embed the fixture chunks (all three corpora) once into ``root``; reused when already complete."""
    db = root / "store.lancedb"
    done = root / "complete"
    if done.exists():
        return db
    source = root / "source"  # outside git, no SOURCE.md: rows keep the provenance they carry
    source.mkdir(parents=True, exist_ok=True)
    for doc_type in DOC_TYPES_BUILT:
        embed_and_store.build(
            [FIXTURES / f"{doc_type}_fixture_rows.jsonl"], doc_type, source, str(db), get_embedder
        )
    done.touch()
    return db


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")


@pytest.fixture(scope="session")
def engine(store_path: Path) -> SearchEngine:
    return open_engine(str(store_path))


def keys(results: list[dict]) -> list[tuple[str, int]]:
    return [(r["file_path"], r["chunk_index"]) for r in results]


# -- pure helpers ---------------------------------------------------------------------------------


def test_query_symbols_picks_identifiers_only() -> None:
    assert query_symbols("what does bit 3 of LEDC_CH0_CONF0_REG do on P4") == ["LEDC_CH0_CONF0_REG"]
    assert query_symbols("call uart_driver_install then xTaskCreate") == [
        "uart_driver_install",
        "xTaskCreate",
    ]
    assert query_symbols("how do I set the UART baud rate") == []


@pytest.mark.parametrize(
    ("query", "stored", "matches"),
    [
        ("AES_KEY_3_REG", "AES_KEY_n_REG", True),
        ("AES_KEY_3_REG", "AES_KEY_3_REG", True),
        ("aes_key_3_reg", "AES_KEY_3_REG", True),
        ("AES_KEY_3_REG", "AES_KEY_4_REG", False),
        ("LEDC_CH*_CONF0_REG", "LEDC_CH3_CONF0_REG", True),
        ("LEDC_CH*_CONF0_REG", "LEDC_CH3_CONF1_REG", False),
        ("LEDC_CH0_CONF0_REG", "LEDC_CHn_CONF0_REG", True),
        ("UART_CONF0_REG", "UART_CONF0_REG_X", False),
    ],
)
def test_symbol_pattern(query: str, stored: str, matches: bool) -> None:
    assert bool(re.fullmatch(symbol_pattern(query), stored, re.IGNORECASE)) is matches


def test_revision_scope_sentences() -> None:
    assert revision_scope([], ["esp32p4"]) is None
    assert revision_scope(["mainline", "v1.3"], ["esp32p4"]) == "all published revisions (mainline, v1.3)"
    only = revision_scope(["v1.3"], ["esp32p4"])
    assert only is not None and only.startswith("ONLY revision v1.3") and "mainline" in only


def _idf_row(chips: list[str], text: str, section: str = "Guide > Defaults", index: int = 0) -> dict:
    return {
        "doc_type": "idf", "file_path": "api-guides/x", "section_path": section, "chips": chips,
        "chunk_index": index, "text": f"{section}\n\n{text}",
    }  # fmt: skip


def test_fold_chip_variants_folds_only_other_chips_copies_of_one_section() -> None:
    shared = "The timeout of the watchdog in milliseconds, higher than the tick rate.\nRange: 10 to 10000"
    c3 = _idf_row(["esp32c3"], shared + "\nDefault: 300")
    esp32 = _idf_row(["esp32", "esp32s3"], shared + "\nDefault: 300 if CONFIG_SPIRAM is disabled", index=7)
    c3_next = _idf_row(["esp32c3"], shared + "\nDefault: 300 (continued)", index=1)  # same chip: a next chunk
    elsewhere = _idf_row(["esp32c6"], shared, section="Guide > Other")
    unlike = _idf_row(["esp32p4"], "A different passage about flash encryption keys and their storage.")
    kept = fold_chip_variants([c3, esp32, c3_next, elsewhere, unlike])
    assert kept == [c3, c3_next, elsewhere, unlike]
    assert c3["chip_variants"] == [
        {
            "chips": ["esp32", "esp32s3"],
            "chunk_index": 7,
            "differs": ["Default: 300 if CONFIG_SPIRAM is disabled"],
        }
    ]
    assert "chip_variants" not in c3_next and "chip_variants" not in unlike
    # another release's copy is no chip variant: folded, its release would be lost
    older = _idf_row(["esp32c6"], shared + "\nDefault: 300") | {"releases": ["v5.5"]}
    assert fold_chip_variants([c3 | {"chip_variants": [], "releases": ["master"]}, older])[-1] is older
    # a chip already covered by a folded copy is not folded again
    again = _idf_row(["esp32s3"], shared + "\nDefault: 800", index=9)
    assert fold_chip_variants([c3 | {"chip_variants": []}, esp32, again])[-1] is again
    # a page with one section per chip names the chip in the heading: still one section's copies
    per_chip = [
        _idf_row([chip], shared, section=f"Overview > {name} Wi-Fi Configuration > Country Code")
        for chip, name in (("esp32c6", "ESP32-C6"), ("esp32", "ESP32"), ("esp32s3", "ESP32-S3"))
    ]
    kept = fold_chip_variants([*per_chip, _idf_row(["esp32c2"], shared, section="Overview > ESP32-C2 Modes")])
    assert [row["chips"] for row in kept] == [["esp32c6"], ["esp32c2"]]
    assert [v["chips"] for v in kept[0]["chip_variants"]] == [["esp32"], ["esp32s3"]]


def test_variant_note_names_each_copy_and_stays_bounded() -> None:
    many = [{"chips": [f"chip{i}"], "chunk_index": i, "differs": ["x" * 500]} for i in range(9)]
    note = variant_note(many)
    assert note.count("\n- chip") < 9 and note.endswith("more copies")
    assert len(note) < VARIANT_NOTE_CHARS + 400
    assert "no lines of their own" in variant_note([{"chips": ["esp32"], "chunk_index": 3, "differs": []}])


def test_excerpt_never_cuts_a_register_blocks_lead() -> None:
    head = (
        "UART > Registers\n\nRegister UART_CLKDIV_REG\nAddress: 0x0014\nReset value: 0x000002B6\n"
        "Summary: " + "clock divider configuration, " * 8 + "end\n"
    )
    text = head + "Fields:\n" + "".join(f"- UART_F{i} [{i}] (R/W) reset 0x0: field {i}\n" for i in range(40))
    short, truncated = excerpt(text, [], budget=200, terms=["uart_f7"])
    assert truncated and short.startswith(head.rstrip()), "address, reset and summary stay whole"
    assert "UART_F7" in short


def test_excerpt_keeps_heading_and_the_symbol_asked_about() -> None:
    text = "Chapter > Registers\n\n" + "filler line\n" * 400 + "Register FAR_AWAY_REG\nAddress: 0x0100\n"
    short, truncated = excerpt(text, ["FAR_AWAY_REG"], budget=600)
    assert truncated and len(short) <= 600, "the budget holds, marks included"
    assert short.startswith("Chapter > Registers") and "Register FAR_AWAY_REG" in short
    assert excerpt("small", ["X"], budget=600) == ("small", False)


def test_excerpt_of_a_struct_member_names_the_struct_it_belongs_to() -> None:
    members = "".join(f"  int member_{i}\n    What member {i} is for, in words.\n" for i in range(80))
    text = (
        "HTTP Server > API Reference > Structures\n\nstruct other_config (typedef other_config_t)\n"
        + members
        + "struct httpd_config (typedef httpd_config_t)\n  HTTP Server Configuration Structure.\n"
        + members
        + "  uint16_t max_open_sockets\n    Max number of sockets/clients connected at any time\n"
        + members
    )
    short, truncated = excerpt(text, [], budget=900, terms=["max_open_sockets"])
    assert truncated and len(short) <= 900 and "max_open_sockets" in short
    assert "struct httpd_config (typedef httpd_config_t)\n…\n" in short
    assert "other_config" not in short
    # a window that opens on a declaration itself, or prose without indentation, gets no extra line
    prose = "Guide > Section\n\n" + "A plain sentence about sleep.\n" * 80 + "Keep RTC_NOINIT_ATTR data.\n"
    short, _ = excerpt(prose, [], budget=600, terms=["rtc_noinit_attr"])
    assert short.count("…") == 1 and short.endswith("Keep RTC_NOINIT_ATTR data.")  # the end: no mark


def test_excerpt_never_exceeds_its_budget_marks_included() -> None:
    members = "".join(f"  int member_{i}\n    What member {i} of the config is for.\n" for i in range(60))
    text = "Driver > API Reference > Structures\n\nstruct driver_config_t\n" + members
    for budget in range(300, len(text), 7):
        for terms in ([], ["member_20"], ["member_59"]):
            short, truncated = excerpt(text, [], budget=budget, terms=terms)
            assert truncated and len(short) <= budget, (budget, terms)


def test_excerpt_window_near_the_end_still_fills_its_budget() -> None:
    # the answer sits early, the line with the most query words last: a window centred on that last
    # line would run past the end and show only the text's last third
    text = (
        "App Image Format > Structures\n\nThe image header holds the count of its segments.\n"
        "The count cannot be more than ESP_IMAGE_MAX_SEGMENTS.\n"
        + "Segment 0x0711c 0x3f400020 DROM\n" * 25
        + "You can also see the segments of an application in the boot log.\n"
    )
    short, truncated = excerpt(text, [], budget=len(text) - 20, terms=["segments", "application"])
    assert truncated and "ESP_IMAGE_MAX_SEGMENTS" in short and short.endswith("in the boot log.")
    assert len(short) <= len(text) - 20


# -- hybrid search ---------------------------------------------------------------------------------


def test_identifier_query_returns_its_definition_first(engine: SearchEngine) -> None:
    found = engine.search("UART_CLKDIV_REG", doc_type="trm")
    top = found["results"][0]
    assert top["text"].count("Register UART_CLKDIV_REG") == 1, top["text"]
    assert "symbol" in top["matched_by"]


def test_function_name_returns_its_prototype_first(engine: SearchEngine) -> None:
    top = engine.search("uart_driver_install", doc_type="idf")["results"][0]
    assert "esp_err_t uart_driver_install(" in top["text"]


def test_parameterised_register_found_by_concrete_name(engine: SearchEngine) -> None:
    found = engine.search("AES_KEY_3_REG", chip="esp32c3", doc_type="trm")
    assert "Register AES_KEY_n_REG" in found["results"][0]["text"]


def test_every_result_carries_the_documented_fields(engine: SearchEngine) -> None:
    found = engine.search("UART baud rate", chip="esp32c3", k=3)
    assert found["returned"] == 3 and found["more_results"] > 0 and "raise k" in found["note"]
    for result in found["results"]:
        assert set(result) >= {
            "text", "doc_type", "chips", "revisions", "revision_scope", "section_path",
            "file_path", "chunk_index", "source_version", "source_commit", "matched_by",
        }  # fmt: skip
        # the document's name is shown only where the section path and file name do not say it
        assert result.get("source_doc") != result["section_path"].split(" > ")[0]
        # a field that says nothing is left out, except those every client reads; every row links upstream
        assert result.get("symbol_refs", [1]) != [] and result["url"].startswith("https://")
        assert result.get("text_truncated", True) is True and result.get("releases", [1]) != []
        assert result["matched_by"] and set(result["matched_by"]) <= {"vector", "fts", "symbol"}
        assert result["source_commit"] != "unknown"


def test_a_results_text_does_not_repeat_its_section_path(engine: SearchEngine) -> None:
    """Every stored chunk opens with its section path; a result shows it once, in section_path."""
    found = engine.search("UART baud rate", chip="esp32c3", k=5)
    rows = engine.table.search().limit(engine.index.rows).to_list()
    rows = {(row["file_path"], row["chunk_index"]): row for row in rows}
    for result in found["results"]:
        stored = rows[(result["file_path"], result["chunk_index"])]["text"]
        assert stored.startswith(result["section_path"] + "\n")
        assert not result["text"].startswith(result["section_path"])
        if not result.get("text_truncated"):
            assert stored.endswith(result["text"]), (
                "an untruncated result is the whole chunk after its heading"
            )


def test_dropping_the_heading_leaves_the_body_the_same_room() -> None:
    head = "UART > Registers\n\nRegister UART_CLKDIV_REG\nAddress: 0x0014\nReset value: 0x000002B6\n"
    text = head + "Fields:\n" + "".join(f"- UART_F{i} [{i}] (R/W) reset 0x0: field {i}\n" for i in range(40))
    row = {"text": text, "section_path": "UART > Registers", "kind": "register"}
    shown = without_heading(
        excerpt(text, [], 400 + len("UART > Registers\n"), ["uart_f7"])[0], row["section_path"]
    )
    full, _ = excerpt(text, [], 400, ["uart_f7"])
    assert shown.startswith("Register UART_CLKDIV_REG\nAddress: 0x0014") and "UART_F7" in shown
    assert len(shown) >= len(full) - len("UART > Registers\n\n"), "the body keeps the room the heading had"
    assert without_heading("Other > Path\nbody", "UART > Registers") == "Other > Path\nbody"


def test_chip_filter_narrows_but_keeps_shared_content(engine: SearchEngine) -> None:
    found = engine.search("how many UART controllers", chip="ESP32-C3", doc_type="idf", k=MAX_K)
    chips_seen = [r["chips"] for r in found["results"]]
    assert all("esp32c3" in chips for chips in chips_seen)
    assert any(len(chips) > 1 for chips in chips_seen), "content common to all chips must stay"
    assert any("ESP32-C3 chip has 2 UART" in r["text"] for r in found["results"])
    assert not any("ESP32 chip has 3 UART" in r["text"] for r in found["results"])


def test_without_a_chip_one_sections_copies_per_chip_fold_into_one_result(engine: SearchEngine) -> None:
    found = engine.search("how many UART controllers", doc_type="idf", k=MAX_K)
    copies = [r for r in found["results"] if r["section_path"].endswith("> Overview of Controllers")]
    assert len(copies) == 1, "the esp32 and esp32c3 copies of the section are one result"
    folded = copies[0]
    other = "esp32c3" if folded["chips"] == ["esp32"] else "esp32"
    assert folded["chip_variants"] == [{"chips": [other], "chunk_index": 2}]
    # the other copy's own line is in the text: its controller count must not be lost
    assert "ESP32-C3 chip has 2 UART" in folded["text"] and "ESP32 chip has 3 UART" in folded["text"]
    assert "Other chips' copies of this section" in folded["text"]


def test_chip_filter_picks_that_chips_register_address(engine: SearchEngine) -> None:
    c5 = engine.search("PCNT_CTRL_REG", chip="esp32c5", doc_type="trm")["results"]
    assert "0x0070" in c5[0]["text"]
    assert not any("0x00b0" in r["text"] for r in c5)


def test_revision_filter_drops_other_revision_keeps_revisionless(engine: SearchEngine) -> None:
    found = engine.search("MHCR_CSR branch prediction", chip="esp32p4", revision="v1.3", k=MAX_K)
    revisions = [r["revisions"] for r in found["results"]]
    assert ["mainline"] not in revisions
    assert ["v1.3"] in revisions and ["mainline", "v1.3"] in revisions
    assert [] in revisions, "rows without a revision axis are unaffected by the filter"
    top = found["results"][0]
    assert "0x7C1" in top["text"] and top["revision_scope"].startswith("ONLY revision v1.3")


def test_results_link_the_docs_page_for_the_chip_asked_or_their_upstream_source(engine: SearchEngine) -> None:
    asked = engine.search("uart_driver_install", chip="esp32c3", doc_type="idf")["results"][0]
    assert asked["url"] == (
        "https://docs.espressif.com/projects/esp-idf/en/latest/esp32c3/api-reference/peripherals/uart.html"
    )
    unasked = engine.search("uart_driver_install", doc_type="idf")["results"][0]
    assert f"/latest/{unasked['chips'][0]}/" in unasked["url"]
    # a TRM row links its chapter's .tex upstream instead
    assert engine.search("UART_CLKDIV_REG", doc_type="trm")["results"][0]["url"].endswith("/10-UART__EN.tex")


def test_a_camel_case_unit_or_name_no_symbol_matches_is_not_an_identifier(engine: SearchEngine) -> None:
    """ "kHz" looks like camelCase; no symbol is called that, so the question ranks as prose, exactly
    as it does written "khz"."""

    def order(query: str) -> list[tuple[str, int]]:
        return [
            (r["file_path"], r["chunk_index"]) for r in engine.search(query, chip="esp32c3", k=10)["results"]
        ]

    assert order("UART clock divider for a 40 kHz baud clock") == order(
        "UART clock divider for a 40 khz baud clock"
    )
    answer = engine.search("UART_CLKDIV_REG for a 40 kHz baud clock", chip="esp32c3")
    assert answer["symbols_in_query"] == ["UART_CLKDIV_REG"], "the answer reports what the ranking used"
    hit = ((0, 0, 0, 0), {"symbol_refs": ["UART_CLKDIV_REG", "xTaskCreate"]})
    assert meant_symbols(["kHz", "xTaskCreate", "UART_CLKDIV_REG", "NO_SUCH_REG"], [hit]) == [
        "xTaskCreate",
        "UART_CLKDIV_REG",
        "NO_SUCH_REG",
    ]


@pytest.mark.parametrize("mode", ["vector", "fts"])
def test_single_retriever_modes(engine: SearchEngine, mode: str) -> None:
    found = engine.search("UART clock divider", chip="esp32c3", doc_type="trm", mode=mode)
    assert found["results"] and all(r["matched_by"] == [mode] for r in found["results"])


def test_empty_answer_explains_itself(engine: SearchEngine) -> None:
    found = engine.search("anything at all", chip="esp32h2", doc_type="trm")
    assert found["results"] == [] and "nothing matched" in found["note"] and "0 chunk" in found["note"]


def test_empty_answer_says_why_the_chip_has_none_of_that_corpus(engine: SearchEngine) -> None:
    no_guide = engine.search("configure a GPIO interrupt", chip="esp32h2", doc_type="idf")["note"]
    assert "ESP-IDF master builds no programming guide for ESP32-H2" in no_guide
    assert "esp32c3" in no_guide and "esp32h2," not in no_guide  # the docs targets, H2 not among them
    no_manual = engine.search("clock divider", chip="esp32h4", doc_type="trm")["note"]
    assert "no Technical Reference Manual for ESP32-H4" in no_manual
    not_built = engine.search("clock divider", chip="esp32h2", doc_type="trm")["note"]
    assert "this store was built without ESP32-H2's trm" in not_built


# -- find_symbol ------------------------------------------------------------------------------------


def test_find_symbol_interleaves_corpora_with_totals(engine: SearchEngine) -> None:
    found = engine.find_symbol("UART_CLKDIV_REG")
    assert found["totals_by_doc_type"] == {"idf": 0, "trm": 3, "src": 1}
    assert {r["doc_type"] for r in found["results"][:2]} == {"trm", "src"}
    assert "Register UART_CLKDIV_REG" in found["results"][0]["text"]


def test_find_symbol_case_insensitive_wildcard_and_parameterised(engine: SearchEngine) -> None:
    assert engine.find_symbol("Uart_Driver_Install")["totals_by_doc_type"]["idf"] == 2
    wildcard = engine.find_symbol("LEDC_CH*_CONF0_REG")
    assert {r["doc_type"] for r in wildcard["results"]} == {"trm", "src"}
    parameterised = engine.find_symbol("AES_KEY_3_REG", chip="esp32c3")
    matched = {s for r in parameterised["results"] for s in r["matched_symbols"]}
    assert matched == {"AES_KEY_n_REG", "AES_KEY_3_REG"}


def test_find_symbol_filters_and_reports_misses(engine: SearchEngine) -> None:
    only_src = engine.find_symbol("MHCR_CSR", doc_type="src")
    assert list(only_src["totals_by_doc_type"]) == ["src"]
    missing = engine.find_symbol("PCNT_CTRL_REG", chip="esp32c3")
    assert missing["results"] == [] and "2 chunk(s) name it without those filters" in missing["note"]


# -- read and list_chips ----------------------------------------------------------------------------


def test_read_returns_neighbours_in_order_and_says_what_remains(engine: SearchEngine) -> None:
    page = engine.read("ESP32-C3/10-UART__EN", 2, before=1, after=1)
    assert [c["chunk_index"] for c in page["chunks"]] == [1, 2, 3]
    assert page["more_before"] and page["more_after"] and page["chunks_in_file"] == 6
    assert not page["truncated_by_budget"]


def test_read_respects_the_character_budget(engine: SearchEngine) -> None:
    page = engine.read("ESP32-C3/10-UART__EN", 3, before=3, after=2, max_chars=600)
    assert sum(len(c["text"]) for c in page["chunks"]) <= 600
    assert page["truncated_by_budget"] and [c["chunk_index"] for c in page["chunks"]] != list(range(6))


def test_read_whole_section_and_chip_variants(engine: SearchEngine) -> None:
    section = engine.read("ESP32-C3/10-UART__EN", 4, whole_section=True, max_chars=50000)
    assert [c["chunk_index"] for c in section["chunks"]] == [4, 5]
    variants = engine.read("api-reference/peripherals/uart", 2, before=0, after=0)
    assert len(variants["chunks"]) == 2
    one = engine.read("api-reference/peripherals/uart", 2, before=0, after=0, chip="esp32c3")
    assert [c["chips"] for c in one["chunks"]] == [["esp32c3"]]
    assert one["url"].endswith("/esp32c3/api-reference/peripherals/uart.html")


def test_list_chips_reports_coverage_per_corpus(engine: SearchEngine) -> None:
    listing = engine.list_chips()
    by_chip = {c["chip"]: c for c in listing["chips"]}
    assert by_chip["esp32c3"]["rows_by_doc_type"] == {"idf": 10, "trm": 11, "src": 5}
    assert by_chip["esp32p4"]["revisions"] == ["mainline", "v1.3"]
    assert by_chip["esp32p4"]["revisions_in_store"] == ["mainline", "v1.3"]
    assert listing["rows_by_doc_type"] == {"idf": 11, "trm": 18, "src": 7} and listing["total_rows"] == 36


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "x", "chip": "esp99"}, "valid chips: esp32, esp32s2"),
        ({"query": "x", "chip": "esp32' OR 1=1 --"}, "valid chips:"),
        ({"query": "x", "doc_type": "pdf"}, "valid doc_types: idf, trm, src"),
        ({"query": "x", "doc_type": "trm' OR '1'='1"}, "valid doc_types"),
        ({"query": "x", "revision": "v9"}, "valid revisions: mainline, v1.3"),
        ({"query": "x", "chip": "esp32", "revision": "v1.3"}, "for esp32; valid revisions: mainline"),
        ({"query": "x", "k": 0}, f"from 1 to {MAX_K}"),
        ({"query": "x", "k": 21}, f"from 1 to {MAX_K}"),
        ({"query": "   "}, "query is empty"),
        ({"query": "q" * 100_000}, "the limit is"),
        ({"query": "x", "mode": "magic"}, "valid modes: hybrid, vector, fts"),
    ],
)
def test_search_rejects_bad_input_naming_valid_values(
    engine: SearchEngine, kwargs: dict, message: str
) -> None:
    with pytest.raises(SearchInputError, match=re.escape(message)):
        engine.search(**kwargs)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.find_symbol("X' OR '1'='1"), "is not an identifier"),
        (lambda e: e.find_symbol("*"), "too vague"),
        (lambda e: e.find_symbol("UART_CLKDIV_REG", chip="esp99"), "valid chips"),
        (lambda e: e.read("ESP32-C3/10-UART__EN' OR '1'='1", 0), "not a document path"),
        (lambda e: e.read("ESP32-C3/99-NOPE__EN", 0), "the store holds no"),
        (lambda e: e.read("ESP32-C3/10-UART__EN", 9), "chunk_index must be an integer from 0 to 5"),
        (lambda e: e.read("ESP32-C3/10-UART__EN", 0, max_chars=10), "max_chars must be"),
    ],
)
def test_other_tools_reject_bad_input(engine: SearchEngine, call, message: str) -> None:
    with pytest.raises(SearchInputError, match=re.escape(message)):
        call(engine)


def test_open_engine_without_store_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(embed_and_store.StoreError, match=r"embed_and_store\.py.*--demo"):
        open_engine(str(tmp_path / "absent.lancedb"))


def test_register_question_prefers_the_register_block_over_prose(engine: SearchEngine) -> None:
    query = "which register holds the UART baud rate divider, and at what offset"
    assert query_symbols(query) == []
    top = engine.search(query, chip="esp32c3", doc_type="trm")["results"][0]
    assert top["text"].count("Register UART_CLKDIV_REG\nAddress: 0x0014") == 1, top["text"][:200]


def test_a_chunk_whose_own_section_is_the_symbol_defines_it() -> None:
    option = "Configuration Options > FreeRTOS > CONFIG_FREERTOS_UNICORE\n\nRun FreeRTOS only on first core"
    mention = "FreeRTOS Overview > Configuration\n\nEnable CONFIG_FREERTOS_UNICORE to run on one core"
    assert definition_strength(option, "CONFIG_FREERTOS_UNICORE") == 2
    assert definition_strength(mention, "CONFIG_FREERTOS_UNICORE") == 0
    assert definition_strength(option, "CONFIG_FREERTOS") == 0  # a prefix of the section title is not it


def test_rank_shows_the_fused_pool_then_the_reranked_order(engine: SearchEngine) -> None:
    seen: list[tuple[str, list[int]]] = []
    query = "register that holds the UART baud rate clock divider"
    ranked = engine.rank(
        query,
        "doc_type = 'trm'",
        doc_type="trm",
        observe=lambda name, rows: seen.append((name, [r["_rowid"] for r in rows])),
    )
    assert [name for name, _ in seen] == ["fused", "reranked"]
    assert sorted(seen[0][1]) == sorted(seen[1][1]), "reranking reorders the pool, never drops from it"
    assert seen[-1][1] == [row["_rowid"] for row in ranked]
    assert [r["_rowid"] for r in engine.rank(query, "doc_type = 'trm'", doc_type="trm")] == seen[-1][1]


def test_excerpt_keeps_a_register_blocks_head_and_the_line_the_question_is_about() -> None:
    fields = "".join(
        f"- UART_F{i} [{i}] (R/W) reset 0x0: An ordinary field about the UART clock.\n" for i in range(60)
    )
    block = (
        "UART > Registers\n\nRegister UART_CONF0_REG\nAddress: 0x0020\nReset value: 0x1000001C\n"
        "Summary: Configuration register 0\nFields:\n"
        + fields
        + "- UART_TXD_INV [13] (R/W) reset 0x0: Invert the TX line level.\n"
    )
    short, truncated = excerpt(block, [], budget=800, terms=["invert", "uart", "line"])
    assert truncated and "Address: 0x0020\nReset value: 0x1000001C" in short, "the register's identity stays"
    assert "UART_TXD_INV" in short, "the rare words of the question pick the window"


def test_store_index_counts_as_a_row_by_row_pass_would(engine: SearchEngine) -> None:
    """StoreIndex counts groups of alike rows; every count and the first-seen order of chips and
    releases must be those of reading each row (the reference pass below)."""
    rows = engine.table.search().limit(engine.index.rows).to_arrow().to_pylist()
    coverage: dict[str, Counter[str]] = {}
    releases: dict[str, tuple[int, Counter[str]]] = {}
    last_chunk: dict[str, int] = {}
    for row in rows:
        for chip in row["chips"]:
            coverage.setdefault(chip, Counter())[row["doc_type"]] += 1
        for series in row["releases"]:
            count, chips = releases.get(series, (0, Counter()))
            releases[series] = (count + 1, chips + Counter(row["chips"]))
        last_chunk[row["file_path"]] = max(last_chunk.get(row["file_path"], -1), row["chunk_index"])
    index = engine.index
    assert list(index.coverage.items()) == list(coverage.items())
    assert index.doc_type_rows == Counter(row["doc_type"] for row in rows)
    assert [(s, h.rows, h.chips) for s, h in index.releases.held.items()] == [
        (s, count, chips) for s, (count, chips) in releases.items()
    ]
    assert index.file_chunks == last_chunk
    assert index.revisions_seen == {
        chip: {rev for row in rows if chip in row["chips"] for rev in row["revisions"]} for chip in coverage
    }
