"""The chip vocabulary (chips.yaml): the one list every stage and the server validate against.

Chips are named differently by each upstream (``esp32c2`` in ESP-IDF, ``ESP8684`` in the TRM
repository, ``ESP32-C3`` in prose), so every name a user or a corpus may use maps here to one id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

CHIPS_YAML = Path(__file__).with_name("chips.yaml")
DOC_TYPES: tuple[str, ...] = ("idf", "trm", "src")


@dataclass(frozen=True)
class Chip:
    """One ESP-IDF target and where each corpus knows it from."""

    id: str
    name: str
    docs_built: bool
    trm_folder: str | None
    revisions: tuple[str, ...]


@cache
def chips() -> dict[str, Chip]:
    """All chips from chips.yaml, keyed by ESP-IDF target id, in file order."""
    raw = yaml.safe_load(CHIPS_YAML.read_text())["chips"]
    return {
        chip_id: Chip(
            id=chip_id,
            name=facts["name"],
            docs_built=bool(facts["docs_built"]),
            trm_folder=facts.get("trm_folder"),
            revisions=tuple(facts["revisions"]),
        )
        for chip_id, facts in raw.items()
    }


def chip_ids() -> list[str]:
    return list(chips())


def all_revisions() -> list[str]:
    """Every revision label any chip publishes, in first-seen order."""
    seen: dict[str, None] = {}
    for chip in chips().values():
        for rev in chip.revisions:
            seen.setdefault(rev, None)
    return list(seen)


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def _aliases() -> dict[str, str]:
    aliases: dict[str, str] = {}
    for chip in chips().values():
        aliases[_squash(chip.id)] = chip.id
        aliases[_squash(chip.name)] = chip.id
        if chip.trm_folder:
            aliases[_squash(chip.trm_folder)] = chip.id
    return aliases


def normalize_chip(name: str) -> str | None:
    """Map any spelling of a chip (``ESP32-C3``, ``esp32c3``, ``ESP8684``) to its id, or None."""
    return _aliases().get(_squash(name))


def validate_chip(name: str) -> str:
    """Return the chip id for ``name`` or raise ValueError listing the valid chips."""
    chip_id = normalize_chip(name) if isinstance(name, str) else None
    if chip_id is None:
        raise ValueError(f"unknown chip {name!r}; valid chips: {', '.join(chip_ids())}")
    return chip_id


def validate_doc_type(doc_type: str) -> str:
    """Return ``doc_type`` if it is one of DOC_TYPES, else raise ValueError listing them."""
    if doc_type not in DOC_TYPES:
        raise ValueError(f"unknown doc_type {doc_type!r}; valid doc_types: {', '.join(DOC_TYPES)}")
    return doc_type


def validate_revision(revision: str, chip: str | None = None) -> str:
    """Return ``revision`` if the chip (or any chip) publishes it, else raise ValueError."""
    valid = list(chips()[validate_chip(chip)].revisions) if chip else all_revisions()
    if revision not in valid:
        scope = f"for {chip}" if chip else "for any chip"
        raise ValueError(f"unknown revision {revision!r} {scope}; valid revisions: {', '.join(valid)}")
    return revision


def chip_for_trm_folder(folder: str) -> str | None:
    """The chip id whose TRM lives in ``folder`` (``ESP8684`` -> ``esp32c2``), or None."""
    for chip in chips().values():
        if chip.trm_folder == folder:
            return chip.id
    return None


def trm_chips() -> list[str]:
    """Chips that have a Technical Reference Manual."""
    return [c.id for c in chips().values() if c.trm_folder]
