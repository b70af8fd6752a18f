"""Parse one Technical Reference Manual chapter from its LaTeX source into a heading tree.

The TRM sources are read as source, not compiled (DESIGN §4): a chapter root is expanded by
following its includes, evaluating the tag conditionals for one manual, expanding the user
macros it defines, and then cut into sections, registers, tables, listings and prose. Each
step exists because skipping it lost content silently in the past; docs/trm-latex.md lists
the traps and where each is handled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from itertools import pairwise
from pathlib import Path

from pylatexenc import latexwalker, macrospec
from pylatexenc.latex2text import (
    EnvironmentTextSpec,
    LatexNodes2Text,
    MacroTextSpec,
    fmt_equation_environment,
    get_default_latex_context_db,
)

from chunk_format import OFFSET_LIMIT, field_text, register_head_lines
from chunking import Block, Section
from latex_math import MATH_ENVIRONMENTS, FormulaText
from latex_source import (
    VERBATIM_ENVIRONMENTS,
    ExpandContext,
    IncludeProblem,
    IncludeResolver,
    Macro,
    expand_file,
    expand_macros,
    extract_definitions,
    read_group,
    read_optional,
    search_dirs,
)
from trm_refs import LabelTarget, labels_defined, mark_references, take_marks

TABLE_ENVIRONMENTS = ("tabular", "tabular*", "tabularx", "tabulary", "longtable", "longtable*")
# environments whose begin/end lines only wrap content (floats, boxes, font sizes)
WRAPPER_ENVIRONMENTS = (
    "table",
    "table*",
    "figure",
    "figure*",
    "center",
    "centering",
    "threeparttable",
    "ThreePartTable",
    "landscape",
    "small",
    "footnotesize",
    "tiny",
    "minipage",
    "multicols",
    "flushright",
    "flushleft",
    "TableNotes",
    "tablenotes",
)
SECTION_LEVELS = {"chapter": 0, "section": 1, "subsection": 2, "subsubsection": 3}
UNNAMED_FIELD = "(unnamed)"

_IDENTIFIER = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_PARAM_NOTE = re.compile(r"\(([^()]*)\)")
# a header whose parameter note slipped into the address argument: ``{n: 1 - 31)(0x00C8 + 4*n}``
_NOTE_IN_ADDRESS = re.compile(r"([A-Za-z]+\s*:[^()]*)\)\s*\((.*)")


# ---------------------------------------------------------------------------------------------
# LaTeX fragments to plain text (pylatexenc with the TRM's own macros declared)
# ---------------------------------------------------------------------------------------------


def _last_arg_text(node: latexwalker.LatexMacroNode, l2tobj: LatexNodes2Text) -> str:
    args = [a for a in (node.nodeargd.argnlist if node.nodeargd else []) if a is not None]
    return l2tobj.nodelist_to_text([args[-1]]) if args else ""


def _ref_text(node: latexwalker.LatexMacroNode, l2tobj: LatexNodes2Text) -> str:
    args = [a for a in (node.nodeargd.argnlist if node.nodeargd else []) if a is not None]
    if not args:
        return ""
    label = args[-1].latex_verbatim().strip("{}")
    return label.split(":", 1)[-1]


# (name, walker argument spec, text rendering) for macros the default context gets wrong
_TRM_MACROS: tuple[tuple[str, str, str | Callable | None], ...] = (
    ("label", "{", ""),
    ("hypertarget", "{{", _last_arg_text),
    ("hyperlink", "{{", _last_arg_text),
    ("index", "{", ""),
    ("hyperref", "[{", _last_arg_text),
    ("href", "{{", _last_arg_text),
    ("url", "{", _last_arg_text),
    ("ref", "{", _ref_text),
    ("nameref", "{", _ref_text),
    ("autoref", "{", _ref_text),
    ("pageref", "{", ""),
    ("textcolor", "{{", _last_arg_text),
    ("color", "{", ""),
    ("colorbox", "{{", _last_arg_text),
    ("rowcolor", "[{", ""),
    ("cellcolor", "[{", ""),
    ("rotatebox", "[{{", _last_arg_text),
    ("multicolumn", "{{{", _last_arg_text),
    # \multirow[vpos]{rows}[bigstruts]{width}[vmove]{text}: the width is often a bare ``*``
    ("multirow", "[{[{[{", _last_arg_text),
    ("makecell", "[{", _last_arg_text),
    ("includegraphics", "[{", ""),
    ("vspace", "*{", ""),
    ("hspace", "*{", ""),
    ("caption", "[{", None),
    ("footnote", "[{", " (%(2)s)"),
    ("todo", "[{", ""),
    ("hexprefix", "", "0x"),
    ("regindex", "{", _last_arg_text),
    ("mkern", "", ""),
    ("cline", "{", ""),
    ("hline", "", ""),
    ("toprule", "", ""),
    ("midrule", "", ""),
    ("bottomrule", "", ""),
    ("newline", "", "\n"),
    ("linebreak", "", "\n"),
    ("addtocounter", "{{", ""),
    ("setcounter", "{{", ""),
    ("reglabel", "{", ""),
    ("regnewline", "", ""),
    ("clearpage", "", ""),
    ("newpage", "", ""),
    ("bytefieldsetup", "{", ""),
    ("insertTableNotes", "", ""),
)


@cache
def _converter() -> tuple[latexwalker.LatexContextDb, FormulaText]:
    walker_db = latexwalker.get_default_latex_context_db()
    walker_db.add_context_category(
        "trm",
        prepend=True,
        macros=[macrospec.MacroSpec(name, spec) for name, spec, _ in _TRM_MACROS],
        environments=[macrospec.EnvironmentSpec(env, is_math_mode=True) for env in ("math", "displaymath")],
    )
    text_db = get_default_latex_context_db()
    text_specs = [
        MacroTextSpec(name, simplify_repl=rendering)
        for name, _spec, rendering in _TRM_MACROS
        if rendering is not None
    ]
    # every math span goes to latex_math, which keeps the formula's precedence
    math_envs = [EnvironmentTextSpec(e, simplify_repl=fmt_equation_environment) for e in MATH_ENVIRONMENTS]
    text_db.add_context_category("trm", prepend=True, macros=text_specs, environments=math_envs)
    return walker_db, FormulaText(latex_context=text_db, math_mode="text", strict_latex_spaces=False)


def walker_context() -> latexwalker.LatexContextDb:
    """The parsing context of TRM prose (the TRM's macros and math environments declared)."""
    return _converter()[0]


_SIMPLE_ESCAPE = re.compile(r"(?<!\\)\\([_&%#])")
_NEEDS_LATEX = re.compile(r"[\\{}$~^]|--|``|''")


# the commonest markup, rewritten with the same result pylatexenc gives (non-nested arguments only)
_COMMON_MARKUP: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\\label\{[^{}\\]*\}"), ""),
    (re.compile(r"\\hyperref\[[^\]]*\]\{([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\(?:ref|nameref|autoref)\{(?:[^{}\\:]*:)?([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\(?:textbf|textit|texttt|emph|textrm|textsf)\{([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\(?:hline|centering|small|scriptsize|footnotesize|newpage|clearpage)(?![A-Za-z])"), ""),
    (re.compile(r"\\cline\{[^{}\\]*\}"), ""),
    (re.compile(r"\\regindex\{([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\makecell(?:\[[^\]]*\])?\{([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\multirow(?:\[[^\]]*\])?\{[^{}\\]*\}(?:\[[^\]]*\])?\{[^{}\\]*\}\{([^{}\\]*)\}"), r"\1"),
    (re.compile(r"\\\\(?!\\)\s*"), "\n"),
)


def _simplify_common_markup(fragment: str) -> str:
    for pattern, replacement in _COMMON_MARKUP:
        fragment = pattern.sub(replacement, fragment)
    return fragment


@lru_cache(maxsize=200_000)
def latex_to_text(fragment: str) -> str:
    """Plain text of a LaTeX fragment, line breaks kept, runs of spaces collapsed.

    Fragments without markup (most table cells) skip pylatexenc, and results are cached: the
    same cells and paragraphs recur across a chip's manuals.
    """
    if not fragment.strip():
        return ""
    plain = _simplify_common_markup(_SIMPLE_ESCAPE.sub(r"\1", fragment))
    if _NEEDS_LATEX.search(plain):
        walker_db, l2t = _converter()
        walker = latexwalker.LatexWalker(fragment, latex_context=walker_db, tolerant_parsing=True)
        nodes, _pos, _len = walker.get_latex_nodes()
        text = l2t.nodelist_to_text(nodes).replace("\xa0", " ")
    else:
        text = plain
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def identifiers(text: str) -> list[str]:
    """UPPER_SNAKE identifiers (register, field, signal names) a text mentions."""
    return list(dict.fromkeys(_IDENTIFIER.findall(text)))


_FORMAT_WRAPPER = re.compile(
    r"\\(?:textit|textbf|texttt|textrm|textsf|emph|regindex|mbox|text|textnormal|underline)\s*\{"
)


def plain_identifier(latex: str) -> str:
    """A register or field name as the manual prints it: ``AES\\_KEY\\_\\regindex{n}\\_REG`` ->
    ``AES_KEY_n_REG``, colours, rotation and font switches removed, on one line."""
    text = latex
    text = re.sub(r"\\rotatebox\s*(?:\[[^\]]*\])?\s*\{[^{}]*\}", "", text)
    text = re.sub(r"\\textcolor\s*\{[^{}]*\}", "", text)
    text = re.sub(r"\\color\s*\{[^{}]*\}", "", text)
    text = re.sub(r"\\hexprefix\s*(?:\{\})?", "0x", text)
    text = _FORMAT_WRAPPER.sub("{", text)
    text = re.sub(r"\\(?:it|bf|tt|rm|sf|em|small|footnotesize|scriptsize)(?![A-Za-z])\s*", "", text)
    text = re.sub(r"\\([_&#%$])", r"\1", text)
    text = re.sub(r"\\(?:hspace|vspace)\*?\s*\{[^{}]*\}", "", text)
    text = text.replace("\\\\", " ").replace("~", " ")
    if "\\" in text:
        text = latex_to_text(text)
    text = text.replace("{", "").replace("}", "").replace("$", "")
    return re.sub(r"\s+", " ", text).strip()


# ---------------------------------------------------------------------------------------------
# Registers
# ---------------------------------------------------------------------------------------------


@dataclass
class RegField:
    """One bitfield: name, bit range, reset value (None when the manual leaves it open)."""

    name: str
    msb: int
    lsb: int
    reset: int | None
    reset_text: str


@dataclass
class Register:
    """One register, possibly assembled from several continued ``register`` environments."""

    name: str
    param_note: str
    address: str
    fields: list[RegField] = field(default_factory=list)
    descriptions: dict[str, tuple[str, str]] = field(default_factory=dict)
    block: Block | None = None
    # The chapter's register summary table says in words what the register is for ("Clock divider
    # configuration"); the register block itself only names fields, so a question asked in words
    # would otherwise find the summary table row instead of the block that answers it.
    summary: str = ""
    # ESP32's summary tables give each register's absolute address (one column per instance:
    # UART0 0x3FF40050, UART1 ...) where its block gives the offset (0x50): a question for "the
    # address" of a register would otherwise be answered by the table row, not the block.
    absolute_address: str = ""
    doc_refs: list[str] = field(default_factory=list)  # labels its field descriptions reference

    @property
    def symbol_refs(self) -> list[str]:
        names = [self.name] + [f.name for f in self.fields] + list(self.descriptions)
        return [n for n in dict.fromkeys(names) if n and n != "(reserved)" and " " not in n]

    def reset_value(self) -> int | None:
        if not self.fields or any(f.reset is None for f in self.fields):
            return None
        return sum(f.reset << f.lsb for f in self.fields)

    def render(self) -> str:
        """The register-format contract (notes/REGISTER_FORMAT.md): one block, name line first."""
        lines = register_head_lines(
            self.name, self.param_note, self.address, self.absolute_address, self.reset_value(), self.summary
        )
        described: set[str] = set()
        for fld in self.fields:
            access, description = self._describe(fld.name)
            if description or access:
                described.add(self._description_key(fld.name) or fld.name)
            name = self._shown_name(fld.name)
            if name != fld.name:
                description = f"{description} (the register drawing labels it {fld.name})".lstrip()
            bits = f"{fld.msb}" if fld.msb == fld.lsb else f"{fld.msb}:{fld.lsb}"
            reset = f"0x{fld.reset:X}" if fld.reset is not None else (fld.reset_text or "unknown")
            lines.append(field_text(name, bits, access, reset, description or None))
        for name, (access, description) in self.descriptions.items():
            if name not in described and not any(self._matches(name, f.name) for f in self.fields):
                lines.append(field_text(name, access=access, description=description))
        return "\n".join(lines)

    def _shown_name(self, field_name: str) -> str:
        """The name a field is listed under.

        A parameterised register (``LEDC_CHn_CONF0_REG (n: 0-5)``) is often drawn with one instance's
        field names (``LEDC_OVF_CNT_RESET_CH0``) while its description names the field for every
        instance (``LEDC_OVF_CNT_RESET_CHn``); listing the drawn name would tell a reader of channel 2
        to use channel 0's field. Fields drawn once per index (``PCNT_CNT_PAUSE_U0..7``) keep theirs.
        """
        key = self._description_key(field_name)
        if not self.param_note or key is None or key == field_name:
            return field_name
        sharing = sum(1 for f in self.fields if self._description_key(f.name) == key)
        return key if sharing == 1 else field_name

    def _description_key(self, field_name: str) -> str | None:
        if field_name in self.descriptions:
            return field_name
        for name in self.descriptions:
            if self._matches(name, field_name):
                return name
        return None

    def _describe(self, field_name: str) -> tuple[str, str]:
        key = self._description_key(field_name)
        return self.descriptions[key] if key else ("", "")

    @staticmethod
    def _matches(described: str, field_name: str) -> bool:
        """``PCNT_CNT_PAUSE_Un`` describes ``PCNT_CNT_PAUSE_U7``: a lone lower-case letter
        inside an upper-case name is an index placeholder."""
        if described == field_name:
            return True
        pattern = re.sub(r"(?<=[A-Z0-9_])[a-z](?=[A-Z0-9_]|$)", "__IDX__", described)
        if "__IDX__" not in pattern:
            return False
        regex = re.escape(pattern).replace("__IDX__", r"\d+")
        return re.fullmatch(regex, field_name) is not None


_REGFIELD = re.compile(r"\\regfield(?![A-Za-z])")


def parse_reset(raw: str, width: int) -> tuple[int | None, str]:
    """A field's reset value from the ``\\regfield`` reset argument.

    ``{0101}`` (no inner braces) lists one bit per character, MSB first; ``{{V}}`` prints V as
    written: hex with ``0x``/``\\hexprefix{}``, Verilog ``1'b1``, else decimal (binary when the
    digits are all 0/1, exactly the field width, and too large to be decimal).
    """
    text = raw.strip()
    inner = text[1:-1].strip() if text.startswith("{") and text.endswith("}") else None
    if inner is None:
        bits = text.replace(" ", "")
        if bits and set(bits) <= {"0", "1"}:
            return int(bits, 2), f"0b{bits}"
        return None, plain_identifier(text) or "unknown"
    value = plain_identifier(inner).replace(" ", "")
    verilog = re.fullmatch(r"\d*'([bdhBDH])([0-9a-fA-F_]+)", value)
    if verilog:
        base = {"b": 2, "d": 10, "h": 16}[verilog.group(1).lower()]
        return int(verilog.group(2).replace("_", ""), base), value
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", value):
        return int(value, 16), value
    if re.fullmatch(r"\d+", value):
        number = int(value)
        if number >= 1 << width and set(value) <= {"0", "1"} and len(value) == width:
            return int(value, 2), value
        return number, value
    return None, value or "unknown"


def _parse_register_header(env_text: str) -> tuple[str, str, str, int] | None:
    """(name, parameter note, address, end of header) of ``{H}{NAME}{ADDR}`` after the begin."""
    placement = read_group(env_text, 0)
    if placement is None:
        return None
    name_group = read_group(env_text, placement[1])
    if name_group is None:
        return None
    addr_group = read_group(env_text, name_group[1])
    address_latex, end = (addr_group[0], addr_group[1]) if addr_group else ("", name_group[1])
    raw_name = plain_identifier(name_group[0])
    note = ""
    note_match = _PARAM_NOTE.search(raw_name)
    if note_match:
        # ``(n: 0-7)``, ``(m=2,3)``, ``(for I2S0 only)``: everything in parentheses qualifies the name
        note = _normalise_note(note_match.group(1))
        raw_name = raw_name[: note_match.start()] + raw_name[note_match.end() :]
    name = re.sub(r"\s+", "", raw_name)
    address = render_address(address_latex)
    slipped = _NOTE_IN_ADDRESS.fullmatch(address)
    if slipped and not note:
        note, address = _normalise_note(slipped.group(1)), slipped.group(2).strip()
    return name, note, address, end


def _normalise_note(note: str) -> str:
    return re.sub(r"\s*:\s*", ": ", re.sub(r"\s+", " ", note.strip()))


def render_address(latex: str) -> str:
    """The address as written: ``0x{}0060``/``\\hexprefix{}0060`` -> ``0x0060``, case and digit
    count kept, parameterised offsets (``0x0000+4*\\regindex{n}``) with the LaTeX removed."""
    return plain_identifier(latex.replace("{}", "")) or "unknown"


def _parse_fields(body: str) -> list[RegField]:
    fields: list[RegField] = []
    for match in _REGFIELD.finditer(body):
        name = read_group(body, match.end())
        width = read_group(body, name[1]) if name else None
        lsb = read_group(body, width[1]) if width else None
        reset = read_group(body, lsb[1]) if lsb else None
        if not (name and width and lsb and reset):
            continue
        try:
            width_bits, low = int(plain_identifier(width[0])), int(plain_identifier(lsb[0]))
        except ValueError:
            continue
        value, value_text = parse_reset(reset[0], width_bits)
        fields.append(
            RegField(
                name=re.sub(r"\s+", "", plain_identifier(name[0])) or UNNAMED_FIELD,
                msb=low + width_bits - 1,
                lsb=low,
                reset=value,
                reset_text=value_text,
            )
        )
    return fields


_ITEM_OR_ENV = re.compile(r"\\(begin|end)\{[^{}]*\}|\\item(?![A-Za-z])")
# the access codes the manuals use; a description may state its access before a nested list
_ACCESS_CODE = r"(?:R|W|O|RO|WO|WT|WTC|SS|SC|SU|WL|HRO|WS|WC|RC|W1|W1C|W1S|RW|R0)"
_ACCESS_ANYWHERE = re.compile(r"\(\s*(" + _ACCESS_CODE + r"(?:\s*/\s*" + _ACCESS_CODE + r")*)\s*\)")
_ACCESS_SUFFIX = re.compile(_ACCESS_ANYWHERE.pattern + r"\s*$")
_CONTINUATION_ITEM = re.compile(r"^Continued (from|on) ", re.IGNORECASE)


def _top_level_items(listing: str) -> list[int]:
    """Positions of ``\\item`` that start a field, not those of a list nested in a description."""
    positions: list[int] = []
    depth = 0
    for match in _ITEM_OR_ENV.finditer(listing):
        if match.group(1) == "begin":
            depth += 1
        elif match.group(1) == "end":
            depth = max(0, depth - 1)
        elif depth == 0:
            positions.append(match.start())
    return positions


def _parse_descriptions(body: str) -> dict[str, tuple[str, str]]:
    """Field name -> (access, description) from the ``reglist`` items."""
    start = body.find("\\begin{reglist}")
    stop = body.rfind("\\end{reglist}")
    if start < 0:
        return {}
    listing = body[start + len("\\begin{reglist}") : stop if stop > start else len(body)]
    descriptions: dict[str, tuple[str, str]] = {}
    previous: str | None = None
    positions = [*_top_level_items(listing), len(listing)]
    for begin, end in pairwise(positions):
        item = listing[begin + len("\\item") : end]
        label, after = read_optional(item, 0)
        text = latex_to_text((item[after:] if label is not None else item).replace("\\\\", "\n"))
        if label is None:
            # an unlabelled item continues the previous field's description
            if previous is not None and text:
                access, description = descriptions[previous]
                descriptions[previous] = (access, f"{description} {_one_line(text)}".strip())
            continue
        # ``SLC1_TOHOST_BITn_INT_ENA (n: 0-7)``: the index note is not part of the field name
        name = re.sub(r"\s+", "", _PARAM_NOTE.sub("", plain_identifier(label)))
        if not name or _CONTINUATION_ITEM.match(plain_identifier(label)):
            continue
        access = ""
        access_match = _ACCESS_SUFFIX.search(text) or _ACCESS_ANYWHERE.search(text)
        if access_match:
            access = re.sub(r"\s+", "", access_match.group(1))
            text = text[: access_match.start()].rstrip() + "\n" + text[access_match.end() :].lstrip()
        descriptions[name] = (access, _one_line(text))
        previous = name
    return descriptions


def _one_line(text: str) -> str:
    return _join_segments([s.strip() for s in text.split("\n") if s.strip()])


def _join_segments(segments: list[str]) -> str:
    """One line from a multi-line description: ``0: Disable\\\\ 1: Enable`` -> ``0: Disable; 1: Enable``."""
    out = ""
    for segment in segments:
        if not out:
            out = segment
        elif out.endswith((".", ":", ";", ",")) or segment.startswith("("):
            out += " " + segment
        else:
            out += "; " + segment
    return out


# ---------------------------------------------------------------------------------------------
# Tables and listings
# ---------------------------------------------------------------------------------------------

_LONGTABLE_MARKERS = re.compile(r"\\(endfirsthead|endhead|endfoot|endlastfoot)(?![A-Za-z])")
_ENV_TOKEN = re.compile(r"\\(begin|end)\{([^{}]+)\}")


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split on ``separator`` outside braces and nested environments (``\\&`` is not a cell break)."""
    parts: list[str] = []
    depth = 0
    env_depth = 0
    current = 0
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            if text.startswith("\\begin{", pos):
                env_depth += 1
            elif text.startswith("\\end{", pos):
                env_depth = max(0, env_depth - 1)
            if separator == "\\\\" and text.startswith("\\\\", pos) and depth == 0 and env_depth == 0:
                parts.append(text[current:pos])
                pos += 2
                optional, after = read_optional(text, pos)
                pos = after if optional is not None else pos
                current = pos
                continue
            pos += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        elif separator == "&" and char == "&" and depth == 0 and env_depth == 0:
            parts.append(text[current:pos])
            current = pos + 1
        pos += 1
    parts.append(text[current:])
    return parts


def render_table(body: str) -> list[str]:
    """Table rows as lines, cells separated by `` | ``; longtable's repeated head/foot dropped."""
    body = body.replace("\\tabularnewline", "\\\\")
    pieces = _LONGTABLE_MARKERS.split(body)
    if len(pieces) > 1:
        # pieces: content, marker, content, marker, ...; keep the first head and the body
        kept = [pieces[0]] if "endfirsthead" in pieces[1::2] or pieces[1] == "endhead" else []
        kept.append(pieces[-1])
        body = "\n".join(kept)
    lines: list[str] = []
    caption = re.search(r"\\caption\s*(?:\[[^\]]*\])?\s*\{", body)
    if caption:
        group = read_group(body, caption.end() - 1, skip_space=False)
        if group:
            lines.append("Table: " + latex_to_text(group[0]).replace("\n", " "))
            body = body[: caption.start()] + body[group[1] :]
    for row in _split_top_level(body, "\\\\"):
        cells = [latex_to_text(cell).replace("\n", " ").strip() for cell in _split_top_level(row, "&")]
        if any(cells):
            lines.append(" | ".join(cells))
    return lines


def _table_body_start(text: str, env: str, pos: int) -> int:
    """Skip the column specification (and width argument) after ``\\begin{env}``."""
    _opt, pos = read_optional(text, pos)
    groups = 2 if env in ("tabular*", "tabularx", "tabulary") else 1
    for _ in range(groups):
        group = read_group(text, pos)
        if group is None:
            break
        pos = group[1]
    return pos


def _environment_end(text: str, env: str, start: int) -> tuple[int, int]:
    """(content end, after ``\\end{env}``) for an environment whose content starts at ``start``;
    same-name environments nest. An unclosed environment ends the text (and is reported)."""
    depth = 1
    begin_token, end_token = f"\\begin{{{env}}}", f"\\end{{{env}}}"
    pos = start
    while True:
        next_end = text.find(end_token, pos)
        next_begin = text.find(begin_token, pos)
        if next_end < 0:
            return len(text), len(text)
        if 0 <= next_begin < next_end:
            depth += 1
            pos = next_begin + len(begin_token)
            continue
        depth -= 1
        if depth == 0:
            return next_end, next_end + len(end_token)
        pos = next_end + len(end_token)


# ---------------------------------------------------------------------------------------------
# Chapter tree
# ---------------------------------------------------------------------------------------------

_STRUCTURE = re.compile(
    r"\\(?P<sec>chapter|section|subsection|subsubsection)\*?(?![A-Za-z])"
    r"|\\begin\{(?P<env>register|lstlisting|verbatim|"
    + "|".join(re.escape(e) for e in TABLE_ENVIRONMENTS)
    + r")\}"
    r"|\\addtocounter\{Regfloat\}\{-1\}"
)
_WRAPPER = re.compile(
    r"\\(?:begin|end)\{(?:" + "|".join(re.escape(e) for e in WRAPPER_ENVIRONMENTS) + r")\}(?:\[[^\]]*\])?"
)


# drawings whose source is coordinates and box widths, not prose (captions sit outside them)
_DRAWING = re.compile(r"\\begin\{(bytefield|tikzpicture)\}.*?\\end\{\1\}", re.DOTALL)


@dataclass
class ChapterTree:
    """A parsed chapter: its heading tree, registers in document order, and what went wrong."""

    title: str
    root: Section
    registers: list[Register]
    warnings: list[str] = field(default_factory=list)
    # where each \label of the chapter lands; blocks carry the raw labels they reference in
    # doc_refs until the ingest resolves them (trm_refs.py)
    labels: dict[str, LabelTarget] = field(default_factory=dict)


def build_tree(text: str, fallback_title: str) -> ChapterTree:
    """Cut fully expanded chapter text into sections holding prose, table, listing and register blocks."""
    root = Section(title=fallback_title)
    stack: list[tuple[int, Section]] = [(-1, root)]
    registers: list[Register] = []
    warnings: list[str] = []
    continuation = False
    title_seen = False
    pos = 0
    text = mark_references(text)
    labels: dict[str, LabelTarget] = {}

    def define(fragment: str, register: str = "") -> None:
        section = tuple(take_marks(s.title)[0] for _, s in stack)
        for label in labels_defined(fragment):
            labels.setdefault(label, LabelTarget(register=register, section=section))

    def add_prose(fragment: str) -> None:
        define(fragment)
        fragment = _WRAPPER.sub("\n", _DRAWING.sub("\n", fragment))
        converted = latex_to_text(fragment)
        for paragraph in re.split(r"\n\s*\n", converted):
            if paragraph.strip():
                stack[-1][1].blocks.append(Block(paragraph.strip(), symbol_refs=identifiers(paragraph)))

    while True:
        match = _STRUCTURE.search(text, pos)
        if match is None:
            add_prose(text[pos:])
            break
        add_prose(text[pos : match.start()])
        if match.group("sec"):
            level = SECTION_LEVELS[match.group("sec")]
            _short, cursor = read_optional(text, match.end())
            group = read_group(text, cursor)
            if group is None:
                pos = match.end()
                continue
            title = latex_to_text(group[0]).replace("\n", " ").strip()
            pos = group[1]
            if level == 0:
                if not title_seen:
                    root.title = title or fallback_title
                    title_seen = True
                    continue
                level = 1  # a second \chapter in one root reads as a top-level part of it
            while stack[-1][0] >= level:
                stack.pop()
            section = Section(title=title)
            stack[-1][1].children.append(section)
            stack.append((level, section))
            continue
        if match.group("env") is None:  # \addtocounter{Regfloat}{-1}: next register continues
            continuation = True
            pos = match.end()
            continue
        env = match.group("env")
        if env == "register":
            start = match.end()
            pos, name = _take_register(text, start, stack[-1][1], registers, continuation, warnings)
            if name:
                define(text[start:pos], register=name)
            continuation = False
        elif env in VERBATIM_ENVIRONMENTS:
            _opt, start = read_optional(text, match.end())
            stop, pos = _environment_end(text, env, start)
            listing = text[start:stop].strip("\n")
            if stop == len(text):
                warnings.append(f"unclosed {env} ran to the end of the chapter")
            if listing.strip():
                stack[-1][1].blocks.append(Block(listing, symbol_refs=identifiers(listing)))
        else:
            start = _table_body_start(text, env, match.end())
            stop, pos = _environment_end(text, env, start)
            define(text[match.start() : pos])
            if stop == len(text):
                warnings.append(f"unclosed {env} ran to the end of the chapter")
            rows = render_table(text[start:stop])
            if rows:
                table_text = "\n".join(rows)
                stack[-1][1].blocks.append(Block(table_text, symbol_refs=identifiers(table_text)))
    _take_tree_marks(root)
    for register in registers:
        register.doc_refs = _take_register_marks(register)
    summaries = register_summaries(root, registers)
    for register in registers:
        if register.block is not None:
            row = summaries.get(register.name)
            register.summary = row.description if row else ""
            register.absolute_address = absolute_address(register, row)
            register.block.text = register.render()
            register.block.symbol_refs = register.symbol_refs
            register.block.doc_refs = register.doc_refs
    return ChapterTree(title=root.title, root=root, registers=registers, warnings=warnings, labels=labels)


def _take_tree_marks(section: Section) -> None:
    """Reference marks out of every title and block, the labels into the block's doc_refs."""
    section.title = take_marks(section.title)[0]
    for block in section.blocks:
        block.text, found = take_marks(block.text)
        block.doc_refs = list(dict.fromkeys([*block.doc_refs, *found]))
    for child in section.children:
        _take_tree_marks(child)


def _take_register_marks(register: Register) -> list[str]:
    """Reference marks out of the register's header and descriptions; the labels they named."""
    register.address, found = take_marks(register.address)
    register.param_note, in_note = take_marks(register.param_note)
    found.extend(in_note)
    for name, parts in register.descriptions.items():
        cleaned = [take_marks(part) for part in parts]
        register.descriptions[name] = (cleaned[0][0], cleaned[1][0])
        found.extend(label for _, labels in cleaned for label in labels)
    return list(dict.fromkeys(found))


_NOT_A_DESCRIPTION = re.compile(r"(?:0x[0-9A-Fa-f]|\d)[\w+*{} ]*|[A-Z/]{1,8}|varies|-+", re.IGNORECASE)


@dataclass(frozen=True)
class SummaryRow:
    """What a chapter's register summary table says of one register: its description in words and
    the addresses it lists, each with its column's instance label ("UART1") when there are several."""

    description: str
    addresses: tuple[tuple[str, str], ...] = ()


_HEX_CELL = re.compile(r"0x[0-9A-Fa-f_]+")


def register_summaries(root: Section, registers: list[Register]) -> dict[str, SummaryRow]:
    """Register name -> what the chapter's summary table (``NAME | Description | ...``) says of it.

    Summary tables differ in their later columns (one address column, one per instance, sizes), but
    every one starts with the name and its description, so any table row whose first cell is one of
    this chapter's registers and whose second cell is words gives that register's description; its
    hex cells are its addresses, labelled by the table's ``Name | ...`` header row when it lists
    several. A parameterised register (``LEDC_CHn_CONF0_REG``) is often listed per instance; its
    first listed instance's words are used, saying which instance they were written for (and no
    address: each instance has its own).
    """
    exact = {register.name for register in registers}
    patterns = [
        (re.compile(re.sub(r"[a-z]", r"\\d+", register.name)), register.name)
        for register in registers
        if register.param_note and re.fullmatch(r"[A-Z0-9_]*[a-z][A-Z0-9_a-z]*", register.name)
    ]
    found: dict[str, SummaryRow] = {}
    sections = [root]
    while sections:
        section = sections.pop()
        sections.extend(section.children)
        for block in section.blocks:
            header: list[str] = []
            for line in block.text.splitlines():
                cells = [cell.strip() for cell in line.split(" | ")]
                if cells[0].lower() == "name":
                    header = cells
                    continue
                if len(cells) < 3 or not cells[1] or _NOT_A_DESCRIPTION.fullmatch(cells[1]):
                    continue
                if cells[0] in exact:
                    found.setdefault(cells[0], SummaryRow(cells[1], _summary_addresses(cells, header)))
                    continue
                for pattern, name in patterns:
                    if pattern.fullmatch(cells[0]):
                        found.setdefault(name, SummaryRow(f"{cells[1]} (as listed for {cells[0]})"))
    return found


def _summary_addresses(cells: list[str], header: list[str]) -> tuple[tuple[str, str], ...]:
    columns = [i for i in range(2, len(cells)) if _HEX_CELL.fullmatch(cells[i])]
    labelled = len(columns) > 1 and len(header) == len(cells)
    return tuple((header[i] if labelled else "", cells[i]) for i in columns)


def absolute_address(register: Register, row: SummaryRow | None) -> str:
    """The summary's absolute address(es) of a register whose block gives an offset, rendered for
    its block ("0x3FF01040", or "UART0 0x3FF40050, UART1 0x3FF50050"); "" when the block's address
    is already absolute, is no plain number, or the summary lists none."""
    if row is None or not row.addresses or not _HEX_CELL.fullmatch(register.address):
        return ""
    if _hex_value(register.address) >= OFFSET_LIMIT:
        return ""
    absolute = [(label, address) for label, address in row.addresses if _hex_value(address) >= OFFSET_LIMIT]
    if len(absolute) != len(row.addresses):
        return ""
    return ", ".join(f"{label} {address}".strip() for label, address in absolute)


def _hex_value(text: str) -> int:
    return int(text.replace("_", ""), 16)


def _take_register(
    text: str,
    start: int,
    section: Section,
    registers: list[Register],
    continuation: bool,
    warnings: list[str],
) -> tuple[int, str]:
    """Parse the register environment starting at ``start``; return where scanning resumes and
    the register's name (empty when the environment has no readable header).

    A register ends at its ``\\end{register}``, or at the next ``\\begin{register}`` when a
    tag branch left it unbalanced: never later, so a stray begin cannot swallow the chapter.
    """
    end_at = text.find("\\end{register}", start)
    next_begin = text.find("\\begin{register}", start)
    if end_at < 0 or 0 <= next_begin < end_at:
        stop = next_begin if next_begin >= 0 else len(text)
        resume = stop
        warnings.append("register environment without its \\end{register}")
    else:
        stop, resume = end_at, end_at + len("\\end{register}")
    env_text = text[start:stop]
    header = _parse_register_header(env_text)
    if header is None:
        warnings.append("register environment without a name/address header")
        return resume, ""
    name, note, address, header_end = header
    body = env_text[header_end:]
    fields = _parse_fields(body)
    unnamed = [f for f in fields if f.name == UNNAMED_FIELD]
    if len(unnamed) == 1:
        unnamed[0].name = name  # a whole-register field is described under the register's name
    descriptions = _parse_descriptions(body)
    previous = registers[-1] if registers else None
    is_continued = (
        previous is not None
        and previous.name == name
        and (continuation or "Continued from the previous page" in body)
    )
    if is_continued and previous is not None:
        previous.fields.extend(fields)
        for key, value in descriptions.items():
            previous.descriptions.setdefault(key, value)
        return resume, name
    register = Register(name=name, param_note=note, address=address, fields=fields, descriptions=descriptions)
    register.block = Block("", atomic=True, standalone=True)
    section.blocks.append(register.block)
    registers.append(register)
    return resume, name


# ---------------------------------------------------------------------------------------------
# One chapter end to end
# ---------------------------------------------------------------------------------------------


@dataclass
class ParsedChapter:
    """A chapter root parsed for one manual (chip + tags)."""

    root: Path
    tree: ChapterTree
    include_problems: list[IncludeProblem]
    case_fixed_includes: list[tuple[str, Path]]
    files: list[Path]


def parse_chapter(
    root: Path,
    trm_root: Path,
    manual_dir: Path,
    tags: Iterable[str],
    builtin_macros: dict[str, str],
) -> ParsedChapter:
    """Expand and parse one chapter root for the manual in ``manual_dir`` with ``tags`` in force."""
    resolver = IncludeResolver(search_dirs(trm_root, manual_dir))
    ctx = ExpandContext(tags=frozenset(tags), resolver=resolver, root_dir=root.parent.resolve())
    expanded = expand_file(root, ctx)
    text, macros = extract_definitions(expanded)
    for name, body in builtin_macros.items():
        macros.setdefault(name, Macro(0, body))
    text = expand_macros(text, macros)
    tree = build_tree(text, fallback_title=root.stem)
    return ParsedChapter(
        root=root,
        tree=tree,
        include_problems=ctx.problems,
        case_fixed_includes=resolver.case_fixed,
        files=ctx.files,
    )
