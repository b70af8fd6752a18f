"""The ESP-IDF release axis: series names, caller input, defaults, and the engine and MCP tools on a
store that holds two releases (the search fixture: v6.1-dev for every page, v5.5 for a few)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import lancedb
import pytest
from test_search import build_fixture_store

from releases import (
    HeldRelease,
    ReleaseError,
    ReleaseIndex,
    chips_in,
    choose,
    holds,
    release_chip,
    release_series,
    releases_of,
)
from search import Filters, SearchEngine, SearchInputError, open_engine

C3_ONLY_V55 = "api-reference/peripherals/adc"


def held(series: str, version: str, chips: list[str]) -> HeldRelease:
    return HeldRelease(series, version, "0" * 40, Counter(dict.fromkeys(chips, 1)), rows=len(chips))


@pytest.fixture
def index() -> ReleaseIndex:
    return ReleaseIndex(
        {
            "v6.1-dev": held("v6.1-dev", "v6.1-dev-6734-g102122904ad", ["esp32", "esp32c3", "esp32s3"]),
            "v5.5": held("v5.5", "v5.5.5", ["esp32", "esp32c3"]),
        }
    )


@pytest.mark.parametrize(
    ("version", "series"),
    [
        ("v6.1-dev-6734-g102122904ad", "v6.1-dev"),
        ("v5.5.5", "v5.5"),
        ("5.5", "v5.5"),
        ("release/v5.5", "v5.5"),
        ("v6.0-rc1", "v6.0"),
        ("v5.5.5-dirty", "v5.5"),
        ("102122904ade", None),
        ("unknown", None),
        ("v5.55.5.5", None),
    ],
)
def test_release_series_of_a_version(version: str, series: str | None) -> None:
    assert release_series(version) == series


@pytest.mark.parametrize("asked", ["5.5", "v5.5", "v5.5.5", "release/v5.5", "5.5.5", " V5.5 "])
def test_every_spelling_of_a_release_means_its_series(index: ReleaseIndex, asked: str) -> None:
    assert index.resolve(asked) == ("v5.5", None)


def test_aliases_other_patches_and_all(index: ReleaseIndex) -> None:
    assert index.resolve("master") == ("v6.1-dev", None)
    assert index.resolve("6.1") == ("v6.1-dev", "v6.1 is not released in this store; answering from v6.1-dev")
    assert index.resolve("all") == (None, None)
    series, note = index.resolve("v5.5.2")
    assert series == "v5.5" and note == "v5.5.2 asked; the store holds v5.5.5 for series v5.5"


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ("4.4", "the store holds no ESP-IDF v4.4 docs or headers; it holds: v6.1-dev"),
        ("banana", "is not an ESP-IDF release; valid: v6.1-dev, v5.5"),
        ("v5.5'; DROP TABLE chunks --", "idf_version must be a release like 5.5"),
        ("../../etc/passwd", "is not an ESP-IDF release"),
        ("", "idf_version must be a release like 5.5"),
    ],
)
def test_bad_releases_are_errors_naming_what_the_store_holds(
    index: ReleaseIndex, asked: str, message: str
) -> None:
    with pytest.raises(ReleaseError, match=re.escape(message)):
        index.resolve(asked)


def test_default_project_release_and_nearest(index: ReleaseIndex) -> None:
    assert choose(index, None, chip=None).series == "v6.1-dev"  # covers the most chips
    from_project = choose(index, None, chip="esp32c3", scope_series="v5.5", scope_from="5.5.5 in sdkconfig")
    assert from_project.series == "v5.5" and "sdkconfig" in from_project.envelope["how"]
    nearest = choose(index, None, chip="esp32c3", scope_series="v5.4", scope_from="sdkconfig")
    assert nearest.series == "v5.5" and "nearest release it holds" in nearest.envelope["how"]
    assert nearest.envelope["how"].endswith("add it with: just add-release v5.4.4 --chips esp32c3")
    unpinned = choose(index, None, chip="esp32", scope_series="v5.0", scope_from="sdkconfig")
    assert "no v5.0 release is pinned: pin its latest patch in sources.yaml" in unpinned.envelope["how"]
    assert unpinned.envelope["how"].endswith("then: just add-release <tag> --chips esp32")
    assert choose(index, "5.5", chip="esp32", scope_series="v6.1-dev").series == "v5.5", "the caller wins"
    with pytest.raises(
        ReleaseError, match=re.escape("covers esp32, esp32c3, not esp32s3; esp32s3 is held in: v6.1-dev")
    ):
        choose(index, "v5.5", chip="esp32s3")
    assert choose(index, None, chip=None).envelope["held"] == ["v6.1-dev", "v5.5"]


def _row(doc_type: str, releases: list[str], chips: tuple[str, ...] = ("esp32",)) -> dict[str, Any]:
    sources = [f"{r}.0@{'0' * 40}" for r in releases]
    return {
        "doc_type": doc_type,
        "chips": list(chips),
        "releases": releases,
        "release_sources": sources,
        "release_chips": [release_chip(r, c) for r in releases for c in chips],
    }


def test_a_release_counts_only_the_chips_its_builds_made_a_row_for() -> None:
    """A row folded from master's esp32 and esp32s3 builds and v6.0's esp32 build lists both chips and
    both releases; v6.0 must not count esp32s3, nor a v6.0 filter for esp32s3 return the row."""
    row = _row("idf", ["v6.1-dev", "v6.0"], ("esp32", "esp32s3"))
    row["release_chips"] = ["v6.1-dev:esp32", "v6.1-dev:esp32s3", "v6.0:esp32"]
    index = ReleaseIndex()
    index.add_row(row)
    assert sorted(index.held["v6.1-dev"].chips) == ["esp32", "esp32s3"]
    assert sorted(index.held["v6.0"].chips) == ["esp32"]
    assert holds(row, "v6.0", "esp32") and holds(row, "v6.1-dev", "esp32s3")
    assert not holds(row, "v6.0", "esp32s3"), "v6.0's esp32s3 build never made this row"
    assert holds(row, "v6.0", None) and holds(row, None, "esp32s3") and not holds(row, None, "esp32c3")
    assert chips_in(row, "v6.0") == ["esp32"] and chips_in(row, None) == ["esp32", "esp32s3"]
    assert releases_of(row, "esp32s3") == ["v6.1-dev"] and releases_of(row, None) == ["v6.1-dev", "v6.0"]
    manual = _row("trm", [], ("esp32s3",))
    assert holds(manual, "v6.0", "esp32s3") and chips_in(manual, "v6.0") == ["esp32s3"]
    with pytest.raises(ReleaseError, match="covers esp32, not esp32s3"):
        choose(index, "v6.0", chip="esp32s3")
    assert choose(index, "v6.0", chip="esp32").where("esp32") == "(array_has(release_chips, 'v6.0:esp32'))"
    assert "notes" not in choose(index, "v6.0", chip="esp32").envelope
    index.add_row(manual)
    assert choose(index, "v6.1-dev", chip="esp32s3").where("esp32s3") == (
        "((doc_type IN ('trm') AND array_has(chips, 'esp32s3')) OR "
        "array_has(release_chips, 'v6.1-dev:esp32s3'))"
    )


def test_a_release_holding_only_a_chips_headers_says_where_its_guide_is() -> None:
    """A release's headers cover every chip folder in its tree, its guide only the chips built: an
    answer for a chip without the guide says so, where the guide is, and the command that adds it."""
    index = ReleaseIndex()
    index.add_row(_row("idf", ["v6.1-dev", "v6.0"], ("esp32",)))
    index.add_row(_row("idf", ["v6.1-dev"], ("esp32s3",)))
    index.add_row(_row("src", ["v6.1-dev", "v6.0"], ("esp32", "esp32s3")))
    assert index.held["v6.0"].as_dict()["chips"] == ["esp32", "esp32s3"]
    assert index.held["v6.0"].as_dict()["docs_chips"] == ["esp32"]
    (note,) = choose(index, "v6.0", chip="esp32s3").envelope["notes"]
    assert "v6.0 in this store holds esp32s3's SoC headers but not its programming guide" in note
    assert "esp32s3's guide is held for: v6.1-dev" in note
    assert "just add-release v6.0.2 --chips esp32s3" in note  # v6.0 is pinned in sources.yaml
    assert "notes" not in choose(index, "v6.1-dev", chip="esp32s3").envelope
    headers_only = ReleaseIndex()
    headers_only.add_row(_row("src", ["v6.0"], ("esp32s3",)))
    assert "notes" not in choose(headers_only, "v6.0", chip="esp32s3").envelope, "no guide anywhere"


def test_the_release_filter_names_the_doc_types_that_hold_for_every_release() -> None:
    """The manuals list no release; when exactly their rows do, the filter says so by doc_type (which
    LanceDB answers from its indexes), else it tests each row's release list."""
    clean = ReleaseIndex()
    for row in (_row("trm", []), _row("idf", ["v6.1-dev"]), _row("src", ["v6.1-dev", "v5.5"])):
        clean.add_row(row)
    assert clean.releaseless_doc_types == ("trm",)
    fast = choose(clean, "5.5", chip=None)
    assert fast.where() == "(doc_type IN ('trm') OR array_has(releases, 'v5.5'))"

    mixed = ReleaseIndex()
    for row in (_row("trm", []), _row("idf", ["v6.1-dev"]), _row("idf", [])):
        mixed.add_row(row)
    assert mixed.releaseless_doc_types is None
    assert choose(mixed, None, chip=None).where() == (
        "(cardinality(releases) = 0 OR array_has(releases, 'v6.1-dev'))"
    )
    unknown = ReleaseIndex()
    unknown.add_row({k: v for k, v in _row("idf", ["v6.1-dev"]).items() if k != "doc_type"})
    assert unknown.releaseless_doc_types is None, "rows read without their doc_type prove nothing"
    assert choose(ReleaseIndex(), None, chip=None).where() is None, "no release held: no filter"


def test_lancedb_answers_the_release_and_chip_filter_with_the_builds_a_row_came_from(
    tmp_path: Path,
) -> None:
    """The filter a search sends, run by LanceDB on rows of every shape: a manual, rows of one build,
    and a row folded from three builds whose releases and chips alone would claim a fourth."""
    folded = _row("idf", ["v6.1-dev", "v6.0"], ("esp32", "esp32s3"))
    folded["release_chips"] = ["v6.1-dev:esp32", "v6.1-dev:esp32s3", "v6.0:esp32"]
    rows = {
        "manual": _row("trm", [], ("esp32", "esp32s3")),
        "folded": folded,
        "s3 in v6.0": _row("idf", ["v6.0"], ("esp32s3",)),
        "c3 in v6.0": _row("src", ["v6.0"], ("esp32c3",)),
    }
    table = lancedb.connect(tmp_path / "db").create_table(
        "t", [{"name": name, **row} for name, row in rows.items()]
    )
    index = ReleaseIndex()
    for row in rows.values():
        index.add_row(row)

    def found(series: str, chip: str | None) -> set[str]:
        where = Filters(chip=chip, release=choose(index, series, chip=chip)).where()
        return {hit["name"] for hit in table.search().where(where).select(["name"]).to_list()}

    for series, chip in [("v6.0", "esp32s3"), ("v6.0", "esp32"), ("v6.0", None), ("v6.1-dev", "esp32s3")]:
        expected = {name for name, row in rows.items() if holds(row, series, chip)}
        assert found(series, chip) == expected, (series, chip)
    assert found("v6.0", "esp32s3") == {"manual", "s3 in v6.0"}, "v6.0's esp32s3 build never made 'folded'"


# -- the engine on a two-release store --------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> SearchEngine:
    return open_engine(str(build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")))


def files(answer: dict[str, Any]) -> list[str]:
    return [r["file_path"] for r in answer["results"]]


def test_search_answers_from_one_release_and_says_which(engine: SearchEngine) -> None:
    default = engine.search("read a raw ADC1 channel value", chip="esp32c3", doc_type="idf", k=10)
    assert default["release"]["answered_from"]["idf_version"] == "v6.1-dev"
    assert C3_ONLY_V55 not in files(default), "a v5.5-only page never answers for v6.1-dev"
    assert {"v6.1-dev", "v5.5"} == set(default["release"]["held"])

    old = engine.search("read a raw ADC1 channel value", chip="esp32c3", doc_type="idf", idf_version="5.5")
    assert old["release"]["answered_from"]["exact_version"] == "v5.5.5"
    # the v5.5-only legacy page answers beside the shared new-driver page; which of the two leads is
    # the learned ranking's call
    assert C3_ONLY_V55 in files(old)[:2] and "migration-guides" not in " ".join(files(old))
    shared = next(r for r in old["results"] if r["file_path"].endswith("adc_oneshot"))
    assert shared["releases"] == ["v6.1-dev", "v5.5"]
    # a passage both releases share cites the source of the release asked for, not its first one
    assert shared["source_version"] == "v5.5.5" and "release_sources" not in shared
    every = engine.search("read a raw ADC1 channel value", chip="esp32c3", doc_type="idf", idf_version="all")
    both = next(r for r in every["results"] if r["file_path"].endswith("adc_oneshot"))
    assert len(both["release_sources"]) == 2, "answered for every release, it lists each one's source"

    everything = engine.search("adc1_get_raw", chip="esp32c3", doc_type="idf", idf_version="all", k=10)
    assert {C3_ONLY_V55, "migration-guides/release-6.x/6.0/peripherals"} <= set(files(everything))
    trm = engine.search("UART registers", chip="esp32c3", doc_type="trm", idf_version="5.5")
    assert trm["results"] and all(not r.get("releases") for r in trm["results"]), "manuals hold for all"


def test_the_engines_release_filter_selects_what_the_row_by_row_test_selects(engine: SearchEngine) -> None:
    assert engine.index.releases.releaseless_doc_types == ("trm",)
    table = engine.retrievers.table
    for series in ("v6.1-dev", "v5.5"):
        fast = choose(engine.index.releases, series, chip=None).where()
        slow = f"(cardinality(releases) = 0 OR array_has(releases, '{series}'))"
        assert fast != slow
        selected = [
            set(
                table.search()
                .where(w)
                .select(["file_path"])
                .limit(10_000)
                .to_arrow()["file_path"]
                .to_pylist()
            )
            for w in (fast, slow)
        ]
        assert selected[0] == selected[1] and selected[0]


def test_find_symbol_reports_each_release_and_the_migration_note(engine: SearchEngine) -> None:
    gone = engine.find_symbol("adc1_get_raw", chip="esp32c3")
    assert gone["by_release"] == {"v6.1-dev": 0, "v5.5": 1}, "a migration guide naming it is no definition"
    assert gone["results"][0]["file_path"].startswith("migration-guides/"), "but it is what v6.1 says of it"
    legacy = engine.find_symbol("adc1_config_width", chip="esp32c3")
    assert legacy["by_release"] == {"v6.1-dev": 0, "v5.5": 1} and legacy["returned"] == 0
    assert legacy["release_note"] == "adc1_config_width is named in v5.5 but not in v6.1-dev"
    in_old = engine.find_symbol("adc1_config_width", chip="esp32c3", idf_version="v5.5")
    assert [r["file_path"] for r in in_old["results"]] == [C3_ONLY_V55]
    guide = engine.find_symbol("adc1_get_raw", chip="esp32c3", idf_version="v5.5")
    assert [g["file_path"] for g in guide["migration_guides"]] == [
        "migration-guides/release-6.x/6.0/peripherals"
    ]


def test_read_follows_a_hit_into_its_release_and_bad_releases_are_refused(engine: SearchEngine) -> None:
    page = engine.read(C3_ONLY_V55, 0, chip="esp32c3")
    assert page["release"]["answered_from"]["idf_version"] == "v5.5", "read where the hit lives"
    assert "own release" in page["release"]["how"]
    with pytest.raises(
        SearchInputError, match=re.escape("has no chunk 0 for chip esp32c3 and idf_version v6.1-dev")
    ):
        engine.read(C3_ONLY_V55, 0, chip="esp32c3", idf_version="master")
    with pytest.raises(SearchInputError, match=re.escape("store holds no ESP-IDF v4.4")):
        engine.search("ADC", idf_version="4.4")
    with pytest.raises(
        SearchInputError, match=re.escape("covers esp32c3, not esp32; esp32 is held in: v6.1-dev")
    ):
        engine.find_symbol("adc1_get_raw", chip="esp32", idf_version="5.5")
    listing = engine.list_chips()
    assert [r["idf_version"] for r in listing["idf_releases"]] == ["v6.1-dev", "v5.5"]
    c3 = next(c for c in listing["chips"] if c["chip"] == "esp32c3")
    assert c3["idf_releases_in_store"] == ["v6.1-dev", "v5.5"]
    assert c3["idf_docs_releases"] == ["v6.1-dev", "v5.5"]
    esp32 = next(c for c in listing["chips"] if c["chip"] == "esp32")
    assert esp32["idf_docs_releases"] == ["v6.1-dev"]
