"""Structured register answers (the ``esp32_docs_register`` tool) from the chunk store.

The manual (doc_type ``trm``) documents a register's offset, reset value and fields; the SoC headers
(doc_type ``src``) give the C address expression and, through ``reg_base.h``, the peripheral base.
Joining the two per chip answers "what is X", "what is at 0x6000_4000" and "what changed between
chips or ESP32-P4 revisions" as JSON. Everything is an exact filter on ``symbol_refs``/``doc_type``/
``chips``: no embedding is involved, so vectors in the table are irrelevant here.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import functools
import itertools
import re
import threading
from collections import ChainMap, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chip_vocab import chips, normalize_chip, validate_chip, validate_revision
from latex_parser import ABSOLUTE_ADDRESS_PREFIX, OFFSET_LIMIT
from lexicon import TERMS_PREFIX
from releases import ReleaseIndex, newest_first

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD_LINE = re.compile(
    r"^- (?P<name>.+?) \[(?P<bits>\d+(?::\d+)?|\?)\]"
    r"(?: \((?P<access>[^)]*)\))?(?: reset (?P<reset>[^:\s]+))?(?:: (?P<description>.*))?$"
)
# a register summary table's row: its Name cell, and its Address cell when the manual prints one
_SUMMARY_ROW = re.compile(r"^([A-Z][A-Z0-9_]*) \| (?:[^|\n]* \| (0x[0-9A-Fa-f_]+) \|)?", re.MULTILINE)
# a register block's heading line; MULTILINE so that fusion can find every heading in a chunk
REGISTER_HEADING = re.compile(r"^Register (?P<name>\S+)(?: \((?P<note>.*)\))?[ \t]*$", re.MULTILINE)
# "n: 0-7", "n: 0-21, 26-48", "x: 0-19, 20^1, 21-23" (a footnote mark), "n: GPIO0-GPIO21, GPIO26-GPIO46"
# "n: 0-7", and as a few manuals write it, "m = 2, 3"
_PARAM_SPEC = re.compile(r"([A-Za-z]\w*)\s*[:=]\s*(.*?)(?=,\s*[A-Za-z]\w*\s*[:=]|$)")
_PARAM_SPAN = re.compile(r"([A-Za-z]*)(\d+)(?:\^\d+)?(?:\s*[-~–]\s*([A-Za-z]*)(\d+)(?:\^\d+)?)?")
_CARD_LINE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)(?P<params>\([^)]*\))? = (?P<value>.+?)(?:  // (?P<desc>.*))?$"
)
_DEFINE_LINE = re.compile(
    r"^\s*#\s*define\s+(?P<name>[A-Za-z_]\w*)(?P<params>\([^)]*\))?\s+(?P<value>.+?)\s*$"
)
# Address arithmetic runs for every macro of a chip when its index is built: compiled once here.
_C_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_INTEGER_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_INTEGER = re.compile(r"0[xX][0-9a-fA-F]+|\d+")
_NOT_ARITHMETIC = re.compile(r"[^0-9a-fA-FxX+\-*/()<>|&~?:=! \t]|!(?!=)")
_BASE_NAME = re.compile(r"DR_REG_\w+_BASE")
_REGISTER_NAME = re.compile(r"_REG(?:_\d+)?$")  # X_REG, X_REG_1; not SET_PERI_REG_MASK
_C_COMMENT = re.compile(r"/\*.*?\*/|//.*$")
_PROVIDE_LINE = re.compile(r"^\s*PROVIDE\s*\(\s*([A-Za-z_]\w*)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)\s*;")
_EXTERN = re.compile(r"^\s*extern\s+(?:volatile\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*;", re.M)
_MAP_ROW = re.compile(r"^(?P<name>[^|\n]+?)\s*\|\s*(?P<low>0x[0-9A-Fa-f_]+)\s*\|\s*0x[0-9A-Fa-f_]+", re.M)
_LINKER_SCRIPT = ".peripherals.ld"  # components/soc/<chip>/ld/<chip>.peripherals.ld
# accessors that read hardware: an address computed with one exists only at run time
_RUNTIME_READS = frozenset(("REG_READ", "REG_GET_FIELD", "REG_GET_BIT", "READ_PERI_REG", "GET_PERI_REG_MASK"))
_MAX_ROWS = 200_000
_INSTANCE_LIMIT = 16
_MAX_INSTANCES = 256  # instances of one parameterised manual register put in the address map


# ---------------------------------------------------------------- parsing the TRM rendering


def parse_register_block(text: str) -> dict[str, Any]:
    """Parse one register as rendered by the TRM chunks (notes/REGISTER_FORMAT.md).

    ``text`` starts with its ``Register NAME`` line; parsing stops at the first line outside the
    format, so a whole chunk tail may be passed.
    """
    lines = text.strip().splitlines()
    head = REGISTER_HEADING.match(lines[0]) if lines else None
    if head is None:
        raise ValueError(f"not a register block: expected 'Register NAME' first, got {lines[:1]!r}")
    register: dict[str, Any] = {
        "name": head.group("name"),
        "parameters": parameter_ranges(head.group("note") or ""),
        "parameter_note": head.group("note"),
        "address": None,
        "reset": None,
        "fields": [],
    }
    for line in lines[1:]:
        if line.startswith("Address: "):
            register["address"] = line.removeprefix("Address: ").strip()
        elif line.startswith("Reset value: "):
            register["reset"] = line.removeprefix("Reset value: ").strip()
        elif line.startswith("Summary: "):
            register["summary"] = line.removeprefix("Summary: ").strip()
        elif line.startswith((TERMS_PREFIX, ABSOLUTE_ADDRESS_PREFIX)):
            # the lexicon's expansions of the names, and the summary table's absolute addresses:
            # search aids (the register tool derives the absolute address itself: _absolute_answer)
            continue
        elif line.strip() == "Fields:":
            continue
        elif (match := _FIELD_LINE.match(line)) is not None:
            register["fields"].append(_field(match))
        else:
            break
    return register


def register_blocks(text: str) -> list[dict[str, Any]]:
    """Every register rendered in one chunk's text, in order."""
    lines = text.splitlines()
    starts = [
        i for i, line in enumerate(lines) if line.startswith("Register ") and REGISTER_HEADING.match(line)
    ]
    ends = [*starts[1:], len(lines)][: len(starts)]
    return [parse_register_block("\n".join(lines[i:end])) for i, end in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class ParameterRange:
    """The instances a manual register's parameter takes: one or more spans of numbers, written with
    a prefix when the manual names them so (``n: GPIO0-GPIO21, GPIO26-GPIO46``: prefix ``GPIO``)."""

    spans: tuple[tuple[int, int], ...]
    prefix: str = ""

    def holds(self, value: int) -> bool:
        return any(low <= value <= high for low, high in self.spans)

    def values(self) -> list[int]:
        return [value for low, high in self.spans for value in range(low, high + 1)]


def parameter_ranges(note: str) -> dict[str, ParameterRange | None]:
    """``n: 0-7`` -> {"n": spans ((0, 7),)}; ``n: 0-21, 26-48`` keeps both spans. A parameter whose
    values are not all numbers (or spans of them) under one prefix maps to None: range unknown."""
    ranges: dict[str, ParameterRange | None] = {}
    for name, spec in _PARAM_SPEC.findall(note):
        spans: list[tuple[int, int]] = []
        prefixes: set[str] = set()
        for item in (part.strip() for part in spec.split(",")):
            match = _PARAM_SPAN.fullmatch(item)
            if match is None:
                spans = []
                break
            first_prefix, low, second_prefix, high = match.groups()
            prefixes |= {first_prefix, second_prefix if high else first_prefix}
            spans.append((int(low), int(high or low)))
        ranges[name] = ParameterRange(tuple(spans), prefixes.pop()) if spans and len(prefixes) == 1 else None
    return ranges


def parameter_regex(
    name: str, parameters: dict[str, ParameterRange | None], any_prefix: bool = False
) -> re.Pattern[str] | None:
    """``AES_KEY_n_REG`` with parameter n -> a regex whose named groups capture the instance numbers.

    Without a parameter note, lower-case tokens (``_n_``, ``CHx``) are taken as the parameters.
    ``any_prefix``: a number the note gives bare may be written after letters (``IO_MUX_x_REG``,
    x: 0-39, as ``IO_MUX_GPIO0_REG``).
    """
    letters = list(parameters) or sorted(set(re.findall(r"(?<![a-z])([a-z]{1,2})(?![a-z])", name)))
    if not letters:
        return None
    alternation = "|".join(sorted(map(re.escape, letters), key=len, reverse=True))
    pieces: list[str] = []
    seen: set[str] = set()
    position = 0
    for match in re.finditer(rf"(?<![a-z])({alternation})(?![a-z])", name):
        pieces.append(re.escape(name[position : match.start()]))
        letter = match.group(1)
        group = f"p_{letter}"
        declared = parameters.get(letter)
        prefix = (
            re.escape(declared.prefix) if declared and declared.prefix else "[A-Z]+" if any_prefix else ""
        )
        pieces.append(f"{prefix}(?P={group})" if letter in seen else rf"{prefix}(?P<{group}>\d+)")
        seen.add(letter)
        position = match.end()
    if not seen:
        return None
    pieces.append(re.escape(name[position:]))
    return re.compile("^" + "".join(pieces) + "$")


# ---------------------------------------------------------------- C expression evaluation


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    body: str
    file_path: str
    revisions: tuple[str, ...]
    description: str = ""


def evaluate(
    expression: str, macros: Mapping[str, Macro], depth: int = 0, memo: dict[str, int | None] | None = None
) -> int | None:
    """Value of a header address expression (macros expanded), or None when it is not constant.

    ``memo`` caches object-like macro values across calls (a chip has thousands of registers
    over a few dozen bases)."""
    if depth > 12:
        return None
    expanded = _expand(expression, macros, depth, memo)
    if expanded is None:
        return None
    arithmetic = _INTEGER_SUFFIX.sub(r"\1", expanded)
    if _SUM_ONLY.fullmatch(arithmetic):
        # base + offset, the shape of almost every register address: no parser needed
        return sum(_c_int(token) for token in _INTEGER.findall(arithmetic))
    if _NOT_ARITHMETIC.search(arithmetic):
        return None
    python = _ternary_to_python(arithmetic.replace("/", "//").replace("&&", " and ").replace("||", " or "))
    try:
        tree = ast.parse(python, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _ALLOWED_NODES) for node in ast.walk(tree)):
        return None
    try:
        value = eval(compile(tree, "<address>", "eval"), {"__builtins__": {}})  # checked: arithmetic only
    except (ArithmeticError, ValueError):
        return None
    return int(value) if isinstance(value, int) else None


_SUM_ONLY = re.compile(
    r"[\s()+]*(?:0[xX][0-9a-fA-F]+|[1-9]\d*|0)(?:[\s()+]+(?:0[xX][0-9a-fA-F]+|[1-9]\d*|0))*[\s()]*"
)


def _c_int(token: str) -> int:
    return int(token, 16) if token[:2].lower() == "0x" else int(token)


_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Constant,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.LShift,
    ast.RShift,
    ast.BitOr,
    ast.BitAnd,
    ast.Invert,
    ast.USub,
    ast.UAdd,
    ast.And,
    ast.Or,
    ast.Gt,
    ast.Lt,
    ast.GtE,
    ast.LtE,
    ast.Eq,
    ast.NotEq,
)


def _ternary_to_python(expression: str) -> str:
    """C ``c ? a : b`` -> Python ``(a) if (c) else (b)``, innermost group first
    (ESP32's REG_UART_BASE(i) picks UART2's base with one)."""
    question = expression.find("?")
    if question < 0:
        return expression
    depth, start = 0, 0
    for pos in range(question - 1, -1, -1):
        depth += (expression[pos] == ")") - (expression[pos] == "(")
        if depth < 0:
            start = pos + 1
            break
    depth, colon, end = 0, -1, len(expression)
    for pos in range(question + 1, len(expression)):
        char = expression[pos]
        depth += (char == "(") - (char == ")")
        if depth == 0 and char == ":" and colon < 0:
            colon = pos
        if depth < 0:
            end = pos
            break
    if colon < 0:
        return expression
    condition, then, otherwise = (
        expression[start:question],
        expression[question + 1 : colon],
        expression[colon + 1 : end],
    )
    then, condition, otherwise = (_ternary_to_python(part) for part in (then, condition, otherwise))
    converted = f"(({then}) if ({condition}) else ({otherwise}))"
    return _ternary_to_python(expression[:start] + converted + expression[end:])


def _expand(
    expression: str, macros: Mapping[str, Macro], depth: int, memo: dict[str, int | None] | None
) -> str | None:
    out: list[str] = []
    position = 0
    for match in _C_IDENTIFIER.finditer(expression):
        if match.start() < position:
            continue
        name = match.group(0)
        if _inside_number(expression, match.start()):
            continue
        out.append(expression[position : match.start()])
        position = match.end()
        if name == "BIT":
            args, position = _call_args(expression, position)
            if args is None or len(args) != 1:
                return None
            out.append(f"(1 << ({args[0]}))")
            continue
        macro = macros.get(name)
        if macro is None:
            return None
        body = macro.body
        if macro.params is not None:
            args, position = _call_args(expression, position)
            if args is None or len(args) != len(macro.params):
                return None
            call = f"{name}({','.join(args)})"
            if memo is not None and call in memo:
                value = memo[call]
            else:
                for param, arg in zip(macro.params, args, strict=True):
                    body = re.sub(rf"\b{re.escape(param)}\b", f"({arg})", body)
                value = evaluate(body, macros, depth + 1, memo)
                if memo is not None:
                    memo[call] = value
        elif memo is not None and name in memo:
            value = memo[name]
        else:
            value = evaluate(body, macros, depth + 1, memo)
            if memo is not None:
                memo[name] = value
        if value is None:
            return None
        out.append(f"({value})")
    out.append(expression[position:])
    return "".join(out)


def _inside_number(text: str, start: int) -> bool:
    """An identifier-looking match that is really the tail of a hex literal (``0x6c``)."""
    return start > 0 and (text[start - 1].isdigit() or text[start - 1] in "xX")


def _call_args(text: str, position: int) -> tuple[list[str] | None, int]:
    rest = text[position:]
    stripped = rest.lstrip()
    if not stripped.startswith("("):
        return None, position
    start = position + len(rest) - len(stripped)
    depth = 0
    args: list[str] = []
    current: list[str] = []
    for index in range(start, len(text)):
        char = text[index]
        if char == "(":
            depth += 1
            if depth == 1:
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return [a for a in args if a], index + 1
        elif char == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    return None, position


# ---------------------------------------------------------------- the per-chip index


@dataclass
class TrmEntry:
    register: dict[str, Any]
    row: dict[str, Any]


@dataclass
class ChipIndex:
    """What one chip (at one revision) documents and defines, built once per table version."""

    chip: str
    revision: str | None
    trm: dict[str, list[TrmEntry]] = field(default_factory=dict)
    parameterised: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    summary_names: dict[str, str] = field(default_factory=dict)  # summary-table name -> chapter file
    summary_addresses: dict[int, str] = field(default_factory=dict)  # absolute summary address -> chapter
    macros: dict[str, Macro] = field(default_factory=dict)
    header_fields: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # card field lines
    mask_only: set[str] = field(default_factory=set)  # registers whose header fields are bare masks

    memo: dict[str, int | None] = field(default_factory=dict)  # object-like macro values
    _addresses: dict[int, list[tuple[str, int]]] | None = None
    _bases: dict[str, int] | None = None
    _field_owners: dict[str, list[str]] | None = None
    _base_owners: list[tuple[int, list[str]]] | None = None
    _base_values: list[int] = field(default_factory=list)  # base_owners' addresses, for bisect
    # (chapter, prefix[@base]) -> (votes per (base value, base macro), whether siblings use several bases)
    _chapter_bases: dict[tuple[str, str], tuple[dict[tuple[int, str], int], bool]] = field(
        default_factory=dict
    )
    linker: dict[str, int] = field(default_factory=dict)  # PROVIDE(NAME = value) of the chip's .ld
    linker_file: str | None = None
    memory_map: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # manual's table
    table: Any = None  # the store, for the struct headers' instance declarations read on demand
    release: str | None = None  # the ESP-IDF release whose headers this index reads (None: any)
    _externs: dict[str, list[tuple[str, str]] | None] = field(default_factory=dict)
    _base_sources: dict[str, tuple[BaseSource | None, str]] = field(default_factory=dict)
    _overlay_memos: dict[tuple[str, str, int], dict[str, int | None]] = field(default_factory=dict)
    _source_cache: dict[tuple[Any, ...], Any] = field(
        default_factory=dict
    )  # per missing base, not per register
    _base_keys: list[tuple[str, Macro]] | None = None  # (_base_key, macro) of every *_BASE macro
    _trm_by_chapter: dict[str, list[tuple[str, TrmEntry]]] | None = None
    _spelled: dict[str, list[tuple[re.Pattern[str], str]]] = field(default_factory=dict)
    # instance_addresses per register macro: the address map and the manual's registers both ask
    _instances: dict[Macro, list[tuple[int, int]]] = field(default_factory=dict)

    def header_registers(self) -> list[Macro]:
        """Register macros (``X_REG``, ``X_REG(i)``, ``X_REG_1``), not base, field or accessor macros."""
        return [
            m
            for m in self.macros.values()
            if _REGISTER_NAME.search(m.name)
            and not _is_base_macro(m.name)
            # READ_PERI_REG(addr), IS_DPORT_REG(r) and friends are accessors and predicates
            and not m.body.startswith(("do", "({"))
            and not m.name.startswith(("IS_", "ASSERT_"))
        ]

    def bases(self) -> dict[str, int]:
        """``DR_REG_*_BASE`` -> value, from reg_base.h (and soc.h on older trees)."""
        if self._bases is None:
            self._bases = {
                name: value
                for name in self.macros
                if _BASE_NAME.fullmatch(name)
                and (value := evaluate(name, self.macros, memo=self.memo)) is not None
            }
        return self._bases

    def field_owners(self) -> dict[str, list[str]]:
        """Field name -> the documented registers that have it, built on the first field lookup."""
        if self._field_owners is None:
            self._field_owners = defaultdict(list)
            for register, entries in self.trm.items():
                for field_name in dict.fromkeys(f["name"] for f in entries[0].register["fields"]):
                    self._field_owners[field_name].append(register)
        return self._field_owners

    def addresses(self) -> dict[int, list[tuple[str, int]]]:
        """Absolute address -> (register name, header instance): every header register at every real
        instance, then every manual register the headers do not define (``AES_KEY_n_REG`` at each n,
        a peripheral without a register header such as TWAI) at documented offset + peripheral base."""
        if self._addresses is None:
            self._addresses = defaultdict(list)
            for macro in self.header_registers():
                for instance, value in instance_addresses(self, macro):
                    self._addresses[value].append((macro.name, instance))
            for name, value in _manual_addresses(self):
                if (name, 0) not in self._addresses[value]:
                    self._addresses[value].append((name, 0))
        return self._addresses

    def add_trm_register(self, register: dict[str, Any], row: dict[str, Any]) -> None:
        """File one manual register block under its name, and a parameterised register's first block
        under its instance pattern too (RMT_CH2CONF0_REG is found as RMT_CHmCONF0_REG (m = 2, 3))."""
        entries = self.trm.setdefault(register["name"], [])
        entries.append(TrmEntry(register, row))
        pattern = parameter_regex(register["name"], register["parameters"])
        if pattern is not None and len(entries) == 1:
            self.parameterised.append((pattern, register["name"]))

    def base_owners(self) -> list[tuple[int, list[str]]]:
        """Peripheral bases in address order, each with every ``DR_REG_*_BASE`` name it has."""
        if self._base_owners is None:
            owners: dict[int, list[str]] = defaultdict(list)
            for name, value in self.bases().items():
                owners[value].append(name)
            self._base_owners = sorted((value, sorted(names)) for value, names in owners.items())
            self._base_values = [value for value, _ in self._base_owners]
        return self._base_owners

    def spelled_patterns(self, chapter: str) -> list[tuple[re.Pattern[str], str]]:
        """The chapter's parameterised registers, letting a number the note gives bare be spelled
        with letters first (``IO_MUX_GPIO0_REG`` for ``IO_MUX_x_REG``). Built on first need: only
        names a register summary lists that matched nothing else get here, and compiling a second
        pattern for every parameterised register made the index build half as slow again."""
        if chapter not in self._spelled:
            self._spelled[chapter] = [
                (pattern, name)
                for name, entry in self.trm_in_chapter(chapter)
                if (pattern := parameter_regex(name, entry.register["parameters"], any_prefix=True))
                is not None
            ]
        return self._spelled[chapter]

    def trm_in_chapter(self, file_path: str) -> list[tuple[str, TrmEntry]]:
        """The manual registers (name, first entry) documented in one chapter file, in index order."""
        if self._trm_by_chapter is None:
            self._trm_by_chapter = defaultdict(list)
            for name, entries in self.trm.items():
                self._trm_by_chapter[entries[0].row["file_path"]].append((name, entries[0]))
        return self._trm_by_chapter.get(file_path, [])

    def owning_base(self, address: int) -> tuple[int, list[str]] | None:
        """The highest base at or below ``address``: the peripheral block it lies in, if any."""
        owners = self.base_owners()
        position = bisect.bisect_right(self._base_values, address)
        return owners[position - 1] if position else None


def _is_base_macro(name: str) -> bool:
    return name.endswith("_BASE") or name.startswith(("DR_REG_", "REG_"))


# the table itself is kept with its index: holding the reference keeps id(table) from being reused
# by another table (another store) while the entry lives
_INDEX_CACHE: dict[tuple[int, int, str, str | None], tuple[Any, ChipIndex]] = {}


def _rows(table: Any, where: str, columns: list[str]) -> list[dict[str, Any]]:
    return table.search().where(where).select(columns).limit(_MAX_ROWS).to_list()


def _quote(value: str) -> str:
    """A value validated as an identifier/chip/revision; quoting is belt and braces."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
        raise ValueError(f"refusing to filter on {value!r}: only letters, digits, '_', '.', '-' are allowed")
    return "'" + value + "'"


def _quote_path(value: str) -> str:
    """A repository path taken from a stored row, quoted for a filter."""
    if not re.fullmatch(r"[A-Za-z0-9_./\-]+", value):
        raise ValueError(f"refusing to filter on {value!r}: not a plain repository path")
    return "'" + value + "'"


def _in_revision(row: dict[str, Any], revision: str | None) -> bool:
    return revision is None or not row["revisions"] or revision in row["revisions"]


def chip_index(table: Any, chip: str, revision: str | None, release: str | None = None) -> ChipIndex:
    """Parse the chip's TRM registers and header macros once per (table version, chip, revision,
    ESP-IDF release): the headers of one release, the manual of every release."""
    key = (id(table), table.version, chip, revision, release)
    if key in _INDEX_CACHE:
        return _INDEX_CACHE[key][1]
    index = ChipIndex(chip, revision, table=table, release=release)
    columns = ["text", "chips", "revisions", "source_doc", "section_path", "file_path", "chunk_index"]
    columns += ["source_version", "source_commit"]
    # "Register " is tested here, not in SQL: a LIKE over every text is 5x slower than the fetch
    trm_where = f"doc_type = 'trm' AND array_has(chips, {_quote(chip)})"
    for row in _rows(table, trm_where, columns):
        if not _in_revision(row, revision):
            continue
        if row["section_path"].endswith("Address Mapping"):
            _collect_memory_map(row, index)
        if "Register Summary" in row["section_path"]:
            for name, address in _SUMMARY_ROW.findall(row["text"]):
                index.summary_names.setdefault(name, row["file_path"])
                if address and (value := int(address.replace("_", ""), 16)) >= OFFSET_LIMIT:
                    index.summary_addresses.setdefault(value, row["file_path"])
        if "Register " not in row["text"]:
            continue
        for register in register_blocks(row["text"]):
            index.add_trm_register(register, row)
    src_where = (
        f"doc_type = 'src' AND array_has(chips, {_quote(chip)}) AND "
        "(source_doc LIKE '%\\_reg.h' ESCAPE '\\' OR source_doc IN ('soc.h', 'reg_base.h') "
        f"OR source_doc LIKE '%{_LINKER_SCRIPT}')"
    )
    raw_headers: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for row in _rows(table, src_where, [*columns, "symbol_refs", "releases"]):
        if not _in_revision(row, revision) or (release is not None and release not in row["releases"]):
            continue
        if row["source_doc"].endswith(_LINKER_SCRIPT):
            _collect_linker(row, index)
        else:
            _collect_macros(row, index)
            if "#define" in row["text"]:  # hand-written header text; register cards have no #define
                raw_headers[row["file_path"]].append((row["chunk_index"], row["text"]))
    for file_path, chunks in raw_headers.items():  # a register's masks may run into the next chunk
        _collect_mask_fields(file_path, [text for _, text in sorted(chunks)], index)
    if len(_INDEX_CACHE) > 64:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[key] = (table, index)
    return index


def _collect_macros(row: dict[str, Any], index: ChipIndex) -> None:
    """Register-card lines (``NAME = expr  // desc``), the field lines under them (``- F [3:0] ...``)
    and raw ``#define`` lines of full-text rows. The first definition of a name wins, fields too."""
    revisions = tuple(row["revisions"])
    owner: str | None = None  # the register the following field lines belong to
    for line in row["text"].splitlines():
        if line.startswith("- ") and owner is not None:
            if (field_match := _FIELD_LINE.match(line)) is not None:
                index.header_fields[owner].append(_field(field_match))
            continue
        owner = None  # a card's field lines follow it unbroken; "Field macros:" lines are no one's
        match = _DEFINE_LINE.match(line) or _CARD_LINE.match(line)
        if match is None:
            continue
        name = match.group("name")
        if name in index.macros:
            continue
        params = match.group("params")
        value = _C_COMMENT.sub("", match.group("value")).strip()
        index.macros[name] = Macro(
            name=name,
            params=tuple(p.strip() for p in params[1:-1].split(",") if p.strip()) if params else None,
            body=value,
            file_path=row["file_path"],
            revisions=revisions,
            description=match.groupdict().get("desc") or "",
        )
        if match.re is _CARD_LINE:
            owner = name
            index.header_fields[name] = []


# Hand-written headers (ieee802154_reg.h, 500-odd registers on six chips) give a register's fields
# only as bare mask and shift macros under it, ``X 0x7F`` or ``X (BIT(31))`` with ``X_S 0``: each
# field's name and bit range, with no access, default or description. (A header with ``X_V`` macros
# too is a generated one, read as register cards by ingest_source.py.)
MASK_FIELDS_NOTE = "mask and shift macros: bit ranges only, no access or default upstream"


def _collect_mask_fields(file_path: str, texts: list[str], index: ChipIndex) -> None:
    """Fields from ``X`` / ``X_S`` macros that follow a register ``#define`` in raw header text, for
    registers no card documents; read across one file's chunks in order."""
    owner: str | None = None
    masks: dict[str, int] = {}
    for text in texts:
        for line in text.splitlines():
            match = _DEFINE_LINE.match(line)
            if match is None or match.group("params"):
                continue
            name = match.group("name")
            if _REGISTER_NAME.search(name) and not _is_base_macro(name):
                owner, masks = name, {}
                continue
            value = evaluate(_C_COMMENT.sub("", match.group("value")), {})
            if owner is None or value is None:
                continue
            if not name.endswith("_S") or name[:-2] not in masks:
                masks[name] = value
                continue
            bits = _mask_bits(masks[name[:-2]], value)
            macro = index.macros.get(owner)
            if bits is None or macro is None or macro.file_path != file_path:
                continue
            if owner in index.header_fields and owner not in index.mask_only:
                continue  # a card documents this register (the first definition wins)
            index.mask_only.add(owner)
            fields = index.header_fields.setdefault(owner, [])
            if all(f["name"] != name[:-2] for f in fields):
                fields.append(
                    {"name": name[:-2], "bits": bits, "access": None, "reset": None, "description": ""}
                )


def _mask_bits(mask: int, shift: int) -> str | None:
    """A field's ``high:low`` from its mask and shift. The mask is either the unshifted width (``0xFF``
    with ``_S 16``: bits 23:16) or already shifted (``BIT(31)`` with ``_S 31``; ``0xF0`` with ``_S 4``).
    None when it is no run of ones or passes bit 31."""
    if not 0 <= shift <= 31:
        return None
    if shift > 0 and mask & ((1 << shift) - 1) == 0 and mask >> shift > 0:
        mask >>= shift
    if mask <= 0 or mask & (mask + 1):
        return None
    high = shift + mask.bit_length() - 1
    if high > 31:
        return None
    return f"{high}:{shift}" if high != shift else str(shift)


def _collect_memory_map(row: dict[str, Any], index: ChipIndex) -> None:
    """Rows of the manual's Module/Peripheral Address Mapping table: ``H264 DMA | 0x500A_7000 | ...``.
    Tables of offsets (ESP32-S2 lists UART0 at 0x0000_0000) and the bus-level tables are left out."""
    if "Peripheral" not in row["section_path"].rsplit(" > ", 1)[-1]:
        return
    for match in _MAP_ROW.finditer(row["text"]):
        name, low = match.group("name").strip(" *"), int(match.group("low").replace("_", ""), 16)
        if low >= OFFSET_LIMIT and name and name.lower() != "reserved":
            index.memory_map.append((name, low, row))


def _collect_linker(row: dict[str, Any], index: ChipIndex) -> None:
    """``PROVIDE ( UART0 = 0x60000000 );`` lines: where the linker puts each peripheral instance."""
    index.linker_file = row["file_path"]
    for line in row["text"].splitlines():
        if (match := _PROVIDE_LINE.match(line)) is not None:
            index.linker.setdefault(match.group(1), int(match.group(2), 0))


def _field(match: re.Match[str]) -> dict[str, Any]:
    return {
        "name": match.group("name"),
        "bits": match.group("bits"),
        "access": match.group("access"),
        "reset": match.group("reset"),
        "description": (match.group("description") or "").strip(),
    }


# ---------------------------------------------------------------- lookup


def _validate_identifier(value: str, what: str) -> str:
    if not isinstance(value, str) or not _IDENT.match(value.strip()):
        raise ValueError(f"{what} must be a C identifier (letters, digits, '_'), got {value!r}")
    return value.strip()


def _parse_address(address: str | int) -> int:
    if isinstance(address, bool):
        raise ValueError(f"address must be a number such as 0x60004000, got {address!r}")
    if isinstance(address, int):
        value = address
    else:
        text = str(address).strip().replace("_", "").replace("'", "")
        try:
            value = int(text, 0)
        except ValueError:
            try:
                value = int(text, 16)
            except ValueError:
                raise ValueError(
                    f"address must be a number such as 0x60004000 or 0x38, got {address!r}"
                ) from None
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"address must lie in 0x0-0xFFFFFFFF (32-bit), got {address!r}")
    return value


def _resolve_revision(chip: str, revision: str | None) -> str | None:
    """Chips with several manuals get one explicitly (default: the first, mainline)."""
    published = chips()[chip].revisions
    if revision is not None:
        return validate_revision(revision, chip)
    return published[0] if len(published) > 1 else None


def _revision_scope(chip: str, revision: str | None) -> str | None:
    published = chips()[chip].revisions
    if len(published) < 2 or revision is None:
        return None
    others = ", ".join(r for r in published if r != revision)
    return f"ONLY revision {revision} of {chips()[chip].name}; other revisions: {others} (pass revision=...)"


def _find_trm(index: ChipIndex, name: str) -> tuple[TrmEntry, dict[str, str]] | None:
    """The documented register for ``name``: exact, upper-cased, or an instance of a parameterised one.

    The ESP32 manual lists ``IO_MUX_GPIO0_REG`` in its register summary but describes it as
    ``IO_MUX_x_REG (x: 0-19, ...)``: a name the summary lists, or a header register at an address
    the summary lists (``IO_MUX_GPIO1_REG`` where it says ``IO_MUX_U0TXD_REG``), may spell the
    number after letters, and then only a parameterised register of the same chapter answers."""
    for candidate in (name, name.upper()):
        if candidate in index.trm:
            return index.trm[candidate][0], {}
    upper = name.upper()
    found = _instance_in(index, index.parameterised, upper, name)
    if found is not None:
        return found
    chapter = index.summary_names.get(upper)
    if chapter is None and index.summary_addresses and (macro := index.macros.get(upper)) is not None:
        address = evaluate(macro.body, index.macros, memo=index.memo)
        chapter = index.summary_addresses.get(address) if address is not None else None
    return _instance_in(index, index.spelled_patterns(chapter), upper, name) if chapter else None


def _instance_in(
    index: ChipIndex, patterns: list[tuple[re.Pattern[str], str]], upper: str, name: str
) -> tuple[TrmEntry, dict[str, str]] | None:
    """The first parameterised register of ``patterns`` that ``name`` is an in-range instance of."""
    for pattern, documented in patterns:
        match = pattern.match(upper) or pattern.match(name)
        if match is None:
            continue
        entry = index.trm[documented][0]
        values = {k.removeprefix("p_"): v for k, v in match.groupdict().items()}
        ranges = entry.register["parameters"]
        if all(
            ranges.get(letter) is None or ranges[letter].holds(int(value)) for letter, value in values.items()
        ):
            return entry, values
    return None


def _field_owner(index: ChipIndex, name: str) -> str | None:
    """The documented register that has a field called ``name``, if exactly one does."""
    owners = index.field_owners().get(name.upper(), [])
    return owners[0] if len(owners) == 1 else None


def _header_defines(index: ChipIndex, name: str, documented: str | None) -> list[Macro]:
    """Header macros for the register: the exact name, the documented name, or the instance's family."""
    found: list[Macro] = []
    for candidate in dict.fromkeys(c for c in (name, name.upper(), documented) if c):  # GPIO_cali_conf_REG
        if candidate in index.macros:
            found.append(index.macros[candidate])
    if not found and documented:
        pattern = parameter_regex(documented, index.trm[documented][0].register["parameters"])
        if pattern is not None:
            found += [m for n, m in index.macros.items() if pattern.match(n)][:8]
    return found


def _absolute(index: ChipIndex, macro: Macro, instance: int = 0) -> int | None:
    """The macro's address at ``instance``: its parameter for ``X_REG(i)`` (over a linker-placed
    base, the instance numbered i), else the instance of a base only the linker script places
    (I2C_CTR_REG at I2C0, I2C1)."""
    value = evaluate(_call(macro, instance), index.macros, memo=index.memo)
    if value is not None:
        return value if macro.params or instance == 0 else None
    source, _ = base_source(index, macro)
    if source is None:
        return None
    if source.params is not None:  # DR_REG_USB_BASE(i): the parameter picks the instance
        chosen = source.index_of(instance) if len(source.instances) > 1 else 0
    else:
        chosen = instance if not macro.params else 0 if len(source.instances) == 1 else None
    if chosen is None or chosen >= len(source.instances):
        return None
    macros, memo = _overlay(index, source, chosen)
    return evaluate(_call(macro, instance), macros, memo=memo)


def _absolute_plain(index: ChipIndex, macro: Macro) -> int | None:
    """The macro's address at instance 0 from the headers alone."""
    return evaluate(_call(macro, 0), index.macros, memo=index.memo)


def _base_instance(index: ChipIndex, macro: Macro, instance: int) -> int:
    """Which instance of the macro's base source an instance of the macro uses."""
    source, _ = base_source(index, macro)
    if source is None:
        return 0
    if source.params is not None and len(source.instances) > 1:
        return source.index_of(instance) or 0
    return 0 if macro.params else instance


def _derivation(index: ChipIndex, macro: Macro, limit: int = 5) -> str:
    """How the header builds the address: each macro in the chain with the file defining it."""
    steps: list[str] = []
    queue = [macro]
    seen: set[str] = set()
    while queue and len(steps) < limit:
        current = queue.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        params = f"({', '.join(current.params)})" if current.params is not None else ""
        steps.append(f"{current.name}{params} = {current.body} ({current.file_path.rsplit('/', 1)[-1]})")
        queue += [index.macros[n] for n in _C_IDENTIFIER.findall(current.body) if n in index.macros]
    return "; ".join(steps)


def _base_macro(expression: str) -> str | None:
    found = re.findall(r"\b((?:DR_)?REG_\w*BASE\w*)\b", expression)
    return found[0] if found else None


def _pick_header(
    index: ChipIndex, name: str, hit: tuple[TrmEntry, dict[str, str]] | None, defines: list[Macro]
) -> tuple[list[Macro], Macro | None]:
    """The defines of this very register, and the one whose header card gives its fields.

    Only a define of this very register gives its address and fields; a sibling instance
    (AES_KEY_3_REG when AES_KEY_0_REG is asked) is listed in header_defines, nothing more."""
    documented = hit[0].register["name"] if hit else None
    exact = [
        m for m in defines if m.name in (name, name.upper(), documented if not (hit and hit[1]) else None)
    ]
    header = next((m for m in exact if m.name in index.header_fields), None)
    if header is None and hit is not None and not hit[1]:  # the manual's own name, e.g. LEDC_CHn_CONF0_REG
        header = next((m for m in defines if m.name in index.header_fields), None)
    return exact, header


def _describe_register(
    index: ChipIndex, name: str, header_instance: int = 0, join: bool = True
) -> dict[str, Any]:
    """One register's merged answer. ``join``: a register neither source gives fields for takes
    them from the one register with fields at the same address (an alias), saying so."""
    hit = _find_trm(index, name)
    documented = hit[0].register["name"] if hit else None
    defines = _header_defines(index, name, documented)
    if hit is None and not defines:
        owner = _field_owner(index, name)
        if owner is None:
            raise UnknownRegister(_unknown_name_message(index, name))
        # a field name (UART_CLKDIV_FRAG): answer with the register that holds it
        return {**_describe_register(index, owner), "matched_field": name.upper()}
    answer: dict[str, Any] = {"name": name.upper() if hit is None or hit[1] else documented}
    exact, header = _pick_header(index, name, hit, defines)
    header_fields = index.header_fields[header.name] if header is not None else None
    if hit is not None:
        entry, instance = hit
        register = entry.register
        answer.update(
            documented_as=register["name"]
            + (f" ({register['parameter_note']})" if register["parameter_note"] else ""),
            instance=instance or None,
            address=_instance_address(register["address"], instance),
            address_as_documented=register["address"],
            chapter=entry.row["source_doc"],
            section_path=entry.row["section_path"],
            file_path=entry.row["file_path"],
            source_version=entry.row["source_version"],
            source_commit=entry.row["source_commit"],
        )
        if header is not None and not instance:
            instance = _instance_of(register, header.name)  # LEDC_CHn_CONF0_REG vs LEDC_CH0_CONF0_REG
        manual: dict[str, Any] | None = {**register, "fields": _instance_fields(register["fields"], instance)}
    else:
        manual = None
        answer.update(documented_as=None, address=None, chapter=None)
        if header_fields and header is not None and header.name in index.mask_only:
            answer["note"] = (
                "not in the Technical Reference Manual; the SoC header gives its fields' bit ranges "
                "as mask and shift macros only: access, defaults and so the reset are unknown upstream"
            )
        elif header_fields:
            answer["note"] = "not in the Technical Reference Manual; fields and reset from the SoC header"
    source = _header_source(header, index) if header is not None else None
    answer.update(merge_views(manual, header_fields, source))
    answer.update(_absolute_answer(index, answer, exact, header_instance))
    if not header_fields:
        answer.update(_layout_note(index, answer, manual, exact or defines, join))
    answer["header_defines"] = [
        {
            "name": m.name + (f"({', '.join(m.params)})" if m.params is not None else ""),
            "expression": m.body,
            "file_path": m.file_path,
            "description": m.description or None,
        }
        for m in defines
    ]
    return answer


# the note ingest_source._borrow_struct_fields puts on a card line whose fields come from a typedef
_STRUCT_FIELDS = re.compile(r"\[fields from (\S+) (\w+)\]")


def _header_source(header: Macro, index: ChipIndex) -> str:
    """The header a card's fields come from: its register header, or (for a register that header
    defines without field comments) the struct header whose typedef documents them; said when the
    fields are bare masks."""
    if header.name in index.mask_only:
        return f"{header.file_path} ({MASK_FIELDS_NOTE})"
    borrowed = _STRUCT_FIELDS.search(header.description)
    if borrowed is None:
        return header.file_path
    struct_path = header.file_path.rsplit("/", 1)[0] + "/" + borrowed.group(1)
    return f"{struct_path} ({borrowed.group(2)}; {header.file_path} defines the register without fields)"


def _layout_note(
    index: ChipIndex,
    answer: dict[str, Any],
    manual: dict[str, Any] | None,
    defines: list[Macro],
    join: bool,
) -> dict[str, Any]:
    """Say precisely that the headers document no fields, and where the layout comes from: the
    manual, another register at the same address (an alias such as INTERRUPT_CORE0_* for
    INTPRI_CORE0_*), or nowhere. Only the generated ``FIELD : access; bitpos; default`` comments
    count: some hand-written headers (ieee802154_reg.h) define bare mask/shift macros, with no
    access or default."""
    head = (
        f"the ESP-IDF headers document no fields of this register ({_file_name(defines[0].file_path)} "
        "has no 'FIELD : access; bitpos; default' comment for it upstream)"
        if defines
        else "no ESP-IDF header defines this register"
    )
    if manual is not None and answer["fields"]:
        return {"note": f"{head}; fields and reset from the Technical Reference Manual"}
    if manual is not None:
        return {"note": f"{head}, and the Technical Reference Manual lists no fields for it"}
    address = answer.get("address_absolute")
    if address is None:
        return {
            "note": f"{head}; its address is unknown (see absolute_from), so no register at the same "
            "address can stand in"
        }
    twins = _same_address_layouts(index, answer["name"], int(address, 16)) if join else []
    renamed = (
        _manual_under_prefix(index, answer["name"], defines, int(address, 16)) if join and not twins else None
    )
    if renamed is not None:
        twin, offset = renamed
        return {
            **_layout_of(twin, "chapter"),
            "reset_from": f"{twin['reset_from']}, of {twin['name']}",
            "sources": {**twin["sources"], HEADERS: None},
            "same_register_as": twin["name"],
            "note": f"{head}; the manual documents it as {twin['name']} ({twin['chapter']}): the same name "
            f"but for the peripheral prefix, at the same offset 0x{offset:X} from the block's base, so its "
            "fields and reset answer",
        }
    if len(twins) == 1:
        twin = twins[0]
        documented = "the manual" if twin["sources"][MANUAL] else f"{_file_name(twin['sources'][HEADERS])}"
        return {
            **_layout_of(twin, "sources"),
            "reset_from": f"{twin['reset_from']}, of {twin['name']}",
            "same_register_as": twin["name"],
            "note": f"{head}; {twin['name']} sits at the same address ({address}) and {documented} documents "
            f"its fields, so its fields and reset answer",
        }
    manual_clause = (
        f"{index.chip} has no Technical Reference Manual in the store"
        if not index.trm
        else "the Technical Reference Manual has no register of this name, and none the tool places "
        f"at {address}"
    )
    if len(twins) > 1:
        names = ", ".join(t["name"] for t in twins)
        return {"note": f"{head}; several registers with fields share {address} ({names}): none is taken"}
    return {"note": f"{head}; {manual_clause}; fields and reset unknown"}


def _manual_under_prefix(
    index: ChipIndex, name: str, defines: list[Macro], address: int
) -> tuple[dict[str, Any], int] | None:
    """The manual register a header register is under another peripheral prefix: ESP32-S3's
    SDMMC_CTRL_REG is the manual's SDHOST_CTRL_REG (ESP32's: CTRL_REG). Both the name after the
    prefix and the offset from the peripheral base must agree, and only one manual register may."""
    if not index.trm or not defines or "_" not in name:
        return None
    base_name = _base_macro(defines[0].body)
    base = evaluate(base_name, index.macros, memo=index.memo) if base_name else None
    if base is None:
        owner = index.owning_base(address)
        base = owner[0] if owner is not None else None
    if base is None:
        return None
    offset = address - base
    tail = name.upper().split("_", 1)[1]
    found = [
        other
        for other, entries in index.trm.items()
        if other.upper() != name.upper()
        and (other.upper() == tail or [*other.upper().split("_", 1), ""][1] == tail)
        and other not in index.macros
        and _parse_offset(entries[0].register["address"]) == offset
    ]
    if len(found) != 1:
        return None
    answer = _describe_register(index, found[0], join=False)
    return (answer, offset) if answer["fields"] else None


def _layout_of(twin: dict[str, Any], *extra: str) -> dict[str, Any]:
    """The layout facts a register adopts from the register that stands in for it."""
    keys = ("fields", "reset", "reset_by_source", "disagreements", "reset_partial", *extra)
    return {key: twin[key] for key in keys if key in twin}


def _same_address_layouts(index: ChipIndex, name: str, address: int) -> list[dict[str, Any]]:
    """Answers of the other registers at ``address`` that have fields of their own."""
    found: list[dict[str, Any]] = []
    for other, instance in index.addresses().get(address, []):
        if other.upper() == name.upper() or any(f["name"] == other for f in found):
            continue
        try:
            answer = _describe_register(index, other, header_instance=instance, join=False)
        except ValueError:
            continue
        if answer["fields"] and answer["name"] not in {f["name"] for f in found}:
            found.append(answer)
    return found


def _instance_address(documented: str | None, instance: dict[str, str]) -> str | None:
    """``0x0000+4*n`` with n=3 -> ``0x000C``; other forms are returned as documented."""
    if not documented or not instance:
        return documented
    expression = documented
    for letter, value in instance.items():
        expression = re.sub(rf"(?<![A-Za-z0-9]){re.escape(letter)}(?![A-Za-z0-9])", value, expression)
    value = evaluate(expression, {})
    return f"0x{value:04X}" if value is not None else documented


def _absolute_answer(
    index: ChipIndex, answer: dict[str, Any], defines: list[Macro], header_instance: int = 0
) -> dict[str, Any]:
    """Absolute address from the header expression (instance 0 of a parameterised macro), else
    from the documented offset plus the chapter's peripheral base."""
    for macro in defines:
        instances = base_instances(index, macro)
        instance = header_instance if macro.params or header_instance < instances else 0
        value = _absolute(index, macro, instance)
        if value is None:
            continue
        label = f" (instance {instance})" if macro.params else ""
        out: dict[str, Any] = {
            "address_absolute": f"0x{value:08X}",
            "absolute_from": _derivation(index, macro) + label,
        }
        if evaluate(_call(macro, instance), index.macros, memo=index.memo) is None:
            source, _ = base_source(index, macro)
            assert source is not None  # the value came from it
            at = _base_instance(index, macro, instance)
            out["absolute_from"] += "; " + source.explain(at)
            out["base_from"] = source.as_json(at)
            if len(source.instances) > 1:
                out["instances"] = [
                    {
                        "instance": source.instances[_base_instance(index, macro, k)][0],
                        "address": f"0x{v:08X}",
                    }
                    for k, v in instance_addresses(index, macro)
                ]
        return out
    offset = _parse_offset(answer.get("address"))
    if offset is not None and offset >= OFFSET_LIMIT:
        return {"address_absolute": f"0x{offset:08X}", "absolute_from": "the manual gives it absolute"}
    uses = _expression_base(index, defines)
    base = _chapter_base(index, answer.get("file_path"), answer.get("documented_as") or answer["name"], uses)
    if offset is not None and base is not None:
        return {
            "address_absolute": f"0x{base[0] + offset:08X}",
            "absolute_from": f"documented offset + {base[1]} (0x{base[0]:08X})",
        }
    problems = sorted({problem for macro in defines for problem in expression_problems(index, macro)})
    if problems:
        return {"address_absolute": None, "absolute_from": "the header expression " + "; ".join(problems)}
    return {"address_absolute": None, "absolute_from": "peripheral base unknown"}


@dataclass(frozen=True)
class Unresolved:
    """A name that stops a header address expression: ``undefined`` (no header of the chip defines
    it), ``bare`` (a function-like macro used without arguments), ``call`` (a C function, such as
    rv_utils_get_core_id()) or ``read`` (a hardware read such as REG_GET_FIELD). ``user`` is the
    macro whose body names it; ``arity`` the number of arguments it is called with (None: bare)."""

    name: str
    kind: str
    user: Macro
    arity: int | None = None


def unresolved_names(index: ChipIndex, macro: Macro) -> list[Unresolved]:
    """Every name that keeps ``macro`` from evaluating to a constant, with the macro using it."""
    found: list[Unresolved] = []
    queue, seen = [macro], {macro.name}
    while queue:
        current = queue.pop()
        for match in _C_IDENTIFIER.finditer(current.body):
            name = match.group(0)
            if name in seen or name in (current.params or ()) or name == "BIT":
                continue
            if _inside_number(current.body, match.start()):
                continue
            seen.add(name)
            args, _ = _call_args(current.body, match.end())
            arity = len(args) if args is not None else None
            if name in _RUNTIME_READS:
                found.append(Unresolved(name, "read", current, arity))
            elif name not in index.macros:
                kind = "call" if arity is not None and not name.isupper() else "undefined"
                found.append(Unresolved(name, kind, current, arity))
            else:
                if index.macros[name].params is not None and arity is None:
                    found.append(Unresolved(name, "bare", current))
                queue.append(index.macros[name])
    return found


def expression_problems(index: ChipIndex, macro: Macro) -> list[str]:
    """Why a macro's address cannot be computed, one sentence per cause: a base no header of the
    chip defines and no other source gives (ESP32-S31's DR_REG_DAC_BASE), an address chosen at run
    time (ESP32-P4's INTERRUPT_CORE0_CPU_INT_THRESH_REG calls rv_utils_get_core_id()), ..."""
    source, why = base_source(index, macro)
    return [] if source is not None else [why] if why else []


# ---------------------------------------------------------------- bases the headers leave undefined


@dataclass(frozen=True)
class BaseSource:
    """Where a base the register headers use but do not define comes from.

    ``kind`` is ``linker instance`` (the companion ``*_struct.h`` declares the instance, e.g.
    ``extern i2c_dev_t I2C0;``, and the chip's ``.peripherals.ld`` PROVIDEs its address) or
    ``base renamed`` (a header defines the same base under a name that differs only by
    underscores, a ``DR_``/``REG_``/``SOC_`` prefix or an instance number: DR_REG_LPINTR_BASE ->
    DR_REG_LP_INTR_BASE). ``instances`` are (label, value, definition body): several for a
    peripheral with several instances (I2C0, I2C1), each a place the header's registers exist.
    ``params``: the base is used as a function-like macro (``DR_REG_USB_BASE(i)``)."""

    name: str
    params: tuple[str, ...] | None
    kind: str
    instances: tuple[tuple[str, int, str], ...]
    origin: str  # the sentence saying where the base comes from
    file_path: str  # the file giving the value (.ld or header)
    agrees: tuple[str, ...] = ()  # other sources giving the same value

    def explain(self, instance: int = 0) -> str:
        label, value, _ = self.instances[instance]
        where = f" (instance {label})" if len(self.instances) > 1 else ""
        agrees = f"; {', '.join(self.agrees)} agree" if self.agrees else ""
        return f"{self.name} = 0x{value:08X}{where}: {self.origin}{agrees}"

    def as_json(self, instance: int = 0) -> dict[str, Any]:
        label, value, _ = self.instances[instance]
        return {
            "macro": self.name,
            "value": f"0x{value:08X}",
            "instance": label,
            "kind": self.kind,
            "source": self.origin,
            "file_path": self.file_path,
            "agrees_with": list(self.agrees),
        }

    def index_of(self, number: int) -> int | None:
        """The instance a parameter value selects: the one whose label ends in that number
        (``DR_REG_USB_BASE(1)`` -> USB_OTG_FS_CORE1), or the only one at 0."""
        if len(self.instances) == 1:
            return 0 if number == 0 else None
        for position, (label, _, _) in enumerate(self.instances):
            digits = re.search(r"(\d+)$", label)
            if digits is not None and int(digits.group(1)) == number:
                return position
        return None


def base_source(index: ChipIndex, macro: Macro) -> tuple[BaseSource | None, str]:
    """For a register whose header expression does not evaluate: the source of its missing base, or
    (None, why not). Only a single missing base is looked up; an address chosen at run time or a
    base two sources give differently stays unresolved, and the reason says so."""
    if macro.name not in index._base_sources:
        index._base_sources[macro.name] = _find_base_source(index, macro)
    return index._base_sources[macro.name]


def _find_base_source(index: ChipIndex, macro: Macro) -> tuple[BaseSource | None, str]:
    scope = index.chip + (f" {index.revision}" if index.revision else "")
    problems = unresolved_names(index, macro)
    if not problems:
        return None, ""
    runtime = [p for p in problems if p.kind in ("call", "read")]
    if runtime:
        first = runtime[0]
        what = f"calls {first.name}()" if first.kind == "call" else f"reads a register with {first.name}"
        return None, (
            f"has no fixed address: {first.user.name} ({_file_name(first.user.file_path)}) {what}, "
            "so the register is chosen at run time"
        )
    if len({p.name for p in problems}) > 1:
        return None, "; ".join(_problem_text(p, scope) for p in problems)
    problem = problems[0]
    head = _problem_text(problem, scope)
    linker, linker_why = _linker_instances(index, problem, problem.user.file_path)
    if linker is None and problem.user.file_path != macro.file_path and problem.arity is None:
        # the base is missing from a shared macro (ESP32-H21 soc.h: DR_REG_I2C_BASE(i) =
        # DR_REG_I2C_EXT0_BASE + (i) * 0x1000): the register header's own instances place it
        linker, linker_why = _shared_base(index, macro, problem)
    count = len(linker.instances) if linker is not None else 0
    renamed = _renamed_base(index, problem, count) if problem.kind == "undefined" else None
    manual = _manual_map_base(index, problem) if problem.kind == "undefined" else None
    found = [c for c in (linker, renamed, manual) if c is not None]
    if not found:
        hint = _near_names(index, problem.name) if problem.kind == "undefined" else ""
        return None, f"{head}; {linker_why}{hint}"
    primary, others = found[0], found[1:]
    for other in others:
        if not _agree(index, primary, other):
            return None, (
                f"{head}; the sources disagree: {primary.origin} gives {_values(primary)}; "
                f"{other.origin} gives {_values(other)}"
            )
    witnesses = [_witness(o) for o in others]
    if primary.kind != "base renamed" and renamed is None:
        witnesses += _header_bases_at(index, primary)
    if primary.kind != "linker instance":
        witnesses += _linker_symbols_at(index, primary)
    return _with_agreement(primary, list(dict.fromkeys(witnesses))), ""


def _agree(index: ChipIndex, a: BaseSource, b: BaseSource) -> bool:
    """Do two sources put the base's instances at the same addresses? A function-like twin
    (REG_TWAI_BASE(i)) is evaluated at each instance's number (TWAI2 -> REG_TWAI_BASE(2))."""
    aliases = [x for x in (a, b) if x.kind == "base renamed" and x.params is not None]
    if not aliases:
        return sorted(v for _, v, _ in a.instances) == sorted(v for _, v, _ in b.instances)
    twin = aliases[0]
    other = b if twin is a else a
    for position, (label, value, _) in enumerate(other.instances):
        digits = re.search(r"(\d+)$", label)
        number = int(digits.group(1)) if digits is not None and len(other.instances) > 1 else position
        args = ", ".join([str(number)] * len(twin.params or ()))
        if evaluate(f"{twin.instances[0][0]}({args})", index.macros, memo=index.memo) != value:
            return False
    return True


def _problem_text(problem: Unresolved, scope: str) -> str:
    if problem.kind == "bare":
        return f"uses {problem.name} without arguments, but it is defined as {problem.name}(...)"
    return f"uses {problem.name}, which no {scope} header defines"


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _values(source: BaseSource) -> str:
    return ", ".join(f"{label} 0x{value:08X}" for label, value, _ in source.instances)


def _with_agreement(source: BaseSource, agrees: list[str]) -> BaseSource:
    return BaseSource(**{**source.__dict__, "agrees": tuple(agrees)})


def _witness(source: BaseSource) -> str:
    """A second source's name for the same base, short: ``soc.h REG_I2C_BASE(0), REG_I2C_BASE(1)``."""
    if source.kind == "manual memory map":
        return "the manual's address map: " + ", ".join(f"'{label}'" for label, _, _ in source.instances)
    if source.kind == "linker instance":
        return f"{_file_name(source.file_path)} " + ", ".join(label for label, _, _ in source.instances)
    return f"{_file_name(source.file_path)} " + ", ".join(body for _, _, body in source.instances)


# A map row names a block by what it is ("H264 Encoder"), its base macro by the block alone (H264)
_BLOCK_NOUNS = frozenset(("ENCODER", "DECODER", "CONTROLLER", "MODULE", "PERIPHERAL", "ACCELERATOR"))


def _map_keys(name: str) -> set[str]:
    """``Two-wire Automotive Interface 0 (TWAI0)`` -> {TWOWIREAUTOMOTIVEINTERFACE0, TWAI0};
    ``H264 Encoder`` -> {H264ENCODER, H264}."""
    keys = {re.sub(r"[^A-Z0-9]", "", part.upper()) for part in re.findall(r"\(([^()]*)\)", name)}
    words = re.findall(r"[A-Z0-9]+", re.sub(r"\([^()]*\)", "", name).upper())
    keys.add("".join(words))
    if len(words) > 1 and words[-1] in _BLOCK_NOUNS:
        keys.add("".join(words[:-1]))
    return {k for k in keys if k}


def _manual_map_base(index: ChipIndex, problem: Unresolved) -> BaseSource | None:
    """The manual's Module/Peripheral Address Mapping row named like the missing base (its name or
    its abbreviation, spaces and punctuation aside): ``H264 DMA`` for DR_REG_H264_DMA_BASE; rows
    numbered after it (TWAI0, TWAI1, ...) are the instances of a base used without arguments."""
    cache_key = ("map", problem.name, problem.arity)
    if cache_key not in index._source_cache:
        index._source_cache[cache_key] = _find_manual_map_base(index, problem)
    return index._source_cache[cache_key]  # type: ignore[no-any-return]


def _find_manual_map_base(index: ChipIndex, problem: Unresolved) -> BaseSource | None:
    key = _base_key(problem.name)
    if not key or problem.arity is not None or not index.memory_map:
        return None
    same = [(n, v, r) for n, v, r in index.memory_map if key in _map_keys(n)]
    numbered = sorted(
        (int(tail), n, v, r)
        for n, v, r in index.memory_map
        for k in _map_keys(n)
        if (tail := k.removeprefix(key)) != k and tail.isdigit()
    )
    rows = same if same else [(n, v, r) for _, n, v, r in numbered]
    if not rows or len(same) > 1 or len({v for _, v, _ in rows}) != len(rows):
        return None
    table = rows[0][2]["section_path"].rsplit(" > ", 1)[-1]
    listed = ", ".join(f"'{n}' at 0x{v:08X}" for n, v, _ in rows)
    origin = f"the manual's {table} table ({rows[0][2]['source_doc']}): {listed}"
    instances = tuple((n, v, f"0x{v:08X}") for n, v, _ in rows)
    return BaseSource(problem.name, None, "manual memory map", instances, origin, rows[0][2]["file_path"])


def _struct_externs(index: ChipIndex, register_file: str) -> list[tuple[str, str]] | None:
    """``extern T NAME;`` declarations of the register header's companion ``X_struct.h`` (same
    folder), read from the store on first need; None when the store has no such header."""
    if not register_file.endswith("_reg.h") or index.table is None:
        return None
    struct_file = register_file.removesuffix("_reg.h") + "_struct.h"
    if struct_file not in index._externs:
        where = f"doc_type = 'src' AND file_path = {_quote_path(struct_file)}"
        # only the index's release: another release's struct header may declare other instance types
        rows = [
            row
            for row in _rows(index.table, where, ["text", "releases"])
            if index.release is None or index.release in row["releases"]
        ]
        externs = [(m.group(1), m.group(2)) for row in rows for m in _EXTERN.finditer(row["text"])]
        index._externs[struct_file] = list(dict.fromkeys(externs)) if rows else None
    return index._externs[struct_file]


def _linker_instances(index: ChipIndex, problem: Unresolved, file_path: str) -> tuple[BaseSource | None, str]:
    """The instances the companion struct header of ``file_path`` declares, at the addresses the
    linker script gives."""
    cache_key = ("linker", problem.name, problem.arity, file_path)
    if cache_key not in index._source_cache:
        index._source_cache[cache_key] = _find_linker_instances(index, problem, file_path)
    return index._source_cache[cache_key]  # type: ignore[no-any-return]


def _find_linker_instances(
    index: ChipIndex, problem: Unresolved, file_path: str
) -> tuple[BaseSource | None, str]:
    struct_name = _file_name(file_path).removesuffix("_reg.h") + "_struct.h"
    externs = _struct_externs(index, file_path)
    if externs is None:
        return None, f"no {struct_name} in the store declares an instance of {_file_name(file_path)}"
    if not externs:
        return None, f"{struct_name} declares no instance (no extern object) for a linker script to place"
    if index.linker_file is None:
        return None, f"the store has no {index.chip}{_LINKER_SCRIPT} to place {struct_name}'s instances"
    ld = _file_name(index.linker_file)
    placed = [(t, n) for t, n in externs if n in index.linker]
    types = sorted({t for t, _ in placed})
    if not placed:
        declared = ", ".join(n for _, n in externs)
        return None, f"{struct_name} declares {declared}, which {ld} does not PROVIDE"
    if len(types) > 1:
        return None, f"{struct_name} declares instances of several types ({', '.join(types)}): ambiguous"
    names = [n for _, n in placed]
    instances = tuple((n, index.linker[n], f"0x{index.linker[n]:08X}") for n in names)
    plural = "s" if len(names) > 1 else ""
    origin = (
        f"{ld} PROVIDE({', '.join(names)}), the instance{plural} of {types[0]} that {struct_name} declares"
    )
    params = tuple(f"_{k}" for k in range(problem.arity)) if problem.arity is not None else None
    return BaseSource(problem.name, params, "linker instance", instances, origin, index.linker_file), ""


def _shared_base(index: ChipIndex, macro: Macro, problem: Unresolved) -> tuple[BaseSource | None, str]:
    """A base missing from a macro shared by several register headers, placed by the register
    header's own instances: the base is instance 0's address, and every other instance the linker
    places must come out of the header's arithmetic (DR_REG_I2C_BASE(1) == I2C1), else no answer."""
    found, why = _linker_instances(index, problem, macro.file_path)
    if found is None:
        return None, why
    numbered = [(found.index_of(n), n) for n in range(_INSTANCE_LIMIT)]
    positions = {p: n for p, n in numbered if p is not None}
    if 0 not in positions.values():
        return None, f"{found.origin}, but none of them is numbered 0 to stand for {problem.name}"
    first = next(p for p, n in positions.items() if n == 0)
    label, value, body = found.instances[first]
    source = BaseSource(problem.name, None, "linker instance", ((label, value, body),), "", found.file_path)
    if len(found.instances) > 1 and not macro.params:
        return None, f"{found.origin}: several instances, and {macro.name} has no instance parameter"
    macros, memo = _overlay(index, source, 0)
    start = evaluate(_call(macro, 0), macros, memo=memo)
    for position, number in positions.items():
        got = evaluate(_call(macro, number), macros, memo=memo)
        want = None if start is None else start + found.instances[position][1] - value
        if got is None or got != want:
            user = f"{problem.user.name} ({_file_name(problem.user.file_path)})"
            return None, f"{found.origin}, but {user} does not put {found.instances[position][0]} there"
    user = problem.user.name + (
        f"({', '.join(problem.user.params)})" if problem.user.params is not None else ""
    )
    others = ", ".join(found.instances[p][0] for p in positions if p != first)
    one = len(positions) == 2
    checked = (
        f"; {others} {'is' if one else 'are'} where {user} puts {'it' if one else 'them'}" if others else ""
    )
    origin = (
        f"{found.origin}; {label} is {problem.name}, the base {user} "
        f"({_file_name(problem.user.file_path)}) adds the instance offset to{checked}"
    )
    return BaseSource(
        problem.name, None, "linker instance", ((label, value, body),), origin, found.file_path
    ), ""


@functools.lru_cache(maxsize=65536)
def _base_key(name: str) -> str:
    """DR_REG_LP_INTR_BASE, REG_LPINTR_BASE, SOC_LPINTR_BASE -> LPINTR (memoised: a chip's first
    address lookup compares every missing base with every header base, ~125,000 calls on ESP32-P4)."""
    stem = re.sub(r"^(?:DR_REG_|REG_|SOC_)", "", name.upper()).removesuffix("_BASE")
    return stem.replace("_", "")


def _renamed_base(index: ChipIndex, problem: Unresolved, count: int) -> BaseSource | None:
    """A base a header defines under a name that differs only by underscores, a DR_/REG_/SOC_ prefix
    or an instance number (DR_REG_RTCLOCKCALI_BASE -> DR_REG_RTCLOCKCALI0_BASE, ..1_BASE).

    Used bare, the name takes an object-like twin (or a numbered family of them); called, a
    function-like twin of the same arity. A function-like twin of a bare name (ESP32-S3's
    REG_I2C_BASE(i) for DR_REG_I2C_BASE) only witnesses the ``count`` linker instances."""
    cache_key = ("renamed", problem.name, problem.arity, count)
    if cache_key not in index._source_cache:
        index._source_cache[cache_key] = _find_renamed_base(index, problem, count)
    return index._source_cache[cache_key]  # type: ignore[no-any-return]


def _find_renamed_base(index: ChipIndex, problem: Unresolved, count: int) -> BaseSource | None:
    key = _base_key(problem.name)
    if not key or not problem.name.upper().endswith("_BASE"):
        return None
    if index._base_keys is None:
        index._base_keys = [(_base_key(n), m) for n, m in index.macros.items() if n.upper().endswith("_BASE")]
    same: list[Macro] = []
    numbered: list[tuple[int, Macro]] = []
    for other, macro in index._base_keys:
        if other == key:
            same.append(macro)
        elif (tail := other.removeprefix(key)) != other and tail.isdigit():
            numbered.append((int(tail), macro))
    if len(same) > 1:
        return None
    twin = same[0] if same else None
    if problem.arity is not None:  # DR_REG_UART_AHB_BASE(i) for REG_UART_AHB_BASE(i)
        if twin is None or twin.params is None or len(twin.params) != problem.arity:
            return None
        value = evaluate(_call(twin, 0), index.macros, memo=index.memo)
        if value is None:
            return None
        body = f"{twin.name}({', '.join(twin.params)})"
        instances: list[tuple[str, int, str]] = [(twin.name, value, body)]
        return BaseSource(
            problem.name,
            twin.params,
            "base renamed",
            tuple(instances),
            _renamed_origin([twin]),
            twin.file_path,
        )
    if twin is not None and twin.params is not None:
        if len(twin.params) != 1 or count < 2:
            return None
        instances = []
        for number in range(count):
            value = evaluate(f"{twin.name}({number})", index.macros, memo=index.memo)
            if value is None:
                return None
            instances.append((f"{twin.name}({number})", value, f"{twin.name}({number})"))
        return BaseSource(
            problem.name, None, "base renamed", tuple(instances), _renamed_origin([twin]), twin.file_path
        )
    chosen = (
        [twin]
        if twin is not None
        else [m for _, m in sorted(numbered, key=lambda p: p[0]) if m.params is None]
    )
    instances = []
    for macro in chosen:
        value = evaluate(macro.name, index.macros, memo=index.memo)
        if value is None:
            return None
        instances.append((macro.name, value, macro.name))
    if not instances:
        return None
    return BaseSource(
        problem.name, None, "base renamed", tuple(instances), _renamed_origin(chosen), chosen[0].file_path
    )


def _renamed_origin(chosen: list[Macro]) -> str:
    names = ", ".join(m.name + (f"({', '.join(m.params)})" if m.params is not None else "") for m in chosen)
    return (
        f"{_file_name(chosen[0].file_path)} defines it as {names} "
        "(the same name but for underscores, a DR_/REG_/SOC_ prefix or an instance number)"
    )


def _header_bases_at(index: ChipIndex, source: BaseSource) -> list[str]:
    """Header base macros with the value of the source's first instance: a second witness."""
    value = source.instances[0][1]
    return [f"{_file_name(index.macros[n].file_path)} {n}" for n, v in index.bases().items() if v == value]


def _linker_symbols_at(index: ChipIndex, source: BaseSource) -> list[str]:
    value = source.instances[0][1]
    ld = _file_name(index.linker_file) if index.linker_file else ""
    return [f"{ld} {n}" for n, v in index.linker.items() if v == value]


def _near_names(index: ChipIndex, name: str) -> str:
    """Header bases sharing the missing base's stem, named as a hint and never used as its value."""
    key = _base_key(name)
    near = [n for n in index.bases() if key and _base_key(n) and (key in _base_key(n) or _base_key(n) in key)]
    if not near or len(near) > 4:
        return ""
    listed = ", ".join(f"{n} = 0x{index.bases()[n]:08X}" for n in sorted(near))
    return f"; not taken from a similar name: {listed}"


def _overlay(
    index: ChipIndex, source: BaseSource, instance: int
) -> tuple[Mapping[str, Macro], dict[str, int | None]]:
    """The chip's macros with the missing base defined as the source gives it, and a memo for them."""
    _, _, body = source.instances[instance]
    macro = Macro(source.name, source.params, body, source.file_path, ())
    memo = index._overlay_memos.setdefault((source.name, source.file_path, instance), {})
    return ChainMap({source.name: macro}, index.macros), memo


def base_instances(index: ChipIndex, macro: Macro) -> int:
    """How many places a register without parameters exists at: 1, or the instances of a base only
    the linker script places (I2C_CTR_REG at I2C0 and I2C1)."""
    if macro.params or evaluate(macro.name, index.macros, memo=index.memo) is not None:
        return 1
    source, _ = base_source(index, macro)
    return len(source.instances) if source is not None and source.params is None else 1


def instance_label(index: ChipIndex, macro: Macro, instance: int) -> str:
    """``UART_CLKDIV_REG(1)``, ``I2C_CTR_REG@I2C1`` (an instance the linker script places), or the name."""
    if macro.params:
        return f"{macro.name}({instance})"
    if base_instances(index, macro) > 1:
        source, _ = base_source(index, macro)
        assert source is not None  # several instances come from a source
        return f"{macro.name}@{source.instances[instance][0]}"
    return macro.name


def _call(macro: Macro, instance: int) -> str:
    args = ",".join(str(instance) for _ in macro.params or ())
    return f"{macro.name}({args})" if macro.params is not None else macro.name


def _parse_offset(address: str | None) -> int | None:
    if not address:
        return None
    try:
        return int(address, 16)
    except ValueError:
        return None


def _chapter_base(
    index: ChipIndex, file_path: str | None, name: str, base: str | None = None
) -> tuple[int, str] | None:
    """The peripheral base of a register: from a sibling in the same chapter with the same name
    prefix (a UART chapter also documents UHCI) that the headers define, else ``DR_REG_<PREFIX>_BASE``
    (or ``..0_BASE``) of reg_base.h for a peripheral without a register header (TWAI on ESP32-C3).

    ``base``: the base macro the register's own header expression uses; then only siblings over
    that base vote and only a base of that name (or numbered after it) is taken -- the ESP32-P4
    H264 chapter documents the encoder's and the H264 DMA's registers, which sit on two bases."""
    if not file_path:
        return None
    prefix = name.split("_", 1)[0] + "_"
    key = (file_path, prefix + (f"@{base}" if base else ""))
    if key not in index._chapter_bases:
        votes: dict[tuple[int, str], int] = defaultdict(int)
        placed: dict[str, int] = {}  # base macro -> the base value its siblings give
        unplaced: set[str] = set()  # base macros of siblings no source places (ESP32-P4 DR_REG_H264_BASE)
        for sibling, entry in index.trm_in_chapter(file_path):
            if sibling not in index.macros or not sibling.startswith(prefix):
                continue
            uses = _base_macro(index.macros[sibling].body) or "base"
            offset = _parse_offset(entry.register["address"])
            value = _absolute(index, index.macros[sibling])
            if offset is None or value is None:
                unplaced.add(uses)
                continue
            placed[uses] = value - offset
            if base is None or uses == base:
                votes[(value - offset, uses)] += 1
        several = len(set(placed.values())) + len(unplaced - set(placed) - {"base"}) > 1
        index._chapter_bases[key] = (votes, several)
    votes, several = index._chapter_bases[key]
    voted = _vote(votes, name, several)
    named = _named_base(index, name)  # the fallback depends on the whole name
    if named is not None and base is not None and not _same_base_name(named[1], base):
        named = None
    return voted or named


def _vote(votes: dict[tuple[int, str], int], name: str, several: bool = False) -> tuple[int, str] | None:
    """The chapter's base for ``name``: the one base its siblings agree on; where they sit on
    several (ESP32-P4's H264 chapter: the encoder's and the H264 DMA's registers), the base whose
    name the register's name starts with (H264_DMA_* -> DR_REG_H264_DMA_BASE), else none."""
    if not votes:
        return None
    if len({value for value, _ in votes}) == 1 and not several:
        return max(votes, key=lambda k: votes[k])
    register = name.upper().replace("_", "")
    fitting = [k for k in votes if k[1] != "base" and register.startswith(_base_key(k[1]))]
    if not fitting:
        return None
    longest = max(len(_base_key(k[1])) for k in fitting)
    best = [k for k in fitting if len(_base_key(k[1])) == longest]
    return max(best, key=lambda k: votes[k]) if len({v for v, _ in best}) == 1 else None


def _expression_base(index: ChipIndex, defines: list[Macro]) -> str | None:
    """The base a register's own header expression names but cannot evaluate (DR_REG_H264_BASE)."""
    return next(
        (p.name for m in defines for p in unresolved_names(index, m) if p.name.upper().endswith("_BASE")),
        None,
    )


def _same_base_name(candidate: str, base: str) -> bool:
    """DR_REG_TWAI0_BASE stands for DR_REG_TWAI_BASE; DR_REG_H264_BASE does not for DR_REG_H264_DMA_BASE."""
    wanted, got = _base_key(base), _base_key(candidate)
    return got == wanted or (got.startswith(wanted) and got[len(wanted) :].isdigit())


def _named_base(index: ChipIndex, name: str) -> tuple[int, str] | None:
    """``IO_MUX_PIN_CTRL_REG`` -> DR_REG_IO_MUX_BASE, ``TWAI_MODE_REG`` -> DR_REG_TWAI0_BASE: the
    longest leading run of name tokens that reg_base.h names a base after."""
    tokens = name.split("_")[:-1]
    bases = index.bases()
    for length in range(min(len(tokens), 4), 0, -1):
        stem = "_".join(tokens[:length])
        for candidate in (f"DR_REG_{stem}_BASE", f"DR_REG_{stem}0_BASE"):
            if candidate in bases:
                return bases[candidate], candidate
    return None


def _manual_addresses(index: ChipIndex) -> list[tuple[str, int]]:
    """(name, absolute address) of manual registers the headers lack: each instance of a
    parameterised register, at every base of its peripheral family from the chapter's base up
    (TWAI0, TWAI1, ...)."""
    found: list[tuple[str, int]] = []
    for documented, entries in index.trm.items():
        entry = entries[0]
        register = entry.register
        for name, instance in manual_instances(register):
            if name in index.macros and instance_addresses(index, index.macros[name]):
                continue  # the header's own address is in the map already
            offset = _parse_offset(_instance_address(register["address"], instance))
            if offset is None:
                continue
            if offset >= OFFSET_LIMIT:
                found.append((name, offset))
                continue
            uses = _expression_base(index, [index.macros[name]]) if name in index.macros else None
            base = _chapter_base(index, entry.row["file_path"], documented, uses)
            if base is not None:
                found += [(name, value + offset) for value in _family_bases(index, base[0])]
    return found


def manual_instances(register: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """``AES_KEY_n_REG (n: 0-7)`` -> AES_KEY_0_REG .. AES_KEY_7_REG with their instance values;
    a register without parameters is itself; one whose range is unknown has no instance."""
    ranges = register["parameters"]
    if not ranges and parameter_regex(register["name"], {}) is None:
        return [(register["name"], {})]
    if not ranges or any(r is None for r in ranges.values()):
        return []
    letters = list(ranges)
    spans = [ranges[k].values() for k in letters]  # type: ignore[union-attr]
    out = []
    for values in itertools.islice(itertools.product(*spans), _MAX_INSTANCES):
        instance = {k: str(v) for k, v in zip(letters, values, strict=True)}
        spelled = {k: ranges[k].prefix + v for k, v in instance.items()}  # type: ignore[union-attr]
        out.append((_fill_instance(register["name"], spelled), instance))
    return out


def _fill_instance(name: str, instance: dict[str, str]) -> str:
    """``LEDC_TIMER_SEL_CHn`` with n=0 -> ``LEDC_TIMER_SEL_CH0`` (parameters are lower-case)."""
    for letter, value in instance.items():
        name = re.sub(rf"(?<![a-z]){re.escape(letter)}(?![a-z])", value, name)
    return name


def _family_bases(index: ChipIndex, base: int) -> list[int]:
    """``base`` and the later bases of the same peripheral family (UART -> UART1, UART2)."""
    names = next((names for value, names in index.base_owners() if value == base), [])
    stems = {_base_stem(n) for n in names}
    later = [
        value for value, names in index.base_owners() if value > base and stems & set(map(_base_stem, names))
    ]
    return [base, *later]


def _unknown_name_message(index: ChipIndex, name: str) -> str:
    names = list(index.trm) + [m.name for m in index.header_registers()]
    close = difflib.get_close_matches(name.upper(), list(dict.fromkeys(names)), n=5, cutoff=0.6)
    scope = index.chip + (f" revision {index.revision}" if index.revision else "")
    hint = f"; closest names: {', '.join(close)}" if close else ""
    return f"no register {name!r} on {scope}{hint}"


def _registers_at(index: ChipIndex, address: int, peripheral: str | None) -> list[tuple[str, int]]:
    """(register name, instance) at an absolute address, or at an offset within ``peripheral``."""
    if peripheral is not None:
        prefix = peripheral.upper().rstrip("_") + "_"
        documented = [
            name
            for name, entries in index.trm.items()
            if name.startswith(prefix) and _parse_offset(entries[0].register["address"]) == address
        ]
        if documented:
            return [(name, 0) for name in documented]
        base_names = [f"DR_REG_{peripheral.upper()}_BASE", f"DR_REG_{peripheral.upper()}0_BASE"]
        base = next((evaluate(b, index.macros) for b in base_names if b in index.macros), None)
        if base is None:
            raise ValueError(
                f"no register of peripheral {peripheral!r} at offset 0x{address:X} on {index.chip}, "
                f"and no {base_names[0]} in its reg_base.h"
            )
        address += base
    return list(index.addresses().get(address, []))


def _base_stem(name: str) -> str:
    return re.sub(r"\d+", "", name.removeprefix("DR_REG_").removesuffix("_BASE")).rstrip("_")


def instance_addresses(index: ChipIndex, macro: Macro) -> list[tuple[int, int]]:
    """(instance, address) of every instance that lands in a block of the macro's own peripheral
    family (its ``DR_REG_*_BASE`` names): bases sit 4 KB apart, so a bare "is some base" test
    would put UART2 of ESP32-C3 on the I2C block. Instances that evaluate outside every block
    are skipped, not fatal: ESP32-C3's REG_SPI_BASE(i) is 0 except for i = 2 (GP-SPI2)."""
    if macro not in index._instances:
        index._instances[macro] = _instance_addresses(index, macro)
    return index._instances[macro]


def _instance_addresses(index: ChipIndex, macro: Macro) -> list[tuple[int, int]]:
    if not macro.params:
        placed: list[tuple[int, int]] = []
        for instance in range(base_instances(index, macro)):
            value = _absolute(index, macro, instance)
            if value is not None and all(value != v for _, v in placed):
                placed.append((instance, value))
        return placed
    source = base_source(index, macro)[0] if _absolute_plain(index, macro) is None else None
    if source is not None and source.params is not None and len(source.instances) > 1:
        # X_REG(i) over DR_REG_USB_BASE(i) the linker places: i runs over the instances' numbers
        numbers = [int(m.group(1)) for label, _, _ in source.instances if (m := re.search(r"(\d+)$", label))]
        return [(n, v) for n in numbers if (v := _absolute(index, macro, n)) is not None]
    stems = _family(index, macro)
    found: list[tuple[int, int]] = []
    for instance in range(_INSTANCE_LIMIT):
        value = _absolute(index, macro, instance)
        owner = index.owning_base(value) if value is not None else None
        if value is None or owner is None or any(value == v for _, v in found):
            continue
        owner_stems = {_base_stem(n) for n in owner[1]}
        if not stems:  # a numeric expression: the family is the first instance's block
            stems = owner_stems
        if stems & owner_stems:
            found.append((instance, value))
    return found


def _family(index: ChipIndex, macro: Macro) -> set[str]:
    """Stems of the ``DR_REG_*_BASE`` names a macro's expansion reaches (``UART`` for UART_X_REG(i))."""
    stems: set[str] = set()
    queue, seen = [macro.body], set()
    while queue:
        for name in _C_IDENTIFIER.findall(queue.pop()):
            if name in seen:
                continue
            seen.add(name)
            if _BASE_NAME.fullmatch(name):
                stems.add(_base_stem(name))
            if name in index.macros:  # DR_REG_TIMG_BASE(i) -> DR_REG_TIMERGROUP0_BASE
                queue.append(index.macros[name].body)
    return stems


def _address_not_found(index: ChipIndex, address: int) -> str:
    """Why nothing answers at ``address``: below every peripheral, a block nothing documents, a
    reserved gap between two named registers, or past the last register of its block."""
    head = f"no register at 0x{address:X} on {index.chip}"
    hint = " (an offset? pass peripheral=..., e.g. UART)" if address < OFFSET_LIMIT else ""
    owners = index.base_owners()
    owner = index.owning_base(address)
    if owner is None:
        lowest = f"; the lowest peripheral base is {owners[0][1][0]} (0x{owners[0][0]:08X})" if owners else ""
        return f"{head}: it lies below every peripheral base in reg_base.h{lowest}{hint}"
    base, names = owner
    following = [value for value, _ in owners if value > base]
    end = following[0] if following else 1 << 32
    where = f"{head}; it lies at {names[0]} (0x{base:08X}) + 0x{address - base:X}"
    mapped = index.addresses()
    block = sorted(a for a in mapped if base <= a < end)
    if not block:
        return f"{where}, a block in which neither the manual nor the headers place any register{hint}"
    earlier = [a for a in block if a < address]
    later = [a for a in block if a > address]
    if not later:
        last = block[-1]
        return (
            f"{where}, past the last register of that block ({mapped[last][0][0]} at 0x{last:08X}): "
            f"outside every documented register map{hint}"
        )
    if not earlier:
        return f"{where}, before its first register ({mapped[later[0]][0][0]} at 0x{later[0]:08X}){hint}"
    return (
        f"{where}, a reserved gap between {mapped[earlier[-1]][0][0]} (0x{earlier[-1]:08X}) and "
        f"{mapped[later[0]][0][0]} (0x{later[0]:08X}){hint}"
    )


class UnknownRegister(ValueError):
    """A register name the chip's manual and headers do not have."""


def _elsewhere(table: Any, name: str, chip: str, release: str | None = None) -> str:
    """Which other chips' manuals or headers have a register ``name``, and which other ESP-IDF
    releases' headers define it for this chip: a question asked for the wrong chip or release should
    say so. ``name`` is a validated identifier."""
    where = f"doc_type IN ('trm', 'src') AND array_has(symbol_refs, {_quote(name.upper())})"
    rows = _rows(table, where, ["chips", "doc_type", "releases"])
    found = sorted({c for row in rows for c in row["chips"]} - {chip})
    text = f"; it exists on {', '.join(found)}" if found else ""
    if release is not None:
        mine = [
            r for row in rows if row["doc_type"] == "src" and chip in row["chips"] for r in row["releases"]
        ]
        if others := newest_first(set(mine) - {release}):
            text += (
                f"; the ESP-IDF {', '.join(others)} SoC headers define it for {chip} "
                f"(pass idf_version={others[0]})"
            )
    return text


# ---------------------------------------------------------------- one answer from manual and headers

MANUAL = "manual"
HEADERS = "headers"


def merge_views(
    manual: dict[str, Any] | None, header_fields: list[dict[str, Any]] | None, header_file: str | None
) -> dict[str, Any]:
    """The manual's register block and the header's field lines as one answer.

    A field takes the manual's values where the manual documents it and the header's otherwise;
    ``sources`` says who documents it, and every difference is listed in ``disagreements``
    rather than resolved silently. The reset is the manual's when it gives one, else composed
    from field defaults (headers first), and ``reset_from`` says which."""
    manual_fields: list[dict[str, Any]] = (manual or {}).get("fields", [])
    header_by_name = {_field_key(f["name"]): f for f in header_fields or []}
    pairs = _same_fields(manual_fields, header_fields or [])
    merged: list[dict[str, Any]] = []
    for mine in manual_fields:  # manual order, reserved ranges included
        twin = pairs.get(_field_key(mine["name"])) if mine["name"] != "(reserved)" else None
        theirs = header_by_name[twin] if twin else {}
        merged.append(
            {
                **mine,
                "access": mine["access"] or theirs.get("access"),
                "reset": mine["reset"] or theirs.get("reset"),
                "description": mine["description"] or theirs.get("description") or "",
                "sources": [MANUAL, HEADERS] if theirs else [MANUAL],
            }
        )
    paired = set(pairs.values())
    merged += [
        {**f, "sources": [HEADERS]} for f in header_fields or [] if _field_key(f["name"]) not in paired
    ]
    by_source: dict[str, str | None] = {}
    if manual is not None:
        by_source[MANUAL] = manual.get("reset")
    reasons: list[str] = []
    if manual is not None and _int(manual.get("reset")) is None:
        reasons.append(f"manual: Reset value {manual.get('reset')!r}")
    if header_fields:
        value, why = compose_reset(header_fields)
        by_source[HEADERS] = f"0x{value:08X}" if value is not None else None
        reasons += [f"headers: {why}"] if why else []
    elif manual is not None:
        reasons.append("headers: no field comments for this register")
    manual_composed = compose_reset(manual_fields) if manual_fields else (None, "")
    reasons += [f"manual fields: {manual_composed[1]}"] if manual_composed[1] else []
    if _int(by_source.get(MANUAL)) is not None:  # not "see fields"
        reset, reset_from = by_source[MANUAL], "manual (Reset value)"
    elif by_source.get(HEADERS):
        reset, reset_from = by_source[HEADERS], "composed from the header's field defaults"
    elif manual_composed[0] is not None:
        reset, reset_from = f"0x{manual_composed[0]:08X}", "composed from the manual's field resets"
    else:
        reset, reset_from = None, "unknown: " + ("; ".join(reasons) or "no source documents fields")
    partial: dict[str, str] | None = None
    if reset is None:  # the bits that do have a default, from the headers first
        header_partial = partial_reset(header_fields) if header_fields else None
        manual_partial = partial_reset(manual_fields) if manual_fields else None
        if header_partial is not None:
            partial = {**header_partial, "from": HEADERS}
        elif manual_partial is not None:
            partial = {**manual_partial, "from": MANUAL}
    return {
        "reset": reset,
        "reset_from": reset_from,
        **({"reset_partial": partial} if partial else {}),
        "reset_by_source": by_source,
        "fields": merged,
        "sources": {
            MANUAL: "Technical Reference Manual" if manual is not None else None,
            HEADERS: header_file if header_fields else None,
        },
        "disagreements": disagreements(manual, header_fields) if manual and header_fields else [],
    }


def _same_fields(manual_fields: list[dict[str, Any]], header_fields: list[dict[str, Any]]) -> dict[str, str]:
    """Manual field key -> header field key for fields that are the same field: the same name, or a
    whole-register field the manual names after its register (``AES_KEY_n_REG(n:0-7)`` [31:0]
    against the header's ``AES_KEY_0`` [31:0]) -- a naming habit, not a layout difference."""
    mine = {_field_key(f["name"]): f for f in manual_fields if f["name"] != "(reserved)"}
    theirs = {_field_key(f["name"]): f for f in header_fields}
    pairs = {key: key for key in mine if key in theirs}
    for key, field_ in mine.items():
        if key in pairs or "_REG" not in key:
            continue
        twins = [
            h for h in theirs if h not in pairs.values() and _same_bits(field_["bits"], theirs[h]["bits"])
        ]
        if len(twins) == 1:
            pairs[key] = twins[0]
    return pairs


def disagreements(manual: dict[str, Any], header_fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the manual's register and the header's fields differ: reset, field existence (a field
    only one side has, or renamed: same bits, other name), bit range, access, default."""
    found: list[dict[str, Any]] = []
    mine = {_field_key(f["name"]): f for f in manual["fields"] if f["name"] != "(reserved)"}
    theirs = {_field_key(f["name"]): f for f in header_fields}
    manual_reset = _int(manual.get("reset"))
    header_reset, _ = compose_reset(header_fields)
    if manual_reset is not None and header_reset is not None and manual_reset != header_reset:
        found.append(
            {
                "kind": "reset differs",
                MANUAL: manual["reset"],
                HEADERS: f"0x{header_reset:08X}",
                "note": "the header value is composed from field defaults; bits in no field count as 0",
            }
        )
    pairs = _same_fields(manual["fields"], header_fields)
    only_manual = [n for n in mine if n not in pairs]
    only_headers = [n for n in theirs if n not in pairs.values()]
    for name in list(only_manual):
        twin = next((h for h in only_headers if _same_bits(mine[name]["bits"], theirs[h]["bits"])), None)
        if twin is not None:
            found.append({"kind": "field renamed", MANUAL: name, HEADERS: twin, "bits": mine[name]["bits"]})
            only_manual.remove(name)
            only_headers.remove(twin)
    found += [{"kind": "field only in manual", "field": n, "bits": mine[n]["bits"]} for n in only_manual]
    found += [{"kind": "field only in headers", "field": n, "bits": theirs[n]["bits"]} for n in only_headers]
    for name, twin in sorted(pairs.items()):
        a, b = mine[name], theirs[twin]
        if not _same_bits(a["bits"], b["bits"]):
            found.append({"kind": "bits differ", "field": name, MANUAL: a["bits"], HEADERS: b["bits"]})
        if a["access"] and b["access"] and _norm_access(a["access"]) != _norm_access(b["access"]):
            found.append({"kind": "access differs", "field": name, MANUAL: a["access"], HEADERS: b["access"]})
        if None not in (_int(a["reset"]), _int(b["reset"])) and _int(a["reset"]) != _int(b["reset"]):
            found.append({"kind": "default differs", "field": name, MANUAL: a["reset"], HEADERS: b["reset"]})
    return found


def compose_reset(fields: list[dict[str, Any]]) -> tuple[int | None, str]:
    """A register's reset value from its fields' defaults; (None, why) naming every field whose
    default is undefined upstream (``x``: the source says the bits come up in no set state), given
    nowhere, or whose bit range is missing. The first two differ for the firmware: an undefined
    default is a documented fact, a missing one only a gap in the sources."""
    value = 0
    undefined: list[str] = []
    no_default: list[str] = []
    no_bits: list[str] = []
    for item in fields:
        span, default = _bit_span(item["bits"]), _int(item["reset"])
        if span is None:
            no_bits.append(item["name"])
            continue
        if default is None:
            named = f"{item['name']} [{item['bits']}]"
            (undefined if _UNDEFINED_DEFAULT.fullmatch(item["reset"] or "") else no_default).append(named)
            continue
        high, low = span
        value |= (default & ((1 << (high - low + 1)) - 1)) << low
    if not undefined and not no_default and not no_bits:
        return value, ""
    if len(no_default) == len(fields):
        return None, "no reset: no field has a default"
    if len(undefined) == len(fields):
        return None, "no reset: every field's default is undefined (x) upstream"
    parts = [f"undefined (x) upstream for {', '.join(undefined)}"] if undefined else []
    parts += [f"no default for {', '.join(no_default)}"] if no_default else []
    parts += [f"no bit range for {', '.join(no_bits)}"] if no_bits else []
    return None, "no reset: " + "; ".join(parts)


# A default written as ``x`` (headers) or one ``x`` per bit (the manual's ``xxxxxxxx``).
_UNDEFINED_DEFAULT = re.compile(r"[xX]+")


def partial_reset(fields: list[dict[str, Any]]) -> dict[str, str] | None:
    """The reset of the bits whose default is known, and the mask of those it is not (``x``), for
    a register whose full reset is undefined; None when a bit range is unknown too."""
    value = undefined = 0
    if all(_int(item["reset"]) is None for item in fields):
        return None  # nothing known: a value of 0 would only look like one
    for item in fields:
        span = _bit_span(item["bits"])
        if span is None:
            return None
        high, low = span
        mask = ((1 << (high - low + 1)) - 1) << low
        default = _int(item["reset"])
        if default is None:
            undefined |= mask
        else:
            value |= (default << low) & mask
    if not undefined:
        return None
    return {"value": f"0x{value:08X}", "undefined_bits": f"0x{undefined:08X}"}


def _bit_span(bits: str | None) -> tuple[int, int] | None:
    """``23:20`` -> (23, 20), ``3`` -> (3, 3), ``?`` -> None. ``20:23`` is the same bits (ESP32-P4's
    struct headers write some ranges low first)."""
    if not bits or not re.fullmatch(r"\d+(?::\d+)?", bits):
        return None
    first, _, second = bits.partition(":")
    ends = (int(first), int(second or first))
    return max(ends), min(ends)


def _field_key(name: str) -> str:
    """A field name compared across sources: the manual's rendering can keep stray punctuation."""
    return re.sub(r"[^A-Z0-9_]", "", name.upper())


def _same_bits(a: str | None, b: str | None) -> bool:
    return _bit_span(a) == _bit_span(b)


def _norm_access(access: str) -> str:
    return re.sub(r"\s+", "", access).upper()


def _int(text: str | None) -> int | None:
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _instance_of(register: dict[str, Any], header_name: str) -> dict[str, str]:
    """The instance a header macro is of a parameterised manual register (``CH0`` of ``CHn``)."""
    pattern = parameter_regex(register["name"], register["parameters"])
    match = pattern.match(header_name) if pattern is not None else None
    return {k.removeprefix("p_"): v for k, v in match.groupdict().items()} if match else {}


def _instance_fields(fields: list[dict[str, Any]], instance: dict[str, str]) -> list[dict[str, Any]]:
    """Manual field names with the instance filled in (``LEDC_TIMER_SEL_CHn`` -> ``..._CH0``)."""
    if not instance:
        return fields
    return [{**item, "name": _fill_instance(item["name"], instance)} for item in fields]


def _compare_target(chip: str, revision: str | None, compare_with: str) -> tuple[str, str | None]:
    """``esp32c6``, ``v1.3`` (another revision of the same chip) or ``esp32p4:v1.3``."""
    if not isinstance(compare_with, str) or not compare_with.strip():
        raise ValueError("compare_with must name a chip (e.g. esp32c6) or a revision of the same chip")
    text = compare_with.strip()
    if ":" in text or "@" in text:
        other_chip, other_rev = re.split(r"[:@]", text, maxsplit=1)
        other = validate_chip(other_chip)
        return other, validate_revision(other_rev, other)
    if text in chips()[chip].revisions:
        if text == revision:
            raise ValueError(f"compare_with {text!r} is the revision being looked up; name the other one")
        return chip, text
    other = normalize_chip(text)
    if other is None:
        raise ValueError(
            f"compare_with {text!r} is neither a chip ({', '.join(chips())}) "
            f"nor a revision of {chip} ({', '.join(chips()[chip].revisions)})"
        )
    return other, _resolve_revision(other, None)


def compare_fields(this: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """Fields present only in ``other`` (added), only in ``this`` (removed), or differing in layout."""
    mine = {f["name"]: f for f in this if f["name"] != "(reserved)"}
    theirs = {f["name"]: f for f in other if f["name"] != "(reserved)"}
    changed = []
    for name in mine.keys() & theirs.keys():
        diffs = {
            key: {"from": mine[name][key], "to": theirs[name][key]}
            for key in ("bits", "access", "reset")
            if mine[name][key] != theirs[name][key]
        }
        if diffs:
            changed.append({"name": name, **diffs})
    return {
        "added": sorted(theirs.keys() - mine.keys()),
        "removed": sorted(mine.keys() - theirs.keys()),
        "changed": sorted(changed, key=lambda c: c["name"]),
    }


# ---------------------------------------------------------------- one register in two ESP-IDF releases

RELEASE_COMPARE_NOTE = (
    "the manual holds for every ESP-IDF release: this compares the two releases' SoC headers (the "
    "register's address expression, its field lines and the reset composed from them); added, removed "
    "and changed read from the answering release to the compared one"
)


def held_releases(table: Any) -> ReleaseIndex:
    """The ESP-IDF releases a table holds, for callers without the server's store index."""
    held = ReleaseIndex()
    for row in _rows(table, "doc_type != 'trm'", ["chips", "releases", "release_sources"]):
        held.add_row(row)
    return held


def _release_label(held: ReleaseIndex, series: str) -> dict[str, str]:
    build = held.held[series]
    return {"idf_version": series, "exact_version": build.version, "commit": build.commit}


def _compare_release_target(
    held: ReleaseIndex, chip: str, release: str | None, requested: str
) -> tuple[str, list[str]]:
    """The held series ``compare_release`` means for ``chip``, and a note when inexact; every refusal
    names the valid values. Only held series names (never caller text) reach a filter."""
    if not held.held:
        raise ValueError(
            "compare_release: the store holds no ESP-IDF release, so there is nothing to compare"
        )
    having = [s for s in held.series if chip in held.held[s].chips]
    if not having:
        raise ValueError(
            f"compare_release: no ESP-IDF release in the store covers {chip}; only its manual answers"
        )
    if release is None:
        raise ValueError(
            "compare_release compares the answering release with another, and idf_version='all' names "
            f"none: pass one idf_version; {chip} is held in: {', '.join(having)}"
        )
    series, note = held.resolve(requested, what="compare_release")
    if series is None:
        raise ValueError(
            f"compare_release names one release, not 'all'; {chip} is held in: {', '.join(having)}"
        )
    if series == release:
        others = [s for s in having if s != release]
        valid = (
            f"another: {', '.join(others)}" if others else f"another, but {chip} is held only in {release}"
        )
        raise ValueError(
            f"compare_release {requested.strip()!r} is {release}, the release answering; name {valid}"
        )
    if chip not in held.held[series].chips:
        raise ValueError(
            f"the store's ESP-IDF {series} covers {', '.join(sorted(held.held[series].chips))}, not {chip}; "
            f"{chip} is held in: {', '.join(having)}"
        )
    return series, [note] if note else []


def _header_card(index: ChipIndex, name: str) -> tuple[Macro | None, list[dict[str, Any]]]:
    """The header macro defining register ``name`` (the card with its fields when there is one) and
    those fields, chosen exactly as the register answer chooses them."""
    hit = _find_trm(index, name)
    documented = hit[0].register["name"] if hit else None
    exact, header = _pick_header(index, name, hit, _header_defines(index, name, documented))
    if header is not None:
        return header, index.header_fields[header.name]
    return (exact[0] if exact else None), []


def _hex(value: int | None) -> str | None:
    return f"0x{value:08X}" if value is not None else None


def compare_release_view(
    table: Any, chip: str, revision: str | None, name: str, release: str, other: str, held: ReleaseIndex
) -> dict[str, Any]:
    """Register ``name`` in the SoC headers of ``release`` against ``other``: present or not, and
    the fields added, removed and changed, the address expression, absolute address and reset."""
    this_index = chip_index(table, chip, revision, release)
    other_index = chip_index(table, chip, revision, other)
    build = held.held[other]
    if not other_index.macros:
        raise ValueError(
            f"the store's ESP-IDF {other} ({build.version}) holds no SoC headers for {chip} (only its "
            f"docs): there is no {name} there to compare"
        )
    mine, mine_fields = _header_card(this_index, name)
    theirs, their_fields = _header_card(other_index, name)
    entry: dict[str, Any] = {
        **_release_label(held, other),
        "answering": _release_label(held, release) if release in held.held else {"idf_version": release},
        "register": name,
        "present": theirs is not None,
        "present_in_answering_release": mine is not None,
    }
    in_manual = " (the manual documents it for every release)" if _find_trm(this_index, name) else ""
    if theirs is None:
        entry["message"] = (
            f"{name} is not defined in the ESP-IDF {other} ({build.version}) SoC headers for {chip}"
            + (f", nor in {release}'s" if mine is None else f"; {release}'s define it")
            + in_manual
        )
        return {**entry, "note": RELEASE_COMPARE_NOTE}
    entry["header_file"] = theirs.file_path
    if mine is None:
        entry["message"] = (
            f"{name} is defined in the ESP-IDF {other} SoC headers for {chip} but not in {release}'s"
            f"{in_manual}; its fields there are listed as added"
        )
    diff: dict[str, Any] = compare_fields(mine_fields, their_fields)
    if mine is not None:
        mine_reset, their_reset = compose_reset(mine_fields)[0], compose_reset(their_fields)[0]
        pairs = {
            "expression": (mine.body, theirs.body),
            "header_file": (mine.file_path, theirs.file_path),
            "address_absolute": (_hex(_absolute(this_index, mine)), _hex(_absolute(other_index, theirs))),
            "reset": (_hex(mine_reset), _hex(their_reset)) if mine_fields and their_fields else (None, None),
        }
        diff.update({f"{key}_changed": {"from": a, "to": b} for key, (a, b) in pairs.items() if a != b})
        entry["identical"] = not any(diff.values())
    return {**entry, **diff, "note": RELEASE_COMPARE_NOTE}


def _card_in_text(text: str, name: str) -> tuple[str, tuple[tuple[str, ...], ...]] | None:
    """The card of register ``name`` in one header row: its expression and field lines, descriptions
    left out (a reworded comment is no change to the hardware)."""
    lines = iter(text.splitlines())
    for line in lines:
        match = _CARD_LINE.match(line)
        if match is None or match.group("name") != name:
            continue
        fields: list[tuple[str, ...]] = []
        for rest in lines:
            if not rest.startswith("- "):
                break
            if (item := _FIELD_LINE.match(rest)) is not None:
                fields.append(tuple(item.group(k) or "" for k in ("name", "bits", "access", "reset")))
        return _C_COMMENT.sub("", match.group("value")).strip(), tuple(fields)
    return None


def other_release_note(
    table: Any, chip: str, revision: str | None, name: str, release: str, held: ReleaseIndex
) -> dict[str, Any] | None:
    """When another held release's SoC header card of ``name`` differs from the answering one's, say
    where: an answer from a default release is otherwise silently one release's truth. One filter on
    the symbol_refs label index, so every default answer can afford it."""
    index = chip_index(table, chip, revision, release)
    macro, _ = _header_card(index, name)
    key = macro.name if macro is not None else name
    where = f"doc_type = 'src' AND array_has(chips, {_quote(chip)}) AND array_has(symbol_refs, {_quote(key)})"
    cards: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {}
    for row in _rows(table, where, ["text", "revisions", "releases"]):
        card = _card_in_text(row["text"], key) if _in_revision(row, revision) else None
        for series in row["releases"] if card is not None else []:
            cards.setdefault(series, card)  # type: ignore[arg-type]
    mine = cards.get(release)
    differ = [s for s in newest_first(cards) if s != release and cards[s] != mine]
    if not differ:
        return None
    builds = ", ".join(f"{s} ({held.held[s].version})" if s in held.held else s for s in differ)
    what = f"differs in {builds}" if mine is not None else f"is not in {release}'s headers but is in {builds}"
    return {
        "differs_in": differ,
        "note": f"the SoC header card of {key} {what}; pass compare_release={differ[0]} to list the changes",
    }


# A chip's index builds its maps on first use and is shared by every caller. The MCP server answers
# calls on several worker threads, and a map read while another thread is still filling it answered
# "no register at 0x..." for registers that are there (measured: 16-19 of 40 concurrent ESP32-P4
# address lookups per trial). Lookups are milliseconds once a chip's index is built, so one lock costs little.
_LOOKUP_LOCK = threading.RLock()
_Function = TypeVar("_Function", bound=Callable[..., Any])


def _one_at_a_time(function: _Function) -> _Function:
    @functools.wraps(function)
    def serialised(*args: Any, **kwargs: Any) -> Any:
        with _LOOKUP_LOCK:
            return function(*args, **kwargs)

    return serialised  # type: ignore[return-value]


@_one_at_a_time
def prepare_chip(table: Any, chip: str, revision: str | None = None, release: str | None = None) -> int:
    """Build a chip's register index and address map before anyone asks, and return how many
    addresses it holds. The server does this for its project's chip at start: the first lookup by
    address otherwise pays for the map (0.1-1.4 s per chip on the full store, measured in
    docs/soc-headers.md), and an agent works on one chip."""
    chip_id = validate_chip(chip)
    index = chip_index(table, chip_id, _resolve_revision(chip_id, revision), release)
    index.base_owners()
    addresses = index.addresses()
    # every answer then asks the symbol_refs label index (other_release_note); its first read
    # loads it (~0.1 s), so one read happens here
    defined = index.header_registers()
    if defined:
        key = _quote(defined[0].name)
        _rows(table, f"doc_type = 'src' AND array_has(symbol_refs, {key})", ["releases"])
    return len(addresses)


@_one_at_a_time
def lookup_register(
    table: Any,
    chip: str,
    name: str | None = None,
    address: str | int | None = None,
    revision: str | None = None,
    compare_with: str | None = None,
    peripheral: str | None = None,
    release: str | None = None,
    compare_release: str | None = None,
    held: ReleaseIndex | None = None,
    note_other_releases: bool = False,
) -> dict[str, Any]:
    """One register as JSON-ready data, by name or by address, optionally diffed against another
    chip or ESP32-P4 revision. ``release`` (a series the store holds, already validated) picks the
    ESP-IDF release whose headers answer; ``compare_release`` (any spelling of a held release) diffs
    them against another release's. ``held``: the store's releases (read from ``table`` when not
    given). ``note_other_releases``: say when another release's header card of the register differs
    (for answers from a release the caller did not name). Raises ValueError with the valid choices
    for any bad input."""
    chip_id = validate_chip(chip)
    rev = _resolve_revision(chip_id, revision)
    if (name is None) == (address is None):
        raise ValueError("give exactly one of name (e.g. UART_CLKDIV_REG) or address (e.g. 0x60000014)")
    if (compare_release is not None or note_other_releases) and held is None:
        held = held_releases(table)
    other_release: str | None = None
    release_notes: list[str] = []
    if compare_release is not None and held is not None:  # checked before the lookup: bad input first
        other_release, release_notes = _compare_release_target(held, chip_id, release, compare_release)
    index = chip_index(table, chip_id, rev, release)
    if not index.trm and not index.macros:
        raise ValueError(f"the store has no TRM registers or SoC headers for {chip_id}")
    if address is not None:
        if peripheral is not None:
            _validate_identifier(peripheral, "peripheral")
        target = _parse_address(address)
        if target % 4 and target not in index.addresses():  # CLIC's byte registers are real
            aligned = _registers_at(index, target & ~3, peripheral)
            inside = f"; 0x{target & ~3:X} holds {aligned[0][0]}" if aligned else ""
            raise ValueError(
                f"address 0x{target:X} is not 32-bit aligned: registers sit at multiples of 4{inside}"
            )
        names = _registers_at(index, target, peripheral)
        if not names:
            raise ValueError(_address_not_found(index, target))
        answers = [_describe_register(index, n, header_instance=i) for n, i in names]
        # an alias without fields (ESP32's IO_MUX_GPIO37_REG = PERIPHS_IO_MUX_...) yields to the
        # name that documents the layout
        best = max(
            range(len(answers)),
            key=lambda k: (bool(answers[k]["fields"]), "same_register_as" not in answers[k], -k),
        )
        answer = answers[best]
        answer["queried_address"] = f"0x{target:X}" + (f" in {peripheral}" if peripheral else "")
        if names[best][1]:
            answer["queried_instance"] = names[best][1]  # e.g. UART2 of UART_CLKDIV_REG(i)
        if len(names) > 1:
            answer["also_at_this_address"] = [n for k, (n, _) in enumerate(names) if k != best]
        if peripheral is None and answer["address_absolute"] != f"0x{target:08X}":
            owner = index.owning_base(target)
            assert owner is not None  # the address map only holds addresses inside a block
            answer["absolute_from"] = (
                f"the queried address: {owner[1][0]} (0x{owner[0]:08X}) + 0x{target - owner[0]:X}, "
                f"the documented offset in this instance of the peripheral"
            )
            answer["address_absolute"] = f"0x{target:08X}"
    else:
        register = _validate_identifier(name, "name")  # type: ignore[arg-type]
        try:
            answer = _describe_register(index, register)
        except UnknownRegister as error:
            raise UnknownRegister(str(error) + _elsewhere(table, register, chip_id, release)) from None
    answer = {"chip": chip_id, "revision": rev, "revision_scope": _revision_scope(chip_id, rev), **answer}
    if compare_with is not None:
        other_chip, other_rev = _compare_target(chip_id, rev, compare_with)
        other_index = chip_index(table, other_chip, other_rev, release)
        label = other_chip + (f" {other_rev}" if other_rev else "")
        try:
            other = _describe_register(other_index, answer["name"])
        except ValueError as exc:
            answer["compare"] = {"with": label, "present": False, "message": str(exc)}
        else:
            diff = compare_fields(answer["fields"], other["fields"])
            for key in ("address", "reset", "address_absolute"):
                if answer.get(key) != other.get(key):
                    diff[f"{key}_changed"] = {"from": answer.get(key), "to": other.get(key)}
            answer["compare"] = {"with": label, "present": True, "chapter": other.get("chapter"), **diff}
    if other_release is not None and held is not None and release is not None:
        view = compare_release_view(table, chip_id, rev, answer["name"], release, other_release, held)
        answer["compare_release"] = {**view, "notes": release_notes} if release_notes else view
    elif note_other_releases and held is not None and release is not None:
        note = other_release_note(table, chip_id, rev, answer["name"], release, held)
        answer.update({"other_releases": note} if note is not None else {})
    return answer
