"""The real server over stdio, driven by the mcp client: what an agent actually receives."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import httpx2 as httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from test_search import build_fixture_store

REPO = Path(__file__).resolve().parent.parent
TOOL_SCHEMAS = Path(__file__).with_name("fixtures") / "tool_schemas.json"
TOOLS = {
    "esp32_docs_search",
    "esp32_docs_find_symbol",
    "esp32_docs_register",
    "esp32_docs_list_chips",
    "esp32_docs_read",
    "esp32_docs_scope",
}
Call = Callable[[str, dict[str, Any]], CallToolResult]


@asynccontextmanager
async def connected(
    args: list[str], env: dict[str, str] | None = None, errlog: TextIO = sys.stderr
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["mcp_server.py", *args], cwd=REPO, env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def server_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClientSession, BlockingPortal]]:
    """One server for the module, driven from sync tests through a blocking portal."""
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(store)])) as session,
    ):
        yield session, portal


@pytest.fixture
def call(server_session: tuple[ClientSession, BlockingPortal]) -> Call:
    session, portal = server_session
    return lambda name, arguments: portal.call(session.call_tool, name, arguments)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, f"expected an error, got {result.structured_content}"
    return result.content[0].text


def test_tools_are_listed_read_only_with_output_schemas(
    server_session: tuple[ClientSession, BlockingPortal],
) -> None:
    session, portal = server_session
    listed = portal.call(session.list_tools).tools
    assert {tool.name for tool in listed} == TOOLS
    for tool in listed:
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert tool.output_schema is not None and tool.description
    search = next(t for t in listed if t.name == "esp32_docs_search")
    assert search.input_schema["properties"]["k"]["maximum"] == 20
    register = next(t for t in listed if t.name == "esp32_docs_register")
    assert "required" not in register.input_schema  # chip defaults to the project scope's
    assert all(word in register.description for word in ("address", "reset", "fields", "ESP32-P4 revisions"))


def test_tool_list_and_schemas_match_the_pinned_listing(
    server_session: tuple[ClientSession, BlockingPortal],
) -> None:
    """Every tool's name, description, input and output schema and annotations, as a client lists
    them, byte for byte: agents are prompted with this listing, so a change to it is deliberate.
    After a deliberate change, rewrite the pin with UPDATE_TOOL_SCHEMAS=1 and review its diff."""
    session, portal = server_session
    listed = portal.call(session.list_tools).tools
    listing = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed]
    text = json.dumps(listing, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_TOOL_SCHEMAS") == "1":
        TOOL_SCHEMAS.write_text(text, encoding="utf-8")
    assert text == TOOL_SCHEMAS.read_text(encoding="utf-8")


def test_search_returns_structured_results(call: Call) -> None:
    result = call(
        "esp32_docs_search", {"query": "UART_CLKDIV_REG", "chip": "ESP32-C3", "doc_type": "trm", "k": 2}
    )
    assert not result.is_error
    payload = result.structured_content
    assert payload["filters"] == {"chip": "esp32c3", "doc_type": "trm"}
    assert payload["returned"] == 2 and "Register UART_CLKDIV_REG" in payload["results"][0]["text"]
    assert "symbol" in payload["results"][0]["matched_by"]
    assert "corpus_note" not in payload


def test_answers_are_sized_for_an_agent(call: Call) -> None:
    """Compact JSON text, the scope once without its empty fields, no empty result fields, and a
    smaller excerpt on request."""
    arguments = {"query": "UART baud rate", "chip": "esp32c3", "doc_type": "trm", "k": 3}
    full = call("esp32_docs_search", arguments)
    payload = full.structured_content
    assert full.content[0].text == json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    scope = payload["scope"]
    assert scope["applied"] == {"chip": "esp32c3", "revision": None}  # which filters applied: always there
    assert all(value not in (None, [], {}) for key, value in scope.items() if key != "applied")
    assert all("scope" not in result for result in payload["results"])
    for result in payload["results"]:
        assert result["url"].endswith(".tex") and "release_sources" not in result  # TRM: its chapter upstream
        assert {"revision_scope", "revisions", "source_commit"} <= set(result)  # clients read these
    small = call("esp32_docs_search", {**arguments, "excerpt_chars": 200}).structured_content
    large = call("esp32_docs_search", {**arguments, "excerpt_chars": 4000}).structured_content
    assert [r["file_path"] for r in small["results"]] == [r["file_path"] for r in large["results"]]
    assert sum(len(r["text"]) for r in small["results"]) < sum(len(r["text"]) for r in large["results"])
    assert any(r.get("text_truncated") for r in small["results"])
    assert "excerpt_chars must be an integer from 200 to 4000 (or left out), got 100" in error_text(
        call("esp32_docs_search", {**arguments, "excerpt_chars": 100})
    )


def test_find_symbol_read_and_list_chips_over_mcp(call: Call) -> None:
    found = call("esp32_docs_find_symbol", {"symbol": "aes_key_3_reg", "chip": "esp32c3"}).structured_content
    assert found["totals_by_doc_type"] == {"idf": 0, "trm": 1, "src": 1}
    hit = next(r for r in found["results"] if r["doc_type"] == "trm")
    page = call("esp32_docs_read", {"file_path": hit["file_path"], "chunk_index": hit["chunk_index"]})
    assert [c["chunk_index"] for c in page.structured_content["chunks"]] == [0, 1]
    listing = call("esp32_docs_list_chips", {}).structured_content
    assert listing["total_rows"] == 36 and len(listing["chips"]) == 13


def test_find_symbol_exact_and_case_insensitive_with_per_corpus_totals(call: Call) -> None:
    for spelling in ("UART_CLKDIV_REG", "uart_clkdiv_reg"):
        found = call("esp32_docs_find_symbol", {"symbol": spelling}).structured_content
        assert found["totals_by_doc_type"] == {"idf": 0, "trm": 3, "src": 1}, spelling
        assert found["results"][0]["text"].count("Register UART_CLKDIV_REG\nAddress: 0x0014") == 1
        assert found["results"][1]["file_path"] == "components/soc/esp32c3/register/soc/uart_reg.h"


def test_find_symbol_wildcard_and_parameterised_names(call: Call) -> None:
    wildcard = call("esp32_docs_find_symbol", {"symbol": "LEDC_CH*_CONF0_REG"}).structured_content
    assert wildcard["totals_by_doc_type"] == {"idf": 0, "trm": 1, "src": 1}
    assert {s for r in wildcard["results"] for s in r["matched_symbols"]} == {
        "LEDC_CHn_CONF0_REG",
        "LEDC_CH0_CONF0_REG",
        "LEDC_CH1_CONF0_REG",
    }
    parameterised = call("esp32_docs_find_symbol", {"symbol": "AES_KEY_3_REG"}).structured_content
    assert parameterised["totals_by_doc_type"] == {"idf": 0, "trm": 1, "src": 1}
    trm = next(r for r in parameterised["results"] if r["doc_type"] == "trm")
    assert trm["matched_symbols"] == ["AES_KEY_n_REG"] and "Register AES_KEY_n_REG (n: 0-7)" in trm["text"]


def register(call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call("esp32_docs_register", arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_register_by_name_joins_manual_and_headers(call: Call) -> None:
    answer = register(call, {"chip": "ESP32-C3", "name": "uart_clkdiv_reg"})
    assert (answer["chip"], answer["name"], answer["address"]) == ("esp32c3", "UART_CLKDIV_REG", "0x0014")
    assert answer["reset"] == "0x000002B6" and answer["chapter"] == "UART Controller (UART)"
    assert [(f["name"], f["bits"], f["access"]) for f in answer["fields"]] == [
        ("UART_CLKDIV", "11:0", "R/W"),
        ("UART_CLKDIV_FRAG", "23:20", "R/W"),
        ("(reserved)", "31:24", None),
    ]
    # soc.h's REG_UART_BASE(i) over reg_base.h's DR_REG_UART_BASE gives the absolute address
    assert answer["address_absolute"] == "0x60000014"
    assert "REG_UART_BASE(i) = (DR_REG_UART_BASE + (i) * 0x10000) (soc.h)" in answer["absolute_from"]
    assert [d["name"] for d in answer["header_defines"]] == ["UART_CLKDIV_REG(i)"]


def test_register_parameterised_name_resolves_its_instance(call: Call) -> None:
    answer = register(call, {"chip": "esp32c3", "name": "AES_KEY_3_REG"})
    assert answer["documented_as"] == "AES_KEY_n_REG (n: 0-7)" and answer["instance"] == {"n": "3"}
    assert answer["address"] == "0x000C" and answer["address_as_documented"] == "0x0000+4*n"
    assert answer["address_absolute"] == "0x6003A00C"
    assert answer["header_defines"][0]["expression"] == "DR_REG_AES_BASE + 0xc"


def test_register_by_address_finds_the_instance_at_it(call: Call) -> None:
    uart1 = register(call, {"chip": "esp32c3", "address": "0x6001_0014"})
    assert (uart1["name"], uart1["queried_instance"]) == ("UART_CLKDIV_REG", 1)
    assert uart1["address_absolute"] == "0x60010014" and uart1["reset"] == "0x000002B6"
    aes = register(call, {"chip": "esp32c3", "address": 0x6003A00C})
    assert aes["name"] == "AES_KEY_3_REG" and aes["documented_as"] == "AES_KEY_n_REG (n: 0-7)"
    offset = register(call, {"chip": "esp32c3", "address": "0x14", "peripheral": "UART"})
    assert offset["name"] == "UART_CLKDIV_REG" and offset["queried_address"] == "0x14 in UART"


def test_register_compares_esp32p4_revisions(call: Call) -> None:
    answer = register(
        call, {"chip": "esp32p4", "name": "ECDSA_INT_ENA_REG", "revision": "v1.3", "compare_with": "mainline"}
    )
    assert answer["revision"] == "v1.3" and answer["revision_scope"].startswith("ONLY revision v1.3")
    assert [f["name"] for f in answer["fields"]][1:] == [
        "ECDSA_SHA_RELEASE_INT_ENA",
        "ECDSA_CALC_DONE_INT_ENA",
    ]
    assert answer["compare"] == {
        "with": "esp32p4 mainline",
        "present": True,
        "chapter": "ECDSA Digital Signature Peripheral (ECDSA_DS)",
        "added": ["ECDSA_POST_DONE_INT_ENA", "ECDSA_PREP_DONE_INT_ENA", "ECDSA_PROC_DONE_INT_ENA"],
        "removed": ["ECDSA_CALC_DONE_INT_ENA"],
        "changed": [{"name": "ECDSA_SHA_RELEASE_INT_ENA", "bits": {"from": "1", "to": "3"}}],
    }
    default = register(call, {"chip": "esp32p4", "name": "ECDSA_INT_ENA_REG"})
    assert default["revision"] == "mainline" and len(default["fields"]) == 5


def test_register_header_only_answers_with_a_composed_reset(call: Call) -> None:
    answer = register(call, {"chip": "esp32c3", "name": "UART_DATE_REG"})
    assert (
        answer["reset"] == "0x02008270"
        and answer["reset_from"] == "composed from the header's field defaults"
    )
    assert answer["fields"] == [
        {
            "name": "UART_DATE",
            "bits": "31:0",
            "access": "R/W",
            "reset": "0x2008270",
            "description": "Version control register.",
            "sources": ["headers"],
        }
    ]
    assert answer["sources"]["manual"] is None and answer["address_absolute"] == "0x6000007C"


def test_register_reports_where_manual_and_headers_disagree(call: Call) -> None:
    answer = register(call, {"chip": "esp32c3", "address": "0x60000020"})
    assert answer["name"] == "UART_CONF0_REG" and answer["reset"] == "0x1000001C"
    assert answer["reset_by_source"] == {"manual": "0x1000001C", "headers": "0x0000003C"}
    assert [(d["kind"], d.get("field")) for d in answer["disagreements"]] == [
        ("reset differs", None),
        ("default differs", "UART_STOP_BIT_NUM"),
    ]


def test_register_base_plus_zero_answers(call: Call) -> None:
    answer = register(call, {"chip": "esp32c3", "address": "0x6003A000"})
    assert answer["name"] == "AES_KEY_0_REG" and answer["address_absolute"] == "0x6003A000"


def test_register_unknown_name_offers_the_closest_names(call: Call) -> None:
    text = error_text(call("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_RG"}))
    assert "no register 'UART_CLKDIV_RG' on esp32c3; closest names: UART_CLKDIV_REG" in text


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("esp32_docs_search", {"query": "x", "chip": "esp99"}, "valid chips: esp32, esp32s2"),
        ("esp32_docs_search", {"query": "x", "chip": "esp32'; DROP TABLE chunks; --"}, "valid chips:"),
        ("esp32_docs_search", {"query": "x", "doc_type": "manual"}, "valid doc_types: idf, trm, src"),
        ("esp32_docs_search", {"query": "x", "revision": "v2.0"}, "valid revisions: mainline, v1.3"),
        (
            "esp32_docs_search",
            {"query": "x", "chip": "esp32c3", "revision": "v1.3"},
            "valid revisions: mainline",
        ),
        ("esp32_docs_search", {"query": "x", "k": 0}, "k must be an integer from 1 to 20, got 0"),
        ("esp32_docs_search", {"query": "x", "k": 21}, "k must be an integer from 1 to 20, got 21"),
        ("esp32_docs_search", {"query": ""}, "query is empty"),
        ("esp32_docs_search", {"query": "a" * 100_000}, "the limit is 2000"),
        ("esp32_docs_search", {"query": "x", "doc_type": "trm' OR '1'='1"}, "valid doc_types"),
        ("esp32_docs_find_symbol", {"symbol": "UART' OR 1=1 --"}, "is not an identifier"),
        ("esp32_docs_find_symbol", {"symbol": "UART_CLKDIV_REG", "doc_type": "pdf"}, "valid doc_types"),
        ("esp32_docs_read", {"file_path": "x' OR '1'='1", "chunk_index": 0}, "not a document path"),
        ("esp32_docs_read", {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 99}, "from 0 to 5"),
        ("esp32_docs_register", {"chip": "esp99", "name": "UART_CLKDIV_REG"}, "valid chips: esp32, esp32s2"),
        (
            "esp32_docs_register",
            {"chip": "esp32c3", "name": "UART_CLKDIV_REG", "revision": "v1.3"},
            "valid revisions: mainline",
        ),
        (
            "esp32_docs_register",
            {"chip": "esp32p4", "name": "ECDSA_INT_ENA_REG", "revision": "v2"},
            "valid revisions: mainline, v1.3",
        ),
        (
            "esp32_docs_register",
            {"chip": "esp32c3", "name": "UART_CLKDIV_REG", "compare_with": "esp99"},
            "neither a chip (esp32, esp32s2",
        ),
        ("esp32_docs_register", {"chip": "esp32c3"}, "give exactly one of name"),
        ("esp32_docs_register", {"chip": "esp32c3", "name": "UART' OR 1=1"}, "must be a C identifier"),
        ("esp32_docs_register", {"chip": "esp32c3", "address": "0xZZ"}, "address must be a number"),
        ("esp32_docs_register", {"chip": "esp32c3", "address": "0x7000"}, "no register at 0x7000 on esp32c3"),
        ("esp32_docs_register", {"chip": "esp32c3", "address": "0x60000016"}, "not 32-bit aligned"),
        ("esp32_docs_register", {"chip": "esp32c3", "address": -4}, "must lie in 0x0-0xFFFFFFFF"),
        ("esp32_docs_register", {"chip": "esp32c3", "address": "0x100000000"}, "must lie in 0x0-0xFFFFFFFF"),
        (
            "esp32_docs_register",
            {"chip": "esp32c3", "address": "0x60000050"},
            "a reserved gap between UART_CONF0_REG (0x60000020) and UART_DATE_REG (0x6000007C)",
        ),
        ("esp32_docs_register", {"chip": "esp32c3", "name": "ECDSA_INT_ENA_REG"}, "it exists on esp32p4"),
        ("esp32_docs_search", {"query": "x", "idf_version": "4.4"}, "holds no ESP-IDF v4.4 docs or headers"),
        (
            "esp32_docs_search",
            {"query": "x", "idf_version": "5.5' OR '1'='1"},
            "idf_version must be a release",
        ),
        ("esp32_docs_find_symbol", {"symbol": "adc1_get_raw", "idf_version": "main;"}, "must be a release"),
        (
            "esp32_docs_read",
            {"file_path": "api-reference/peripherals/adc", "chunk_index": 0, "idf_version": "master"},
            "has no chunk 0 for idf_version v6.1-dev",
        ),
        (
            "esp32_docs_search",
            {"query": "x", "chip": "esp32", "idf_version": "v5.5.5"},
            "covers esp32c3, not esp32; esp32 is held in: v6.1-dev",
        ),
    ],
)
def test_bad_input_reaches_the_client_naming_valid_values(
    call: Call, tool: str, arguments: dict[str, Any], message: str
) -> None:
    assert message in error_text(call(tool, arguments))


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("esp32_docs_search", {"query": "x", "k": "lots"}, "k must be an integer from 1 to 20, got 'lots'"),
        ("esp32_docs_find_symbol", {"symbol": "X_REG", "k": 0}, "k must be an integer from 1 to 20, got 0"),
        ("esp32_docs_search", {"k": 3}, "query is required: a question or an identifier"),
        ("esp32_docs_search", {"query": 5}, "query must be a string, got 5"),
        (
            "esp32_docs_register",
            {"chip": "esp32c3", "address": [4]},
            "address must be an integer or a string",
        ),
        (
            "esp32_docs_read",
            {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": -1, "whole_section": "maybe"},
            "chunk_index must be an integer of at least 0 (or left out), got -1; "
            "whole_section must be true or false",
        ),
        (
            "esp32_docs_read",
            {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 0, "max_chars": 10},
            "max_chars must be an integer from 500 to 50000, got 10",
        ),
    ],
)
def test_arguments_outside_the_schema_are_refused_like_any_other_bad_input(
    call: Call, tool: str, arguments: dict[str, Any], message: str
) -> None:
    """What is wrong and what is valid, without the validation library's dump and its link."""
    text = error_text(call(tool, arguments))
    assert message in text
    assert not any(raw in text for raw in ("validation error", "pydantic", "type=", "Input should"))


def test_idf_version_picks_the_release_over_mcp(call: Call) -> None:
    old = call(
        "esp32_docs_search",
        {"query": "read ADC1 raw", "chip": "esp32c3", "doc_type": "idf", "idf_version": "5.5"},
    ).structured_content
    assert old["release"]["answered_from"]["exact_version"] == "v5.5.5"
    assert old["results"][0]["file_path"] == "api-reference/peripherals/adc"
    found = call("esp32_docs_find_symbol", {"symbol": "adc1_get_raw", "chip": "esp32c3"}).structured_content
    assert found["by_release"] == {"v6.1-dev": 0, "v5.5": 1} and found["migration_guides"]
    listing = call("esp32_docs_list_chips", {}).structured_content
    assert [r["idf_version"] for r in listing["idf_releases"]] == ["v6.1-dev", "v5.5"]
    # the register tool reads one release's headers: the fixture's headers are v6.1-dev only
    card = call("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG"}).structured_content
    assert card["release"]["answered_from"]["idf_version"] == "v6.1-dev" and card["header_defines"]
    old = call(
        "esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG", "idf_version": "5.5"}
    ).structured_content
    assert old["release"]["answered_from"]["idf_version"] == "v5.5" and not old["header_defines"]
    bad = call("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG", "idf_version": "x;"})
    assert "idf_version must be a release like 5.5" in error_text(bad)


def test_register_compare_release_over_mcp(call: Call) -> None:
    """The fixture store's v5.5 holds esp32c3 docs but no headers: every refusal names what is held
    (the comparison itself is tested on a two-release header table in test_registers.py)."""
    card = call("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG"}).structured_content
    assert "other_releases" not in card and "compare_release" not in card
    cases = [
        ({"compare_release": "5.5"}, "the store's ESP-IDF v5.5 (v5.5.5) holds no SoC headers for esp32c3"),
        ({"compare_release": "master"}, "is v6.1-dev, the release answering; name another: v5.5"),
        ({"compare_release": "4.4"}, "the store holds no ESP-IDF v4.4 docs or headers; it holds: v6.1-dev"),
        ({"compare_release": "x';--"}, "compare_release must be a release like 5.5"),
        ({"compare_release": "5.5", "idf_version": "all"}, "idf_version='all' names none"),
        (
            {"compare_release": "5.5", "chip": "esp32"},
            "the store's ESP-IDF v5.5 covers esp32c3, not esp32; esp32 is held in: v6.1-dev",
        ),
    ]
    for arguments, message in cases:
        result = call("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CLKDIV_REG", **arguments})
        assert message in error_text(result), arguments


def test_the_project_chips_register_map_is_ready_before_the_first_lookup(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(blink)\n")
    (project / "sdkconfig").write_text('CONFIG_IDF_TARGET="esp32c3"\n')
    log = tmp_path / "server.log"
    with (
        log.open("w") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            connected(["--db", str(store), "--project", str(project)], errlog=errlog)
        ) as session,
    ):
        deadline = time.monotonic() + 60
        while "register map of esp32c3 (project scope) ready" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        result = portal.call(session.call_tool, "esp32_docs_register", {"address": "0x60000014"})
    assert result.structured_content["name"] == "UART_CLKDIV_REG"
    assert result.structured_content["chip"] == "esp32c3"


def test_without_a_store_every_tool_says_how_to_get_one(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.lancedb"
    calls = [
        ("esp32_docs_search", {"query": "uart"}),
        ("esp32_docs_find_symbol", {"symbol": "UART_CONF0_REG"}),
        ("esp32_docs_register", {"chip": "esp32c3", "name": "UART_CONF0_REG"}),
        ("esp32_docs_list_chips", {}),
        ("esp32_docs_read", {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 0}),
    ]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--db", str(missing)])) as s,
    ):
        texts = [error_text(portal.call(s.call_tool, name, arguments)) for name, arguments in calls]
    for text in texts:
        assert str(missing) in text and "embed_and_store.py" in text and "--demo" in text


def test_demo_builds_on_first_use_and_labels_results(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(["--demo"], env)) as s,
    ):
        result = portal.call(s.call_tool, "esp32_docs_search", {"query": "LEDC_CH2_CONF0_REG", "k": 3})
    payload = result.structured_content
    assert payload["corpus_note"].startswith("DEMO SAMPLE")
    assert "Register LEDC_CHn_CONF0_REG" in payload["results"][0]["text"]
    assert payload["results"][0]["source_commit"] == "805f2ea20bbaa7670803b3b512ab611640fdf9a9"
    assert list((tmp_path / "cache" / "esp32-docs-mcp").glob("demo-*.lancedb"))


async def find_symbol_over_http(url: str) -> CallToolResult:
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await session.call_tool("esp32_docs_find_symbol", {"symbol": "uart_driver_install"})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(server: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "HTTP server did not come up"
            time.sleep(0.3)


def test_http_transport_serves_on_localhost(tmp_path_factory: pytest.TempPathFactory) -> None:
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "mcp_server.py", "--db", str(store), "--transport", "http", "--port", str(port)],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(server, port)
        with start_blocking_portal() as portal:
            result = portal.call(find_symbol_over_http, f"http://127.0.0.1:{port}/mcp")
        assert not result.is_error and result.structured_content["totals_by_doc_type"]["idf"] == 2
        # DNS-rebinding protection holds on loopback too: a page at evil.example cannot reach it
        rebound = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Host": "evil.example", "Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert rebound.status_code == 421
    finally:
        server.terminate()
        server.wait(timeout=30)
