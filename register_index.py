"""The per-chip register index: what one chip (at one revision and release) documents in its manual
and defines in its headers, read from the chunk store by exact filters and built once per table
version.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

from c_expressions import _C_COMMENT, _DEFINE_LINE, Macro, evaluate
from chip_vocab import chips, validate_revision
from chunk_format import (
    CARD_LINE,
    FIELD_LINE,
    OFFSET_LIMIT,
    SUMMARY_ROW,
    _field,
    parameter_regex,
    register_blocks,
)
from process_memory import trim
from releases import holds

_BASE_NAME = re.compile(r"DR_REG_\w+_BASE")
_REGISTER_NAME = re.compile(r"_REG(?:_\d+)?$")  # X_REG, X_REG_1; not SET_PERI_REG_MASK
_PROVIDE_LINE = re.compile(r"^\s*PROVIDE\s*\(\s*([A-Za-z_]\w*)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)\s*;")
_MAP_ROW = re.compile(r"^(?P<name>[^|\n]+?)\s*\|\s*(?P<low>0x[0-9A-Fa-f_]+)\s*\|\s*0x[0-9A-Fa-f_]+", re.M)
_LINKER_SCRIPT = ".peripherals.ld"  # components/soc/<chip>/ld/<chip>.peripherals.ld
_MAX_ROWS = 200_000


# ---------------------------------------------------------------- the per-chip index


# What a manual register's answer cites of the chunk that documents it (TrmEntry.row).
CITED_COLUMNS = ("source_doc", "section_path", "file_path", "source_version", "source_commit")


@dataclass
class TrmEntry:
    register: dict[str, Any]
    row: dict[str, Any]


@dataclass
class ChipIndex:
    """What one chip (at one revision) documents and defines, built once per table version."""

    chip: str
    revision: str | None
    trm: dict[str, list[TrmEntry]] = field(default_factory=dict)
    parameterised: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    summary_names: dict[str, str] = field(default_factory=dict)  # summary-table name -> chapter file
    summary_addresses: dict[int, str] = field(default_factory=dict)  # absolute summary address -> chapter
    macros: dict[str, Macro] = field(default_factory=dict)
    header_fields: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # card field lines
    mask_only: set[str] = field(default_factory=set)  # registers whose header fields are bare masks

    memo: dict[str, int | None] = field(default_factory=dict)  # object-like macro values
    address_memo: dict[int, list[tuple[str, int]]] | None = None  # address_map, built on first use
    _bases: dict[str, int] | None = None
    _field_owners: dict[str, list[str]] | None = None
    _base_owners: list[tuple[int, list[str]]] | None = None
    _base_values: list[int] = field(default_factory=list)  # base_owners' addresses, for bisect
    # (chapter, prefix[@base]) -> (votes per (base value, base macro), whether siblings use several bases)
    _chapter_bases: dict[tuple[str, str], tuple[dict[tuple[int, str], int], bool]] = field(
        default_factory=dict
    )
    linker: dict[str, int] = field(default_factory=dict)  # PROVIDE(NAME = value) of the chip's .ld
    linker_file: str | None = None
    memory_map: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # manual's table
    table: Any = None  # the store, for the struct headers' instance declarations read on demand
    release: str | None = None  # the ESP-IDF release whose headers this index reads (None: any)
    _externs: dict[str, list[tuple[str, str]] | None] = field(default_factory=dict)
    _base_sources: dict[str, tuple[BaseSource | None, str]] = field(default_factory=dict)
    _overlay_memos: dict[tuple[str, str, int], dict[str, int | None]] = field(default_factory=dict)
    _source_cache: dict[tuple[Any, ...], Any] = field(
        default_factory=dict
    )  # per missing base, not per register
    _base_keys: list[tuple[str, Macro]] | None = None  # (_base_key, macro) of every *_BASE macro
    _trm_by_chapter: dict[str, list[tuple[str, TrmEntry]]] | None = None
    _spelled: dict[str, list[tuple[re.Pattern[str], str]]] = field(default_factory=dict)
    # instance_addresses per register macro: the address map and the manual's registers both ask
    _instances: dict[Macro, list[tuple[int, int]]] = field(default_factory=dict)

    def missing_headers(self) -> str:
        """What a store without this chip's SoC headers cannot say, and the command that adds them."""
        return (
            f"this store holds no ESP-IDF SoC headers for {self.chip} (reg_base.h and the *_reg.h "
            f"files), so it cannot place an absolute address; a store built with them can: "
            f"uv run just rebuild --chips {self.chip}"
        )

    def header_registers(self) -> list[Macro]:
        """Register macros (``X_REG``, ``X_REG(i)``, ``X_REG_1``), not base, field or accessor macros."""
        return [
            m
            for m in self.macros.values()
            if _REGISTER_NAME.search(m.name)
            and not _is_base_macro(m.name)
            # READ_PERI_REG(addr), IS_DPORT_REG(r) and friends are accessors and predicates
            and not m.body.startswith(("do", "({"))
            and not m.name.startswith(("IS_", "ASSERT_"))
        ]

    def bases(self) -> dict[str, int]:
        """``DR_REG_*_BASE`` -> value, from reg_base.h (and soc.h on older trees)."""
        if self._bases is None:
            self._bases = {
                name: value
                for name in self.macros
                if _BASE_NAME.fullmatch(name)
                and (value := evaluate(name, self.macros, memo=self.memo)) is not None
            }
        return self._bases

    def field_owners(self) -> dict[str, list[str]]:
        """Field name -> the documented registers that have it, built on the first field lookup."""
        if self._field_owners is None:
            self._field_owners = defaultdict(list)
            for register, entries in self.trm.items():
                for field_name in dict.fromkeys(f["name"] for f in entries[0].register["fields"]):
                    self._field_owners[field_name].append(register)
        return self._field_owners

    def add_trm_register(self, register: dict[str, Any], row: dict[str, Any]) -> None:
        """File one manual register block under its name, and a parameterised register's first block
        under its instance pattern too (RMT_CH2CONF0_REG is found as RMT_CHmCONF0_REG (m = 2, 3))."""
        entries = self.trm.setdefault(register["name"], [])
        entries.append(TrmEntry(register, row))
        pattern = parameter_regex(register["name"], register["parameters"])
        if pattern is not None and len(entries) == 1:
            self.parameterised.append((pattern, register["name"]))

    def base_owners(self) -> list[tuple[int, list[str]]]:
        """Peripheral bases in address order, each with every ``DR_REG_*_BASE`` name it has."""
        if self._base_owners is None:
            owners: dict[int, list[str]] = defaultdict(list)
            for name, value in self.bases().items():
                owners[value].append(name)
            self._base_owners = sorted((value, sorted(names)) for value, names in owners.items())
            self._base_values = [value for value, _ in self._base_owners]
        return self._base_owners

    def spelled_patterns(self, chapter: str) -> list[tuple[re.Pattern[str], str]]:
        """The chapter's parameterised registers, letting a number the note gives bare be spelled
        with letters first (``IO_MUX_GPIO0_REG`` for ``IO_MUX_x_REG``). Built on first need: only
        names a register summary lists that matched nothing else get here, and compiling a second
        pattern for every parameterised register made the index build half as slow again."""
        if chapter not in self._spelled:
            self._spelled[chapter] = [
                (pattern, name)
                for name, entry in self.trm_in_chapter(chapter)
                if (pattern := parameter_regex(name, entry.register["parameters"], any_prefix=True))
                is not None
            ]
        return self._spelled[chapter]

    def trm_in_chapter(self, file_path: str) -> list[tuple[str, TrmEntry]]:
        """The manual registers (name, first entry) documented in one chapter file, in index order."""
        if self._trm_by_chapter is None:
            self._trm_by_chapter = defaultdict(list)
            for name, entries in self.trm.items():
                self._trm_by_chapter[entries[0].row["file_path"]].append((name, entries[0]))
        return self._trm_by_chapter.get(file_path, [])

    def owning_base(self, address: int) -> tuple[int, list[str]] | None:
        """The highest base at or below ``address``: the peripheral block it lies in, if any."""
        owners = self.base_owners()
        position = bisect.bisect_right(self._base_values, address)
        return owners[position - 1] if position else None


def _is_base_macro(name: str) -> bool:
    return name.endswith("_BASE") or name.startswith(("DR_REG_", "REG_"))


# the table itself is kept with its index: holding the reference keeps id(table) from being reused
# by another table (another store) while the entry lives
_INDEX_CACHE: OrderedDict[tuple[int, int, str, str | None, str | None], tuple[Any, ChipIndex]] = OrderedDict()
_INDEX_CACHE_LOCK = threading.Lock()
# The indexes a server keeps, least recently used out first: each is ~10 MiB on the full store, so a
# team server asked about every chip stays within a replica's memory budget (docs/team-server.md),
# and a chip asked about again after eviction is rebuilt in 0.1-1.4 s. A compare call holds two.
INDEXES_KEPT = 8


def _rows(table: Any, where: str, columns: list[str]) -> list[dict[str, Any]]:
    return table.search().where(where).select(columns).limit(_MAX_ROWS).to_list()


def _quote(value: str) -> str:
    """A value validated as an identifier/chip/revision; quoting is belt and braces."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
        raise ValueError(f"refusing to filter on {value!r}: only letters, digits, '_', '.', '-' are allowed")
    return "'" + value + "'"


def _quote_path(value: str) -> str:
    """A repository path taken from a stored row, quoted for a filter."""
    if not re.fullmatch(r"[A-Za-z0-9_./\-]+", value):
        raise ValueError(f"refusing to filter on {value!r}: not a plain repository path")
    return "'" + value + "'"


def _in_revision(row: dict[str, Any], revision: str | None) -> bool:
    return revision is None or not row["revisions"] or revision in row["revisions"]


def chip_index(table: Any, chip: str, revision: str | None, release: str | None = None) -> ChipIndex:
    """Parse the chip's TRM registers and header macros once per (table version, chip, revision,
    ESP-IDF release): the headers of one release, the manual of every release."""
    key = (id(table), table.version, chip, revision, release)
    with _INDEX_CACHE_LOCK:
        if key in _INDEX_CACHE:
            _INDEX_CACHE.move_to_end(key)
            return _INDEX_CACHE[key][1]
    index = ChipIndex(chip, revision, table=table, release=release)
    columns = ["text", "chips", "revisions", "source_doc", "section_path", "file_path", "chunk_index"]
    columns += ["source_version", "source_commit"]
    # "Register " is tested here, not in SQL: a LIKE over every text is 5x slower than the fetch
    trm_where = f"doc_type = 'trm' AND array_has(chips, {_quote(chip)})"
    for row in _rows(table, trm_where, columns):
        if not _in_revision(row, revision):
            continue
        if row["section_path"].endswith("Address Mapping"):
            _collect_memory_map(row, index)
        if "Register Summary" in row["section_path"]:
            for name, address in SUMMARY_ROW.findall(row["text"]):
                index.summary_names.setdefault(name, row["file_path"])
                if address and (value := int(address.replace("_", ""), 16)) >= OFFSET_LIMIT:
                    index.summary_addresses.setdefault(value, row["file_path"])
        if "Register " not in row["text"]:
            continue
        # the index keeps only what an answer cites of the row; its text is parsed here and read no more
        cited = {name: row[name] for name in CITED_COLUMNS}
        for register in register_blocks(row["text"]):
            index.add_trm_register(register, cited)
    src_where = (
        f"doc_type = 'src' AND array_has(chips, {_quote(chip)}) AND "
        "(source_doc LIKE '%\\_reg.h' ESCAPE '\\' OR source_doc IN ('soc.h', 'reg_base.h') "
        f"OR source_doc LIKE '%{_LINKER_SCRIPT}')"
    )
    raw_headers: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for row in _rows(table, src_where, [*columns, "symbol_refs", "releases", "release_chips"]):
        if not _in_revision(row, revision) or not holds(row, release, chip):
            continue
        if row["source_doc"].endswith(_LINKER_SCRIPT):
            _collect_linker(row, index)
        else:
            _collect_macros(row, index)
            if "#define" in row["text"]:  # hand-written header text; register cards have no #define
                raw_headers[row["file_path"]].append((row["chunk_index"], row["text"]))
    for file_path, chunks in raw_headers.items():  # a register's masks may run into the next chunk
        _collect_mask_fields(file_path, [text for _, text in sorted(chunks)], index)
    with _INDEX_CACHE_LOCK:
        _INDEX_CACHE[key] = (table, index)
        while len(_INDEX_CACHE) > INDEXES_KEPT:
            _INDEX_CACHE.popitem(last=False)
    trim()  # the chip's rows, read whole, and any index let go are garbage now
    return index


def _collect_macros(row: dict[str, Any], index: ChipIndex) -> None:
    """Register-card lines (``NAME = expr  // desc``), the field lines under them (``- F [3:0] ...``)
    and raw ``#define`` lines of full-text rows. The first definition of a name wins, fields too."""
    revisions = tuple(row["revisions"])
    owner: str | None = None  # the register the following field lines belong to
    for line in row["text"].splitlines():
        if line.startswith("- ") and owner is not None:
            if (field_match := FIELD_LINE.match(line)) is not None:
                index.header_fields[owner].append(_field(field_match))
            continue
        owner = None  # a card's field lines follow it unbroken; "Field macros:" lines are no one's
        match = _DEFINE_LINE.match(line) or CARD_LINE.match(line)
        if match is None:
            continue
        name = match.group("name")
        if name in index.macros:
            continue
        params = match.group("params")
        value = _C_COMMENT.sub("", match.group("value")).strip()
        index.macros[name] = Macro(
            name=name,
            params=tuple(p.strip() for p in params[1:-1].split(",") if p.strip()) if params else None,
            body=value,
            file_path=row["file_path"],
            revisions=revisions,
            description=match.groupdict().get("desc") or "",
        )
        if match.re is CARD_LINE:
            owner = name
            index.header_fields[name] = []


# Hand-written headers (ieee802154_reg.h, 500-odd registers on six chips) give a register's fields
# only as bare mask and shift macros under it, ``X 0x7F`` or ``X (BIT(31))`` with ``X_S 0``: each
# field's name and bit range, with no access, default or description. (A header with ``X_V`` macros
# too is a generated one, read as register cards by ingest_source.py.)
MASK_FIELDS_NOTE = "mask and shift macros: bit ranges only, no access or default upstream"


def _collect_mask_fields(file_path: str, texts: list[str], index: ChipIndex) -> None:
    """Fields from ``X`` / ``X_S`` macros that follow a register ``#define`` in raw header text, for
    registers no card documents; read across one file's chunks in order."""
    owner: str | None = None
    masks: dict[str, int] = {}
    for text in texts:
        for line in text.splitlines():
            match = _DEFINE_LINE.match(line)
            if match is None or match.group("params"):
                continue
            name = match.group("name")
            if _REGISTER_NAME.search(name) and not _is_base_macro(name):
                owner, masks = name, {}
                continue
            value = evaluate(_C_COMMENT.sub("", match.group("value")), {})
            if owner is None or value is None:
                continue
            if not name.endswith("_S") or name[:-2] not in masks:
                masks[name] = value
                continue
            bits = _mask_bits(masks[name[:-2]], value)
            macro = index.macros.get(owner)
            if bits is None or macro is None or macro.file_path != file_path:
                continue
            if owner in index.header_fields and owner not in index.mask_only:
                continue  # a card documents this register (the first definition wins)
            index.mask_only.add(owner)
            fields = index.header_fields.setdefault(owner, [])
            if all(f["name"] != name[:-2] for f in fields):
                fields.append(
                    {"name": name[:-2], "bits": bits, "access": None, "reset": None, "description": ""}
                )


def _mask_bits(mask: int, shift: int) -> str | None:
    """A field's ``high:low`` from its mask and shift. The mask is either the unshifted width (``0xFF``
    with ``_S 16``: bits 23:16) or already shifted (``BIT(31)`` with ``_S 31``; ``0xF0`` with ``_S 4``).
    None when it is no run of ones or passes bit 31."""
    if not 0 <= shift <= 31:
        return None
    if shift > 0 and mask & ((1 << shift) - 1) == 0 and mask >> shift > 0:
        mask >>= shift
    if mask <= 0 or mask & (mask + 1):
        return None
    high = shift + mask.bit_length() - 1
    if high > 31:
        return None
    return f"{high}:{shift}" if high != shift else str(shift)


def _collect_memory_map(row: dict[str, Any], index: ChipIndex) -> None:
    """Rows of the manual's Module/Peripheral Address Mapping table: ``H264 DMA | 0x500A_7000 | ...``.
    Tables of offsets (ESP32-S2 lists UART0 at 0x0000_0000) and the bus-level tables are left out."""
    if "Peripheral" not in row["section_path"].rsplit(" > ", 1)[-1]:
        return
    for match in _MAP_ROW.finditer(row["text"]):
        name, low = match.group("name").strip(" *"), int(match.group("low").replace("_", ""), 16)
        if low >= OFFSET_LIMIT and name and name.lower() != "reserved":
            index.memory_map.append((name, low, row))


def _collect_linker(row: dict[str, Any], index: ChipIndex) -> None:
    """``PROVIDE ( UART0 = 0x60000000 );`` lines: where the linker puts each peripheral instance."""
    index.linker_file = row["file_path"]
    for line in row["text"].splitlines():
        if (match := _PROVIDE_LINE.match(line)) is not None:
            index.linker.setdefault(match.group(1), int(match.group(2), 0))


def _resolve_revision(chip: str, revision: str | None) -> str | None:
    """Chips with several manuals get one explicitly (default: the first, mainline)."""
    published = chips()[chip].revisions
    if revision is not None:
        return validate_revision(revision, chip)
    return published[0] if len(published) > 1 else None


def _find_trm(index: ChipIndex, name: str) -> tuple[TrmEntry, dict[str, str]] | None:
    """The documented register for ``name``: exact, upper-cased, or an instance of a parameterised one.

    The ESP32 manual lists ``IO_MUX_GPIO0_REG`` in its register summary but describes it as
    ``IO_MUX_x_REG (x: 0-19, ...)``: a name the summary lists, or a header register at an address
    the summary lists (``IO_MUX_GPIO1_REG`` where it says ``IO_MUX_U0TXD_REG``), may spell the
    number after letters, and then only a parameterised register of the same chapter answers."""
    for candidate in (name, name.upper()):
        if candidate in index.trm:
            return index.trm[candidate][0], {}
    upper = name.upper()
    found = _instance_in(index, index.parameterised, upper, name)
    if found is not None:
        return found
    chapter = index.summary_names.get(upper)
    if chapter is None and index.summary_addresses and (macro := index.macros.get(upper)) is not None:
        address = evaluate(macro.body, index.macros, memo=index.memo)
        chapter = index.summary_addresses.get(address) if address is not None else None
    return _instance_in(index, index.spelled_patterns(chapter), upper, name) if chapter else None


def _instance_in(
    index: ChipIndex, patterns: list[tuple[re.Pattern[str], str]], upper: str, name: str
) -> tuple[TrmEntry, dict[str, str]] | None:
    """The first parameterised register of ``patterns`` that ``name`` is an in-range instance of."""
    for pattern, documented in patterns:
        match = pattern.match(upper) or pattern.match(name)
        if match is None:
            continue
        entry = index.trm[documented][0]
        values = {k.removeprefix("p_"): v for k, v in match.groupdict().items()}
        ranges = entry.register["parameters"]
        if all(
            ranges.get(letter) is None or ranges[letter].holds(int(value)) for letter, value in values.items()
        ):
            return entry, values
    return None


def _field_owner(index: ChipIndex, name: str) -> str | None:
    """The documented register that has a field called ``name``, if exactly one does."""
    owners = index.field_owners().get(name.upper(), [])
    return owners[0] if len(owners) == 1 else None


def _header_defines(index: ChipIndex, name: str, documented: str | None) -> list[Macro]:
    """Header macros for the register: the exact name, the documented name, or the instance's family."""
    found: list[Macro] = []
    for candidate in dict.fromkeys(c for c in (name, name.upper(), documented) if c):  # GPIO_cali_conf_REG
        if candidate in index.macros:
            found.append(index.macros[candidate])
    if not found and documented:
        pattern = parameter_regex(documented, index.trm[documented][0].register["parameters"])
        if pattern is not None:
            found += [m for n, m in index.macros.items() if pattern.match(n)][:8]
    return found


def _pick_header(
    index: ChipIndex, name: str, hit: tuple[TrmEntry, dict[str, str]] | None, defines: list[Macro]
) -> tuple[list[Macro], Macro | None]:
    """The defines of this very register, and the one whose header card gives its fields.

    Only a define of this very register gives its address and fields; a sibling instance
    (AES_KEY_3_REG when AES_KEY_0_REG is asked) is listed in header_defines, nothing more."""
    documented = hit[0].register["name"] if hit else None
    exact = [
        m for m in defines if m.name in (name, name.upper(), documented if not (hit and hit[1]) else None)
    ]
    header = next((m for m in exact if m.name in index.header_fields), None)
    if header is None and hit is not None and not hit[1]:  # the manual's own name, e.g. LEDC_CHn_CONF0_REG
        header = next((m for m in defines if m.name in index.header_fields), None)
    return exact, header


# ---------------------------------------------------------------- bases the headers leave undefined


@dataclass(frozen=True)
class BaseSource:
    """Where a base the register headers use but do not define comes from.

    ``kind`` is ``linker instance`` (the companion ``*_struct.h`` declares the instance, e.g.
    ``extern i2c_dev_t I2C0;``, and the chip's ``.peripherals.ld`` PROVIDEs its address) or
    ``base renamed`` (a header defines the same base under a name that differs only by
    underscores, a ``DR_``/``REG_``/``SOC_`` prefix or an instance number: DR_REG_LPINTR_BASE ->
    DR_REG_LP_INTR_BASE). ``instances`` are (label, value, definition body): several for a
    peripheral with several instances (I2C0, I2C1), each a place the header's registers exist.
    ``params``: the base is used as a function-like macro (``DR_REG_USB_BASE(i)``)."""

    name: str
    params: tuple[str, ...] | None
    kind: str
    instances: tuple[tuple[str, int, str], ...]
    origin: str  # the sentence saying where the base comes from
    file_path: str  # the file giving the value (.ld or header)
    agrees: tuple[str, ...] = ()  # other sources giving the same value

    def explain(self, instance: int = 0) -> str:
        label, value, _ = self.instances[instance]
        where = f" (instance {label})" if len(self.instances) > 1 else ""
        agrees = f"; {', '.join(self.agrees)} agree" if self.agrees else ""
        return f"{self.name} = 0x{value:08X}{where}: {self.origin}{agrees}"

    def as_json(self, instance: int = 0) -> dict[str, Any]:
        label, value, _ = self.instances[instance]
        return {
            "macro": self.name,
            "value": f"0x{value:08X}",
            "instance": label,
            "kind": self.kind,
            "source": self.origin,
            "file_path": self.file_path,
            "agrees_with": list(self.agrees),
        }

    def index_of(self, number: int) -> int | None:
        """The instance a parameter value selects: the one whose label ends in that number
        (``DR_REG_USB_BASE(1)`` -> USB_OTG_FS_CORE1), or the only one at 0."""
        if len(self.instances) == 1:
            return 0 if number == 0 else None
        for position, (label, _, _) in enumerate(self.instances):
            digits = re.search(r"(\d+)$", label)
            if digits is not None and int(digits.group(1)) == number:
                return position
        return None


def missing_chip(chip: str) -> str:
    """What a store holding nothing of ``chip`` cannot say, and the command that adds it."""
    return (
        f"this store holds neither the manual nor the SoC headers of {chip}, so it cannot say "
        f"whether {chip} has this register; a store built with it can: uv run just rebuild --chips {chip}"
    )
