"""ESP-IDF SoC headers -> `src` chunk rows (DESIGN §5), plus the checks that prove nothing was lost.

Register headers are walls of per-field mask/shift macros, so each becomes a compact *card*: every
register with its address expression (what "where is X" needs) and one line per field (bits, access,
default, short description) from the generated field comments -- for many peripherals, and for chips
without a manual, the only register documentation there is.
Capability, struct and hand-written headers keep their full text, chunked per macro/declaration so
a value never loses its comment. ``reg_base.h`` is kept whole so a base address is one lookup away.
Each chip's linker script of peripheral instances (``ld/<chip>.peripherals.ld``: ``PROVIDE ( UART0 =
0x60000000 );``) is kept too: it places the instances the ``*_struct.h`` headers declare (``extern
uart_dev_t UART0;``), the only address some register headers' bases have upstream.

    uv run ingest_source.py --idf-path /work/esp-idf --out-path src_chunks.jsonl
    uv run ingest_source.py check-registers --trm-chunks trm_chunks.jsonl --src-chunks src_chunks.jsonl
    uv run ingest_source.py census --idf-path /work/esp-idf --src-chunks src_chunks.jsonl
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from capability_headers import acronym_spellings, capability_sections, comment_pairs, is_capability_header
from chip_vocab import chip_ids
from chunk_format import card_text, field_text, with_struct_fields_note
from chunking import Block, Section, chunk_tree, word_count
from header_checks import census, check_registers, declared_symbols
from header_scan import (
    _FIELD_DOC,
    _INCLUDE,
    _LICENSE,
    FIELD_SUFFIXES,
    IDENT,
    HeaderFile,
    HeaderResult,
    Item,
    _brace_balance,
    _strip_comments,
    _with_comment,
    scan_header,
)
from lexicon import NO_LEXICON, Lexicon, mine
from provenance import source_provenance
from releases import release_series, release_source, require_series
from revision_folders import revision_folder, revisions_for, unknown_folders_message
from schema import make_row, read_jsonl, write_jsonl
from source_links import IncludeIndex, link_rows
from sources import load_pins

SOC_DIR = Path("components/soc")
# Silicon-revision folders ESP-IDF keeps side by side (components/soc/CMakeLists.txt picks one per
# build from a Kconfig choice). Value: the chips.yaml revisions the folder's headers describe.
GROUP_WORDS = 60  # consecutive one-line macros share a block up to this size
# A struct stays one atomic block up to this size; past it (whole-peripheral register structs
# reach 11,000 words) it is cut between members, never inside one.
STRUCT_SPLIT_WORDS = 1200
# Register cards serve exact lookups (register tool, find_symbol), not vector search, so they are cut
# in bigger pieces: with field lines, 400-word pieces would add ~7,000 rows to embed, 1,200 ~1,000.
CARD_WORDS = 1200
_REGISTER_HEADING = re.compile(rf"^\s*/\*\*\s*({IDENT})\s+register\s*$")


class UsageError(Exception):
    """Bad command-line input: reported in one line with exit status 2."""


# ---------------------------------------------------------------- classification


def discover_headers(
    idf_path: Path, skip_folders: frozenset[str] = frozenset()
) -> tuple[list[HeaderFile], list[str]]:
    """Every .h under components/soc/include and components/soc/<chip>; also the skipped ones.

    ``skip_folders`` ("esp32p4/hw_ver4") leaves out revision folders the caller chose not to map.
    Every unmapped revision folder is named at once, before any header is read."""
    soc = idf_path / SOC_DIR
    found: list[HeaderFile] = []
    skipped: list[str] = []
    unknown: Counter[str] = Counter()
    folders: set[str] = set()
    # the shared headers hold for the chips this release supports (a folder of their own), not for
    # every chip known today: v4.4's soc/include says nothing about an esp32c6
    release_chips = tuple(chip for chip in chip_ids() if (soc / chip).is_dir())
    for path in sorted((soc / "include").rglob("*.h")):
        found.append(HeaderFile(path, path.relative_to(idf_path).as_posix(), release_chips, ()))
    for chip in chip_ids():
        chip_dir = soc / chip
        for path in sorted(chip_dir.rglob("*.h")):
            rel = path.relative_to(idf_path).as_posix()
            parts = path.relative_to(chip_dir).parts
            if any(p.startswith("hw_ver") for p in parts[:-1]):
                folders.add(revision_folder(rel))
            try:
                revisions = revisions_for(chip, parts, skip_folders)
            except KeyError:
                unknown[revision_folder(rel)] += 1
                continue
            if revisions is None:
                skipped.append(rel)
                continue
            found.append(HeaderFile(path, rel, (chip,), revisions))
    if stray := sorted(skip_folders - folders):
        raise UsageError(
            f"--skip-revision-folder {', '.join(stray)}: no such folder in {idf_path / SOC_DIR}; "
            f"its revision folders: {', '.join(sorted(folders)) or 'none'}"
        )
    if unknown:
        raise UsageError(unknown_folders_message(unknown))
    return found, skipped


LINKER_SCRIPT = "{chip}.peripherals.ld"  # components/soc/<chip>/ld/: where peripheral instances live
_PROVIDE = re.compile(rf"^\s*PROVIDE\s*\(\s*({IDENT})\s*=\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)\s*;", re.M)


def discover_linker_scripts(idf_path: Path) -> list[HeaderFile]:
    """Each chip's ``ld/<chip>.peripherals.ld``: one per chip, shared by its silicon revisions."""
    found: list[HeaderFile] = []
    for chip in chip_ids():
        path = idf_path / SOC_DIR / chip / "ld" / LINKER_SCRIPT.format(chip=chip)
        if path.is_file():
            found.append(HeaderFile(path, path.relative_to(idf_path).as_posix(), (chip,), ()))
    return found


def provided_symbols(text: str) -> dict[str, int]:
    """``PROVIDE ( UART0 = 0x60000000 );`` -> {"UART0": 0x60000000}, in file order."""
    return {m.group(1): int(m.group(2), 0) for m in _PROVIDE.finditer(_strip_comments(text))}


def linker_rows(script: HeaderFile, source_version: str, source_commit: str) -> HeaderResult:
    """A peripherals linker script as rows: its ``PROVIDE`` lines verbatim, each naming its symbol."""
    text = script.path.read_text(encoding="utf-8", errors="replace")
    provided = provided_symbols(text)
    lines = {m.group(1): m.group(0).strip() for m in _PROVIDE.finditer(_strip_comments(text))}
    blocks = [Block(lines[name], atomic=True, symbol_refs=[name]) for name in provided]
    root = Section(script.rel_path, blocks=group_blocks(blocks))
    rows = [
        make_row(
            text=chunk.text,
            doc_type="src",
            chips=script.chips,
            revisions=script.revisions,
            source_doc=script.path.name,
            section_path=chunk.section_path_text,
            file_path=script.rel_path,
            chunk_index=index,
            symbol_refs=chunk.symbol_refs,
            **release_fields(source_version, source_commit),
            source_version=source_version,
            source_commit=source_commit,
        )
        for index, chunk in enumerate(chunk_tree(root))
    ]
    return HeaderResult(rows, False, set(provided))


def release_fields(source_version: str, source_commit: str) -> dict[str, list[str]]:
    """The release axis of a row from this checkout (docs/releases.md); none when it names no series."""
    series = release_series(source_version)
    return {
        "releases": [series] if series else [],
        "release_sources": [release_source(source_version, source_commit)] if series else [],
    }


def field_macro_names(items: list[Item]) -> set[str]:
    """Per-field macros of generated register headers: X with X_V and X_S, plus X_M/X_V/X_S."""
    defined = {i.names[0] for i in items if i.kind == "define"}
    fields: set[str] = set()
    for name in defined:
        if f"{name}_V" in defined and f"{name}_S" in defined:
            fields.add(name)
            fields.update(f"{name}{s}" for s in FIELD_SUFFIXES if f"{name}{s}" in defined)
    return fields


def is_register_card(file_name: str, items: list[Item]) -> bool:
    """Generated register headers (mask/shift walls) become cards; hand-written *_reg.h stay text."""
    return file_name.endswith("_reg.h") and file_name != "reg_base.h" and bool(field_macro_names(items))


# ---------------------------------------------------------------- chunk building


def _unwrap(value: str) -> str:
    """``(DR_REG_X_BASE + 0x6c)`` -> ``DR_REG_X_BASE + 0x6c`` when the parentheses enclose it all."""
    value = _strip_comments(value).strip()
    while value.startswith("(") and value.endswith(")"):
        depth = 0
        for pos, char in enumerate(value):
            depth += (char == "(") - (char == ")")
            if depth == 0 and pos < len(value) - 1:
                return value
        value = value[1:-1].strip()
    return value


def _register_description(comment: str, name: str) -> str:
    """The one-line summary generated headers put under ``/** NAME register``."""
    lines = [ln.strip().lstrip("*").strip() for ln in comment.splitlines()]
    if not lines or not _REGISTER_HEADING.match(comment.splitlines()[0]) or name not in lines[0]:
        return ""
    body = [ln for ln in lines[1:] if ln and ln != "/"]
    return " ".join(body).removesuffix("*/").strip()


# ``union { struct { /** f : R/W; bitpos: [0]; default: 0; ... */ uint32_t f:1; ... }; uint32_t val; }
# io_mux_gpio_reg_t;`` -- what follows one "typedef" of a register header's companion *_struct.h
_REGISTER_TYPEDEF = re.compile(r"\s+union\s*\{(.*?)\}\s*(\w+_reg_t)\s*;", re.S)


def struct_field_lines(struct_text: str) -> dict[str, list[str]]:
    """Register typedef name -> its card field lines, from the field doc comments of a *_struct.h.

    Some generated register headers define a register without a single field comment while the
    struct header beside them documents every field of it (ESP32-S31 ``io_mux_reg.h`` vs
    ``io_mux_struct.h``): for chips without a manual that is the only layout there is. Member
    names are written upper case, as the register headers' field macros spell them."""
    found: dict[str, list[str]] = {}
    # one typedef at a time: a match must not run on into the next declaration
    declarations = struct_text.split("typedef")[1:]
    for typedef in filter(None, (_REGISTER_TYPEDEF.match(text) for text in declarations)):
        lines, low = [], 0
        for member in _BIT_FIELD_MEMBER.finditer(typedef.group(1)):
            width = int(member.group("width"))
            comment = member.group("comment") or ""
            if _FIELD_DOC.search(comment) is not None:
                # bits as the compiler lays the members out, not as the comment writes them
                # (ESP32-P4 comments say "bitpos: [5:6]")
                bits = str(low) if width == 1 else f"{low + width - 1}:{low}"
                lines.append(field_line(member.group("name").upper(), comment, {}, bits=bits))
            low += width
        if lines and low <= 32:
            found[typedef.group(2)] = lines
    return found


# ``/** doc */ uint32_t name:width;`` -- a bit-field member of a register typedef, its doc optional
_BIT_FIELD_MEMBER = re.compile(
    r"(?P<comment>/\*\*(?:(?!\*/).)*\*/)?\s*(?:volatile\s+)?uint32_t\s+(?P<name>\w+)"
    r"\s*:\s*(?P<width>\d+)\s*;",
    re.S,
)


def _struct_typedef_for(register: str, typedefs: dict[str, list[str]]) -> str | None:
    """The typedef a register's fields are documented under: ``X_REG`` -> ``x_reg_t``, a numbered
    instance also as ``xn_reg_t`` or without its number (``IO_MUX_GPIO5_REG`` -> ``io_mux_gpio_reg_t``)."""
    stem = register.lower().removesuffix("_reg")
    for candidate in (stem, re.sub(r"\d+", "n", stem), re.sub(r"\d+", "", stem)):
        if f"{candidate}_reg_t" in typedefs:
            return f"{candidate}_reg_t"
    return None


def card_blocks(items: list[Item], struct: tuple[str, dict[str, list[str]]] | None = None) -> list[Block]:
    """One block per register: ``NAME = address expression`` and a line per field (bits, access,
    default, short description) read from the generated field comments and _S/_V macros.

    ``struct``: the companion struct header's name and ``struct_field_lines``; a register without
    any field here takes the fields of its typedef there, and its line says so."""
    fields = field_macro_names(items)
    values = {i.names[0]: i.value for i in items if i.kind == "define"}
    blocks: list[Block] = []
    leading = _leading_comment(items)
    if leading:
        blocks.append(Block(leading))
    orphan_fields: list[str] = []
    orphan_lines: list[str] = []
    for item in items:
        if item.kind != "define":
            continue
        name = item.names[0]
        if name in fields:
            if not name.endswith(FIELD_SUFFIXES) or name[:-2] not in fields:
                # a field belongs to the register above it; fields before any register wait for one
                line = field_line(name, item.comment, values)
                if blocks and blocks[-1].symbol_refs:
                    blocks[-1].symbol_refs.append(name)
                    blocks[-1].text += "\n" + line
                else:
                    orphan_fields.append(name)
                    orphan_lines.append(line)
            continue
        line = card_text(name, item.params, _unwrap(item.value), _register_description(item.comment, name))
        if orphan_fields and not _same_peripheral(orphan_fields, name):
            # the layout every pad shares (SLP_OE, FUN_IE before IO_MUX_GPIO0_REG) is no one register's
            blocks.append(Block("\n".join(["Field macros:", *orphan_lines]), symbol_refs=list(orphan_fields)))
            orphan_fields.clear()
            orphan_lines.clear()
        blocks.append(
            Block("\n".join([line, *orphan_lines]), atomic=True, symbol_refs=[name, *orphan_fields])
        )
        orphan_fields.clear()
        orphan_lines.clear()
    if orphan_fields:
        blocks.append(Block("\n".join(["Field macros:", *orphan_lines]), symbol_refs=list(orphan_fields)))
    if struct is not None:
        for block in blocks:
            _borrow_struct_fields(block, *struct)
    return group_blocks(blocks)


def _same_peripheral(fields: list[str], register: str) -> bool:
    """Whether field macros written before a register name its peripheral (``UART_X`` for ``UART_Y_REG``)."""
    return all(field.split("_", 1)[0] == register.split("_", 1)[0] for field in fields)


def _borrow_struct_fields(block: Block, struct_name: str, typedefs: dict[str, list[str]]) -> None:
    """Give a register card without field lines the documented fields of its struct typedef."""
    if len(block.symbol_refs) != 1 or "\n" in block.text or " = " not in block.text:
        return  # a register with field lines of its own, or no register card at all
    typedef = _struct_typedef_for(block.symbol_refs[0], typedefs)
    if typedef is None:
        return
    block.text = "\n".join([with_struct_fields_note(block.text, struct_name, typedef), *typedefs[typedef]])


def field_line(name: str, comment: str, values: dict[str, str], bits: str | None = None) -> str:
    """``- NAME [hi:lo] (ACCESS) reset 0xV: description`` -- the TRM chunks' field format, so one
    parser reads both. Bits are ``bits`` when given, else from the ``_S``/``_V`` macros (what code
    uses), else the comment's, high first; ``reset x`` is a default the header leaves undefined."""
    doc = _FIELD_DOC.search(comment)
    bits = bits or _macro_bits(values.get(f"{name}_S"), values.get(f"{name}_V"))
    if bits is None and doc is not None:
        bits = _high_first(doc.group("bits").replace(" ", ""))
    access = doc.group("access").strip() if doc is not None else None
    reset = (parse_default(doc.group("default")) or "x") if doc is not None else None
    description = _field_description(comment[doc.end() :] if doc else "")
    return field_text(name, bits or "?", access, reset, description or None)


_VERILOG_NUMBER = re.compile(r"^(?P<neg>~)?\s*(?P<width>\d+)'(?P<base>[bBhHdD])(?P<digits>[0-9a-fA-F_]+)$")
DESCRIPTION_CHARS = 120  # a field's description on the card; the struct header and manual hold the rest


def parse_default(text: str) -> str | None:
    """A header default (``694``, ``12'h2B6``, ``1'b0``, ``~22'b0``, ``0x10``) as ``0x2B6``;
    None for an undefined (``x``), unreadable or per-revision one."""
    text = text.strip()
    verilog = _VERILOG_NUMBER.match(text)
    if verilog:
        base = {"b": 2, "h": 16, "d": 10}[verilog.group("base").lower()]
        width = int(verilog.group("width"))
        try:
            value = int(verilog.group("digits").replace("_", ""), base)
        except ValueError:  # e.g. 6'b32: a typo upstream, not a value
            return None
        if verilog.group("neg"):
            value = ~value & ((1 << width) - 1)
        return f"0x{value:X}"
    number = re.match(r"^(0[xX][0-9a-fA-F]+|\d+)\b", text)
    if number is None or "rev" in text:  # "... for rev 0.0" lists one default per silicon revision
        return None
    return f"0x{int(number.group(1), 0 if number.group(1)[:2].lower() == '0x' else 10):X}"


def _high_first(bits: str) -> str:
    """``5:6`` -> ``6:5``: one order for every source, so ranges compare as strings."""
    first, colon, second = bits.partition(":")
    if colon and first.isdigit() and second.isdigit() and int(first) < int(second):
        return f"{second}:{first}"
    return bits


def _macro_bits(shift: str | None, mask: str | None) -> str | None:
    """``_S`` 20 and ``_V`` 0xF -> ``23:20``; None unless both are numbers and the mask contiguous."""
    try:
        lsb = int(_unwrap(shift or "").rstrip("uUlL"), 0)
        value = int(_unwrap(mask or "").rstrip("uUlL"), 0)
    except ValueError:
        return None
    if value <= 0 or value & (value + 1):
        return None
    width = value.bit_length()
    return str(lsb) if width == 1 else f"{lsb + width - 1}:{lsb}"


def _field_description(comment: str) -> str:
    """The prose after a field's ``NAME : access; bitpos; default;`` line, one line, capped."""
    text = re.sub(r"/\*+|\*+/", " ", comment)
    text = re.sub(r"^\s*\*+", " ", text, flags=re.M).replace("description:", " ")
    text = " ".join(re.sub(r"\*{3,}", " ", text).split())  # "******* Description ****" placeholders
    if text.lower() == "description":
        return ""
    if len(text) <= DESCRIPTION_CHARS:
        return text
    return text[: DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _leading_comment(items: list[Item]) -> str:
    """The file's own introduction: comments before the first define that are not field docs."""
    parts: list[str] = []
    for item in items:
        if item.kind == "banner":
            parts.append(item.text)
            continue
        comment = item.comment.strip()
        if comment and not re.match(rf"/\*+\s*{IDENT}\s*(:|register\b)", comment):
            parts.append(comment)
        if item.kind == "define":
            break
    return "\n".join(parts)


def group_blocks(blocks: list[Block], max_words: int = GROUP_WORDS) -> list[Block]:
    """Pack consecutive small atomic blocks into one (newline-joined) so a wall of one-line macros
    reads as a list, not a line per paragraph; chunk splits still fall only between whole items."""
    grouped: list[Block] = []
    for block in blocks:
        previous = grouped[-1] if grouped else None
        if (
            previous is not None
            and previous.atomic
            and block.atomic
            and word_count(previous.text) + word_count(block.text) <= max_words
        ):
            previous.text += "\n" + block.text
            previous.symbol_refs = [*previous.symbol_refs, *block.symbol_refs]
            continue
        grouped.append(Block(block.text, block.atomic, list(block.symbol_refs)))
    return grouped


def text_sections(title: str, items: list[Item]) -> Section:
    """Full-text layout: banners become subsections, every define/declaration one atomic block."""
    root = Section(title)
    current = root
    prefix: list[str] = []
    for item in items:
        if item.kind == "banner":
            current = Section(item.text)
            root.children.append(current)
            continue
        if item.kind == "pp" and not re.match(r"\s*#\s*(endif|else|elif)", item.text):
            # an #if / #include introduces what follows: keep it with the next item
            prefix.append(_with_comment(item))
            continue
        if item.kind == "pp" and current.blocks:
            current.blocks[-1].text += "\n" + item.text
            continue
        body = "\n".join([*prefix, _with_comment(item)])
        prefix.clear()
        members = split_struct_members(body) if word_count(body) > STRUCT_SPLIT_WORDS else [body]
        if item.kind == "decl" and len(members) > 1:
            # a whole-peripheral struct of thousands of words: its own section, cut between members
            title = " / ".join(item.names) or "struct"
            blocks = [Block(m, atomic=True, symbol_refs=list(item.names)) for m in members]
            current.children.append(Section(title, blocks=blocks))
            continue
        current.blocks.append(Block(body, atomic=item.kind != "pp", symbol_refs=list(item.names)))
    if prefix:
        current.blocks.append(Block("\n".join(prefix)))
    _group_tree(root)
    return root


def _group_tree(section: Section) -> None:
    section.blocks = group_blocks(section.blocks)
    for child in section.children:
        _group_tree(child)


def split_struct_members(code: str) -> list[str]:
    """Cut a struct/union definition between its top-level members (each member whole, its
    comment with it); the opening line stays with the first member, the closing with the last."""
    lines = code.split("\n")
    opening = next((i for i, line in enumerate(lines) if "{" in _strip_comments(line)), None)
    if opening is None:
        return [code]
    pieces: list[list[str]] = []
    current = lines[: opening + 1]
    depth = _brace_balance("\n".join(current))
    for line in lines[opening + 1 :]:
        current.append(line)
        depth += _brace_balance(line)
        if depth == 1 and _strip_comments(line).rstrip().endswith(";"):
            pieces.append(current)
            current = []
    if current:
        if pieces:
            pieces[-1].extend(current)
        else:
            pieces.append(current)
    return ["\n".join(piece) for piece in pieces]


def read_header(header: HeaderFile) -> tuple[str, list[Item]]:
    """A header's text and its scanned items."""
    text = header.path.read_text(encoding="utf-8", errors="replace")
    return text, scan_header(text)


def header_rows(
    header: HeaderFile,
    source_version: str,
    source_commit: str,
    lexicon: Lexicon = NO_LEXICON,
    scanned: tuple[str, list[Item]] | None = None,
) -> HeaderResult:
    """All chunk rows of one header file; ``scanned`` is its ``read_header`` when already read."""
    text, items = scanned or read_header(header)
    name = header.path.name
    card = is_register_card(name, items)
    includes = [m.group(1) for m in map(_INCLUDE.match, text.splitlines()) if m]
    if card:
        struct_path = header.path.with_name(name.removesuffix("_reg.h") + "_struct.h")
        struct = None
        if struct_path.is_file():
            struct_text = struct_path.read_text(encoding="utf-8", errors="replace")
            struct = (struct_path.name, struct_field_lines(struct_text))
        root = Section(header.rel_path, blocks=card_blocks(items, struct))
    elif is_capability_header(name):
        root = capability_sections(header, items, lexicon)
    else:
        root = text_sections(header.rel_path, items)
    declared = declared_symbols(text)
    rows = []
    for index, chunk in enumerate(chunk_tree(root, max_words=CARD_WORDS) if card else chunk_tree(root)):
        rows.append(
            make_row(
                text=chunk.text,
                doc_type="src",
                chips=header.chips,
                revisions=header.revisions,
                source_doc=name,
                section_path=chunk.section_path_text,
                file_path=header.rel_path,
                chunk_index=index,
                symbol_refs=chunk.symbol_refs,
                file_refs=includes if index == 0 else (),
                **release_fields(source_version, source_commit),
                source_version=source_version,
                source_commit=source_commit,
            )
        )
    return HeaderResult(rows, card, declared)


# ---------------------------------------------------------------- ingest CLI


def ingest(
    idf_path: Path, out_path: Path, skip_folders: frozenset[str] = frozenset()
) -> dict[str, HeaderResult]:
    if not (idf_path / SOC_DIR).is_dir():
        raise UsageError(f"{idf_path} is not an ESP-IDF tree: {SOC_DIR} is missing")
    headers, skipped = discover_headers(idf_path, skip_folders)
    if not headers:
        raise UsageError(f"no headers found under {idf_path / SOC_DIR}")
    prov = source_provenance(idf_path)
    try:
        require_series(prov.version, f"the ESP-IDF checkout {idf_path}")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    scanned = {h.rel_path: read_header(h) for h in tqdm(headers, desc="scan", unit="file")}
    # The words for capability macro names are learned from the register headers' field comments.
    lexicon = mine(pair for _, items in scanned.values() for pair in comment_pairs(items))
    lexicon = replace(lexicon, acronyms=acronym_spellings(idf_path))
    results: dict[str, HeaderResult] = {}
    for header in tqdm(headers, desc="headers", unit="file"):
        rel = header.rel_path
        results[rel] = header_rows(header, prov.version, prov.commit, lexicon, scanned[rel])
    for script in discover_linker_scripts(idf_path):
        results[script.rel_path] = linker_rows(script, prov.version, prov.commit)
    includes = IncludeIndex.build(idf_path)
    repo_url = load_pins().idf_url
    linked: Counter[str] = Counter()
    for rel, result in results.items():
        text = (
            scanned[rel][0]
            if rel in scanned
            else (idf_path / rel).read_text(encoding="utf-8", errors="replace")
        )
        linked.update(
            dict(zip(("resolved", "system"), link_rows(result.rows, text, includes, repo_url), strict=True))
        )
    print(
        f"includes: {linked['resolved']} resolved to repository paths, {linked['system']} system or "
        "toolchain headers left out of file_refs",
        file=sys.stderr,
    )
    rows = (row for result in results.values() for row in result.rows)
    write_jsonl(out_path, rows)
    for folder, count in sorted(Counter(revision_folder(rel) for rel in skipped).items()):
        print(f"left out {count} headers of {folder} (not a revision chips.yaml names)", file=sys.stderr)
    return results


def _summarise(
    results: dict[str, HeaderResult], declared: int, reached: int, seconds: float, out_path: Path
) -> str:
    rows = sum(len(r.rows) for r in results.values())
    cards = sum(1 for r in results.values() if r.card)
    scripts = sum(1 for rel in results if rel.endswith(".ld"))
    return (
        f"{rows} src chunks from {len(results) - scripts} headers ({cards} register cards) and "
        f"{scripts} linker scripts -> {out_path}; "
        f"census {reached}/{declared} declared symbols in chunks; {seconds:.1f}s"
    )


def per_chip_counts(results: dict[str, HeaderResult]) -> dict[str, tuple[int, int]]:
    """chip -> (files, chunks), shared headers counted under 'all'."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for rel_path, result in results.items():
        key = "all" if rel_path.startswith(f"{SOC_DIR}/include/") else rel_path.split("/")[2]
        counts[key][0] += 1
        counts[key][1] += len(result.rows)
    return {k: (v[0], v[1]) for k, v in counts.items()}


# ---------------------------------------------------------------- CLI


def _load_rows(path: Path, what: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"{what} file not found: {path}")
    try:
        return list(read_jsonl(path))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _cmd_ingest(args: argparse.Namespace) -> str:
    started = time.monotonic()
    results = ingest(Path(args.idf_path), Path(args.out_path), frozenset(args.skip_revision_folder))
    for chip, (files, chunks) in sorted(per_chip_counts(results).items()):
        print(f"  {chip:10s} {files:4d} headers {chunks:5d} chunks")
    declared, reached, gaps = census(results)
    for rel, missing in gaps[:20]:
        print(f"  census gap {rel}: {', '.join(missing[:8])}", file=sys.stderr)
    return _summarise(results, declared, reached, time.monotonic() - started, Path(args.out_path))


def _cmd_check_registers(args: argparse.Namespace) -> str:
    trm_rows = _load_rows(Path(args.trm_chunks), "TRM chunks")
    src_rows = _load_rows(Path(args.src_chunks), "src chunks")
    report = check_registers(trm_rows, src_rows)
    if not report:
        raise UsageError(f"no 'Register NAME' lines in doc_type trm rows of {args.trm_chunks}")
    total = resolved = 0
    for chip, facts in report.items():
        total += facts["trm_registers"]
        resolved += facts["resolved"]
        cats = ", ".join(f"{k} {v}" for k, v in sorted(facts["categories"].items()))
        print(
            f"{chip:16s} {facts['resolved']:5d}/{facts['trm_registers']:5d} {facts['share']:6.1%}  ({cats})"
        )
        for category, names in facts["samples"].items():
            if names:
                print(f"    {category}: {', '.join(names)}")
    share = resolved / total if total else 0.0
    if share < args.min_share:
        raise UsageError(f"register resolution {share:.1%} is below --min-share {args.min_share:.0%}")
    return f"{resolved}/{total} TRM registers ({share:.1%}) resolve to a #define in the same chip's headers"


def _cmd_census(args: argparse.Namespace) -> str:
    """Re-derive declared symbols from the tree and check each reached a chunk of its file."""
    idf_path = Path(args.idf_path)
    if not (idf_path / SOC_DIR).is_dir():
        raise UsageError(f"{idf_path} is not an ESP-IDF tree: {SOC_DIR} is missing")
    rows = _load_rows(Path(args.src_chunks), "src chunks")
    per_file: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        per_file[row["file_path"]].update(row["symbol_refs"])
    headers, _ = discover_headers(idf_path)
    linker = discover_linker_scripts(idf_path)
    scripts = {s.rel_path for s in linker}
    headers += linker
    declared_total = reached = 0
    missing_files: list[str] = []
    for header in tqdm(headers, desc="census", unit="file"):
        text = header.path.read_text(encoding="utf-8", errors="replace")
        declared = set(provided_symbols(text)) if header.rel_path in scripts else declared_symbols(text)
        if header.rel_path not in per_file and not _only_licence(text):
            missing_files.append(header.rel_path)
        lost = sorted(declared - per_file.get(header.rel_path, set()))
        declared_total += len(declared)
        reached += len(declared) - len(lost)
        if lost:
            print(f"  {header.rel_path}: {len(lost)} missing, e.g. {', '.join(lost[:6])}")
    for rel in missing_files[:20]:
        print(f"  no chunk at all: {rel}")
    summary = (
        f"census: {reached}/{declared_total} declared symbols reached chunks; "
        f"{len(headers) - len(missing_files)}/{len(headers)} headers and linker scripts have chunks"
    )
    if reached != declared_total or missing_files:
        raise UsageError(summary)
    return summary


def _only_licence(text: str) -> bool:
    """A header with nothing but its licence comment and ``#pragma once`` rightly has no chunk."""
    comments = [c for c in re.findall(r"/\*.*?\*/|//[^\n]*", text, flags=re.S) if not _LICENSE.search(c)]
    code = re.sub(r"^\s*#\s*pragma\s+once\s*$", "", _strip_comments(text), flags=re.M)
    return not comments and not code.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idf-path", help="ESP-IDF checkout (ingest)")
    parser.add_argument("--out-path", default="src_chunks.jsonl", help="JSONL to write (ingest)")
    parser.add_argument(
        "--skip-revision-folder",
        action="append",
        default=[],
        metavar="CHIP/FOLDER",
        help="leave out a silicon-revision folder no mapping covers, e.g. esp32p4/hw_ver4 (repeatable)",
    )
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check-registers", help="TRM register names resolved by header #defines")
    check.add_argument("--trm-chunks", required=True)
    check.add_argument("--src-chunks", required=True)
    check.add_argument("--min-share", type=float, default=0.0, help="fail (exit 2) below this share")
    cen = sub.add_parser("census", help="declared symbols per header vs what reached chunks")
    cen.add_argument("--idf-path", required=True)
    cen.add_argument("--src-chunks", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check-registers":
            summary = _cmd_check_registers(args)
        elif args.command == "census":
            summary = _cmd_census(args)
        else:
            if not args.idf_path:
                raise UsageError("--idf-path is required (an ESP-IDF checkout)")
            summary = _cmd_ingest(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
