"""register_facts.py: the address-map checker and the census, on a real LanceDB table built from
the fixtures, on a deliberately broken copy of them, and over every chip of a real ESP-IDF."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import lancedb
import pytest
from test_registers import _src_rows, _trm_rows

import ingest_source
import register_facts
from schema import arrow_schema
from store import MODEL_ID_KEY, VECTOR_DIM_KEY
from term_stats import write_term_stats


def _store(path: Path, rows: list[dict[str, Any]]) -> Any:
    """A store the CLI can open: zero vectors (the register tool never reads them), model metadata,
    the term statistics every store carries."""
    schema = arrow_schema(4).with_metadata({MODEL_ID_KEY: b"zero-vectors", VECTOR_DIM_KEY: b"4"})
    db = lancedb.connect(path)
    table = db.create_table(
        "chunks", [{**r, "vector": [0.0] * 4, "windows": [[0.0] * 4]} for r in rows], schema=schema
    )
    write_term_stats(db, table)
    return table


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("good")
    _store(path, _trm_rows() + _src_rows())
    return path


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixtures with ESP32-C3's DR_REG_UART_BASE line removed from reg_base.h."""
    rows = []
    for row in _trm_rows() + _src_rows():
        if row["file_path"].endswith("esp32c3/register/soc/reg_base.h"):
            text = "\n".join(line for line in row["text"].splitlines() if "DR_REG_UART_BASE" not in line)
            row = {**row, "text": text}
        rows.append(row)
    path = tmp_path_factory.mktemp("broken")
    _store(path, rows)
    return path


def _edited(tmp_path: Path, edit: tuple[str, str, str]) -> Path:
    """The fixtures with one edit to the rows of one file: (file suffix, text to drop or replace,
    replacement); a line containing the text is dropped when the replacement is empty."""
    suffix, needle, replacement = edit
    rows = []
    for row in _trm_rows() + _src_rows():
        if row["file_path"].endswith(suffix):
            lines = row["text"].splitlines()
            if replacement:
                lines = [line.replace(needle, replacement) for line in lines]
            else:
                lines = [line for line in lines if needle not in line]
            row = {**row, "text": "\n".join(lines)}
        rows.append(row)
    _store(tmp_path, rows)
    return tmp_path


def _table(path: Path) -> Any:
    return lancedb.connect(path).open_table("chunks")


def test_every_fixture_register_answers_at_its_address(good: Path) -> None:
    table = _table(good)
    coverage = register_facts.address_coverage(table, "esp32c3", None)
    # UART: 4 registers x 2 instances (UART2 would land on I2C), AES_KEY_3_REG, AES_MODE_REG,
    # IO_MUX_GPIO0_REG, IO_MUX_GPIO1_REG, IO_MUX_DATE_REG
    assert (coverage.checked, coverage.resolved, coverage.failures) == (13, 13, [])
    for revision in ("mainline", "v1.3"):
        assert register_facts.address_coverage(table, "esp32p4", revision).share == 1.0


def test_address_checker_fails_on_a_broken_fixture(broken: Path) -> None:
    coverage = register_facts.address_coverage(_table(broken), "esp32c3", None)
    assert coverage.share < 1.0
    failed = dict(coverage.failures)
    assert set(failed) == {"UART_FIFO_REG", "UART_CLKDIV_REG", "UART_CONF0_REG", "UART_DATE_REG"}
    # UART_ID_REG is manual-only and loses its base with its siblings: not a header register
    assert "uses DR_REG_UART_BASE, which no esp32c3 header defines" in failed["UART_CLKDIV_REG"]


def test_addresses_cli_exit_status_follows_coverage(good: Path, broken: Path, capsys: Any) -> None:
    assert register_facts.main(["addresses", "--db", str(good), "--chip", "esp32c3"]) == 0
    assert "13/13 header register instances (100.00%)" in capsys.readouterr().out
    assert register_facts.main(["addresses", "--db", str(broken), "--chip", "esp32c3"]) == 2
    out = capsys.readouterr().out
    assert "UART_CLKDIV_REG: " in out and "(100.00%)" not in out.splitlines()[-1]


def test_census_counts_and_report(good: Path, tmp_path: Path) -> None:
    table = _table(good)
    result = register_facts.census(table, "esp32c3", None)
    # header registers: UART_FIFO/CLKDIV/CONF0/DATE, AES_KEY_3, AES_MODE, IO_MUX_GPIO0/GPIO1/DATE; the
    # hand-written AES ones have no field comments but the manual documents them, the IO MUX ones
    # none but io_mux_struct.h does
    assert (result.header_registers, result.header_complete) == (9, 9)
    # manual registers: UART FIFO/CLKDIV/ID/CONF0, AES_KEY_n, AES_MODE; compared where the
    # headers give fields (FIFO, CLKDIV, CONF0); CONF0 disagrees
    assert (result.manual_registers, result.manual_compared, result.manual_agree) == (6, 3, 2)
    assert result.kinds == {
        "reset differs": 1,
        "field renamed": 1,
        "field only in manual": 1,
        "access differs": 1,
        "bits differ": 1,
    }
    report = tmp_path / "census.md"
    assert (
        register_facts.main(["census", "--db", str(good), "--chip", "esp32c3", "--report", str(report)]) == 0
    )
    text = report.read_text()
    assert "| esp32c3 | 9/9 (100.0%) | 0 | 9 (100.0%) | 3/6 | 2/3 (66.7%) |" in text
    assert (
        "- UART_CONF0_REG: field renamed: manual UART_TXFIFO_RST, headers UART_TXFIFO_RESET, bits 18" in text
    )


def test_every_way_a_base_is_missing_upstream_is_resolved_or_explained(good: Path) -> None:
    """The fake esp32h2: each register block lacks its base in the headers in another way."""
    coverage = register_facts.address_coverage(_table(good), "esp32h2", None)
    # 20 registers, I2C's two at two instances each; two addresses are chosen at run time
    assert (coverage.checked, coverage.resolved) == (22, 20)
    assert coverage.resolved_by == {
        "header expression": 8,  # INTPRI, RSA x2, SDMMC, radio x2, the alias, LPPERI_DATE
        "linker instance": 7,  # I2C x2 x2 (I2C0, I2C1), two GPIO_SD (SDM), UHCI (bare DR_REG_UHCI_BASE(i))
        "base renamed": 3,  # DR_REG_LPINTR_BASE, DR_REG_RTCLOCKCALI_BASE at ..0_BASE and ..1_BASE
        "manual memory map": 2,  # DR_REG_MEM_MONITOR_BASE, DR_REG_H264_BASE ("H264 Encoder")
    }
    assert dict(coverage.failures).keys() == {"LPPERI_RNG_DATA_REG", "INTERRUPT_CORE0_CPU_INT_THRESH_REG"}
    assert coverage.failure_kinds() == {"chosen at run time": 2}


@pytest.mark.parametrize(
    ("edit", "register", "kind", "why"),
    [
        (
            ("esp32h2.peripherals.ld", "SDM", ""),
            "GPIO_SIGMADELTA0_REG",
            "instance not in the linker script",
            "gpio_sd_struct.h declares SDM, which esp32h2.peripherals.ld does not PROVIDE",
        ),
        (
            ("esp32h2/register/soc/i2c_struct.h", "extern i2c_dev_t", ""),
            "I2C_CTR_REG",
            "base defined nowhere",
            "uses DR_REG_I2C_BASE, which no esp32h2 header defines; i2c_struct.h declares no instance",
        ),
        (
            (
                "esp32h2/register/soc/reg_base.h",
                "#define DR_REG_LPPERI_BASE ",
                "#define DR_REG_GPIOSD_BASE 0x60091F80\n#define DR_REG_LPPERI_BASE ",
            ),
            "GPIO_SIGMADELTA0_REG",
            "sources disagree",
            "the sources disagree: esp32h2.peripherals.ld PROVIDE(SDM)",
        ),
        (
            ("esp32h2/register/soc/reg_base.h", "DR_REG_LP_INTR_BASE", ""),
            "LPINTR_SW_INT_RAW_REG",
            "base defined nowhere",
            "uses DR_REG_LPINTR_BASE, which no esp32h2 header defines; no lp_intr_struct.h in the store",
        ),
        (
            ("03-System-and-Memory__EN", "MEM_MONITOR", ""),
            "MEM_MONITOR_LOG_SETTING_REG",
            "base defined nowhere",
            "uses DR_REG_MEM_MONITOR_BASE, which no esp32h2 header defines",
        ),
    ],
)
def test_address_checker_fails_when_a_base_source_breaks(
    tmp_path: Path, edit: tuple[str, str, str], register: str, kind: str, why: str, capsys: Any
) -> None:
    broken = _edited(tmp_path, edit)
    coverage = register_facts.address_coverage(_table(broken), "esp32h2", None)
    failed = dict(coverage.failures)
    assert coverage.resolved < 20 and register in failed, coverage.failures
    assert why in failed[register]
    assert register_facts.failure_kind(failed[register]) == kind
    assert (
        register_facts.main(["addresses", "--db", str(broken), "--chip", "esp32h2", "--min-share", "0.9"])
        == 2
    )
    assert "    unresolved: " in capsys.readouterr().out


def test_addresses_cli_reports_where_bases_came_from(good: Path, capsys: Any) -> None:
    assert (
        register_facts.main(["addresses", "--db", str(good), "--chip", "esp32h2", "--min-share", "0.9"]) == 0
    )
    out = capsys.readouterr().out
    assert "bases not in the headers: linker instance 7, base renamed 3, manual memory map 2" in out
    assert "unresolved: chosen at run time 2" in out


def test_census_counts_registers_answered_through_an_alias(good: Path) -> None:
    result = register_facts.census(_table(good), "esp32h2", None)
    # 19 header registers; RSA_M_DASH, SDMMC_CTRL and the INTERRUPT_CORE0 alias answer through another
    assert (result.header_registers, result.header_complete, result.header_by_alias) == (19, 15, 3)
    assert result.header_with_fields == 17  # and IEEE802154_RADIO_CFG_REG's bit ranges
    assert result.gap_kinds == {
        "fields as bit ranges only (bare mask/shift macros upstream): no access, default or reset": 1,
        "fields, but a default the sources leave undefined (x / see fields)": 1,  # GPIO_SIGMADELTA0_REG
        "no field comments upstream; no manual register by name, prefix or address": 1,  # IEEE802154
        "no field comments upstream; address unknown": 1,  # INTERRUPT_CORE0_CPU_INT_THRESH_REG
    }


def test_gap_kind_reads_the_manuals_undefined_bits_as_undefined() -> None:
    field = {"name": "GPIO_STRAPPING", "bits": "15:0", "reset": "xxxxxxxxxxxxxxxx"}
    answer = {"fields": [{"name": "(reserved)", "bits": "31:16", "reset": "0x0"}, field]}
    assert (
        register_facts.gap_kind(answer, True)
        == "fields, but a default the sources leave undefined (x / see fields)"
    )


def test_cli_rejects_an_unknown_chip(good: Path) -> None:
    with pytest.raises(SystemExit, match="valid chips"):
        register_facts.main(["addresses", "--db", str(good), "--chip", "esp33"])


@pytest.mark.corpus
def test_real_headers_every_unresolved_address_is_an_upstream_hole(tmp_path: Path) -> None:
    """Every chip of a real ESP-IDF (IDF_PATH), headers only: each header register answers at its
    address unless its header expression cannot be evaluated, and then the checker says why
    (a base no header defines, a function-like macro used bare). Anything else is our bug."""
    idf = os.environ.get("IDF_PATH")
    if not idf:
        pytest.skip("IDF_PATH is not set (an ESP-IDF checkout)")
    headers, _ = ingest_source.discover_headers(Path(idf))
    rows = [row for h in headers for row in ingest_source.header_rows(h, "v", "c").rows]
    rows += [
        row
        for s in ingest_source.discover_linker_scripts(Path(idf))
        for row in ingest_source.linker_rows(s, "v", "c").rows
    ]
    table = _store(tmp_path, rows)
    upstream = re.compile(r"uses \w+(, which no .* header defines| without arguments)|has no fixed address")
    for chip, revision in register_facts.scopes(list(register_facts.chips())):
        coverage = register_facts.address_coverage(table, chip, revision)
        ours = [(label, why) for label, why in coverage.failures if not upstream.search(why)]
        assert ours == [], f"{coverage.scope}: {ours[:5]}"
        assert coverage.share > 0.85, f"{coverage.scope}: {coverage.share:.1%}"
