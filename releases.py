"""The ESP-IDF release axis (docs/releases.md): series names, what a store holds, which release answers.

A row's ``releases`` lists the series it is true for (``v5.5``, ``v6.1-dev``), newest first, and
``release_sources`` the exact build of each (``v5.5.5@<commit>``). ``release_chips`` lists the
(release, chip) builds the row came from, as ``v6.0:esp32``: a row folded from v6.1-dev's esp32 and
esp32s3 builds and v6.0's esp32 build is true for v6.0 on esp32 only, which ``releases`` and ``chips``
alone cannot say. This module is the one place that turns versions into series, caller input into a
held series, and a store into its releases.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from chip_vocab import DOC_TYPES

# v6.1-dev-6734-g102122904ad, v5.5.5, 5.5, v6.0-rc1, release/v5.5 (the prefix is stripped first)
RELEASE = re.compile(r"^v?(\d{1,2})\.(\d{1,3})(?:\.(\d{1,3}))?(-dev)?(?![\d.])")
# what a caller may send before it is parsed: anything else is refused without being echoed raw
REQUEST_CHARSET = re.compile(r"[A-Za-z0-9_./\-]{1,64}")
DEV_ALIASES = frozenset({"master", "latest", "dev", "main"})
ALL = "all"
COMMIT = re.compile(r"[0-9a-f]{40}")
PAIR_SEPARATOR = ":"


class ReleaseError(ValueError):
    """A release a caller asked for that the store cannot answer; the message names what it holds."""


def release_key(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version or series, or None when it names none."""
    match = RELEASE.match(_strip_branch(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def release_series(version: str) -> str | None:
    """The series users see: ``v6.1-dev-6734-g1021`` -> ``v6.1-dev``, ``5.5.5`` -> ``v5.5``."""
    match = RELEASE.match(_strip_branch(version))
    return f"v{match.group(1)}.{match.group(2)}{match.group(4) or ''}" if match else None


def _strip_branch(version: str) -> str:
    text = version.strip()
    return text[len("release/") :] if text.startswith("release/") else text


def series_order(series: str) -> tuple[int, int, bool]:
    """Sort key, ascending from oldest; a -dev series sorts after the releases of its number."""
    key = release_key(series) or (0, 0)
    return (*key, series.endswith("-dev"))


def newest_first(series: Iterable[str]) -> list[str]:
    return sorted(set(series), key=series_order, reverse=True)


def release_source(version: str, commit: str) -> str:
    """The exact build a row came from, as stored in ``release_sources``."""
    return f"{version}@{commit}"


def split_source(source: str) -> tuple[str, str]:
    version, _, commit = source.rpartition("@")
    return version, commit


def release_chip(series: str, chip: str) -> str:
    """One (release, chip) build as ``release_chips`` stores it."""
    return f"{series}{PAIR_SEPARATOR}{chip}"


def split_release_chip(pair: str) -> tuple[str, str]:
    series, _, chip = pair.partition(PAIR_SEPARATOR)
    return series, chip


def holds(row: dict[str, Any], series: str | None, chip: str | None) -> bool:
    """Whether ``row`` is true for ``chip`` in release ``series`` (None: any). A row of no release
    (the manuals) holds for every release; otherwise only a build that produced it counts."""
    if chip is not None and chip not in row["chips"]:
        return False
    if series is None or not row["releases"]:
        return True
    if chip is None:
        return series in row["releases"]
    return release_chip(series, chip) in row["release_chips"]


def chips_in(row: dict[str, Any], series: str | None) -> list[str]:
    """The row's chips whose ``series`` build produced it (all of them for no series or no release)."""
    if series is None or not row["releases"]:
        return row["chips"]
    return [chip for chip in row["chips"] if release_chip(series, chip) in row["release_chips"]]


def releases_of(row: dict[str, Any], chip: str | None) -> list[str]:
    """The row's releases whose ``chip`` build produced it (all of them for no chip)."""
    if chip is None:
        return row["releases"]
    return [series for series in row["releases"] if release_chip(series, chip) in row["release_chips"]]


def require_series(version: str, what: str) -> str:
    """The series of an ingest's provenance; an error when it names none (a row needs a release)."""
    series = release_series(version)
    if series is None:
        raise ValueError(
            f"{what} has version {version!r}, which names no ESP-IDF release (expected a git describe "
            "like v5.5.5 or v6.1-dev-6734-g102122904ad): build from a tagged checkout or keep its SOURCE.md"
        )
    return series


@dataclass
class HeldRelease:
    """One series in a store: its exact build, and how many rows of each chip it holds."""

    series: str
    version: str
    commit: str
    chips: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    # the chips whose programming guide (idf rows) this release holds; ``chips`` adds the chips
    # whose SoC headers alone it holds (a release's headers cover every chip folder in its tree)
    docs_chips: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "idf_version": self.series,
            "exact_version": self.version,
            "commit": self.commit,
            "chips": sorted(self.chips),
            "docs_chips": sorted(self.docs_chips),
            "rows": self.rows,
        }

    def cited(self) -> dict[str, str]:
        """What an answer cites of the release it came from: its version and commit (the chips and
        row counts are esp32_docs_list_chips' to show, not every answer's)."""
        return {"idf_version": self.series, "exact_version": self.version, "commit": self.commit}


@dataclass
class ReleaseIndex:
    """The releases a store holds, read once with the rest of the store index."""

    held: dict[str, HeldRelease] = field(default_factory=dict)
    # doc_types seen with rows that list no release, and with rows that list one
    without_release: set[str] = field(default_factory=set)
    with_release: set[str] = field(default_factory=set)

    def add_row(self, row: dict[str, Any], rows: int = 1) -> None:
        """Count one row (or ``rows`` alike) under each release it lists (TRM rows list none), and
        under each chip that release's build of it came from."""
        if "doc_type" in row:
            (self.with_release if row["releases"] else self.without_release).add(row["doc_type"])
        for series, source in zip(row["releases"], row["release_sources"], strict=False):
            version, commit = split_source(source)
            held = self.held.setdefault(series, HeldRelease(series, version, commit))
            held.rows += rows
            for chip in chips_in(row, series):
                held.chips[chip] += rows
                if row.get("doc_type") == "idf":
                    held.docs_chips[chip] += rows

    @property
    def releaseless_doc_types(self) -> tuple[str, ...] | None:
        """The doc_types whose rows all list no release (the manuals), when exactly those rows list
        none; None when the rows were read without their doc_type, a doc_type mixes both, or a name
        is outside the vocabulary.

        With it the release filter is ``doc_type IN (...) OR array_has(...)``, which LanceDB answers
        from its indexes; ``cardinality(releases) = 0`` is evaluated row by row, which made an
        unfiltered question 1.8x slower on the full store (docs/retrieval.md)."""
        seen = self.without_release | self.with_release
        if not seen or self.without_release & self.with_release or not seen <= set(DOC_TYPES):
            return None
        return tuple(sorted(self.without_release))

    @property
    def series(self) -> list[str]:
        return newest_first(self.held)

    def default(self, chip: str | None) -> str | None:
        """The release covering the most chips (newest on a tie), among those holding ``chip``."""
        candidates = [h for h in self.held.values() if chip is None or chip in h.chips]
        if not candidates:
            return None
        return max(candidates, key=lambda h: (len(h.chips), series_order(h.series))).series

    def nearest(self, series: str, chip: str | None) -> str | None:
        """The held release closest in version to ``series`` that covers ``chip``; a release before a
        development branch on a tie."""
        wanted = release_key(series)
        candidates = [h.series for h in self.held.values() if chip is None or chip in h.chips]
        if wanted is None or not candidates:
            return None

        def distance(held: str) -> tuple[int, bool]:
            major, minor = release_key(held) or (0, 0)
            return abs((major - wanted[0]) * 100 + minor - wanted[1]), held.endswith("-dev")

        return min(candidates, key=distance)

    def describe(self) -> str:
        return "; ".join(
            f"{h.series} ({h.version}: {', '.join(sorted(h.chips))})"
            for h in (self.held[s] for s in self.series)
        )

    def resolve(self, requested: str, what: str = "idf_version") -> tuple[str | None, str | None]:
        """The held series a caller's ``idf_version`` means (None for "all"), and a note when inexact;
        ``what`` names the argument in the errors (``compare_release`` asks the same question)."""
        if not isinstance(requested, str) or not REQUEST_CHARSET.fullmatch(requested.strip()):
            raise ReleaseError(
                f"{what} must be a release like 5.5, v5.5, v5.5.5, release/v5.5, 'master' or 'all' "
                f"(letters, digits, . / _ -); the store holds: {self.describe() or 'no ESP-IDF release'}"
            )
        text = requested.strip().lower()
        if text == ALL:
            return None, None
        if text in DEV_ALIASES:
            dev = [s for s in self.series if s.endswith("-dev")]
            if not dev:
                raise ReleaseError(
                    f"{what} {requested!r} means the development branch; the store holds no "
                    f"development build, only: {self.describe()}"
                )
            return dev[0], None
        series = release_series(text)
        if series is None:
            raise ReleaseError(
                f"{what} {requested!r} is not an ESP-IDF release; valid: "
                f"{', '.join(self.series) or 'none held'} (also 5.5, v5.5.5, release/v5.5, master, all)"
            )
        if series not in self.held and not series.endswith("-dev"):
            dev = f"{series}-dev"
            if dev in self.held:  # v6.1 asked while only v6.1-dev exists: the branch that becomes it
                return dev, f"v{series[1:]} is not released in this store; answering from {dev}"
        if series not in self.held:
            raise ReleaseError(
                f"the store holds no ESP-IDF {series} docs or headers; it holds: {self.describe()}"
            )
        held = self.held[series]
        asked = _strip_branch(text)
        asked = asked if asked.startswith("v") else f"v{asked}"
        patch = RELEASE.match(asked)
        if patch and patch.group(3) and asked != held.version:
            return series, f"{asked} asked; the store holds {held.version} for series {series}"
        return series, None


@cache
def _pinned_by_series() -> dict[str, str]:
    """Series -> the release name sources.yaml pins for it (empty when the file cannot be read)."""
    from sources import SourcesError, load_pins

    try:
        pins = load_pins()
    except SourcesError:
        return {}
    return {s: name for name, r in pins.releases.items() if (s := release_series(r.describe))}


def how_to_add(series: str, chip: str | None) -> str:
    """The exact command that adds ``series`` to the store, or how to pin it first."""
    chips = f" --chips {chip}" if chip else ""
    name = _pinned_by_series().get(series)
    if name:
        return f"add it with: just add-release {name}{chips}"
    return (
        f"no {series} release is pinned: pin its latest patch in sources.yaml (docs/releases.md, "
        f"'Adding a release'), then: just add-release <tag>{chips}"
    )


@dataclass(frozen=True)
class ReleaseChoice:
    """The release one call answers from (None: every release) and the envelope entry saying why."""

    series: str | None
    envelope: dict[str, Any]
    # ReleaseIndex.releaseless_doc_types of the store: the rows that hold for every release
    releaseless_doc_types: tuple[str, ...] | None = None

    def where(self, chip: str | None = None) -> str | None:
        """Filter clause: the series' rows and the rows true for every release; with ``chip``, the
        rows that release's build of that chip produced and that chip's rows true for every release.
        ``series`` is always one of the store's own held names, ``chip`` a vocabulary id checked by
        the caller, and the doc_types vocabulary names, never caller text."""
        if self.series is None:
            return None
        everywhere = self._everywhere()
        if chip is None:
            released = f"array_has(releases, '{self.series}')"
        else:
            released = f"array_has(release_chips, '{release_chip(self.series, chip)}')"
            everywhere = everywhere and f"({everywhere} AND array_has(chips, '{chip}'))"
        return f"({everywhere} OR {released})" if everywhere else f"({released})"

    def _everywhere(self) -> str | None:
        """The rows true for every release: by doc_type when the store says which those are (LanceDB
        answers that from its indexes), None when no doc_type is."""
        if self.releaseless_doc_types is None:
            return "cardinality(releases) = 0"
        if not self.releaseless_doc_types:
            return None
        return "doc_type IN (" + ", ".join(f"'{d}'" for d in self.releaseless_doc_types) + ")"


def _docs_missing(index: ReleaseIndex, series: str, chip: str) -> list[str]:
    """A note when ``series`` holds ``chip``'s SoC headers but not its guide: the answer then has
    no ESP-IDF guide passage for that chip and release, and the agent should know why and where
    the guide is. No note for a store without guide rows (headers and manuals only)."""
    if chip in index.held[series].docs_chips or not any(h.docs_chips for h in index.held.values()):
        return []
    elsewhere = [s for s in index.series if chip in index.held[s].docs_chips]
    return [
        f"ESP-IDF {series} in this store holds {chip}'s SoC headers but not its programming guide "
        f"(built for {', '.join(sorted(index.held[series].docs_chips)) or 'no chip'}); "
        f"{chip}'s guide is held for: {', '.join(elsewhere) or 'no release'}; {how_to_add(series, chip)}"
    ]


def choose(
    index: ReleaseIndex,
    requested: str | None,
    *,
    chip: str | None,
    scope_series: str | None = None,
    scope_from: str | None = None,
) -> ReleaseChoice:
    """Pick the release for one call: the caller's, else the project's, else the store default."""
    notes: list[str] = []
    if not index.held:
        if requested and requested.strip().lower() != ALL:
            raise ReleaseError(
                f"idf_version {requested!r} asked, but the store holds no ESP-IDF docs or headers"
            )
        return ReleaseChoice(None, {"answered_from": None, "how": "the store holds no ESP-IDF release"})
    if requested:
        series, note = index.resolve(requested)
        how = "idf_version given by the caller"
        if note:
            notes.append(note)
    elif scope_series and scope_series in index.held:
        series, how = scope_series, f"the project's ESP-IDF release ({scope_from})"
    elif scope_series and index.nearest(scope_series, chip):
        series = index.nearest(scope_series, chip)
        how = (
            f"the project uses ESP-IDF {scope_series} ({scope_from}), which the store does not hold: "
            f"answering from {series}, the nearest release it holds; pass idf_version to choose; "
            f"{how_to_add(scope_series, chip)}"
        )
    else:
        series = index.default(chip)
        how = "the store's default (it covers the most chips); pass idf_version to choose"
        if series is None:
            return ReleaseChoice(
                None,
                {
                    "answered_from": None,
                    "how": f"no ESP-IDF release in the store covers {chip}: only its manual answers",
                    "held": list(index.series),
                },
            )
    if series is not None and chip is not None and chip not in index.held[series].chips:
        having = [s for s in index.series if chip in index.held[s].chips]
        raise ReleaseError(
            f"the store's ESP-IDF {series} covers {', '.join(sorted(index.held[series].chips))}, not "
            f"{chip}; {chip} is held in: {', '.join(having) or 'no release (TRM only)'}"
        )
    if series is not None and chip is not None:
        notes.extend(_docs_missing(index, series, chip))
    envelope: dict[str, Any] = {
        "answered_from": index.held[series].cited() if series else "all releases (results list theirs)",
        "how": how,
        "held": list(index.series),
    }
    if notes:
        envelope["notes"] = notes
    return ReleaseChoice(series, envelope, index.releaseless_doc_types)
