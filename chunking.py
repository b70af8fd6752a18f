"""Corpus-agnostic chunk assembly from a heading tree (DESIGN §3, §4).

Retrieval quality depends on chunks that are whole thoughts: a section that fits the word budget
stays in one chunk with its subsections, only oversized subtrees are split, an atomic block (one
register, one API entry) is never cut, and small neighbours are merged so no chunk is a lone line.
Every chunk's text starts with its section path, so the embedding and the reader both know where
it sits in the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chunk_format import PATH_SEPARATOR, chunk_text, subheading

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def word_count(text: str) -> int:
    return len(text.split())


@dataclass
class Block:
    """One paragraph, list, table, code listing or atomic entry, with the identifiers it names."""

    text: str
    atomic: bool = False
    symbol_refs: list[str] = field(default_factory=list)
    doc_refs: list[str] = field(default_factory=list)
    file_refs: list[str] = field(default_factory=list)
    # A standalone block (one register) is a chunk of its own: merged with its neighbours, its vector
    # and its BM25 length would speak for several registers, and a register question needs one.
    standalone: bool = False


@dataclass
class Section:
    """A heading with its own blocks and its subsections, in document order."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)


@dataclass
class Chunk:
    section_path: list[str]
    text: str
    symbol_refs: list[str]
    doc_refs: list[str]
    file_refs: list[str]

    @property
    def words(self) -> int:
        return word_count(self.text)

    @property
    def section_path_text(self) -> str:
        """The path as rows store it (``A > B > C``): the same separator the chunk text starts with."""
        return PATH_SEPARATOR.join(self.section_path)


@dataclass
class _Unit:
    """A piece that is packed whole: a fitting subtree or one block, with its section path."""

    path: tuple[str, ...]
    body: str
    blocks: list[Block]
    words: int
    standalone: bool = False


def _has_standalone(section: Section) -> bool:
    return any(b.standalone for b in section.blocks) or any(_has_standalone(c) for c in section.children)


def _subtree_words(section: Section) -> int:
    own = sum(word_count(b.text) for b in section.blocks)
    return word_count(section.title) + own + sum(_subtree_words(c) for c in section.children)


def _render_subtree(section: Section, depth: int) -> tuple[list[str], list[Block]]:
    """Body lines for a whole subtree; nested titles become headings below the unit's own path."""
    lines: list[str] = []
    blocks: list[Block] = list(section.blocks)
    lines.extend(b.text for b in section.blocks if b.text.strip())
    for child in section.children:
        child_lines, child_blocks = _render_subtree(child, depth + 1)
        if not child_lines and not child.title.strip():
            continue
        lines.append("#" * min(depth + 1, 6) + " " + child.title)
        lines.extend(child_lines)
        blocks.extend(child_blocks)
    return lines, blocks


def _split_oversized(block: Block, max_words: int) -> list[Block]:
    """Cut a non-atomic block at line, then sentence, boundaries into pieces within budget."""
    pieces: list[str] = []
    current: list[str] = []
    current_words = 0
    segments: list[str] = []
    for line in block.text.splitlines():
        if word_count(line) > max_words:
            segments.extend(s for s in _SENTENCE_END.split(line) if s.strip())
        else:
            segments.append(line)
    for segment in segments:
        words = word_count(segment)
        if current and current_words + words > max_words:
            pieces.append("\n".join(current))
            current, current_words = [], 0
        current.append(segment)
        current_words += words
    if current:
        pieces.append("\n".join(current))
    # refs stay with every piece: the identifiers a block names are what makes each piece findable
    return [
        Block(p, symbol_refs=block.symbol_refs, doc_refs=block.doc_refs, file_refs=block.file_refs)
        for p in pieces
        if p.strip()
    ]


def _flatten(section: Section, path: tuple[str, ...], max_words: int) -> list[_Unit]:
    if _subtree_words(section) <= max_words and not _has_standalone(section):
        lines, blocks = _render_subtree(section, len(path))
        body = "\n\n".join(lines)
        return [_Unit(path, body, blocks, word_count(body))] if body.strip() else []
    units: list[_Unit] = []
    for block in section.blocks:
        if not block.text.strip():
            continue
        if block.standalone:
            units.append(_Unit(path, block.text, [block], word_count(block.text), standalone=True))
            continue
        parts = [block] if block.atomic or word_count(block.text) <= max_words else None
        for part in parts or _split_oversized(block, max_words):
            units.append(_Unit(path, part.text, [part], word_count(part.text)))
    for child in section.children:
        units.extend(_flatten(child, (*path, child.title), max_words))
    return units


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    prefix = paths[0]
    for path in paths[1:]:
        length = 0
        while length < min(len(prefix), len(path)) and prefix[length] == path[length]:
            length += 1
        prefix = prefix[:length]
    return prefix


def _assemble(units: list[_Unit]) -> Chunk:
    path = _common_prefix([u.path for u in units])
    lines: list[str] = []
    shown: tuple[str, ...] = path
    for unit in units:
        if unit.path != shown:
            # the unit sits deeper than the chunk's path: name the headings the reader needs
            shared = _common_prefix([unit.path, shown])
            for depth in range(max(len(shared), len(path)), len(unit.path)):
                lines.append(subheading(depth - len(path) + 1, unit.path[depth]))
            shown = unit.path
        lines.append(unit.body)
    body = "\n\n".join(lines)
    text = chunk_text(path, body)
    blocks = [b for u in units for b in u.blocks]

    def refs(attr: str) -> list[str]:
        return list(dict.fromkeys(r for b in blocks for r in getattr(b, attr) if r))

    return Chunk(
        section_path=list(path),
        text=text,
        symbol_refs=refs("symbol_refs"),
        doc_refs=refs("doc_refs"),
        file_refs=refs("file_refs"),
    )


def chunk_tree(root: Section, max_words: int = 400, min_words: int = 80) -> list[Chunk]:
    """Chunks of a document tree in reading order; ``root.title`` is the first path element.

    Units are packed greedily: a new chunk starts when the next unit would overflow the budget,
    or when the section changes and the current chunk already has ``min_words``. A standalone
    block always makes a chunk of its own.
    """
    units = _flatten(root, (root.title,), max_words)
    groups: list[list[_Unit]] = []
    for unit in units:
        current = groups[-1] if groups else None
        if current is not None and not unit.standalone and not current[-1].standalone:
            current_words = sum(u.words for u in current)
            fits = current_words + unit.words <= max_words
            same_section = unit.path == current[-1].path
            if fits and (same_section or current_words < min_words):
                current.append(unit)
                continue
        groups.append([unit])
    merged: list[list[_Unit]] = []
    for group in groups:
        # a short tail (a lone closing paragraph) joins the chunk before it when both fit
        group_words = sum(u.words for u in group)
        joinable = merged and not group[0].standalone and not merged[-1][-1].standalone
        if (
            joinable
            and group_words < min_words
            and sum(u.words for u in merged[-1]) + group_words <= max_words
        ):
            merged[-1].extend(group)
            continue
        merged.append(group)
    return [_assemble(group) for group in merged]
