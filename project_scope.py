"""Project scope: the chip, silicon revision range and ESP-IDF release an ESP-IDF project states.

The agent calling the server works in an ESP-IDF project that already says which chip it targets
(``CONFIG_IDF_TARGET``), which silicon revisions it supports (``CONFIG_ESP_REV_MIN_FULL``/``MAX``,
which decide ESP32-P4 ``v1.3`` vs ``mainline``) and which ESP-IDF builds it. Reading those few files
makes them the default filters, so a forgotten ``chip=`` no longer mixes every chip's answers.

Only these files are read, each re-read when its mtime or size changes (``idf.py set-target`` in
mid-session shows on the next call): ``sdkconfig``, ``build/project_description.json``,
``dependencies.lock``, ``sdkconfig.defaults*`` and a top-level ``CMakeLists.txt`` (to recognise a
project). Anything ambiguous becomes a note in the scope; nothing here raises for bad input.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chip_vocab import chip_ids, chips, normalize_chip
from releases import release_key, release_series

PROJECT_ENV_VAR = "ESP32_DOCS_PROJECT"
ANY = frozenset({"any", "all", "*"})  # chip="any" / revision="any" turn the scope off for one call
SKIP_DIRS = frozenset({"build", "managed_components", ".git"})
MAX_DEPTH = 3  # directory levels searched below the project directory for projects
MAX_ENTRIES = 2000  # directory entries looked at per search, so a project_dir of / stays cheap
MAX_FILE_BYTES = 1 << 20  # a generated sdkconfig is ~50 KB; a megabyte is no sdkconfig
MAX_PATH_CHARS = 4096
CACHE_LIMIT = 512

SDKCONFIG = "sdkconfig"
DESCRIPTION = "build/project_description.json"
LOCK = "dependencies.lock"
DEFAULTS = "sdkconfig.defaults"
CMAKELISTS = "CMakeLists.txt"

# ESP32-P4: revisions below v3.0 are documented by the "chip revision v1.3" manual, v3.0 and later
# by the mainline one. ESP-IDF draws the same line: CONFIG_ESP32P4_SELECTS_REV_LESS_V3 picks the
# register/hw_ver1 headers and caps ESP_REV_MAX_FULL at 199; without it, hw_ver3 and 300..399.
P4_MAINLINE_FROM = 300
P4_LESS_V3 = "CONFIG_ESP32P4_SELECTS_REV_LESS_V3"

HEADER_VERSION = re.compile(r"^# Espressif IoT Development Framework \(ESP-IDF\) (\S+) Project Configuration")
OPTION = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
NOT_SET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
INCLUDES_PROJECT_CMAKE = re.compile(r"include\s*\([^)]*tools/cmake/project\.cmake", re.IGNORECASE)
REV_VALUE = re.compile(r"[0-9]{1,5}")
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


class Unreadable(Exception):
    """A project file that exists but cannot be used; its message becomes a scope note."""


# -- reading files, cached by mtime ---------------------------------------------------------------

_cache: dict[tuple[str, str], tuple[int, int, Any]] = {}


def _cached(path: Path, parse: Callable[[Path], Any]) -> Any:
    """``parse(path)``, reused while the file's mtime and size are unchanged (Unreadable included)."""
    stat = path.stat()
    key = (str(path), parse.__name__)
    hit = _cache.get(key)
    if hit and hit[0] == stat.st_mtime_ns and hit[1] == stat.st_size:
        result = hit[2]
    else:
        try:
            result = parse(path)
        except Unreadable as error:
            result = error
        if len(_cache) >= CACHE_LIMIT:
            _cache.clear()
        _cache[key] = (stat.st_mtime_ns, stat.st_size, result)
    if isinstance(result, Unreadable):
        raise result
    return result


def _text(path: Path) -> str:
    """The file as text, refusing what no generated project file looks like (huge, binary)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"is larger than {MAX_FILE_BYTES // 1024} KiB; not read")
    if b"\x00" in data:
        raise Unreadable("is a binary file; not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unreadable(f"is not UTF-8 text ({error.reason}); not read") from error


@dataclass(frozen=True)
class KconfigValues:
    """Options of an sdkconfig (or sdkconfig.defaults) file, and the ESP-IDF version in its header."""

    options: dict[str, str]
    header_version: str | None


def parse_sdkconfig(path: Path) -> KconfigValues:
    options: dict[str, str] = {}
    header_version = None
    for line in _text(path).splitlines():
        line = line.strip()
        if match := OPTION.match(line):
            value = match.group(2).strip()
            options[match.group(1)] = value[1:-1] if value[:1] == value[-1:] == '"' else value
        elif match := NOT_SET.match(line):
            options[match.group(1)] = "n"
        elif header_version is None and (match := HEADER_VERSION.match(line)):
            header_version = match.group(1)
    return KconfigValues(options, header_version)


def parse_description(path: Path) -> dict[str, str]:
    """The fields of build/project_description.json this module uses, as strings."""
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as error:
        raise Unreadable(f"is not valid JSON ({error.msg}); not read") from error
    if not isinstance(data, dict):
        raise Unreadable("is not a JSON object; not read")
    return {k: str(data[k]) for k in ("target", "git_revision", "min_rev", "max_rev") if data.get(k)}


def parse_lock(path: Path) -> str | None:
    """The ``idf`` version dependencies.lock records, or None."""
    try:
        data = yaml.safe_load(_text(path))
    except yaml.YAMLError as error:
        raise Unreadable("is not valid YAML; not read") from error
    idf = (data.get("dependencies") or {}).get("idf") if isinstance(data, dict) else None
    version = idf.get("version") if isinstance(idf, dict) else None
    return str(version) if version else None


def includes_project_cmake(path: Path) -> bool:
    return bool(INCLUDES_PROJECT_CMAKE.search(_text(path)))


# -- one project ------------------------------------------------------------------------------


@dataclass
class Facts:
    """What one project directory states, each value with the file it came from."""

    chip: str | None = None
    chip_from: str | None = None
    rev_min: int | None = None
    rev_max: int | None = None
    less_v3: bool | None = None  # CONFIG_ESP32P4_SELECTS_REV_LESS_V3, where a file sets it
    revision_from: str | None = None
    idf_version: str | None = None
    idf_version_from: str | None = None
    notes: list[str] = field(default_factory=list)


def _regular_file(directory: Path, name: str, root: Path) -> Path | None:
    """``directory/name`` when it is a file that stays inside ``root`` (no symlink out of it)."""
    path = directory / name
    try:
        if not path.is_file():
            return None
        real = path.resolve()
    except OSError:
        return None
    return path if real.is_relative_to(root) else None


def is_project(directory: Path, root: Path) -> bool:
    """An ESP-IDF project: an sdkconfig, a configured build, or a CMakeLists.txt using project.cmake."""
    if _regular_file(directory, SDKCONFIG, root) or _regular_file(directory, DESCRIPTION, root):
        return True
    cmake = _regular_file(directory, CMAKELISTS, root)
    try:
        return bool(cmake and _cached(cmake, includes_project_cmake))
    except (OSError, Unreadable):
        return False


def _rev_int(value: str | None) -> int | None:
    return int(value) if value and REV_VALUE.fullmatch(value.strip()) else None


def read_project(directory: Path, root: Path) -> Facts:
    """The chip, revision range and ESP-IDF version ``directory`` states, with notes on conflicts."""
    facts = Facts()
    where = directory.relative_to(root)

    def label(name: str) -> str:
        return str(where / name) if where.parts else name

    def load(name: str, parse: Callable[[Path], Any]) -> Any:
        path = _regular_file(directory, name, root)
        if path is None:
            if (directory / name).is_symlink():
                facts.notes.append(f"{label(name)} is a symlink out of the project; not read")
            return None
        try:
            return _cached(path, parse)
        except Unreadable as error:
            facts.notes.append(f"{label(name)} {error}")
        except OSError as error:
            facts.notes.append(f"{label(name)} could not be read ({error.strerror}); not used")
        return None

    sdk: KconfigValues | None = load(SDKCONFIG, parse_sdkconfig)
    desc: dict[str, str] | None = load(DESCRIPTION, parse_description)
    lock_version: str | None = load(LOCK, parse_lock)
    defaults: KconfigValues | None = load(DEFAULTS, parse_sdkconfig)

    # chip: sdkconfig is what the next build uses; a configured build or the defaults fill a gap
    sdk_target = sdk.options.get("CONFIG_IDF_TARGET") if sdk else None
    desc_target = desc.get("target") if desc else None
    targets = [
        (label(SDKCONFIG), sdk_target),
        (label(DESCRIPTION), desc_target),
        (label(DEFAULTS), defaults.options.get("CONFIG_IDF_TARGET") if defaults else None),
    ]
    stated = [(source, value) for source, value in targets if value]
    if stated:
        source, raw = stated[0]
        if raw in chips():
            facts.chip, facts.chip_from = raw, source
        else:
            facts.notes.append(
                f"{source} names target {_show(raw)}, which is not a chip documented here "
                f"(valid: {', '.join(chip_ids())}); no chip default applied"
            )
        if sdk_target and desc_target and sdk_target != desc_target:
            facts.notes.append(
                f"{label(SDKCONFIG)} says {_show(sdk_target)} but {label(DESCRIPTION)} says "
                f"{_show(desc_target)} (a build configured before the last set-target); using "
                f"{label(SDKCONFIG)}, which the next build uses"
            )
    else:
        per_target = sorted(p.name.rsplit(".", 1)[1] for p in directory.glob(f"{DEFAULTS}.*"))
        hint = f"; it has {DEFAULTS} files for {', '.join(per_target)}" if per_target else ""
        facts.notes.append(
            f"{directory} is an ESP-IDF project with no target set yet (no CONFIG_IDF_TARGET in "
            f"{SDKCONFIG} or {DEFAULTS}){hint}; no chip default applied (run idf.py set-target, "
            "or pass chip=)"
        )

    # revision range: sdkconfig, then the build's record of it
    ranges = []
    if sdk:
        ranges.append((label(SDKCONFIG), *_rev_pair(sdk.options)))
    if desc:
        ranges.append((label(DESCRIPTION), _rev_int(desc.get("min_rev")), _rev_int(desc.get("max_rev"))))
    for source, rev_min, rev_max in ranges:
        if rev_min is None and rev_max is None:
            continue
        if facts.revision_from is None:
            facts.rev_min, facts.rev_max, facts.revision_from = rev_min, rev_max, source
        elif (rev_min, rev_max) != (facts.rev_min, facts.rev_max):
            facts.notes.append(
                f"{facts.revision_from} supports revisions {_rev_span(facts.rev_min, facts.rev_max)} but "
                f"{source} records {_rev_span(rev_min, rev_max)}; using {facts.revision_from}"
            )
    for source, values in ((label(SDKCONFIG), sdk), (label(DEFAULTS), defaults)):
        if values and P4_LESS_V3 in values.options:
            facts.less_v3 = values.options[P4_LESS_V3] == "y"
            facts.revision_from = facts.revision_from or source
            break

    # ESP-IDF version: the build's git describe is exact; the sdkconfig header and the lock next
    versions = [
        (label(DESCRIPTION), desc.get("git_revision") if desc else None),
        (label(SDKCONFIG), sdk.header_version if sdk else None),
        (label(LOCK), lock_version),
    ]
    known = [(source, value) for source, value in versions if value and release_series(value)]
    if known:
        facts.idf_version_from, facts.idf_version = known[0]
        differing = [f"{s} says {v}" for s, v in known[1:] if release_key(v) != release_key(known[0][1])]
        if differing:
            facts.notes.append(
                f"ESP-IDF version {facts.idf_version} from {facts.idf_version_from}; " + "; ".join(differing)
            )
    return facts


def _rev_pair(options: dict[str, str]) -> tuple[int | None, int | None]:
    return _rev_int(options.get("CONFIG_ESP_REV_MIN_FULL")), _rev_int(options.get("CONFIG_ESP_REV_MAX_FULL"))


def _rev_label(value: int) -> str:
    """ESP-IDF's *_REV_*_FULL encoding: 100 * major + minor (301 is v3.1)."""
    return f"v{value // 100}.{value % 100}"


def _rev_span(rev_min: int | None, rev_max: int | None) -> str:
    low = _rev_label(rev_min) if rev_min is not None else "any"
    high = _rev_label(rev_max) if rev_max is not None else "any"
    return f"{low} to {high}"


def _show(value: str) -> str:
    """A value from a file or a caller, safe to quote in a note."""
    shown = UNPRINTABLE.sub("?", value.strip())
    return repr(shown[:60] + ("…" if len(shown) > 60 else ""))


def manual_revision(facts: Facts) -> tuple[str | None, str | None]:
    """The revision label of the chip's manual the project's range falls in, and a note when none."""
    if facts.chip != "esp32p4":
        return None, None  # the only chip with two manuals (chips.yaml); for others it is no filter
    low, high, less_v3 = facts.rev_min, facts.rev_max, facts.less_v3
    if (high is not None and high < P4_MAINLINE_FROM) or (high is None and less_v3 is True):
        return "v1.3", None
    if (low is not None and low >= P4_MAINLINE_FROM) or (low is None and less_v3 is False):
        return "mainline", None
    if low is None and high is None:
        return None, "the project states no ESP32-P4 revision range; no revision default (pass revision=)"
    return None, (
        f"the project supports ESP32-P4 revisions {_rev_span(low, high)}, across the v1.3 and mainline "
        "manuals; no revision default (pass revision=)"
    )


# -- the scope --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """The defaults a directory implies, where each came from, and every note on how it was decided."""

    source: str
    directory: str | None = None
    projects: tuple[str, ...] = ()
    chip: str | None = None
    chip_from: str | None = None
    revision: str | None = None
    revision_range: str | None = None
    revision_from: str | None = None
    idf_version: str | None = None
    idf_series: str | None = None
    idf_version_from: str | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "project_dir": self.directory,
            "project_dir_from": self.source,
            "projects_found": list(self.projects),
            "chip": self.chip,
            "chip_from": self.chip_from,
            "revision": self.revision,
            "revision_range": self.revision_range,
            "revision_from": self.revision_from,
            "idf_version": self.idf_version,
            "idf_series": self.idf_series,
            "idf_version_from": self.idf_version_from,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Walk:
    """One search below a directory, and the mtime of every folder it looked at or into."""

    found: tuple[Path, ...]
    notes: tuple[str, ...]
    folders: tuple[tuple[str, int], ...]

    def unchanged(self) -> bool:
        """True while no folder gained or lost an entry (a new sdkconfig or project changes one)."""
        try:
            return all(os.stat(folder).st_mtime_ns == mtime for folder, mtime in self.folders)
        except OSError:
            return False


_walks: dict[str, Walk] = {}


def find_projects(root: Path) -> tuple[list[Path], list[str]]:
    """``root`` if it is a project, else the projects at most MAX_DEPTH levels below it.

    The search below is reused while its folders are unchanged: stat()ing them is ~10x cheaper than
    listing them again when the server was started in a large tree (a home folder, a monorepo)."""
    if is_project(root, root):
        return [root], []
    walk = _walks.get(str(root))
    if walk is None or not walk.unchanged():
        walk = _walk(root)
        if len(_walks) >= CACHE_LIMIT:
            _walks.clear()
        _walks[str(root)] = walk
    return list(walk.found), list(walk.notes)


def _walk(root: Path) -> Walk:
    found: list[Path] = []
    notes: list[str] = []
    folders: list[tuple[str, int]] = [(str(root), root.stat().st_mtime_ns)]
    seen = 0
    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    while queue:
        directory, depth = queue.popleft()
        try:
            with os.scandir(directory) as listing:
                entries = []
                for entry in listing:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        break
                    entries.append(entry)
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if (
                entry.name in SKIP_DIRS
                or entry.name.startswith(".")
                or not entry.is_dir(follow_symlinks=False)
            ):
                continue
            path = Path(entry.path)
            folders.append((entry.path, entry.stat(follow_symlinks=False).st_mtime_ns))
            if is_project(path, root):
                found.append(path)
            elif depth + 1 < MAX_DEPTH:
                queue.append((path, depth + 1))
        if seen > MAX_ENTRIES:
            notes.append(f"stopped looking for projects after {MAX_ENTRIES} directory entries")
            break
    return Walk(tuple(found), tuple(notes), tuple(folders))


def check_directory(raw: Any, base: Path) -> tuple[Path | None, list[str]]:
    """A usable absolute directory from a caller's or the configuration's path, or notes on why not."""
    if not isinstance(raw, str) or not raw.strip():
        return None, [
            f"project_dir must be a directory path, got {_show(str(raw))}; no project scope applied"
        ]
    if len(raw) > MAX_PATH_CHARS or UNPRINTABLE.search(raw):
        return None, [f"project_dir {_show(raw)} is not a usable path (control characters or too long)"]
    notes = []
    path = Path(raw.strip()).expanduser()
    if not path.is_absolute():
        notes.append(f"project_dir {_show(raw)} is relative; taken from the server's directory {base}")
        path = base / path
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as error:
        return None, [f"project_dir {_show(raw)} cannot be resolved ({error}); no project scope applied"]
    if ".." in path.parts or resolved != path:
        notes.append(f"project_dir {_show(raw)} resolves to {resolved}")
    if not resolved.exists():
        return None, [*notes, f"project_dir {resolved} does not exist; no project scope applied"]
    if not resolved.is_dir():
        return None, [*notes, f"project_dir {resolved} is a file, not a directory; no project scope applied"]
    return resolved, notes


def detect(raw_dir: Any, source: str, base: Path) -> Scope:
    """The scope of the project(s) in ``raw_dir``: never raises, every doubt is a note."""
    directory, notes = check_directory(raw_dir, base)
    if directory is None:
        return Scope(source=source, directory=None, notes=tuple(notes))
    try:
        projects, walk_notes = find_projects(directory)
        facts = [read_project(p, directory) for p in projects]
    except (OSError, ValueError, RecursionError) as error:  # detection must never fail a call
        return Scope(source=source, directory=str(directory), notes=(*notes, f"could not read: {error}"))
    notes += walk_notes
    names = tuple(str(p.relative_to(directory)) for p in projects)
    if not facts:
        notes.append(f"no ESP-IDF project in {directory} or {MAX_DEPTH} levels below it; no project scope")
        return Scope(source=source, directory=str(directory), notes=tuple(notes))
    chosen = facts[0]
    if len(facts) > 1:
        listed = ", ".join(
            f"{name} ({one.chip or 'no target'})" for name, one in zip(names, facts, strict=True)
        )
        targets = {one.chip for one in facts}
        if len(targets) > 1 or None in targets:
            kind = "none with a target set" if targets == {None} else "with different targets"
            notes.append(
                f"{len(facts)} projects under {directory}, {kind}: {listed}; no chip default applied "
                "(pass project_dir= for one of them, or chip=)"
            )
            return Scope(source=source, directory=str(directory), projects=names, notes=tuple(notes))
        notes.append(
            f"{len(facts)} projects under {directory}, all {chosen.chip}: {listed}; using {names[0]}"
        )
    notes += chosen.notes
    revision, revision_note = manual_revision(chosen)
    if revision_note:
        notes.append(revision_note)
    revisions = {manual_revision(one)[0] for one in facts}
    if len(revisions) > 1:
        revision = None
        notes.append(
            f"those projects differ in {chosen.chip} revision "
            f"({', '.join(sorted(r or 'unknown' for r in revisions))}); no revision default (pass revision=)"
        )
    series = release_series(chosen.idf_version) if chosen.idf_version else None
    has_range = chosen.rev_min is not None or chosen.rev_max is not None
    return Scope(
        source=source,
        directory=str(directory),
        projects=names,
        chip=chosen.chip,
        chip_from=chosen.chip_from,
        revision=revision,
        revision_range=_rev_span(chosen.rev_min, chosen.rev_max) if has_range else None,
        revision_from=chosen.revision_from,
        idf_version=chosen.idf_version,
        idf_series=series,
        idf_version_from=chosen.idf_version_from,
        notes=tuple(notes),
    )


# -- applying it to one call --------------------------------------------------------------------


def is_any(value: str | None) -> bool:
    return isinstance(value, str) and value.strip().lower() in ANY


@dataclass(frozen=True)
class Applied:
    """The chip and revision one call uses, and the envelope entry saying why."""

    chip: str | None
    revision: str | None
    from_scope: bool  # the scope, not the caller, supplied the chip or the revision
    envelope: dict[str, Any]
    # the project's ESP-IDF series and where it was read: the release default when the store holds it
    release: tuple[str, str] | None = None


def apply(scope: Scope, chip: str | None, revision: str | None) -> Applied:
    """Fill ``chip``/``revision`` the caller left out from ``scope``; an explicit value always wins."""
    from_scope = False
    if is_any(chip):
        use_chip, how = None, "the caller's chip='any' turned the project scope off for this call"
    elif chip:
        use_chip, how = chip, "chip given by the caller"
    elif scope.chip:
        use_chip, how, from_scope = scope.chip, f"chip from the project scope ({scope.chip_from})", True
    else:
        use_chip, how = None, "no chip filter: the project scope gives no chip"
    use_revision = None if is_any(revision) else revision
    scope_chip = not is_any(chip) and isinstance(use_chip, str) and normalize_chip(use_chip) == scope.chip
    if not revision and scope.revision and scope_chip:
        use_revision, from_scope = scope.revision, True
        how += f"; revision {scope.revision} from the project scope ({scope.revision_from})"
    envelope = {"applied": {"chip": use_chip, "revision": use_revision}, "how": how, **scope.as_dict()}
    release = None
    if scope.idf_series and not is_any(chip):
        release = (scope.idf_series, f"{scope.idf_version} in {scope.idf_version_from}")
    return Applied(use_chip, use_revision, from_scope, envelope, release)


class ScopeResolver:
    """The server's configured default directory, resolved per call (the project may change)."""

    def __init__(self, default_dir: str | None, default_source: str) -> None:
        self.base = Path.cwd()
        self.default_dir = default_dir if default_dir is not None else str(self.base)
        self.default_source = default_source

    def resolve(self, project_dir: str | None) -> Scope:
        if project_dir is not None:
            return detect(project_dir, "project_dir argument", self.base)
        return detect(self.default_dir, self.default_source, self.base)


def configured_project(cli_value: str | None) -> tuple[str | None, str]:
    """--project wins, then $ESP32_DOCS_PROJECT, then the directory the client started the server in."""
    if cli_value:
        return cli_value, "--project"
    if os.environ.get(PROJECT_ENV_VAR):
        return os.environ[PROJECT_ENV_VAR], f"${PROJECT_ENV_VAR}"
    return None, "the server's working directory (where the client started it)"
