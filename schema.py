"""The chunk row every corpus produces and the store holds (DESIGN §2).

One shape for all three corpora keeps filters uniform: ``chips`` is a list everywhere, and
``revisions`` is a list where empty means "this content has no revision axis", never "all".
``releases``/``release_sources`` are the ESP-IDF release axis and ``release_chips`` the (release,
chip) builds a row came from, all empty on TRM rows (docs/releases.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from chip_vocab import DOC_TYPES, chip_ids, chips
from passage_kinds import KIND_IDS, passage_facts
from releases import COMMIT, release_chip, release_series, split_release_chip, split_source

LIST_FIELDS = (
    "chips",
    "revisions",
    "releases",
    "release_sources",
    "release_chips",
    "symbol_refs",
    "doc_refs",
    "file_refs",
)
STRING_FIELDS = (
    "text",
    "doc_type",
    "source_doc",
    "section_path",
    "file_path",
    "source_version",
    "source_commit",
    "content_hash",
    "url",
)
CHUNK_FIELDS = (
    "text",
    "doc_type",
    "chips",
    "revisions",
    "releases",
    "release_sources",
    "release_chips",
    "source_doc",
    "section_path",
    "file_path",
    "chunk_index",
    "symbol_refs",
    "doc_refs",
    "file_refs",
    "source_version",
    "source_commit",
    "content_hash",
    "url",
)
# Follow-up references (DESIGN §2): ``doc_refs`` entries are ``file_path#section_path`` (a section
# esp32_docs_read opens) or ``register:NAME`` (a register esp32_docs_register answers for);
# ``file_refs`` are ESP-IDF repository paths; ``url`` is the row's upstream source where it is one
# file (a TRM chapter's .tex, a header line), empty when the link depends on the chip asked about.
REGISTER_REF = "register:"
SECTION_REF_SEPARATOR = "#"


# What a passage is and states (passage_kinds.py), written once at ingest so that ranking never reads
# the text for it: one string, integer counts, a flag and three lists.
FACT_FIELDS = (
    "kind",
    "section_depth",
    "gpio_count",
    "states_default",
    "defined_names",
    "instance_numbers",
    "counted_terms",
)
FACT_TYPES = {
    "kind": pa.string(),
    "section_depth": pa.int32(),
    "gpio_count": pa.int32(),
    "states_default": pa.bool_(),
    "defined_names": pa.list_(pa.string()),
    "instance_numbers": pa.list_(pa.int32()),
    "counted_terms": pa.list_(pa.string()),
}
ROW_FIELDS = (*CHUNK_FIELDS, *FACT_FIELDS)


def content_hash(text: str) -> str:
    """Hash of the embedded text: the embedding cache key, so only changed text is re-embedded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_row(
    *,
    text: str,
    doc_type: str,
    chips: Iterable[str],
    source_doc: str,
    section_path: str,
    file_path: str,
    chunk_index: int,
    revisions: Iterable[str] = (),
    releases: Iterable[str] = (),
    release_sources: Iterable[str] = (),
    release_chips: Iterable[str] | None = None,
    symbol_refs: Iterable[str] = (),
    doc_refs: Iterable[str] = (),
    file_refs: Iterable[str] = (),
    source_version: str = "unknown",
    source_commit: str = "unknown",
    url: str = "",
) -> dict[str, Any]:
    """Build and validate one chunk row; list fields are de-duplicated in first-seen order.

    ``release_chips`` defaults to every release with every chip, which is true of one build (an
    ingest reads one release); a row folded from several builds passes the builds it came from."""
    chips = _unique(chips)
    releases = list(releases)
    if release_chips is None:
        release_chips = [release_chip(series, chip) for series in releases for chip in chips]
    row = {
        "text": text,
        "doc_type": doc_type,
        "chips": chips,
        "revisions": _unique(revisions),
        "releases": releases,
        "release_sources": list(release_sources),
        "release_chips": _unique(release_chips),
        "source_doc": source_doc,
        "section_path": section_path,
        "file_path": file_path,
        "chunk_index": chunk_index,
        "symbol_refs": _unique(symbol_refs),
        "doc_refs": _unique(doc_refs),
        "file_refs": _unique(file_refs),
        "source_version": source_version,
        "source_commit": source_commit,
        "content_hash": content_hash(text),
        "url": url,
    }
    row.update(passage_facts(text, doc_type, section_path, file_path))
    validate_row(row)
    return row


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def validate_row(row: dict[str, Any]) -> None:
    """Raise ValueError naming the first field that breaks the data model."""
    missing = [f for f in CHUNK_FIELDS if f not in row]
    if missing:
        raise ValueError(
            f"chunk row lacks fields: {', '.join(missing)}; an older ingest wrote it: re-run the "
            "ingests (just rebuild)"
        )
    for name in STRING_FIELDS:
        if not isinstance(row[name], str):
            raise ValueError(f"field {name!r} must be a string, got {type(row[name]).__name__}")
    for name in LIST_FIELDS:
        value = row[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"field {name!r} must be a list of strings")
    if not isinstance(row["chunk_index"], int) or row["chunk_index"] < 0:
        raise ValueError("field 'chunk_index' must be a non-negative integer")
    if not row["text"].strip():
        raise ValueError("field 'text' is empty")
    if row["doc_type"] not in DOC_TYPES:
        raise ValueError(f"doc_type {row['doc_type']!r} is not one of {', '.join(DOC_TYPES)}")
    if not row["chips"]:
        raise ValueError("field 'chips' is empty: every row belongs to at least one chip")
    unknown = [c for c in row["chips"] if c not in chips()]
    if unknown:
        raise ValueError(f"unknown chips {unknown}; valid chips: {', '.join(chip_ids())}")
    for rev in row["revisions"]:
        if not any(rev in chips()[c].revisions for c in row["chips"]):
            raise ValueError(f"revision {rev!r} is not published for chips {row['chips']}")
    validate_releases(row)
    validate_facts(row)


def validate_facts(row: dict[str, Any]) -> None:
    """Raise ValueError naming the first passage fact that is missing or of the wrong type."""
    missing = [name for name in FACT_FIELDS if name not in row]
    if missing:
        raise ValueError(
            f"chunk row lacks the passage facts {', '.join(missing)}: an older ingest wrote it; "
            "re-run the ingests (just rebuild)"
        )
    if row["kind"] not in KIND_IDS:
        raise ValueError(f"kind {row['kind']!r} is not one of {', '.join(KIND_IDS)}")
    for name in ("section_depth", "gpio_count"):
        if not isinstance(row[name], int) or isinstance(row[name], bool) or row[name] < 0:
            raise ValueError(f"field {name!r} must be a non-negative integer")
    if not isinstance(row["states_default"], bool):
        raise ValueError("field 'states_default' must be true or false")
    for name in ("defined_names", "counted_terms"):
        if not isinstance(row[name], list) or not all(isinstance(value, str) for value in row[name]):
            raise ValueError(f"field {name!r} must be a list of strings")
    numbers = row["instance_numbers"]
    if not isinstance(numbers, list) or not all(isinstance(n, int) for n in numbers):
        raise ValueError("field 'instance_numbers' must be a list of integers")


def validate_releases(row: dict[str, Any]) -> None:
    """``releases`` names series, once each; ``release_sources`` gives each one's exact build."""
    releases, sources = row["releases"], row["release_sources"]
    if row["doc_type"] == "trm" and releases:
        raise ValueError("trm rows carry no ESP-IDF release: the manuals hold for every release")
    if len(releases) != len(sources) or len(set(releases)) != len(releases):
        raise ValueError(
            f"releases {releases} and release_sources {sources} must pair one build with each series"
        )
    for series, source in zip(releases, sources, strict=True):
        version, commit = split_source(source)
        if release_series(version) != series or not COMMIT.fullmatch(commit):
            raise ValueError(
                f"release source {source!r} is not an exact build (version@40-hex commit) "
                f"of series {series!r}"
            )
    validate_release_chips(row)


def validate_release_chips(row: dict[str, Any]) -> None:
    """Every (release, chip) build names one of the row's releases and chips, and every release and
    chip of a row with releases comes from at least one build."""
    pairs = [split_release_chip(pair) for pair in row["release_chips"]]
    if not row["releases"]:
        if pairs:
            raise ValueError(f"release_chips {row['release_chips']} on a row that lists no release")
        return
    stray = [release_chip(s, c) for s, c in pairs if s not in row["releases"] or c not in row["chips"]]
    if stray:
        raise ValueError(
            f"release_chips {stray} name a release or chip the row does not list "
            f"(releases {row['releases']}, chips {row['chips']})"
        )
    unbuilt = [s for s in row["releases"] if s not in {s for s, _ in pairs}]
    unbuilt += [c for c in row["chips"] if c not in {c for _, c in pairs}]
    if unbuilt:
        raise ValueError(
            f"{', '.join(unbuilt)} listed without a build in release_chips {row['release_chips']}: "
            "an older ingest or dedup wrote this row; re-run them (just rebuild)"
        )


# Every row's embedding windows, the whole chunk's vector first: the embedder reads 256 tokens, so a
# long chunk also gets a vector per later window, and the vector leg scores a row by its best window.
WINDOWS_COLUMN = "windows"


def arrow_schema(vector_dim: int) -> pa.Schema:
    """The store's table schema; the vector width comes from the embedding model, never a constant."""
    string_list = pa.list_(pa.string())
    fields = []
    for name in CHUNK_FIELDS:
        if name in LIST_FIELDS:
            fields.append(pa.field(name, string_list))
        elif name == "chunk_index":
            fields.append(pa.field(name, pa.int32()))
        else:
            fields.append(pa.field(name, pa.string()))
    fields.extend(pa.field(name, FACT_TYPES[name]) for name in FACT_FIELDS)
    fields.append(pa.field("vector", pa.list_(pa.float32(), vector_dim)))
    fields.append(pa.field(WINDOWS_COLUMN, pa.list_(pa.list_(pa.float32(), vector_dim))))
    return pa.schema(fields)


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield rows from a JSONL file, naming the file and line of any malformed one."""
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from exc


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> int:
    """Write rows atomically (temp file, then rename) so a crash never leaves half a corpus."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        # mkstemp creates 0600; outputs are ordinary files for every stage and user to read
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count
