"""Docutils XML pages of a per-chip ESP-IDF docs build -> chunking.py's Section/Block trees (DESIGN §3).

The XML is written after ``only::`` blocks are resolved and ``{IDF_TARGET_*}`` substituted, and it
holds the doxygen-generated API reference, so it is the one faithful per-chip source. This module
turns one page into a heading tree: sections become Sections; paragraphs, lists, tables, literal
blocks and admonitions become Blocks; an API entry (``desc``: signature plus its Parameters/Returns
``field_list``) is one atomic Block; a Kconfig option keeps its description and default in one
atomic Block. Inline nodes (``literal_strong``, references, emphasis) are rendered as plain text in
place, never as blocks. The identifiers each block defines or names, the pages it links to and the
repository files it cites are collected from the roles as the text is rendered.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from chunk_format import PATH_SEPARATOR
from chunking import Block, Section, word_count

SPHINX_ROOT = "document"
DEFAULT_MAX_WORDS = 400

# Elements that carry no reader-facing text in the built page: build metadata, index entries,
# link anchors, image nodes (their diagrams are attributes), raw HTML/LaTeX, and todo notes that
# the HTML build hides. The word-capture checker excludes the same set from its reference text.
SKIPPED_TAGS = frozenset(
    {
        "comment",
        "substitution_definition",
        "index",
        "target",
        "raw",
        "image",
        "todo_node",
        "WavedromNode",
        "mermaid",
        "transition",
        "tabular_col_spec",
        "system_message",
        "pending_xref_condition",
    }
)
ADMONITION_LABELS = {
    "note": "Note",
    "warning": "Warning",
    "important": "Important",
    "attention": "Attention",
    "tip": "Tip",
    "hint": "Hint",
    "caution": "Caution",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
}
LIST_TAGS = frozenset({"bullet_list", "enumerated_list"})
# Block-level elements that may also appear nested inside a paragraph (breathe writes lists and
# code listings inside doxygen paragraphs); met inside inline content they start a new line.
BLOCK_TAGS = frozenset(
    {
        "paragraph",
        "bullet_list",
        "enumerated_list",
        "definition_list",
        "field_list",
        "option_list",
        "table",
        "literal_block",
        "doctest_block",
        "math_block",
        "line_block",
        "block_quote",
        "container",
        "compound",
        "figure",
        "legend",
        "caption",
        "rubric",
        "desc",
        "topic",
        "sidebar",
        "footnote",
        "citation",
        "centered",
        "compact_paragraph",
        "versionmodified",
        "glossary",
        "hlist",
        "hlistcol",
        "admonition",
        *ADMONITION_LABELS,
    }
)
CONTAINER_OBJTYPES = frozenset({"struct", "union", "enum", "class"})
KCONFIG_OPTION = re.compile(r"^CONFIG_[A-Z0-9_]+$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$")
IDF_GITHUB_FILE = re.compile(r"^https://github\.com/espressif/esp-idf/(?:blob|tree|raw)/[^/]+/(.+?)/?$")
DOC_SOURCE = re.compile(r"(?:^|/)docs/en/(.+)\.[A-Za-z]+$")
_WHITESPACE = re.compile(r"\s+")


class PageError(ValueError):
    """A file that should be a Sphinx page but cannot be read as one."""


@dataclass
class Page:
    """One Sphinx page of a build: where it came from and its parsed XML."""

    xml_file: Path
    doc_path: str
    title: str
    root: etree._Element


@dataclass
class Refs:
    """Identifiers, pages and repository files a block defines or names, in first-seen order."""

    symbols: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def symbol(self, name: str) -> None:
        name = name.strip().removesuffix("()").strip()
        if IDENTIFIER.match(name) and name not in self.symbols:
            self.symbols.append(name)

    def doc(self, path: str) -> None:
        if path and path not in self.docs:
            self.docs.append(path)

    def file(self, path: str) -> None:
        if path and path not in self.files:
            self.files.append(path)

    def block(self, text: str, atomic: bool = False, standalone: bool = False) -> Block:
        return Block(
            text,
            atomic=atomic,
            standalone=standalone,
            symbol_refs=list(self.symbols),
            doc_refs=list(self.docs),
            file_refs=list(self.files),
        )


def collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def find_xml_files(xml_dir: Path) -> list[Path]:
    """Every .xml file under the build directory, in a stable order."""
    return sorted(p for p in xml_dir.rglob("*.xml") if p.is_file())


def is_sphinx_page(root: etree._Element) -> bool:
    return root.tag == SPHINX_ROOT


def parse_xml(xml_file: Path) -> etree._Element:
    """Parse one XML file, raising PageError that names the file and the parser's complaint."""
    try:
        return etree.parse(str(xml_file), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    except (etree.XMLSyntaxError, OSError) as exc:
        raise PageError(f"{xml_file}: not well-formed XML ({exc})") from exc


def doc_path_for(root: etree._Element, xml_file: Path, xml_dir: Path) -> str:
    """The page's doc path (``api-reference/peripherals/uart``) from its ``source`` attribute.

    The build rewrites its own location (``/esp-idf/docs/en/...``), so only the part after
    ``docs/en/`` is meaningful; a page without a usable source falls back to its XML file path.
    """
    match = DOC_SOURCE.search(root.get("source", "").replace("\\", "/"))
    if match:
        return match.group(1)
    return xml_file.relative_to(xml_dir).with_suffix("").as_posix()


def page_title(root: etree._Element, doc_path: str) -> str:
    """The first section title, as Sphinx uses it; include-only fragments fall back to the file name."""
    title = root.find("section/title")
    if title is not None:
        text = collapse("".join(title.itertext()))
        if text:
            return text
    return posixpath.basename(doc_path)


def load_page(xml_file: Path, xml_dir: Path) -> Page | None:
    """The Sphinx page in ``xml_file``, or None when the file is doxygen's own XML."""
    root = parse_xml(xml_file)
    if not is_sphinx_page(root):
        return None
    doc_path = doc_path_for(root, xml_file, xml_dir)
    return Page(xml_file=xml_file, doc_path=doc_path, title=page_title(root, doc_path), root=root)


def iter_pages(xml_dir: Path) -> Iterator[tuple[Path, Page | PageError | None]]:
    """(file, Page | None for non-Sphinx XML | PageError) for every XML file under ``xml_dir``."""
    for xml_file in find_xml_files(xml_dir):
        try:
            yield xml_file, load_page(xml_file, xml_dir)
        except PageError as exc:
            yield xml_file, exc


# --- rendering -------------------------------------------------------------------------------


class _Renderer:
    """Renders one page's elements to plain text while recording the refs of the current block."""

    def __init__(self, doc_path: str, max_words: int, typedefs: dict[str, list[str]] | None = None) -> None:
        self.doc_path = doc_path
        self.max_words = max_words
        self.typedefs = typedefs or {}

    # refs ----------------------------------------------------------------------------------------
    def _resolve_doc(self, refuri: str) -> str:
        target = refuri.split("#", 1)[0]
        if not target:
            return ""
        return posixpath.normpath(posixpath.join(posixpath.dirname(self.doc_path), target))

    def _note_reference(self, elem: etree._Element, text: str, refs: Refs) -> None:
        refuri = elem.get("refuri") or ""
        refid = elem.get("refid") or ""
        classes = " ".join(child.get("classes") or "" for child in elem)
        github = IDF_GITHUB_FILE.match(refuri)
        if github:
            refs.file(github.group(1))
            return
        if "://" in refuri or refuri.startswith("mailto:"):
            return
        anchor = refuri.partition("#")[2] or refid
        api = anchor.startswith(("_CPPv", "c.", "cmakev2-"))
        if api:
            refs.symbol(elem.get("reftitle") or text)
        elif KCONFIG_OPTION.match(text.strip()):
            refs.symbol(text)
        # :doc: and :ref: roles, API cross-references into other pages, and toctree entries (which
        # carry an anchorname), as ``page#anchor``: the ingest turns the anchor into a section path
        roles = {"doc", "std-ref"} & set(classes.split())
        if refuri and (roles or api or elem.get("anchorname") is not None):
            resolved = self._resolve_doc(refuri)
            if resolved and resolved != self.doc_path:
                refs.doc(f"{resolved}#{anchor}")
        elif refid and roles:  # a :ref: to another section of the same page
            refs.doc(f"{self.doc_path}#{refid}")

    # inline ----------------------------------------------------------------------------------------
    def inline(self, elem: etree._Element, refs: Refs) -> str:
        """Text of ``elem`` and its inline children, whitespace collapsed; nested blocks on new lines."""
        lines: list[str] = []
        run: list[str] = [elem.text or ""]
        for child in elem:
            if isinstance(child.tag, str) and child.tag in BLOCK_TAGS:
                # breathe nests lists and listings in paragraphs: they keep their own line structure
                lines.append(collapse("".join(run)))
                lines.append(self.block(child, refs))
                run = []
            elif isinstance(child.tag, str) and child.tag not in SKIPPED_TAGS:
                run.append(self._inline_child(child, refs))
            run.append(child.tail or "")
        lines.append(collapse("".join(run)))
        return "\n".join(line for line in lines if line.strip())

    def _inline_child(self, child: etree._Element, refs: Refs) -> str:
        tag = child.tag
        text = self.inline(child, refs)
        if tag == "reference":
            self._note_reference(child, text, refs)
        elif tag == "literal":
            classes = (child.get("classes") or "").split()
            if "xref" in classes or KCONFIG_OPTION.match(text) or "_" in text:
                refs.symbol(text)
        elif tag == "footnote_reference":
            return f"[{text}]"
        elif tag == "option_argument":
            return child.get("delimiter", " ") + text  # `--port PORT`: the gap is an attribute
        return text

    # blocks ----------------------------------------------------------------------------------------
    def block(self, elem: etree._Element, refs: Refs) -> str:
        """Plain-text rendering of one block-level element (may span several lines)."""
        tag = elem.tag
        if not isinstance(tag, str) or tag in SKIPPED_TAGS:
            return ""
        handler = getattr(self, f"_render_{tag}", None)
        if handler is not None:
            return handler(elem, refs)
        if tag in ADMONITION_LABELS or tag == "admonition":
            return self._render_admonition(elem, refs)
        if tag in ("paragraph", "centered", "compact_paragraph", "rubric", "caption", "attribution"):
            return self.inline(elem, refs)
        if any(isinstance(c.tag, str) and c.tag in BLOCK_TAGS for c in elem):
            return self.children(elem, refs)
        return self.inline(elem, refs)

    def children(self, elem: etree._Element, refs: Refs, skip: frozenset[str] = frozenset()) -> str:
        parts = [self.block(c, refs) for c in elem if isinstance(c.tag, str) and c.tag not in skip]
        return "\n".join(p for p in parts if p.strip())

    def _render_bullet_list(self, elem: etree._Element, refs: Refs) -> str:
        return self._list(elem, refs, lambda _i: "- ")

    def _render_enumerated_list(self, elem: etree._Element, refs: Refs) -> str:
        start = int(elem.get("start") or 1)
        enumtype = elem.get("enumtype") or "arabic"
        suffix = elem.get("suffix") or "."

        def marker(index: int) -> str:
            number = start + index
            if enumtype == "loweralpha":
                return f"{chr(ord('a') + number - 1)}{suffix} "
            if enumtype == "upperalpha":
                return f"{chr(ord('A') + number - 1)}{suffix} "
            return f"{number}{suffix} "

        return self._list(elem, refs, marker)

    def _list(self, elem: etree._Element, refs: Refs, marker: Callable[[int], str]) -> str:
        lines: list[str] = []
        for index, item in enumerate(c for c in elem if c.tag == "list_item"):
            body = self.children(item, refs)
            lines.append(_hang(marker(index), body))
        return "\n".join(lines)

    def _render_definition_list(self, elem: etree._Element, refs: Refs) -> str:
        lines: list[str] = []
        for item in (c for c in elem if c.tag == "definition_list_item"):
            parts = [self.inline(c, refs) for c in item if c.tag in ("term", "classifier")]
            term = " : ".join(p for p in parts if p)
            definition = item.find("definition")
            body = self.children(definition, refs) if definition is not None else ""
            lines.append(term)
            if body:
                lines.append(_indent(body, "  "))
        return "\n".join(lines)

    def _render_field_list(self, elem: etree._Element, refs: Refs) -> str:
        lines: list[str] = []
        for item in elem:
            if item.tag != "field":
                continue
            name_elem = item.find("field_name")
            body_elem = item.find("field_body")
            name = self.inline(name_elem, refs) if name_elem is not None else ""
            body = self.children(body_elem, refs) if body_elem is not None else ""
            if "\n" in body or body.startswith("- "):
                lines.append(f"{name}:\n{body}")
            else:
                lines.append(f"{name}: {body}".rstrip())
        return "\n".join(lines)

    def _render_option_list(self, elem: etree._Element, refs: Refs) -> str:
        lines: list[str] = []
        for item in elem.iter("option_list_item"):
            group = item.find("option_group")
            description = item.find("description")
            options = self.inline(group, refs) if group is not None else ""
            body = self.children(description, refs) if description is not None else ""
            lines.append(f"{options}  {collapse(body)}".strip())
        return "\n".join(lines)

    def _render_literal_block(self, elem: etree._Element, refs: Refs) -> str:
        code = "".join(elem.itertext()).strip("\n")
        language = elem.get("language") or ""
        fence = "```" + ("" if language in ("", "default", "none", "text") else language)
        return f"{fence}\n{code}\n```" if code.strip() else ""

    _render_doctest_block = _render_literal_block

    def _render_math_block(self, elem: etree._Element, refs: Refs) -> str:
        return "".join(elem.itertext()).strip()

    def _render_line_block(self, elem: etree._Element, refs: Refs) -> str:
        lines = [self.inline(line, refs) for line in elem.iter("line")]
        return "\n".join(line for line in lines if line)

    def _render_table(self, elem: etree._Element, refs: Refs) -> str:
        caption, header, rows = self.table_rows(elem, refs)
        return "\n".join(line for line in (caption, header, *rows) if line)

    def table_rows(self, elem: etree._Element, refs: Refs) -> tuple[str, str, list[str]]:
        """(caption, header row, body rows): each row one line, cells separated by `` | ``."""
        title = elem.find("title")
        caption = self.inline(title, refs) if title is not None else ""
        header_rows: list[str] = []
        body_rows: list[str] = []
        for row in elem.iter("row"):
            cells = [collapse(self.children(entry, refs)) for entry in row if entry.tag == "entry"]
            line = " | ".join(cells)
            if not line.replace("|", "").strip():
                continue
            in_head = row.getparent() is not None and row.getparent().tag == "thead"
            (header_rows if in_head else body_rows).append(line)
        return caption, "\n".join(header_rows), body_rows

    def _render_figure(self, elem: etree._Element, refs: Refs) -> str:
        return self.children(elem, refs)

    def _render_topic(self, elem: etree._Element, refs: Refs) -> str:
        if "contents" in (elem.get("classes") or "").split():
            return ""  # a generated local table of contents repeats the headings below it
        return self.children(elem, refs)

    def _render_footnote(self, elem: etree._Element, refs: Refs) -> str:
        label = elem.find("label")
        marker = f"[{self.inline(label, refs)}] " if label is not None else ""
        return _hang(marker, self.children(elem, refs, skip=frozenset({"label"})))

    _render_citation = _render_footnote

    def _render_admonition(self, elem: etree._Element, refs: Refs) -> str:
        title = elem.find("title")
        label = self.inline(title, refs) if title is not None else ADMONITION_LABELS.get(elem.tag, "Note")
        body = self.children(elem, refs, skip=frozenset({"title"}))
        return _hang(f"{label}: ", body)

    def _render_desc(self, elem: etree._Element, refs: Refs) -> str:
        return "\n".join(self.desc_parts(elem, refs, parent=None))

    # API entries -----------------------------------------------------------------------------------
    def signature(self, elem: etree._Element, refs: Refs) -> str:
        """One ``desc_signature`` as a C declaration: parameter lists get their parentheses back."""
        lines = elem.findall("desc_signature_line") or [elem]
        text = " ".join(self._signature_run(line, refs) for line in lines)
        return collapse(text).replace("( ", "(").replace(" )", ")")

    def _signature_run(self, elem: etree._Element, refs: Refs) -> str:
        if elem.tag == "desc_sig_space":
            return " "
        runs: list[str] = [elem.text or ""]
        for child in elem:
            if not isinstance(child.tag, str) or child.tag in SKIPPED_TAGS:
                pass
            elif child.tag == "desc_parameterlist":
                params = [collapse(self._signature_run(p, refs)) for p in child if p.tag == "desc_parameter"]
                runs.append("(" + ", ".join(params) + ")")
            else:
                text = self._signature_run(child, refs)
                if child.tag == "reference":
                    self._note_reference(child, collapse(text), refs)
                runs.append(text)
            runs.append(child.tail or "")
        return "".join(runs)

    def desc_name(self, elem: etree._Element) -> str:
        name = elem.find("desc_signature//desc_name")
        return collapse("".join(name.itertext())) if name is not None else ""

    def desc_parts(self, elem: etree._Element, refs: Refs, parent: str | None) -> list[str]:
        """Lines of one API entry: its signature(s), then its description and fields in order."""
        name = self.desc_name(elem)
        if name:
            refs.symbol(f"{parent}::{name}" if parent and elem.get("objtype") != "enumerator" else name)
        signatures = [self.signature(s, refs) for s in elem.findall("desc_signature")]
        if elem.get("objtype") in CONTAINER_OBJTYPES and parent is None:
            for alias in self.typedefs.get(name, []):
                # agents ask for the ``_t`` name; doxygen documents it apart from the members
                refs.symbol(alias)
                signatures.append(f"typedef {elem.get('objtype')} {name} {alias}")
        content = elem.find("desc_content")
        owner = name if elem.get("objtype") in CONTAINER_OBJTYPES else parent
        body = self._desc_content(content, refs, owner) if content is not None else []
        return [s for s in signatures if s] + [_indent(b, "  ") for b in body if b.strip()]

    def _desc_content(self, content: etree._Element, refs: Refs, owner: str | None) -> list[str]:
        parts: list[str] = []
        for child in content:
            if child.tag == "desc":
                parts.append("\n".join(self.desc_parts(child, refs, owner)))
            elif child.tag == "container" and child.find("desc") is not None:
                parts.extend(self._desc_content(child, refs, owner))
            else:
                parts.append(self.block(child, refs))
        return parts

    def desc_blocks(self, elem: etree._Element, header: str = "", parent: str | None = None) -> list[Block]:
        """One atomic Block per API entry; an oversized struct/union/enum is cut between its members.

        A function, macro or member is never cut. A container that exceeds the word budget is
        emitted as pieces that each start with the container's signature, so a member found on its
        own still says which struct it belongs to.
        """
        refs = Refs()
        text = "\n".join(self.desc_parts(elem, refs, parent))
        if elem.get("objtype") not in CONTAINER_OBJTYPES or word_count(text) <= self.max_words:
            return [refs.block(text, atomic=True)] if text.strip() else []
        name = self.desc_name(elem)
        head_refs = Refs()
        if name:
            head_refs.symbol(f"{parent}::{name}" if parent else name)
        aliases = self.typedefs.get(name, []) if parent is None else []
        for alias in aliases:
            head_refs.symbol(alias)
        own_header = PATH_SEPARATOR.join(
            h
            for h in (header, " ".join(self.signature(s, head_refs) for s in elem.findall("desc_signature")))
            if h
        ) + "".join(f" (typedef {alias})" for alias in aliases)
        units: list[tuple[str, Refs, list[Block] | None]] = []
        content = elem.find("desc_content")
        for child in self._flatten_members(content) if content is not None else []:
            unit_refs = Refs()
            if child.tag == "desc":
                member_text = "\n".join(self.desc_parts(child, unit_refs, name))
                if child.get("objtype") in CONTAINER_OBJTYPES and word_count(member_text) > self.max_words:
                    units.append(("", unit_refs, self.desc_blocks(child, own_header, name)))
                    continue
                units.append((member_text, unit_refs, None))
            else:
                units.append((self.block(child, unit_refs), unit_refs, None))
        return _pack_pieces(own_header, head_refs, units, self.max_words)

    def _flatten_members(self, content: etree._Element) -> Iterator[etree._Element]:
        for child in content:
            if child.tag == "container" and child.find("desc") is not None:
                yield from self._flatten_members(child)
            elif isinstance(child.tag, str) and child.tag not in SKIPPED_TAGS:
                yield child


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _hang(marker: str, body: str) -> str:
    """``marker`` before the first line of ``body``, later lines indented to match."""
    lines = body.split("\n") if body else [""]
    pad = " " * len(marker)
    return "\n".join([marker + lines[0]] + [pad + line if line else line for line in lines[1:]]).rstrip()


def _merge_refs(target: Refs, source: Refs) -> None:
    for name in source.symbols:
        target.symbol(name)
    for doc in source.docs:
        target.doc(doc)
    for path in source.files:
        target.file(path)


def _pack_pieces(
    header: str, head_refs: Refs, units: list[tuple[str, Refs, list[Block] | None]], max_words: int
) -> list[Block]:
    """Greedy packing of an oversized container's parts into atomic pieces headed by its signature."""
    pieces: list[Block] = []
    lines: list[str] = []
    refs = Refs()
    _merge_refs(refs, head_refs)

    def flush() -> None:
        nonlocal lines, refs
        if lines:
            title = header if not pieces else f"{header} (continued)"
            pieces.append(
                refs.block("\n".join([title, *[_indent(line, "  ") for line in lines]]), atomic=True)
            )
        lines, refs = [], Refs()
        _merge_refs(refs, head_refs)

    for text, unit_refs, nested in units:
        if nested is not None:
            flush()
            pieces.extend(nested)
            continue
        if not text.strip():
            continue
        if lines and word_count("\n".join(lines)) + word_count(text) + word_count(header) > max_words:
            flush()
        lines.append(text)
        _merge_refs(refs, unit_refs)
    flush()
    return pieces


# --- page -> tree ------------------------------------------------------------------------------


def _body_blocks(renderer: _Renderer, elements: list[etree._Element]) -> list[Block]:
    blocks: list[Block] = []
    for elem in elements:
        if not isinstance(elem.tag, str) or elem.tag in SKIPPED_TAGS or elem.tag in ("title", "section"):
            continue
        if elem.tag == "desc":
            blocks.extend(renderer.desc_blocks(elem))
        elif elem.tag == "table":
            blocks.extend(_table_blocks(renderer, elem))
        else:
            refs = Refs()
            text = renderer.block(elem, refs)
            if text.strip():
                blocks.append(refs.block(text))
    return blocks


def _table_blocks(renderer: _Renderer, elem: etree._Element) -> list[Block]:
    """A table as row-per-line Blocks; a long one is cut between rows, each piece repeating the header."""
    refs = Refs()
    caption, header, rows = renderer.table_rows(elem, refs)
    head = "\n".join(line for line in (caption, header) if line)
    whole = "\n".join(line for line in (head, *rows) if line)
    if word_count(whole) <= renderer.max_words or not rows:
        return [refs.block(whole)] if whole.strip() else []
    budget = max(renderer.max_words - word_count(head), 1)
    pieces: list[Block] = []
    current: list[str] = []
    for row in rows:
        if current and word_count("\n".join(current)) + word_count(row) > budget:
            pieces.append(refs.block("\n".join(line for line in (head, *current) if line), atomic=True))
            current = []
        current.append(row)
    if current:
        pieces.append(refs.block("\n".join(line for line in (head, *current) if line), atomic=True))
    return pieces


def _section(renderer: _Renderer, elem: etree._Element) -> Section:
    title_elem = elem.find("title")
    title = renderer.inline(title_elem, Refs()) if title_elem is not None else ""
    body = [c for c in elem if c.tag != "section"]
    blocks = _body_blocks(renderer, body)
    if KCONFIG_OPTION.match(title):
        # a Kconfig option is looked up by name: its description, range and default stay one piece,
        # a chunk of its own (so a chip-only option leaves its neighbours' chunks identical across chips)
        refs = Refs()
        refs.symbol(title)
        for block in blocks:
            _merge_refs(refs, Refs(block.symbol_refs, block.doc_refs, block.file_refs))
        text = "\n\n".join(b.text for b in blocks)
        blocks = [refs.block(text, atomic=True, standalone=True)] if text.strip() else []
    children = [_section(renderer, c) for c in elem if c.tag == "section"]
    return Section(title=title, blocks=blocks, children=children)


_TYPEDEF_OF_TAG = re.compile(r"^typedef (?:struct|union|enum) (\w+) (\w+)$")


def typedef_aliases(root: etree._Element) -> dict[str, list[str]]:
    """``struct x`` -> [``x_t``] for every ``typedef struct x x_t`` documented on the page."""
    aliases: dict[str, list[str]] = {}
    for desc in root.iter("desc"):
        if desc.get("objtype") != "type":
            continue
        signature = desc.find("desc_signature")
        text = collapse(" ".join(signature.itertext())) if signature is not None else ""
        match = _TYPEDEF_OF_TAG.match(text)
        if match and match.group(1) != match.group(2):
            aliases.setdefault(match.group(1), []).append(match.group(2))
    return aliases


def section_anchors(page: Page) -> dict[str, str]:
    """Every id on the page (section labels, API declarations) -> the section path that holds it,
    with the titles and root folding ``page_tree`` gives the rows' section paths."""
    renderer = _Renderer(page.doc_path, DEFAULT_MAX_WORDS)
    anchors: dict[str, str] = {}

    def title_of(elem: etree._Element) -> str:
        title = elem.find("title")
        return renderer.inline(title, Refs()) if title is not None else ""

    def walk(elem: etree._Element, path: tuple[str, ...]) -> None:
        for anchor in (elem.get("ids") or "").split():
            anchors.setdefault(anchor, PATH_SEPARATOR.join(path))
        for child in elem:
            if not isinstance(child.tag, str):
                continue
            walk(child, (*path, title_of(child)) if child.tag == "section" else path)

    top_sections = [c for c in page.root if c.tag == "section"]
    loose = [c for c in page.root if c.tag != "section"]
    root = (page.title,)
    for anchor in (page.root.get("ids") or "").split():
        anchors.setdefault(anchor, page.title)
    for elem in loose:
        walk(elem, root)
    single = len(top_sections) == 1 and not _body_blocks(renderer, loose)
    for index, elem in enumerate(top_sections):
        folded = single or (index == 0 and title_of(elem) == page.title)
        walk(elem, root if folded else (*root, title_of(elem)))
    return anchors


def page_tree(page: Page, max_words: int = DEFAULT_MAX_WORDS) -> Section:
    """The page as a Section tree whose root title is the page title.

    Most pages have one top-level section, which becomes the root. Include fragments have none
    (their text hangs off the document) and a few pages have several; then the document itself is
    the root and the first section's content is folded into it, so the title is not repeated.
    """
    renderer = _Renderer(page.doc_path, max_words, typedef_aliases(page.root))
    top_sections = [c for c in page.root if c.tag == "section"]
    loose_blocks = _body_blocks(renderer, [c for c in page.root if c.tag != "section"])
    if len(top_sections) == 1 and not loose_blocks:
        root = _section(renderer, top_sections[0])
        root.title = page.title
        return root
    root = Section(title=page.title, blocks=loose_blocks)
    for index, elem in enumerate(top_sections):
        section = _section(renderer, elem)
        if index == 0 and section.title == page.title:
            root.blocks.extend(section.blocks)
            root.children.extend(section.children)
        else:
            root.children.append(section)
    return root
