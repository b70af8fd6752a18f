"""The read path's steps one by one: passage facts at ingest, query analysis, the fused pool, the
features, the learned reranker and its training helpers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusion
from features import (
    FEATURE_VERSION,
    FEATURES,
    INDEX,
    Speller,
    densest_hits,
    feature_matrix,
    wanted_stems,
)
from passage_kinds import KINDS, passage_facts
from query_analysis import analyse
from rerank import MODEL_PATH, Ranker, RankerError
from schema import make_row
from term_stats import TermStats, count_stems
from terms import STOPWORDS, content_stems, content_words, words
from train_ranker import answer_rank, cross_validate, train

REGISTER = (
    "UART > Registers\n\nRegister UART_CLKDIV_REG\nAddress: 0x0014\nReset value: 0x000002B6\n"
    "Fields:\n- UART_CLKDIV [11:0] (R/W) reset 0x2b6: The integral part of the divisor."
)


def facts(text: str, doc_type: str, section: str, path: str) -> dict:
    return passage_facts(text, doc_type, section, path)


API = "api-reference/peripherals/uart"
MIGRATION = "migration-guides/release-6.x/6.0/peripherals"


@pytest.mark.parametrize(
    ("text", "doc_type", "section", "path", "kind"),
    [
        (REGISTER, "trm", "UART > Registers", "ESP32-C3/26-UART__EN", "register"),
        ("x\n\nUART_CLKDIV_REG = DR_REG_UART_BASE + 0x14", "src", "uart_reg.h", "soc/uart_reg.h", "register"),
        ("caps\n\nSOC_UART_NUM: 2", "src", "soc_caps.h", "components/soc/esp32c3/soc_caps.h", "capability"),
        (
            "UART > Features\n\n- Full-duplex",
            "trm",
            "UART > Features",
            "ESP32-C3/26-UART__EN",
            "feature_list",
        ),
        ("Table\n\nA | B\n1 | 2\n3 | 4", "trm", "UART > Pins", "ESP32-C3/26-UART__EN", "table"),
        ("K > CONFIG_X\n\nhelp", "idf", "K > CONFIG_X", "api-reference/kconfig-reference", "kconfig_option"),
        (
            "U > API Reference > Functions\n\nf()",
            "idf",
            "U > API Reference > Functions",
            "api/uart",
            "api_function",
        ),
        (
            "U > API Reference > Structures\n\ns",
            "idf",
            "U > API Reference > Structures",
            "api/uart",
            "api_struct",
        ),
        (
            "M > Removed\n\nx",
            "idf",
            "M > Removed",
            "migration-guides/release-6.x/6.0/peripherals",
            "migration",
        ),
        ("UART\n\nintro", "idf", "UART", "api-reference/peripherals/uart", "page_root"),
        ("UART > Setup\n\nsteps", "idf", "UART > Setup", "api-reference/peripherals/uart", "guide"),
    ],
)
def test_each_passage_gets_its_kind(text: str, doc_type: str, section: str, path: str, kind: str) -> None:
    assert kind in KINDS
    assert facts(text, doc_type, section, path)["kind"] == kind


def test_passage_facts_say_what_a_passage_states() -> None:
    stated = facts(
        "T > Pins\n\nGPIO19 and GPIO20 are used. Up to three public keys. Default value: 5",
        "idf",
        "T > Pins",
        "p",
    )
    assert stated["gpio_count"] == 2 and stated["states_default"] and stated["section_depth"] == 2
    assert "key" in stated["counted_terms"]
    block = facts(
        "R\n\nRegister TIMG_T0CONFIG_REG (n: 0-1)\nAddress: 0x0\n- TIMG_T0_EN [31]", "trm", "R", "p"
    )
    assert block["defined_names"][:2] == ["TIMG_T0CONFIG_REG", "TIMG_T0_EN"]
    assert {0, 1} <= set(block["instance_numbers"])


def test_every_row_carries_its_facts_and_a_row_without_them_is_refused() -> None:
    row = make_row(
        text=REGISTER, doc_type="trm", chips=["esp32c3"], source_doc="UART", section_path="UART > Registers",
        file_path="ESP32-C3/26-UART__EN", chunk_index=3,
    )  # fmt: skip
    assert row["kind"] == "register" and row["defined_names"][0] == "UART_CLKDIV_REG"
    from schema import validate_row

    stale = {key: value for key, value in row.items() if key != "kind"}
    with pytest.raises(ValueError, match="re-run the ingests"):
        validate_row(stale)


def test_query_analysis_reads_intents_numbers_chips_and_identifiers() -> None:
    analysis = analyse("how many 64-bit timers does the ESP32-S3 have, and what does TIMG_T0CONFIG_REG set?")
    assert analysis.has("capability") and analysis.has("register") is False
    assert (64.0, "bit") in analysis.quantities
    assert 64 not in analysis.instance_numbers, "a width is a quantity, not an instance number"
    assert analysis.chips == ("esp32s3",)
    assert analysis.identifiers == ("TIMG_T0CONFIG_REG",)
    assert analyse("timer 0 register offset").instance_numbers == {0}
    assert analyse("E (1234) uart: uart_driver_install failed").has("error_text")
    assert analyse("plain esp32 question").chips == ("esp32",)


def test_rare_words_outweigh_common_ones_and_a_long_question_is_searched_by_them() -> None:
    common = {f"word{n}": 500 for n in range(40)} | {"monitor": 300, "bus": 200, "off": 200}
    stats = TermStats(rows=1000, frequencies={"build": 600, "run": 500, "output": 400, "twai": 3, **common})
    analysis = analyse("my build runs but the output of TWAI is wrong", stats)
    assert analysis.weights["twai"] > 5 * analysis.weights["build"]
    logs = "monitor output: " + " ".join(f"word{n}" for n in range(40)) + " TWAI bus-off build run"
    searched = analyse(logs, stats).search_text
    assert "twai" in searched and len(searched.split()) <= 16 + len(analyse(logs).identifiers)


def test_term_stats_count_rows_per_stem() -> None:
    rows, counts = count_stems(["enable the timer", "timers and the clock", "clock"])
    assert rows == 3 and counts["timer"] == 2 and counts["clock"] == 2 and "the" not in counts


def _row(rowid: int, text: str = "t", **extra: object) -> dict:
    return {"_rowid": rowid, "text": text, **extra}


def test_gather_keeps_each_legs_rank_and_share_and_the_symbol_tier() -> None:
    vector = [_row(1, _distance=0.1), _row(2, _distance=0.3), _row(3, _distance=0.5)]
    fts = [_row(3, _score=10.0), _row(4, _score=5.0)]
    hits = [((-2, 0, 0, 1), _row(4)), ((0, 1, 1, 3), _row(5))]
    pool = fusion.gather(
        [
            fusion.Leg("vector", vector, lambda r: 1.0 - r["_distance"], spread=True),
            fusion.Leg("fts", fts, lambda r: r["_score"]),
        ],
        hits,
        symbol_pool=40,
    )
    by_id = {row["_rowid"]: row for row in pool}
    assert by_id[1]["legs"]["vector"][:2] == (1, 1.0) and by_id[3]["legs"]["vector"][1] == 0.0
    assert by_id[4]["legs"]["fts"][:2] == (2, 0.5) and by_id[4]["symbol_tier"] == 0
    assert by_id[5]["symbol_tier"] == fusion.ABSENT_RANK, "a mere mention is no definition tier"
    assert pool[0]["_rowid"] in (3, 4), "found by two legs, fused first"


def test_rows_of_equal_relevance_rank_the_same_whatever_order_the_store_returns_them() -> None:
    def fused(order: list[int]) -> list[tuple[int, int]]:
        distances = {7: 0.2, 3: 0.2, 5: 0.2, 9: 0.4}
        vector = [_row(rowid, _distance=distances[rowid]) for rowid in order]
        legs = [fusion.Leg("vector", vector, lambda r: 1.0 - r["_distance"], spread=True)]
        return [(row["_rowid"], row["legs"]["vector"][0]) for row in fusion.gather(legs, [], symbol_pool=40)]

    assert fused([7, 3, 5, 9]) == fused([5, 7, 3, 9]) == [(3, 1), (5, 2), (7, 3), (9, 4)]


def _candidate(text: str, section: str, **overrides: object) -> dict:
    row = {"text": text, "section_path": section, "doc_type": "trm", "chips": ["esp32c3"], "legs": {}}
    row.update(passage_facts(text, "trm", section, "ESP32-C3/26-UART__EN"))
    row.update(overrides)
    return row


def test_features_measure_how_much_of_the_question_a_passage_says() -> None:
    analysis = analyse("register that holds the UART baud rate clock divider")
    block = _candidate(REGISTER, "UART > Registers")
    prose = _candidate("UART > Overview\n\nThe UART sends bytes.", "UART > Overview")
    matrix = feature_matrix(analysis, [block, prose], "trm")
    assert matrix.shape == (2, len(FEATURES))
    assert matrix[0, INDEX["name_cover"]] == 1.0 and matrix[1, INDEX["name_cover"]] == 0.0
    assert matrix[0, INDEX["asks_register"]] == matrix[1, INDEX["asks_register"]] == 1.0
    assert matrix[0, INDEX["rare_overlap"]] > matrix[1, INDEX["rare_overlap"]]
    assert matrix[0, INDEX["vector_rank"]] == fusion.ABSENT_RANK


def test_span_and_spelling_helpers() -> None:
    wanted = set(content_stems("free entries left partition"))
    assert densest_hits(wanted_stems("free entries on the partition", wanted)[1]) == 3
    assert densest_hits(wanted_stems("free " + "filler " * 20 + "partition", wanted)[1]) == 1
    speller = Speller(analyse("pulse counter control register address"))
    assert speller.coverage("PCNT_CTRL_REG") == 1.0 and speller.coverage("PCNT_U0_CONF0_REG") == 0.5


def test_the_repository_model_loads_and_matches_the_features() -> None:
    ranker = Ranker.load()
    assert ranker.booster.num_feature() == len(FEATURES)
    record = json.loads(MODEL_PATH.read_text())
    assert record["feature_version"] == FEATURE_VERSION and record["training_data"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no ranker model"),
        ("{not json", "unreadable"),
        (
            json.dumps({"feature_version": "old", "features": [], "model": "x"}),
            "trained on feature set 'old'",
        ),
        (
            json.dumps({"feature_version": FEATURE_VERSION, "features": list(FEATURES), "model": "junk"}),
            "corrupt",
        ),
    ],
)
def test_a_missing_corrupt_or_mismatched_model_is_refused_naming_the_fix(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "ranker_model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RankerError, match=message) as raised:
        Ranker.load(path)
    assert str(path) in str(raised.value) and "just train-ranker" in str(raised.value)


def test_training_learns_a_feature_that_decides_relevance_and_cross_validation_shows_it() -> None:
    from eval_retrieval import Case
    from train_ranker import Group

    rng = np.random.default_rng(1)
    groups = []
    for number in range(60):
        features = rng.random((12, len(FEATURES))).astype(np.float32)
        features[:, INDEX["kind"]] = rng.integers(0, len(KINDS), 12)
        answer = int(rng.integers(0, 12))
        features[:, INDEX["span_cover"]] = 0.1
        features[answer, INDEX["span_cover"]] = 0.9
        labels = np.zeros(12)
        labels[answer] = 1.0
        case = Case(f"q{number}", "x", "q", {}, ("a",), ())
        groups.append(Group(case, "synthetic", features, labels))
    ranks = cross_validate(groups, folds=3)
    assert sum(rank == 1 for rank in ranks) >= 55
    booster = train(groups)
    assert answer_rank(booster.predict(groups[0].features), groups[0].labels) == 1
    # the same questions with the deciding feature scrambled: nothing to learn, and the figures say so
    for group in groups:
        rng.shuffle(group.features[:, INDEX["span_cover"]])
        group.features[:, INDEX["span_cover"]] = rng.random(12)
    assert sum(rank == 1 for rank in cross_validate(groups, folds=3)) < 20


TEXTS = st.text(alphabet=st.sampled_from("abcdeEsSgint0129_ -.\nİK"), max_size=200)


@given(text=TEXTS, query=TEXTS)
def test_wanted_stems_places_what_content_stems_would(text: str, query: str) -> None:
    """The reranker's overlap features stem only a text's distinct words; the stems found and their
    positions must be those of stemming every word."""
    wanted = set(content_stems(query))
    stems = content_stems(text)
    present, hits = wanted_stems(text, wanted)
    assert present == wanted & set(stems)
    assert hits == [(position, term) for position, term in enumerate(stems) if term in wanted]


@given(text=TEXTS)
def test_content_words_are_the_long_words_without_stopwords(text: str) -> None:
    assert content_words(text) == [w for w in words(text) if len(w) >= 2 and w not in STOPWORDS]
