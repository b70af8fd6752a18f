"""Upstream links for SoC-header rows: the repository paths a header includes, and the line a chunk
starts at, so a result names files an agent can read and a link that opens at the right place.

A header says ``#include "soc/uart_reg.h"``; which file that is depends on the chip, since every
chip has its own ``components/soc/<chip>/register/soc/uart_reg.h``. Include directories are
indexed once per tree; an include resolves to the files under them for the row's chips.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chip_vocab import chip_ids
from releases import COMMIT

INCLUDE_DIRS = ("include", "register")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def upstream_url(repo_url: str, commit: str, path: str, line: int | None = None) -> str:
    """A file (``blob``) or folder (``tree``) of the repository at ``commit``, at ``line`` if given."""
    kind = "blob" if Path(path).suffix else "tree"
    return f"{repo_url}/{kind}/{commit}/{path}" + (f"#L{line}" if line else "")


@dataclass
class IncludeIndex:
    """``soc/uart_reg.h`` -> every repository path an include of it can mean."""

    paths: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, idf_path: Path) -> IncludeIndex:
        index = cls()
        components = idf_path / "components"
        for directory in sorted(components.rglob("*")):
            if directory.name not in INCLUDE_DIRS or not directory.is_dir():
                continue
            for header in sorted(directory.rglob("*.h")):
                key = header.relative_to(directory).as_posix()
                index.paths.setdefault(key, []).append(header.relative_to(idf_path).as_posix())
        return index

    def resolve(self, include: str, chips: Iterable[str]) -> list[str]:
        """The files ``include`` means for ``chips``: chip-specific copies only for those chips."""
        wanted = set(chips)
        known = set(chip_ids())
        found = []
        for path in self.paths.get(include, []):
            chip_dirs = known.intersection(path.split("/"))
            if not chip_dirs or chip_dirs & wanted:
                found.append(path)
        return found


def first_lines(text: str) -> dict[str, int]:
    """Each identifier's first line in ``text`` (1-based)."""
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for name in _IDENTIFIER.findall(line):
            lines.setdefault(name, number)
    return lines


def link_rows(
    rows: list[dict[str, Any]], text: str, includes: IncludeIndex, repo_url: str
) -> tuple[int, int]:
    """Give each row of one file its upstream ``url`` (at the line of the first symbol it names) and
    turn its include names into repository paths; returns (includes resolved, not resolved: system
    or toolchain headers such as stdint.h)."""
    lines = first_lines(text)
    resolved = unresolved = 0
    for row in rows:
        line = next((lines[s] for s in row["symbol_refs"] if s in lines), None)
        pinned = COMMIT.fullmatch(row["source_commit"])
        row["url"] = upstream_url(repo_url, row["source_commit"], row["file_path"], line) if pinned else ""
        paths: list[str] = []
        for include in row["file_refs"]:
            found = includes.resolve(include, row["chips"])
            resolved += bool(found)
            unresolved += not found
            paths.extend(found)
        row["file_refs"] = list(dict.fromkeys(p for p in paths if p != row["file_path"]))
    return resolved, unresolved
