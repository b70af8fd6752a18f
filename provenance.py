"""Which upstream commit a corpus came from, so every answer can cite it exactly."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Provenance:
    version: str  # `git describe` (with -dirty when the tree is modified)
    commit: str  # full 40-hex commit


def _git(tree: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _from_source_note(tree: Path) -> Provenance | None:
    """A pinned copy outside git (like shared/corpus/trm-latex) records its commit in SOURCE.md."""
    note = tree / "SOURCE.md"
    if not note.is_file():
        return None
    text = note.read_text(encoding="utf-8", errors="replace")
    match = re.search(r"Commit:\s*`?([0-9a-f]{40})", text)
    if not match:
        return None
    version = re.search(r"Version:\s*`?([A-Za-z0-9][\w.+-]*)", text)
    return Provenance(version=version.group(1) if version else match.group(1)[:12], commit=match.group(1))


def build_provenance(build_dir: str | Path, levels: int = 3) -> Provenance | None:
    """The SOURCE.md of a docs build: in its folder or one of ``levels`` folders above it.

    ``build_idf_docs.sh`` and the builds in ../shared/corpus write one, naming the ESP-IDF
    ``Version:`` (git describe) and ``Commit:`` the pages were built from.
    """
    folder = Path(build_dir).resolve()
    for candidate in [folder, *folder.parents][: levels + 1]:
        found = _from_source_note(candidate)
        if found is not None:
            return found
    return None


def source_provenance(tree: str | Path) -> Provenance:
    """git describe + full commit of ``tree``; a SOURCE.md pin outside git; else "unknown".

    Only a tree that is itself a checkout's top counts as git: a folder inside another repository
    (a test fixture, a copy under a project) would otherwise take that repository's commit.
    """
    path = Path(tree)
    if not path.exists():
        return Provenance(UNKNOWN, UNKNOWN)
    top = _git(path, "rev-parse", "--show-toplevel")
    commit = _git(path, "rev-parse", "HEAD") if top and Path(top).resolve() == path.resolve() else None
    if commit is None:
        return _from_source_note(path) or Provenance(UNKNOWN, UNKNOWN)
    version = _git(path, "describe", "--tags", "--always", "--dirty") or commit[:12]
    return Provenance(version=version, commit=commit)
