"""A C header scanned into items: each ``#define`` (with its parameters and value), declaration and
comment, with the comment that documents it kept beside it. ingest_source.py builds its cards and
text sections from these items; the capability headers and the census read them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIELD_SUFFIXES = ("_M", "_V", "_S")
IDENT = r"[A-Za-z_]\w*"
_DEFINE = re.compile(rf"^\s*#\s*define\s+({IDENT})(\([^)]*\))?\s*(.*)$", re.S)
_LICENSE = re.compile(r"SPDX-|Licensed under|Copyright", re.I)
_BANNER = re.compile(r"[-=*]{5,}")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


# ---------------------------------------------------------------- header scanning


@dataclass
class Item:
    """One top-level piece of a header: a #define, a declaration, or preprocessor glue.

    ``comment`` is the comment written just above it (the macro's explanation) and travels with it.
    """

    kind: str  # "define" | "decl" | "pp" | "banner"
    text: str
    names: list[str] = field(default_factory=list)
    params: str = ""
    value: str = ""
    comment: str = ""


_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")


def _strip_comments(code: str) -> str:
    # the substring tests skip the regex on the many lines without a comment
    if "/*" in code:
        code = _BLOCK_COMMENT.sub(" ", code)
    if "//" in code:
        code = _LINE_COMMENT.sub(" ", code)
    return code


def _decl_names(code: str) -> list[str]:
    """File-scope names a declaration introduces: typedef names, tags, enum constants, externs."""
    bare = _strip_comments(code)
    names: list[str] = []
    names += re.findall(rf"\b(?:struct|union|enum)\s+({IDENT})\s*\{{", bare)
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", bare, flags=re.S):
        names += re.findall(rf"(?:^|,)\s*({IDENT})\s*(?:=[^,]*)?(?=,|$)", body.strip(), flags=re.S)
    depth_zero = re.sub(r"\{[^{}]*\}", " ", bare)
    while "{" in depth_zero:
        reduced = re.sub(r"\{[^{}]*\}", " ", depth_zero)
        if reduced == depth_zero:
            break
        depth_zero = reduced
    if re.match(r"\s*typedef\b", depth_zero):
        func_ptr = re.search(rf"\(\s*\*\s*({IDENT})\s*\)", depth_zero)
        if func_ptr:
            names.append(func_ptr.group(1))
        else:
            names += re.findall(rf"({IDENT})\s*(?:\[[^\]]*\])*\s*[,;]", depth_zero)
    elif "(" in depth_zero and not depth_zero.lstrip().startswith('extern "C"'):
        func = re.search(rf"({IDENT})\s*\([^()]*\)\s*(?:__attribute__\s*\(\(.*\)\))?\s*;?\s*$", depth_zero)
        if func:
            names.append(func.group(1))
    else:
        names += re.findall(rf"({IDENT})\s*(?:\[[^\]]*\])*\s*(?:=[^,;]*)?[,;]", depth_zero)
    keywords = {"const", "volatile", "static", "extern", "struct", "union", "enum", "typedef", "int", "void"}
    return [n for n in dict.fromkeys(names) if n not in keywords]


def _brace_balance(code: str) -> int:
    bare = _strip_comments(code)
    return bare.count("{") - bare.count("}")


def scan_header(text: str) -> list[Item]:
    """Split a header into items, dropping licence text, include guards and C++ linkage glue."""
    lines = text.replace("\r\n", "\n").split("\n")
    items: list[Item] = []
    pending_comment: list[str] = []
    guard: str | None = None
    in_cplusplus = False
    index = 0

    def take_comment() -> str:
        comment = "\n".join(pending_comment).strip()
        pending_comment.clear()
        return comment

    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped:
            index += 1
            continue
        if stripped.startswith("/*") or stripped.startswith("//"):
            block = [line]
            if stripped.startswith("/*"):
                while "*/" not in block[-1] and index + 1 < len(lines):
                    index += 1
                    block.append(lines[index])
            index += 1
            comment = "\n".join(block)
            if _LICENSE.search(comment):
                continue
            # a register field's doc ("/** X : R/W; bitpos: ...; default: 39;\n *  ******* ...") is no banner
            if _BANNER.search(comment) and comment.count("\n") < 3 and not _FIELD_DOC.search(comment):
                title = re.sub(r"[/*\-=]+", " ", comment).strip()
                if title:
                    items.append(Item("banner", title))
                    continue
            pending_comment.append(comment)
            continue
        if stripped.startswith("#"):
            logical = [line]
            while (logical[-1].rstrip().endswith("\\") or _open_comment("\n".join(logical))) and (
                index + 1 < len(lines)
            ):
                index += 1
                logical.append(lines[index])
            index += 1
            directive = "\n".join(logical)
            define = _DEFINE.match(directive)
            if define:
                name = define.group(1)
                if name == guard:
                    continue
                value = define.group(3)
                if "\\\n" in value:
                    value = re.sub(r"\s*\\\n\s*", " ", value)
                value = value.strip()
                items.append(
                    Item(
                        "define",
                        directive,
                        [name],
                        params=define.group(2) or "",
                        value=value,
                        comment=take_comment(),
                    )
                )
                continue
            ifndef = re.match(rf"\s*#\s*ifndef\s+({IDENT})\s*$", directive)
            if ifndef and guard is None and not items and re.search(r"_H_*$", ifndef.group(1)):
                guard = ifndef.group(1)
                continue
            if re.match(r"\s*#\s*pragma\s+once", directive):
                continue
            if re.match(r"\s*#\s*if(def\s+|\s+defined\s*\(?\s*)__cplusplus", directive):
                in_cplusplus = True
                continue
            if re.match(r"\s*#\s*endif", directive) and (
                in_cplusplus or (guard and _only_blank_after(lines, index))
            ):
                in_cplusplus = False
                continue
            items.append(Item("pp", directive, comment=take_comment()))
            continue
        if in_cplusplus and (stripped in ("{", "}") or stripped.startswith('extern "C"')):
            index += 1  # C++ linkage glue
            continue
        # a C declaration: read until braces balance and a ';' ends it
        decl = [line]
        reader = _StrippedCode(line)
        while not reader.declaration_complete() and index + 1 < len(lines):
            index += 1
            decl.append(lines[index])
            reader.add(lines[index])
        index += 1
        code = "\n".join(decl)
        items.append(Item("decl", code, _decl_names(code), comment=take_comment()))
    if pending_comment and items:
        items[-1].text += "\n" + take_comment()
    elif pending_comment:
        items.append(Item("pp", take_comment()))  # a header that is only documentation
    return items


def _open_comment(code: str) -> bool:
    """True while a /* comment started in ``code`` has not been closed yet."""
    return "/*" in code and "/*" in _BLOCK_COMMENT.sub(" ", code)


class _StrippedCode:
    """Lines read one at a time, judged as ``_strip_comments`` of their join would be.

    Re-stripping the whole join after every line made a long declaration (a register struct of
    thousands of lines) quadratic. Lines settle at every point where no ``/*`` is left open: the
    comment patterns never match across such a point (it is a line break), so the stripped join is
    the stripped settled pieces in order, and each piece is stripped once."""

    def __init__(self, first_line: str) -> None:
        self.pending = ""  # raw text after the last settled point ("\n" + lines), unmatched /* in it
        self.open = False  # a /* comment is still open
        self.braces = 0  # "{" minus "}" of the stripped text
        self.last = ""  # last non-blank character of the stripped text
        self.settled: list[str] = []
        self._take(first_line)

    def add(self, line: str) -> None:
        self._take(f"{self.pending}\n{line}")

    def _take(self, text: str) -> None:
        if self.open and "*/" not in text[len(self.pending) :]:
            self.pending = text  # no comment can close without a "*/"
            return
        self.open = _open_comment(text)
        if self.open:
            self.pending = text
            return
        bare = _strip_comments(text)
        self.pending = ""
        self.settled.append(bare)
        self.braces += bare.count("{") - bare.count("}")
        tail = bare.rstrip()
        if tail:
            self.last = tail[-1]

    def declaration_complete(self) -> bool:
        """Braces balanced and ended by ';' -- or a closed function body (static inline helpers)."""
        if self.open or self.braces > 0:
            return False
        if self.last == ";":
            return True
        if self.last != "}":
            return False
        head = "".join(self.settled).split("{", 1)[0]
        return ")" in head and "=" not in head


def _only_blank_after(lines: list[str], index: int) -> bool:
    """Nothing but blank lines and comments from ``lines[index]`` on (read until the first code)."""
    if index >= len(lines):
        return True
    rest = _StrippedCode(lines[index])
    for line in lines[index + 1 :]:
        if rest.last:
            return False
        rest.add(line)
    return not rest.last and not rest.open


@dataclass(frozen=True)
class HeaderFile:
    path: Path
    rel_path: str  # repository path, e.g. components/soc/esp32c3/register/soc/uart_reg.h
    chips: tuple[str, ...]
    revisions: tuple[str, ...]


_FIELD_DOC = re.compile(
    # "bitpos:43]" (ESP32 dport_reg.h) and "bitpos: [3] for DATE == ... (rev 1.2)" occur upstream;
    # a long name wraps the comment before "default:" or its value onto a " *  " line (P4, S31)
    rf"/\*+\s*(?P<name>{IDENT})\s*:\s*(?P<access>[^;]*?)\s*;[\s*]*bitpos\s*:\s*\[?(?P<bits>[\d:\s]*)\]?[^;]*;"
    r"[\s*]*default\s*:[\s*]*(?P<default>[^;]*?)\s*;",
    re.S,
)


def _with_comment(item: Item) -> str:
    return f"{item.comment}\n{item.text}" if item.comment else item.text


@dataclass
class HeaderResult:
    rows: list[dict[str, Any]]
    card: bool
    declared: set[str]
