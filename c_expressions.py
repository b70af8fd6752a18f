"""C preprocessor macros and the arithmetic of their bodies: the address expressions of the SoC
headers (``DR_REG_UART_BASE + 0x14``, ``REG_UART_BASE(i) + 0x14``) evaluated to numbers, safely
(the body is checked to be arithmetic and parsed with ``ast``, never executed as code).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

_DEFINE_LINE = re.compile(
    r"^\s*#\s*define\s+(?P<name>[A-Za-z_]\w*)(?P<params>\([^)]*\))?\s+(?P<value>.+?)\s*$"
)
# Address arithmetic runs for every macro of a chip when its index is built: compiled once here.
_C_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_INTEGER_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_INTEGER = re.compile(r"0[xX][0-9a-fA-F]+|\d+")
_NOT_ARITHMETIC = re.compile(r"[^0-9a-fA-FxX+\-*/()<>|&~?:=! \t]|!(?!=)")
_C_COMMENT = re.compile(r"/\*.*?\*/|//.*$")


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
