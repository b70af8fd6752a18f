"""Follow-up references as a result shows them, and the section a ``doc_refs`` entry opens.

Rows store references compactly (schema.py): ``file_path#section_path`` for a section,
``register:NAME`` for a register, repository paths for files. A result turns them into the
arguments of the tool that follows each one (esp32_docs_read, esp32_docs_register) and gives each
file its upstream link at the row's commit; the lists are capped so that a k=5 answer stays small,
and say how many entries were cut.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from releases import COMMIT
from schema import REGISTER_REF, SECTION_REF_SEPARATOR
from source_links import upstream_url
from sources import SourcesError, load_pins

DOC_REFS_SHOWN = 2
FILE_REFS_SHOWN = 2
PATH_SEPARATOR = " > "


@cache
def _idf_repo_url() -> str:
    try:
        return load_pins().idf_url
    except SourcesError:
        return "https://github.com/espressif/esp-idf"


def doc_ref(ref: str) -> dict[str, str]:
    """A stored reference as the arguments that follow it."""
    if ref.startswith(REGISTER_REF):
        return {"register": ref[len(REGISTER_REF) :]}
    file_path, _, section_path = ref.partition(SECTION_REF_SEPARATOR)
    return {"file_path": file_path, "section_path": section_path}


def follow_up(row: dict[str, Any], excerpt: str = "") -> dict[str, Any]:
    """The row's ``doc_refs``/``file_refs`` for a result: capped, and left out when empty. A
    register the ``excerpt`` already names is left out too: its name is the argument that follows it."""
    shown: dict[str, Any] = {}
    cut: dict[str, int] = {}
    # links into other pages and chapters first: the row's own page is one esp32_docs_read away anyway
    own_page = row.get("file_path", "") + SECTION_REF_SEPARATOR
    doc_refs = sorted(
        (ref for ref in row.get("doc_refs") or [] if not _named_register(ref, excerpt)),
        key=lambda ref: ref.startswith(own_page),
    )
    if doc_refs:
        shown["doc_refs"] = [doc_ref(ref) for ref in doc_refs[:DOC_REFS_SHOWN]]
        if len(doc_refs) > DOC_REFS_SHOWN:
            cut["doc_refs"] = len(doc_refs) - DOC_REFS_SHOWN
    file_refs = row.get("file_refs") or []
    if file_refs:
        pinned = COMMIT.fullmatch(row["source_commit"])
        shown["file_refs"] = [
            {"path": path, "url": upstream_url(_idf_repo_url(), row["source_commit"], path)}
            if pinned
            else {"path": path}
            for path in file_refs[:FILE_REFS_SHOWN]
        ]
        if len(file_refs) > FILE_REFS_SHOWN:
            cut["file_refs"] = len(file_refs) - FILE_REFS_SHOWN
    if cut:
        shown["refs_cut"] = cut
    return shown


def _named_register(ref: str, excerpt: str) -> bool:
    return ref.startswith(REGISTER_REF) and ref[len(REGISTER_REF) :] in excerpt


def section_rows(rows: list[dict[str, Any]], section_path: str) -> tuple[list[dict[str, Any]], str]:
    """The rows that hold ``section_path`` in document order, and the section path they cover.

    A section short enough to share its parent's chunk has no rows of its own: then the parent's
    chunk that carries its heading holds it; a section with no text at all opens the nearest
    enclosing section the file has.
    """
    inside = [
        r
        for r in rows
        if r["section_path"] == section_path or r["section_path"].startswith(section_path + PATH_SEPARATOR)
    ]
    if inside:
        return inside, section_path
    titles = section_path.split(PATH_SEPARATOR)
    for depth in range(len(titles) - 1, 0, -1):
        parent = PATH_SEPARATOR.join(titles[:depth])
        for row in rows:
            if row["section_path"] == parent and _has_heading(row["text"], titles[-1]):
                return [row], row["section_path"]
        # a section with no text of its own (a heading over a figure) opens the section around it
        around = [r for r in rows if (r["section_path"] + PATH_SEPARATOR).startswith(parent + PATH_SEPARATOR)]
        if around:
            return around, parent
    return [], section_path


def _has_heading(text: str, title: str) -> bool:
    return any(line.startswith("#") and line.lstrip("#").strip() == title for line in text.splitlines())
