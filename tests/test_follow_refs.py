"""Follow-up references: what a result shows, and every one of them followed through the real server."""

from __future__ import annotations

from typing import Any

import pytest
from test_mcp_server import Call, call, error_text, server_session  # noqa: F401 (fixtures)
from test_search import engine, store_path  # noqa: F401 (fixtures)

from follow_refs import DOC_REFS_SHOWN, FILE_REFS_SHOWN, doc_ref, follow_up, section_rows
from search import SearchEngine, SearchInputError

COMMIT = "102122904ade11fd1ae373848f34ffd7dfb18aeb"
UART_TRM = "ESP32-C3/10-UART__EN"


def test_results_show_refs_as_tool_arguments_capped_with_a_count() -> None:
    row = {
        "doc_refs": [f"register:R{i}_REG" for i in range(DOC_REFS_SHOWN)] + ["page/a#Top > Part"],
        "file_refs": ["components/x/include/x.h", "examples/y", "components/z"],
        "source_commit": COMMIT,
    }
    shown = follow_up(row)
    assert shown["doc_refs"][0] == {"register": "R0_REG"} and len(shown["doc_refs"]) == DOC_REFS_SHOWN
    assert shown["refs_cut"] == {"doc_refs": 1, "file_refs": 3 - FILE_REFS_SHOWN}
    assert shown["file_refs"][0] == {
        "path": "components/x/include/x.h",
        "url": f"https://github.com/espressif/esp-idf/blob/{COMMIT}/components/x/include/x.h",
    }
    assert shown["file_refs"][1]["url"].endswith(f"/tree/{COMMIT}/examples/y")  # a folder
    assert doc_ref("page/a#Top > Part") == {"file_path": "page/a", "section_path": "Top > Part"}
    # a link into another page goes before the links within the row's own page
    own = {"file_path": "p", "doc_refs": ["p#A", "q#B"], "file_refs": [], "source_commit": COMMIT}
    assert [r["file_path"] for r in follow_up(own)["doc_refs"]] == ["q", "p"]
    # empty lists are left out, and nothing links to a commit that is not pinned
    assert follow_up({"doc_refs": [], "file_refs": [], "source_commit": COMMIT}) == {}
    assert follow_up({"doc_refs": [], "file_refs": ["a/b.h"], "source_commit": "unknown"}) == {
        "file_refs": [{"path": "a/b.h"}]
    }


def test_a_section_merged_into_its_parent_chunk_is_found_under_its_heading() -> None:
    rows = [
        {"section_path": "Top", "text": "Top\n\nintro\n\n# Small part\n\nbody", "chunk_index": 0},
        {"section_path": "Top > Big part", "text": "Top > Big part\n\n...", "chunk_index": 1},
    ]
    assert section_rows(rows, "Top > Big part") == ([rows[1]], "Top > Big part")
    assert section_rows(rows, "Top") == (rows, "Top")
    assert section_rows(rows, "Top > Small part") == ([rows[0]], "Top")
    assert section_rows(rows, "Top > Empty > Deeper") == (rows, "Top")  # the enclosing section
    assert section_rows(rows, "Elsewhere > Part") == ([], "Elsewhere > Part")


def test_read_opens_a_section_and_says_when_it_cannot(engine: SearchEngine) -> None:  # noqa: F811
    read = engine.read(UART_TRM, section_path="ESP32-C3 > UART Controller (UART) > Registers")
    assert [c["chunk_index"] for c in read["chunks"]] == [4, 5]
    assert read["url"].endswith(f"/{UART_TRM}.tex")
    enclosing = engine.read(UART_TRM, section_path="ESP32-C3 > UART Controller (UART) > Registers > Gone")
    assert [c["chunk_index"] for c in enclosing["chunks"]] == [4, 5]
    assert "has no section" in enclosing["note"] and "encloses it" in enclosing["note"]
    with pytest.raises(SearchInputError, match="has no section 'Nowhere > At all'; its sections include"):
        engine.read(UART_TRM, section_path="Nowhere > At all")
    with pytest.raises(SearchInputError, match="not both"):
        engine.read(UART_TRM, 0, section_path="ESP32-C3 > UART Controller (UART) > Registers")
    with pytest.raises(SearchInputError, match="chunk_index is required"):
        engine.read(UART_TRM)
    with pytest.raises(SearchInputError, match="the store holds no 'examples/peripherals/uart/uart_echo'"):
        engine.read("examples/peripherals/uart/uart_echo", 0)


def _references(
    results: list[dict[str, Any]], chip_id: str
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(tool, arguments, the result it came from) for every reference the results show, followed
    for the chip the search was for."""
    calls = []
    chip = {"chip": chip_id}
    for result in results:
        for ref in result.get("doc_refs", []):
            if "register" in ref:
                calls.append(("esp32_docs_register", {"name": ref["register"], **chip}, result))
            else:
                calls.append(("esp32_docs_read", {**ref, **chip}, result))
        for ref in result.get("file_refs", []):
            calls.append(("esp32_docs_read", {"file_path": ref["path"], "chunk_index": 0, **chip}, result))
    return calls


def test_every_reference_in_results_is_followed_through_mcp(call: Call) -> None:  # noqa: F811
    results = []
    for query in ("UART baud rate", "UART register summary", "UART driver install", "ADC legacy driver"):
        answer = call("esp32_docs_search", {"query": query, "chip": "esp32c3", "k": 10})
        results.extend(answer.structured_content["results"])
    references = _references(results, "esp32c3")
    assert {tool for tool, _, _ in references} == {"esp32_docs_read", "esp32_docs_register"}
    followed = {"content": 0, "not held": 0}
    for tool, arguments, source in references:
        reply = call(tool, arguments)
        if reply.is_error:
            # only what the store does not hold may fail, and the message says so
            message = error_text(reply)
            assert "holds no" in message or "has no section" in message, (arguments, message)
            followed["not held"] += 1
            continue
        payload = reply.structured_content
        if tool == "esp32_docs_read":
            assert payload["chunks"] and all(c["text"].strip() for c in payload["chunks"]), arguments
        else:
            assert payload["name"] == arguments["name"], arguments
        followed["content"] += 1
        assert source["url"], source["file_path"]
    assert followed["content"] >= 6 and followed["not held"] >= 2
