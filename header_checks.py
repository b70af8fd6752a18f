"""The checks that prove the header ingest lost nothing, each by a route that shares no code with
the scanner: a census of the symbols every header declares against the chunks' symbol_refs, and
the resolution of every TRM register to a header macro of its chip.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chip_vocab import chips
from chunk_format import REGISTER_HEADING
from header_scan import FIELD_SUFFIXES, IDENT, HeaderResult, _strip_comments

# ---------------------------------------------------------------- census (independent of the scanner)


def declared_symbols(text: str) -> set[str]:
    """What a header declares, by plain regexes over comment-free text (not via scan_header).

    Include guards are left out; per-field _M/_V/_S macros are collapsed into their field name,
    which is what a card keeps.
    """
    bare = _strip_comments(text)
    names = set(re.findall(rf"^\s*#\s*define\s+({IDENT})", bare, flags=re.M))
    guards = set(re.findall(rf"^\s*#\s*ifndef\s+({IDENT})\s*\n\s*#\s*define\s+\1\b", bare, flags=re.M))
    names -= guards
    names = {n[:-2] if n.endswith(FIELD_SUFFIXES) and n[:-2] in names else n for n in names}
    names |= set(re.findall(rf"\}}\s*({IDENT})\s*;", _top_level(bare)))  # typedef struct {...} name;
    names |= set(re.findall(rf"\b(?:struct|union|enum)\s+({IDENT})\s*\{{", bare))
    return names


def _top_level(code: str) -> str:
    """``code`` with every brace body emptied, so only file-scope names remain around ``{}``."""
    out: list[str] = []
    depth = 0
    for char in code:
        if char == "}":
            depth -= 1
        if depth == 0:
            out.append(char)
        if char == "{":
            depth += 1
    return "".join(out)


def census(results: dict[str, HeaderResult]) -> tuple[int, int, list[tuple[str, list[str]]]]:
    """(declared, reached, [(file, missing names)]) over every ingested header."""
    declared_total = reached_total = 0
    gaps: list[tuple[str, list[str]]] = []
    for rel_path, result in results.items():
        in_chunks = {s for row in result.rows for s in row["symbol_refs"]}
        missing = sorted(result.declared - in_chunks)
        declared_total += len(result.declared)
        reached_total += len(result.declared) - len(missing)
        if missing:
            gaps.append((rel_path, missing))
    return declared_total, reached_total, gaps


# ---------------------------------------------------------------- TRM register resolution


@dataclass(frozen=True)
class TrmRegister:
    name: str
    params: tuple[str, ...]  # parameter letters from "(n: 0-7)", e.g. ("n",)


def scopes(row: dict[str, Any]) -> list[str]:
    """Where a row counts: its chips, and for chips with several manuals (ESP32-P4) chip + revision,
    so hw_ver1 headers are checked against the v1.3 manual and hw_ver3 against mainline."""
    keys = []
    for chip in row["chips"]:
        published = chips()[chip].revisions
        if len(published) > 1:
            keys += [f"{chip} {rev}" for rev in (row["revisions"] or published)]
        else:
            keys.append(chip)
    return keys


def trm_registers(rows: Iterable[dict[str, Any]]) -> dict[str, set[TrmRegister]]:
    """scope -> the registers named by "Register NAME" lines of doc_type trm rows."""
    per_scope: dict[str, set[TrmRegister]] = defaultdict(set)
    for row in rows:
        if row.get("doc_type") != "trm":
            continue
        for match in REGISTER_HEADING.finditer(row["text"]):
            params = tuple(re.findall(r"([A-Za-z]\w*)\s*:", match.group(2) or ""))
            for scope in scopes(row):
                per_scope[scope].add(TrmRegister(match.group(1), params))
    return per_scope


def src_symbols(rows: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """scope -> every symbol the chip's headers (and the shared ones) declare."""
    per_scope: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.get("doc_type") != "src":
            continue
        for scope in scopes(row):
            per_scope[scope].update(row["symbol_refs"])
    return per_scope


def parameter_pattern(name: str, params: Iterable[str]) -> re.Pattern[str] | None:
    """``AES_KEY_n_REG`` with parameter n -> regex matching AES_KEY_3_REG; None if unparameterised."""
    letters = set(params) or {t for t in re.split(r"_", name) if t.islower() and len(t) <= 2}
    if not letters:
        return None
    alternation = "|".join(sorted((re.escape(p) for p in letters), key=len, reverse=True))
    pattern = re.sub(rf"(?<![A-Za-z])({alternation})(?![a-z])", "\x00", name)
    if "\x00" not in pattern:
        pattern = re.sub(rf"({alternation})", "\x00", name)
    if "\x00" not in pattern:
        return None
    return re.compile("^" + re.escape(pattern).replace("\x00", r"\d+") + "$")


def classify_register(register: TrmRegister, symbols: set[str], by_suffix: dict[str, list[str]]) -> str:
    """How a TRM register name relates to the chip's headers (the check-registers categories)."""
    if register.name in symbols:
        return "exact"
    pattern = parameter_pattern(register.name, register.params)
    if pattern is not None and any(pattern.match(s) for s in symbols):
        return "parameterised"
    if register.name.upper() in symbols or register.name.upper().replace("_N_", "_") in symbols:
        return "parameterised"
    suffix = register.name.split("_", 1)[-1]
    if suffix in symbols or by_suffix.get(suffix) or by_suffix.get(register.name):
        return "prefix-differs"  # the same name once a leading peripheral token is dropped
    return "absent"


def check_registers(trm_rows: Iterable[dict[str, Any]], src_rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per chip: the share of TRM register names that resolve to a #define in that chip's headers."""
    trm = trm_registers(trm_rows)
    src = src_symbols(src_rows)
    report: dict[str, Any] = {}
    for chip in sorted(trm):
        symbols = {s for s in src.get(chip, set()) if "_REG" in s}
        by_suffix: dict[str, list[str]] = defaultdict(list)
        for symbol in symbols:
            by_suffix[symbol.split("_", 1)[-1]].append(symbol)
        categories: Counter[str] = Counter()
        samples: dict[str, list[str]] = defaultdict(list)
        for register in sorted(trm[chip], key=lambda r: r.name):
            category = classify_register(register, symbols, by_suffix)
            categories[category] += 1
            if category != "exact" and len(samples[category]) < 6:
                samples[category].append(register.name)
        total = sum(categories.values())
        resolved = categories["exact"] + categories["parameterised"]
        report[chip] = {
            "trm_registers": total,
            "resolved": resolved,
            "share": resolved / total if total else 0.0,
            "categories": dict(categories),
            "samples": dict(samples),
        }
    return report
