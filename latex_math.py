"""Math spans of the TRM LaTeX as one line of plain text that keeps the formula's meaning.

pylatexenc's own text mode prints a math span's characters in order, so
``\\frac{A}{B + \\frac{C}{16}}`` became ``A/B + C/16``: the precedence the typesetting carried was
lost and an agent computing a divider from the text got a wrong value. Here the span's node tree is
read as an expression: a fraction brackets each side that is compound (``A/(B + C/16)``),
``\\times`` and ``\\cdot`` become ``*`` (ASCII, what the manuals' own address arithmetic writes
(``0x0154+4*n``), what code pasted from the text needs, and never mistaken for a letter ``x``),
``\\left(``/``\\right)`` are brackets, ``\\lfloor``/``\\lceil`` pairs are ``floor(...)``/``ceil(...)``,
``f_{clk}`` is ``f_clk``, ``2^{n+1}`` is ``2^(n+1)``, and a sum reads
``sum over i=0..n-1 of (...)``. A span with anything this module cannot render faithfully (an
unknown macro, unmatched brackets, a matrix) is kept as its source, marked ``[LaTeX: ...]``, rather
than flattened into a wrong expression. `formula_census.py` checks the renderings by evaluation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pylatexenc import latexwalker
from pylatexenc.latex2text import LatexNodes2Text

KEPT_PREFIX = "[LaTeX: "

# how tightly a rendered operand holds together, for deciding where brackets are needed
SUM, PRODUCT, POWER, ATOM = range(4)

MATH_ENVIRONMENTS = frozenset(
    {"math", "displaymath", "equation", "equation*", "align", "align*", "gather", "gather*"}
    | {"eqnarray", "eqnarray*", "multline", "multline*", "flalign", "flalign*", "aligned", "split"}
)

_OPERATOR_MACROS = {
    "times": "*", "cdot": "*", "ast": "*", "div": "/", "pm": "±", "mp": "∓",
    "leq": "<=", "le": "<=", "geq": ">=", "ge": ">=", "neq": "!=", "ne": "!=", "lt": "<", "gt": ">",
    "approx": "≈", "equiv": "≡", "sim": "~", "ll": "<<", "gg": ">>", "oplus": "⊕", "otimes": "⊗",
    "wedge": "∧", "land": "∧", "vee": "∨", "lor": "∨", "rightarrow": "→", "to": "→", "leftarrow": "←",
    "gets": "←", "Rightarrow": "⇒", "Leftarrow": "⇐", "leftrightarrow": "↔", "Leftrightarrow": "⇔",
    "in": "in", "notin": "not in", "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩",
    "mid": "|", "vert": "|", "bmod": "mod", "mod": "mod", "colon": ":",
}  # fmt: skip

_GREEK = {
    name: chr(code)
    for name, code in (
        ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3B5),
        ("varepsilon", 0x3B5), ("zeta", 0x3B6), ("eta", 0x3B7), ("theta", 0x3B8), ("iota", 0x3B9),
        ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC), ("nu", 0x3BD), ("xi", 0x3BE), ("pi", 0x3C0),
        ("rho", 0x3C1), ("sigma", 0x3C3), ("tau", 0x3C4), ("upsilon", 0x3C5), ("phi", 0x3C6),
        ("varphi", 0x3C6), ("chi", 0x3C7), ("psi", 0x3C8), ("omega", 0x3C9), ("Gamma", 0x393),
        ("Delta", 0x394), ("Theta", 0x398), ("Lambda", 0x39B), ("Xi", 0x39E), ("Pi", 0x3A0),
        ("Sigma", 0x3A3), ("Phi", 0x3A6), ("Psi", 0x3A8), ("Omega", 0x3A9),
    )
}  # fmt: skip

_WORD_MACROS = _GREEK | {
    "infty": "∞", "cdots": "...", "ldots": "...", "dots": "...", "dotsc": "...", "dotsb": "...",
    "vdots": "...", "circ": "°", "degree": "°", "neg": "¬", "lnot": "¬", "forall": "∀",
    "exists": "∃", "partial": "∂", "emptyset": "∅", "%": "%", "#": "#", "&": "&", "$": "$",
    "log": "log", "ln": "ln", "exp": "exp", "max": "max", "min": "min", "sin": "sin", "cos": "cos",
}  # fmt: skip

# macros whose (last) argument is their text: fonts, links, colour, the TRM's red index letter
_TEXT_MACROS = frozenset(
    {"textrm", "text", "mathrm", "mathit", "mathbf", "mathsf", "mathtt", "textit", "textbf", "texttt"}
    | {"textsf", "emph", "mbox", "operatorname", "boldsymbol", "ensuremath", "textnormal"}
    | {"hyperref", "hyperlink", "href", "textcolor", "colorbox", "regindex"}
)
# macros that print nothing in a formula
_SILENT_MACROS = frozenset(
    {"rm", "it", "bf", "tt", "sf", "displaystyle", "textstyle", "scriptstyle", "nonumber", "notag"}
    | {"small", "normalsize", "label", "color", "limits", "nolimits", "big", "Big", "bigg", "Bigg"}
)
_SPACE_MACROS = frozenset({",", ";", ":", "!", " ", "quad", "qquad", "enspace", "thinspace", "\n"})
_ACCENTS = {
    "overline": "\u0304", "bar": "\u0304", "widetilde": "\u0303", "tilde": "\u0303",
    "hat": "\u0302", "widehat": "\u0302", "dot": "\u0307", "vec": "\u20d7",
}  # fmt: skip
_FRACTIONS = frozenset({"frac", "dfrac", "tfrac", "cfrac"})
_OPENERS = {"(": "(", "[": "[", "{": "{", "lfloor": "floor", "lceil": "ceil", "lbrace": "{", "langle": "<"}
_CLOSERS = {")": ")", "]": "]", "}": "}", "rfloor": "floor", "rceil": "ceil", "rbrace": "}", "rangle": ">"}
_PAIRS = {"(": ")", "[": "]", "{": "}", "floor": "floor", "ceil": "ceil", "<": ">"}
_RELATIONS = frozenset({"=", "<", ">", "<=", ">=", "!=", "≈", "≡", "~", "→", "←", "⇒", "⇐", "↔", "⇔"})
_LOOSE = _RELATIONS | {"+", "-", "±", "∓", ",", ";", ":", "mod", "in", "not in", "⊕", "|"}
_LOOSE |= {"⊗", "∧", "∨", "⊂", "⊆", "∪", "∩", "<<", ">>", "||"}

_CHARS = re.compile(
    r"(?P<space>\s+)|(?P<word>[A-Za-z][A-Za-z0-9]*|\d+(?:\.\d+)?)|(?P<op><<|>>|<=|>=|!=|\|\||[-+*/=<>,;:|!'.])"
    r"|(?P<open>[(\[])|(?P<close>[)\]])|(?P<sub>_)|(?P<sup>\^)|(?P<amp>&)|(?P<other>.)",
    re.DOTALL,
)
_UNICODE_OPS = {"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-", "≤": "<=", "≥": ">=", "≠": "!="}
# words the manuals write as functions of a bracket: ceil(x), fix(x)
_FUNCTION_WORDS = frozenset(
    {"ceil", "floor", "fix", "round", "abs", "max", "min", "log", "ln", "exp", "sqrt", "mod"}
)
_TIGHT_WORD = re.compile(r"[\w.]+'*$")


class Unrenderable(ValueError):
    """A formula this module cannot render without risking a wrong meaning."""


@dataclass
class _Tok:
    """One lexical piece of a formula: a word, operator, bracket, script mark, group or macro."""

    kind: str  # word | op | open | close | sub | sup | amp | row | group | macro | math
    text: str = ""
    node: latexwalker.LatexNode | None = None
    nodes: list[latexwalker.LatexNode] | None = None  # a group's content
    space: bool = False  # whitespace (or a spacing macro) came before it


@dataclass
class _Item:
    """A rendered operand (with its binding level) or operator."""

    text: str
    level: int = ATOM
    is_op: bool = False
    space: bool = False


def _tokens(nodes: list[latexwalker.LatexNode]) -> list[_Tok]:
    """Flatten a node list into tokens; text macros are spliced so ``A\\_B`` stays one name."""
    toks: list[_Tok] = []
    space = False
    for node in nodes:
        if node is None or node.isNodeType(latexwalker.LatexCommentNode):
            continue
        if node.isNodeType(latexwalker.LatexCharsNode):
            for match in _CHARS.finditer(node.chars):
                kind = match.lastgroup
                text = match.group()
                if kind == "space":
                    space = True
                    continue
                if kind == "other":
                    if text in _UNICODE_OPS:
                        kind, text = "op", _UNICODE_OPS[text]
                    else:
                        kind = "word"
                toks.append(_Tok(kind, text, space=space))
                space = False
        elif node.isNodeType(latexwalker.LatexGroupNode):
            toks.append(_Tok("group", nodes=node.nodelist, space=space))
            space = False
        elif node.isNodeType(latexwalker.LatexSpecialsNode):
            if node.specials_chars == "&":
                toks.append(_Tok("amp"))
            elif node.specials_chars == "~":
                space = True
            else:
                raise Unrenderable(f"special {node.specials_chars!r}")
        elif node.isNodeType(latexwalker.LatexMathNode):
            toks.extend(_tokens(node.nodelist))
        elif node.isNodeType(latexwalker.LatexEnvironmentNode):
            if node.environmentname not in ("aligned", "split"):
                raise Unrenderable(f"environment {node.environmentname}")
            toks.extend(_tokens(node.nodelist))
        elif node.isNodeType(latexwalker.LatexMacroNode):
            name = node.macroname
            if name in _SPACE_MACROS:
                space = True
            elif name in _SILENT_MACROS:
                pass
            elif name in _TEXT_MACROS:
                args = _given_args(node)
                if not args:
                    raise Unrenderable(f"\\{name} without its argument")
                # one group, so that a script or fraction takes the whole argument
                toks.append(_Tok("group", nodes=[args[-1]], space=space))
                space = False
            elif name == "_":
                toks.append(_Tok("word", "_", space=space))
                space = False
            elif name == "\\":
                toks.append(_Tok("row"))
            elif name in ("{", "}"):
                toks.append(_Tok("open" if name == "{" else "close", name, space=space))
                space = False
            else:
                toks.append(_Tok("macro", name, node=node, space=space))
                space = bool(node.macro_post_space) and name not in ("left", "right")
        else:
            raise Unrenderable(f"node {type(node).__name__}")
    return _join_underscored(toks)


def _join_underscored(toks: list[_Tok]) -> list[_Tok]:
    """``UART``, ``\\_``, ``CLKDIV`` written without spaces are one name."""
    out: list[_Tok] = []
    for tok in toks:
        if (
            out
            and tok.kind == "word"
            and not tok.space
            and out[-1].kind == "word"
            and (tok.text == "_" or out[-1].text.endswith("_"))
        ):
            out[-1] = _Tok("word", out[-1].text + tok.text, space=out[-1].space)
        else:
            out.append(tok)
    return out


def _given_args(node: latexwalker.LatexMacroNode) -> list[latexwalker.LatexNode]:
    """The arguments pylatexenc read for a macro (optional ones left out when absent)."""
    return [a for a in (node.nodeargd.argnlist if node.nodeargd else []) if a is not None]


def _group_tokens(tok: _Tok) -> list[_Tok]:
    if tok.kind == "group":
        return _tokens(tok.nodes or [])
    return [tok]


class _Parser:
    """Renders one token list (one row of a formula) into items, then text."""

    def __init__(self, toks: list[_Tok]):
        self.toks = toks
        self.pos = 0
        self.items: list[_Item] = []

    def render(self) -> tuple[str, int]:
        while self.pos < len(self.toks):
            self._step()
        return _join(self.items)

    def _take_argument(self, macro: latexwalker.LatexMacroNode | None, index: int) -> list[_Tok]:
        """A macro's argument: as pylatexenc read it, else the next group or single character."""
        given = _given_args(macro) if macro is not None else []
        if index < len(given):
            return _tokens([given[index]])
        return self._next_script_argument()

    def _next_script_argument(self, superscript: bool = False) -> list[_Tok]:
        if self.pos >= len(self.toks):
            raise Unrenderable("an argument is missing")
        tok = self.toks[self.pos]
        self.pos += 1
        if tok.kind == "word" and len(tok.text) > 1 and "_" not in tok.text:
            # TeX takes one character: x^10 is x^1 followed by 0; a subscript run such as
            # sw\_init_key or line_number is read as the name its author typed
            self.toks.insert(self.pos, _Tok("word", tok.text[1:], space=superscript))
            return [_Tok("word", tok.text[0])]
        if tok.kind in ("group", "word", "macro"):
            return _group_tokens(tok)
        raise Unrenderable(f"script argument {tok.kind}")

    def _operand(self, text: str, level: int, space: bool) -> None:
        self.items.append(_Item(text, level, space=space))
        self._scripts()

    def _scripts(self) -> None:
        """Attach ``_`` and ``^`` that follow the operand just added (subscript first)."""
        sub: str | None = None
        sup: str | None = None
        while self.pos < len(self.toks) and self.toks[self.pos].kind in ("sub", "sup"):
            kind = self.toks[self.pos].kind
            self.pos += 1
            arg = self._next_script_argument(superscript=kind == "sup")
            if kind == "sup" and all(t.kind == "macro" and t.text == "prime" for t in arg) and arg:
                sup = (sup or "") + "'" * len(arg)
                continue
            text, level = _Parser(arg).render()
            text = re.sub(r" ([-+*/]) ", r"\1", text)  # 2^(n+1): a script reads as one unit
            whole = level == ATOM and (_TIGHT_WORD.match(text) is not None or _bracketed_whole(text))
            if kind == "sub":
                sub = text if whole else f"({text})"
            else:
                sup = (sup or "") + "^" + (text if whole else f"({text})")
        if sub is None and sup is None:
            return
        base = self.items[-1] if self.items and not self.items[-1].is_op else None
        if base is None:
            base = _Item("", ATOM)
            self.items.append(base)
        if base.level < ATOM:
            base.text = f"({base.text})"
        if sub is not None:
            base.text += "_" + sub
            base.level = ATOM
        if sup is not None:
            base.text += sup
            base.level = ATOM if sup.strip("'") == "" else POWER

    def _step(self) -> None:
        tok = self.toks[self.pos]
        self.pos += 1
        if tok.kind == "word":
            self._operand(tok.text, ATOM, tok.space)
        elif tok.kind == "op":
            if tok.text == "'" and self.items and not self.items[-1].is_op:
                self.items[-1].text += "'"
            else:
                self.items.append(_Item(tok.text, is_op=True, space=tok.space))
        elif tok.kind == "group":
            self.toks[self.pos : self.pos] = _group_tokens(tok)
            if self.pos < len(self.toks):
                self.toks[self.pos].space = self.toks[self.pos].space or tok.space
        elif tok.kind in ("sub", "sup"):
            self.pos -= 1
            self._scripts()
        elif tok.kind == "open":
            self._bracketed(_OPENERS[tok.text], tok.space)
        elif tok.kind == "macro":
            self._macro(tok)
        elif tok.kind == "close":
            raise Unrenderable(f"unmatched {tok.text}")
        else:
            raise Unrenderable(f"{tok.kind} inside a row")

    def _delimiter(self, tok: _Tok) -> str | None:
        """The bracket a token opens or closes, as a key of _OPENERS/_CLOSERS."""
        if tok.kind in ("open", "close"):
            return tok.text
        if tok.kind == "macro" and (tok.text in _OPENERS or tok.text in _CLOSERS):
            return tok.text
        return None

    def _bracketed(self, kind: str, space: bool) -> None:
        depth = 0
        for end in range(self.pos, len(self.toks)):
            tok = self.toks[end]
            delim = self._delimiter(tok)
            if delim is None:
                continue
            if delim in _OPENERS:
                depth += 1
                continue
            if depth:
                depth -= 1
                continue
            if _CLOSERS.get(delim) != _PAIRS[kind]:
                raise Unrenderable(f"{kind} closed by {delim}")
            inner, _level = _Parser(self.toks[self.pos : end]).render()
            self.pos = end + 1
            if kind in ("floor", "ceil"):
                self._operand(f"{kind}({inner})", ATOM, space)
            else:
                self._operand(f"{kind}{inner}{_PAIRS[kind]}", ATOM, space)
            return
        raise Unrenderable(f"unclosed {kind}")

    def _macro(self, tok: _Tok) -> None:
        name, node = tok.text, tok.node
        if name in _FRACTIONS:
            num, num_level = _Parser(self._take_argument(node, 0)).render()
            den, den_level = _Parser(self._take_argument(node, 1)).render()
            if not num or not den:
                raise Unrenderable("empty fraction side")
            num = num if num_level >= POWER else f"({num})"
            den = den if den_level >= POWER else f"({den})"
            self._operand(f"{num}/{den}", PRODUCT, tok.space)
        elif name in ("left", "right"):
            if (
                self.pos < len(self.toks)
                and self.toks[self.pos].kind == "op"
                and self.toks[self.pos].text == "."
            ):
                raise Unrenderable("one-sided \\left./\\right.")
            if (
                self.pos < len(self.toks)
                and self.toks[self.pos].kind == "op"
                and self.toks[self.pos].text == "|"
            ):
                raise Unrenderable("\\left| ... \\right|")
            if self.pos < len(self.toks):
                self.toks[self.pos].space = self.toks[self.pos].space or tok.space
        elif name in _OPENERS:
            self._bracketed(_OPENERS[name], tok.space)
        elif name in _OPERATOR_MACROS:
            self.items.append(_Item(_OPERATOR_MACROS[name], is_op=True, space=tok.space))
        elif name in _WORD_MACROS:
            # k\Omega is k times ohm, not one name "kΩ"
            word = _WORD_MACROS[name]
            after_name = (
                word.isalpha()
                and bool(self.items)
                and not self.items[-1].is_op
                and self.items[-1].text[-1:].isalnum()
            )
            self._operand(_WORD_MACROS[name], ATOM, tok.space or after_name)
        elif name in _ACCENTS:
            text, level = _Parser(self._take_argument(node, 0)).render()
            if level != ATOM or not _TIGHT_WORD.match(text) or len(text) != 1:
                raise Unrenderable(f"\\{name} over {text!r}")
            self._operand(text + _ACCENTS[name], ATOM, tok.space)
        elif name == "sqrt":
            if node is not None and node.nodeargd and node.nodeargd.argnlist and node.nodeargd.argnlist[0]:
                raise Unrenderable("root with an index")
            text, _level = _Parser(self._take_argument(node, 0)).render()
            self._operand(f"sqrt({text})", ATOM, tok.space)
        elif name in ("sum", "prod"):
            self._big_operator("sum" if name == "sum" else "product", tok.space)
        elif name == "prime":
            if not self.items or self.items[-1].is_op:
                raise Unrenderable("a prime with nothing before it")
            self.items[-1].text += "'"
        else:
            raise Unrenderable(f"\\{name}")

    def _big_operator(self, word: str, space: bool) -> None:
        """``\\sum_{i=0}^{n-1} body`` -> ``sum over i=0..n-1 of (body)``; the body runs to the next + or -."""
        lower = upper = None
        while self.pos < len(self.toks) and self.toks[self.pos].kind in ("sub", "sup"):
            kind = self.toks[self.pos].kind
            self.pos += 1
            text, _level = _Parser(self._next_script_argument()).render()
            text = text.replace(" ", "")
            if kind == "sub":
                lower = text
            else:
                upper = text
        start, depth = self.pos, 0
        while self.pos < len(self.toks):
            tok = self.toks[self.pos]
            delim = self._delimiter(tok)
            if delim in _OPENERS:
                depth += 1
            elif delim in _CLOSERS:
                depth -= 1
            elif depth == 0 and self.pos > start and _ends_sum_body(tok):
                break
            self.pos += 1
        body, _level = _Parser(self.toks[start : self.pos]).render()
        if not body:
            raise Unrenderable(f"{word} without a body")
        if lower is None and upper is None:
            head = word
        elif upper is None:
            head = f"{word} over {lower}"
        elif lower is not None and "=" in lower:
            head = f"{word} over {lower}..{upper}"
        else:
            raise Unrenderable(f"{word} limits {lower!r}..{upper!r}")
        self.items.append(_Item(f"{head} of ({body})", SUM, space=space))


def _ends_sum_body(tok: _Tok) -> bool:
    """A sign, comma or relation (written or as a macro) ends a sum's body."""
    text = _OPERATOR_MACROS.get(tok.text, "") if tok.kind == "macro" else tok.text if tok.kind == "op" else ""
    return text in ("+", "-", ",") or text in _RELATIONS or (tok.kind == "macro" and text in _LOOSE)


def _join(items: list[_Item]) -> tuple[str, int]:
    """Text of a row's items with brackets where a neighbour binds tighter, and its binding level."""
    if len(items) == 1 and not items[0].is_op:
        return items[0].text, items[0].level
    level = ATOM
    parts: list[str] = []
    previous: _Item | None = None
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else None
        if item.is_op:
            op = item.text
            if op in ("+", "-", "±", "∓") and (previous is None or previous.is_op):
                parts.append(op)  # a sign
                level = SUM
            elif op in (",", ";", ":"):
                parts.append(op + " ")
                level = SUM
            elif op in ("*", "/"):
                parts.append(" * " if op == "*" else "/")
                level = min(level, PRODUCT)
            elif op in ("!", "."):
                parts.append(op)
            else:
                parts.append(f" {op} ")
                level = SUM
        else:
            juxtaposed = previous is not None and not previous.is_op
            tight_neighbour = (
                juxtaposed
                or (following is not None and not following.is_op)
                or (previous is not None and previous.text in ("*", "/"))
                or (following is not None and following.text in ("*", "/"))
            )
            after_slash = previous is not None and previous.is_op and previous.text == "/"
            text = item.text
            if (item.level == SUM and tight_neighbour) or (
                item.level == PRODUCT
                and (juxtaposed or after_slash or (following is not None and not following.is_op))
            ):
                text = f"({text})"
            if juxtaposed:
                level = min(level, PRODUCT)
                if _reads_as_call(previous.text, text):
                    parts.append(" * ")  # f_xtal(a + b) would read as a function of a + b
                else:
                    parts.append(" " if item.space else "")
            parts.append(text)
        previous = item
    return re.sub(r" {2,}", " ", "".join(parts)).strip(), level


def _reads_as_call(before: str, after: str) -> bool:
    """A name followed by a bracket reads as a call unless the name is a function's."""
    name = re.search(r"[A-Za-z_][\w']*$", before)
    # log_2(x) is the function log to base 2
    return after.startswith("(") and name is not None and name.group().split("_")[0] not in _FUNCTION_WORDS


def _bracketed_whole(text: str) -> bool:
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and index < len(text) - 1:
            return False
    return True


def render_nodes(nodes: list[latexwalker.LatexNode]) -> str:
    """Plain text of a formula's node list, rows (``\\\\``) on lines of their own; raises Unrenderable."""
    toks = [tok for tok in _tokens(nodes) if tok.kind != "amp"]
    rows: list[list[_Tok]] = [[]]
    for tok in toks:
        if tok.kind == "row":
            rows.append([])
        else:
            rows[-1].append(tok)
    lines = [_Parser(row).render()[0] for row in rows]
    return "\n".join(line for line in lines if line)


def kept_source(body: str) -> str:
    """A formula that cannot be rendered faithfully, kept as its LaTeX on one line and marked."""
    return KEPT_PREFIX + " ".join(body.split()) + "]"


def math_body(node: latexwalker.LatexNode) -> str:
    """A math node's LaTeX without its delimiters or environment wrapper."""
    if not node.nodelist:
        return ""
    first, last = node.nodelist[0], node.nodelist[-1]
    source = node.parsing_state.s
    return source[first.pos : last.pos + last.len]


def render_math(node: latexwalker.LatexNode) -> str:
    """One math node (``$...$``, ``\\(...\\)``, ``\\[...\\]``, a math environment) as text."""
    try:
        return render_nodes(node.nodelist)
    except Unrenderable:
        return kept_source(math_body(node))


def is_display(node: latexwalker.LatexNode) -> bool:
    """Whether a math node is typeset on lines of its own."""
    return (node.isNodeType(latexwalker.LatexEnvironmentNode) and node.environmentname != "math") or (
        node.isNodeType(latexwalker.LatexMathNode) and node.displaytype == "display"
    )


class FormulaText(LatexNodes2Text):
    """pylatexenc's text conversion with math spans rendered by `render_math`."""

    def math_node_to_text(self, node: latexwalker.LatexNode) -> str:
        text = render_math(node)
        return self._fmt_indented_block(text) if is_display(node) else text
