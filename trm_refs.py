"""TRM cross-references: every ``\\hyperref``/``\\ref`` in a chapter resolved to what its label names.

A manual labels each register (``regdesc:``), each field (``fielddesc:``), and its sections,
tables, figures and interrupts; field descriptions, "see Section X" lines and the register summary
tables point at them. The parser cannot resolve a label while it reads one chapter (most point
into other chapters), so it leaves a mark in the text where a reference was and records where each
label is defined; the ingest resolves a chip's references once all its chapters are read.

The mark spells the label in private-use characters, so it survives the LaTeX-to-text conversion
unchanged, needs no numbering (the conversion cache still hits across manuals) and is removed from
every block before the block's text is final.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from schema import REGISTER_REF, SECTION_REF_SEPARATOR

# the mark goes inside \hyperref's text argument and right after a \ref: placed before either, it
# changes the spacing pylatexenc gives the command (a doubled space, a space in a formula); after
# the argument's leading spaces, so they still collapse with the ones before the command
HYPERREF = re.compile(r"\\hyperref\s*\[([^\]{}\\]+)\]\s*\{\s*")
REF_COMMAND = re.compile(r"\\(?:ref|nameref|autoref|cref|Cref)\s*\{([^{}\\]+)\}")
LABEL_COMMAND = re.compile(r"\\label\s*\{([^{}\\]+)\}")
REGISTER_LABEL_PREFIXES = ("regdesc:", "fielddesc:")

_OPEN, _CLOSE, _BASE = "\ue000", "\ue001", 0xE100
_MARK = re.compile(f"{_OPEN}([\ue100-\ue7ff]*){_CLOSE}")


def _encode(label: str) -> str:
    return "".join(chr(_BASE + ord(c)) for c in label if ord(c) < 0x700)


def mark_references(text: str) -> str:
    """``text`` with a mark naming the label of every reference command."""
    text = HYPERREF.sub(lambda m: f"{m.group(0)}{_OPEN}{_encode(m.group(1))}{_CLOSE}", text)
    return REF_COMMAND.sub(lambda m: f"{m.group(0)}{_OPEN}{_encode(m.group(1))}{_CLOSE}", text)


def take_marks(text: str) -> tuple[str, list[str]]:
    """``text`` without its marks, and the labels they named in first-seen order."""
    if _OPEN not in text:
        return text, []
    labels = [m.group(1) for m in _MARK.finditer(text)]
    decoded = [" ".join("".join(chr(ord(c) - _BASE) for c in label).split()) for label in labels]
    return _MARK.sub("", text), list(dict.fromkeys(label for label in decoded if label))


def labels_defined(fragment: str) -> list[str]:
    return [" ".join(m.group(1).split()) for m in LABEL_COMMAND.finditer(fragment)]


@dataclass(frozen=True)
class LabelTarget:
    """Where a label lands: a register (by name), or a section of the chapter (by heading path)."""

    register: str = ""
    section: tuple[str, ...] = ()

    def reference(self, file_path: str) -> str:
        if self.register:
            return REGISTER_REF + self.register
        return file_path + SECTION_REF_SEPARATOR + " > ".join(self.section)


@dataclass
class LabelIndex:
    """One chip's labels across all its chapters and manuals; the first definition wins."""

    targets: dict[str, str] = field(default_factory=dict)
    referenced: Counter[str] = field(default_factory=Counter)
    unresolved: Counter[str] = field(default_factory=Counter)

    def define(self, file_path: str, labels: dict[str, LabelTarget]) -> None:
        for label, target in labels.items():
            self.targets.setdefault(label, target.reference(file_path))

    def resolve(self, labels: Iterable[str], own_text: str, own_file: str, own_section: str) -> list[str]:
        """The references ``labels`` name, without those to the row itself; unresolved ones counted."""
        resolved: list[str] = []
        for label in labels:
            self.referenced[label] += 1
            target = self.targets.get(label) or self.targets.get(_other_kind(label))
            if target is None:
                self.unresolved[label] += 1
                continue
            if target == own_file + SECTION_REF_SEPARATOR + own_section:
                continue
            if target.startswith(REGISTER_REF) and f"Register {target[len(REGISTER_REF) :]}\n" in own_text:
                continue  # a field description naming its own register
            resolved.append(target)
        return list(dict.fromkeys(resolved))


def _other_kind(label: str) -> str:
    """A register label written as a field one or the other way round (``fielddesc:XREG``): both
    name the same register."""
    kind, _, name = label.partition(":")
    return {"regdesc": "fielddesc:", "fielddesc": "regdesc:"}.get(kind, "\0") + name


def summary(indexes: Iterable[LabelIndex]) -> tuple[int, int, Counter[str]]:
    """(references, resolved, unresolved labels with their counts) over every chip."""
    total = resolved = 0
    missing: Counter[str] = Counter()
    for index in indexes:
        total += sum(index.referenced.values())
        resolved += sum(index.referenced.values()) - sum(index.unresolved.values())
        missing.update(index.unresolved)
    return total, resolved, missing
