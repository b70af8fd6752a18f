"""Formula census: every math span of the TRM chapters, rendered, and checked by evaluation.

The renderer (`latex_math.py`) turns a span into text; this census asks whether that text still
computes what the LaTeX computes. It parses the LaTeX with sympy's LaTeX parser and the rendered
text with sympy's expression parser, gives every symbol the same random positive value on both
sides, and compares the numbers. The mapping of names is the census's own (a run of letters,
digits and ``\\_`` with its subscript is one symbol on both sides); nothing of the renderer is
reused to decide what a formula means.

    uv run formula_census.py [--trm-path DIR] [--show N] [--json]

Exit codes: 0 no mismatch; 1 any mismatch; 2 bad usage or input (no TRM tree). sympy and the
ANTLR runtime it parses LaTeX with are development dependencies (`uv sync` installs them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pylatexenc import latexwalker
from tqdm import tqdm

from latex_math import KEPT_PREFIX, MATH_ENVIRONMENTS, math_body, render_math
from latex_parser import walker_context
from register_census import TrmTreeError, discover_manuals, require_trm_tree, scan_chapter

EQUAL, MISMATCH, NOT_EXPRESSION, NO_PARSE, KEPT = (
    "evaluated equal",
    "mismatch",
    "not an expression",
    "does not parse",
    "kept as source",
)
_MATH_MARK = re.compile(
    r"\$|\\\(|\\\[|\\begin\{(?:" + "|".join(re.escape(e) for e in MATH_ENVIRONMENTS) + r")\}"
)
_SKIPPED_ENVS = re.compile(r"\\begin\{(lstlisting|verbatim|bytefield|tikzpicture)\}.*?\\end\{\1\}", re.DOTALL)
_TRIALS = 3
_LONE = re.compile(r"\\mathit\{zq[a-z]+\}|[^\W\d][\w]*|\d+(?:\.\d+)?")
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Span:
    """One math span as written: its file and line in the tree and its LaTeX (no delimiters)."""

    file: str
    line: int
    latex: str
    display: bool


@dataclass(frozen=True)
class Verdict:
    """What the census found for one span."""

    span: Span
    rendered: str
    outcome: str
    detail: str = ""


# ---------------------------------------------------------------------------------------------
# finding spans
# ---------------------------------------------------------------------------------------------


def math_nodes(nodes: Iterable[latexwalker.LatexNode | None]) -> Iterable[latexwalker.LatexNode]:
    """Every outermost math node in a node tree (inside groups, macro arguments and environments)."""
    for node in nodes:
        if node is None:
            continue
        if node.isNodeType(latexwalker.LatexMathNode) or (
            node.isNodeType(latexwalker.LatexEnvironmentNode) and node.environmentname in MATH_ENVIRONMENTS
        ):
            yield node
            continue
        children = list(getattr(node, "nodelist", None) or [])
        if getattr(node, "nodeargd", None) is not None:
            children += list(node.nodeargd.argnlist or [])
        yield from math_nodes(children)


def spans_in(text: str) -> list[latexwalker.LatexNode]:
    """Math nodes of a LaTeX text, listings and drawings left out as the ingest leaves them out.

    The walker reads one node at each place a math span can open (reading whole files costs
    minutes); a span nested in one already read is part of it.
    """
    if not _MATH_MARK.search(text):
        return []
    text = _SKIPPED_ENVS.sub(lambda m: "\n" * m.group().count("\n"), text)
    walker = latexwalker.LatexWalker(text, latex_context=walker_context(), tolerant_parsing=True)
    found: list[latexwalker.LatexNode] = []
    covered = 0
    for match in _MATH_MARK.finditer(text):
        if match.start() < covered or (match.start() > 0 and text[match.start() - 1] == "\\"):
            continue
        nodes, _pos, _len = walker.get_latex_nodes(pos=match.start(), read_max_nodes=1)
        spans = list(math_nodes(nodes[:1]))
        if spans:
            found.append(spans[0])
            covered = spans[0].pos + spans[0].len
    return found


def _line_of(raw: str, latex: str) -> int:
    index = raw.find(latex)
    return raw.count("\n", 0, index) + 1 if index >= 0 else 0


def chapter_texts(trm_root: Path, progress: bool = False) -> Iterable[tuple[str, str]]:
    """(relative file, body text) of every file the chapters of every manual reach, each text once."""
    manuals = discover_manuals(trm_root)
    jobs = [(manual, root) for manual in manuals for root in manual.chapter_roots]
    seen: set[tuple[str, int]] = set()
    for manual, root in tqdm(
        jobs, desc="formula census", unit="chapter", disable=not progress, file=sys.stderr
    ):
        for rel, body in scan_chapter(root, manual, trm_root, tags=manual.tags).texts:
            key = (rel, zlib.crc32(body.encode()))
            if key not in seen:
                seen.add(key)
                yield rel, body


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------

_TEXT_WRAPPERS = (
    "textrm|text|mathrm|mathit|mathbf|mathsf|mathtt|textit|textbf|texttt|textsf|emph|mbox|"
    "operatorname|boldsymbol|ensuremath|textnormal|regindex|hyperref|hyperlink|href|textcolor|colorbox"
)
_WRAPPER = re.compile(r"\\(" + _TEXT_WRAPPERS + r")(?![A-Za-z])\s*(?:\[[^\]]*\])?")
# characters typed into formulas for operators: a multiplication sign, a dash for minus
_UNICODE_MATH = {"×": " \\times ", "·": " \\cdot ", "−": "-", "–": "-", "≤": " \\leq ", "≥": " \\geq "}
_LABEL = re.compile(r"\\label\{[^{}]*\}")
_SWITCHES = re.compile(r"\\(?:rm|it|bf|tt|sf|displaystyle|textstyle)(?![A-Za-z])\s*")
_NAME_GROUP = re.compile(r"\{\s*([A-Za-z][A-Za-z0-9]*(?:\\_[A-Za-z0-9]+)*)\s*\}")
_SCRIPT_GROUP = re.compile(r"(?<!\\)\{(?=\s*[_^])")
_WORD_FUNCTION = re.compile(r"(?<![A-Za-z\\])(ceil|floor)\s*\(")
_LATEX_RELATIONS = re.compile(r"\\(?:leq?|geq?|neq?|approx|equiv|lt|gt)(?![A-Za-z])|[=<>]")
_TEXT_RELATIONS = re.compile(r" (?:<=|>=|!=|=|<|>|≈|≡) ")
_SPACING = re.compile(r"\\(?:[,;:! ]|quad|qquad)|~")
_SUM_HEAD = re.compile(r"(sum|product) over ([^\W\d]\w*)=([^ ]+?)\.\.([^ ]+?) of \(")
_LOG_BASE = re.compile(r"(?<![\w])log_(\d+)\(")
_FUNCTIONS = {
    "log": "log",
    "floor": "floor",
    "ceil": "ceiling",
    "sqrt": "sqrt",
    "Sum": "Sum",
    "Product": "Product",
}


def _matching(text: str, open_pos: int, pair: str = "{}") -> int:
    """Index of the bracket closing the one at open_pos (-1 when unbalanced)."""
    depth = 0
    for index in range(open_pos, len(text)):
        depth += text[index] == pair[0] and (index == 0 or text[index - 1] != "\\")
        depth -= text[index] == pair[1] and (index == 0 or text[index - 1] != "\\")
        if depth == 0:
            return index
    return -1


def _unwrap_text_macros(latex: str) -> str:
    """``\\textrm{x}``, ``\\hyperref[..]{x}``, ``\\textcolor{c}{x}``... are their last argument.

    The argument joins the text around it (``CH\\regindex{n}`` is the name ``CHn``); it stays a
    group only as a script's argument. Labels and font switches print nothing.
    """
    latex = _LABEL.sub("", _SWITCHES.sub("", latex))
    while match := _WRAPPER.search(latex):
        pos = match.end()
        if match.group(1) in ("textcolor", "colorbox", "href", "hyperlink"):
            end = _matching(latex, pos)
            if end < 0:
                return latex
            pos = end + 1
        while pos < len(latex) and latex[pos] == " ":
            pos += 1
        if pos >= len(latex) or latex[pos] != "{":
            latex = latex[: match.start()] + latex[match.end() :]
            continue
        end = _matching(latex, pos)
        if end < 0:
            return latex
        inner = latex[pos + 1 : end]
        if latex[: match.start()].rstrip().endswith(("_", "^")):
            inner = "{" + inner + "}"
        latex = latex[: match.start()] + inner + latex[end + 1 :]
    return _plain_groups(latex)


def _plain_groups(latex: str) -> str:
    """Drop braces that only group: ``{X}_{i}`` is ``X_{i}``, ``4{^2}`` is ``4^2``."""
    latex = _NAME_GROUP.sub(_ungroup_name, latex)
    while match := _SCRIPT_GROUP.search(latex):
        end = _matching(latex, match.start())
        if end < 0:
            break
        latex = latex[: match.start()] + latex[match.start() + 1 : end] + latex[end + 1 :]
    return latex


def _ungroup_name(match: re.Match[str]) -> str:
    """A braced name is the name (``ch{n}`` is ``chn``) unless the braces are a macro's or a script's."""
    before = match.string[: match.start()]
    stem = before.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    if before.endswith(("}", "]", "_", "^")) or (stem != before and stem.endswith("\\")):
        return match.group()
    return match.group(1)


def _function_brackets(latex: str) -> str:
    """``ceil(...)`` written as words in a formula is the ceiling, as ``\\lceil...\\rceil`` is."""
    while match := _WORD_FUNCTION.search(latex):
        end = _matching(latex, match.end() - 1, "()")
        if end < 0:
            break
        left, right = ("\\lceil ", " \\rceil") if match.group(1) == "ceil" else ("\\lfloor ", " \\rfloor")
        latex = latex[: match.start()] + left + latex[match.end() : end] + right + latex[end + 1 :]
    return latex


def _greek(name: str) -> str | None:
    case = "CAPITAL" if name[0].isupper() else "SMALL"
    try:
        return unicodedata.lookup(f"GREEK {case} LETTER {name.upper()}")
    except KeyError:
        return None


class Symbols:
    """One symbol per name, shared by both sides of a comparison."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, key: str) -> str:
        if key not in self.names:
            number, letters = len(self.names), ""
            while True:
                letters = chr(ord("a") + number % 26) + letters
                number //= 26
                if not number:
                    break
            self.names[key] = "zq" + letters
        return self.names[key]


def _key_of_subscript(sub: str) -> str:
    sub = sub.replace("\\_", "_")
    return re.sub(r"[{}\s]", "", sub)


def latex_for_sympy(latex: str, symbols: Symbols) -> str:
    """The LaTeX with each name (``UART\\_CLKDIV``, ``f_{clk}``, ``\\alpha``) as one ``\\mathit`` symbol."""
    latex = _function_brackets(_SPACING.sub(" ", _unwrap_text_macros(latex)))
    for written, meant in _UNICODE_MATH.items():
        latex = latex.replace(written, meant)
    out: list[str] = []
    pos = 0
    while pos < len(latex):
        char = latex[pos]
        if char == "\\" and pos + 1 < len(latex) and latex[pos + 1].isalpha():
            macro = re.match(r"\\([A-Za-z]+)", latex[pos:])
            assert macro is not None
            letter = _greek(macro.group(1))
            if letter is None:
                out.append(macro.group())
                pos += macro.end()
                continue
            core, pos = letter, pos + macro.end()
        elif char.isalpha():
            word = re.match(r"[A-Za-z][A-Za-z0-9]*(?:\\_[A-Za-z0-9]+)*", latex[pos:])
            assert word is not None
            core, pos = word.group().replace("\\_", "_"), pos + word.end()
        else:
            out.append(char)
            pos += 1
            continue
        key = core
        if latex.startswith("_{", pos):
            end = _matching(latex, pos + 1)
            if end > 0:
                key += "_" + _key_of_subscript(latex[pos + 2 : end])
                pos = end + 1
        elif pos + 1 < len(latex) and latex[pos] == "_" and latex[pos + 1].isalnum():
            # TeX subscripts one character, but line_number and sw\_init_key are names
            run = re.match(r"[A-Za-z0-9]+", latex[pos + 1 :])
            assert run is not None
            key += "_" + run.group()
            pos += 1 + run.end()
        out.append(" \\mathit{" + symbols.name(key) + "} ")
    return "".join(out)


def text_for_sympy(text: str, symbols: Symbols) -> str:
    """The rendered text as a sympy expression source: names mapped, sums and brackets spelled."""
    text = text.replace("^", "**")
    while match := _SUM_HEAD.search(text):
        end = _matching(text, match.end() - 1, "()")
        if end < 0:
            raise ValueError("unbalanced sum body")
        body = text[match.end() : end]
        function = "Sum" if match.group(1) == "sum" else "Product"
        bounds = f"({match.group(2)}, {match.group(3)}, {match.group(4)})"
        text = f"{text[: match.start()]}{function}(({body}), {bounds}){text[end + 1 :]}"
    while match := _LOG_BASE.search(text):
        end = _matching(text, match.end() - 1, "()")
        if end < 0:
            raise ValueError("unbalanced logarithm")
        text = f"{text[: match.start()]}log(({text[match.end() : end]}), {match.group(1)}){text[end + 1 :]}"
    out: list[str] = []
    pos = 0
    while pos < len(text):
        word = re.match(r"[^\W\d_][\w]*", text[pos:])
        if word is None:
            out.append(text[pos])
            pos += 1
            continue
        core, pos = word.group(), pos + word.end()
        if core in _FUNCTIONS and text.startswith("(", pos):
            out.append(_FUNCTIONS[core])
            continue
        key = core
        if core.endswith("_") and text.startswith("(", pos):
            end = _matching(text, pos, "()")
            key = core + _key_of_subscript(text[pos + 1 : end].replace(" ", ""))
            pos = end + 1
        elif core in ("mod", "in", "over", "of"):
            raise ValueError(f"{core!r} is not an expression")
        out.append(f" {symbols.name(key)} ")
    return "".join(out)


def _split_top(text: str, separators: re.Pattern[str]) -> list[str]:
    """Split at separators outside any bracket or brace."""
    parts, depth, start = [], 0, 0
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char in "({[" and (pos == 0 or text[pos - 1] != "\\"):
            depth += 1
        elif char in ")}]" and (pos == 0 or text[pos - 1] != "\\"):
            depth -= 1
        elif depth == 0 and (match := separators.match(text, pos)):
            parts.append(text[start:pos])
            start = pos = match.end()
            continue
        pos += 1
    parts.append(text[start:])
    return parts


def _rows(latex: str, rendered: str) -> tuple[list[str], list[str]]:
    latex_rows = [row.replace("&", " ") for row in re.split(r"\\\\", latex) if row.strip()]
    return latex_rows, [row for row in rendered.split("\n") if row.strip()]


_LATEX_SEPARATORS = re.compile(_LATEX_RELATIONS.pattern + r"|,|;")
_TEXT_SEPARATORS = re.compile(_TEXT_RELATIONS.pattern + r"|, |; ")


def _lone_name(source: str) -> str:
    match = re.fullmatch(r"\s*\\mathit\{(zq[a-z]+)\}\s*", source)
    return match.group(1) if match else source.strip()


def compare(latex: str, rendered: str) -> tuple[str, str]:
    """(outcome, detail) of evaluating a span's LaTeX and its rendering with the same values."""
    from sympy import Basic, Number, Symbol, nan, zoo
    from sympy.parsing.latex import parse_latex
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication,
        parse_expr,
        standard_transformations,
    )

    transformations = (*standard_transformations, implicit_multiplication, convert_xor)
    if re.match(r"\s*[_^]", latex):
        return NOT_EXPRESSION, "a script without a base (a note mark or unit suffix)"
    latex_rows, text_rows = _rows(latex, rendered)
    if len(latex_rows) != len(text_rows):
        return NO_PARSE, f"{len(latex_rows)} rows in the LaTeX, {len(text_rows)} rendered"
    pairs: list[tuple[Any, Any]] = []
    symbols = Symbols()
    for latex_row, text_row in zip(latex_rows, text_rows, strict=True):
        latex_parts = _split_top(latex_row, _LATEX_SEPARATORS)
        text_parts = _split_top(text_row, _TEXT_SEPARATORS)
        if len(latex_parts) != len(text_parts):
            return NO_PARSE, f"{len(latex_parts)} parts in the LaTeX, {len(text_parts)} rendered"
        for latex_part, text_part in zip(latex_parts, text_parts, strict=True):
            if not latex_part.strip() and not text_part.strip():
                continue
            latex_source = latex_for_sympy(latex_part, symbols)
            text_source = text_for_sympy(text_part, symbols) if _LONE.fullmatch(text_part.strip()) else ""
            if _LONE.fullmatch(latex_source.strip()) and text_source:
                same = (
                    latex_source.split() == text_source.split()
                    or _lone_name(latex_source) == text_source.strip()
                )
                pairs.append((Symbol("same"), Symbol("same" if same else "different")))
                continue
            try:
                left = parse_latex(latex_source)
            except Exception as exc:  # the LaTeX parser raises its own and ANTLR's errors
                return NO_PARSE, f"LaTeX: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            try:
                right = parse_expr(text_for_sympy(text_part, symbols), transformations=transformations)
            except Exception as exc:  # tokenizer, syntax and sympy errors alike
                return NO_PARSE, f"text: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            if not isinstance(left, Basic) or not isinstance(right, Basic):
                return NO_PARSE, "not an expression sympy can evaluate"
            pairs.append((left, right))
    if not pairs:
        return NOT_EXPRESSION, "empty"
    free = sorted({s for pair in pairs for e in pair for s in e.free_symbols}, key=str)
    integral = any("Sum" in str(e) or "Product" in str(e) for pair in pairs for e in pair)
    rng = random.Random(zlib.crc32(latex.encode()))
    for _trial in range(_TRIALS):
        values = {s: rng.randint(2, 9) if integral else rng.uniform(1.5, 9.5) for s in free}
        for left, right in pairs:
            try:
                a = complex(left.subs(values).doit().evalf())
                b = complex(right.subs(values).doit().evalf())
            except (TypeError, ValueError) as exc:
                return NO_PARSE, f"no number: {exc}"[:100]
            if left in (nan, zoo) or abs(a - b) > _TOLERANCE * max(1.0, abs(a)):
                return MISMATCH, f"{left} = {a:.6g} but {right} = {b:.6g}"
    atomic = all(isinstance(e, (Symbol, Number)) for pair in pairs for e in pair)
    return (NOT_EXPRESSION, "a lone symbol or number") if atomic else (EQUAL, "")


# ---------------------------------------------------------------------------------------------
# the census
# ---------------------------------------------------------------------------------------------

Renderer = Callable[[latexwalker.LatexNode], str]


def census_of_texts(
    texts: Iterable[tuple[str, str]], raw_of: Callable[[str], str], render: Renderer = render_math
) -> list[Verdict]:
    """A verdict for every distinct (file, LaTeX) math span of the texts."""
    seen: set[tuple[str, str]] = set()
    verdicts: list[Verdict] = []
    for rel, body in texts:
        for node in spans_in(body):
            latex = math_body(node)
            if (rel, latex) in seen:
                continue
            seen.add((rel, latex))
            display = node.isNodeType(latexwalker.LatexEnvironmentNode) or node.displaytype == "display"
            span = Span(rel, _line_of(raw_of(rel), latex), latex, display)
            rendered = render(node).strip()
            if rendered.startswith(KEPT_PREFIX):
                verdicts.append(Verdict(span, rendered, KEPT))
                continue
            outcome, detail = compare(latex, rendered)
            verdicts.append(Verdict(span, rendered, outcome, detail))
    return verdicts


def take_census(trm_path: str | os.PathLike[str] | None, progress: bool = False) -> list[Verdict]:
    """Verdicts for every math span the chapters of every manual reach."""
    trm_root = require_trm_tree(trm_path)
    raws: dict[str, str] = {}

    def raw_of(rel: str) -> str:
        if rel not in raws:
            raws[rel] = (trm_root / rel).read_text(encoding="utf-8", errors="replace")
        return raws[rel]

    return census_of_texts(chapter_texts(trm_root, progress), raw_of)


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    counts = Counter(v.outcome for v in verdicts)
    return {
        "spans found": len(verdicts),
        "rendered": len(verdicts) - counts[KEPT],
        EQUAL: counts[EQUAL],
        NOT_EXPRESSION: counts[NOT_EXPRESSION],
        NO_PARSE: counts[NO_PARSE],
        KEPT: counts[KEPT],
        MISMATCH: counts[MISMATCH],
    }


def print_report(verdicts: list[Verdict], show: int | None) -> None:
    for title, outcome in (("Mismatches", MISMATCH), ("Not parsed", NO_PARSE), ("Kept as source", KEPT)):
        listed = [v for v in verdicts if v.outcome == outcome]
        if not listed:
            continue
        print(f"{title} ({len(listed)}):")
        for verdict in listed[:show]:
            where = f"{verdict.span.file}:{verdict.span.line}"
            latex = " ".join(verdict.span.latex.split())[:160]
            print(f"  {where}: {latex}")
            if outcome != KEPT:
                print(f"    -> {verdict.rendered.replace(chr(10), ' // ')[:160]}  [{verdict.detail}]")
        if show is not None and len(listed) > show:
            print(f"  ... {len(listed) - show} more")
    counts = summary(verdicts)
    print("; ".join(f"{key}: {value}" for key, value in counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trm-path", default=os.environ.get("TRM_PATH"), help="TRM LaTeX tree (default: $TRM_PATH)"
    )
    parser.add_argument("--show", type=int, default=None, help="entries listed per kind (default: all)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead")
    args = parser.parse_args(argv)
    try:
        verdicts = take_census(args.trm_path, progress=not args.json)
    except (TrmTreeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        listed = [asdict(v) for v in verdicts if v.outcome in (MISMATCH, NO_PARSE, KEPT)]
        print(json.dumps({"summary": summary(verdicts), "listed": listed}, indent=1, ensure_ascii=False))
    else:
        print_report(verdicts, args.show)
    return 1 if any(v.outcome == MISMATCH for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
