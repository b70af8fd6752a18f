"""Property-based fuzzing of every tool's inputs through the real server over stdio.

One server for the module (the fixture store); Hypothesis drives each tool with random unicode, huge
strings, NUL bytes, wrong JSON types, negative and huge numbers, SQL and path syntax, and every
chip x revision x doc_type combination. What must hold for every generated call:

- the client gets a result, never a protocol failure, and no traceback in any text;
- an error is a deliberate one: never the SDK's bare "Error executing tool X" that hides a crash,
  and the server logs no unexpected exception;
- an error caused by a single bad chip, doc_type or revision names the valid values;
- afterwards the server still answers a good query.

Generated cases per run: CASES (FUZZ_EXAMPLES per property) plus the exhaustive combination
sweep; derandomized so CI is reproducible.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from test_search import build_fixture_store

from chip_vocab import all_revisions, chip_ids

REPO = Path(__file__).resolve().parent.parent
FUZZ_EXAMPLES = 100
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CRASH = re.compile(r"^(Error executing tool \S+\s*)+$")
DOC_TYPES = ["idf", "trm", "src"]

HOSTILE = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "' OR '1'='1",
    "'; DROP TABLE chunks; --",
    'x" OR 1=1 --',
    "../../../../etc/passwd",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "%00%2e%2e%2f",
    "*",
    "**/*",
    "\\",
    "\u202e\u200b\ufeff",
    "🦀" * 50,
    "NaN",
    "-1",
    "0x",
    "0xFFFFFFFFFFFFFFFFFFFF",
]
texts = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=80),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 5000),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
wrong_types = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
anything = st.one_of(texts, wrong_types)
chips = st.one_of(st.sampled_from([*chip_ids(), "any", "ESP32-C3", "esp32-p4"]), anything)
revisions = st.one_of(st.sampled_from([*all_revisions(), "any", "mainline", "v1.3"]), anything)
doc_types = st.one_of(st.sampled_from(DOC_TYPES), anything)
small_ints = st.one_of(st.integers(min_value=-5, max_value=60), anything)

TOOL_ARGS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "esp32_docs_search": st.fixed_dictionaries(
        {"query": st.one_of(texts, st.sampled_from(["UART baud rate", "GPIO_PIN_MUX_REG"]), wrong_types)},
        optional={
            "doc_type": doc_types,
            "chip": chips,
            "revision": revisions,
            "k": small_ints,
            "project_dir": anything,
        },
    ),
    "esp32_docs_find_symbol": st.fixed_dictionaries(
        {"symbol": st.one_of(texts, st.sampled_from(["UART_CLKDIV_REG", "LEDC_CH*_CONF0_REG"]), wrong_types)},
        optional={"chip": chips, "doc_type": doc_types, "k": small_ints, "project_dir": anything},
    ),
    "esp32_docs_register": st.fixed_dictionaries(
        {},
        optional={
            "chip": chips,
            "name": st.one_of(st.sampled_from(["UART_CLKDIV_REG", "AES_KEY_3_REG"]), anything),
            "address": st.one_of(st.sampled_from(["0x60000014", "0x14", 0x60000000]), anything),
            "revision": revisions,
            "compare_with": st.one_of(chips, st.sampled_from(["esp32p4:v1.3", "v1.3"])),
            "compare_release": st.one_of(st.sampled_from(["5.5", "v5.5.5", "master", "all"]), anything),
            "peripheral": st.one_of(st.sampled_from(["UART", "LEDC"]), anything),
            "project_dir": anything,
        },
    ),
    "esp32_docs_read": st.fixed_dictionaries(
        {
            "file_path": st.one_of(st.sampled_from(["ESP32-C3/10-UART__EN"]), anything),
            "chunk_index": small_ints,
        },
        optional={
            "before": small_ints,
            "after": small_ints,
            "max_chars": st.one_of(st.integers(min_value=-10, max_value=10**7), anything),
            "whole_section": st.one_of(st.booleans(), anything),
            "section_path": st.one_of(st.sampled_from(["UART Controller (UART) > Overview"]), anything),
            "chip": chips,
            "project_dir": anything,
        },
    ),
    "esp32_docs_list_chips": st.dictionaries(st.text(max_size=10), anything, max_size=3),
    "esp32_docs_scope": st.fixed_dictionaries({}, optional={"project_dir": anything}),
}


@asynccontextmanager
async def connected(store: Path, errlog: Any) -> AsyncIterator[ClientSession]:
    args = ["mcp_server.py", "--db", str(store)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=REPO)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def fuzz_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClientSession, BlockingPortal, Path]]:
    """One server for the whole fuzz run; its stderr is kept to look for logged crashes."""
    store = build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")
    log = tmp_path_factory.mktemp("fuzz") / "server.log"
    with (
        log.open("w") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(store, errlog)) as session,
    ):
        yield session, portal, log


def call(server: tuple[ClientSession, BlockingPortal, Path], tool: str, arguments: Any) -> CallToolResult:
    session, portal, _ = server
    return portal.call(session.call_tool, tool, arguments)


def check_answer(tool: str, result: CallToolResult) -> str:
    """The invariants every answer keeps; returns the error text ('' for a success)."""
    texts = [block.text for block in result.content if getattr(block, "text", None) is not None]
    assert not any("Traceback" in text for text in texts), texts
    if not result.is_error:
        assert result.structured_content is not None
        return ""
    message = texts[0]
    assert not CRASH.match(message), f"{tool} crashed: {message!r}"
    return message


@pytest.mark.parametrize("tool", sorted(TOOL_ARGS))
def test_no_input_crashes_a_tool(fuzz_server: tuple[ClientSession, BlockingPortal, Path], tool: str) -> None:
    @FUZZ
    @given(arguments=TOOL_ARGS[tool])
    def fuzz(arguments: dict[str, Any]) -> None:
        check_answer(tool, call(fuzz_server, tool, arguments))

    fuzz()


BASELINE = {
    "esp32_docs_search": {"query": "uart clock"},
    "esp32_docs_find_symbol": {"symbol": "UART_CLKDIV_REG"},
    "esp32_docs_register": {"chip": "esp32c3", "name": "UART_CLKDIV_REG"},
    "esp32_docs_read": {"file_path": "ESP32-C3/10-UART__EN", "chunk_index": 0},
    "esp32_docs_list_chips": {},
    "esp32_docs_scope": {},
}
FIELDS = {
    "esp32_docs_search": ["query", "doc_type", "chip", "revision", "k", "project_dir"],
    "esp32_docs_find_symbol": ["symbol", "chip", "doc_type", "k", "project_dir"],
    "esp32_docs_register": [
        *("chip", "name", "address", "revision", "compare_with", "compare_release", "peripheral"),
        "project_dir",
    ],
    "esp32_docs_read": [
        *("file_path", "chunk_index", "section_path", "before", "after", "max_chars", "chip"),
        "project_dir",
    ],
    "esp32_docs_list_chips": [],
    "esp32_docs_scope": ["project_dir"],
}
EDGE_VALUES = [*HOSTILE, "x" * 200_000, None, True, -1, 2**63, -(2**63), 1.5, float("inf"), [], {}]


@pytest.mark.parametrize("tool", sorted(FIELDS))
def test_every_hostile_value_in_every_field(
    fuzz_server: tuple[ClientSession, BlockingPortal, Path], tool: str
) -> None:
    """Exhaustive, not sampled: each edge value alone in each field, the rest a good call."""
    for field in FIELDS[tool]:
        for value in EDGE_VALUES:
            check_answer(tool, call(fuzz_server, tool, {**BASELINE[tool], field: value}))


def not_a_doc_type(value: str) -> bool:
    return value.strip().lower() not in DOC_TYPES


ONE_BAD = {
    "chip": ("valid chips:", st.sampled_from(["esp99", "esp32zz", "' OR 1=1", "esp32c99"])),
    "doc_type": ("valid doc_types: idf, trm, src", texts.filter(not_a_doc_type)),
    "revision": ("valid revisions:", st.sampled_from(["v9.9", "rev0", "'; --", "v1.3' OR 1=1"])),
}


# generated cases: each property above and below runs FUZZ_EXAMPLES times
CASES = FUZZ_EXAMPLES * (len(TOOL_ARGS) + len(ONE_BAD)) + len(EDGE_VALUES) * sum(map(len, FIELDS.values()))


@pytest.mark.parametrize("field", sorted(ONE_BAD))
def test_one_bad_value_names_the_valid_values(
    fuzz_server: tuple[ClientSession, BlockingPortal, Path], field: str
) -> None:
    expected, values = ONE_BAD[field]

    @FUZZ
    @given(value=values, chip=st.sampled_from(chip_ids()), doc_type=st.sampled_from(DOC_TYPES))
    def fuzz(value: str, chip: str, doc_type: str) -> None:
        arguments = {"query": "uart clock", "chip": chip, "doc_type": doc_type, field: value}
        message = check_answer("esp32_docs_search", call(fuzz_server, "esp32_docs_search", arguments))
        if field == "doc_type" and not value.strip():
            return  # an empty doc_type means no filter
        assert expected in message, (arguments, message)

    fuzz()


def test_every_chip_revision_doc_type_combination_answers_or_names_valid_values(
    fuzz_server: tuple[ClientSession, BlockingPortal, Path],
) -> None:
    for chip in [*chip_ids(), "any"]:
        for revision in [*all_revisions(), "any", None]:
            for doc_type in [*DOC_TYPES, None]:
                arguments = {"query": "uart", "chip": chip, "revision": revision, "doc_type": doc_type}
                arguments = {key: value for key, value in arguments.items() if value is not None}
                message = check_answer("esp32_docs_search", call(fuzz_server, "esp32_docs_search", arguments))
                assert not message or "valid revisions:" in message, (arguments, message)


def test_the_server_still_answers_and_logged_no_crash(
    fuzz_server: tuple[ClientSession, BlockingPortal, Path],
) -> None:
    """Runs last in the module: a good query after all the fuzzing, and a clean server log."""
    result = call(fuzz_server, "esp32_docs_find_symbol", {"symbol": "uart_driver_install"})
    assert not result.is_error and result.structured_content["totals_by_doc_type"]["idf"] == 2
    log = fuzz_server[2].read_text()
    assert "Traceback" not in log and "unexpected exception" not in log, log[-2000:]
