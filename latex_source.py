"""A TRM chapter's LaTeX source made whole before it is parsed: brace groups and comments scanned,
includes followed (case-insensitively, with the path macros the manuals define), the ``tagging``
package's conditionals evaluated for one manual, and the user macros (``\\newcommand``, ``\\def``)
expanded. latex_parser.py cuts the result into sections, registers and tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

INCLUDE_COMMANDS = ("input", "subfile", "subfileinclude", "include")
VERBATIM_ENVIRONMENTS = ("lstlisting", "verbatim")
MAX_INCLUDE_DEPTH = 20
MAX_MACRO_PASSES = 8


# ---------------------------------------------------------------------------------------------
# Low-level scanning: brace groups and comments
# ---------------------------------------------------------------------------------------------


def _escaped(text: str, pos: int) -> bool:
    """True when text[pos] is preceded by an odd number of backslashes."""
    count = 0
    pos -= 1
    while pos >= 0 and text[pos] == "\\":
        count += 1
        pos -= 1
    return count % 2 == 1


def matching_brace(text: str, open_pos: int) -> int:
    """Index of the brace closing the group opened at ``open_pos``; -1 when it never closes."""
    depth = 0
    for pos in range(open_pos, len(text)):
        char = text[pos]
        if char in "{}" and _escaped(text, pos):
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return pos
    return -1


def read_group(text: str, pos: int, *, skip_space: bool = True) -> tuple[str, int] | None:
    """Read one ``{...}`` argument at ``pos`` (after optional whitespace): (content, end)."""
    start = pos
    if skip_space:
        while start < len(text) and text[start] in " \t\r\n":
            start += 1
    if start >= len(text) or text[start] != "{":
        return None
    end = matching_brace(text, start)
    if end < 0:
        return None
    return text[start + 1 : end], end + 1


def read_optional(text: str, pos: int) -> tuple[str | None, int]:
    """Read an optional ``[...]`` argument (brace-aware) at ``pos``; (None, pos) when absent."""
    start = pos
    while start < len(text) and text[start] in " \t":
        start += 1
    if start >= len(text) or text[start] != "[":
        return None, pos
    depth = 0
    for cur in range(start + 1, len(text)):
        char = text[cur]
        if char == "{" and not _escaped(text, cur):
            depth += 1
        elif char == "}" and not _escaped(text, cur):
            depth -= 1
        elif char == "]" and depth == 0:
            return text[start + 1 : cur], cur + 1
    return None, pos


_VERBATIM_SPAN = re.compile(r"\\begin\{(" + "|".join(VERBATIM_ENVIRONMENTS) + r")\}.*?\\end\{\1\}", re.DOTALL)


def strip_comments(text: str) -> str:
    """Remove ``%`` comments (and the line end they swallow) outside verbatim listings.

    Done before anything else: commented-out examples otherwise look like real includes,
    registers and macro definitions.
    """
    out: list[str] = []
    last = 0
    for match in _VERBATIM_SPAN.finditer(text):
        out.append(_strip_comments_plain(text[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_strip_comments_plain(text[last:]))
    return "".join(out)


def _strip_comments_plain(text: str) -> str:
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        cut = _comment_start(content)
        if cut < 0:
            pieces.append(line)
        elif content[:cut].strip():
            pieces.append(content[:cut])  # TeX swallows the line end after a comment
    return "".join(pieces)


def _comment_start(line: str) -> int:
    pos = line.find("%")
    while pos >= 0:
        if not _escaped(line, pos):
            return pos
        pos = line.find("%", pos + 1)
    return -1


def _rewrite_matches(
    text: str, pattern: re.Pattern[str], rewrite: Callable[[re.Match[str]], tuple[str, int] | None]
) -> str:
    """``text`` with each match of ``pattern``, and the arguments after it, replaced.

    ``rewrite`` returns (replacement, where scanning resumes), so a replacement can take in brace
    groups beyond the match (which ``re.sub`` cannot); None keeps the match as written.
    """
    out: list[str] = []
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        rewritten = rewrite(match)
        if rewritten is None:
            out.append(text[pos : match.end()])
            pos = match.end()
            continue
        out.append(text[pos : match.start()])
        out.append(rewritten[0])
        pos = rewritten[1]
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Include expansion
# ---------------------------------------------------------------------------------------------


@dataclass
class IncludeProblem:
    """An include that could not be followed, with the file that asked for it."""

    source: str
    target: str
    reason: str


class IncludeResolver:
    """Find an included file the way a TeX run would, forgiving name case on Linux.

    Include names do not always match the file's case (``09-eFuse-reg__EN`` names
    ``09-EFUSE-reg__EN.tex``); a case-insensitive file system hides this, so when the exact
    name is absent the directory is searched case-insensitively.
    """

    def __init__(self, search_dirs: Iterable[Path]):
        self.search_dirs = [d for d in search_dirs if d.is_dir()]
        self.case_fixed: list[tuple[str, Path]] = []
        self._listings: dict[Path, dict[str, str]] = {}

    def _listing(self, directory: Path) -> dict[str, str]:
        if directory not in self._listings:
            try:
                names = [p.name for p in directory.iterdir()]
            except OSError:
                names = []
            self._listings[directory] = {n.lower(): n for n in names}
        return self._listings[directory]

    def resolve(self, target: str, base_dirs: Iterable[Path]) -> Path | None:
        names = [target] if target.endswith((".tex", ".sty")) else [target + ".tex", target]
        candidates = [*base_dirs, *self.search_dirs]
        for name in names:
            for base in candidates:
                path = base / name
                if path.is_file():
                    return path.resolve()
        for name in names:
            for base in candidates:
                found = self._case_insensitive(base / name)
                if found is not None:
                    self.case_fixed.append((target, found))
                    return found
        return None

    def _case_insensitive(self, path: Path) -> Path | None:
        current = Path(path.anchor) if path.is_absolute() else Path(".")
        parts = path.parts[1:] if path.is_absolute() else path.parts
        for part in parts:
            if part in (".", ""):
                continue
            if part == "..":
                current = current.parent
                continue
            actual = self._listing(current).get(part.lower())
            if actual is None:
                return None
            current = current / actual
        return current.resolve() if current.is_file() else None


_PATH_MACRO_DEF = re.compile(
    r"\\(?:def\s*\\(?P<d>[A-Za-z]+)|(?:re)?newcommand\s*\{?\\(?P<n>[A-Za-z]+)\}?)\s*\{(?P<body>[^{}\\]*)\}"
)
# an include command up to its opening brace (also how ingest_trm reads a manual's chapter list)
INCLUDE_COMMAND = re.compile(r"\\(" + "|".join(INCLUDE_COMMANDS) + r")(?![A-Za-z])\s*\{")
_DOCUMENT = re.compile(r"\\begin\{document\}(.*?)(?:\\end\{document\}|\Z)", re.DOTALL)
# TeX conditionals that nest with \fi (\iftagged and \ifthenelse are macros with arguments instead)
_TEX_CONDITIONAL = re.compile(
    r"\\(iffalse|iftrue|ifglobal|ifx|ifnum|ifdim|ifodd|ifdefined|ifcsname|ifcat|ifcase|else|fi)(?![A-Za-z])"
)
# what a manual build decides: the chapter is part of the global project; \iffalse hides text
_CONSTANT_CONDITIONALS = {"iftrue": True, "ifglobal": True, "iffalse": False}
_CONSTANT_CONDITIONAL = re.compile(r"\\(" + "|".join(_CONSTANT_CONDITIONALS) + r")(?![A-Za-z])")


@dataclass
class ExpandContext:
    """State of one chapter expansion: the tags in force, path macros seen so far, problems."""

    tags: frozenset[str]
    resolver: IncludeResolver
    root_dir: Path
    path_macros: dict[str, str] = field(default_factory=dict)
    problems: list[IncludeProblem] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def document_body(text: str) -> str:
    """The part a subfile contributes: its document body, or all of it when it has none."""
    match = _DOCUMENT.search(text)
    return match.group(1) if match else text


def select_constant_branches(text: str) -> str:
    """Resolve ``\\iffalse``, ``\\iftrue`` and ``\\ifglobal`` blocks to the branch TeX would typeset.

    ``\\iffalse ... \\fi`` hides retired registers (ESP32-C3 AES) and chapters test ``\\ifglobal``
    to add stand-alone front matter; nested conditionals are matched by depth.
    """

    def select(opening: re.Match[str]) -> tuple[str, int]:
        depth, else_at, fi_at = 0, None, None
        for match in _TEX_CONDITIONAL.finditer(text, opening.end()):
            token = match.group(1)
            if token == "fi":
                if depth == 0:
                    fi_at = match
                    break
                depth -= 1
            elif token == "else":
                if depth == 0 and else_at is None:
                    else_at = match
            else:
                depth += 1
        if fi_at is None:  # unterminated: leave the text visible rather than drop the rest
            return "", opening.end()
        yes_end = else_at.start() if else_at else fi_at.start()
        no_part = text[else_at.end() : fi_at.start()] if else_at else ""
        chosen = text[opening.end() : yes_end] if _CONSTANT_CONDITIONALS[opening.group(1)] else no_part
        return select_constant_branches(chosen), fi_at.end()

    return _rewrite_matches(text, _CONSTANT_CONDITIONAL, select)


def expand_file(path: Path, ctx: ExpandContext, stack: tuple[Path, ...] = ()) -> str:
    """Comment-stripped, tag-evaluated text of ``path`` with its includes expanded in place."""
    path = path.resolve()
    if path in stack:
        ctx.problems.append(IncludeProblem(str(stack[-1]), str(path), "include cycle"))
        return ""
    if len(stack) >= MAX_INCLUDE_DEPTH:
        ctx.problems.append(IncludeProblem(str(stack[-1]), str(path), "include depth limit"))
        return ""
    ctx.files.append(path)
    raw = path.read_text(encoding="utf-8", errors="replace")
    text = strip_comments(raw)
    for match in _PATH_MACRO_DEF.finditer(text):
        name = match.group("d") or match.group("n")
        body = match.group("body").strip()
        if "/" in body or body.startswith("."):
            ctx.path_macros[name] = body
    text = select_constant_branches(document_body(text))
    text = evaluate_tags(text, ctx.tags)
    return _expand_includes(text, path, ctx, (*stack, path))


def _expand_includes(text: str, current: Path, ctx: ExpandContext, stack: tuple[Path, ...]) -> str:
    def include(match: re.Match[str]) -> tuple[str, int] | None:
        group = read_group(text, match.end() - 1, skip_space=False)
        if group is None:
            return None
        target_raw, end = group
        target = _expand_path_macros(target_raw, ctx.path_macros).strip()
        found = ctx.resolver.resolve(target, [ctx.root_dir, current.parent])
        if found is None:
            ctx.problems.append(IncludeProblem(str(current), target, "file not found"))
        elif found.suffix == ".tex":
            return "\n" + expand_file(found, ctx, stack) + "\n", end
        return "", end

    return _rewrite_matches(text, INCLUDE_COMMAND, include)


def _expand_path_macros(target: str, macros: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return macros.get(match.group(1), match.group(0))

    previous = None
    while previous != target:
        previous = target
        target = re.sub(r"\\([A-Za-z]+)(?:\{\})?", replace, target)
    return target


# ---------------------------------------------------------------------------------------------
# Tag conditionals (the ``tagging`` package)
# ---------------------------------------------------------------------------------------------

_TAG_COMMAND = re.compile(r"\\(iftagged|tagged|untagged)(?![A-Za-z])")


def evaluate_tags(text: str, tags: frozenset[str]) -> str:
    """Replace every ``\\iftagged{T}{yes}{no}``, ``\\tagged{T}{x}``, ``\\untagged{T}{x}`` by its
    selected branch for the manual's tags, innermost content evaluated too.

    Working on text (before environments are matched) is what makes branches holding an
    unbalanced ``\\begin{register}`` safe: only the chosen branch survives.
    """

    def select(match: re.Match[str]) -> tuple[str, int]:
        kind = match.group(1)
        tag_arg = read_group(text, match.end())
        first = read_group(text, tag_arg[1]) if tag_arg else None
        second = read_group(text, first[1]) if first and kind == "iftagged" else None
        if tag_arg is None or first is None or (kind == "iftagged" and second is None):
            # malformed: drop the command name only, keep the text visible
            return "", match.end()
        active = bool({t.strip() for t in tag_arg[0].split(",") if t.strip()} & tags)
        if kind == "iftagged":
            chosen, end = (first[0] if active else second[0]), second[1]
        elif kind == "tagged":
            chosen, end = (first[0] if active else ""), first[1]
        else:
            chosen, end = ("" if active else first[0]), first[1]
        # nested conditionals inside the chosen branch are evaluated as well
        return evaluate_tags(chosen, tags), end

    return _rewrite_matches(text, _TAG_COMMAND, select)


# ---------------------------------------------------------------------------------------------
# User macros (\newcommand, \def)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Macro:
    """A user macro: its argument count and body, expanded textually before parsing."""

    nargs: int
    body: str


_DEFINITION = re.compile(
    r"\\(?:(?:new|renew|provide)command\*?\s*(?:\{\s*\\(?P<n1>[A-Za-z]+)\s*\}|\\(?P<n2>[A-Za-z]+))"
    r"|def\s*\\(?P<n3>[A-Za-z]+)(?P<params>(?:#\d)*))"
)


def extract_definitions(text: str) -> tuple[str, dict[str, Macro]]:
    """Cut every ``\\newcommand``/``\\def`` out of ``text`` and return the macros they define.

    A body may open an environment that its use site closes later (a table header macro opening
    ``longtable``); left in place it makes the definition look like content and swallows the
    rest of the chapter, so definitions are removed and their uses expanded instead.
    """
    macros: dict[str, Macro] = {}

    def cut(match: re.Match[str]) -> tuple[str, int] | None:
        name = match.group("n1") or match.group("n2") or match.group("n3")
        cursor = match.end()
        nargs = len(match.group("params") or "") // 2
        if match.group("n3") is None:
            count, cursor = read_optional(text, cursor)
            if count is not None and count.strip().isdigit():
                nargs = int(count.strip())
            _default, cursor = read_optional(text, cursor)
        body = read_group(text, cursor)
        if body is None:
            return None
        macros[name] = Macro(nargs, body[0])
        return "", body[1]

    return _rewrite_matches(text, _DEFINITION, cut), macros


def expand_macros(text: str, macros: dict[str, Macro]) -> str:
    """Replace uses of ``macros`` by their bodies (arguments substituted) until none is left."""
    if not macros:
        return text
    names = sorted(macros, key=len, reverse=True)
    pattern = re.compile(r"\\(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z])")
    for _ in range(MAX_MACRO_PASSES):
        out: list[str] = []
        pos = 0
        changed = False
        for match in pattern.finditer(text):
            if match.start() < pos:
                continue
            macro = macros[match.group(1)]
            cursor = match.end()
            body = macro.body
            for index in range(1, macro.nargs + 1):
                arg = read_group(text, cursor)
                if arg is None:
                    break
                body = body.replace(f"#{index}", arg[0])
                cursor = arg[1]
            out.append(text[pos : match.start()])
            out.append(body)
            if cursor < len(text) and text[cursor : cursor + 2] == "{}":
                cursor += 2  # ``\chipname{}`` keeps a following space in TeX; the braces go
            pos = cursor
            changed = True
        out.append(text[pos:])
        text = "".join(out)
        if not changed:
            break
    return text


def search_dirs(trm_root: Path, chip_dir: Path) -> list[Path]:
    """Where TeX finds shared inputs: the chip folder, its chip-spec content, the shared folders."""
    dirs = [chip_dir, chip_dir / "00-chip-spec-content"]
    for shared in ("00-trm-shared", "00-shared"):
        base = trm_root / shared
        if base.is_dir():
            dirs.append(base)
            dirs.extend(sorted(p for p in base.rglob("*") if p.is_dir()))
    return dirs
