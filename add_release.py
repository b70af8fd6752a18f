"""Add one pinned ESP-IDF release to an existing store in one command, and say what it cost.

    uv run add_release.py v5.1.7 [--chips esp32,esp32s3] [--project-dir DIR] [rebuild options]

The release's tree is fetched or verified (sources.py), the chosen chips' docs are built or reused,
its headers ingested, and `rebuild.py` runs with every release the work dir already holds plus this
one, so dedup folds the new rows into the held ones and the embedding cache embeds only new text.
Chips default to the chip of the project in scope. A chip whose docs fail is left out and the rest
are added; the summary names it and why, then the store's growth: rows and vectors per doc_type,
disk, and the share of the release's chunks that dedup folded into rows the store already had.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from project_scope import detect
from rebuild import DB_ENV_VAR, DEFAULT_DB, DEFAULT_WORK, PY, idf_chunk_file, src_chunk_file
from releases import release_series
from sources import DEFAULT_SOURCES, Pins, SourcesError, load_pins
from stages import REPO

DOC_TYPES = ("idf", "src")


def how_to_pin(pins: Pins) -> str:
    """The steps that pin a release, for the error an unpinned tag gets."""
    return (
        f"to add one, pin it in {pins.file.name} under idf.releases: commit "
        "(`git rev-parse TAG^{commit}`), describe (the tag), targets (`idf_targets` in the tag's "
        "docs/conf_common.py), docs_tooling and "
        "the submodules its docs build needs (docs/releases.md, 'Adding a release'), then re-run"
    )


def pinned_name(pins: Pins, tag: str) -> str:
    """The pin a caller means by a tag, a describe or a series (`v5.1.7`, `5.1.7`, `v5.1`)."""
    text = tag.strip()
    if text in pins.releases:
        return text
    for name, release in pins.releases.items():
        if text in (release.describe, release.describe.lstrip("v")):
            return name
    series = release_series(text)
    same = [n for n, r in pins.releases.items() if series and release_series(r.describe) == series]
    if len(same) == 1:
        return same[0]
    held = ", ".join(f"{n} ({r.describe})" for n, r in pins.releases.items())
    raise SourcesError(f"ESP-IDF {tag!r} is not pinned; pinned releases: {held}; {how_to_pin(pins)}")


def held_parts(work: Path) -> dict[str, set[str]]:
    """Release -> chips whose docs the work dir's store was built from (the ingest stamps)."""
    held: dict[str, set[str]] = {}
    for stamp in (work / "stamps").glob("ingest-*.json"):
        params = json.loads(stamp.read_text(encoding="utf-8")).get("parts", {}).get("params", {})
        release = params.get("release")
        if not release:
            continue
        chips = held.setdefault(release, set())
        if params.get("chip"):
            chips.add(params["chip"])
    return held


@dataclass(frozen=True)
class StoreSize:
    rows: dict[str, int]
    disk_bytes: int


def store_size(db: str) -> StoreSize:
    """Rows per doc_type (one vector each) and bytes on disk of a local store (zeros when absent)."""
    from store import StoreError, open_store

    path = Path(db)
    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0
    try:
        table = open_store(db)
    except StoreError:
        return StoreSize({}, disk)
    rows = {doc_type: table.count_rows(f"doc_type = '{doc_type}'") for doc_type in (*DOC_TYPES, "trm")}
    return StoreSize(rows, disk)


def chip_failure(work: Path, release: str, chip: str) -> str | None:
    """Why a chip's docs stage has no stamp after a run (None when it has one)."""
    if (work / "stamps" / f"docs--{release}--{chip}.json").is_file():
        return None
    log = work / "logs" / f"docs-{release}.log"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    about = [line for line in lines if f"{chip}:" in line or "error:" in line]
    return about[-1].strip() if about else f"no docs built (see {log})"


def run_rebuild(argv: list[str]) -> int:
    print(f"add-release: {' '.join(argv[1:])}", flush=True)
    return subprocess.run(argv, cwd=REPO, check=False).returncode


def chunk_rows(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            with path.open("rb") as handle:
                total += sum(1 for _ in handle)
    return total


def added_chunk_files(chunks: Path, name: str, held: dict[str, set[str]], chips: set[str]) -> list[Path]:
    """The chunk files of what adding ``chips`` of release ``name`` adds to a store holding ``held``:
    the docs of the chips it did not hold, and the release's headers when it held none of it."""
    headers = [] if name in held else [src_chunk_file(chunks, name)]
    return headers + [idf_chunk_file(chunks, name, chip) for chip in sorted(chips - held.get(name, set()))]


def growth_lines(name: str, before: StoreSize, after: StoreSize, new_chunks: int) -> list[str]:
    """The store's growth from adding ``name``, and the share of the chunks this run added (its new
    chips' docs, and its headers when the store held none of the release) that dedup folded."""
    added = {d: after.rows.get(d, 0) - before.rows.get(d, 0) for d in DOC_TYPES}
    total = sum(added.values())
    folded = 1 - total / new_chunks if new_chunks else 0.0
    per_type = ", ".join(
        f"{d} {before.rows.get(d, 0):,} -> {after.rows.get(d, 0):,} (+{added[d]:,})" for d in DOC_TYPES
    )
    return [
        f"store growth for {name}: rows and vectors {per_type}",
        f"disk {before.disk_bytes / 2**20:,.1f} MiB -> {after.disk_bytes / 2**20:,.1f} MiB "
        f"(+{(after.disk_bytes - before.disk_bytes) / 2**20:,.1f} MiB)",
        f"dedup: {new_chunks:,} chunks of {name} became {total:,} new rows "
        f"({folded:.1%} folded into rows the store held)",
    ]


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tag", help="a pinned release: its name, tag or series (v5.1.7, 5.1.7, v5.1)")
    parser.add_argument("--chips", help="comma-separated docs targets (default: the project's chip)")
    parser.add_argument("--project-dir", help="the project whose chip is the default (default: .)")
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES, help="pinned sources file")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK, help="the store's rebuild work dir")
    parser.add_argument("--db", help=f"the store (default ${DB_ENV_VAR} or ./{DEFAULT_DB})")
    return parser.parse_known_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args, passthrough = parse_args(argv)
    db = args.db or os.environ.get(DB_ENV_VAR) or DEFAULT_DB
    work = args.work_dir.resolve()
    try:
        pins = load_pins(args.sources)
        name = pinned_name(pins, args.tag)
        release = pins.releases[name]
        if args.chips:
            chips = [c.strip() for c in args.chips.split(",") if c.strip()]
        else:
            scope = detect(str(Path(args.project_dir or ".").resolve()), "--project-dir", Path.cwd())
            if scope.chip is None:
                raise SourcesError(
                    f"no --chips and no project chip in {scope.directory or args.project_dir or '.'} "
                    f"({'; '.join(scope.notes) or 'no project'}); "
                    f"pass --chips, one or more of: {', '.join(release.targets)}"
                )
            chips = [scope.chip]
        unknown = [chip for chip in chips if chip not in release.targets]
        if unknown:
            raise SourcesError(
                f"ESP-IDF {name} has no docs target {', '.join(unknown)}; "
                f"its targets: {', '.join(release.targets)}"
            )
    except SourcesError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    parts = held_parts(work)
    held_before = {release: set(held) for release, held in parts.items()}
    parts.setdefault(name, set()).update(chips)
    before = store_size(db)
    failed: dict[str, str] = {}

    def rebuild_argv() -> list[str]:
        selection = [f"{r}:{c}" for r, cs in sorted(parts.items()) for c in sorted(cs)]
        releases = ",".join(r for r in pins.releases if r in parts)
        chips_arg = ["--chips", ",".join(selection)] if selection else []
        return [
            PY,
            str(REPO / "rebuild.py"),
            "--sources",
            str(args.sources),
            "--work-dir",
            str(work),
            "--db",
            db,
            "--releases",
            releases,
            *chips_arg,
            *passthrough,
        ]

    code = run_rebuild(rebuild_argv())
    if code != 0:
        failed = {c: why for c in chips if (why := chip_failure(work, name, c))}
        if not failed or code == 2:
            return code
        parts[name] -= set(failed)  # the other chips and the headers still go in
        code = run_rebuild(rebuild_argv())
    after = store_size(db)
    new_chunks = chunk_rows(added_chunk_files(work / "chunks", name, held_before, parts[name]))
    for line in growth_lines(name, before, after, new_chunks):
        print(line)
    for chip, why in failed.items():
        print(f"add-release: {name} {chip} FAILED: {why}")
    added = sorted(parts[name])
    status = "added" if code == 0 else "FAILED"
    print(
        f"add-release: {name} {status}: docs for {', '.join(added) or 'no chip'} and headers; "
        f"{len(failed)} chip(s) failed"
    )
    return code or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
