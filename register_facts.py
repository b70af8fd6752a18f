"""Audit the register tool over a whole store: does every register answer, at its address, with
fields and a reset, and where do the manual and the headers disagree?

    uv run register_facts.py addresses [--db URI] [--chip esp32c3 ...] [--min-share 1.0]
    uv run register_facts.py census [--db URI] [--chip ...] [--report register_census.md]

``addresses`` walks every register macro of every chip's headers (each real instance of a
parameterised one) through ``lookup_register(address=...)`` and reports, per chip and revision,
how many come back as themselves; exit 2 below ``--min-share``. ``census`` asks for every header
register by name (the share answering with fields and a reset value) and for every manual
register (the share whose layout agrees with the headers), and writes every disagreement to a
Markdown report a person can read. Both drive the same code path as the MCP tool.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

import register_bases
import register_index
import register_views
import registers
from chip_vocab import chips, validate_chip
from store import StoreError, open_store, resolve_db_uri


@dataclass
class Coverage:
    """Address-map coverage of one chip (at one revision)."""

    scope: str
    checked: int = 0
    resolved: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (register[instance], why)
    not_memory_mapped: list[str] = field(default_factory=list)  # analog-I2C ids such as I2C_DIG_REG
    resolved_by: Counter[str] = field(default_factory=Counter)  # where the base of an answer came from

    def failure_kinds(self) -> Counter[str]:
        """The failures by cause, as the lookup words it."""
        return Counter(failure_kind(why) for _, why in self.failures)

    @property
    def share(self) -> float:
        return self.resolved / self.checked if self.checked else 1.0


FAILURE_KINDS = (
    ("has no fixed address", "chosen at run time"),
    ("the sources disagree", "sources disagree"),
    ("does not PROVIDE", "instance not in the linker script"),
    ("declares no instance", "base defined nowhere"),
    ("declares an instance", "base defined nowhere"),
    ("without arguments", "function-like base used bare"),
    ("which no", "base defined nowhere"),
)


def failure_kind(why: str) -> str:
    """A failure's class: an address chosen at run time, a base no source gives, ..."""
    return next((kind for needle, kind in FAILURE_KINDS if needle in why), "other")


def resolution_kind(answer: dict[str, Any]) -> str:
    """Where an answered address's base came from."""
    if "base_from" in answer:
        return str(answer["base_from"]["kind"])
    if str(answer.get("absolute_from", "")).startswith("documented offset"):
        return "manual offset + chapter base"
    return "header expression"


def scopes(chip_ids: list[str]) -> list[tuple[str, str | None]]:
    """(chip, revision) pairs to audit: one per chip, one per revision where a chip has several."""
    out: list[tuple[str, str | None]] = []
    for chip in chip_ids:
        published = chips()[chip].revisions
        out += [(chip, rev) for rev in published] if len(published) > 1 else [(chip, None)]
    return out


def _label(chip: str, revision: str | None) -> str:
    return chip + (f" {revision}" if revision else "")


def address_coverage(table: Any, chip: str, revision: str | None, release: str | None = None) -> Coverage:
    """Every header register instance, looked up by its own address, must answer with its name
    (or list it among the registers sharing that address). A register whose header expression
    cannot be evaluated is looked up by name first and must then answer at the address it gives.
    ``release``: the ESP-IDF release whose headers are walked (a store may hold several)."""
    index = register_index.chip_index(table, chip, revision, release)
    coverage = Coverage(_label(chip, revision))
    for macro in sorted(index.header_registers(), key=lambda m: m.name):
        instances = register_bases.instance_addresses(index, macro)
        if not instances:
            try:
                answer = registers.lookup_register(
                    table, chip, name=macro.name, revision=revision, release=release
                )
            except ValueError as error:
                coverage.checked += 1
                coverage.failures.append((macro.name, str(error)))
                continue
            if answer["address_absolute"] is None:
                coverage.checked += 1
                coverage.failures.append(
                    (macro.name, f"{macro.name} = {macro.body}: {answer['absolute_from']}")
                )
                continue
            instances = [(0, int(answer["address_absolute"], 16))]
        for instance, address in instances:
            label = (
                register_bases.instance_label(index, macro, instance)
                if macro.params or instance
                else macro.name
            )
            if index.owning_base(address) is None:  # 0x6D: a register id on the analog I2C bus
                coverage.not_memory_mapped.append(label)
                continue
            coverage.checked += 1
            try:
                answer = registers.lookup_register(
                    table, chip, address=address, revision=revision, release=release
                )
            except ValueError as error:
                coverage.failures.append((label, str(error)))
                continue
            names = {n.upper() for n in (answer["name"], *answer.get("also_at_this_address", []))}
            if macro.name.upper() in names:
                coverage.resolved += 1
                own = answer if answer["name"].upper() == macro.name.upper() else None
                if own is None:  # another name answered: ask for this one to see where its base came from
                    own = registers.lookup_register(
                        table, chip, name=macro.name, revision=revision, release=release
                    )
                coverage.resolved_by[resolution_kind(own)] += 1
            else:
                coverage.failures.append((label, f"0x{address:08X} answers {answer['name']}"))
    return coverage


@dataclass
class Census:
    """Per chip: header registers answering with fields and reset; manual registers agreeing."""

    scope: str
    header_registers: int = 0
    header_complete: int = 0
    header_with_fields: int = 0  # fields at least (bit ranges), with or without a reset
    header_gaps: list[tuple[str, str]] = field(default_factory=list)
    gap_kinds: Counter[str] = field(default_factory=Counter)
    header_by_alias: int = 0  # complete through another register at the same place (an alias)
    manual_registers: int = 0
    manual_compared: int = 0  # manual registers the headers also describe field by field
    manual_agree: int = 0
    manual_unanswered: list[tuple[str, str]] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    disagreements: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def census(table: Any, chip: str, revision: str | None, release: str | None = None) -> Census:
    index = register_index.chip_index(table, chip, revision, release)
    result = Census(_label(chip, revision))
    for macro in sorted(index.header_registers(), key=lambda m: m.name):
        result.header_registers += 1
        try:
            answer = registers.lookup_register(
                table, chip, name=macro.name, revision=revision, release=release
            )
        except ValueError as error:
            result.header_gaps.append((macro.name, str(error)))
            continue
        result.header_with_fields += bool(answer["fields"])
        if answer["fields"] and answer["reset"] is not None:
            result.header_complete += 1
            result.header_by_alias += "same_register_as" in answer
            continue
        why = answer.get("note", "no fields") if not answer["fields"] else answer["reset_from"]
        result.header_gaps.append((macro.name, why))
        result.gap_kinds[gap_kind(answer, bool(index.trm))] += 1
    for name in sorted(index.trm):
        result.manual_registers += 1
        try:
            answer = registers.lookup_register(
                table, chip, name=_first_instance(index, name), revision=revision, release=release
            )
        except ValueError as error:  # a manual "register" named clicintattr[i] is no identifier
            result.manual_unanswered.append((name, str(error)))
            continue
        if answer["sources"][register_views.HEADERS] is None:
            continue
        result.manual_compared += 1
        if not answer["disagreements"]:
            result.manual_agree += 1
        for item in answer["disagreements"]:
            result.kinds[item["kind"]] += 1
            result.disagreements.append((answer["name"], item))
    return result


def gap_kind(answer: dict[str, Any], has_manual: bool) -> str:
    """Why a header register has no fields or no reset, in the census's classes."""
    if answer["fields"]:
        if register_index.MASK_FIELDS_NOTE in str(answer.get("sources", {}).get(register_views.HEADERS)):
            return "fields as bit ranges only (bare mask/shift macros upstream): no access, default or reset"
        if any(_undefined(f["reset"]) or f["bits"] == "?" for f in answer["fields"]):
            return "fields, but a default the sources leave undefined (x / see fields)"
        return "other"
    note = str(answer.get("note", ""))
    if "several registers with fields share" in note:
        return "no field comments upstream; several registers share its address"
    if "address is unknown" in note:
        return "no field comments upstream; address unknown"
    if not has_manual:
        return "no field comments upstream; no manual for the chip"
    return "no field comments upstream; no manual register by name, prefix or address"


def _undefined(reset: str | None) -> bool:
    """``x`` (headers) or one ``x`` per bit (the manual's ``xxxxxxxx``): a default left undefined."""
    return reset is None or re.fullmatch(r"[xX]+", reset) is not None


def _first_instance(index: register_index.ChipIndex, name: str) -> str:
    """A parameterised manual register is compared at its first instance the headers define."""
    instances = register_bases.manual_instances(index.trm[name][0].register)
    defined = [n for n, _ in instances if n in index.macros]
    return defined[0] if defined else name


def render_report(results: list[Census]) -> str:
    """The census as Markdown: a summary table, the disagreement classes, then every disagreement."""
    lines = [
        "# Register census: headers vs manual",
        "",
        "| chip | header registers with fields + reset | ... of them through an alias | with fields at "
        "least | manual registers compared | agree with headers |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        complete = f"{r.header_complete}/{r.header_registers} ({_pct(r.header_complete, r.header_registers)})"
        with_fields = f"{r.header_with_fields} ({_pct(r.header_with_fields, r.header_registers)})"
        agree = f"{r.manual_agree}/{r.manual_compared} ({_pct(r.manual_agree, r.manual_compared)})"
        compared = f"{r.manual_compared}/{r.manual_registers}"
        lines.append(
            f"| {r.scope} | {complete} | {r.header_by_alias} | {with_fields} | {compared} | {agree} |"
        )
    totals: Counter[str] = Counter()
    for r in results:
        totals.update(r.kinds)
    lines += [
        "",
        "## Disagreement classes",
        "",
        "| class | " + " | ".join(r.scope for r in results) + " | all |",
    ]
    lines.append("|---" * (len(results) + 2) + "|")
    for kind, total in totals.most_common():
        lines.append(f"| {kind} | " + " | ".join(str(r.kinds[kind]) for r in results) + f" | {total} |")
    gaps: Counter[str] = Counter()
    for r in results:
        gaps.update(r.gap_kinds)
    lines += ["", "## Header registers without fields or reset, by cause", ""]
    lines += [
        "| cause | " + " | ".join(r.scope for r in results) + " | all |",
        "|---" * (len(results) + 2) + "|",
    ]
    for kind, total in gaps.most_common():
        lines.append(f"| {kind} | " + " | ".join(str(r.gap_kinds[kind]) for r in results) + f" | {total} |")
    for r in results:
        lines += ["", f"## {r.scope}: disagreements ({len(r.disagreements)})", ""]
        for register, item in r.disagreements:
            details = ", ".join(f"{k} {v}" for k, v in item.items() if k not in ("kind", "note"))
            lines.append(f"- {register}: {item['kind']}: {details}")
        lines += ["", f"### {r.scope}: header registers without fields or reset ({len(r.header_gaps)})", ""]
        lines += [f"- {name}: {why}" for name, why in r.header_gaps]
        if r.manual_unanswered:
            lines += ["", f"### {r.scope}: manual registers the tool cannot answer by name", ""]
            lines += [f"- {name}: {why}" for name, why in r.manual_unanswered]
    return "\n".join(lines) + "\n"


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


# ---------------------------------------------------------------- CLI


def _open(db: str | None) -> Any:
    try:
        return open_store(resolve_db_uri(db))
    except StoreError as error:
        raise SystemExit(f"error: {error}") from error


def _chips(names: list[str] | None) -> list[str]:
    try:
        return [validate_chip(n) for n in names] if names else list(chips())
    except ValueError as error:
        raise SystemExit(f"error: {error}") from error


def _cmd_addresses(args: argparse.Namespace) -> int:
    table = _open(args.db)
    default = register_views.held_releases(table).default
    results = [
        address_coverage(table, c, r, default(c))
        for c, r in tqdm(scopes(_chips(args.chip)), desc="address map")
    ]
    for cov in results:
        print(
            f"{cov.scope:18s} {cov.resolved:6d}/{cov.checked:6d} {cov.share:7.2%}"
            f"  ({len(cov.not_memory_mapped)} not memory-mapped)"
        )
        by = ", ".join(f"{k} {v}" for k, v in cov.resolved_by.most_common() if k != "header expression")
        if by:
            print(f"    bases not in the headers: {by}")
        if cov.failures:
            print("    unresolved: " + ", ".join(f"{k} {v}" for k, v in cov.failure_kinds().most_common()))
        for label, why in cov.failures[: args.show]:
            print(f"    {label}: {why}")
    checked = sum(c.checked for c in results)
    resolved = sum(c.resolved for c in results)
    share = resolved / checked if checked else 1.0
    print(
        f"address map: {resolved}/{checked} header register instances ({share:.2%}) answer at their address"
    )
    return 0 if share >= args.min_share else 2


def _cmd_census(args: argparse.Namespace) -> int:
    table = _open(args.db)
    default = register_views.held_releases(table).default
    results = [census(table, c, r, default(c)) for c, r in tqdm(scopes(_chips(args.chip)), desc="census")]
    for r in results:
        print(
            f"{r.scope:18s} header fields+reset {r.header_complete:5d}/{r.header_registers:5d} "
            f"({_pct(r.header_complete, r.header_registers)}), fields {r.header_with_fields:5d}; "
            f"manual agrees {r.manual_agree:5d}/{r.manual_compared:5d} "
            f"({_pct(r.manual_agree, r.manual_compared)})"
        )
    Path(args.report).write_text(render_report(results), encoding="utf-8")
    complete = sum(r.header_complete for r in results)
    total = sum(r.header_registers for r in results)
    with_fields = sum(r.header_with_fields for r in results)
    print(
        f"census: {complete}/{total} header registers answer with fields and reset, {with_fields} with "
        f"fields; report -> {args.report}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("addresses", "census"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--db", help="LanceDB URI (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
        cmd.add_argument("--chip", action="append", help="limit to this chip (repeatable)")
    addresses, census_cmd = sub.choices["addresses"], sub.choices["census"]
    addresses.add_argument("--min-share", type=float, default=1.0, help="exit 2 below this share")
    addresses.add_argument("--show", type=int, default=10, help="failures to print per chip")
    census_cmd.add_argument("--report", default="register_census.md", help="Markdown report to write")
    args = parser.parse_args(argv)
    return _cmd_addresses(args) if args.command == "addresses" else _cmd_census(args)


if __name__ == "__main__":
    sys.exit(main())
