"""Header includes as repository paths, and upstream links at the line a chunk starts."""

from __future__ import annotations

from pathlib import Path

from source_links import IncludeIndex, first_lines, link_rows, upstream_url

IDF = Path(__file__).parent / "fixtures" / "src" / "idf"
COMMIT = "102122904ade11fd1ae373848f34ffd7dfb18aeb"
REPO = "https://github.com/espressif/esp-idf"


def test_an_include_means_the_chip_own_copy_for_the_row_chips() -> None:
    index = IncludeIndex.build(IDF)
    every = index.paths["soc/soc.h"]
    assert "components/soc/esp32c3/include/soc/soc.h" in every and len(every) > 1
    assert index.resolve("soc/soc.h", ["esp32c3"]) == ["components/soc/esp32c3/include/soc/soc.h"]
    assert index.resolve("stdint.h", ["esp32c3"]) == []  # a toolchain header: no repository path


def test_rows_link_to_the_line_of_their_first_symbol_and_their_includes_as_paths() -> None:
    text = '#pragma once\n#include <stdint.h>\n#include "soc/soc.h"\n\n#define UART_FIFO_REG (0x0)\n'
    row = {
        "file_path": "components/soc/esp32c3/register/soc/uart_reg.h",
        "chips": ["esp32c3"],
        "symbol_refs": ["NOT_IN_FILE", "UART_FIFO_REG"],
        "file_refs": ["stdint.h", "soc/soc.h"],
        "source_commit": COMMIT,
    }
    assert link_rows([row], text, IncludeIndex.build(IDF), REPO) == (1, 1)
    assert row["url"] == f"{REPO}/blob/{COMMIT}/components/soc/esp32c3/register/soc/uart_reg.h#L5"
    assert row["file_refs"] == ["components/soc/esp32c3/include/soc/soc.h"]
    assert first_lines(text)["UART_FIFO_REG"] == 5
    unpinned = {**row, "file_refs": [], "source_commit": "unknown"}
    link_rows([unpinned], text, IncludeIndex(), REPO)
    assert unpinned["url"] == ""  # no link to a commit nobody can open
    assert upstream_url(REPO, COMMIT, "examples/get-started") == f"{REPO}/tree/{COMMIT}/examples/get-started"
