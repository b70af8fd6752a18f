"""One command from the pinned sources (sources.yaml) to a validated store.

The full store takes about ten commands and hours of work (docs builds ~40 min per chip, the embed
tens of minutes), so a rebuild must do only what changed and pick up where a failure stopped it.
Stages (see stages.py for the skipping rules), per release R and chip C of sources.yaml:

    docs/R/C          reuse an existing XML build of that commit (--xml folders or .tar.xz archives,
                      or the checkout's own docs/_build) or build it with build_idf_docs.sh
    ingest-idf/R/C    ingest_sphinx_xml.py -> chunks/chunks_R_C.jsonl
    dedup-idf         dedup_chunks.py over every chip and release -> chunks/idf_chunks.jsonl
    ingest-trm        ingest_trm.py -> chunks/trm_chunks.jsonl
    ingest-src/R      ingest_source.py -> chunks/src_chunks_R.jsonl
    dedup-src         dedup_chunks.py over the releases -> chunks/src_chunks.jsonl
    embed-trm|idf|src embed_and_store.py into the store (one doc_type each; resumes from its cache)
    validate          validate_store.py
    eval              eval_retrieval.py on the dev questions -> eval_dev.txt (when --eval-queries or
                      $EVAL_QUERIES names them; a clone has none of its own)

    uv run rebuild.py --xml ../shared/corpus/idf-xml --xml ../shared/corpus/idf-xml-more
    uv run rebuild.py --dry-run                     # the plan: what would run and why
    uv run rebuild.py 'ingest-idf/master/esp32c3'   # one stage and what it needs
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import sys
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from capability_headers import DOCS_SOURCES
from embedder import MODEL_IDS
from sources import (
    ChipSelection,
    Release,
    Sources,
    SourcesError,
    Tree,
    add_source_arguments,
    format_sources,
    parse_chip_selection,
    resolve_from_args,
)
from stages import (
    REPO,
    CommandResult,
    Outcome,
    Runner,
    Stage,
    StageFailed,
    code_closure,
    failure_line,
    file_digest,
    format_seconds,
    format_table,
    last_line,
    run_command,
    stop_children,
    text_digest,
    tree_digest,
)

DEFAULT_WORK = REPO / "build" / "rebuild"
DOCS_BUILDER = REPO / "build_idf_docs.sh"
MIN_PAGES = 250  # build_idf_docs.sh's default success rule: pages written, not the exit status
DB_ENV_VAR = "ESP32_DOCS_DB"
DEFAULT_DB = "esp_docs.lancedb"
QUERIES_ENV_VAR = "EVAL_QUERIES"
PAGE_ROOT = re.compile(rb"^<document[ >]", re.MULTILINE)
# A build's pages link to GitHub files at the revision they were built from (commit or tag).
IDF_LINK = re.compile(r"github\.com/espressif/esp-idf/(?:blob|tree|raw)/([^/\"'\s<>]+)/")
SOURCE_COMMIT = re.compile(r"^\s*-?\s*Commit:\s*`?([0-9a-f]{7,40})", re.MULTILINE)
LINK_SAMPLE_FILES = 60
PY = sys.executable
BUILT_MARK = "built by build_idf_docs.sh"  # in the SOURCE.md rebuild writes after a docs build


# --------------------------------------------------------------------------------------------
# How ESP-IDF releases flow through the ingests (issue 10's interface). Everything rebuild assumes
# about it is here, so a change there is one edit here: the ingests read the release from
# provenance (an XML folder's SOURCE.md, a checkout's `git describe`), never from a flag; chunk
# files are per release and chip; dedup_chunks.py merges across chips and releases alike.


def idf_chunk_file(chunks: Path, release: str, chip: str) -> Path:
    return chunks / f"chunks_{release}_{chip}.jsonl"


def src_chunk_file(chunks: Path, release: str) -> Path:
    return chunks / f"src_chunks_{release}.jsonl"


def ingest_idf_argv(xml_dir: Path, chip: str, checkout: Path, out: Path) -> list[str]:
    """Both provenance sources agree (the XML folder's SOURCE.md, the release checkout, which
    sources.py verified); the checkout also lets the ingest check the pages' links against it."""
    argv = [PY, str(REPO / "ingest_sphinx_xml.py"), str(xml_dir), "--chip", chip, "--out-path", str(out)]
    return [*argv, "--idf-path", str(checkout)]


def ingest_src_argv(checkout: Path, out: Path) -> list[str]:
    return [PY, str(REPO / "ingest_source.py"), "--idf-path", str(checkout), "--out-path", str(out)]


def dedup_argv(inputs: Sequence[Path], out: Path) -> list[str]:
    return [PY, str(REPO / "dedup_chunks.py"), *map(str, inputs), "--out-path", str(out)]


def embed_argv(
    chunks: Path, doc_type: str, source_repo: Path, db: str, model: str | None = None
) -> list[str]:
    """``source_repo`` must be one of the builds the rows name; for idf and src any release's
    checkout is (rebuild passes the first). ``model``: embed_and_store's --model (None: its default)."""
    return [
        PY,
        str(REPO / "embed_and_store.py"),
        str(chunks),
        "--doc-type",
        doc_type,
        "--source-repo",
        str(source_repo),
        "--db",
        db,
        *(["--model", model] if model else []),
    ]


# --------------------------------------------------------------------------------------------
# Finding an existing XML build


@dataclass(frozen=True)
class XmlSource:
    """Where a chip's XML comes from: reused as is, copied or unpacked, or built."""

    kind: Literal["folder", "copy", "archive", "build", "built"]  # built: by an earlier rebuild
    path: Path
    evidence: str  # how we know it is the pinned commit


def count_pages(xml_dir: Path) -> int:
    """Sphinx pages (root element <document>) under ``xml_dir``; doxygen's XML shares the tree."""
    pages = 0
    for path in xml_dir.rglob("*.xml"):
        with path.open("rb") as handle:
            if PAGE_ROOT.search(handle.read(4096)):
                pages += 1
    return pages


def matches_release(revision: str, release: Release) -> bool:
    """A SOURCE.md commit or a link revision (abbreviated commit, or the tag) names this release."""
    if revision in (release.describe, release.name):
        return True
    return (
        len(revision) >= 7
        and re.fullmatch(r"[0-9a-f]+", revision) is not None
        and release.commit.startswith(revision)
    )


def _link_revision(texts: Iterator[bytes]) -> str | None:
    seen: Counter[str] = Counter()
    for text in texts:
        seen.update(IDF_LINK.findall(text.decode("utf-8", "replace")))
        if sum(seen.values()) >= 50:
            break
    return seen.most_common(1)[0][0] if seen else None


def folder_revision(folder: Path) -> tuple[str | None, str]:
    """(revision, how it was read) for an XML folder: its SOURCE.md, else its pages' GitHub links."""
    note = folder / "SOURCE.md"
    if note.is_file():
        match = SOURCE_COMMIT.search(note.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1), "SOURCE.md"
    files = (path.read_bytes() for path in sorted(folder.rglob("*.xml"))[:LINK_SAMPLE_FILES])
    return _link_revision(files), "page links"


def archive_revision(archive: Path, chip: str) -> tuple[str | None, str]:
    """The same for a ``<chip>.tar.xz`` archive, reading members until one answers."""

    def members() -> Iterator[bytes]:
        with tarfile.open(archive, "r|*") as tar:
            for count, member in enumerate(tar):
                if count > 4 * LINK_SAMPLE_FILES:
                    return
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is None:
                    continue
                data = handle.read()
                if member.name.rstrip("/").endswith(f"{chip}/SOURCE.md"):
                    match = SOURCE_COMMIT.search(data.decode("utf-8", "replace"))
                    if match:
                        yield f"github.com/espressif/esp-idf/blob/{match.group(1)}/".encode()
                        return
                if member.name.endswith(".xml"):
                    yield data

    try:
        return _link_revision(members()), "archive page links"
    except (tarfile.TarError, OSError, EOFError) as error:
        return None, f"unreadable archive ({error})"


def find_xml(
    release: Release, tree: Tree, chip: str, roots: Sequence[Path], min_pages: int = MIN_PAGES
) -> tuple[XmlSource, list[str]]:
    """The first existing XML build of (release, chip) that provably is the pinned commit, else a build.

    Looks in each root for <chip>/, <chip>.tar.xz and the same under <release>/ or <describe>/, then
    at the checkout's own build output; candidates of another commit are reported, never used.
    """
    rejected: list[str] = []
    candidates: list[Path] = []
    for root in roots:
        for sub in dict.fromkeys(["", release.name, release.describe]):
            base = root / sub if sub else root
            candidates += [base / chip, base / f"{chip}.tar.xz"]
    built = tree.path / "docs" / "_build" / "en" / chip / "xml"
    if tree.ready:
        candidates.append(built)
    for path in candidates:
        if path.is_dir():
            revision, how = folder_revision(path)
        elif path.is_file():
            revision, how = archive_revision(path, chip)
        else:
            continue
        if revision is None:
            rejected.append(f"{path}: cannot tell which ESP-IDF commit it is ({how}); add a SOURCE.md")
        elif not matches_release(revision, release):
            rejected.append(
                f"{path}: from {revision[:12]} ({how}), not {release.name} ({release.commit[:12]})"
            )
        elif path.is_file():
            return XmlSource("archive", path, f"{how}: {revision[:12]}"), rejected
        elif path == built and (pages := count_pages(path)) < min_pages:
            rejected.append(f"{path}: an unfinished build ({pages} pages)")
        elif path == built and how == "SOURCE.md" and BUILT_MARK in (path / "SOURCE.md").read_text():
            return XmlSource("built", path, f"{how}: {revision[:12]}"), rejected
        else:
            kind: Literal["folder", "copy"] = "folder" if how == "SOURCE.md" else "copy"
            return XmlSource(kind, path, f"{how}: {revision[:12]}"), rejected
    return XmlSource("build", built, "built from the checkout"), rejected


def write_source_note(xml_dir: Path, chip: str, release: Release, idf_url: str, evidence: str) -> None:
    """The provenance note the ingests read (the same lines as ../shared/corpus builds carry)."""
    (xml_dir / "SOURCE.md").write_text(
        f"# ESP-IDF documentation build (data)\n\n"
        f"The ESP-IDF documentation for {chip}, built to docutils XML with esp-docs, English.\n\n"
        f"- Upstream: {idf_url}\n"
        f"- Version: {release.describe}\n"
        f"- Commit: {release.commit}\n"
        f"- Provenance: {evidence}; recorded by rebuild.py\n",
        encoding="utf-8",
    )


def copy_xml(source: XmlSource, chip: str, dest: Path) -> None:
    """Unpack or copy a reused build into ``dest`` whole: a half-copied folder is never ``dest``."""
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    if source.kind == "archive":
        with tarfile.open(source.path, "r:*") as tar:
            members = [m for m in tar.getmembers() if m.name.split("/", 1)[0] == chip]
            if not members:
                raise StageFailed(f"{source.path} holds no {chip}/ folder")
            for member in tqdm(members, desc=f"unpack {chip}", unit="file", leave=False):
                tar.extract(member, staging, filter="data")
    else:
        shutil.copytree(source.path, staging / chip)
    shutil.rmtree(dest, ignore_errors=True)
    (staging / chip).replace(dest)
    shutil.rmtree(staging)


# --------------------------------------------------------------------------------------------
# Docs builds


def docs_tooling_argv(release: Release) -> list[str]:
    """build_idf_docs.sh's options for the docs tooling sources.yaml pins for ``release``."""
    tooling = release.docs_tooling
    if tooling is None:
        return []
    return ["--python", tooling.python, "--docs-packages", " ".join(tooling.packages)]


class DocsBatch:
    """One build_idf_docs.sh run for all the chips of a release that need a build.

    The script keeps one Python environment per docs tooling set and sizes its own parallelism to the
    machine's cores and memory (~1.7 GB per build), so each release is one run of it, and two
    releases never build at once.
    """

    _one_release_at_a_time = threading.Lock()

    def __init__(self, release: Release, tree: Tree, work: Path, jobs: int | None, min_pages: int) -> None:
        self.release = release
        self.tree = tree
        self.work = work / "idf-docs" / release.name
        self.log = work / "logs" / f"docs-{release.name}.log"
        self.jobs = jobs
        self.min_pages = min_pages
        self.chips: list[str] = []
        self._lock = threading.Lock()
        self._outcome: CommandResult | None = None

    def run(self, chip: str) -> tuple[int, str]:
        """Build every chip in ``chips`` once, whichever chip's stage asks first; then the exit
        status and the script's last line about ``chip`` (or its error)."""
        with self._lock:
            if self._outcome is None:
                argv = ["bash", str(DOCS_BUILDER), "--work-dir", str(self.work), "--stub-missing-submodules"]
                argv += ["--min-pages", str(self.min_pages), *(["-j", str(self.jobs)] if self.jobs else [])]
                argv += docs_tooling_argv(self.release)
                with self._one_release_at_a_time:
                    self._outcome = run_command(
                        [*argv, *self.chips],
                        self.log,
                        env={**os.environ, "IDF_PATH": str(self.tree.path)},
                        prefix=f"[docs/{self.release.name}] ",
                    )
            about_chip = [line for line in self._outcome.stdout if line.startswith(f"{chip}:")]
            return self._outcome.returncode, last_line(about_chip) or failure_line(self._outcome)


# --------------------------------------------------------------------------------------------
# The pipeline


@dataclass
class Settings:
    work: Path
    db: str
    xml_roots: list[Path]
    chips: ChipSelection
    queries: Path | None  # the dev questions eval scores; None: no eval stage
    docs_jobs: int | None
    min_pages: int
    model: str | None = None


def jsonl_rows(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def command_stage_action(
    argv: list[str], log: Path, count: Callable[[], str] = lambda: ""
) -> Callable[[], Outcome]:
    """Run one child; its last stdout line is the summary, ``count`` what it made."""

    def action() -> Outcome:
        done = run_command(argv, log)
        if done.returncode != 0:
            raise StageFailed(f"exit {done.returncode}: {failure_line(done)} (log: {log})")
        return Outcome(last_line(done.stdout), count())

    return action


def _store_rows(db: str, doc_type: str) -> list[dict[str, object]]:
    """One doc_type's row keys in the store (none when there is no table).

    Read from the table as written, not through ``open_store``: the server's checks refuse a store
    that another corpus's embed is still migrating, which says nothing of this corpus's rows."""
    import lancedb

    from embed_and_store import ROW_KEY
    from store import TABLE_NAME

    if "://" not in db and not Path(db).is_dir():
        return []  # connecting would create the folder
    try:
        table = lancedb.connect(db).open_table(TABLE_NAME)
    except (ValueError, FileNotFoundError):
        return []
    return table.search().where(f"doc_type = '{doc_type}'").select(list(ROW_KEY)).limit(None).to_list()


def store_digest(db: str, doc_type: str) -> str | None:
    """Fingerprint of one doc_type's rows in the store, None when it has none: an embed's output."""
    from embed_and_store import row_key

    rows = _store_rows(db, doc_type)
    if not rows:
        return None
    return text_digest("\n".join(sorted(json.dumps(row_key(row)) for row in rows)))


def docs_stage(
    release: Release,
    tree: Tree,
    chip: str,
    url: str,
    settings: Settings,
    batch: DocsBatch,
    source_digest: Callable[[Path], str | None],
) -> tuple[Stage, Path, list[str]]:
    """The stage that provides (release, chip)'s XML, the folder it provides, and rejected candidates."""
    source, rejected = find_xml(release, tree, chip, settings.xml_roots, settings.min_pages)
    name = f"docs/{release.name}/{chip}"
    # A build is keyed on the commit alone: later runs adopt its output (kind "built", same key),
    # and an edit to build_idf_docs.sh does not rebuild 40-minute chips (delete a chip's XML to).
    kind = "build" if source.kind == "built" else source.kind
    params = {"release": release.name, "commit": release.commit, "chip": chip, "kind": kind}

    def check_pages(out: Path, what: str) -> int:
        pages = count_pages(out) if out.is_dir() else 0
        if pages < settings.min_pages:
            raise StageFailed(f"{what}: {pages} pages (minimum {settings.min_pages})")
        return pages

    if source.kind in ("folder", "built"):
        out = source.path

        def reuse() -> Outcome:
            pages = check_pages(out, str(out))
            return Outcome(f"reused {out} ({source.evidence})", f"{pages} pages")

        inputs = {"xml": lambda: source_digest(out)} if source.kind == "folder" else {}
        stage = Stage(name, reuse, f"reuse {out}", params=params, inputs=inputs)
    elif source.kind in ("copy", "archive"):
        out = settings.work / "xml" / release.name / chip
        verb = "unpack" if source.kind == "archive" else "copy"

        def unpack() -> Outcome:
            copy_xml(source, chip, out)
            write_source_note(out, chip, release, url, f"{source.path} ({source.evidence})")
            pages = check_pages(out, str(source.path))
            return Outcome(f"{verb} of {source.path} ({source.evidence})", f"{pages} pages")

        fingerprint = file_digest if source.kind == "archive" else source_digest
        inputs = {"xml": lambda: fingerprint(source.path)}
        stage = Stage(name, unpack, f"{verb} {source.path}", params=params, inputs=inputs)
    else:
        out = source.path

        def build() -> Outcome:
            if tree.missing_submodules:
                sub = tree.missing_submodules[0]
                raise StageFailed(
                    f"the build needs submodule {sub.path} at {sub.commit[:12]} from {sub.url}: run "
                    f"`just sources` online, or git -C {tree.path} submodule update --init {sub.path}"
                )
            returncode, tail = batch.run(chip)
            log = batch.work / "logs" / f"{chip}.log"
            pages = check_pages(
                out,
                f"build_idf_docs.sh exit {returncode}: {tail} (log: {log if log.is_file() else batch.log})",
            )
            write_source_note(out, chip, release, url, f"{BUILT_MARK} in {tree.path}")
            return Outcome(f"built {out}", f"{pages} pages")

        plan = f"build with build_idf_docs.sh in {tree.path} (~40 min per chip)"
        stage = Stage(name, build, plan, params=params, background=True)
    stage.outputs = {"xml": lambda: tree_digest(out)}
    return stage, out, rejected


def pipeline(sources: Sources, settings: Settings) -> tuple[list[Stage], dict[str, DocsBatch], list[str]]:
    """Every stage in priority order, the docs batch per release, and notes for the user."""
    chunks = settings.work / "chunks"
    db = settings.db
    stages: list[Stage] = []
    batches: dict[str, DocsBatch] = {}
    notes: list[str] = []
    # source trees and reused XML do not change during a run: hash each once
    source_digest = cache(tree_digest)

    def log(stage: str) -> Path:
        return settings.work / "logs" / f"{stage.replace('/', '-')}.log"

    def command_stage(
        name: str, argv: list[str], plan: str, count: Callable[[], str] = lambda: "", **fields: Any
    ) -> Stage:
        """A stage that runs one command; the command line (bar the interpreter) is in its key."""
        params = {**fields.pop("params", {}), "command": " ".join(argv[1:])}
        return Stage(name, command_stage_action(argv, log(name), count), plan, params=params, **fields)

    def chunk_stage(name: str, argv: list[str], out: Path, plan: str, **fields: Any) -> Stage:
        """A stage whose output is one chunk file."""

        def count() -> str:
            return f"{jsonl_rows(out):,} chunks"

        return command_stage(name, argv, plan, count, outputs={"chunks": lambda: file_digest(out)}, **fields)

    idf_parts: list[tuple[str, Path]] = []
    src_parts: list[tuple[str, Path]] = []
    for name, tree in sources.releases.items():
        release = sources.pins.releases[name]
        batches[name] = DocsBatch(release, tree, settings.work, settings.docs_jobs, settings.min_pages)
        for chip in release.targets:
            if not settings.chips.wants(name, chip):
                continue
            docs, xml_dir, rejected = docs_stage(
                release, tree, chip, sources.pins.idf_url, settings, batches[name], source_digest
            )
            if docs.background:  # say why it must be built
                notes += [f"{docs.name}: not used: {line}" for line in rejected]
            out = idf_chunk_file(chunks, name, chip)
            ingest = chunk_stage(
                f"ingest-idf/{name}/{chip}",
                ingest_idf_argv(xml_dir, chip, tree.path, out),
                out,
                f"ingest {xml_dir}",
                deps=(docs.name,),
                params={"release": name, "commit": release.commit, "chip": chip},
                code=code_closure(REPO / "ingest_sphinx_xml.py"),
            )
            stages += [docs, ingest]
            idf_parts.append((ingest.name, out))
        out = src_chunk_file(chunks, name)
        soc = tree.path / "components" / "soc"
        ingest = chunk_stage(
            f"ingest-src/{name}",
            ingest_src_argv(tree.path, out),
            out,
            f"ingest headers of {tree.path}",
            params={"release": name, "commit": release.commit, "describe": release.describe},
            # the headers, and the docs sources the capability glosses take acronym spellings from
            inputs={
                "soc": lambda soc=soc: source_digest(soc),
                "docs": lambda docs=tree.path / DOCS_SOURCES: source_digest(docs),
            },
            code=code_closure(REPO / "ingest_source.py"),
        )
        stages.append(ingest)
        src_parts.append((ingest.name, out))

    trm = sources.trm
    trm_out = chunks / "trm_chunks.jsonl"
    trm_argv = [PY, str(REPO / "ingest_trm.py"), "--trm-path", str(trm.path), "--out-path", str(trm_out)]
    stages.append(
        chunk_stage(
            "ingest-trm",
            trm_argv,
            trm_out,
            f"ingest {trm.path}",
            params={"commit": trm.commit},
            inputs={"trm": lambda: source_digest(trm.path)},
            code=code_closure(REPO / "ingest_trm.py"),
        )
    )
    embeds = [("trm", trm_out, "ingest-trm", trm.path)]
    first_checkout = next(iter(sources.releases.values())).path
    for doc_type, parts in (("src", src_parts), ("idf", idf_parts)):
        if not parts:
            continue
        out = chunks / f"{doc_type}_chunks.jsonl"
        inputs = [path for _, path in parts]
        stages.append(
            chunk_stage(
                f"dedup-{doc_type}",
                dedup_argv(inputs, out),
                out,
                f"merge {len(parts)} chunk files",
                deps=tuple(stage for stage, _ in parts),
                code=code_closure(REPO / "dedup_chunks.py"),
            )
        )
        embeds.append((doc_type, out, f"dedup-{doc_type}", first_checkout))

    for doc_type, chunk_file, dep, source_repo in embeds:
        stages.append(
            command_stage(
                f"embed-{doc_type}",
                embed_argv(chunk_file, doc_type, source_repo, db, settings.model),
                f"embed {chunk_file.name} into {db}",
                lambda doc_type=doc_type: f"{len(_store_rows(db, doc_type)):,} rows",
                deps=(dep,),
                code=code_closure(REPO / "embed_and_store.py"),
                outputs={"rows": lambda doc_type=doc_type: store_digest(db, doc_type)},
            )
        )
    stages.append(
        command_stage(
            "validate",
            [PY, str(REPO / "validate_store.py"), "--db", db],
            f"validate {db}",
            deps=tuple(f"embed-{doc_type}" for doc_type, *_ in embeds),
            code=code_closure(REPO / "validate_store.py"),
        )
    )
    if settings.queries is not None:
        stages.append(eval_stage(settings, settings.queries, log("eval")))
    else:
        notes.append(
            f"eval: no dev questions given (--eval-queries FILE or ${QUERIES_ENV_VAR}), so no eval stage: "
            "the store is built and validated without retrieval figures"
        )
    # cheap stages first, so their failures show early; the embeds overlap the docs builds
    order = [
        "docs",
        "ingest-trm",
        "ingest-src",
        "ingest-idf",
        "dedup-src",
        "dedup-idf",
        "embed-trm",
        "embed-src",
    ]
    stages.sort(
        key=lambda s: order.index(s.name.split("/")[0]) if s.name.split("/")[0] in order else len(order)
    )
    return stages, batches, notes


def eval_stage(settings: Settings, queries: Path, log: Path) -> Stage:
    """Score the dev questions on the new store; the report is kept next to the chunks."""
    report = settings.work / "eval_dev.txt"

    argv = [PY, str(REPO / "eval_retrieval.py"), str(queries), "--db", settings.db]

    def evaluate() -> Outcome:
        done = run_command(argv, log)
        if done.returncode != 0:
            raise StageFailed(f"exit {done.returncode}: {failure_line(done)} (log: {log})")
        report.write_text("\n".join(done.stdout) + "\n", encoding="utf-8")
        return Outcome(last_line(done.stdout), f"report {report.name}")

    return Stage(
        "eval",
        evaluate,
        f"score {queries.name}",
        deps=("validate",),
        params={"command": " ".join(argv[1:])},
        inputs={"queries": lambda: file_digest(queries)},
        code=code_closure(REPO / "eval_retrieval.py"),
        outputs={"report": lambda: file_digest(report)},
    )


# --------------------------------------------------------------------------------------------
# CLI


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Build the store from the pinned sources, skipping every stage that is up to date.",
        epilog="stages (R a release, C a chip): docs/R/C, ingest-idf/R/C, dedup-idf, ingest-trm, "
        "ingest-src/R, dedup-src, embed-trm, embed-src, embed-idf, validate, eval",
    )
    parser.add_argument(
        "stages", nargs="*", help="run only these stages and what they need (names, prefixes or globs)"
    )
    add_source_arguments(parser)
    parser.add_argument(
        "--xml",
        type=Path,
        action="append",
        default=[],
        help="a folder of existing XML builds (<chip>/ or <chip>.tar.xz, also under <release>/) to reuse; "
        "repeatable; also $IDF_XML_PATH",
    )
    parser.add_argument(
        "--chips",
        help="comma-separated docs targets to include (default: every pinned one; fewer narrows the store); "
        "RELEASE:CHIP names one release's chip, and then each release gets only the chips named for it",
    )
    parser.add_argument(
        "--work-dir", type=Path, default=DEFAULT_WORK, help="chunks, stamps and logs (default build/rebuild)"
    )
    parser.add_argument("--db", help=f"the store (default ${DB_ENV_VAR} or ./{DEFAULT_DB})")
    parser.add_argument(
        "--eval-queries",
        type=Path,
        help=f"dev questions (JSONL) the eval stage scores the new store on (default ${QUERIES_ENV_VAR}; "
        "without either, no eval stage)",
    )
    parser.add_argument(
        "--docs-jobs",
        type=int,
        help="chip builds at once (default: build_idf_docs.sh's, from cores and memory)",
    )
    parser.add_argument(
        "--min-pages", type=int, default=MIN_PAGES, help=f"pages a chip's XML must hold (default {MIN_PAGES})"
    )
    parser.add_argument(
        "--model",
        choices=MODEL_IDS,
        help="embedding model of a new store (default: embedder.py's); all-MiniLM-L6-v2-int8 embeds "
        "~1.4x faster at the same dev-query scores (docs/embedding.md)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    return parser.parse_args(argv)


def settings_from_args(args: argparse.Namespace, sources: Sources) -> Settings:
    chips = parse_chip_selection(args.chips, sources.pins)
    roots = list(args.xml) + ([Path(os.environ["IDF_XML_PATH"])] if os.environ.get("IDF_XML_PATH") else [])
    missing = [str(root) for root in roots if not root.is_dir()]
    if missing:
        raise SourcesError(f"--xml / IDF_XML_PATH: not a folder: {', '.join(missing)}")
    if args.docs_jobs is not None and args.docs_jobs < 1:
        raise SourcesError(f"--docs-jobs must be a positive number, got {args.docs_jobs}")
    if args.min_pages < 1:
        raise SourcesError(f"--min-pages must be a positive number, got {args.min_pages}")
    queries = args.eval_queries or (
        Path(os.environ[QUERIES_ENV_VAR]) if os.environ.get(QUERIES_ENV_VAR) else None
    )
    if queries is not None and not queries.is_file():
        # asked for figures: a missing file is refused now, not found missing after the embed
        raise SourcesError(f"--eval-queries / ${QUERIES_ENV_VAR}: no file at {queries}")
    db = args.db or os.environ.get(DB_ENV_VAR) or DEFAULT_DB
    return Settings(
        work=args.work_dir.resolve(),
        db=db if "://" in db else str(Path(db).resolve()),
        xml_roots=roots,
        chips=chips,
        queries=queries,
        docs_jobs=args.docs_jobs,
        min_pages=args.min_pages,
        model=args.model,
    )


@contextmanager
def work_dir_lock(work: Path) -> Iterator[None]:
    """One rebuild per work dir: two would overwrite each other's chunks and stamps."""
    work.mkdir(parents=True, exist_ok=True)
    with (work / ".lock").open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            handle.seek(0)
            raise SourcesError(
                f"another rebuild (pid {handle.read().strip() or '?'}) is using {work}"
            ) from error
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        sources, skipped = resolve_from_args(args, "plan" if args.dry_run else "fetch")
        settings = settings_from_args(args, sources)
        print(format_sources(sources, skipped))
        stages, batches, notes = pipeline(sources, settings)
        runner = Runner(stages, settings.work / "stamps")
        names = runner.select(args.stages)
    except (SourcesError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}")
    if args.dry_run:
        plan = runner.plan(names)
        print(format_table(plan, width=140))
        runs = sum(row.status == "run" for row in plan)
        print(f"plan: {runs} of {len(plan)} stages would run; nothing was changed (--dry-run)")
        return 0
    try:
        with work_dir_lock(settings.work):
            plan = runner.plan(names)
            for row in plan:
                if runner.stages[row.stage].background and row.status == "run":
                    _, release, chip = row.stage.split("/")
                    batches[release].chips.append(chip)
            runs = sum(row.status == "run" for row in plan)
            print(f"rebuild: {runs} of {len(plan)} stages to run; work dir {settings.work}")
            results = runner.run(names)
    except SourcesError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        stop_children()
        print("\nrebuild: interrupted; finished stages keep their stamps, a re-run resumes", file=sys.stderr)
        return 130
    print()
    print(format_table(results))
    failed = [r.stage for r in results if r.status in ("failed", "blocked")]
    ran = sum(r.status == "ran" for r in results)
    elapsed = format_seconds(time.monotonic() - started)
    if failed:
        print(f"rebuild: FAILED in {elapsed}: {', '.join(failed)}; a re-run resumes from there")
        return 1
    print(f"rebuild: {ran} stages ran, {len(results) - ran} up to date, in {elapsed}; store {settings.db}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
