"""Get the exact upstream trees a store is built from (sources.yaml), and prove they are those trees.

A store is only reproducible if the commits it came from are written down and the trees used are
checked against them. This fetches each pinned tree into a cache folder (a shallow fetch of one
commit where that is enough; a blobless clone for ESP-IDF, whose `git describe`, from which the
ingests read the release, needs its history and tags), or, on a machine without network, uses the
checkouts the environment names: TRM_PATH (a git checkout, or a plain copy whose SOURCE.md has a
`Commit:` line), IDF_PATH and IDF_PATHS (several ESP-IDF checkouts, one per release, separated like
PATH). Each checkout is matched to the release whose commit it is at; then its `git describe`, the
docs targets in its docs/conf_common.py and the submodules the docs build needs are verified.

    uv run sources.py                 # fetch what is missing into build/sources, verify everything
    uv run sources.py --offline       # only verify existing checkouts and the cache
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from chip_vocab import chip_ids
from provenance import UNKNOWN, source_provenance

REPO = Path(__file__).resolve().parent
DEFAULT_SOURCES = REPO / "sources.yaml"
CACHE_ENV_VAR = "ESP32_DOCS_SOURCES"
DEFAULT_CACHE = REPO / "build" / "sources"
IDF_PATHS_ENV_VAR = "IDF_PATHS"
GIT_TIMEOUT_SECONDS = 3600  # a first blobless clone of ESP-IDF is large
COMMIT = re.compile(r"^[0-9a-f]{40}$")
RELEASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PIP_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?([<>=!~]=?[A-Za-z0-9.*+]+,?)*$"
)
PYTHON_NAME = re.compile(r"^[A-Za-z0-9._/-]+$")
IDF_TARGETS = re.compile(r"^idf_targets\s*=\s*\[([^\]]*)\]", re.MULTILINE)
GIT_MISSING = (
    "git is not installed or not on PATH; install it (Debian/Ubuntu: sudo apt-get install git; "
    "Fedora: sudo dnf install git; macOS: xcode-select --install or brew install git)"
)

Mode = Literal["fetch", "offline", "plan"]


class SourcesError(Exception):
    """A pin, a checkout or a fetch is not what the store needs; the message says what to do."""


class GitMissingError(SourcesError):
    """git itself is absent: no tree can be checked, so this is never read as "not a checkout"."""


# --------------------------------------------------------------------------------------------
# Pins


@dataclass(frozen=True)
class Submodule:
    path: str
    url: str
    commit: str


@dataclass(frozen=True)
class DocsTooling:
    """What build_idf_docs.sh installs for a release's docs: older releases pin older esp-docs."""

    python: str
    packages: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    name: str
    commit: str
    describe: str
    targets: tuple[str, ...]
    submodules: tuple[Submodule, ...] = ()
    docs_tooling: DocsTooling | None = None


@dataclass(frozen=True)
class Pins:
    file: Path
    trm_url: str
    trm_commit: str
    idf_url: str
    releases: dict[str, Release]


def _field(raw: object, key: str, where: str, file: Path) -> object:
    if not isinstance(raw, dict) or key not in raw:
        raise SourcesError(f"{file}: {where} has no '{key}'")
    return raw[key]


def _commit(raw: object, key: str, where: str, file: Path) -> str:
    value = str(_field(raw, key, where, file))
    if not COMMIT.match(value):
        raise SourcesError(f"{file}: {where}.{key} must be a full 40-hex commit, got {value!r}")
    return value


def _docs_tooling(raw: object, where: str, file: Path) -> DocsTooling | None:
    """A release's docs tooling; every value later reaches a shell and pip, so each is checked."""
    if raw is None:
        return None
    python = str(_field(raw, "python", where, file))
    packages = _field(raw, "packages", where, file)
    if not PYTHON_NAME.match(python):
        raise SourcesError(
            f"{file}: {where}.python must name an interpreter such as python3.11, got {python!r}"
        )
    if not isinstance(packages, list) or not packages:
        raise SourcesError(f"{file}: {where}.packages must be a non-empty list of pip requirements")
    bad = [str(p) for p in packages if not PIP_REQUIREMENT.match(str(p))]
    if bad:
        raise SourcesError(
            f"{file}: {where}.packages: {', '.join(map(repr, bad))} not a pip requirement such as "
            "'esp-docs~=1.1.0' or 'Pillow<10'"
        )
    return DocsTooling(python=python, packages=tuple(str(p) for p in packages))


def load_pins(file: Path = DEFAULT_SOURCES) -> Pins:
    """Read and check sources.yaml: full commits, known chips, release names usable in file names."""
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise SourcesError(f"cannot read the pinned sources: {error}") from error
    except yaml.YAMLError as error:
        raise SourcesError(f"{file} is not valid YAML: {error}") from error
    trm = _field(raw, "trm", "the file", file)
    idf = _field(raw, "idf", "the file", file)
    raw_releases = _field(idf, "releases", "idf", file)
    if not isinstance(raw_releases, dict) or not raw_releases:
        raise SourcesError(f"{file}: idf.releases must map release names to their pins")
    valid_chips = chip_ids()
    releases: dict[str, Release] = {}
    for name, spec in raw_releases.items():
        where = f"idf.releases.{name}"
        if not RELEASE_NAME.match(str(name)):
            raise SourcesError(
                f"{file}: release name {name!r} must be letters, digits, '.', '_' or '-' (it names files)"
            )
        targets = _field(spec, "targets", where, file)
        if not isinstance(targets, list) or not targets:
            raise SourcesError(f"{file}: {where}.targets must be a non-empty list of chips")
        unknown = [t for t in targets if t not in valid_chips]
        if unknown:
            raise SourcesError(
                f"{file}: {where}.targets has unknown chip(s) {', '.join(map(str, unknown))}; "
                f"valid: {', '.join(valid_chips)}"
            )
        submodules = []
        for index, sub in enumerate(spec.get("submodules") or []):
            sub_where = f"{where}.submodules[{index}]"
            submodules.append(
                Submodule(
                    path=str(_field(sub, "path", sub_where, file)).strip("/"),
                    url=str(_field(sub, "url", sub_where, file)),
                    commit=_commit(sub, "commit", sub_where, file),
                )
            )
        releases[str(name)] = Release(
            name=str(name),
            commit=_commit(spec, "commit", where, file),
            describe=str(_field(spec, "describe", where, file)),
            targets=tuple(targets),
            submodules=tuple(submodules),
            docs_tooling=_docs_tooling(spec.get("docs_tooling"), f"{where}.docs_tooling", file),
        )
    return Pins(
        file=file,
        trm_url=str(_field(trm, "url", "trm", file)),
        trm_commit=_commit(trm, "commit", "trm", file),
        idf_url=str(_field(idf, "url", "idf", file)),
        releases=releases,
    )


# --------------------------------------------------------------------------------------------
# git


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git and return its stdout; a failure raises SourcesError quoting git's own complaint."""
    command = ["git", *(["-C", str(cwd)] if cwd else []), *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=GIT_TIMEOUT_SECONDS, check=False
        )
    except FileNotFoundError as error:
        raise GitMissingError(GIT_MISSING) from error
    except subprocess.TimeoutExpired as error:
        raise SourcesError(f"`{' '.join(command)}` took over {GIT_TIMEOUT_SECONDS}s") from error
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        first_error = next((line for line in lines if line.startswith(("fatal:", "error:"))), None)
        complaint = first_error or (lines[-1] if lines else "no output")
        raise SourcesError(f"`{' '.join(command)}` failed: {complaint}")
    return done.stdout.rstrip()


def _head(tree: Path) -> str | None:
    """The commit a git work tree is at, or None when ``tree`` is not the top of one."""
    try:
        top = git("rev-parse", "--show-toplevel", cwd=tree)
        if Path(top).resolve() != tree.resolve():
            return None
        return git("rev-parse", "HEAD", cwd=tree)
    except GitMissingError:
        raise
    except SourcesError:
        return None


def fetch_commit(url: str, commit: str, dest: Path) -> None:
    """Make ``dest`` a git tree at exactly ``commit``, fetching that one commit (depth 1) from ``url``."""
    dest.mkdir(parents=True, exist_ok=True)
    if _head(dest) is None:
        git("init", "-q", cwd=dest)
    try:
        git("fetch", "-q", "--depth", "1", url, commit, cwd=dest)
    except SourcesError as error:
        raise SourcesError(f"cannot fetch pinned commit {commit} from {url}: {error}") from error
    git("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit, cwd=dest)


def _has_commit(repo: Path, commit: str) -> bool:
    try:
        git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo)
    except GitMissingError:
        raise
    except SourcesError:
        return False
    return True


def fetch_idf_release(url: str, release: Release, cache: Path) -> Path:
    """A work tree of ``release`` from one blobless bare clone shared by every release.

    Blobless keeps every commit and tag (so `git describe` gives the release) while downloading
    file contents only for the trees checked out.
    """
    bare = cache / "esp-idf.git"
    if not bare.exists():
        git("clone", "-q", "--bare", "--filter=blob:none", url, str(bare))
    if not _has_commit(bare, release.commit):
        git("fetch", "-q", "origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", cwd=bare)
    if not _has_commit(bare, release.commit):
        raise SourcesError(
            f"pinned commit {release.commit} of ESP-IDF {release.name} is not in {url} "
            "(fetched every branch and tag); check idf.releases in sources.yaml"
        )
    tree = cache / f"esp-idf-{release.name}"
    if _head(tree) is None:
        if tree.exists() and any(tree.iterdir()):
            raise SourcesError(f"{tree} exists but is not a git work tree; remove it and re-run")
        git("worktree", "prune", cwd=bare)
        git("worktree", "add", "-q", "--detach", str(tree), release.commit, cwd=bare)
    else:
        git("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", release.commit, cwd=tree)
    return tree


# --------------------------------------------------------------------------------------------
# Resolution


@dataclass
class Tree:
    """One verified source tree, or (in plan mode) the fetch that would make it."""

    label: str
    path: Path
    commit: str
    version: str
    origin: str
    notes: list[str] = field(default_factory=list)
    missing_submodules: list[Submodule] = field(default_factory=list)
    pending: str = ""  # plan mode: what a fetch would do; the tree is not there yet
    changed: list[str] = field(default_factory=list)  # `git status` lines of tracked files that differ

    @property
    def ready(self) -> bool:
        return not self.pending


@dataclass
class Sources:
    pins: Pins
    trm: Tree
    releases: dict[str, Tree]


def doc_targets(checkout: Path) -> list[str]:
    """The docs targets an ESP-IDF checkout declares (docs/conf_common.py ``idf_targets``)."""
    conf = checkout / "docs" / "conf_common.py"
    try:
        match = IDF_TARGETS.search(conf.read_text(encoding="utf-8"))
    except OSError as error:
        raise SourcesError(f"{checkout} is not an ESP-IDF checkout: cannot read {conf}") from error
    if not match:
        raise SourcesError(f"cannot find idf_targets in {conf}")
    return [t.strip().strip("'\"") for t in match.group(1).split(",") if t.strip()]


def hide_absent_blobs(tree: Path) -> list[str]:
    """Mark skip-worktree the files a checkout lacks because their blobs are not in the object store.

    A clone of a mirror that lacks some large blobs (test images, flash dumps) checks out without
    them; git then reports the files deleted and `git describe --dirty` a release nobody built.
    Only a file that is missing from the work tree *and* whose content exists nowhere locally is
    marked, so nothing that could be restored or that someone edited is hidden.
    """
    deleted = [path for path in git("ls-files", "--deleted", "-z", cwd=tree).split("\0") if path]
    if not deleted:
        return []
    absent = []
    for line in git("ls-files", "-s", "-z", "--", *deleted, cwd=tree).split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        blob = meta.split()[1]
        done = subprocess.run(
            ["git", "-C", str(tree), "cat-file", "-e", blob],
            capture_output=True,
            env={**os.environ, "GIT_NO_LAZY_FETCH": "1"},
            check=False,
        )
        if done.returncode != 0:
            absent.append(path)
    if not absent:
        return []
    git("update-index", "--skip-worktree", "--", *absent, cwd=tree)
    sample = ", ".join(absent[:2]) + (", ..." if len(absent) > 2 else "")
    return [f"{len(absent)} file(s) whose contents the object store lacks marked skip-worktree ({sample})"]


def _tracked_changes(tree: Path) -> list[str]:
    """The `git status` lines of tracked files that differ from the tree's commit. Untracked files
    (a docs build's output, say) are left alone: they change neither what is built nor `git describe`."""
    return git("status", "--porcelain", "--untracked-files=no", cwd=tree).splitlines()


def _changes_sample(changed: Sequence[str]) -> str:
    return ", ".join(line.strip() for line in changed[:3]) + (", ..." if len(changed) > 3 else "")


def refuse_or_note_changes(trees: Sequence[Tree], allow_dirty: bool) -> None:
    """Refuse trees with local changes before anything is built, saying which files and what to do;
    with ``allow_dirty``, note them instead.

    Refused by default because a store built from such a tree fails only at its end: the ingests
    stamp each row with the tree's `git describe`, which says -dirty, while docs builds reused for
    that release are of the clean commit, and validate refuses a release built from two trees, after
    the whole embed (47 minutes in one such run). A local change is built only when asked for."""
    dirty = [tree for tree in trees if tree.changed]
    if not dirty:
        return
    if allow_dirty:
        for tree in dirty:
            tree.notes.append(
                f"{len(tree.changed)} tracked file(s) differ from the commit "
                f"({_changes_sample(tree.changed)}); built as they are (--allow-dirty): its rows record "
                "a -dirty build"
            )
        return
    lines = [
        f"{tree.label} at {tree.path}: {len(tree.changed)} tracked file(s) differ from its commit "
        f"{tree.commit[:12]} ({_changes_sample(tree.changed)})"
        for tree in dirty
    ]
    raise SourcesError(
        "source trees with local changes, refused before any stage runs:\n  "
        + "\n  ".join(lines)
        + "\nTheir rows would record a -dirty build beside docs builds of the clean commit, and validate "
        "refuses a release built from two trees (after the whole embed). Restore each tree "
        "(git -C PATH stash, or git -C PATH checkout -- .), name a clean checkout, or pass --allow-dirty "
        "to build the local changes deliberately."
    )


def _trm_tree(pins: Pins, trm_path: Path | None, cache: Path, mode: Mode) -> Tree:
    if trm_path is not None:
        if not trm_path.is_dir():
            raise SourcesError(f"TRM_PATH {trm_path} is not a folder")
        prov = source_provenance(trm_path)
        if prov.commit == UNKNOWN:
            raise SourcesError(
                f"TRM_PATH {trm_path} is neither a git checkout nor a copy whose SOURCE.md has a "
                "'Commit:' line; cannot tell which commit it is"
            )
        if prov.commit != pins.trm_commit:
            raise SourcesError(
                f"TRM_PATH {trm_path} is at {prov.commit}, but {pins.file.name} pins {pins.trm_commit}; "
                "check out the pinned commit or bump trm.commit"
            )
        if _head(trm_path) is None:
            notes = ["plain copy, commit from its SOURCE.md"]
            return Tree("trm", trm_path, prov.commit, prov.version, "TRM_PATH", notes)
        return Tree(
            "trm", trm_path, prov.commit, prov.version, "TRM_PATH", changed=_tracked_changes(trm_path)
        )
    dest = cache / "esp-technical-reference-manual-latex"
    if _head(dest) != pins.trm_commit:
        if mode == "plan":
            return Tree("trm", dest, pins.trm_commit, "", "cache", pending=f"fetch {pins.trm_url} (depth 1)")
        if mode == "offline":
            raise SourcesError(
                f"no TRM tree at {pins.trm_commit[:12]}: set TRM_PATH to a checkout of "
                f"{pins.trm_url} at that commit, or run without --offline to fetch it into {dest}"
            )
        fetch_commit(pins.trm_url, pins.trm_commit, dest)
    version = git("describe", "--tags", "--always", cwd=dest)
    return Tree("trm", dest, pins.trm_commit, version, "cache", changed=_tracked_changes(dest))


def _match_checkouts(pins: Pins, candidates: Iterable[tuple[Path, str]]) -> tuple[dict[str, Path], list[str]]:
    """Assign each given ESP-IDF checkout to the pinned release whose commit it is at."""
    by_commit = {release.commit: name for name, release in pins.releases.items()}
    found: dict[str, Path] = {}
    skipped: list[str] = []
    for path, origin in candidates:
        head = _head(path) if path.is_dir() else None
        if head is None:
            skipped.append(f"{origin} {path} is not the top of a git checkout")
        elif head not in by_commit:
            skipped.append(f"{origin} {path} is at {head[:12]}, which no release in {pins.file.name} pins")
        elif by_commit[head] in found:
            skipped.append(
                f"{origin} {path}: release {by_commit[head]} already uses {found[by_commit[head]]}"
            )
        else:
            found[by_commit[head]] = path
    return found, skipped


def _submodule_state(checkout: Path, release: Release, sub: Submodule) -> str | None:
    """None when the submodule is checked out at its pin; else why not. A wrong pin raises."""
    listed = git("ls-tree", release.commit, "--", sub.path, cwd=checkout).split()
    if len(listed) < 3 or listed[1] != "commit":
        raise SourcesError(f"ESP-IDF {release.name} has no submodule at {sub.path}; check sources.yaml")
    if listed[2] != sub.commit:
        raise SourcesError(
            f"sources.yaml pins {sub.path} at {sub.commit[:12]} but ESP-IDF {release.name} records "
            f"{listed[2][:12]} (`git ls-tree {release.commit[:12]} {sub.path}`); fix the pin"
        )
    head = _head(checkout / sub.path)
    if head == sub.commit:
        return None
    return "not checked out" if head is None else f"at {head[:12]}"


def _verify_release(tree: Tree, release: Release, mode: Mode) -> None:
    """Check describe, docs targets and submodules; fetch a missing submodule when allowed."""
    if tree.version != release.describe:
        raise SourcesError(
            f"{tree.path} describes itself as {tree.version!r}, sources.yaml expects {release.describe!r} "
            f"for {release.name}; a checkout without tags cannot tell the release (git -C {tree.path} "
            "fetch --tags), or the pin is stale"
        )
    declared = doc_targets(tree.path)
    if sorted(declared) != sorted(release.targets):
        raise SourcesError(
            f"ESP-IDF {release.name} docs/conf_common.py lists targets {', '.join(declared)}; "
            f"sources.yaml pins {', '.join(release.targets)}; make them the same"
        )
    for sub in release.submodules:
        state = _submodule_state(tree.path, release, sub)
        if state is None:
            continue
        if mode == "fetch" and state == "not checked out":
            fetch_commit(sub.url, sub.commit, tree.path / sub.path)
            tree.notes.append(f"fetched submodule {sub.path} at {sub.commit[:12]}")
            continue
        tree.missing_submodules.append(sub)
        tree.notes.append(
            f"submodule {sub.path} {state}, the docs build needs {sub.commit[:12]}: "
            f"git -C {tree.path} submodule update --init {sub.path}"
        )


def _release_tree(
    pins: Pins, release: Release, given: Path | None, skipped: list[str], cache: Path, mode: Mode
) -> Tree:
    label = f"idf {release.name}"
    if given is not None:
        path, origin = given, "checkout"
    else:
        path, origin = cache / f"esp-idf-{release.name}", "cache"
        if _head(path) != release.commit:
            if mode == "plan":
                return Tree(
                    label, path, release.commit, "", origin, pending=f"fetch {pins.idf_url} (blobless)"
                )
            if mode == "offline":
                tried = "".join(f"\n  not used: {line}" for line in skipped)
                raise SourcesError(
                    f"no checkout of ESP-IDF {release.name} ({release.commit[:12]}, {release.describe}): "
                    f"name one with --idf-path, IDF_PATH or {IDF_PATHS_ENV_VAR}, run without --offline "
                    f"to fetch it, or leave the release out (--releases){tried}"
                )
            path = fetch_idf_release(pins.idf_url, release, path.parent)
    head = _head(path)
    if head != release.commit:
        raise SourcesError(
            f"refusing {path} for ESP-IDF {release.name}: it is at {head or 'no commit'}, "
            f"{pins.file.name} pins {release.commit}; remove it and re-run to fetch the pinned tree"
        )
    hidden = hide_absent_blobs(path) if mode != "plan" else []  # a dry run changes nothing
    version = git("describe", "--tags", "--always", cwd=path)
    tree = Tree(label, path, release.commit, version, origin, hidden, changed=_tracked_changes(path))
    _verify_release(tree, release, mode)
    return tree


def resolve(
    pins: Pins,
    *,
    cache: Path,
    trm_path: Path | None,
    idf_paths: Sequence[tuple[Path, str]],
    releases: Sequence[str] | None = None,
    mode: Mode = "fetch",
    allow_dirty: bool = False,
) -> tuple[Sources, list[str]]:
    """Every pinned tree, verified; plus notes on given checkouts that were not used and why.

    ``idf_paths`` are (path, where it was named) pairs; ``mode`` "plan" fetches nothing and marks
    what it would fetch, "offline" fails where a fetch would be needed. A tree with local changes is
    refused unless ``allow_dirty`` (``refuse_or_note_changes``).
    """
    chosen = list(releases) if releases is not None else list(pins.releases)
    unknown = [name for name in chosen if name not in pins.releases]
    if unknown:
        raise SourcesError(
            f"unknown release(s) {', '.join(unknown)}; {pins.file.name} pins: {', '.join(pins.releases)}"
        )
    trm = _trm_tree(pins, trm_path, cache, mode)
    given, skipped = _match_checkouts(pins, idf_paths)
    trees = {
        name: _release_tree(pins, pins.releases[name], given.get(name), skipped, cache, mode)
        for name in chosen
    }
    refuse_or_note_changes([trm, *trees.values()], allow_dirty)
    return Sources(pins, trm, trees), skipped


@dataclass(frozen=True)
class ChipSelection:
    """Which (release, chip) docs a run includes: ``--chips esp32,v5.1.7:esp32s3``.

    A plain chip applies to every release; ``RELEASE:CHIP`` to that release only, and once any
    such item is given, a release gets exactly the chips named for it (none: its headers only),
    so one release can be added to a store without narrowing the others.
    """

    everywhere: frozenset[str] | None = None  # None: every pinned target
    per_release: dict[str, frozenset[str]] | None = None

    def wants(self, release: str, chip: str) -> bool:
        if chip in (self.everywhere or ()):
            return True
        if self.per_release is not None:
            return chip in self.per_release.get(release, frozenset())
        return self.everywhere is None


def parse_chip_selection(spec: str | None, pins: Pins) -> ChipSelection:
    """``--chips`` checked against the pins: every chip a docs target of its release (or of one)."""
    items = [item.strip() for item in (spec or "").split(",") if item.strip()]
    if not items:
        return ChipSelection()
    targets = {chip for release in pins.releases.values() for chip in release.targets}
    everywhere: set[str] = set()
    per_release: dict[str, set[str]] = {}
    for item in items:
        release, _, chip = item.rpartition(":")
        if not release:
            if chip not in targets:
                raise SourcesError(
                    f"--chips: {chip} not a pinned docs target; valid: {', '.join(sorted(targets))}"
                )
            everywhere.add(chip)
            continue
        if release not in pins.releases:
            raise SourcesError(
                f"--chips: {item}: {release} is not a pinned release; pinned: {', '.join(pins.releases)}"
            )
        if chip not in pins.releases[release].targets:
            raise SourcesError(
                f"--chips: {item}: ESP-IDF {release} has no docs target {chip}; "
                f"its targets: {', '.join(pins.releases[release].targets)}"
            )
        per_release.setdefault(release, set()).add(chip)
    return ChipSelection(
        frozenset(everywhere) if everywhere or not per_release else None,
        {release: frozenset(chips) for release, chips in per_release.items()} if per_release else None,
    )


def checkouts_from_env(cli_paths: Sequence[Path] = ()) -> list[tuple[Path, str]]:
    """ESP-IDF checkouts named on the command line, then in IDF_PATHS, then IDF_PATH."""
    found = [(path, "--idf-path") for path in cli_paths]
    found += [
        (Path(p), IDF_PATHS_ENV_VAR) for p in os.environ.get(IDF_PATHS_ENV_VAR, "").split(os.pathsep) if p
    ]
    if os.environ.get("IDF_PATH"):
        found.append((Path(os.environ["IDF_PATH"]), "IDF_PATH"))
    return found


def default_cache() -> Path:
    return Path(os.environ[CACHE_ENV_VAR]) if os.environ.get(CACHE_ENV_VAR) else DEFAULT_CACHE


def format_sources(sources: Sources, skipped: Sequence[str]) -> str:
    """One line per tree (commit, describe, where from, path) and its notes."""
    lines = []
    for tree in [sources.trm, *sources.releases.values()]:
        state = f"to {tree.pending}" if tree.pending else tree.version
        lines.append(f"{tree.label:<14} {tree.commit[:12]}  {state:<30} {tree.origin:<9} {tree.path}")
        lines.extend(f"{'':<16}note: {note}" for note in tree.notes)
    lines.extend(f"not used: {line}" for line in skipped)
    return "\n".join(lines)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The options sources.py and rebuild.py share."""
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES, help="pinned sources file")
    parser.add_argument(
        "--cache-dir", type=Path, help=f"where fetched trees go (default ${CACHE_ENV_VAR} or build/sources)"
    )
    parser.add_argument("--trm-path", type=Path, help="TRM LaTeX tree to use (default $TRM_PATH)")
    parser.add_argument(
        "--idf-path",
        type=Path,
        action="append",
        default=[],
        help=f"an ESP-IDF checkout at a pinned release (repeatable; also ${IDF_PATHS_ENV_VAR}, $IDF_PATH)",
    )
    parser.add_argument("--releases", help="comma-separated release names (default: every pinned release)")
    parser.add_argument("--offline", action="store_true", help="never fetch; use checkouts and the cache")
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="build trees with local changes to tracked files as they are (refused by default: their "
        "rows record a -dirty build)",
    )


def resolve_from_args(args: argparse.Namespace, mode: Mode) -> tuple[Sources, list[str]]:
    pins = load_pins(args.sources)
    trm_path = args.trm_path or (Path(os.environ["TRM_PATH"]) if os.environ.get("TRM_PATH") else None)
    releases = [r.strip() for r in args.releases.split(",") if r.strip()] if args.releases else None
    if releases == []:
        raise SourcesError(f"--releases names no release; pinned: {', '.join(pins.releases)}")
    return resolve(
        pins,
        cache=args.cache_dir or default_cache(),
        trm_path=trm_path,
        idf_paths=checkouts_from_env(args.idf_path),
        releases=releases,
        # offline never fetches, so a dry run (plan) with --offline checks as the real run would
        mode="offline" if args.offline else mode,
        allow_dirty=args.allow_dirty,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_source_arguments(parser)
    args = parser.parse_args(argv)
    try:
        sources, skipped = resolve_from_args(args, "fetch")
    except SourcesError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_sources(sources, skipped))
    missing = [
        f"{tree.label}: {sub.path} at {sub.commit[:12]} from {sub.url}"
        for tree in sources.releases.values()
        for sub in tree.missing_submodules
    ]
    if missing:
        print(
            "error: submodules the docs build needs are missing:\n  " + "\n  ".join(missing), file=sys.stderr
        )
        return 1
    print(f"sources: {1 + len(sources.releases)} trees verified against {args.sources}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
