"""Absolute addresses of header registers, and the peripheral bases the headers use but leave
undefined: found in the chip's linker script, a renamed base, a shared base or the manual's memory
map, each answer saying where it came from.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import ChainMap, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from c_expressions import _C_IDENTIFIER, Macro, _call_args, _inside_number, evaluate
from chunk_format import OFFSET_LIMIT, parameter_regex
from register_index import _BASE_NAME, _LINKER_SCRIPT, BaseSource, ChipIndex, _quote_path, _rows

_EXTERN = re.compile(r"^\s*extern\s+(?:volatile\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*;", re.M)
# accessors that read hardware: an address computed with one exists only at run time
_RUNTIME_READS = frozenset(("REG_READ", "REG_GET_FIELD", "REG_GET_BIT", "READ_PERI_REG", "GET_PERI_REG_MASK"))
_INSTANCE_LIMIT = 16
_MAX_INSTANCES = 256  # instances of one parameterised manual register put in the address map


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


def _base_macro(expression: str) -> str | None:
    found = re.findall(r"\b((?:DR_)?REG_\w*BASE\w*)\b", expression)
    return found[0] if found else None


def _instance_address(documented: str | None, instance: dict[str, str]) -> str | None:
    """``0x0000+4*n`` with n=3 -> ``0x000C``; other forms are returned as documented."""
    if not documented or not instance:
        return documented
    expression = documented
    for letter, value in instance.items():
        expression = re.sub(rf"(?<![A-Za-z0-9]){re.escape(letter)}(?![A-Za-z0-9])", value, expression)
    value = evaluate(expression, {})
    return f"0x{value:04X}" if value is not None else documented


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
    return list(address_map(index).get(address, []))


def _base_stem(name: str) -> str:
    return re.sub(r"\d+", "", name.removeprefix("DR_REG_").removesuffix("_BASE")).rstrip("_")


def address_map(index: ChipIndex) -> dict[int, list[tuple[str, int]]]:
    """Absolute address -> (register name, header instance): every header register at every real
    instance, then every manual register the headers do not define (``AES_KEY_n_REG`` at each n,
    a peripheral without a register header such as TWAI) at documented offset + peripheral base."""
    if index.address_memo is None:
        index.address_memo = defaultdict(list)
        for macro in index.header_registers():
            for instance, value in instance_addresses(index, macro):
                index.address_memo[value].append((macro.name, instance))
        for name, value in _manual_addresses(index):
            if (name, 0) not in index.address_memo[value]:
                index.address_memo[value].append((name, 0))
    return index.address_memo


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
    if not owners:  # nothing to place it against: the store lacks the headers, not the address a register
        return f"{head}: {index.missing_headers()}{hint}"
    owner = index.owning_base(address)
    if owner is None:
        lowest = f"the lowest peripheral base is {owners[0][1][0]} (0x{owners[0][0]:08X})"
        return f"{head}: it lies below every peripheral base in reg_base.h; {lowest}{hint}"
    base, names = owner
    following = [value for value, _ in owners if value > base]
    end = following[0] if following else 1 << 32
    where = f"{head}; it lies at {names[0]} (0x{base:08X}) + 0x{address - base:X}"
    mapped = address_map(index)
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
