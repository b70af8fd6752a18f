"""The retrieval engine against a real LanceDB store built by embed_and_store with the real MiniLM."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import embed_and_store
import fusion
from embedder import get_embedder
from results import VARIANT_NOTE_CHARS, excerpt, fold_chip_variants, revision_scope, variant_note
from retrievers import definition_strength, meant_symbols, query_symbols, symbol_pattern
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
            "text", "doc_type", "chips", "revisions", "revision_scope", "source_doc", "section_path",
            "file_path", "chunk_index", "source_version", "source_commit", "score", "matched_by",
            "symbol_refs",
        }  # fmt: skip
        # a field that says nothing is left out, except those every client reads
        assert ("url" in result) == (result["doc_type"] == "idf")
        assert result.get("text_truncated", True) is True and result.get("releases", [1]) != []
        assert result["matched_by"] and set(result["matched_by"]) <= {"vector", "fts", "symbol"}
        assert result["source_commit"] != "unknown"


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


def test_idf_results_link_the_docs_page_for_the_chip_asked(engine: SearchEngine) -> None:
    asked = engine.search("uart_driver_install", chip="esp32c3", doc_type="idf")["results"][0]
    assert asked["url"] == (
        "https://docs.espressif.com/projects/esp-idf/en/latest/esp32c3/api-reference/peripherals/uart.html"
    )
    unasked = engine.search("uart_driver_install", doc_type="idf")["results"][0]
    assert f"/latest/{unasked['chips'][0]}/" in unasked["url"]
    assert engine.search("UART_CLKDIV_REG", doc_type="trm")["results"][0].get("url") is None


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
        (lambda e: e.read("ESP32-C3/99-NOPE__EN", 0), "unknown file_path"),
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


def test_questions_are_classified_for_their_leg_weights() -> None:
    assert fusion.query_kind("UART_CLKDIV_REG", True) == "symbol"
    assert fusion.query_kind("which register holds the baud divider", False) == "register"
    assert fusion.query_kind("how many RMT channels does it have", False) == "capability"
    assert fusion.query_kind("keep a variable across deep sleep", False) == "prose"
    assert set(fusion.LEG_WEIGHTS) == set(fusion.QUERY_KINDS)


def test_only_a_lookup_of_identifiers_is_a_symbol_question() -> None:
    lookup = "UART_CLKDIV_REG address"
    assert fusion.symbol_led(lookup, ["UART_CLKDIV_REG"])
    sentence = "skip periodic esp_timer callbacks that were missed during light sleep"
    assert not fusion.symbol_led(sentence, ["esp_timer"])
    assert not fusion.symbol_led(lookup, [])
    # the sentence is weighted by what its words ask, as it would be without the identifier
    assert fusion.query_kind(sentence, fusion.symbol_led(sentence, ["esp_timer"])) == "prose"
    assert fusion.LEG_WEIGHTS["prose"].fts > fusion.LEG_WEIGHTS["symbol"].fts


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("how many RMT channels does it have", True),
        ("maximum duty resolution in bits of the LED PWM timers", True),  # "bits" made it a register one
        ("which bit enables the LEDC overflow interrupt", False),
        ("maximum value of the UART clock divider register", False),  # names a register
        ("largest offset of a field in the RMT block", False),
    ],
)
def test_capability_questions_also_count_in_bits(query: str, asks: bool) -> None:
    assert (fusion.query_kind(query, False) == "capability") is asks
    assert fusion.asks_register(query) is not asks


def _cosine(row: dict) -> float:
    return 1.0 - row["_distance"]


def _bm25(row: dict) -> float:
    return row["_score"]


def test_fused_score_is_each_lists_normalised_score_times_its_weight() -> None:
    a = {"_rowid": 0, "_distance": 0.30, "_score": 0.0}
    b = {"_rowid": 1, "_distance": 0.40, "_score": 5.0}
    c = {"_rowid": 2, "_distance": 0.60, "_score": 10.0}
    fused = fusion.fuse_legs(
        [
            fusion.Leg("vector", [a, b, c], _cosine, 0.6, spread=True),
            fusion.Leg("fts", [c, b], _bm25, 2.0),
        ]
    )
    scale = fusion.LEG_SCALE
    # vector spread: a 1, b (0.6 - 0.4) / (0.7 - 0.4) = 2/3, c 0; full text over its best: c 1, b 1/2
    expected = {2: 2.0 * scale, 1: (0.6 * 2 / 3 + 2.0 * 0.5) * scale, 0: 0.6 * scale}
    assert [row["_rowid"] for row in fused] == [2, 1, 0]
    assert {row["_rowid"]: row["score"] for row in fused} == pytest.approx(expected)
    assert fused[1]["matched_by"] == ["vector", "fts"]


def test_the_vector_lists_clear_first_is_not_buried_under_rows_both_lists_hold_at_their_tails() -> None:
    """A question worded unlike the manual: only the vector list holds the answer, well above its
    next row; rows that both lists hold far down (vector 9th and 10th, full text 11th and 12th at
    under a third of its best) must not outrank it. Under reciprocal rank they did: two middling
    places earned more than one first place."""
    answer = {"_rowid": 1, "_distance": 0.30, "_score": 0.0}
    vector = [answer] + [{"_rowid": 10 + i, "_distance": 0.45 + 0.005 * i, "_score": 0.0} for i in range(39)]
    tails = [{**vector[8], "_score": 9.0}, {**vector[9], "_score": 8.5}]
    fts = [{"_rowid": 100 + i, "_score": 30.0 - i} for i in range(10)] + tails
    fused = fusion.fuse_legs(
        [fusion.Leg("vector", vector, _cosine, 0.6, spread=True), fusion.Leg("fts", fts, _bm25, 1.0)]
    )
    order = [row["_rowid"] for row in fused]
    assert order[0] == 100  # the full-text list's first, at its best score, still leads
    assert order.index(1) < order.index(vector[8]["_rowid"]) < order.index(vector[9]["_rowid"])


def test_a_list_whose_rows_score_alike_gives_each_the_full_share() -> None:
    one = {"_rowid": 1, "_distance": 0.5}
    fused = fusion.fuse_legs([fusion.Leg("vector", [one], _cosine, 0.6, spread=True)])
    assert fused[0]["score"] == pytest.approx(0.6 * fusion.LEG_SCALE)


def _voted(ranked: list[dict], question: str, kind: str, doc_type: str | None) -> list[dict]:
    """``ranked`` after every answer-kind vote the question gets, in order, as rank applies them."""
    for _, vote in fusion.answer_kind_votes(question, fusion.QuestionWords(question), kind, doc_type):
        ranked = vote(ranked)
    return ranked


def _kind_order(passages: list[dict], question: str, doc_type: str) -> list[int]:
    """The order the answer-kind votes give passages fused in the order given (ids 1, 2, ...; each
    fused score 0.01 below the one before)."""
    ranked = [{**p, "_rowid": n, "score": 0.04 - 0.01 * n} for n, p in enumerate(passages, 1)]
    kind = fusion.query_kind(question, False)
    return [row["_rowid"] for row in _voted(ranked, question, kind, doc_type)]


def test_configuring_within_the_manuals_is_asking_for_a_register_field() -> None:
    register = "LEDC > Registers\n\nRegister LEDC_TIMER0_CONF_REG\nAddress: 0x00A0\n- LEDC_TICK_SEL [25]"
    prose = {"text": "The LEDC selects its clock at start.", "section_path": "LEDC"}
    block = {"text": register, "section_path": "LEDC > Registers"}
    question = "select the clock source of an LED PWM timer"
    assert _kind_order([prose, block], question, "trm") == [2, 1]
    assert _kind_order([prose, block], question, "idf") == [1, 2]


def test_within_the_headers_a_question_naming_no_register_asks_for_a_capability() -> None:
    struct = {
        "text": "/** Type of sleep_conf0 register\n * UART wakeup character sequence */",
        "file_path": "components/soc/esp32c61/register/soc/uart_struct.h",
    }
    caps = {
        "text": "ESP32-C61 capabilities: UART\nSOC_UART_WAKEUP_CHARS_SEQ_MAX_LEN (5)",
        "file_path": "components/soc/esp32c61/include/soc/soc_caps.h",
    }
    question = "longest character sequence the UART can match to wake the chip from light sleep"
    assert fusion.query_kind(question, False) == "prose"  # the headers decide it
    assert _kind_order([struct, caps], question, "src") == [2, 1]
    assert _kind_order([struct, caps], question, "idf") == [1, 2]
    assert _kind_order([struct, caps], "register holding the UART wake-up character sequence", "src") == [
        1,
        2,
    ]


def test_a_capability_question_in_a_manual_votes_for_the_chapters_feature_list() -> None:
    detail = {
        "text": "The CSI host receives pixel data from the camera over its data lanes.",
        "section_path": "MIPI CSI > Functional Description",
        "file_path": "ESP32-P4/41-MIPICSI__EN",
    }
    features = {
        "text": "- Up to 2 data lanes\n- Up to 1.5 Gbps per lane",
        "section_path": "MIPI CSI > Feature List",
        "file_path": "ESP32-P4/41-MIPICSI__EN",
    }
    question = "MIPI CSI number of data lanes and per-lane data rate"
    assert _kind_order([detail, features], question, "trm") == [2, 1]
    assert _kind_order([detail, features], question, "idf") == [1, 2]  # only within the manuals
    assert _kind_order([detail, features], "MIPI CSI register with the number of data lanes", "trm") == [1, 2]


def test_a_feature_list_merged_into_the_chapters_first_chunk_is_voted_for_by_its_heading() -> None:
    function = {
        "text": "ECC Hardware Accelerator (ECC) > Function Description\n\n"
        "The ECC accelerator computes on the elliptic curve in the working mode that software selects.",
        "section_path": "ECC Hardware Accelerator (ECC) > Function Description",
        "file_path": "ESP8684/16-ECC__EN",
    }
    head = {
        "text": "ECC Hardware Accelerator (ECC)\n\n# Introduction\n\nECC is public-key cryptography.\n\n"
        "# Features\n\n* Two different elliptic curves, namely P-192 and P-256\n\n* Seven working modes",
        "section_path": "ECC Hardware Accelerator (ECC)",
        "file_path": "ESP8684/16-ECC__EN",
    }
    summary = {**head, "text": "ECC Hardware Accelerator (ECC)\n\n# Register Summary\n\nECC_MULT_INT_RAW_REG"}
    question = "which elliptic curves and how many working modes does the ECC accelerator support"
    assert fusion.holds_feature_list(head) and not fusion.holds_feature_list(summary)
    assert _kind_order([function, head], question, "trm") == [2, 1]
    assert _kind_order([function, summary], question, "trm") == [1, 2], "the chapter title earns nothing"


def test_a_question_that_counts_in_bits_without_naming_a_register_is_no_register_question() -> None:
    register = {
        "text": "LEDC > Registers\n\nRegister LEDC_TIMER0_CONF_REG\nAddress: 0x00A0\n- LEDC_DUTY_RES [4:0]",
        "section_path": "LEDC > Registers",
        "file_path": "ESP32-C6/38-LEDC__EN",
    }
    features = {
        "text": "- Duty resolution up to 20 bits",
        "section_path": "LED PWM Controller > Features",
        "file_path": "ESP32-C6/38-LEDC__EN",
    }
    question = "maximum LEDC timer bit width (duty resolution)"
    assert not fusion.asks_register(question) and fusion.asks_register("LEDC timer resolution field width")
    assert _kind_order([register, features], question, "trm") == [2, 1]
    assert _kind_order([register, features], "which bit sets the LEDC timer duty resolution", "trm") == [1, 2]


def test_a_property_named_with_register_words_is_no_register_question() -> None:
    register = {
        "text": "TWAI > Registers\n\nRegister TWAI_BUS_TIMING_0_REG\nAddress: 0x0018\n- TWAI_BAUD_PRESC",
        "section_path": "Two-wire Automotive Interface (TWAI) > Registers",
        "file_path": "ESP32-H2/34-TWAI__EN",
    }
    features = {
        "text": "- Bit rates from 1 Kbit/s to 1 Mbit/s\n- 64-byte Receive FIFO",
        "section_path": "Two-wire Automotive Interface (TWAI) > Features",
        "file_path": "ESP32-H2/34-TWAI__EN",
    }
    question = "TWAI controller supported bit rates and receive FIFO size"
    assert not fusion.asks_register(question)
    assert not fusion.asks_register("what address modes does the RISC-V trace encoder have")
    assert not fusion.asks_register("how much external RAM address space can be mapped")
    assert _kind_order([features, register], question, "trm") == [1, 2], "no register vote lifts the block"
    # the same words asking for a register or a bit still do
    assert fusion.asks_register("TWAI bit rate prescaler register address")
    assert fusion.asks_register("which bit selects the trace encoder's address mode")
    asked = "which register sets the TWAI bit rate prescaler"
    assert _kind_order([features, register], asked, "trm") == [2, 1]


def test_a_register_question_with_an_instance_number_votes_for_names_carrying_it() -> None:
    def block(name: str) -> dict:
        return {
            "text": f"TWAI > Registers\n\nRegister {name}\nAddress: 0x0018",
            "section_path": "TWAI > Registers",
        }

    one, zero = block("TWAI_BUS_TIMING_1_REG"), block("TWAI_BUS_TIMING_0_REG")
    assert _kind_order([one, zero], "TWAI bus timing register 0 address", "trm") == [2, 1]
    assert _kind_order([one, zero], "TWAI bus timing register address", "trm") == [1, 2]
    # quantities are no instance numbers, nor is the 2 of I2C
    assert _kind_order([one, zero], "bus timing register for a 16 bit prescaler at 80 MHz", "trm") == [1, 2]
    assert fusion.instance_numbers(block("I2C_SCL_LOW_PERIOD_REG")["text"]) == set()
    assert fusion.instance_numbers("Register EFUSE_RD_RS_ERR0_REG\n- EFUSE_BLK1_ERR_NUM [2:0]") == {0, 1}
    # a parameterised register is every instance its heading lists; CONF0's 0 numbers no channel
    channels = block("DMA2D_OUT_SCRAMBLE_CHn_REG (n: 0-3)")
    conf0 = block("DMA2D_OUT_CONF0_CHn_REG (n: 0-3)")
    assert fusion.instance_numbers(channels["text"]) == {0, 1, 2, 3}
    assert fusion.instance_numbers("Register A_m_REG (m = 4, 5)\nAddress: 0x0") == {4, 5}
    question = "2D-DMA register that configures byte scrambling on TX channel 0"
    assert _kind_order([channels, conf0], question, "trm") == [1, 2], "both get the instance vote"


def test_a_question_about_an_option_votes_for_kconfig_options() -> None:
    guide = {
        "text": "The esp_timer task runs the callbacks.",
        "file_path": "api-reference/system/esp_timer",
        "section_path": "ESP Timer > Usage",
    }
    option = {
        "text": "CONFIG_ESP_TIMER_TASK_STACK_SIZE\nConfigure the stack size of the esp_timer task.",
        "file_path": "api-reference/kconfig-reference",
        "section_path": "Configuration Options Reference > ESP Timer > CONFIG_ESP_TIMER_TASK_STACK_SIZE",
    }
    assert _kind_order([guide, option], "esp_timer callback task stack size option", "idf") == [2, 1]
    assert _kind_order([guide, option], "esp_timer callback task stack size", "idf") == [1, 2]


def test_a_question_about_a_default_votes_for_passages_that_state_one() -> None:
    guide = {
        "_rowid": 1,
        "text": "The main task stack size is set by CONFIG_ESP_MAIN_TASK_STACK_SIZE.",
        "score": 0.03,
    }
    option = {"_rowid": 2, "text": "Main task stack size\nDefault value:\n  - 3584", "score": 0.025}
    member = {
        "_rowid": 3,
        "text": "int timeout_ms\nNetwork timeout in milliseconds (default is 5000)",
        "score": 0.02,
    }
    assert fusion.DEFAULT_INTENT.search("stack size of the task that runs app_main and its default")
    assert not fusion.DEFAULT_INTENT.search("stack size of the task that runs app_main")
    # the default event loop and sdkconfig.defaults are things, not default values
    assert not fusion.asks_default("post an event to the default event loop from an interrupt handler")
    assert not fusion.asks_default("how do I give different sdkconfig defaults for each target chip")
    assert fusion.asks_default("default stack size of the system event loop task")
    assert fusion.asks_default("which events does the default event loop get by default")
    fused = fusion.fuse_default_statements([guide, option, member])
    assert [row["_rowid"] for row in fused] == [2, 3, 1], "one vote each, in fused order: 1/61 and 1/62"


def test_a_counting_question_votes_for_passages_that_count_what_it_names() -> None:
    query = "how many secure boot signing keys can be stored"
    process = {
        "_rowid": 1,
        "text": "Keys are processed in a linear order: key #0, then key #1.",
        "score": 0.03,
    }
    counted = {
        "_rowid": 2,
        "text": "Up to three public keys can be attached to a bootloader.",
        "score": 0.025,
    }
    bytes_ = {"_rowid": 3, "text": "A signature block holds 1216 bytes.", "score": 0.026}
    pattern = fusion.counted_nouns(query)
    assert pattern is not None and pattern.search(counted["text"]) and not pattern.search(bytes_["text"])
    assert not pattern.search(process["text"]), "'#0, then key' is no count of keys"
    fused = fusion.fuse_counted_nouns([process, bytes_, counted], query)
    assert [row["_rowid"] for row in fused] == [2, 1, 3]
    assert fusion.counted_nouns("how many maximum") is None


def test_a_count_that_a_register_sets_is_no_count_to_vote_for() -> None:
    number = {
        "_rowid": 1,
        "text": "SHA > Registers\n\nRegister SHA_DMA_BLOCK_NUM_REG\nAddress: 0x000C\n"
        "Summary: Block number register\n- SHA_DMA_BLOCK_NUM [5:0] The block number.",
        "score": 0.030,
    }
    start = {
        "_rowid": 2,
        "text": "SHA > Registers\n\nRegister SHA_DMA_START_REG\nAddress: 0x0010\n"
        "Summary: Starts DMA-SHA\n- SHA_DMA_START [0] Write 1 to start DMA.",
        "score": 0.029,
    }

    def order(question: str) -> list[int]:
        place = {"file_path": "ESP8684/17-SHA__EN", "section_path": "SHA Accelerator (SHA) > Registers"}
        ranked = [{**number, **place}, {**start, **place}]
        return [row["_rowid"] for row in _voted(ranked, question, fusion.query_kind(question, False), "trm")]

    assert fusion.CONFIGURED_COUNT.search("the register that sets how many blocks DMA-SHA processes")
    assert fusion.CONFIGURED_COUNT.search("register where I write the number of message blocks")
    assert not fusion.CONFIGURED_COUNT.search("how many blocks can DMA-SHA process at once")
    assert order("the register that sets how many blocks DMA-SHA processes") == [1, 2]
    assert order("how many blocks can DMA-SHA process at once") == [2, 1], "a count asked for is voted for"


def test_a_count_the_program_reads_at_run_time_is_no_count_to_vote_for() -> None:
    stats = {
        "file_path": "api-reference/storage/nvs_flash",
        "section_path": "Non-Volatile Storage Library > API Reference > Functions",
        "text": "esp_err_t nvs_get_stats(const char *part_name, nvs_stats_t *nvs_stats)\n"
        "  Fill structure nvs_stats_t. It provides info about used and free entries in a partition.",
        "score": 0.0300,
    }
    limits = {
        "file_path": "api-reference/storage/nvs_flash",
        "section_path": "Non-Volatile Storage Library > Internals > Pages",
        "text": "Each page of a partition holds 126 entries of 32 bytes.",
        "score": 0.0299,
    }

    def order(question: str) -> list[str]:
        ranked = [{**stats, "_rowid": 1}, {**limits, "_rowid": 2}]
        kind = fusion.query_kind(question, False)
        return [row["section_path"].split(" > ")[-1] for row in _voted(ranked, question, kind, "idf")]

    assert not fusion.asks_stated_count("how do I find out how many free entries are left in a partition")
    assert not fusion.asks_stated_count("find out how big a stored string is before reading it")
    assert fusion.asks_stated_count("how many entries does a partition page hold")
    assert order("how do I find out how many free entries are left in a partition") == ["Functions", "Pages"]
    assert order("how many entries does a partition page hold") == ["Pages", "Functions"], (
        "a count the documents state is voted for"
    )


def test_a_which_pins_question_votes_for_passages_that_name_pins() -> None:
    prose = {"_rowid": 1, "text": "The USB-JTAG controller is enabled by default.", "score": 0.03}
    pins = {
        "_rowid": 2,
        "text": "USB-JTAG: GPIO19 and GPIO20 are used by USB-JTAG by default.",
        "score": 0.02,
    }
    one = {"_rowid": 3, "text": "Strapping: GPIO0 selects the boot mode.", "score": 0.025}
    assert fusion.PIN_INTENT.search("which GPIOs does the USB-JTAG use")
    assert not fusion.PIN_INTENT.search("how to use GPIO interrupts")
    assert [row["_rowid"] for row in fusion.fuse_pin_lists([prose, one, pins])] == [2, 1, 3]


def test_capability_questions_vote_for_capability_header_passages() -> None:
    caps = {"_rowid": 1, "file_path": "components/soc/esp32c6/include/soc/soc_caps.h", "score": 0.02}
    card = {"_rowid": 2, "file_path": "components/soc/esp32c6/register/soc/ledc_reg.h", "score": 0.025}
    assert [row["_rowid"] for row in fusion.fuse_capability_definitions([card, caps])] == [1, 2]


def test_register_names_the_question_spells_out_lift_their_block_above_siblings() -> None:
    words = fusion.QuestionWords("bit to power up the temperature sensor")
    power = "TSENS > Registers\n\nRegister TSENS_CTRL_REG\nAddress: 0x0000\n- TSENS_POWER_UP [22] (R/W)"
    clock = "TSENS > Registers\n\nRegister TSENS_CLK_REG\nAddress: 0x0004\n- TSENS_CLK_DIV [7:0] (R/W)"
    assert fusion.name_coverage(power, words) == 1.0, "power, up, and TSENS: temperature sensor"
    assert fusion.name_coverage(clock, words) == 0.5, "TSENS only"
    # abbreviations count: ctrl is control, conf is configuration; REG says nothing
    control = fusion.QuestionWords("pulse counter control register address")
    assert fusion.name_coverage("Register PCNT_CTRL_REG\nAddress: 0x00b0", control) == 1.0, (
        "PCNT: pulse counter"
    )
    assert fusion.name_coverage("Register PCNT_U0_CONF0_REG\nAddress: 0x0000", control) == 0.5
    divider = fusion.QuestionWords("register that holds the UART baud rate clock divider")
    assert fusion.name_coverage("Register UART_CLKDIV_REG\nAddress: 0x0014", divider) == 1.0
    # TX and RX abbreviate by convention, not by their letters
    receiver = fusion.QuestionWords("select the data bus width of the parallel IO receiver")
    rx_block = "Register PARL_IO_RX_DATA_CFG_REG\nAddress: 0x0000\n- PARL_IO_RX_BUS_WID_SEL [2:0]"
    tx_block = "Register PARL_IO_TX_DATA_CFG_REG\nAddress: 0x0008\n- PARL_IO_TX_BUS_WID_SEL [2:0]"
    assert fusion.name_coverage(rx_block, receiver) > fusion.name_coverage(tx_block, receiver)
    assert fusion.QuestionWords("bytes transmitted").spell("tx") and not receiver.spell("tx")
    assert fusion.QuestionWords("external crystal frequency").spell("xtal")
    # a part under four letters is no abbreviation of a word pair: "in the" is no INT
    assert not fusion.QuestionWords("status bit in the loop").spell("int")
    card = "components/soc/esp32c3/include/soc/uart_reg.h\n\nUART_CONF0_REG = DR_REG_UART_BASE + 0x20\n"
    assert fusion.name_coverage(card + "- UART_TXD_INV [13]", fusion.QuestionWords("invert uart txd")) == 1.0
    prose = {
        "_rowid": 3,
        "text": "TSENS > Programming Procedure\n\nPower up the temperature sensor.",
        "score": 0.03,
    }
    rows = [
        {"_rowid": 1, "text": clock, "score": 0.031},
        {"_rowid": 2, "text": power, "score": 0.030},
        prose,
    ]
    ranked = fusion.fuse_register_names(rows, fusion.QuestionWords("bit to power up the temperature sensor"))
    assert [row["_rowid"] for row in ranked] == [2, 1, 3], "prose gets no name vote"


def test_densest_span_counts_distinct_question_words_said_close_together() -> None:
    wanted = set(fusion.QuestionWords("free entries left, NVS partition").stems)
    said = "nvs_get_stats: fill a structure with the number of used and free entries in the partition."
    assert fusion.densest_span(said, wanted) == 3, (
        "free, entries, partition (nvs is too far back); plurals fold"
    )
    apart = " ".join(["free", *["filler"] * fusion.SPAN_WORDS, "entries", "on", "the", "partition"])
    assert fusion.densest_span(apart, wanted) == 2, "only neighbours share a span"
    assert fusion.densest_span("free free free", wanted) == 1, "a repeated word counts once"
    assert fusion.densest_span("", wanted) == 0


def test_a_passage_that_says_the_question_in_one_span_leads_its_scattered_sibling() -> None:
    query = "how many free entries are left in the NVS partition"
    scattered = (
        "Non-Volatile Storage > API Reference > Functions\n\nesp_err_t nvs_open(): open a partition.\n"
        + "Parameters: the name of the namespace, a handle to fill.\n" * 3
        + "esp_err_t nvs_erase_all(): erase every entry that is left.\n"
        + "Parameters: a handle of a namespace opened before.\n" * 3
        + "esp_err_t nvs_get_used(): how many bytes are free."
    )
    stated = "esp_err_t nvs_get_stats(): the number of used, free and total entries left in the partition."
    rows = [
        {"_rowid": 1, "text": scattered, "score": 0.040},
        {"_rowid": 2, "text": stated, "score": 0.038},
    ]
    assert [row["_rowid"] for row in fusion.fuse_word_spans(rows, fusion.QuestionWords(query))] == [2, 1]
    # a question of one content word has no span to look for: the order stays, though only the
    # second passage says "total"
    tied = [{**rows[0], "score": 0.040}, {**rows[1], "score": 0.038}]
    assert [row["_rowid"] for row in fusion.fuse_word_spans(tied, fusion.QuestionWords("total"))] == [1, 2]
    # rows below the first SPAN_CANDIDATES are not read
    tail = [
        {"_rowid": 10 + i, "text": "filler", "score": 0.05 - i * 1e-4} for i in range(fusion.SPAN_CANDIDATES)
    ]
    late = {"_rowid": 99, "text": stated, "score": 0.0}
    ranked = fusion.fuse_word_spans([*tail, late], fusion.QuestionWords(query))
    assert ranked[-1]["_rowid"] == 99 and ranked[-1]["score"] == 0.0


def test_explanation_questions_put_the_guide_above_a_kconfig_option_that_names_the_switch() -> None:
    option = {
        "_rowid": 1,
        "file_path": "api-reference/kconfig-reference",
        "text": "CONFIG_ADC_ONESHOT_FORCE_USE_ADC2_ON_C3\n\nForce use ADC2 oneshot mode on ESP32C3",
        "score": 0.040,
    }
    guide = {
        "_rowid": 2,
        "file_path": "api-reference/peripherals/adc/adc_oneshot",
        "text": "Hardware Limitations\n\nADC2 oneshot mode is no longer supported on ESP32-C3.",
        "score": 0.038,
    }
    api = {"_rowid": 3, "file_path": "api-reference/peripherals/adc/adc_oneshot", "text": "", "score": 0.030}
    for question in (
        "can ADC2 be used in oneshot mode",
        "are task stack sizes given in bytes or words",
        "with app rollback enabled, what happens if the new firmware reboots",
        "how do I put zero-initialized static variables in PSRAM",
        "ADC oneshot driver: can ADC2 be used while Wi-Fi is on",
    ):
        ranked = _voted([{**option}, {**guide}, {**api}], question, "prose", "idf")
        assert ranked[0]["_rowid"] == 2, question
    ranked = fusion.fuse_explanations([{**option}, {**guide}, {**api}])
    assert [row["_rowid"] for row in ranked][:2] == [2, 1], "the guide passes the option"
    assert [row["_rowid"] for row in ranked].index(2) < [row["_rowid"] for row in ranked].index(3)
    # a question about a value keeps the option first; so does a question within the manuals
    for question, doc_type in (
        ("idle task stack size setting", "idf"),
        ("can the ECC accelerator do P-384", "trm"),
    ):
        ranked = _voted([{**option}, {**guide}], question, "prose", doc_type)
        assert ranked[0]["_rowid"] == 1, question


def test_struct_and_config_questions_vote_for_the_api_reference() -> None:
    guide = {
        "_rowid": 1,
        "section_path": "SPI Master Driver > Transfer Speed Considerations",
        "score": 0.0330,
    }
    reference = {"_rowid": 2, "section_path": "SPI Master Driver > API Reference - SPI Master > Structures"}
    far = {"_rowid": 3, "section_path": "Wi-Fi Driver > API Reference > Structures", "score": 0.0100}
    ranked = fusion.fuse_api_reference([guide, {**reference, "score": 0.0325}, far], "SPI clock speed")
    assert [row["_rowid"] for row in ranked] == [2, 1, 3], "a near-tie goes to the reference"
    # a question about a struct's fields: the Structures section beats the Functions one beside it
    functions = {"_rowid": 4, "section_path": "ESP-NOW > API Reference > Functions", "score": 0.0330}
    structures = {"_rowid": 5, "section_path": "ESP-NOW > API Reference > Structures", "score": 0.0325}
    for question, order in (
        ("ESP-NOW peer info local master key and encryption fields", [5, 4]),
        ("ESP-NOW peer info local master key and encryption", [4, 5]),
    ):
        ranked = fusion.fuse_api_reference([{**functions}, {**structures}], question)
        assert [row["_rowid"] for row in ranked] == order, question
    assert fusion.API_INTENT.search("SPI device config struct: clock speed and chip select pin")
    assert not fusion.API_INTENT.search("configuration of the flash encryption")
    assert fusion.API_INTENT.search("start a periodic esp_timer: what unit is the period argument in?")
    assert fusion.API_INTENT.search("which parameter of the call sets the queue depth")


def test_rank_shows_each_fusion_step_in_order_and_ends_on_its_result(engine: SearchEngine) -> None:
    seen: list[tuple[str, list[int]]] = []
    query = "register that holds the UART baud rate clock divider"
    ranked = engine.rank(
        query,
        "doc_type = 'trm'",
        doc_type="trm",
        observe=lambda name, rows: seen.append((name, [r["_rowid"] for r in rows])),
    )
    names = [name for name, _ in seen]
    assert names[0] == "vector + full text" and names[-1] == "word spans"
    assert "register definitions" in names and "register names" in names
    assert seen[-1][1] == [row["_rowid"] for row in ranked]
    assert [r["_rowid"] for r in engine.rank(query, "doc_type = 'trm'", doc_type="trm")] == seen[-1][1]


def test_configuring_questions_count_as_register_questions_only_within_manuals_and_headers(
    engine: SearchEngine,
) -> None:
    assert fusion.asks_field("select the common clock source for all LEDC timers")
    assert fusion.asks_field("bit to power up the sensor")
    assert fusion.asks_field("default error warning limit of the TWAI controller after reset")
    assert not fusion.asks_field("FIFO depth of the low-power UART")
    assert fusion.asks_field("skip blending and output the background layer directly")
    assert fusion.asks_field("let one RMT channel borrow the RAM blocks of the next channels")
    assert not fusion.asks_field("how many GDMA channels are there and which peripherals can use them")
    assert fusion.asks_field("how do I force the pad high during deep sleep")
    assert not fusion.asks_field("how many cards can the SD/MMC host connect and which bus widths")
    assert fusion.asks_field("where do I read a hardware true random number from")
    assert not fusion.asks_field("which chapter says where the RNG gets its entropy")
    # a question about the hardware describes it in the same words
    assert not fusion.asks_field("at what voltage does the brown-out detector trigger")
    assert not fusion.asks_field("how many acceptance mask filters does the TWAI controller have")
    assert not fusion.asks_field("can I set and clear dedicated GPIO outputs with CPU instructions")
    assert fusion.asks_field("how do I invert the UART TX line")
    assert not fusion.asks_field("GPIO via ETM: how many task channels, and can a task set or clear the pin?")
    assert fusion.asks_field("UART: invert the TX line")
    assert not fusion.asks_register("ULP coprocessor: how many general purpose registers does it have?")
    assert fusion.asks_register("how many bits wide is the SPI clock register")
    query = "set the UART baud rate divider"
    within = {row["_rowid"]: row for row in engine.rank(query, "doc_type = 'trm'", doc_type="trm")}
    unfiltered = {row["_rowid"]: row for row in engine.rank(query, "doc_type = 'trm'")}
    words = fusion.QuestionWords(query)
    defining = [i for i, row in within.items() if fusion.REGISTER_DEFINITION.search(row["text"])]
    assert defining and len(defining) < len(within), "the fixture has register blocks and prose"
    for rowid, row in within.items():
        gained = row["score"] - unfiltered[rowid]["score"]
        if rowid not in defining:
            assert gained == pytest.approx(0.0), "only passages that define registers gain"
            continue
        # the register-definition vote (1/(60 + position)) plus the name vote
        name_vote = fusion.NAME_VOTE_WEIGHT * fusion.name_coverage(row["text"], words)
        assert (
            1 / (fusion.RRF_K + len(defining)) - 1e-12 <= gained - name_vote <= 1 / (fusion.RRF_K + 1) + 1e-12
        )


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
