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
    match = re.search(r"Commit:\s*`?([0-9a-f]{40})", note.read_text(encoding="utf-8", errors="replace"))
    if not match:
        return None
    return Provenance(version=match.group(1)[:12], commit=match.group(1))


def source_provenance(tree: str | Path) -> Provenance:
    """git describe + full commit of ``tree``; a SOURCE.md pin outside git; else "unknown"."""
    path = Path(tree)
    if not path.exists():
        return Provenance(UNKNOWN, UNKNOWN)
    commit = _git(path, "rev-parse", "HEAD")
    if commit is None:
        return _from_source_note(path) or Provenance(UNKNOWN, UNKNOWN)
    version = _git(path, "describe", "--tags", "--always", "--dirty") or commit[:12]
    return Provenance(version=version, commit=commit)
