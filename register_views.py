"""One register seen two ways: the merged manual-and-header view (agreements, disagreements, the
reset value composed from the fields) and the comparison of a register between two chips,
revisions or ESP-IDF releases.
"""

from __future__ import annotations

import re
from typing import Any

from c_expressions import _C_COMMENT, Macro
from chip_vocab import chips, normalize_chip, validate_chip, validate_revision
from chunk_format import CARD_LINE, FIELD_LINE, parameter_regex
from register_bases import _absolute, _fill_instance
from register_index import (
    ChipIndex,
    _find_trm,
    _header_defines,
    _in_revision,
    _pick_header,
    _quote,
    _resolve_revision,
    _rows,
    chip_index,
)
from releases import ReleaseIndex, newest_first, releases_of

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
    columns = ["doc_type", "chips", "releases", "release_sources", "release_chips"]
    for row in _rows(table, "doc_type != 'trm'", columns):
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
        match = CARD_LINE.match(line)
        if match is None or match.group("name") != name:
            continue
        fields: list[tuple[str, ...]] = []
        for rest in lines:
            if not rest.startswith("- "):
                break
            if (item := FIELD_LINE.match(rest)) is not None:
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
    for row in _rows(table, where, ["text", "chips", "revisions", "releases", "release_chips"]):
        card = _card_in_text(row["text"], key) if _in_revision(row, revision) else None
        for series in releases_of(row, chip) if card is not None else []:
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
