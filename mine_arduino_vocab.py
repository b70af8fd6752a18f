"""Mine which ESP-IDF calls each Arduino-ESP32 function makes: the map from the names users write
(``analogRead``, ``ledcWriteTone``, ``WiFi.mode``, ``Wire.begin``) to the names our documents use.

Users of the Arduino core ask in its vocabulary, and no passage of ours says ``analogRead``; the
core's own source says which ESP-IDF driver calls stand behind each of its functions. This reads an
arduino-esp32 tree (``cores/esp32`` and ``libraries/*/src``), finds every function and method it
defines, the calls each body makes, the global instances (``extern WiFiClass WiFi;``) and the class
hierarchy, and follows the core's own helpers (``ledcWriteTone`` -> ``ledcChangeFrequency`` ->
``ledc_set_freq``) to the ESP-IDF functions they reach. What counts as an ESP-IDF function is read
from the ESP-IDF trees given: every name declared in a public component header. Only names are kept:
no upstream text (log messages, comments) goes into the file.

    uv run mine_arduino_vocab.py ARDUINO_TREE [ARDUINO_TREE ...] --idf-path IDF_TREE [--idf-path ...]

The output is a small JSON file committed beside the code, so that query analysis can map a question's
Arduino names without either upstream tree. It is not yet read at query time: a retrieval leg over it
moved no cross-validated figure beyond noise (docs/retrieval.md, Experiments).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from header_scan import _strip_comments

VOCAB_FORMAT = 1
# ESP-IDF calls kept per Arduino name, nearest first: beyond this the helpers' bookkeeping calls
# (locks, logging, allocation) crowd in.
CALLS_PER_NAME = 6
# A method called by name alone is followed into at most this many classes' definitions of it.
MAX_METHOD_OWNERS = 3
# How deep the core's own helpers are followed from a public function.
HELPER_DEPTH = 3
# Calls into these ESP-IDF components are bookkeeping (tasks, locks, heap, logging, error names, ROM
# delays), made by functions of every kind: they say nothing about what one function is about.
PLUMBING_COMPONENTS = frozenset(("freertos", "heap", "log", "esp_common", "newlib", "esp_rom", "pthread"))

# fmt: off
KEYWORDS = frozenset((
    "if", "for", "while", "switch", "return", "sizeof", "catch", "else", "do", "case", "new", "delete",
    "defined", "typeof", "alignof", "decltype", "static_assert", "__attribute__", "__typeof__", "assert",
))
# fmt: on
SOURCE_SUFFIXES = (".c", ".cpp", ".h", ".hpp")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_DEFINITION = re.compile(
    r"(?<![\w.>])(?P<name>(?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*)\s*\((?:[^(){};]*(?:\([^(){};]*\)[^(){};]*)*)\)"
    r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?::\s*[^{;]*?)?\{"
)
_CLASS = re.compile(r"\b(?:class|struct)\s+(?P<name>[A-Za-z_]\w*)\s*(?:final\s*)?(?::(?P<bases>[^{;]*))?\{")
_CALL = re.compile(r"(?P<via>\.|->|::)?\s*\b(?P<name>[A-Za-z_]\w*)\s*\(")
_ALIAS = re.compile(
    r"\b(?P<name>[A-Za-z_]\w*)\s*\([^;{]*\)\s*__attribute__\s*\(\(\s*weak\s*,\s*alias\s*\(\s*\"(?P<target>\w+)\""
)
_EXTERN_INSTANCE = re.compile(r"\bextern\s+(?:class\s+)?(?P<type>[A-Z]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*;")
_STRING_LIST = re.compile(r'\[\s*"(?:[^"\\]|\\.)*"(?:,\s*"(?:[^"\\]|\\.)*")*\s*\]')
_IDF_DECLARED = re.compile(r"\b(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[xvu][A-Z][A-Za-z0-9]+)\s*\(")


@dataclass
class Definition:
    """One function or method the Arduino tree defines, with the calls its body makes."""

    qualified: str  # "analogRead", "WiFiGenericClass::mode"
    calls: list[tuple[str, str]] = field(default_factory=list)  # (via, name) in body order

    @property
    def simple(self) -> str:
        return self.qualified.rsplit("::", 1)[-1]

    @property
    def owner(self) -> str | None:
        return self.qualified.rsplit("::", 1)[0] if "::" in self.qualified else None


@dataclass
class ArduinoTree:
    """Everything read from one arduino-esp32 tree."""

    definitions: list[Definition] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # public name -> the function it aliases
    instances: dict[str, str] = field(default_factory=dict)  # "WiFi" -> "WiFiClass"
    bases: dict[str, list[str]] = field(default_factory=dict)  # class -> its base classes
    files: int = 0


def blank_strings(code: str) -> str:
    """``code`` with string and character contents blanked, so braces and parentheses inside them
    cannot confuse the brace matching."""
    return _STRING.sub(lambda m: m.group()[0] + " " * (len(m.group()) - 2) + m.group()[-1], code)


def matching_brace(code: str, opening: int) -> int:
    """The index just past the brace that closes the one at ``opening`` (or the end of the text)."""
    depth = 0
    for position in range(opening, len(code)):
        char = code[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return position + 1
    return len(code)


def read_source(path: Path, tree: ArduinoTree) -> None:
    """Add one source file's definitions, aliases, instances and classes to ``tree``."""
    uncommented = _strip_comments(path.read_text(encoding="utf-8", errors="replace"))
    code = blank_strings(uncommented)
    for match in _ALIAS.finditer(uncommented):  # the alias target is a string
        tree.aliases[match["name"]] = match["target"]
    for match in _EXTERN_INSTANCE.finditer(code):
        tree.instances.setdefault(match["name"], match["type"])
    classes = []  # (body start, body end, name): inline methods get their owner
    for match in _CLASS.finditer(code):
        bases = [part.split()[-1] for part in (match["bases"] or "").split(",") if part.split()]
        if bases:
            tree.bases.setdefault(match["name"], [re.sub(r"<.*", "", base) for base in bases])
        opening = match.end() - 1
        classes.append((opening, matching_brace(code, opening), match["name"]))
    position = 0
    while match := _DEFINITION.search(code, position):
        name = match["name"]
        opening = match.end() - 1
        end = matching_brace(code, opening)
        if name.rsplit("::", 1)[-1] in KEYWORDS:
            position = match.end()
            continue
        owner = next((cls for start, stop, cls in classes if start < match.start() < stop), None)
        qualified = f"{owner}::{name}" if owner and "::" not in name else name
        definition = Definition(qualified)
        body = code[opening:end]
        definition.calls = [
            (call["via"] or "", call["name"]) for call in _CALL.finditer(body) if call["name"] not in KEYWORDS
        ]
        tree.definitions.append(definition)
        position = end


def source_files(root: Path) -> Iterator[Path]:
    """The core's and the libraries' sources: what an Arduino sketch calls into."""
    for folder in [root / "cores" / "esp32", *sorted((root / "libraries").glob("*/src"))]:
        for path in sorted(folder.rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path.is_file():
                yield path


def read_trees(roots: list[Path]) -> ArduinoTree:
    """One tree of every root's sources: the core's releases name the same function differently
    (``ledcSetup`` and ``ledcAttach``) and users ask in each; a name several define is followed in
    all of them, the first root's calls first."""
    tree = ArduinoTree()
    files = [path for root in roots for path in source_files(root)]
    for path in tqdm(files, desc="arduino sources", unit="file", file=sys.stderr):
        read_source(path, tree)
    tree.files = len(files)
    return tree


def idf_functions(idf_paths: Iterable[Path]) -> dict[str, str]:
    """Every function-like name declared in an ESP-IDF component's public headers (``include/`` and
    the legacy drivers' ``deprecated/`` folders), across the trees given, with its component."""
    names: dict[str, str] = {}
    for idf_path in idf_paths:
        components = idf_path / "components"
        headers = [
            path
            for path in components.rglob("*.h")
            if {"include", "deprecated"} & set(parts := path.relative_to(components).parts)
            and not any(part.startswith("test") for part in parts)
        ]
        for header in tqdm(headers, desc=f"idf headers {idf_path.name}", unit="file", file=sys.stderr):
            code = blank_strings(_strip_comments(header.read_text(encoding="utf-8", errors="replace")))
            component = header.relative_to(components).parts[0]
            for match in _IDF_DECLARED.finditer(code):
                if not match["name"].endswith("_t"):  # a cast to a type, not a call
                    names.setdefault(match["name"], component)
    return names


class Resolver:
    """Follows the core's calls from a public name to the ESP-IDF functions they reach."""

    def __init__(self, tree: ArduinoTree, idf: dict[str, str]) -> None:
        self.tree = tree
        self.idf = set(idf) - {definition.simple for definition in tree.definitions}
        self.by_qualified: dict[str, list[Definition]] = defaultdict(list)
        self.by_simple: dict[str, list[Definition]] = defaultdict(list)
        for definition in tree.definitions:
            self.by_qualified[definition.qualified].append(definition)
            self.by_simple[definition.simple].append(definition)
        self.plumbing = {name for name in self.idf if idf[name] in PLUMBING_COMPONENTS}

    def ancestors(self, cls: str) -> list[str]:
        seen: list[str] = []
        stack = [cls]
        while stack:
            current = stack.pop(0)
            if current not in seen:
                seen.append(current)
                stack.extend(self.tree.bases.get(current, []))
        return seen

    def callee(self, caller: Definition, via: str, name: str) -> list[Definition]:
        """The tree's definitions a call in ``caller`` may reach: the caller's own class first."""
        name = self.tree.aliases.get(name, name)
        if caller.owner and not via:
            for cls in self.ancestors(caller.owner):
                if found := self.by_qualified.get(f"{cls}::{name}"):
                    return found
        candidates = self.by_simple.get(name, [])
        free = [definition for definition in candidates if definition.owner is None]
        if free and not via:
            return free  # one C function, defined once per release of the core
        return candidates if len(candidates) <= MAX_METHOD_OWNERS else []

    def idf_calls(self, roots: list[Definition]) -> list[str]:
        """ESP-IDF functions reached from ``roots`` through at most ``HELPER_DEPTH`` helpers, nearest
        and earliest first, plumbing left out."""
        found: list[str] = []
        frontier, seen = list(roots), {id(root) for root in roots}
        for _ in range(HELPER_DEPTH + 1):
            following: list[Definition] = []
            for definition in frontier:
                for via, name in definition.calls:
                    if name in self.idf and name not in self.plumbing and name not in found:
                        found.append(name)
                    for callee in self.callee(definition, via, name):
                        if id(callee) not in seen:
                            seen.add(id(callee))
                            following.append(callee)
            frontier = following
        return found[:CALLS_PER_NAME]


def mine(tree: ArduinoTree, idf: dict[str, str]) -> dict[str, object]:
    """The vocabulary: public names -> ESP-IDF calls, instances and classes."""
    resolver = Resolver(tree, idf)
    functions: dict[str, list[str]] = {}
    groups: dict[str, list[Definition]] = defaultdict(list)
    for definition in tree.definitions:
        if not definition.simple.startswith("_"):  # "__analogRead" is reached through its alias
            groups[definition.qualified].append(definition)
    for public, target in tree.aliases.items():
        if not public.startswith("_") and target in resolver.by_simple:
            groups[public].extend(resolver.by_simple[target])
    for name, definitions in sorted(groups.items()):
        if calls := resolver.idf_calls(definitions):
            functions[name] = calls
    owners = {name.split("::")[0] for name in functions if "::" in name}
    lineages = {cls: resolver.ancestors(cls) for cls in sorted(tree.bases)}
    classes = {cls: lineage[1:] for cls, lineage in lineages.items() if owners & set(lineage)}
    return {
        "functions": functions,
        "instances": dict(sorted(tree.instances.items())),
        "classes": classes,
    }


def tree_commit(root: Path) -> str | None:
    """The checkout's commit, or the first sentence of the SOURCE.md of a tree assembled file by file."""
    if (root / ".git").exists():
        result = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.strip()
    source = root / "SOURCE.md"
    if not source.exists():
        return None
    lines = [line.strip() for line in source.read_text(encoding="utf-8").splitlines()]
    return next((line for line in lines if line and not line.startswith("#")), None)


def readable_json(document: dict[str, object]) -> str:
    """One entry a line, its list of calls on that line: small, and a re-mine reads as a clear diff."""
    text = json.dumps(document, indent=1)
    return (
        _STRING_LIST.sub(lambda m: "[" + ", ".join(re.findall(r'"(?:[^"\\]|\\.)*"', m[0])) + "]", text) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "arduino_trees",
        type=Path,
        nargs="+",
        help="arduino-esp32 trees (cores/esp32, libraries/), newest first",
    )
    parser.add_argument(
        "--idf-path", type=Path, action="append", required=True, help="an ESP-IDF tree (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("arduino_vocab.json"))
    args = parser.parse_args(argv)
    for root in args.arduino_trees:
        if not (root / "cores" / "esp32").is_dir():
            parser.error(f"{root} holds no cores/esp32: give the root of an arduino-esp32 tree")
    for idf_path in args.idf_path:
        if not (idf_path / "components").is_dir():
            parser.error(f"{idf_path} holds no components/: give the root of an ESP-IDF tree")
    tree = read_trees(args.arduino_trees)
    vocab = mine(tree, idf_functions(args.idf_path))
    document = {
        "format": VOCAB_FORMAT,
        "arduino_trees": [tree_commit(root) for root in args.arduino_trees],
        "arduino_files": tree.files,
        "idf_trees": [tree_commit(path) for path in args.idf_path],
        **vocab,
    }
    args.out.write_text(readable_json(document), encoding="utf-8")
    print(
        f"{args.out.name}: {len(vocab['functions'])} Arduino names mapped to ESP-IDF calls, "
        f"{len(vocab['instances'])} instances "
        f"from {tree.files} files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
