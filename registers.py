"""Structured register answers (the ``esp32_docs_register`` tool) from the chunk store.

The manual (doc_type ``trm``) documents a register's offset, reset value and fields; the SoC headers
(doc_type ``src``) give the C address expression and, through ``reg_base.h``, the peripheral base.
Joining the two per chip answers "what is X", "what is at 0x6000_4000" and "what changed between
chips or ESP32-P4 revisions" as JSON. Everything is an exact filter on ``symbol_refs``/``doc_type``/
``chips``: no embedding is involved, so vectors in the table are irrelevant here.
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from c_expressions import _C_IDENTIFIER, Macro, evaluate
from chip_vocab import chips, validate_chip
from chunk_format import OFFSET_LIMIT, STRUCT_FIELDS_NOTE
from register_bases import (
    _absolute,
    _address_not_found,
    _base_instance,
    _base_macro,
    _call,
    _chapter_base,
    _expression_base,
    _file_name,
    _instance_address,
    _parse_offset,
    _registers_at,
    address_map,
    base_instances,
    base_source,
    expression_problems,
    instance_addresses,
)
from register_index import (
    MASK_FIELDS_NOTE,
    ChipIndex,
    _field_owner,
    _find_trm,
    _header_defines,
    _pick_header,
    _quote,
    _resolve_revision,
    _rows,
    chip_index,
    missing_chip,
)
from register_views import (
    HEADERS,
    MANUAL,
    _compare_release_target,
    _compare_target,
    _instance_fields,
    _instance_of,
    compare_fields,
    compare_release_view,
    held_releases,
    merge_views,
    other_release_note,
)
from releases import ReleaseIndex, newest_first, releases_of

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def _revision_scope(chip: str, revision: str | None) -> str | None:
    published = chips()[chip].revisions
    if len(published) < 2 or revision is None:
        return None
    others = ", ".join(r for r in published if r != revision)
    return f"ONLY revision {revision} of {chips()[chip].name}; other revisions: {others} (pass revision=...)"


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


def _header_source(header: Macro, index: ChipIndex) -> str:
    """The header a card's fields come from: its register header, or (for a register that header
    defines without field comments) the struct header whose typedef documents them; said when the
    fields are bare masks."""
    if header.name in index.mask_only:
        return f"{header.file_path} ({MASK_FIELDS_NOTE})"
    borrowed = STRUCT_FIELDS_NOTE.search(header.description)
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
    for other, instance in address_map(index).get(address, []):
        if other.upper() == name.upper() or any(f["name"] == other for f in found):
            continue
        try:
            answer = _describe_register(index, other, header_instance=instance, join=False)
        except ValueError:
            continue
        if answer["fields"] and answer["name"] not in {f["name"] for f in found}:
            found.append(answer)
    return found


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


def _unknown_name_message(index: ChipIndex, name: str) -> str:
    names = list(index.trm) + [m.name for m in index.header_registers()]
    close = difflib.get_close_matches(name.upper(), list(dict.fromkeys(names)), n=5, cutoff=0.6)
    scope = index.chip + (f" revision {index.revision}" if index.revision else "")
    hint = f"; closest names: {', '.join(close)}" if close else ""
    return f"no register {name!r} on {scope}{hint}"


class UnknownRegister(ValueError):
    """A register name the chip's manual and headers do not have."""


class StoreLacksChip(Exception):
    """The store holds nothing of a chip: whether it has a register is unknown, not "no"."""


def _elsewhere(table: Any, name: str, chip: str, release: str | None = None) -> str:
    """Which other chips' manuals or headers have a register ``name``, and which other ESP-IDF
    releases' headers define it for this chip: a question asked for the wrong chip or release should
    say so. ``name`` is a validated identifier."""
    where = f"doc_type IN ('trm', 'src') AND array_has(symbol_refs, {_quote(name.upper())})"
    rows = _rows(table, where, ["chips", "doc_type", "releases", "release_chips"])
    found = sorted({c for row in rows for c in row["chips"]} - {chip})
    text = f"; it exists on {', '.join(found)}" if found else ""
    if release is not None:
        mine = [r for row in rows if row["doc_type"] == "src" for r in releases_of(row, chip)]
        if others := newest_first(set(mine) - {release}):
            text += (
                f"; the ESP-IDF {', '.join(others)} SoC headers define it for {chip} "
                f"(pass idf_version={others[0]})"
            )
    return text


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
    addresses = address_map(index)
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
        if target % 4 and target not in address_map(index):  # CLIC's byte registers are real
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
            if not other_index.trm and not other_index.macros:
                raise StoreLacksChip(missing_chip(other_chip))
            other = _describe_register(other_index, answer["name"])
        except StoreLacksChip as exc:  # unknown, not absent: the store has nothing of that chip
            answer["compare"] = {"with": label, "present": None, "message": str(exc)}
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
