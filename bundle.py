"""Build once, serve anywhere: verified store bundles, and publishing a store to object storage.

    uv run bundle.py pack [--db DIR] [--out FILE] [--eval QUESTIONS]   # a bundle file
    uv run bundle.py pack [--db DIR] --to s3://bucket/prefix/esp_docs.lancedb  # publish to a bucket
    uv run bundle.py install BUNDLE [--db DIR] [--eval QUESTIONS]       # verify, then install

A bundle is an uncompressed tar: ``manifest.json`` first, then the ``chunks`` table of a compacted
copy of the store (one table version, no history, no embedding cache). The manifest holds the
sources.yaml pins, the embedder (model id and the sha256 of its weight files), the chips and
releases, rows and vectors per corpus, the dev-question figures at pack time, the project version
and the sha256 of every file. Install refuses, naming the check that failed, a bundle that is
truncated or tampered with, one whose embedder is not the one installed here, or one that fails
validate_store.py; nothing touches the target before every check has passed.

Placing a store is atomic either way. Into a directory that does not exist yet: the verified copy is
renamed into place. Into an existing store (local or a bucket): the whole new content goes in as ONE
merge_insert commit on the row key, so a server reading it (store_watch.py) serves the old table
version until the new one is committed, then the new one, never a mix. The manifest is kept beside
the chunks in a one-row ``bundle_manifest`` table, which list_chips shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import warnings
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from tqdm import tqdm

from embed_and_store import ROW_KEY, compact_best_effort, ensure_table, retry_on_conflict
from embedder import MINILM_ID, MINILM_INT8_ID, MINILM_SHA256, minilm_model_dir, sha256_file
from object_store import describe_failure, is_remote
from schema import WINDOWS_COLUMN
from store import TABLE_NAME, StoreError, open_store, resolve_db_uri, store_model_id, store_vector_dim
from term_stats import TABLE_NAME as TERM_STATS_TABLE
from term_stats import write_term_stats

REPO = Path(__file__).resolve().parent
BUNDLE_FORMAT = 1
MANIFEST_NAME = "manifest.json"
STORE_DIR = "esp_docs.lancedb"
MANIFEST_TABLE = "bundle_manifest"
VALIDATE_SAMPLE = 50
HASH_BLOCK = 1 << 20


class BundleError(Exception):
    """A bundle refused or a pack that cannot run; the message names the check and what to do."""


# ---------------------------------------------------------------------------------------------
# What the manifest records


def embedder_fingerprint(model_id: str) -> dict[str, Any]:
    """The installed embedder: its model id and the sha256 of the weight files it loads."""
    files = {}
    if model_id in (MINILM_ID, MINILM_INT8_ID):
        model_dir = minilm_model_dir()
        files = {name: sha256_file(model_dir / name) for name in sorted(MINILM_SHA256)}
    return {"model_id": model_id, "files": files}


def project_version() -> dict[str, str]:
    """pyproject's version and the commit the pack ran from (when it runs in a git checkout)."""
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {"version": version, "commit": commit}


def corpus_counts(table: Any) -> dict[str, Any]:
    """Rows and vectors per corpus, rows per chip and corpus, and the ESP-IDF releases held."""
    data = table.search().select(["doc_type", "chips", "releases", WINDOWS_COLUMN]).limit(None).to_arrow()
    vectors = pc.list_value_length(data.column(WINDOWS_COLUMN)).to_numpy(zero_copy_only=False)
    rows: Counter[str] = Counter()
    vector_counts: Counter[str] = Counter()
    chips: dict[str, Counter[str]] = {}
    releases: set[str] = set()
    for doc_type, row_chips, row_releases, count in zip(
        data.column("doc_type").to_pylist(),
        data.column("chips").to_pylist(),
        data.column("releases").to_pylist(),
        vectors,
        strict=True,
    ):
        rows[doc_type] += 1
        vector_counts[doc_type] += int(count)
        for chip in row_chips:
            chips.setdefault(chip, Counter())[doc_type] += 1
        releases.update(row_releases or [])
    return {
        "rows": dict(sorted(rows.items())),
        "vectors": dict(sorted(vector_counts.items())),
        "chips": {chip: dict(sorted(c.items())) for chip, c in sorted(chips.items())},
        "releases": sorted(releases),
    }


def dev_figures(db_uri: str, questions: Path) -> dict[str, Any]:
    """hit@1/5/10 and MRR@10 per category of the hybrid search on ``questions`` (eval_retrieval)."""
    import eval_retrieval  # the scorer loads the model: only when figures are asked for
    from search import open_engine

    engine = open_engine(db_uri)
    cases = eval_retrieval.with_releases(engine, eval_retrieval.load_cases(questions))
    scores = eval_retrieval.by_category(eval_retrieval.evaluate(engine, cases, "hybrid"))
    return {
        "questions": questions.name,
        "questions_sha256": sha256_file(questions),
        "cases": len(cases),
        "by_category": {
            name: {
                "hit@1": round(s.hit(1), 4),
                "hit@5": round(s.hit(5), 4),
                "hit@10": round(s.hit(10), 4),
                "mrr@10": round(s.mrr(), 4),
            }
            for name, s in scores.items()
        },
    }


def file_hashes(root: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file under ``root``, by path relative to ``root``'s parent."""
    hashes = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        hashes[path.relative_to(root.parent).as_posix()] = {
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
        }
    return hashes


# ---------------------------------------------------------------------------------------------
# Pack


def compacted_copy(db_uri: str, staging: Path) -> Path:
    """The store's chunks table and its term statistics, copied and compacted to one version without
    history (the embedding cache stays behind: a served store never embeds a document)."""
    open_store(db_uri)  # refuses a missing, empty or foreign store with its own message
    copy = staging / STORE_DIR
    copy.mkdir(parents=True)
    for name in (TABLE_NAME, TERM_STATS_TABLE):
        shutil.copytree(Path(db_uri) / f"{name}.lance", copy / f"{name}.lance")
    table = lancedb.connect(str(copy)).open_table(TABLE_NAME)
    with warnings.catch_warnings():  # it warns of readers of old versions: this copy has none
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return copy


def build_manifest(store: Path, questions: Path | None) -> dict[str, Any]:
    table = open_store(str(store))
    sources_file = REPO / "sources.yaml"
    figures = None
    if questions is not None:
        if not questions.is_file():
            raise BundleError(f"--eval {questions}: no such questions file")
        figures = dev_figures(str(store), questions)
    return {
        "format": BUNDLE_FORMAT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "project": project_version(),
        "sources": yaml.safe_load(sources_file.read_text()) if sources_file.is_file() else None,
        "embedder": {**embedder_fingerprint(store_model_id(table)), "dimension": store_vector_dim(table)},
        "table": {"name": TABLE_NAME, "version": table.version},
        **corpus_counts(table),
        "dev_figures": figures,
        "files": file_hashes(store),
    }


def pack(db_uri: str, out: Path, questions: Path | None) -> dict[str, Any]:
    """Write the bundle to ``out`` (via a temporary name, so a killed pack leaves no bundle)."""
    if is_remote(db_uri):
        raise BundleError(f"pack reads a local store; {db_uri} is remote (install a bundle from it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pack-", dir=out.parent) as tmp:
        store = compacted_copy(db_uri, Path(tmp))
        manifest = build_manifest(store, questions)
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            data = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST_NAME)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, _BytesReader(data))
            for name in tqdm(manifest["files"], desc="pack", unit="file", file=sys.stderr):
                tar.add(Path(tmp) / name, arcname=name, recursive=False)
        os.replace(partial, out)
    return manifest


class _BytesReader:
    """The minimal file object tarfile.addfile reads a member's bytes from."""

    def __init__(self, data: bytes) -> None:
        self._data, self._offset = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._offset + size
        chunk, self._offset = self._data[self._offset : end], min(end, len(self._data))
        return chunk


# ---------------------------------------------------------------------------------------------
# Verify and install


def read_manifest(tar: tarfile.TarFile, bundle: Path) -> dict[str, Any]:
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME:
        raise BundleError(f"check 'manifest' failed: {bundle} does not start with {MANIFEST_NAME}")
    handle = tar.extractfile(first)
    try:
        manifest = json.loads(handle.read() if handle else b"")
    except json.JSONDecodeError as error:
        raise BundleError(f"check 'manifest' failed: {MANIFEST_NAME} is not JSON ({error})") from error
    if manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(
            f"check 'manifest' failed: bundle format {manifest.get('format')!r}, this version reads "
            f"{BUNDLE_FORMAT}"
        )
    return manifest


def extract_verified(bundle: Path, staging: Path) -> dict[str, Any]:
    """Unpack into ``staging``, checking every member against the manifest's list and sha256."""
    try:
        with tarfile.open(bundle, "r:") as tar:
            manifest = read_manifest(tar, bundle)
            expected: dict[str, dict[str, Any]] = manifest["files"]
            seen = set()
            members = (member for member in tar if member.name != MANIFEST_NAME or member.offset > 0)
            for member in tqdm(members, desc="verify", unit="file", total=len(expected), file=sys.stderr):
                if member.name not in expected or not member.isfile():
                    raise BundleError(
                        f"check 'file list' failed: {member.name} is not a file the manifest lists"
                    )
                tar.extract(member, staging, filter="data")
                actual = sha256_file(staging / member.name)
                if actual != expected[member.name]["sha256"]:
                    raise BundleError(
                        f"check 'sha256' failed: {member.name} has sha256 {actual}, the manifest says "
                        f"{expected[member.name]['sha256']}"
                    )
                seen.add(member.name)
    except (tarfile.TarError, EOFError) as error:
        problem = f"check 'archive' failed: {bundle} is truncated or not a bundle ({error})"
        raise BundleError(problem) from error
    missing = sorted(set(expected) - seen)
    if missing:
        raise BundleError(
            f"check 'file list' failed: {len(missing)} file(s) the manifest lists are missing, e.g. "
            f"{missing[0]} (a truncated bundle)"
        )
    return manifest


def check_embedder(manifest: dict[str, Any]) -> None:
    """The installed embedder must be the one the bundle's vectors came from."""
    built = manifest["embedder"]
    try:
        here = embedder_fingerprint(built["model_id"])
    except Exception as error:  # the model's package missing or unreadable
        raise BundleError(
            f"check 'embedder' failed: the bundle was built with {built['model_id']}, which is not "
            f"installed here ({error})"
        ) from error
    if here["files"] != built["files"]:
        raise BundleError(
            f"check 'embedder' failed: the bundle was built with {built['model_id']} files "
            f"{_short(built['files'])}, the installed embedder is {here['model_id']} files "
            f"{_short(here['files'])}; install the project version the bundle names "
            f"({manifest['project']['version']}, {manifest['project']['commit'][:12]})"
        )


def _short(files: dict[str, str]) -> str:
    return ", ".join(f"{name}={digest[:12]}" for name, digest in files.items()) or "(none)"


def check_store(store: Path, manifest: dict[str, Any], questions: Path | None) -> None:
    """validate_store.py on the staged copy, its counts against the manifest, and the dev figures."""
    import validate_store

    report = validate_store.validate(str(store), VALIDATE_SAMPLE, 0)
    if report.failures:
        raise BundleError(f"check 'validate_store' failed: {'; '.join(report.failures[:3])}")
    counts = corpus_counts(open_store(str(store)))
    for key in ("rows", "vectors", "chips", "releases"):
        if counts[key] != manifest[key]:
            raise BundleError(f"check 'counts' failed: {key} {counts[key]} != manifest {manifest[key]}")
    figures = manifest.get("dev_figures")
    if questions is not None and figures is not None:
        if sha256_file(questions) != figures["questions_sha256"]:
            raise BundleError(
                f"check 'dev figures' cannot run: {questions} is not the questions file the bundle "
                f"was scored on ({figures['questions']})"
            )
        now = dev_figures(str(store), questions)
        if now["by_category"] != figures["by_category"]:
            raise BundleError(
                f"check 'dev figures' failed: now {now['by_category']['OVERALL']}, at pack "
                f"{figures['by_category']['OVERALL']}"
            )


def install(bundle: Path, db_uri: str, questions: Path | None) -> str:
    """Verify the bundle wholly, then make it the store at ``db_uri``; returns how it was placed."""
    if not bundle.is_file():
        raise BundleError(f"no bundle at {bundle}")
    parent = Path(db_uri).parent if not is_remote(db_uri) else Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".install-", dir=parent) as tmp:
        manifest = extract_verified(bundle, Path(tmp))
        check_embedder(manifest)
        staged = Path(tmp) / STORE_DIR
        check_store(staged, manifest, questions)
        write_manifest_table(lancedb.connect(str(staged)), manifest)
        if not is_remote(db_uri) and not Path(db_uri).exists():
            os.replace(staged, db_uri)  # one rename: the directory appears whole
            return f"installed into {db_uri} (new directory)"
        version = publish(str(staged), db_uri, manifest)
        return f"installed into {db_uri} as table version {version} (one commit over the old store)"


# ---------------------------------------------------------------------------------------------
# Publish: the whole content in one commit


def publish(source_uri: str, target_uri: str, manifest: dict[str, Any]) -> int:
    """Make the source store's chunks the target's whole content in one commit; returns its version."""
    source = open_store(source_uri)
    model_id, dimension = store_model_id(source), store_vector_dim(source)
    try:
        db = lancedb.connect(target_uri)
        target = ensure_table(db, target_uri, model_id, dimension)
    except StoreError:
        raise
    except Exception as error:
        raise BundleError(_target_problem(target_uri, error)) from error
    new = source.to_arrow().select(target.schema.names)
    retry_on_conflict(
        lambda: (
            target.merge_insert(list(ROW_KEY))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete()
            .execute(new)
        ),
        f"publishing into {target_uri}",
    )
    if target.count_rows() != new.num_rows:
        held = target.count_rows()
        raise StoreError(f"after publishing, {target_uri} holds {held} rows, not {new.num_rows}")
    compact_best_effort(target, "indexing and compacting the published store")
    write_term_stats(db, target)
    write_manifest_table(db, {**manifest, "table": {"name": TABLE_NAME, "version": target.version}})
    return int(target.version)


def _target_problem(target_uri: str, error: BaseException) -> str:
    if is_remote(target_uri):
        return describe_failure(target_uri, error)
    return f"cannot write the store at {target_uri} ({type(error).__name__}: {str(error)[:200]})"


def write_manifest_table(db: Any, manifest: dict[str, Any]) -> None:
    """The manifest as one JSON row; overwritten by each install or publish."""
    row = pa.table({"manifest": [json.dumps(manifest, sort_keys=True)]})
    db.create_table(MANIFEST_TABLE, row, mode="overwrite")


@lru_cache(maxsize=8)
def served_manifest(db_uri: str, table_version: int) -> dict[str, Any] | None:
    """What list_chips shows of the installed bundle: its manifest without the per-file hashes.

    None for a store that was built here rather than installed or published. Cached per table
    version, so each refresh reads it once.
    """
    try:
        rows = lancedb.connect(db_uri).open_table(MANIFEST_TABLE).to_arrow().column("manifest").to_pylist()
    except (ValueError, FileNotFoundError, OSError):
        return None
    if not rows:
        return None
    manifest = json.loads(rows[0])
    files = manifest.pop("files", {})
    manifest["file_count"] = len(files)
    manifest["bytes"] = sum(entry["bytes"] for entry in files.values())
    if manifest.get("table", {}).get("version") != table_version:
        manifest["note"] = (
            f"this manifest describes table version {manifest.get('table', {}).get('version')}; "
            f"serving version {table_version} (the store was written since)"
        )
    return manifest


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Pack, publish and install verified store bundles.")
    commands = parser.add_subparsers(dest="command", required=True)
    pack_cmd = commands.add_parser("pack", help="write a bundle, or publish the store with --to")
    pack_cmd.add_argument("--db", help="the store to pack (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    pack_cmd.add_argument("--out", type=Path, help="bundle file (default ./esp_docs-<version>.bundle.tar)")
    pack_cmd.add_argument("--to", help="publish into this store URI (s3://bucket/prefix/esp_docs.lancedb)")
    pack_cmd.add_argument("--eval", type=Path, help="dev questions to score and record in the manifest")
    install_cmd = commands.add_parser("install", help="verify a bundle, then install it atomically")
    install_cmd.add_argument("bundle", type=Path)
    install_cmd.add_argument("--db", help="where to install (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    install_cmd.add_argument(
        "--eval", type=Path, help="re-score these dev questions; the figures must match the manifest's"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    db_uri = resolve_db_uri(args.db)
    started = time.monotonic()
    try:
        if args.command == "install":
            placed = install(args.bundle, db_uri, args.eval)
            print(f"bundle: {args.bundle} verified and {placed} in {time.monotonic() - started:.1f} s")
            return 0
        if args.to:
            with tempfile.TemporaryDirectory(prefix=".publish-") as tmp:
                store = compacted_copy(db_uri, Path(tmp))
                version = publish(str(store), args.to, build_manifest(store, args.eval))
            print(
                f"bundle: {db_uri} published to {args.to} as table version {version} in "
                f"{time.monotonic() - started:.1f} s"
            )
            return 0
        version = project_version()["version"]
        out = args.out or Path(f"esp_docs-{version}.bundle.tar")
        manifest = pack(db_uri, out, args.eval)
        rows = ", ".join(f"{doc}={n}" for doc, n in manifest["rows"].items())
        print(
            f"bundle: {out} written, {out.stat().st_size / 2**20:.1f} MiB, {len(manifest['files'])} files, "
            f"rows {rows}, in {time.monotonic() - started:.1f} s"
        )
        return 0
    except (BundleError, StoreError) as error:
        print(f"bundle: refused: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
